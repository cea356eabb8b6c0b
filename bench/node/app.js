#!/usr/bin/env node
// app.js - the Node app cases of bench/run.py (bench/METHOD.md "Node apps"):
// one small app per framework, the same code on nanosrv and on node:http.
//
//   node bench/node/app.js APP --on nanosrv|node [--port N]
//
// APP is express, fastify, hono or native. Every app answers
//   GET /plaintext    "Hello, World!" (text/plain)
//   GET /json         {"message":"Hello, World!"}
//   GET /users/:id    {"user_id":N} (the path parameter as a number)
// --on nanosrv runs Express and Fastify on nanosrv/http (Fastify through
// serverFactory), Hono on serve({ fetch }) of require('nanosrv'), and native
// on require('nanosrv')'s own server; --on node runs the same app on
// node:http (Hono through the small adapter below, native as a plain
// http.createServer handler). Prints "listening on PORT"; SIGTERM exits.
// The frameworks come from bindings/node-ffi/node_modules (its
// devDependencies, installed by bindings/node-ffi/install.sh).
'use strict';
const path = require('path');
const { createRequire } = require('module');

const ROOT = path.join(__dirname, '..', '..');
const PKG = path.join(ROOT, 'bindings', 'node-ffi');
if (!process.env.NANOSRV_LIBRARY) process.env.NANOSRV_LIBRARY = path.join(ROOT, 'build', 'libnanosrv.so.1');
// Resolves like a file of the package: its node_modules, and 'nanosrv'
// itself through the package's exports.
const req = createRequire(path.join(PKG, 'package.json'));

function usage() {
  process.stderr.write('usage: app.js express|fastify|hono|native --on nanosrv|node [--port N]\n');
  process.exit(2);
}

const argv = process.argv.slice(2);
const app = argv[0];
let on = null, port = 0;
for (let i = 1; i < argv.length; i += 2) {
  if (argv[i] === '--on') on = argv[i + 1];
  else if (argv[i] === '--port') port = Number(argv[i + 1]);
  else usage();
}
if (!['express', 'fastify', 'hono', 'native'].includes(app) || !['nanosrv', 'node'].includes(on)) usage();

const HOST = '127.0.0.1';
const TEXT = 'Hello, World!';
const ready = (p) => console.log(`listening on ${p}`);
const httpModule = () => (on === 'nanosrv' ? req('nanosrv/http') : require('http'));

function express() {
  const e = req('express');
  const a = e();
  a.get('/plaintext', (rq, rs) => { rs.type('text/plain').send(TEXT); });
  a.get('/json', (rq, rs) => { rs.json({ message: TEXT }); });
  a.get('/users/:id', (rq, rs) => { rs.json({ user_id: Number(rq.params.id) }); });
  const server = httpModule().createServer(a);
  server.keepAliveTimeout = 0;
  server.listen(port, HOST, () => ready(server.address().port));
}

async function fastify() {
  const http = httpModule();
  const f = req('fastify')({
    logger: false,
    serverFactory: (handler) => {
      const s = http.createServer(handler);
      s.keepAliveTimeout = 0;
      return s;
    },
  });
  f.get('/plaintext', (rq, rp) => { rp.type('text/plain').send(TEXT); });
  f.get('/json', () => ({ message: TEXT }));
  f.get('/users/:id', (rq) => ({ user_id: Number(rq.params.id) }));
  await f.listen({ port, host: HOST });
  ready(f.server.address().port);
}

// node:http to a fetch handler: a WHATWG Request in, the Response's status,
// headers and body out (the body read whole: these answers are small).
function fetchOnNodeHttp(fetch) {
  const { Readable } = require('stream');
  return async (rq, rs) => {
    try {
      const init = { method: rq.method, headers: rq.headers };
      if (rq.method !== 'GET' && rq.method !== 'HEAD') { init.body = Readable.toWeb(rq); init.duplex = 'half'; }
      const r = await fetch(new Request(`http://${rq.headers.host || HOST}${rq.url}`, init));
      const h = {};
      r.headers.forEach((v, k) => { if (k !== 'set-cookie') h[k] = v; });
      const cookies = r.headers.getSetCookie();
      if (cookies.length) h['set-cookie'] = cookies;
      const body = r.body ? Buffer.from(await r.arrayBuffer()) : null;
      if (body) h['content-length'] = body.length;
      rs.writeHead(r.status, h);
      rs.end(body);
    } catch (e) {
      rs.statusCode = 500;
      rs.end();
    }
  };
}

function hono() {
  const { Hono } = req('hono');
  const a = new Hono();
  a.get('/plaintext', (c) => c.text(TEXT));
  a.get('/json', (c) => c.json({ message: TEXT }));
  a.get('/users/:id', (c) => c.json({ user_id: Number(c.req.param('id')) }));
  if (on === 'nanosrv') {
    const { serve } = req('nanosrv');
    if (typeof serve !== 'function') { console.error('app.js: this nanosrv has no serve()'); process.exit(3); }
    const s = serve({ fetch: a.fetch, port, hostname: HOST });
    ready(s.port);
    return;
  }
  const server = require('http').createServer(fetchOnNodeHttp(a.fetch));
  server.keepAliveTimeout = 0;
  server.listen(port, HOST, () => ready(server.address().port));
}

const USER = /^\/users\/([^/?]+)$/;

async function native() {
  if (on === 'nanosrv') {
    const srv = req('nanosrv').createServer();
    srv.get('/plaintext', (rq, rs) => { rs.setHeader('Content-Type', 'text/plain'); rs.end(TEXT); });
    srv.get('/json', (rq, rs) => { rs.json({ message: TEXT }); });
    srv.get('/users/:id', (rq, rs) => { rs.json({ user_id: Number(rq.params.id) }); });
    ready(await srv.listen(port, HOST));
    return;
  }
  const json = (rs, v) => {
    const b = JSON.stringify(v);
    rs.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(b) });
    rs.end(b);
  };
  const server = require('http').createServer((rq, rs) => {
    const q = rq.url.indexOf('?');
    const p = q < 0 ? rq.url : rq.url.slice(0, q);
    let m;
    if (rq.method !== 'GET') { rs.statusCode = 404; rs.end(); } else if (p === '/plaintext') {
      rs.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': TEXT.length });
      rs.end(TEXT);
    } else if (p === '/json') json(rs, { message: TEXT });
    else if ((m = USER.exec(p))) json(rs, { user_id: Number(m[1]) });
    else { rs.statusCode = 404; rs.end(); }
  });
  server.keepAliveTimeout = 0;
  server.listen(port, HOST, () => ready(server.address().port));
}

process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));
Promise.resolve({ express, fastify, hono, native }[app]()).catch((e) => { console.error(e); process.exit(1); });
