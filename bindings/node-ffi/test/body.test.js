'use strict';
// Request bodies as streams: whole-body and streamed routes, backpressure
// that really stops reading the socket, early answers, limits and a client
// leaving mid-body. Real clients (fetch, raw sockets), both backends.
const { describe, test } = require('node:test');
const assert = require('node:assert');
const net = require('node:net');
const crypto = require('node:crypto');
const { once } = require('node:events');
const { pipeline } = require('node:stream/promises');
const { Writable } = require('node:stream');
const { BACKENDS, serve } = require('./helpers');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Reads one response from a raw socket: resolves with the text read once
// `until(text)` holds or the server closes.
function readUntil(sock, until) {
  return new Promise((resolve) => {
    let got = '';
    const onData = (d) => { got += d.toString('latin1'); if (until(got)) done(); };
    const done = () => { sock.off('data', onData); sock.off('end', done); resolve(got); };
    sock.on('data', onData);
    sock.on('end', done);
    sock.on('error', () => done()); // e.g. EPIPE after the server answered and closed
  });
}

for (const backend of BACKENDS) {
  describe(`request bodies (${backend})`, { timeout: 120000 }, () => {
    test('a whole-body request is a Readable of its body', async (t) => {
      const { base } = await serve(t, backend, {}, (srv) => {
        srv.post('/pipe', async (req, res) => {
          const parts = [];
          await pipeline(req, new Writable({ write(c, e, cb) { parts.push(c); cb(); } }));
          res.end(Buffer.concat(parts));
        });
        srv.post('/empty', async (req, res) => {
          let n = 0;
          for await (const c of req) n += c.length;
          res.end(`read ${n} streaming=${req.streaming}`);
        });
      });
      const body = crypto.randomBytes(100000);
      let r = await fetch(`${base}/pipe`, { method: 'POST', body });
      assert.ok(Buffer.from(await r.arrayBuffer()).equals(body));
      r = await fetch(`${base}/empty`, { method: 'POST' });
      assert.strictEqual(await r.text(), 'read 0 streaming=false');
    });

    test('a streamed route delivers the body in pieces (for await, buffer(), chunked)', async (t) => {
      const { base } = await serve(t, backend, { maxBody: 64 << 20 }, (srv) => {
        srv.post('/hash', async (req, res) => {
          assert.strictEqual(req.streaming, true);
          assert.throws(() => req.body, { code: 'NSV_ESTATE' });
          const h = crypto.createHash('sha256');
          let n = 0, pieces = 0;
          for await (const c of req) { h.update(c); n += c.length; pieces++; }
          res.json({ n, pieces, sha: h.digest('hex') });
        }, { streamBody: true });
        srv.post('/buf', async (req) => (await req.buffer()).toString(), { streamBody: true });
      });
      const body = crypto.randomBytes(8 << 20);
      let r = await fetch(`${base}/hash`, { method: 'POST', body });
      const j = await r.json();
      assert.strictEqual(j.n, body.length);
      assert.ok(j.pieces > 1, `the body came in ${j.pieces} pieces`);
      assert.strictEqual(j.sha, crypto.createHash('sha256').update(body).digest('hex'));
      // A chunked upload (a ReadableStream body), de-chunked by the library.
      const stream = new ReadableStream({
        start(c) { c.enqueue(new TextEncoder().encode('hello ')); c.enqueue(new TextEncoder().encode('world')); c.close(); },
      });
      r = await fetch(`${base}/buf`, { method: 'POST', body: stream, duplex: 'half' });
      assert.strictEqual(await r.text(), 'hello world');
    });

    test('backpressure: a consumer that does not read stops the socket; reading resumes it', async (t) => {
      const TOTAL = 64 << 20;
      let req = null;
      let got = null;
      const { port } = await serve(t, backend, { maxBody: TOTAL * 2, bodyHighWaterMark: 256 * 1024 }, (srv) => {
        srv.put('/slow', (r, res) => {
          req = r; // not read until the test says so
          got = new Promise((resolve) => {
            r.once('go', async () => {
              const h = crypto.createHash('sha256');
              let n = 0;
              for await (const c of r) { h.update(c); n += c.length; }
              resolve({ n, sha: h.digest('hex') });
              res.end('done');
            });
          });
        }, { streamBody: true });
      });
      const block = crypto.randomBytes(1 << 20);
      const want = crypto.createHash('sha256');
      for (let i = 0; i < TOTAL / block.length; i++) want.update(block);
      const sock = net.connect(port, '127.0.0.1');
      await once(sock, 'connect');
      sock.write(`PUT /slow HTTP/1.1\r\nHost: x\r\nContent-Length: ${TOTAL}\r\n\r\n`);
      let written = 0, finished = false;
      const writer = (async () => {
        for (let i = 0; i < TOTAL / block.length; i++) {
          if (!sock.write(block)) await once(sock, 'drain');
          written += block.length;
        }
        finished = true;
      })();
      // Wait (bounded) until the server has buffered all it will while
      // nobody reads: the buffered count stops changing.
      let last = -1, same = 0;
      for (let i = 0; i < 500 && same < 10; i++) {
        await sleep(20);
        const now = req ? req.readableLength : -1;
        same = now === last && now > 0 ? same + 1 : 0;
        last = now;
      }
      assert.ok(req, 'the handler got the request before the body');
      assert.strictEqual(finished, false, 'the client could not send the whole body to a reader that is not reading');
      assert.ok(req.readableLength < 8 << 20, `the server buffered ${req.readableLength} bytes of ${TOTAL} (paused)`);
      assert.ok(written < TOTAL, `the client got ${written} of ${TOTAL} bytes out`);
      req.emit('go');
      const res = await got;
      await writer;
      assert.deepStrictEqual(res, { n: TOTAL, sha: want.digest('hex') });
      const reply = await readUntil(sock, (s) => s.endsWith('done'));
      assert.match(reply, /^HTTP\/1\.1 200/);
      sock.destroy();
    });

    test('an early 413 before the body: the body is never sent, the stream ends', async (t) => {
      const events = [];
      const { port } = await serve(t, backend, { maxBody: 1 << 30 }, (srv) => {
        srv.post('/up', (req, res) => {
          if (+req.headers['content-length'] > 1000) {
            req.on('close', () => events.push('close'));
            res.statusCode = 413;
            res.end('too big');
            events.push(`destroyed=${req.destroyed}`);
            return;
          }
          res.end('ok');
        }, { streamBody: true });
      });
      const sock = net.connect(port, '127.0.0.1');
      await once(sock, 'connect');
      sock.write('POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\nExpect: 100-continue\r\n\r\n');
      const got = await readUntil(sock, (s) => s.includes('too big'));
      sock.destroy();
      // The client never sent the body, and was never told to: on a sharded
      // server too, 100 Continue waits for the host's next poll.
      assert.match(got, /^HTTP\/1\.1 413/);
      assert.doesNotMatch(got, /100 Continue/);
      assert.deepStrictEqual(events, ['destroyed=true', 'close']);
    });

    test('maxBody on a chunked streamed body: the stream errors with status 413', async (t) => {
      let seen = null;
      const { port } = await serve(t, backend, { maxBody: 100000 }, (srv) => {
        srv.post('/up', async (req) => {
          try {
            for await (const c of req) void c;
            seen = 'no error';
          } catch (e) {
            seen = `${e.code} ${e.status}`;
          }
        }, { streamBody: true });
      });
      const sock = net.connect(port, '127.0.0.1');
      await once(sock, 'connect');
      sock.write('POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n');
      const chunk = `${(60000).toString(16)}\r\n${'a'.repeat(60000)}\r\n`;
      const reply = readUntil(sock, (s) => /\r\n\r\n/.test(s));
      sock.on('error', () => {}); // the server closes after its 413: later writes fail
      for (let i = 0; i < 4 && !sock.destroyed; i++) sock.write(chunk);
      const got = await reply;
      sock.destroy();
      // The library answers 413 and closes with body bytes unread, so the
      // client may see a reset before the answer: check it when it came.
      if (got) assert.match(got, /^HTTP\/1\.1 413/);
      for (let i = 0; i < 200 && seen === null; i++) await sleep(10);
      assert.strictEqual(seen, 'NSV_ETOOBIG 413');
    });

    test("a client leaving mid-body: 'aborted', an ECONNRESET error, 'close'", async (t) => {
      const log = [];
      let finished;
      const done = new Promise((r) => { finished = r; });
      const { port } = await serve(t, backend, {}, (srv) => {
        srv.post('/up', async (req) => {
          req.on('aborted', () => log.push('aborted'));
          req.on('close', () => log.push('close'));
          try {
            for await (const c of req) log.push(`data ${c.length}`);
          } catch (e) {
            log.push(`error ${e.code}`);
          }
          finished();
        }, { streamBody: true });
      });
      const sock = net.connect(port, '127.0.0.1');
      await once(sock, 'connect');
      sock.write('POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nhello');
      for (let i = 0; i < 200 && !log.length; i++) await sleep(10);
      sock.destroy();
      await done;
      assert.deepStrictEqual(log.filter((l) => !l.startsWith('data')).sort(), ['aborted', 'close', 'error ECONNRESET']);
      assert.strictEqual(log[0], 'data 5');
    });
  });
}
