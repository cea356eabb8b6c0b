'use strict';
// Behind a PROXY protocol front, the frameworks see the client: Express's
// req.ip and req.socket.remoteAddress, Koa's ctx.ip, a Hono app's
// remoteAddr on serve(); listener options through server.listen({ ... }),
// and the operations calls of nanosrv/http (metrics, access events,
// readiness during a drain).
const test = require('node:test');
const assert = require('node:assert');
require('./helpers'); // sets NANOSRV_LIBRARY
const express = require('express');
const Koa = require('koa');
const { Hono } = require('hono');
const nhttp = require('../http');
const { serve } = require('..');
const { proxyV2, exchange, bodyOf, curl, get, until } = require('./ops-helpers');

const GET = (path) => `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`;

async function listening(t, server, opts) {
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: 0, host: '127.0.0.1', ...opts }, resolve);
  });
  t.after(() => new Promise((r) => server.close(() => r())));
  return server.address().port;
}

test('Express: req.ip and req.socket show the PROXY client', async (t) => {
  const app = express();
  app.get('/ip', (req, res) => res.json({ ip: req.ip, remote: req.socket.remoteAddress, port: req.socket.remotePort, front: req.socket.proxy && req.socket.proxy.front }));
  const server = nhttp.createServer(app);
  const port = await listening(t, server, { proxyProtocol: 'v1' });
  const d = JSON.parse(bodyOf(await exchange(port, `PROXY TCP4 203.0.113.7 198.51.100.1 5555 80\r\n${GET('/ip')}`)));
  assert.deepStrictEqual(d, { ip: '203.0.113.7', remote: '203.0.113.7', port: 5555, front: '127.0.0.1' });
  // curl --haproxy-protocol: the header names curl's own address.
  const r = await curl(['--haproxy-protocol', `http://127.0.0.1:${port}/ip`]);
  assert.strictEqual(JSON.parse(r.stdout).ip, '127.0.0.1');
});

test('Koa: ctx.ip through PROXY v2; an allow list on listen()', async (t) => {
  const app = new Koa();
  app.use((ctx) => { ctx.body = { ip: ctx.ip }; });
  const server = nhttp.createServer(app.callback());
  const port = await listening(t, server, { proxyProtocol: 'v2', allow: ['192.0.2.0/24'] });
  const ok = await exchange(port, Buffer.concat([proxyV2('192.0.2.44', 1234, '198.51.100.1', 443), Buffer.from(GET('/'))]));
  assert.deepStrictEqual(JSON.parse(bodyOf(ok)), { ip: '192.0.2.44' });
  // A client outside the list, by the header's address: closed unanswered.
  assert.strictEqual(await exchange(port, Buffer.concat([proxyV2('10.1.1.1', 1, '198.51.100.1', 443), Buffer.from(GET('/'))])), '');
});

test('a bad list on server.listen() is an error event with the detail', async () => {
  const server = nhttp.createServer(() => {});
  const err = await new Promise((resolve) => {
    server.once('error', resolve);
    server.listen({ port: 0, host: '127.0.0.1', deny: ['127.0.0.1/8'] });
  });
  assert.strictEqual(err.code, 'NSV_EINVAL');
  assert.match(err.message, /127\.0\.0\.1\/8/);
  assert.strictEqual(server.listening, false);
});

test('Hono on serve(): remoteAddr and proxy in the connection info', async (t) => {
  const app = new Hono();
  app.get('/', (c) => c.json({ ip: c.env.remoteAddr.hostname, front: c.env.proxy && c.env.proxy.front }));
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1', proxyProtocol: 'v1' });
  t.after(() => server.close());
  const d = JSON.parse(bodyOf(await exchange(server.port, `PROXY TCP4 203.0.113.5 198.51.100.1 999 80\r\n${GET('/')}`)));
  assert.deepStrictEqual(d, { ip: '203.0.113.5', front: '127.0.0.1' });
});

test('nanosrv/http: metrics, the access event, readiness while draining', async (t) => {
  let held = null;
  const server = nhttp.createServer((req, res) => {
    if (req.url === '/metrics') return server.metricsHandler()(req, res);
    if (req.url === '/hold') { held = res; return undefined; }
    return res.end('hi');
  });
  const records = [];
  server.on('access', (r) => records.push(r));
  assert.throws(() => server.metrics(), (e) => e.code === 'ERR_SERVER_NOT_RUNNING');
  const port = await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)));
  t.after(() => { if (server.listening) server.close(); });
  assert.strictEqual((await get(`http://127.0.0.1:${port}/x`)).body, 'hi');
  const m = await get(`http://127.0.0.1:${port}/metrics`);
  assert.strictEqual(m.headers['content-type'], 'text/plain; version=0.0.4');
  assert.match(m.body, /_bucket\{le="\+Inf"\} \d+/);
  assert.ok(await until(() => records.length >= 1), 'access record');
  assert.deepStrictEqual([records[0].method, records[0].target, records[0].status], ['GET', '/x', 200]);
  assert.ok(server.metrics().requests >= 1);
  const pending = get(`http://127.0.0.1:${port}/hold`);
  await until(() => held);
  assert.strictEqual(server.draining, false);
  const closed = new Promise((r) => server.close(r));
  assert.strictEqual(server.draining, true);
  server.readinessHandler()(null, held);
  const r = await pending;
  assert.deepStrictEqual([r.status, r.body], [503, 'draining']);
  await closed;
});
