'use strict';
// WebSocket sends on the (sharded) server: bufferedAmount answers, and a
// send to a peer that is closing or gone is a no-op, also before its close
// event was processed, so a broadcast loop never fails its sender.
const { describe, test } = require('node:test');
const assert = require('node:assert');
const WS = require('ws');
const { BACKENDS, serve, hasWebSocket } = require('./helpers');

function open(url) {
  return new Promise((resolve, reject) => {
    const c = new WS(url);
    const inbox = [];
    const waiters = []; // [resolve, reject]
    let gone = null;
    c.on('message', (data, isBinary) => {
      const m = isBinary ? data : data.toString();
      const w = waiters.shift();
      if (w) w[0](m); else inbox.push(m);
    });
    c.next = () => {
      if (inbox.length) return Promise.resolve(inbox.shift());
      if (gone) return Promise.reject(gone);
      return new Promise((r, j) => waiters.push([r, j]));
    };
    // A message awaited on a connection that closes fails at once.
    c.closed = new Promise((r) => c.on('close', (code, reason) => {
      gone = new Error(`closed: ${code} ${reason}`);
      for (const w of waiters.splice(0)) w[1](gone);
      r({ code, reason: reason.toString() });
    }));
    c.on('open', () => resolve(c));
    c.on('error', reject);
  });
}

const tick = () => new Promise((r) => setTimeout(r, 5));

// Sleeps the main thread (the library's workers keep running) until cond()
// holds, at most 2000 x 2 ms.
function blockUntil(cond) {
  const cell = new Int32Array(new SharedArrayBuffer(4));
  for (let i = 0; i < 2000; i++) {
    if (cond()) return true;
    Atomics.wait(cell, 0, 0, 2);
  }
  return false;
}

for (const backend of BACKENDS) {
  describe(`websocket sends (${backend})`, { timeout: 30000, skip: !hasWebSocket(backend) && 'library without WebSocket' }, () => {
    test('bufferedAmount counts what send() queued, at once, and falls back to 0', async (t) => {
      let sock;
      const seen = [];
      const { srv, base } = await serve(t, backend, {}, (s) => {
        s.ws('/ws', {
          open(ws) { sock = ws; },
          message(ws, data) {
            if (data !== 'go') return;
            seen.push(ws.bufferedAmount);
            ws.send(Buffer.alloc(300000, 1));
            seen.push(ws.bufferedAmount);
            ws.send('abc');
            seen.push(ws.bufferedAmount);
          },
        });
      });
      assert.strictEqual(srv.sharded, true);
      const c = await open(`${base.replace('http', 'ws')}/ws`);
      c.send('go');
      assert.strictEqual((await c.next()).length, 300000);
      assert.strictEqual(await c.next(), 'abc');
      assert.deepStrictEqual(seen, [0, 300000, 300003]);
      for (let i = 0; i < 2000 && sock.bufferedAmount !== 0; i++) await tick();
      assert.strictEqual(sock.bufferedAmount, 0);
      c.close();
      await c.closed;
    });

    test('a sender paced by bufferedAmount delivers every message', async (t) => {
      const N = 64, SIZE = 65536, LIMIT = 4 * SIZE;
      let peak = 0;
      const { base } = await serve(t, backend, {}, (s) => {
        s.ws('/ws', {
          async message(ws) {
            for (let i = 0; i < N; i++) {
              for (let k = 0; k < 4000 && ws.bufferedAmount > LIMIT; k++) await new Promise((r) => setImmediate(r));
              ws.send(Buffer.alloc(SIZE, i));
              peak = Math.max(peak, ws.bufferedAmount);
            }
          },
        });
      });
      const c = await open(`${base.replace('http', 'ws')}/ws`);
      c.send('go');
      for (let i = 0; i < N; i++) {
        const m = await c.next();
        assert.strictEqual(m.length, SIZE);
        assert.strictEqual(m[0], i);
      }
      assert.ok(peak > 0 && peak <= LIMIT + SIZE, `peak ${peak}`);
      c.close();
      await c.closed;
    });

    test('a broadcast loop reaching a peer whose close is not processed yet: no throw, the sender stays open', async (t) => {
      const sockets = new Map();
      const closes = [];
      const report = {};
      let srvRef;
      const { srv, base } = await serve(t, backend, {}, (s) => {
        srvRef = s;
        s.ws('/room', {
          open(ws, req) { ws.data.name = req.querystring; sockets.set(ws.data.name, ws); },
          message(ws, data) {
            if (data === 'kick') {
              const b = sockets.get('b');
              srvRef.closeConnection(b.id); // the library closes b; its CLOSE event waits behind this handler
              report.gone = blockUntil(() => !srvRef.wakeup(b.id, Buffer.alloc(0)));
              report.stateBefore = b.readyState;
            }
            for (const peer of sockets.values()) {
              peer.send(`all:${data}`, (err) => { if (peer.data.name === 'b') report.cbErr = err; });
            }
            if (data === 'kick') report.stateAfter = sockets.get('b').readyState;
          },
          close(ws, code) { sockets.delete(ws.data.name); closes.push([ws.data.name, code, ws.readyState]); },
        });
      });
      srv.on('wakeup', () => {});
      const url = `${base.replace('http', 'ws')}/room`;
      const a = await open(`${url}?a`), b = await open(`${url}?b`);
      for (let i = 0; i < 2000 && sockets.size < 2; i++) await tick();
      a.send('hi');
      assert.strictEqual(await a.next(), 'all:hi');
      assert.strictEqual(await b.next(), 'all:hi');
      a.send('kick');
      assert.strictEqual(await a.next(), 'all:kick');
      await b.closed;
      for (let i = 0; i < 2000 && closes.length < 1; i++) await tick();
      assert.strictEqual(report.gone, true);
      assert.strictEqual(report.stateBefore, 1); // OPEN: the close event had not come yet
      assert.strictEqual(report.stateAfter, 2); // CLOSING once the library refused the send
      assert.ok(report.cbErr && ['NSV_ESTALE', 'NSV_ESTATE'].includes(report.cbErr.code), String(report.cbErr));
      assert.deepStrictEqual(closes, [['b', 1006, 3]]);
      // The sender was not closed with 1011: it still talks.
      a.send('still');
      assert.strictEqual(await a.next(), 'all:still');
      a.close(1000);
      assert.strictEqual((await a.closed).code, 1000);
    });

    test('after close(): sends and pings are dropped, cb hears NSV_ESTATE; a bad close code or reason throws and keeps it open', async (t) => {
      const out = {};
      const { base } = await serve(t, backend, {}, (s) => {
        s.ws('/ws', {
          open(ws) {
            assert.throws(() => ws.close(1005), { code: 'NSV_EINVAL' });
            assert.throws(() => ws.close(1000, 'é'.repeat(62)), { code: 'NSV_EINVAL' });
            out.afterBadClose = ws.readyState;
            ws.send('before');
            ws.close(4001, 'done');
            out.afterClose = ws.readyState;
            ws.send('after', (err) => { out.err = err; });
            ws.ping();
            assert.throws(() => ws.ping('x'.repeat(126)), { code: 'NSV_ETOOBIG' });
            ws.close(4002);
          },
        });
      });
      const c = await open(`${base.replace('http', 'ws')}/ws`);
      assert.strictEqual(await c.next(), 'before');
      assert.deepStrictEqual(await c.closed, { code: 4001, reason: 'done' });
      assert.strictEqual(out.afterBadClose, 1);
      assert.strictEqual(out.afterClose, 2);
      assert.strictEqual(out.err.code, 'NSV_ESTATE');
      assert.match(out.err.message, /readyState 2 \(CLOSING\)/);
    });
  });
}
