'use strict';
// HTTP behaviour through real clients (fetch and raw sockets), both backends.
const { describe, test } = require('node:test');
const assert = require('node:assert');
const net = require('node:net');
const { BACKENDS, serve } = require('./helpers');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// One raw HTTP exchange: sends `text`, resolves with everything read until
// the server closes or `untilBytes` arrive.
function raw(port, text, until) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => s.write(text));
    let got = '';
    s.on('data', (d) => { got += d.toString('latin1'); if (until && until(got)) s.end(); });
    s.on('end', () => resolve(got));
    s.on('error', reject);
  });
}

for (const backend of BACKENDS) {
  describe(`http (${backend})`, { timeout: 60000 }, () => {
    test('routes, params, query, headers, fallback', async (t) => {
      const { base } = await serve(t, backend, {}, (srv) => {
        srv.get('/users/:id', (req, res) => res.json({ id: req.params.id, q: req.querystring, qo: { ...req.query }, url: req.url, h: req.headers['x-test'] }));
        srv.fallback((req, res) => { res.statusCode = 418; res.end(`${req.method} ${req.path}`); });
      });
      let r = await fetch(`${base}/users/a%20b?x=1&y=2`, { headers: { 'X-Test': 'yes' } });
      assert.strictEqual(r.status, 200);
      assert.strictEqual(r.headers.get('content-type'), 'application/json');
      assert.deepStrictEqual(await r.json(), { id: 'a b', q: 'x=1&y=2', qo: { x: '1', y: '2' }, url: '/users/a%20b?x=1&y=2', h: 'yes' });
      r = await fetch(`${base}/nothing/here`, { method: 'DELETE' });
      assert.strictEqual(r.status, 418);
      assert.strictEqual(await r.text(), 'DELETE /nothing/here');
    });

    test('unmatched requests get 404 without a fallback', async (t) => {
      const { base } = await serve(t, backend, {}, (srv) => srv.get('/a', (req, res) => res.end('a')));
      const r = await fetch(`${base}/b`);
      assert.strictEqual(r.status, 404);
      await r.text();
    });

    test('bodies: strings, Buffers, Uint8Array, empty, utf-8', async (t) => {
      const { base } = await serve(t, backend, {}, (srv) => {
        srv.post('/echo', (req, res) => res.end(req.body));
        srv.post('/text', (req, res) => res.end(`${req.text()}!`));
        srv.get('/u8', (req, res) => res.end(new Uint8Array([104, 105])));
        srv.get('/empty', (req, res) => { res.statusCode = 204; res.end(); });
        srv.post('/json', (req, res) => res.json({ got: req.json() }));
      });
      const bin = Buffer.from([0, 1, 2, 255, 254, 10, 13]);
      let r = await fetch(`${base}/echo`, { method: 'POST', body: bin });
      assert.deepStrictEqual(Buffer.from(await r.arrayBuffer()), bin);
      r = await fetch(`${base}/text`, { method: 'POST', body: 'héllo ✓' });
      assert.strictEqual(await r.text(), 'héllo ✓!');
      r = await fetch(`${base}/u8`);
      assert.strictEqual(await r.text(), 'hi');
      r = await fetch(`${base}/empty`);
      assert.strictEqual(r.status, 204);
      r = await fetch(`${base}/json`, { method: 'POST', body: '{"a":[1,2]}' });
      assert.deepStrictEqual(await r.json(), { got: { a: [1, 2] } });
    });

    test('a body larger than the arena grows it', async (t) => {
      const { base } = await serve(t, backend, { arenaSize: 4096, maxBody: 4 << 20 }, (srv) => {
        srv.post('/echo', (req, res) => res.end(req.body));
      });
      const big = Buffer.alloc(3 << 20, 'abcdefg');
      const r = await fetch(`${base}/echo`, { method: 'POST', body: big });
      assert.ok(Buffer.from(await r.arrayBuffer()).equals(big));
    });

    test('status, headers, writeHead, multi-value headers', async (t) => {
      const { base } = await serve(t, backend, {}, (srv) => {
        srv.get('/h', (req, res) => {
          res.setHeader('X-One', 1);
          res.setHeader('Set-Cookie', ['a=1', 'b=2']);
          assert.strictEqual(res.getHeader('x-one'), 1);
          res.writeHead(201, { 'Content-Type': 'text/plain' });
          res.end('made');
        });
      });
      const r = await fetch(`${base}/h`);
      assert.strictEqual(r.status, 201);
      assert.strictEqual(r.headers.get('x-one'), '1');
      assert.strictEqual(r.headers.get('content-type'), 'text/plain');
      assert.deepStrictEqual(r.headers.getSetCookie(), ['a=1', 'b=2']);
      assert.strictEqual(await r.text(), 'made');
    });

    test('async handlers: resolve replies, rejection gives 500, return values', async (t) => {
      const { base } = await serve(t, backend, {}, (srv) => {
        srv.get('/later/:ms', async (req, res) => {
          const ms = +req.params.ms; // read before awaiting is not required:
          await sleep(ms);
          res.end(`waited ${ms} ${req.params.ms} ${req.querystring}`); // the request kept its bytes
        });
        srv.get('/reject', async () => { await sleep(1); throw new Error('nope'); });
        srv.get('/throw', () => { throw new Error('sync nope'); });
        srv.get('/value', async () => ({ v: 1 }));
        srv.get('/string', () => 'plain');
      });
      const many = await Promise.all([30, 1, 20, 5].map((ms) => fetch(`${base}/later/${ms}?q=${ms}`).then((r) => r.text())));
      assert.deepStrictEqual(many, ['waited 30 30 q=30', 'waited 1 1 q=1', 'waited 20 20 q=20', 'waited 5 5 q=5']);
      let r = await fetch(`${base}/reject`);
      assert.strictEqual(r.status, 500);
      await r.text();
      r = await fetch(`${base}/throw`);
      assert.strictEqual(r.status, 500);
      await r.text();
      r = await fetch(`${base}/value`);
      assert.deepStrictEqual(await r.json(), { v: 1 });
      r = await fetch(`${base}/string`);
      assert.strictEqual(await r.text(), 'plain');
    });

    test('streaming with write() and end()', async (t) => {
      const { base } = await serve(t, backend, {}, (srv) => {
        srv.get('/stream', (req, res) => {
          res.setHeader('Content-Type', 'text/plain');
          res.write('one,');
          let n = 0;
          const iv = setInterval(() => {
            if (++n < 3) res.write(Buffer.from(`${n},`));
            else { clearInterval(iv); res.end('end'); }
          }, 5);
        });
      });
      const r = await fetch(`${base}/stream`);
      assert.strictEqual(r.headers.get('transfer-encoding'), 'chunked');
      assert.strictEqual(await r.text(), 'one,1,2,end');
    });

    test('a long stream to a client that reads late: write() returns false, then drain', async (t) => {
      const total = 48 << 20; // more than the kernel's socket buffers hold
      let pauses = 0;
      const { port } = await serve(t, backend, {}, (srv) => {
        srv.get('/big', (req, res) => {
          const chunk = Buffer.alloc(65536, 0x61);
          let sent = 0;
          const pump = () => { // one chunk per millisecond, as a steady producer would
            if (sent >= total) { res.end(); return; }
            sent += chunk.length;
            if (res.write(chunk)) setTimeout(pump, 1);
            else { pauses++; res.once('drain', pump); }
          };
          pump();
        });
      });
      const got = await new Promise((resolve, reject) => {
        let n = 0;
        let tail = Buffer.alloc(0);
        const s = net.connect(port, '127.0.0.1', () => {
          s.write('GET /big HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n');
          s.pause(); // read nothing until the server had to wait (at most 5 s)
          const until = Date.now() + 5000;
          const iv = setInterval(() => {
            if (pauses > 0 || Date.now() > until) { clearInterval(iv); s.resume(); }
          }, 10);
        });
        s.on('data', (d) => { n += d.length; tail = Buffer.concat([tail, d]).subarray(-5); });
        s.on('end', () => resolve({ n, tail: tail.toString('latin1') }));
        s.on('error', reject);
      });
      assert.ok(pauses >= 1, `write() returned false ${pauses} times`);
      assert.ok(got.n > total, `received ${got.n} bytes of a ${total}-byte body`);
      assert.strictEqual(got.tail, '0\r\n\r\n');
    });

    test('HEAD gets headers only; keep-alive pipelined requests are answered in order', async (t) => {
      const { port } = await serve(t, backend, {}, (srv) => {
        srv.get('/x/:n', (req, res) => res.end(`n=${req.params.n}`));
      });
      const head = await raw(port, 'HEAD /x/1 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n');
      assert.match(head, /^HTTP\/1\.1 200/);
      assert.match(head, /Content-Length: 3/i);
      assert.ok(head.endsWith('\r\n\r\n'));
      const req = (n) => `GET /x/${n} HTTP/1.1\r\nHost: a\r\n\r\n`;
      const out = await raw(port, req(1) + req(2) + req(3), (s) => (s.match(/n=\d/g) || []).length === 3);
      assert.deepStrictEqual(out.match(/n=\d/g), ['n=1', 'n=2', 'n=3']);
    });

    test('a client that leaves before the reply: the late reply does not throw', async (t) => {
      let done, started;
      const finished = new Promise((r) => { done = r; });
      const inHandler = new Promise((r) => { started = r; });
      const { port, base } = await serve(t, backend, {}, (srv) => {
        srv.get('/slow', async (req, res) => {
          started();
          await sleep(60);
          res.end('too late'); // the connection may be gone: never an exception
          done(true);
        });
        srv.get('/ok', (req, res) => res.end('ok'));
      });
      const s = net.connect(port, '127.0.0.1', () => s.write('GET /slow HTTP/1.1\r\nHost: a\r\n\r\n'));
      await inHandler; // the request reached the handler: now leave
      s.destroy();
      assert.strictEqual(await finished, true);
      assert.strictEqual(await (await fetch(`${base}/ok`)).text(), 'ok');
    });

    test('limits from options: max body gives 413', async (t) => {
      const { srv, base } = await serve(t, backend, { maxBody: 10 }, (s) => s.post('/echo', (req, res) => res.end(req.body)));
      assert.strictEqual(srv.getOption('maxBody'), 10);
      const r = await fetch(`${base}/echo`, { method: 'POST', body: 'x'.repeat(100) });
      assert.strictEqual(r.status, 413);
      await r.text();
    });

    test('many concurrent clients, all answered', async (t) => {
      const { base } = await serve(t, backend, {}, (srv) => {
        srv.get('/n/:i', (req, res) => res.end(req.params.i));
      });
      const ids = Array.from({ length: 200 }, (_, i) => String(i));
      const got = await Promise.all(ids.map((i) => fetch(`${base}/n/${i}`).then((r) => r.text())));
      assert.deepStrictEqual(got, ids);
    });

    test('close() drains: an in-flight request is answered, then the port is closed', async (t) => {
      let started;
      const inFlight = new Promise((resolve) => { started = resolve; });
      const { srv, base } = await serve(t, backend, {}, (s) => {
        s.get('/slow', async (req, res) => { started(); await sleep(50); res.end('done'); });
      });
      const p = fetch(`${base}/slow`).then((r) => r.text());
      await inFlight; // the request is with the handler: now drain
      const closing = srv.close(2000);
      assert.strictEqual(await p, 'done');
      await closing;
      await assert.rejects(fetch(`${base}/slow`));
    });
  });
}
