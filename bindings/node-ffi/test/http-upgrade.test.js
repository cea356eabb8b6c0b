'use strict';
// 'upgrade' and WebSockets: the same app code runs with the `ws` package's
// WebSocketServer on node:http and with nanosrv/http's WebSocketServer
// (same shape; the library does the handshake and the framing).
const test = require('node:test');
const assert = require('node:assert');
const { once } = require('events');
const ws = require('ws');
const { BACKENDS, nsvHttp, nodeHttp, start } = require('../fixtures/http/both');

// The application: an HTTP handler, a chat endpoint on /chat that echoes,
// answers binary with its length and closes on "bye", and /manual, both
// routed by the app's own 'upgrade' handler (noServer + handleUpgrade).
function app(http, WebSocketServer, opts) {
  const server = http.createServer(opts, (req, res) => res.end(`http ${req.url}`));
  const chat = new WebSocketServer({ noServer: true });
  chat.on('connection', (sock, req) => {
    sock.send(`hello ${req.url} ${sock.protocol}`);
    sock.on('message', (data, isBinary) => {
      if (isBinary) sock.send(Buffer.from([data.length]));
      else if (data.toString() === 'bye') sock.close(4000, 'done');
      else sock.send(`echo ${data}`);
    });
  });
  const manual = new WebSocketServer({ noServer: true });
  server.on('upgrade', (req, socket, head) => {
    const wss = req.url.startsWith('/chat') ? chat : manual;
    wss.handleUpgrade(req, socket, head, (sock) => {
      if (wss === chat) chat.emit('connection', sock, req);
      else sock.send('manual');
    });
  });
  return server;
}

// { server, path }: that path only; another gets 400 (as `ws` answers).
function pathApp(http, WebSocketServer, opts) {
  const server = http.createServer(opts, (req, res) => res.end('x'));
  const wss = new WebSocketServer({ server, path: '/only' });
  wss.on('connection', (sock) => sock.send('only'));
  return server;
}

async function pathTalk(base) {
  const ok = new ws.WebSocket(base.replace('http', 'ws') + '/only');
  const [m] = await once(ok, 'message');
  ok.close();
  await once(ok, 'close');
  const bad = new ws.WebSocket(base.replace('http', 'ws') + '/other');
  const status = await new Promise((resolve) => {
    bad.on('unexpected-response', (req, res) => { resolve(res.statusCode); res.resume(); bad.terminate(); });
    bad.on('error', () => {});
  });
  return [m.toString(), status];
}

async function talk(base) {
  const log = [];
  const c = new ws.WebSocket(base.replace('http', 'ws') + '/chat?x=1', ['chat', 'other']);
  const msgs = [];
  c.on('message', (d, isBinary) => msgs.push(isBinary ? [...d] : d.toString()));
  await once(c, 'open');
  log.push(['protocol', c.protocol]);
  c.send('hi');
  c.send(Buffer.from([1, 2, 3]));
  while (msgs.length < 3) await once(c, 'message');
  log.push(['msgs', msgs.slice()]);
  c.send('bye');
  const [code, reason] = await once(c, 'close');
  log.push(['close', code, reason.toString()]);
  const m = new ws.WebSocket(base.replace('http', 'ws') + '/manual');
  const [first] = await once(m, 'message');
  log.push(['manual', first.toString()]);
  m.close();
  await once(m, 'close');
  const r = await fetch(base + '/plain');
  log.push(['http', await r.text()]);
  return log;
}

for (const backend of BACKENDS) {
  test(`WebSocketServer({ server, path }) and handleUpgrade as with the ws package (${backend})`, async (t) => {
    const ref = await talk(await start(t, app(nodeHttp, ws.WebSocketServer, {})));
    const got = await talk(await start(t, app(nsvHttp, nsvHttp.WebSocketServer, { backend })));
    assert.deepStrictEqual(got, ref);
    assert.deepStrictEqual(ref[1], ['msgs', ['hello /chat?x=1 chat', 'echo hi', [3]]]);
    const refPath = await pathTalk(await start(t, pathApp(nodeHttp, ws.WebSocketServer, {})));
    const gotPath = await pathTalk(await start(t, pathApp(nsvHttp, nsvHttp.WebSocketServer, { backend })));
    assert.deepStrictEqual(gotPath, refPath);
    assert.deepStrictEqual(refPath, ['only', 400]);
  });
}
