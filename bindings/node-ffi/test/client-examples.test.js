'use strict';
// examples/gateway.js and examples/ws_bridge.js end to end: each runs as
// its own process in front of an upstream in this one (node:http, the ws
// package), driven by Node's own fetch and the ws package's client, and
// stopped by its PID with SIGTERM (a clean exit is part of the contract).
const test = require('node:test');
const assert = require('node:assert');
const http = require('node:http');
const path = require('node:path');
const crypto = require('node:crypto');
const { spawn } = require('node:child_process');
const { WebSocketServer, WebSocket } = require('ws');
require('./helpers'); // NANOSRV_LIBRARY for the children

const EXAMPLES = path.join(__dirname, '..', 'examples');
const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');

// Starts an example; resolves with its port once it prints "listening on".
function start(t, script, args) {
  const child = spawn(process.execPath, [path.join(EXAMPLES, script), '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d) => { err += d; });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  t.after(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL'); });
  const port = new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    exited.then(({ code }) => reject(new Error(`${script} exited (${code}) before listening: ${err}`)));
  });
  return { child, port, exited, stderr: () => err };
}

async function listen(t, server) {
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => { server.closeAllConnections?.(); server.close(); });
  return server.address().port;
}

test('examples/gateway.js', async (t) => {
  const upstream = http.createServer((req, res) => {
    const m = /^\/users\/(\w+)$/.exec(req.url);
    if (m && m[1] === 'nobody') { res.writeHead(404); res.end('{}'); return; }
    if (m && m[1] === 'broken') { res.writeHead(200); res.end('<html>'); return; }
    if (m) { res.setHeader('content-type', 'application/json'); res.end(JSON.stringify({ id: m[1], name: `user ${m[1]}` })); return; }
    if (req.url.startsWith('/echo')) {
      res.setHeader('x-method', req.method);
      res.setHeader('x-url', req.url);
      res.setHeader('x-length', req.headers['content-length'] || 'none');
      res.setHeader('set-cookie', ['a=1', 'b=2']);
      req.pipe(res);
      return;
    }
    if (req.url === '/slow') return; // never answers
    res.writeHead(404);
    res.end();
  });
  const up = await listen(t, upstream);
  const gw = start(t, 'gateway.js', ['--upstream', `http://127.0.0.1:${up}`, '--timeout-ms', '1000']);
  const base = `http://127.0.0.1:${await gw.port}`;

  assert.deepStrictEqual(await (await fetch(`${base}/health`)).json(), { ok: true });

  let r = await fetch(`${base}/users/7`);
  assert.strictEqual(r.status, 200);
  assert.deepStrictEqual((await r.json()).user, { id: '7', name: 'user 7' });

  r = await fetch(`${base}/users?ids=1,nobody,3`);
  assert.deepStrictEqual(await r.json(), { users: [{ id: '1', name: 'user 1' }, { id: '3', name: 'user 3' }], missing: ['nobody'] });

  r = await fetch(`${base}/users/nobody`);
  assert.strictEqual(r.status, 404);
  await r.text();
  r = await fetch(`${base}/users/broken`);
  assert.strictEqual(r.status, 502);
  assert.match((await r.json()).error, /not JSON/);

  // The pass-through streams 3 MiB both ways, query and cookies kept.
  const body = crypto.randomBytes(3 << 20);
  r = await fetch(`${base}/api/echo?q=1`, { method: 'POST', body });
  assert.strictEqual(r.status, 200);
  assert.strictEqual(r.headers.get('x-method'), 'POST');
  assert.strictEqual(r.headers.get('x-url'), '/echo?q=1');
  assert.strictEqual(r.headers.get('x-length'), String(body.length));
  assert.deepStrictEqual(r.headers.getSetCookie(), ['a=1', 'b=2']);
  assert.strictEqual(sha(Buffer.from(await r.arrayBuffer())), sha(body));

  r = await fetch(`${base}/api/slow`);
  assert.strictEqual(r.status, 504);

  upstream.closeAllConnections();
  await new Promise((res) => upstream.close(res));
  r = await fetch(`${base}/users/1`);
  assert.strictEqual(r.status, 502);
  assert.strictEqual((await r.json()).code, 'NSV_ECONNREFUSED');

  gw.child.kill('SIGTERM');
  assert.deepStrictEqual(await gw.exited, { code: 0, signal: null }, gw.stderr());
});

test('examples/ws_bridge.js', async (t) => {
  const server = http.createServer();
  const wss = new WebSocketServer({ server });
  const upstreamSaw = [];
  wss.on('connection', (sock, req) => {
    upstreamSaw.push(req.url);
    sock.on('message', (data, isBinary) => {
      if (!isBinary && String(data) === 'close please') sock.close(4003, 'upstream closed');
      else sock.send(isBinary ? data : `up: ${data}`, { binary: isBinary });
    });
  });
  const up = await listen(t, server);
  t.after(() => wss.close());
  const br = start(t, 'ws_bridge.js', ['--upstream', `ws://127.0.0.1:${up}/feed`]);
  const port = await br.port;

  const c = new WebSocket(`ws://127.0.0.1:${port}/bridge?room=7`);
  const got = [];
  c.on('message', (data, isBinary) => got.push(isBinary ? Buffer.from(data) : String(data)));
  // Sent at once: the bridge holds them until its upstream connection is open.
  await new Promise((resolve, reject) => { c.on('open', resolve); c.on('error', reject); });
  c.send('one');
  c.send(Buffer.from([1, 2, 3]));
  const big = crypto.randomBytes(1 << 20);
  c.send(big);
  c.send('close please');
  const [code, reason] = await new Promise((resolve) => c.on('close', (cd, rs) => resolve([cd, String(rs)])));
  assert.deepStrictEqual(got.slice(0, 2), ['up: one', Buffer.from([1, 2, 3])]);
  assert.strictEqual(got.length, 3);
  assert.strictEqual(Buffer.compare(got[2], big), 0);
  assert.deepStrictEqual([code, reason], [4003, 'upstream closed']);
  assert.deepStrictEqual(upstreamSaw, ['/feed?room=7']);

  // A client that closes: the upstream hears the same code.
  const upClosed = new Promise((resolve) => wss.once('connection', (sock) => sock.on('close', (cd, rs) => resolve([cd, String(rs)]))));
  const c2 = new WebSocket(`ws://127.0.0.1:${port}/bridge`);
  await new Promise((resolve) => c2.on('open', resolve));
  c2.send('hello');
  await new Promise((resolve) => c2.once('message', resolve));
  c2.close(4100, 'client leaves');
  assert.deepStrictEqual(await upClosed, [4100, 'client leaves']);

  br.child.kill('SIGTERM');
  assert.deepStrictEqual(await br.exited, { code: 0, signal: null }, br.stderr());
});
