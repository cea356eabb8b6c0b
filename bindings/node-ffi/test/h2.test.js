'use strict';
// HTTP/2 (h2c with prior knowledge) through the binding, unchanged: a native
// server, Express, Koa and Fastify apps on nanosrv/http and a Hono app on
// serve() with the library's `http2` option, answered to Node's own http2
// client: concurrent streams on one session, POST bodies, cookies split over
// several fields. Both backends.
// Skipped when the library has no HTTP/2 (the option is refused).
const { describe, test } = require('node:test');
const assert = require('node:assert');
const crypto = require('node:crypto');
const http2 = require('node:http2');
const { nanosrv, BACKENDS, serve } = require('./helpers');
const nsvHttp = require('../http');

const { NSV_EVF_HTTP2, NSV_H2_ALL: H2_ALL } = nanosrv.constants; // from the cdef, as every constant
const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');

function h2Missing(backend) {
  const s = nanosrv.createServer({ backend });
  try {
    s.setOption('http2', H2_ALL);
    return false;
  } catch (e) {
    return `the library has no HTTP/2 (${e.message})`;
  } finally {
    s.close(0);
  }
}

// One request on an http2 session: { status, headers, body: Buffer }.
function h2req(session, headers, body) {
  return new Promise((resolve, reject) => {
    const req = session.request(headers, { endStream: body === undefined });
    const parts = [];
    let head = null;
    req.on('response', (h) => { head = h; });
    req.on('data', (d) => parts.push(d));
    req.on('end', () => resolve({ status: head && head[':status'], headers: head, body: Buffer.concat(parts) }));
    req.on('error', reject);
    req.setTimeout(10000, () => req.close(http2.constants.NGHTTP2_CANCEL));
    if (body !== undefined) req.end(body);
  });
}

function connect(base) {
  return new Promise((resolve, reject) => {
    const s = http2.connect(base);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

for (const backend of BACKENDS) {
  const skip = h2Missing(backend);
  describe(`HTTP/2 through the binding (${backend})`, { timeout: 30000, skip }, () => {
    test('native server: concurrent streams, POST bodies, cookies', async (t) => {
      const { base } = await serve(t, backend, { http2: H2_ALL, maxBody: 8 << 20 }, (srv) => {
        srv.get('/hello/:id', (req, res) => res.json({
          id: req.params.id, q: req.querystring, h2: (req.flags & NSV_EVF_HTTP2) !== 0, v: req.httpVersion,
          cookie: req.headers.cookie || null,
        }));
        srv.post('/echo', (req, res) => { res.setHeader('Content-Type', 'application/octet-stream'); res.end(req.body); });
      });
      const s = await connect(base);
      t.after(() => s.close());
      const gets = Array.from({ length: 20 }, (_, i) => h2req(s, { ':path': `/hello/${i}?x=${i}` }));
      const bodies = Array.from({ length: 6 }, (_, i) => crypto.randomBytes(1000 + i * 70000));
      const posts = bodies.map((b) => h2req(s, { ':method': 'POST', ':path': '/echo', 'content-type': 'application/octet-stream' }, b));
      const got = await Promise.all(gets);
      got.forEach((r, i) => {
        assert.strictEqual(r.status, 200);
        assert.deepStrictEqual(JSON.parse(r.body), { id: String(i), q: `x=${i}`, h2: true, v: '2.0', cookie: null });
        assert.strictEqual(r.headers.connection, undefined, 'no connection-specific field');
      });
      const echoed = await Promise.all(posts);
      echoed.forEach((r, i) => {
        assert.strictEqual(r.status, 200);
        assert.strictEqual(sha(r.body), sha(bodies[i]), `POST body ${i} (${bodies[i].length} bytes) echoed`);
      });
      // Node sends each cookie crumb as its own field when asked to
      const c = await h2req(s, { ':path': '/hello/c', cookie: ['a=1', 'b=2'] });
      assert.strictEqual(JSON.parse(c.body).cookie, 'a=1; b=2');
      const nf = await h2req(s, { ':path': '/nothing' });
      assert.strictEqual(nf.status, 404);
    });

    test('Express app on nanosrv/http over h2c', async (t) => {
      const express = require('express');
      const app = express();
      app.use('/raw', require('body-parser').raw({ type: '*/*', limit: '10mb' }));
      app.get('/hello', (req, res) => res.json({ hello: 'world', q: req.query, v: req.httpVersion }));
      app.post('/raw', (req, res) => res.send(sha(req.body)));
      app.get('/items/:id', (req, res) => res.type('text').send(`item ${req.params.id}`));
      const srv = nsvHttp.createServer({ backend, http2: H2_ALL }, app);
      srv.listen(0, '127.0.0.1');
      await new Promise((r) => srv.once('listening', r));
      t.after(() => new Promise((r) => srv.close(() => r())));
      const s = await connect(`http://127.0.0.1:${srv.address().port}`);
      t.after(() => s.close());
      const big = crypto.randomBytes(3 << 20);
      const [hello, raw, ...items] = await Promise.all([
        h2req(s, { ':path': '/hello?a=1' }),
        h2req(s, { ':method': 'POST', ':path': '/raw', 'content-type': 'application/octet-stream' }, big),
        ...Array.from({ length: 10 }, (_, i) => h2req(s, { ':path': `/items/${i}` })),
      ]);
      assert.strictEqual(hello.status, 200);
      assert.deepStrictEqual(JSON.parse(hello.body), { hello: 'world', q: { a: '1' }, v: '2.0' });
      assert.strictEqual(raw.status, 200);
      assert.strictEqual(raw.body.toString(), sha(big), '3 MiB body reached the app whole');
      items.forEach((r, i) => assert.strictEqual(r.body.toString(), `item ${i}`));
      const missing = await h2req(s, { ':path': '/missing' });
      assert.strictEqual(missing.status, 404);
    });

    // An app's server on nanosrv/http, and an h2c session to it.
    async function h2App(t, server) {
      server.listen(0, '127.0.0.1');
      await new Promise((r) => server.once('listening', r));
      t.after(() => new Promise((r) => server.close(() => r())));
      const s = await connect(`http://127.0.0.1:${server.address().port}`);
      t.after(() => s.close());
      return s;
    }

    test('Koa app on nanosrv/http over h2c', async (t) => {
      const Koa = require('koa');
      const app = new Koa();
      app.silent = true;
      app.use(async (ctx) => {
        if (ctx.method === 'POST') {
          const parts = [];
          for await (const c of ctx.req) parts.push(c);
          ctx.body = { sha: sha(Buffer.concat(parts)), v: ctx.req.httpVersion };
        } else {
          ctx.body = { path: ctx.path, q: ctx.query, v: ctx.req.httpVersion };
        }
      });
      const s = await h2App(t, nsvHttp.createServer({ backend, http2: H2_ALL }, app.callback()));
      const body = crypto.randomBytes(500000);
      const [g, p] = await Promise.all([
        h2req(s, { ':path': '/k/1?a=b' }),
        h2req(s, { ':method': 'POST', ':path': '/up', 'content-type': 'application/octet-stream' }, body),
      ]);
      assert.deepStrictEqual(JSON.parse(g.body), { path: '/k/1', q: { a: 'b' }, v: '2.0' });
      assert.deepStrictEqual(JSON.parse(p.body), { sha: sha(body), v: '2.0' });
    });

    test('Fastify app on nanosrv/http over h2c', async (t) => {
      const Fastify = require('fastify');
      let server;
      const app = Fastify({ serverFactory: (handler) => (server = nsvHttp.createServer({ backend, http2: H2_ALL }, handler)) });
      app.addContentTypeParser('application/octet-stream', { parseAs: 'buffer', bodyLimit: 8 << 20 }, (req, b, done) => done(null, b));
      app.get('/hello/:name', async (req) => ({ hello: req.params.name, v: req.raw.httpVersion }));
      app.post('/upload', async (req) => ({ sha: sha(req.body) }));
      await app.listen({ port: 0, host: '127.0.0.1' });
      t.after(() => app.close());
      const s = await connect(`http://127.0.0.1:${server.address().port}`);
      t.after(() => s.close());
      const body = crypto.randomBytes(300000);
      const [g, p] = await Promise.all([
        h2req(s, { ':path': '/hello/h2' }),
        h2req(s, { ':method': 'POST', ':path': '/upload', 'content-type': 'application/octet-stream' }, body),
      ]);
      assert.strictEqual(g.status, 200);
      assert.deepStrictEqual(JSON.parse(g.body), { hello: 'h2', v: '2.0' });
      assert.deepStrictEqual(JSON.parse(p.body), { sha: sha(body) });
    });

    test('Hono app on serve() over h2c', async (t) => {
      const { Hono } = require('hono');
      const { serve: fetchServe } = require('../lib/fetch');
      const app = new Hono();
      app.get('/users/:id', (c) => c.json({ id: c.req.param('id'), q: c.req.query('q') }));
      app.post('/echo', async (c) => c.text(sha(Buffer.from(await c.req.arrayBuffer()))));
      const server = fetchServe({ hostname: '127.0.0.1', port: 0, backend, http2: H2_ALL, fetch: app.fetch });
      t.after(() => server.stop(true));
      const s = await connect(`http://127.0.0.1:${server.port}`);
      t.after(() => s.close());
      const body = crypto.randomBytes(200000);
      const [g, p] = await Promise.all([
        h2req(s, { ':path': '/users/7?q=x' }),
        h2req(s, { ':method': 'POST', ':path': '/echo' }, body),
      ]);
      assert.deepStrictEqual(JSON.parse(g.body), { id: '7', q: 'x' });
      assert.strictEqual(p.body.toString(), sha(body));
    });
  });
}
