'use strict';
// Header safety on every path that builds response headers (res.setHeader,
// writeHead with an object and with a flat array, sendFile's headers, the
// low-level srv.reply with an object and with an array): an injection
// attempt throws TypeError before anything is sent, read back by curl.
// The late-reply rule: answering a client that left is a no-op (false, no
// exception) and the objects say so. Library timers.
const { describe, test } = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const http = require('node:http');
const { execFile } = require('node:child_process');
const { promisify } = require('node:util');
const { once } = require('node:events');
const { serve, BACKENDS } = require('./helpers');

const run = promisify(execFile);
const EVIL = 'a\r\nSet-Cookie: pwned=1';

async function curlHead(url) {
  const r = await run('curl', ['-sS', '-i', '--max-time', '10', url]);
  return r.stdout;
}

for (const backend of BACKENDS) {
  describe(`header safety (${backend})`, () => {
    test('every header path refuses CR/LF, and the client never sees the injected header', async (t) => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nsv-node-hdr-'));
      t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
      fs.writeFileSync(path.join(dir, 'f.txt'), 'file body');
      const seen = {};
      const attempt = (name, fn) => {
        try { fn(); seen[name] = 'accepted'; } catch (e) { seen[name] = `${e.name}:${e.code}`; }
      };
      const { srv, base } = await serve(t, backend, {}, (s) => {
        s.get('/set', (req, res) => { attempt('set', () => res.setHeader('X-Echo', EVIL)); res.end('ok'); });
        s.get('/head-obj', (req, res) => { attempt('headObj', () => res.writeHead(200, { 'X-Echo': EVIL })); res.end('ok'); });
        s.get('/head-arr', (req, res) => { attempt('headArr', () => res.writeHead(200, ['X-Echo', EVIL])); res.end('ok'); });
        s.get('/name', (req, res) => { attempt('name', () => res.setHeader('X-A\r\nSet-Cookie', 'v')); res.end('ok'); });
        s.get('/file', (req, res) => { attempt('file', () => res.sendFile(path.join(dir, 'f.txt'), { headers: { 'X-Echo': EVIL } })); if (!res.writableEnded) res.end('ok'); });
        s.get('/reply-obj', (req, res) => {
          attempt('replyObj', () => s.reply(req.conn, 200, { 'X-Echo': EVIL }, 'x'));
          s.reply(req.conn, 200, { 'X-Fine': 'yes' }, 'ok');
        });
        s.get('/reply-arr', (req, res) => {
          attempt('replyArr', () => s.reply(req.conn, 200, ['X-Echo', EVIL], 'x'));
          attempt('replyNul', () => s.reply(req.conn, 200, { 'X-Echo': 'a\u0000b' }, 'x'));
          attempt('replyName', () => s.reply(req.conn, 200, { 'Bad Name': 'v' }, 'x'));
          s.reply(req.conn, 200, ['X-Fine', 'yes', 'X-Tab', 'a\tb'], 'ok');
        });
      });
      for (const p of ['/set', '/head-obj', '/head-arr', '/name', '/file', '/reply-obj', '/reply-arr']) {
        const out = await curlHead(base + p);
        assert.doesNotMatch(out, /pwned/i, `${p}: ${out}`);
        assert.match(out, /^HTTP\/1\.1 200/, p);
        assert.match(out, /ok$/, p);
      }
      assert.strictEqual(seen.set, 'TypeError:ERR_INVALID_CHAR');
      assert.strictEqual(seen.headObj, 'TypeError:ERR_INVALID_CHAR');
      assert.strictEqual(seen.headArr, 'TypeError:ERR_INVALID_CHAR');
      assert.strictEqual(seen.name, 'TypeError:ERR_INVALID_ARG_TYPE');
      assert.match(seen.file, /^TypeError:/);
      assert.strictEqual(seen.replyObj, 'TypeError:ERR_INVALID_CHAR');
      assert.strictEqual(seen.replyArr, 'TypeError:ERR_INVALID_CHAR');
      assert.strictEqual(seen.replyNul, 'TypeError:ERR_INVALID_CHAR');
      assert.strictEqual(seen.replyName, 'TypeError:ERR_INVALID_ARG_TYPE');
      // The tab is allowed in a value and reaches the client as sent.
      assert.match(await curlHead(`${base}/reply-arr`), /X-Tab: a\tb/);
      assert.throws(() => srv.reply(1, 99, {}, ''), RangeError);
    });
  });

  describe(`late replies (${backend})`, () => {
    test('a reply to a client that left is a no-op: false, no exception, closed flags set', async (t) => {
      const waiting = [];
      const { srv, port } = await serve(t, backend, {}, (s) => {
        s.get('/slow', (req, res) => { waiting.push({ req, res }); });
        s.get('/stream', (req, res) => { res.write('first'); waiting.push({ req, res }); });
      });
      const leave = async (p) => {
        const sock = require('node:net').connect(port, '127.0.0.1');
        await once(sock, 'connect');
        sock.write(`GET ${p} HTTP/1.1\r\nHost: x\r\n\r\n`);
        while (waiting.length === 0) await new Promise((r) => setImmediate(r));
        const w = waiting.pop();
        const hung = once(w.req, 'close');
        sock.destroy();
        await hung; // the library saw the client leave
        return w;
      };
      const pause = () => new Promise((r) => setTimeout(r, 5));
      // Until the library knows the connection is gone (bounded: 2000 x 5 ms).
      const untilGone = async (conn) => {
        for (let i = 0; i < 2000 && srv.wakeup(conn, ''); i++) await pause();
        assert.strictEqual(srv.wakeup(conn, ''), false, 'the connection closed');
      };

      const a = await leave('/slow');
      a.res.end('too late'); // no exception: the write fails in the library
      await untilGone(a.req.conn);
      assert.strictEqual(srv.reply(a.req.conn, 200, { 'X-A': 'b' }, 'late'), false);

      const b = await leave('/stream');
      for (let i = 0; i < 2000 && !b.res.closed; i++) { b.res.write('more'); await pause(); }
      assert.strictEqual(b.res.closed, true);
      assert.strictEqual(b.res.write('x'), false);
      b.res.end('too late'); // no exception
      assert.strictEqual(srv.reply(b.req.conn, 200, null, 'late'), false);
    });
  });
}

describe('library timers', () => {
  test('one-shot and repeating timers come with the server events; clearTimer stops one', async (t) => {
    const { srv } = await serve(t, 'koffi', {});
    const fired = [];
    const once1 = new Promise((resolve) => srv.timer(5, () => { fired.push('once'); resolve(); }));
    let n = 0;
    const rep = new Promise((resolve) => {
      const id = srv.timer(1, () => { if (++n === 3) { assert.strictEqual(srv.clearTimer(id), true); resolve(); } }, 1);
    });
    await Promise.all([once1, rep]);
    assert.deepStrictEqual(fired, ['once']);
    assert.strictEqual(n, 3);
    // A turn through the library later, the cancelled timer has not fired again.
    const { port } = srv.address();
    await once(http.get({ host: '127.0.0.1', port, path: '/' }), 'response');
    assert.strictEqual(n, 3);
  });
});
