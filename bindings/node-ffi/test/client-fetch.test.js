'use strict';
// fetch on the library's HTTP client (srv.fetch, nanosrv.fetch): against
// the library's own server in this process, a node:http server, and raw
// sockets that answer badly; bodies both ways with backpressure, abort,
// redirects, errors as undici reports them.
const test = require('node:test');
const assert = require('node:assert');
const http = require('node:http');
const net = require('node:net');
const crypto = require('node:crypto');
const { nanosrv, serve } = require('./helpers');
const { makeCerts } = require('./certs');

const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');
const turn = () => new Promise((r) => setImmediate(r));

// A node:http server on loopback, closed with the test.
async function nodeServer(t, handler) {
  const s = http.createServer(handler);
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  t.after(() => { s.closeAllConnections(); s.close(); });
  return `http://127.0.0.1:${s.address().port}`;
}

// A raw TCP server that answers every connection with onConn(socket).
async function rawServer(t, onConn) {
  const s = net.createServer(onConn);
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const socks = new Set();
  s.on('connection', (c) => { socks.add(c); c.on('close', () => socks.delete(c)); });
  t.after(() => { for (const c of socks) c.destroy(); s.close(); });
  return `http://127.0.0.1:${s.address().port}`;
}

function routes(srv, state) {
  srv.get('/hello', (req, res) => {
    res.setHeader('Set-Cookie', ['a=1', 'b=2']);
    res.setHeader('X-Custom', 'yes');
    res.end('hello');
  });
  srv.all('/echo', (req, res) => res.json({
    method: req.method, type: req.headers['content-type'] || null, length: req.body.length,
    sha: sha(req.body), text: req.body.toString('latin1').slice(0, 256), auth: req.headers.authorization || null,
    cl: req.headers['content-length'] || null, te: req.headers['transfer-encoding'] || null,
  }));
  srv.get('/hop/:n', (req, res) => {
    const n = Number(req.params.n);
    res.statusCode = 302;
    res.setHeader('Location', n > 0 ? `/hop/${n - 1}` : '/hello');
    res.end('');
  });
  srv.get('/loop', (req, res) => { res.statusCode = 302; res.setHeader('Location', '/loop'); res.end(''); });
  srv.post('/r307', (req, res) => { res.statusCode = 307; res.setHeader('Location', '/echo'); res.end(''); });
  srv.post('/r303', (req, res) => { res.statusCode = 303; res.setHeader('Location', '/echo'); res.end(''); });
  srv.get('/none', (req, res) => { res.statusCode = 204; res.end(); });
  srv.get('/hang', (req, res) => { state.hung = req; req.on('close', () => state.hungClosed && state.hungClosed()); });
}

test('fetch against the library\'s own server', async (t) => {
  const state = {};
  const { srv, base } = await serve(t, 'koffi', {}, (s) => routes(s, state));

  await t.test('GET: status, headers, body, url', async () => {
    const r = await srv.fetch(`${base}/hello`);
    assert.ok(r instanceof Response);
    assert.strictEqual(r.status, 200);
    assert.strictEqual(r.statusText, 'OK');
    assert.strictEqual(r.ok, true);
    assert.strictEqual(r.url, `${base}/hello`);
    assert.strictEqual(r.redirected, false);
    assert.strictEqual(r.headers.get('x-custom'), 'yes');
    assert.deepStrictEqual(r.headers.getSetCookie(), ['a=1', 'b=2']);
    assert.ok(r.body instanceof ReadableStream);
    assert.strictEqual(await r.text(), 'hello');
  });

  await t.test('URL and Request inputs, method and headers', async () => {
    const r1 = await srv.fetch(new URL(`${base}/echo`), { method: 'PUT', body: 'x', headers: { Authorization: 'Bearer t' } });
    const j1 = await r1.json();
    assert.strictEqual(j1.method, 'PUT');
    assert.strictEqual(j1.auth, 'Bearer t');
    const r2 = await srv.fetch(new Request(`${base}/echo`, { method: 'DELETE', headers: { authorization: 'Basic x' } }));
    const j2 = await r2.json();
    assert.strictEqual(j2.method, 'DELETE');
    assert.strictEqual(j2.auth, 'Basic x');
  });

  await t.test('request body types, each with its Content-Type and length', async () => {
    const bytes = crypto.randomBytes(3000);
    const cases = [
      ['string', 'héllo', 'text/plain;charset=UTF-8', Buffer.from('héllo')],
      ['Buffer', bytes, null, bytes],
      ['Uint8Array', new Uint8Array(bytes), null, bytes],
      ['ArrayBuffer', bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length), null, bytes],
      ['DataView', new DataView(bytes.buffer, bytes.byteOffset, 100), null, bytes.subarray(0, 100)],
      ['URLSearchParams', new URLSearchParams({ a: '1', b: 'x y' }), 'application/x-www-form-urlencoded;charset=UTF-8', Buffer.from('a=1&b=x+y')],
      ['Blob', new Blob([bytes], { type: 'application/x-thing' }), 'application/x-thing', bytes],
      ['empty string', '', 'text/plain;charset=UTF-8', Buffer.alloc(0)],
    ];
    for (const [name, body, type, expect] of cases) {
      const r = await srv.fetch(`${base}/echo`, { method: 'POST', body });
      const j = await r.json();
      assert.strictEqual(j.type, type, name);
      assert.strictEqual(j.length, expect.length, name);
      assert.strictEqual(j.sha, sha(expect), name);
      assert.strictEqual(j.cl, String(expect.length), `${name}: sent in one piece with its Content-Length`);
    }
    const fd = new FormData();
    fd.append('field', 'value');
    const r = await srv.fetch(`${base}/echo`, { method: 'POST', body: fd });
    const j = await r.json();
    assert.match(j.type, /^multipart\/form-data; boundary=/);
    assert.match(j.text, /name="field"/);
  });

  await t.test('a ReadableStream body is streamed chunked, or with a declared Content-Length', async () => {
    const parts = [crypto.randomBytes(100000), crypto.randomBytes(7), crypto.randomBytes(300000)];
    const all = Buffer.concat(parts);
    const stream = () => new ReadableStream({ start(c) { for (const p of parts) c.enqueue(new Uint8Array(p)); c.close(); } });
    let j = await (await srv.fetch(`${base}/echo`, { method: 'POST', body: stream(), duplex: 'half' })).json();
    assert.strictEqual(j.sha, sha(all));
    assert.strictEqual(j.te, 'chunked');
    j = await (await srv.fetch(`${base}/echo`, { method: 'POST', body: stream(), headers: { 'content-length': String(all.length) } })).json();
    assert.strictEqual(j.sha, sha(all));
    assert.strictEqual(j.cl, String(all.length));
    assert.strictEqual(j.te, null);
    // An async iterable is a stream too.
    j = await (await srv.fetch(`${base}/echo`, { method: 'POST', body: (async function* () { yield parts[0]; yield parts[1]; })() })).json();
    assert.strictEqual(j.sha, sha(Buffer.concat(parts.slice(0, 2))));
  });

  await t.test('a stream that errors fails the fetch', async () => {
    const body = new ReadableStream({ pull(c) { c.error(new Error('source broke')); } });
    await assert.rejects(srv.fetch(`${base}/echo`, { method: 'POST', body, duplex: 'half' }),
      (e) => e instanceof TypeError && e.message === 'fetch failed' && e.cause.message === 'source broke');
  });

  await t.test('redirects: follow (default), 303 and 307, manual, error, at most 20', async () => {
    let r = await srv.fetch(`${base}/hop/3`);
    assert.strictEqual(r.status, 200);
    assert.strictEqual(r.redirected, true);
    assert.strictEqual(r.url, `${base}/hello`);
    assert.strictEqual(await r.text(), 'hello');
    r = await srv.fetch(`${base}/r307`, { method: 'POST', body: 'kept' });
    let j = await r.json();
    assert.strictEqual(j.method, 'POST');
    assert.strictEqual(j.text, 'kept');
    r = await srv.fetch(`${base}/r303`, { method: 'POST', body: 'dropped' });
    j = await r.json();
    assert.strictEqual(j.method, 'GET');
    assert.strictEqual(j.length, 0);
    r = await srv.fetch(`${base}/hop/0`, { redirect: 'manual' });
    assert.strictEqual(r.status, 302);
    assert.strictEqual(r.headers.get('location'), '/hello');
    await assert.rejects(srv.fetch(`${base}/hop/0`, { redirect: 'error' }), (e) => e instanceof TypeError && /redirect/.test(e.cause.message));
    await assert.rejects(srv.fetch(`${base}/loop`), (e) => e instanceof TypeError && /redirect count exceeded/.test(e.cause.message));
    const body = new ReadableStream({ start(c) { c.enqueue(new Uint8Array(3)); c.close(); } });
    await assert.rejects(srv.fetch(`${base}/r307`, { method: 'POST', body, duplex: 'half' }), (e) => /streamed request body/.test(e.cause.message));
  });

  await t.test('HEAD and 204 have a null body', async () => {
    let r = await srv.fetch(`${base}/hello`, { method: 'HEAD' });
    assert.strictEqual(r.status, 200);
    assert.strictEqual(r.body, null);
    assert.strictEqual(r.headers.get('content-length'), '5');
    r = await srv.fetch(`${base}/none`);
    assert.strictEqual(r.status, 204);
    assert.strictEqual(r.body, null);
  });

  await t.test('abort: already aborted, while waiting (the connection closes), at once after the call', async () => {
    await assert.rejects(srv.fetch(`${base}/hello`, { signal: AbortSignal.abort() }), { name: 'AbortError' });
    const ac = new AbortController();
    const closed = new Promise((r) => { state.hungClosed = r; });
    const p = srv.fetch(`${base}/hang`, { signal: ac.signal });
    while (!state.hung) await turn();
    ac.abort();
    await assert.rejects(p, { name: 'AbortError' });
    await closed; // nsv_http_cancel closed the request's connection: the server saw it go
    const reason = new Error('mine');
    const ac2 = new AbortController();
    const p2 = srv.fetch(`${base}/hang`, { signal: ac2.signal });
    ac2.abort(reason);
    await assert.rejects(p2, (e) => e === reason);
  });

  await t.test('errors: refused, bad scheme, bad URL', async () => {
    const free = net.createServer();
    await new Promise((r) => free.listen(0, '127.0.0.1', r));
    const port = free.address().port;
    await new Promise((r) => free.close(r));
    await assert.rejects(srv.fetch(`http://127.0.0.1:${port}/`), (e) => e instanceof TypeError && e.message === 'fetch failed'
      && e.cause.code === 'NSV_ECONNREFUSED');
    await assert.rejects(srv.fetch('ftp://127.0.0.1/x'), (e) => e instanceof TypeError && e.cause.code === 'NSV_EURL');
    await assert.rejects(srv.fetch('not a url'), TypeError);
    await assert.rejects(srv.fetch(`${base}/hello`, { method: 'GET', body: 'x' }), TypeError);
  });

  await t.test('module-level nanosrv.fetch (a shared loop that does not hold the process)', async () => {
    const r = await nanosrv.fetch(`${base}/hello`);
    assert.strictEqual(await r.text(), 'hello');
  });
});

test('fetch against node:http and raw sockets', async (t) => {
  const { srv } = await serve(t, 'koffi', {});

  await t.test('chunked answer, streamed as it comes', async () => {
    let release;
    const gate = new Promise((r) => { release = r; });
    const base = await nodeServer(t, async (req, res) => {
      res.writeHead(201, 'Made', { 'content-type': 'text/plain' });
      res.write('first,');
      await gate;
      res.end('second');
    });
    const r = await srv.fetch(`${base}/`);
    assert.strictEqual(r.status, 201);
    assert.strictEqual(r.statusText, 'Made');
    const reader = r.body.getReader();
    const a = await reader.read(); // the first chunk arrives before the rest is written
    assert.strictEqual(Buffer.from(a.value).toString(), 'first,');
    release();
    let rest = '';
    for (let x = await reader.read(); !x.done; x = await reader.read()) rest += Buffer.from(x.value).toString();
    assert.strictEqual(rest, 'second');
  });

  await t.test('upload streamed chunked to node:http', async () => {
    const base = await nodeServer(t, (req, res) => {
      const h = crypto.createHash('sha256');
      let n = 0;
      req.on('data', (d) => { h.update(d); n += d.length; });
      req.on('end', () => res.end(JSON.stringify({ n, sha: h.digest('hex'), te: req.headers['transfer-encoding'] })));
    });
    const chunk = crypto.randomBytes(65536);
    let left = 128; // 8 MiB
    const body = new ReadableStream({ pull(c) { if (left-- === 0) c.close(); else c.enqueue(new Uint8Array(chunk)); } });
    const j = await (await srv.fetch(base, { method: 'POST', body, duplex: 'half' })).json();
    assert.strictEqual(j.n, 128 * 65536);
    assert.strictEqual(j.te, 'chunked');
    assert.strictEqual(j.sha, sha(Buffer.concat(Array(128).fill(chunk))));
  });

  await t.test('response backpressure: a slow reader pauses the socket (sharded and single loop)', async () => {
    const TOTAL = 64 << 20;
    let written = 0;
    const base = await nodeServer(t, async (req, res) => {
      const chunk = Buffer.alloc(65536, 7);
      for (written = 0; written < TOTAL;) {
        written += chunk.length;
        if (!res.write(chunk)) await new Promise((r) => res.once('drain', r));
      }
      res.end();
    });
    for (const sharded of [true, false]) {
      const c = nanosrv.createServer({ sharded });
      t.after(() => c.close(1000));
      const r = await c.fetch(base);
      let got = 0, ahead = 0;
      for await (const piece of r.body) {
        got += piece.length;
        ahead = Math.max(ahead, written - got);
        await turn();
      }
      assert.strictEqual(got, TOTAL);
      // Without nsv_http_pause the whole answer would be read ahead of the
      // reader; with it the server is held back (kernel buffers, one read
      // and the stream's queue in between, plus the poll's lag when sharded).
      assert.ok(ahead < TOTAL / 2, `sharded=${sharded}: the server ran ${ahead} bytes ahead of the reader`);
    }
  });

  await t.test('upload backpressure on a single-loop server: the source is read as the upstream takes it', async () => {
    const TOTAL = 48 << 20, CH = 65536;
    let received = 0, produced = 0, ahead = 0;
    const base = await nodeServer(t, (req, res) => {
      req.on('data', (d) => { received += d.length; req.pause(); setImmediate(() => req.resume()); });
      req.on('end', () => res.end(String(received)));
    });
    const c = nanosrv.createServer({ sharded: false });
    t.after(() => c.close(1000));
    const body = new ReadableStream({
      pull(ctl) {
        if (produced >= TOTAL) { ctl.close(); return; }
        produced += CH;
        ahead = Math.max(ahead, produced - received);
        ctl.enqueue(new Uint8Array(CH));
      },
    }, { highWaterMark: 0 });
    const r = await c.fetch(base, { method: 'POST', body, duplex: 'half' });
    assert.strictEqual(await r.text(), String(TOTAL));
    // maxOutput (4 MiB) waits in the library, the kernel holds some more.
    assert.ok(ahead < TOTAL / 2, `the source was read ${ahead} bytes ahead of the upstream`);
  });

  await t.test('cancelling the body drops the request: the server sees its connection close', async () => {
    let gone;
    const closed = new Promise((r) => { gone = r; });
    const base = await nodeServer(t, (req, res) => {
      res.writeHead(200);
      res.write('x'.repeat(1000));
      res.on('close', gone);
    });
    const r = await srv.fetch(base);
    const reader = r.body.getReader();
    await reader.read();
    await reader.cancel();
    await closed;
  });

  await t.test('abort while the body streams errors the stream', async () => {
    const base = await nodeServer(t, (req, res) => { res.writeHead(200); res.write('part'); });
    const ac = new AbortController();
    const r = await srv.fetch(base, { signal: ac.signal });
    const reader = r.body.getReader();
    assert.strictEqual(Buffer.from((await reader.read()).value).toString(), 'part');
    ac.abort();
    await assert.rejects(reader.read(), { name: 'AbortError' });
  });

  await t.test('cross-origin redirect drops credentials', async () => {
    const { base: target } = await serve(t, 'koffi', {}, (s) => routes(s, {}));
    const base = await nodeServer(t, (req, res) => { res.writeHead(307, { location: `${target}/echo` }); res.end(); });
    const j = await (await srv.fetch(base, { method: 'POST', body: 'b', headers: { authorization: 'secret' } })).json();
    assert.strictEqual(j.auth, null);
    assert.strictEqual(j.text, 'b');
  });

  await t.test('a malformed answer: fetch failed, cause NSV_EPARSE', async () => {
    const base = await rawServer(t, (s) => s.once('data', () => s.end('HTTP/1.1 abc nonsense\r\n\r\n')));
    await assert.rejects(srv.fetch(base), (e) => e instanceof TypeError && e.message === 'fetch failed' && e.cause.code === 'NSV_EPARSE');
  });

  await t.test('a body cut short: the stream errors with terminated, cause NSV_ECLOSED', async () => {
    const base = await rawServer(t, (s) => s.once('data', () => s.end('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..')));
    const r = await srv.fetch(base);
    assert.strictEqual(r.status, 200);
    await assert.rejects(r.text(), (e) => e instanceof TypeError && e.message === 'terminated' && e.cause.code === 'NSV_ECLOSED');
  });

  await t.test('a closed server fails new fetches', async () => {
    const c = nanosrv.createServer();
    await c.close();
    await assert.rejects(c.fetch('http://127.0.0.1:1/'), (e) => e instanceof TypeError && e.cause.code === 'NSV_ESTOPPED');
  });
});

test('https: verified against the client CA, refused without it; a close fails requests in flight', async (t) => {
  const certs = makeCerts();
  t.after(() => certs.cleanup());
  const srv = nanosrv.createServer({ tlsCertFile: certs.p('srv.crt'), tlsKeyFile: certs.p('srv.key') });
  srv.get('/secure', (req) => ({ secure: req.secure }));
  srv.get('/hang', () => new Promise(() => {}));
  const port = await srv.listen('https://127.0.0.1:0');
  t.after(() => srv.close(1000));
  const client = nanosrv.createServer({ tlsClientCaPem: certs.read('ca.crt') });
  t.after(() => client.close(50));
  const r = await client.fetch(`https://localhost:${port}/secure`); // the certificate names localhost
  assert.deepStrictEqual(await r.json(), { secure: true });
  const other = nanosrv.createServer({ tlsClientCaPem: certs.read('other.crt') });
  t.after(() => other.close(50));
  await assert.rejects(other.fetch(`https://localhost:${port}/secure`), (e) => e instanceof TypeError && e.cause.code === 'NSV_ETLS');
  await other.close();
  // The client server is closed with a request waiting: it fails, it does not hang.
  const p = client.fetch(`https://localhost:${port}/hang`);
  await turn();
  await client.close(50);
  await assert.rejects(p, (e) => e instanceof TypeError && e.message === 'fetch failed' && e.cause.code === 'NSV_ESTOPPED');
});

test('fetch with the ffi-napi backend', async (t) => {
  const state = {};
  const { srv, base } = await serve(t, 'ffi-napi', {}, (s) => routes(s, state));
  const r = await srv.fetch(`${base}/hello`);
  assert.strictEqual(await r.text(), 'hello');
  const body = new ReadableStream({ start(c) { c.enqueue(new Uint8Array([104, 105])); c.close(); } });
  const j = await (await srv.fetch(`${base}/echo`, { method: 'POST', body, duplex: 'half' })).json();
  assert.strictEqual(j.text, 'hi');
});
