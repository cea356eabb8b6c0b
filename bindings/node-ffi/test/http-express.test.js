'use strict';
// Express 4 and 5 apps with their common middleware, run on node:http and
// on nanosrv/http with only the http module changed: the same requests
// must get the same answers.
const test = require('node:test');
const assert = require('node:assert');
const crypto = require('crypto');
const zlib = require('zlib');
const { BACKENDS, both, same, request, multipart, STATIC } = require('../fixtures/http/both');
const bodyParser = require('body-parser');
const cookieParser = require('cookie-parser');
const multer = require('multer');
const compression = require('compression');
const cors = require('cors');

function makeApp(express, v5) {
  const app = express();
  app.set('etag', 'strong');
  app.use(cookieParser('s3cret'));
  app.use(bodyParser.json());
  app.use(bodyParser.urlencoded({ extended: false }));
  app.use('/raw', bodyParser.raw({ type: '*/*', limit: '10mb' }));
  app.get('/hello', (req, res) => res.json({ hello: 'world', q: req.query, proto: req.protocol, ip: req.ip.length > 0 }));
  app.post('/json', (req, res) => res.status(201).json({ got: req.body }));
  app.post('/form', (req, res) => res.send(req.body));
  app.post('/raw', (req, res) => res.send(crypto.createHash('sha256').update(req.body).digest('hex')));
  app.get('/cookies', (req, res) => {
    res.cookie('a', '1', { httpOnly: true, path: '/' });
    res.cookie('s', 'signed', { signed: true });
    res.json({ cookies: req.cookies, signed: req.signedCookies });
  });
  const router = express.Router();
  router.get('/items/:id', (req, res) => res.type('text').send(`item ${req.params.id}`));
  router.delete('/items/:id', (req, res) => res.sendStatus(204));
  app.use('/api', router);
  app.use('/static', express.static(STATIC));
  const upload = multer({ storage: multer.memoryStorage(), limits: { fileSize: 1 << 20 } });
  app.post('/upload', upload.single('file'), (req, res) => res.json({
    name: req.body.name, file: req.file.originalname, type: req.file.mimetype,
    size: req.file.size, sha: crypto.createHash('sha256').update(req.file.buffer).digest('hex'),
  }));
  app.get('/big', compression({ threshold: 100 }), (req, res) => res.type('text').send('nanosrv '.repeat(4000)));
  app.use('/cors', cors({ origin: 'http://a.example', credentials: true }));
  app.get('/cors', (req, res) => res.send('cors ok'));
  app.get('/redirect', (req, res) => res.redirect('/hello'));
  app.get('/status', (req, res) => { res.statusMessage = 'Quite Fine'; res.status(299).end('custom'); });
  app.get('/boom', () => { throw new Error('boom'); });
  if (v5) app.get('/async', async () => { await null; throw new Error('async boom'); });
  app.use((err, req, res, next) => { // eslint-disable-line no-unused-vars
    res.status(err.status || 500).json({ error: err.message });
  });
  return app;
}

for (const [name, pkg] of [['express 4', 'express'], ['express 5', 'express5']]) {
  const express = require(pkg);
  const v5 = pkg === 'express5';
  for (const backend of BACKENDS) {
    test(`${name} app on nanosrv/http answers as on node:http (${backend})`, async (t) => {
      const bases = await both(t, backend, (http, opts) => http.createServer(opts, makeApp(express, v5)));
      const ct = ['content-type', 'content-length', 'etag'];
      let r = await same(assert, bases, '/hello?a=1&b=x', {}, ct);
      assert.deepStrictEqual(JSON.parse(r.body), { hello: 'world', q: { a: '1', b: 'x' }, proto: 'http', ip: true });
      r = await same(assert, bases, '/json', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"x":[1,2]}' }, ct);
      assert.strictEqual(r.status, 201);
      await same(assert, bases, '/json', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{bad' }, ['content-type']);
      await same(assert, bases, '/form', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'a=1&b=%20x' }, ct);
      const blob = crypto.randomBytes(3 << 20);
      r = await same(assert, bases, '/raw', { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: blob }, ct);
      assert.strictEqual(r.body.toString(), crypto.createHash('sha256').update(blob).digest('hex'));
      r = await same(assert, bases, '/cookies', { headers: { cookie: 'x=1; y=two' } }, ['set-cookie', 'content-type']);
      assert.strictEqual(r.headers['set-cookie'].length, 2);
      assert.deepStrictEqual(JSON.parse(r.body).cookies, { x: '1', y: 'two' });
      await same(assert, bases, '/api/items/42', {}, ct);
      r = await same(assert, bases, '/api/items/42', { method: 'DELETE' }, []);
      assert.strictEqual(r.status, 204);
      await same(assert, bases, '/api/nothing', {}, ['content-type']);
      // static: whole file, Range, ETag revalidation, HEAD
      r = await same(assert, bases, '/static/hello.txt', {}, ['content-type', 'content-length', 'etag', 'last-modified', 'accept-ranges', 'cache-control']);
      assert.strictEqual(r.status, 200);
      const etag = r.headers.etag;
      r = await same(assert, bases, '/static/hello.txt', { headers: { range: 'bytes=6-11' } }, ['content-range', 'content-length']);
      assert.strictEqual(r.status, 206);
      assert.strictEqual(r.body.toString(), 'static');
      r = await same(assert, bases, '/static/hello.txt', { headers: { 'if-none-match': etag } }, ['etag']);
      assert.strictEqual(r.status, 304);
      r = await same(assert, bases, '/static/hello.txt', { method: 'HEAD' }, ['content-length', 'content-type']);
      assert.strictEqual(r.body.length, 0);
      await same(assert, bases, '/static/missing.txt', {}, ['content-type']);
      // multer upload
      const file = crypto.randomBytes(200000);
      const mp = multipart({ name: 'report' }, [{ field: 'file', name: 'data.bin', type: 'application/octet-stream', data: file }]);
      r = await same(assert, bases, '/upload', { method: 'POST', headers: { 'content-type': mp.type }, body: mp.body }, ['content-type']);
      assert.deepStrictEqual(JSON.parse(r.body), {
        name: 'report', file: 'data.bin', type: 'application/octet-stream', size: file.length,
        sha: crypto.createHash('sha256').update(file).digest('hex'),
      });
      // compression through res.write (streamed answer)
      r = await same(assert, bases, '/big', { headers: { 'accept-encoding': 'gzip' } }, ['content-encoding', 'vary', 'content-type']);
      assert.strictEqual(r.headers['content-encoding'], 'gzip');
      assert.strictEqual(zlib.gunzipSync(r.body).toString(), 'nanosrv '.repeat(4000));
      // cors, preflight included
      await same(assert, bases, '/cors', { headers: { origin: 'http://a.example' } }, ['access-control-allow-origin', 'access-control-allow-credentials', 'vary']);
      r = await same(assert, bases, '/cors', { method: 'OPTIONS', headers: { origin: 'http://a.example', 'access-control-request-method': 'PUT' } },
        ['access-control-allow-methods', 'access-control-allow-origin']);
      assert.strictEqual(r.status, 204);
      r = await same(assert, bases, '/redirect', {}, ['location']);
      assert.strictEqual(r.status, 302);
      // error middleware, sync (and async on Express 5)
      r = await same(assert, bases, '/boom', {}, ['content-type']);
      assert.strictEqual(r.status, 500);
      if (v5) assert.strictEqual((await same(assert, bases, '/async', {}, [])).status, 500);
      // a custom reason phrase reaches the status line
      r = await same(assert, bases, '/status', {}, []);
      assert.strictEqual(r.statusMessage, 'Quite Fine');
      const direct = await request(bases.nsv, '/hello');
      assert.strictEqual(direct.statusMessage, 'OK');
    });
  }
}
