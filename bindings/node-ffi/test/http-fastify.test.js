'use strict';
// A Fastify app on nanosrv/http (serverFactory) and on node:http: same answers.
const test = require('node:test');
const assert = require('node:assert');
const crypto = require('crypto');
const { Readable } = require('stream');
const Fastify = require('fastify');
const { BACKENDS, same, nsvHttp, nodeHttp } = require('../fixtures/http/both');

function fastifyApp(http, opts) {
  let server;
  const app = Fastify({ serverFactory: (handler) => (server = http.createServer(opts, handler)) });
  app.addContentTypeParser('application/octet-stream', { parseAs: 'buffer', bodyLimit: 8 << 20 }, (req, body, done) => done(null, body));
  app.addHook('onRequest', async (req, reply) => { reply.header('x-hook', 'onRequest'); });
  app.addHook('preHandler', async (req) => { req.seen = 'preHandler'; });
  app.addHook('onSend', async (req, reply, payload) => { reply.header('x-on-send', '1'); return payload; });
  app.get('/hello/:name', async (req) => ({ hello: req.params.name, q: req.query.q, seen: req.seen }));
  app.post('/items', {
    schema: {
      body: {
        type: 'object', required: ['name', 'count'],
        properties: { name: { type: 'string', minLength: 1 }, count: { type: 'integer', minimum: 0 } },
      },
      response: { 201: { type: 'object', properties: { id: { type: 'integer' }, name: { type: 'string' } } } },
    },
  }, async (req, reply) => { reply.code(201); return { id: 7, name: req.body.name, dropped: 'by the response schema' }; });
  app.post('/upload', async (req, reply) => {
    reply.header('x-sha', crypto.createHash('sha256').update(req.body).digest('hex'));
    return { length: req.body.length };
  });
  app.get('/stream', (req, reply) => {
    reply.type('text/plain').send(Readable.from((function* () { for (let i = 0; i < 100; i++) yield `line ${i}\n`; })()));
  });
  app.get('/buffer', (req, reply) => { reply.type('application/octet-stream').send(Buffer.alloc(200000, 'f')); });
  app.get('/redirect', (req, reply) => { reply.redirect('/elsewhere'); });
  app.get('/cookies', (req, reply) => { reply.header('set-cookie', ['a=1; Path=/', 'b=2; HttpOnly']).send('ok'); });
  app.get('/teapot', (req, reply) => { reply.code(418).send({ short: 'stout' }); });
  app.get('/fail', async () => { throw Object.assign(new Error('nope'), { statusCode: 409 }); });
  app.get('/crash', async () => { throw new Error('crashed'); });
  app.setErrorHandler((err, req, reply) => {
    reply.code(err.statusCode || 500).send({ error: err.message, validation: !!err.validation });
  });
  return { app, get server() { return server; } };
}

for (const backend of BACKENDS) {
  test(`fastify app via serverFactory on nanosrv/http answers as on node:http (${backend})`, async (t) => {
    // Fastify listens itself (app.listen calls the factory's server.listen).
    const start = async (http, opts) => {
      const { app } = fastifyApp(http, opts);
      t.after(() => app.close());
      await app.listen({ port: 0, host: '127.0.0.1' });
      assert.ok(app.server instanceof http.Server);
      return `http://127.0.0.1:${app.server.address().port}`;
    };
    const bases = { ref: await start(nodeHttp, {}), nsv: await start(nsvHttp, { backend }) };
    let r = await same(assert, bases, '/hello/fast?q=1', {}, ['content-type', 'content-length', 'x-hook', 'x-on-send']);
    assert.deepStrictEqual(JSON.parse(r.body), { hello: 'fast', q: '1', seen: 'preHandler' });
    const json = { 'content-type': 'application/json' };
    r = await same(assert, bases, '/items', { method: 'POST', headers: json, body: '{"name":"n","count":3}' }, ['content-type']);
    assert.strictEqual(r.status, 201);
    assert.deepStrictEqual(JSON.parse(r.body), { id: 7, name: 'n' });
    r = await same(assert, bases, '/items', { method: 'POST', headers: json, body: '{"name":"","count":-1}' }, ['content-type']);
    assert.strictEqual(r.status, 400);
    assert.strictEqual(JSON.parse(r.body).validation, true);
    r = await same(assert, bases, '/items', { method: 'POST', headers: json, body: '{not json' }, ['content-type']);
    assert.strictEqual(r.status, 400);
    const blob = crypto.randomBytes(2 << 20);
    r = await same(assert, bases, '/upload', { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: blob }, ['x-sha']);
    assert.strictEqual(r.headers['x-sha'], crypto.createHash('sha256').update(blob).digest('hex'));
    r = await same(assert, bases, '/stream', {}, ['content-type', 'transfer-encoding']);
    assert.strictEqual(r.body.toString().split('\n').length, 101);
    await same(assert, bases, '/buffer', {}, ['content-type', 'content-length']);
    r = await same(assert, bases, '/redirect', {}, ['location']);
    assert.strictEqual(r.status, 302);
    r = await same(assert, bases, '/cookies', {}, ['set-cookie']);
    assert.deepStrictEqual(r.headers['set-cookie'], ['a=1; Path=/', 'b=2; HttpOnly']);
    r = await same(assert, bases, '/teapot', {}, ['content-type']);
    assert.strictEqual(r.status, 418);
    r = await same(assert, bases, '/fail', {}, ['content-type']);
    assert.strictEqual(r.status, 409);
    r = await same(assert, bases, '/crash', {}, ['content-type']);
    assert.strictEqual(r.status, 500);
    r = await same(assert, bases, '/missing', {}, ['content-type']);
    assert.strictEqual(r.status, 404);
    r = await same(assert, bases, '/hello/head', { method: 'HEAD' }, ['content-type', 'content-length']);
    assert.strictEqual(r.body.length, 0);
  });
}
