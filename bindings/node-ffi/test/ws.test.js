'use strict';
// WebSocket endpoints through the `ws` client package, both backends.
const { describe, test } = require('node:test');
const assert = require('node:assert');
const WS = require('ws');
const { BACKENDS, serve, hasWebSocket } = require('./helpers');

function open(url) {
  return new Promise((resolve, reject) => {
    const c = new WS(url);
    const inbox = [];
    const waiters = [];
    c.on('message', (data, isBinary) => {
      const m = { data: isBinary ? data : data.toString(), isBinary };
      const w = waiters.shift();
      if (w) w(m); else inbox.push(m);
    });
    c.next = () => (inbox.length ? Promise.resolve(inbox.shift()) : new Promise((r) => waiters.push(r)));
    c.closed = new Promise((r) => c.on('close', (code, reason) => r({ code, reason: reason.toString() })));
    c.on('open', () => resolve(c));
    c.on('error', reject);
  });
}

for (const backend of BACKENDS) {
  describe(`websocket (${backend})`, { timeout: 60000, skip: !hasWebSocket(backend) && 'library without WebSocket' }, () => {
    test('open, text and binary echo, server close', async (t) => {
      const log = [];
      let closed;
      const serverClosed = new Promise((r) => { closed = r; });
      const { base } = await serve(t, backend, {}, (srv) => {
        srv.ws('/ws/:room', {
          open(ws, req) { ws.data.room = req.params.room; log.push(`open ${req.params.room} ${req.querystring}`); ws.send(`hello ${ws.data.room}`); },
          message(ws, data, isBinary) {
            if (data === 'bye') { ws.close(4000, 'asked'); return; }
            ws.send(isBinary ? Buffer.concat([Buffer.from([0xff]), data]) : `echo:${data}`);
          },
          close(ws, code, reason) { closed({ code, reason, state: ws.readyState }); },
        });
      });
      const c = await open(`${base.replace('http', 'ws')}/ws/lobby?x=1`);
      assert.deepStrictEqual(await c.next(), { data: 'hello lobby', isBinary: false });
      c.send('héllo');
      assert.deepStrictEqual(await c.next(), { data: 'echo:héllo', isBinary: false });
      c.send(Buffer.from([1, 2, 3]));
      const bin = await c.next();
      assert.strictEqual(bin.isBinary, true);
      assert.deepStrictEqual([...bin.data], [0xff, 1, 2, 3]);
      const big = 'x'.repeat(200000);
      c.send(big);
      assert.strictEqual((await c.next()).data, `echo:${big}`);
      c.send('bye');
      assert.deepStrictEqual(await c.closed, { code: 4000, reason: 'asked' });
      const sc = await serverClosed;
      assert.strictEqual(sc.state, 3);
      assert.deepStrictEqual(log, ['open lobby x=1']);
    });

    test('client close and broadcast', async (t) => {
      const sockets = new Set();
      let closes = 0;
      const { srv, base } = await serve(t, backend, {}, (s) => {
        s.ws('/chat', {
          open(ws) { sockets.add(ws); },
          message(ws, data) { s.broadcast('/chat', `all:${data}`); },
          close(ws, code) { sockets.delete(ws); if (code === 1000) closes++; },
        });
      });
      const url = `${base.replace('http', 'ws')}/chat`;
      const a = await open(url), b = await open(url);
      while (sockets.size < 2) await new Promise((r) => setTimeout(r, 5));
      a.send('hi');
      assert.strictEqual((await a.next()).data, 'all:hi');
      assert.strictEqual((await b.next()).data, 'all:hi');
      a.close(1000);
      b.close(1000);
      await a.closed;
      await b.closed;
      while (closes < 2) await new Promise((r) => setTimeout(r, 5));
      assert.strictEqual(sockets.size, 0);
      assert.throws(() => srv.broadcast('/nope', 'x'), { code: 'NSV_ENOTFOUND' });
    });

    test('bad input: wrong types; a send to a closed socket is a no-op', async (t) => {
      let saved;
      const errors = {};
      const { base } = await serve(t, backend, {}, (srv) => {
        srv.ws('/ws', {
          open(ws) {
            saved = ws;
            try { ws.send(42); } catch (e) { errors.type = e; }
            try { ws.close('x'); } catch (e) { errors.code = e; }
          },
        });
      });
      const c = await open(`${base.replace('http', 'ws')}/ws`);
      c.close();
      await c.closed;
      while (saved.readyState !== 3) await new Promise((r) => setTimeout(r, 5));
      assert.strictEqual(errors.type.code, 'ERR_INVALID_ARG_TYPE');
      assert.strictEqual(errors.code.code, 'ERR_INVALID_ARG_TYPE');
      // A send to a closed peer is dropped quietly (as in the ws package);
      // only its callback hears of it.
      assert.doesNotThrow(() => saved.send('late'));
      const err = await new Promise((r) => saved.send('late', r));
      assert.strictEqual(err.code, 'NSV_ESTALE');
      assert.match(err.message, /readyState 3 \(CLOSED\)/);
      assert.doesNotThrow(() => saved.ping());
      assert.doesNotThrow(() => saved.close());
      assert.strictEqual(saved.bufferedAmount, 0);
    });
  });
}
