'use strict';
// A Hono app on serve({ fetch: app.fetch }): each answer is compared with
// the one Hono gives in-process (app.request), the reference Response.
const test = require('node:test');
const assert = require('node:assert');
const { Hono } = require('hono');
const { HTTPException } = require('hono/http-exception');
const { stream, streamSSE } = require('hono/streaming');
const { cors } = require('hono/cors');
const { etag } = require('hono/etag');
const { logger } = require('hono/logger');
const { BACKENDS, start } = require('../fixtures/fetch/client');

function makeApp(logged, gate) {
  const app = new Hono();
  app.use('*', logger((line) => logged.push(line)));
  app.use('/api/*', cors({ origin: 'https://example.com', allowHeaders: ['X-Custom'], exposeHeaders: ['X-Total'] }));
  app.use('/tagged/*', etag());
  app.get('/', (c) => c.text('Hello Hono!'));
  app.get('/users/:id/posts/:post', (c) => c.json({ params: c.req.param(), q: c.req.query('q') ?? null, all: c.req.queries('t') ?? null }));
  app.post('/api/items', async (c) => {
    const item = await c.req.json();
    c.header('X-Total', '1');
    return c.json({ created: item, type: c.req.header('content-type') }, 201);
  });
  app.post('/form', async (c) => {
    const body = await c.req.parseBody({ all: true });
    const out = {};
    for (const [k, v] of Object.entries(body)) {
      const one = async (x) => (typeof x === 'string' ? x : { name: x.name, type: x.type, size: x.size, text: await x.text() });
      out[k] = Array.isArray(v) ? await Promise.all(v.map(one)) : await one(v);
    }
    return c.json(out);
  });
  app.get('/tagged/doc', (c) => c.text('a document with an etag'));
  app.get('/html', (c) => c.html('<h1>hi</h1>'));
  app.get('/redirect', (c) => c.redirect('/elsewhere', 301));
  app.get('/cookie', (c) => {
    c.header('Set-Cookie', 'a=1; Path=/', { append: true });
    c.header('Set-Cookie', 'b=2; Path=/', { append: true });
    return c.body(null, 204);
  });
  app.get('/stream', (c) => stream(c, async (s) => {
    for (let i = 0; i < 5; i++) await s.write(`chunk ${i}\n`);
  }));
  app.get('/sse', (c) => streamSSE(c, async (s) => {
    await s.writeSSE({ event: 'first', data: 'one', id: '1' });
    if (gate) await gate.wait;
    await s.writeSSE({ event: 'second', data: 'two', id: '2' });
  }));
  app.get('/http-error', () => { throw new HTTPException(401, { message: 'who are you' }); });
  app.get('/error', () => { throw new Error('kaboom'); });
  app.onError((err, c) => (err instanceof HTTPException ? err.getResponse() : c.json({ error: err.message }, 500)));
  app.notFound((c) => c.json({ missing: c.req.path }, 404));
  return app;
}

// The same request through the server and in-process: status, body and
// the named headers agree.
async function same(base, app, p, init = {}, headers = []) {
  const mk = () => (typeof init === 'function' ? init() : init);
  const a = await app.request(p, mk());
  const b = await fetch(base + p, { redirect: 'manual', ...mk() });
  const what = `${mk().method || 'GET'} ${p}`;
  assert.strictEqual(b.status, a.status, `${what}: status`);
  const [ta, tb] = [await a.text(), await b.text()];
  assert.strictEqual(tb, ta, `${what}: body`);
  for (const h of headers) assert.strictEqual(b.headers.get(h), a.headers.get(h), `${what}: header ${h}`);
  return { res: b, text: tb };
}

for (const backend of BACKENDS) {
  test(`hono app on serve() answers as app.request() (${backend})`, async (t) => {
    const logged = [];
    const app = makeApp(logged);
    const { base } = start(t, backend, { fetch: app.fetch });
    let r = await same(base, app, '/', {}, ['content-type']);
    assert.strictEqual(r.text, 'Hello Hono!');
    assert.strictEqual(r.res.headers.get('content-length'), '11'); // one reply
    r = await same(base, app, '/users/7/posts/hello%20world?q=x&t=1&t=2', {}, ['content-type']);
    assert.deepStrictEqual(JSON.parse(r.text), { params: { id: '7', post: 'hello world' }, q: 'x', all: ['1', '2'] });
    const json = () => ({ method: 'POST', headers: { 'content-type': 'application/json', origin: 'https://example.com' }, body: JSON.stringify({ name: 'n', n: [1, 2] }) });
    r = await same(base, app, '/api/items', json, ['content-type', 'access-control-allow-origin', 'access-control-expose-headers', 'x-total']);
    assert.strictEqual(r.res.status, 201);
    const preflight = { method: 'OPTIONS', headers: { origin: 'https://example.com', 'access-control-request-method': 'POST' } };
    r = await same(base, app, '/api/items', preflight, ['access-control-allow-origin', 'access-control-allow-methods', 'access-control-allow-headers']);
    assert.strictEqual(r.res.status, 204);
    r = await same(base, app, '/tagged/doc', {}, ['etag']);
    const tag = r.res.headers.get('etag');
    assert.ok(tag);
    r = await same(base, app, '/tagged/doc', { headers: { 'if-none-match': tag } }, ['etag']);
    assert.strictEqual(r.res.status, 304);
    await same(base, app, '/html', {}, ['content-type']);
    r = await same(base, app, '/redirect', {}, ['location']);
    assert.strictEqual(r.res.status, 301);
    r = await same(base, app, '/cookie', {});
    assert.strictEqual(r.res.status, 204);
    assert.deepStrictEqual(r.res.headers.getSetCookie(), ['a=1; Path=/', 'b=2; Path=/']);
    r = await same(base, app, '/http-error', {});
    assert.strictEqual(r.res.status, 401);
    r = await same(base, app, '/error', {}, ['content-type']);
    assert.deepStrictEqual(JSON.parse(r.text), { error: 'kaboom' });
    r = await same(base, app, '/no/such/page', {});
    assert.strictEqual(r.res.status, 404);
    r = await same(base, app, '/', { method: 'HEAD' }, ['content-type']);
    assert.strictEqual(r.text, '');
    assert.ok(logged.some((l) => l.includes('GET /users/7/posts/hello%20world')), logged.join('\n'));
  });

  test(`hono parseBody: urlencoded and multipart forms (${backend})`, async (t) => {
    const app = makeApp([]);
    const { base } = start(t, backend, { fetch: app.fetch });
    const urlenc = () => ({ method: 'POST', body: new URLSearchParams({ a: '1', b: 'two words' }) });
    let r = await same(base, app, '/form', urlenc, ['content-type']);
    assert.deepStrictEqual(JSON.parse(r.text), { a: '1', b: 'two words' });
    const big = 'x'.repeat(300000);
    const multi = () => {
      const fd = new FormData();
      fd.append('title', 'hello');
      fd.append('tag', 'a');
      fd.append('tag', 'b');
      fd.append('file', new Blob([big], { type: 'text/plain' }), 'big.txt');
      return { method: 'POST', body: fd };
    };
    r = await same(base, app, '/form', multi, ['content-type']);
    const got = JSON.parse(r.text);
    assert.strictEqual(got.title, 'hello');
    assert.deepStrictEqual(got.tag, ['a', 'b']);
    assert.deepStrictEqual({ ...got.file, text: got.file.text.length }, { name: 'big.txt', type: 'text/plain', size: big.length, text: big.length });
  });

  test(`hono stream() and streamSSE() stream as they are written (${backend})`, async (t) => {
    let open;
    const gate = { wait: new Promise((r) => { open = r; }) };
    const app = makeApp([], gate);
    const { base } = start(t, backend, { fetch: app.fetch });
    const r = await same(base, app, '/stream', {});
    assert.strictEqual(r.text, [0, 1, 2, 3, 4].map((i) => `chunk ${i}\n`).join(''));
    // The first event reaches the client while the handler still waits.
    const res = await fetch(base + '/sse');
    assert.strictEqual(res.headers.get('content-type'), 'text/event-stream');
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let text = '';
    while (!text.includes('id: 1\n\n')) {
      const { value, done } = await reader.read();
      assert.ok(!done, 'the stream ended before its first event');
      text += dec.decode(value, { stream: true });
    }
    assert.ok(!text.includes('second'));
    open();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += dec.decode(value, { stream: true });
    }
    assert.strictEqual(text, 'event: first\ndata: one\nid: 1\n\nevent: second\ndata: two\nid: 2\n\n');
  });
}
