'use strict';
// Koa and Connect apps on node:http and on nanosrv/http: same answers.
const test = require('node:test');
const assert = require('node:assert');
const crypto = require('crypto');
const { Readable } = require('stream');
process.env.NODE_ENV = 'test'; // connect logs handled errors otherwise
const Koa = require('koa');
const connect = require('connect');
const bodyParser = require('body-parser');
const { BACKENDS, both, same } = require('../fixtures/http/both');

// Koa has no body parser of its own: the body is read from ctx.req.
async function readBody(req) {
  const parts = [];
  for await (const c of req) parts.push(c);
  return Buffer.concat(parts);
}

function koaApp() {
  const app = new Koa();
  app.silent = true;
  app.use(async (ctx, next) => {
    try { await next(); } catch (e) { ctx.status = e.status || 500; ctx.body = { error: e.message }; }
  });
  app.use(async (ctx) => {
    if (ctx.path === '/echo' && ctx.method === 'POST') {
      const body = await readBody(ctx.req);
      ctx.set('X-Sha', crypto.createHash('sha256').update(body).digest('hex'));
      ctx.body = { length: body.length, type: ctx.get('content-type') };
    } else if (ctx.path === '/json' && ctx.method === 'POST') {
      ctx.status = 201;
      ctx.body = { got: JSON.parse((await readBody(ctx.req)).toString()) };
    } else if (ctx.path === '/stream') {
      ctx.type = 'text/plain';
      ctx.body = Readable.from((function* () { for (let i = 0; i < 50; i++) yield `line ${i}\n`; })());
    } else if (ctx.path === '/buffer') {
      ctx.body = Buffer.alloc(100000, 'k');
    } else if (ctx.path === '/redirect') {
      ctx.redirect('/elsewhere');
    } else if (ctx.path === '/throw') {
      ctx.throw(418, 'short and stout');
    } else if (ctx.path === '/hello') {
      ctx.cookies.set('k', 'v', { httpOnly: true });
      ctx.body = `hello ${ctx.query.name} via ${ctx.protocol} ${ctx.ip ? 'ip' : 'no-ip'}`;
    }
  });
  return app;
}

function connectApp() {
  const app = connect();
  app.use(bodyParser.json());
  app.use('/sum', (req, res) => {
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify({ sum: req.body.reduce((a, b) => a + b, 0) }));
  });
  app.use('/fail', (req, res, next) => next(Object.assign(new Error('nope'), { status: 403 })));
  return app;
}

for (const backend of BACKENDS) {
  test(`koa app reads bodies on nanosrv/http as on node:http (${backend})`, async (t) => {
    const bases = await both(t, backend, (http, opts) => http.createServer(opts, koaApp().callback()));
    const blob = crypto.randomBytes(1 << 20);
    let r = await same(assert, bases, '/echo', { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: blob },
      ['x-sha', 'content-type', 'content-length']);
    assert.strictEqual(r.headers['x-sha'], crypto.createHash('sha256').update(blob).digest('hex'));
    r = await same(assert, bases, '/json', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a":[1,"b"]}' }, ['content-type']);
    assert.strictEqual(r.status, 201);
    r = await same(assert, bases, '/stream', {}, ['content-type', 'transfer-encoding']);
    assert.strictEqual(r.body.toString().split('\n').length, 51);
    await same(assert, bases, '/buffer', {}, ['content-length', 'content-type']);
    r = await same(assert, bases, '/redirect', {}, ['location']);
    assert.strictEqual(r.status, 302);
    r = await same(assert, bases, '/throw', {}, ['content-type']);
    assert.strictEqual(r.status, 418);
    r = await same(assert, bases, '/hello?name=koa', {}, ['set-cookie', 'content-type']);
    assert.strictEqual(r.body.toString(), 'hello koa via http ip');
    await same(assert, bases, '/nothing', {}, ['content-type']);
  });

  test(`connect app on nanosrv/http answers as on node:http (${backend})`, async (t) => {
    const bases = await both(t, backend, (http, opts) => http.createServer(opts, connectApp()));
    const r = await same(assert, bases, '/sum', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '[1,2,3]' }, ['content-type']);
    assert.deepStrictEqual(JSON.parse(r.body), { sum: 6 });
    assert.strictEqual((await same(assert, bases, '/fail', {}, [], ['content-type'])).status, 403);
    assert.strictEqual((await same(assert, bases, '/missing', {}, ['content-type', 'content-security-policy'])).status, 404);
  });
}
