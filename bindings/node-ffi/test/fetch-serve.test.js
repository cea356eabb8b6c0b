'use strict';
// serve({ fetch }): WHATWG Request in, Response out, on the library.
const test = require('node:test');
const assert = require('node:assert');
const crypto = require('crypto');
const net = require('net');
const { once } = require('events');
const { BACKENDS, start, request, serve } = require('../fixtures/fetch/client');
const nanosrv = require('..');
const { makeCerts } = require('./certs');

const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');
const tick = () => new Promise((r) => setTimeout(r, 20));

test('serve is a named export of both entries', async () => {
  const esm = await import('../index.mjs');
  assert.strictEqual(typeof nanosrv.serve, 'function');
  assert.strictEqual(esm.serve, nanosrv.serve);
  assert.strictEqual(serve, nanosrv.serve);
});

for (const backend of BACKENDS) {
  test(`serve: request fields, bodies, head, status text, set-cookie (${backend})`, async (t) => {
    const { server, base } = start(t, backend, {
      async fetch(req) {
        const u = new URL(req.url);
        switch (u.pathname) {
          case '/info':
            return Response.json({ url: req.url, method: req.method, agent: req.headers.get('x-agent'), signal: req.signal instanceof AbortSignal });
          case '/text': return new Response('hello text', { headers: { 'content-type': 'text/plain' } });
          case '/bytes': return new Response(new Uint8Array([1, 2, 3, 4]).buffer);
          case '/blob': return new Response(new Blob(['blob ', 'parts'], { type: 'text/x-blob' }));
          case '/teapot': return new Response('short and stout', { status: 418, statusText: 'I Am A Teapot Today' });
          case '/cookies': {
            const h = new Headers();
            h.append('set-cookie', 'a=1; Path=/');
            h.append('set-cookie', 'b=2; HttpOnly');
            h.append('x-n', '1');
            return new Response('c', { headers: h });
          }
          case '/empty': return new Response(null, { status: 204 });
          case '/notmod': return new Response(null, { status: 304, headers: { etag: '"x"' } });
          case '/echo': return new Response(await req.text(), { status: 201, headers: { 'x-type': req.headers.get('content-type') || '' } });
          default: return new Response('nope', { status: 404 });
        }
      },
    });
    assert.strictEqual(typeof server.port, 'number');
    assert.strictEqual(server.address.port, server.port);
    assert.strictEqual(server.url.href, `http://127.0.0.1:${server.port}/`);

    let r = await request(base, '/info?x=1', { headers: { 'x-agent': 'tester' } });
    assert.deepStrictEqual(JSON.parse(r.body), { url: `http://127.0.0.1:${server.port}/info?x=1`, method: 'GET', agent: 'tester', signal: true });
    assert.match(r.headers['content-type'], /application\/json/);
    r = await request(base, '/text');
    assert.strictEqual(r.body.toString(), 'hello text');
    assert.strictEqual(r.headers['content-length'], '10'); // one reply, not chunked
    assert.strictEqual(r.headers['transfer-encoding'], undefined);
    r = await request(base, '/bytes');
    assert.deepStrictEqual([...r.body], [1, 2, 3, 4]);
    r = await request(base, '/blob');
    assert.strictEqual(r.body.toString(), 'blob parts');
    assert.strictEqual(r.headers['content-type'], 'text/x-blob');
    r = await request(base, '/teapot');
    assert.strictEqual(r.status, 418);
    assert.strictEqual(r.statusMessage, 'I Am A Teapot Today');
    r = await request(base, '/text', { method: 'HEAD' });
    assert.strictEqual(r.status, 200);
    assert.strictEqual(r.body.length, 0);
    r = await request(base, '/cookies');
    assert.deepStrictEqual(r.headers['set-cookie'], ['a=1; Path=/', 'b=2; HttpOnly']);
    r = await request(base, '/empty');
    assert.strictEqual(r.status, 204);
    assert.strictEqual(r.body.length, 0);
    r = await request(base, '/notmod');
    assert.strictEqual(r.status, 304);
    assert.strictEqual(r.headers.etag, '"x"');
    assert.strictEqual(r.body.length, 0);
    r = await request(base, '/echo', { method: 'POST', headers: { 'content-type': 'text/x-mine' }, body: 'posted' });
    assert.strictEqual(r.status, 201);
    assert.strictEqual(r.body.toString(), 'posted');
    assert.strictEqual(r.headers['x-type'], 'text/x-mine');
    r = await request(base, '/info');
    assert.strictEqual(r.status, 200); // the connection is still good after all of these
  });

  test(`serve: the request body streams in, the response body streams out (${backend})`, async (t) => {
    const { base } = start(t, backend, {
      async fetch(req) {
        if (req.method === 'POST') {
          const h = crypto.createHash('sha256');
          let chunks = 0, n = 0;
          for await (const c of req.body) { h.update(c); chunks++; n += c.length; }
          return Response.json({ sha: h.digest('hex'), chunks, n });
        }
        let i = 0;
        const stream = new ReadableStream({
          async pull(c) {
            await tick();
            if (i === 5) { c.close(); return; }
            c.enqueue(new TextEncoder().encode(`part ${i++}\n`));
          },
        });
        return new Response(stream, { headers: { 'content-type': 'text/plain' } });
      },
    });
    const blob = crypto.randomBytes(4 << 20);
    let r = await request(base, '/up', { method: 'POST', body: blob, headers: { 'content-type': 'application/octet-stream' } });
    const got = JSON.parse(r.body);
    assert.strictEqual(got.sha, sha(blob));
    assert.strictEqual(got.n, blob.length);
    assert.ok(got.chunks > 1, `the body came in ${got.chunks} chunk(s)`);
    r = await request(base, '/stream');
    assert.strictEqual(r.body.toString(), 'part 0\npart 1\npart 2\npart 3\npart 4\n');
    assert.strictEqual(r.headers['transfer-encoding'], 'chunked');
  });

  test(`serve: a response stream is read as the client reads; its leaving aborts request.signal (${backend})`, async (t) => {
    const CHUNK = 64 * 1024, COUNT = 1024; // 64 MiB if nothing held it back
    let pulled = 0;
    let cancelled, aborted;
    const gotCancel = new Promise((r) => { cancelled = r; });
    const gotAbort = new Promise((r) => { aborted = r; });
    const chunk = Buffer.alloc(CHUNK, 'z');
    const { server } = start(t, backend, {
      fetch(req) {
        req.signal.addEventListener('abort', () => aborted());
        return new Response(new ReadableStream({
          pull(c) { if (pulled === COUNT) c.close(); else { pulled++; c.enqueue(new Uint8Array(chunk)); } },
          cancel() { cancelled(); },
        }, { highWaterMark: 1 }));
      },
    });
    const sock = net.connect(server.port, '127.0.0.1');
    await once(sock, 'connect');
    sock.write('GET /big HTTP/1.1\r\nHost: x\r\n\r\n');
    sock.pause(); // reads nothing
    // The stream starts once the request got through (later under load).
    for (let i = 0; i < 3000 && pulled === 0; i++) await tick();
    let last = -1, still = 0;
    for (let i = 0; i < 300 && still < 5; i++) {
      await tick();
      if (pulled === last) still++; else { still = 0; last = pulled; }
    }
    assert.ok(pulled > 0);
    assert.ok(pulled < COUNT / 2, `pulled ${pulled} of ${COUNT} chunks from a client that reads nothing`);
    sock.destroy();
    await gotAbort;
    await gotCancel;
  });

  test(`serve: a long poll hears its client leave (${backend})`, async (t) => {
    let aborted;
    const gotAbort = new Promise((r) => { aborted = r; });
    const { server } = start(t, backend, {
      fetch(req) {
        return new Promise((resolve) => {
          req.signal.addEventListener('abort', () => { aborted(req.signal.aborted); resolve(new Response('late')); });
        });
      },
    });
    const sock = net.connect(server.port, '127.0.0.1');
    await once(sock, 'connect');
    sock.write('GET /poll HTTP/1.1\r\nHost: x\r\n\r\n');
    await tick();
    sock.destroy();
    assert.strictEqual(await gotAbort, true);
  });

  test(`serve: exceptions and non-Responses are 500s, onError may answer (${backend})`, async (t) => {
    const errors = [];
    const { base } = start(t, backend, {
      fetch(req) {
        const p = new URL(req.url).pathname;
        if (p === '/throw') throw new Error('boom');
        if (p === '/reject') return Promise.reject(new Error('async boom'));
        if (p === '/custom') throw Object.assign(new Error('mine'), { custom: true });
        if (p === '/midstream') {
          let n = 0;
          return new Response(new ReadableStream({
            async pull(c) { await tick(); if (n++ < 2) c.enqueue(new TextEncoder().encode('x')); else c.error(new Error('stream broke')); },
          }));
        }
        return { not: 'a response' };
      },
      onError(err) {
        errors.push(err.message);
        if (err.custom) return new Response('handled', { status: 503, statusText: 'Busy' });
        return undefined;
      },
    });
    const logged = [];
    const orig = console.error;
    console.error = (...a) => logged.push(a.join(' '));
    t.after(() => { console.error = orig; });
    let r = await request(base, '/throw');
    assert.strictEqual(r.status, 500);
    r = await request(base, '/reject');
    assert.strictEqual(r.status, 500);
    r = await request(base, '/object');
    assert.strictEqual(r.status, 500);
    r = await request(base, '/custom');
    assert.strictEqual(r.status, 503);
    assert.strictEqual(r.statusMessage, 'Busy');
    assert.strictEqual(r.body.toString(), 'handled');
    await assert.rejects(request(base, '/midstream', { agent: false })); // the connection is closed: no honest end
    console.error = orig;
    assert.deepStrictEqual(errors.slice(0, 4), ['boom', 'async boom', 'the fetch handler returned object, not a Response', 'mine']);
    assert.strictEqual(errors[4], 'stream broke');
    assert.strictEqual(logged.length, 4, logged.join('\n')); // one line for each 500 and the broken stream
  });

  test(`serve: close(), finished, signal, EADDRINUSE, onListen (${backend})`, async () => {
    const ac = new AbortController();
    let listened;
    const heard = new Promise((r) => { listened = r; });
    const s = serve({ fetch: () => new Response('ok'), port: 0, hostname: '127.0.0.1', backend, signal: ac.signal, onListen: listened });
    assert.deepStrictEqual(await heard, { hostname: '127.0.0.1', port: s.port });
    const r = await request(`http://127.0.0.1:${s.port}`, '/', { agent: false });
    assert.strictEqual(r.body.toString(), 'ok');
    assert.throws(() => serve({ fetch: () => new Response('x'), port: s.port, hostname: '127.0.0.1', backend }), { code: 'NSV_EADDRINUSE' });
    ac.abort();
    await s.finished;
    await assert.rejects(request(`http://127.0.0.1:${s.port}`, '/', { agent: false })); // closed
    const s2 = serve((req) => new Response(req.method), { port: 0, hostname: '127.0.0.1', backend });
    assert.strictEqual((await request(`http://127.0.0.1:${s2.port}`, '/', { agent: false })).body.toString(), 'GET');
    await s2.close();
  });

  test(`serve: tls, request.url is https (${backend})`, async (t) => {
    if (!nanosrv.tlsAvailable()) { t.skip('library built without TLS'); return; }
    const certs = makeCerts();
    t.after(() => certs.cleanup());
    const { base } = start(t, backend, {
      tls: { key: certs.read('srv.key'), cert: certs.read('srv.crt') },
      fetch: (req) => new Response(req.url),
    });
    const r = await request(base, '/secure?a=b', { ca: certs.read('ca.crt') });
    assert.strictEqual(r.body.toString(), `${base}/secure?a=b`);
  });
}
