'use strict';
// The WHATWG-shaped WebSocket client (srv.WebSocket, nanosrv.WebSocketClient)
// against the library's own WebSocket endpoint and the ws package's server:
// messages both ways, binaryType, subprotocols, the close handshake from
// either side, abnormal closes, bufferedAmount, and the errors the
// standard names.
const test = require('node:test');
const assert = require('node:assert');
const http = require('node:http');
const crypto = require('node:crypto');
const { WebSocketServer } = require('ws');
const { nanosrv, serve } = require('./helpers');
const { makeCerts } = require('./certs');

const turn = () => new Promise((r) => setImmediate(r));
const once = (target, type) => new Promise((r) => target.addEventListener(type, r, { once: true }));

// Everything a client saw, in order, until its close event.
function record(ws) {
  const seen = [];
  ws.addEventListener('open', () => seen.push(['open']));
  ws.addEventListener('message', (e) => seen.push(['message', e.data]));
  ws.addEventListener('error', (e) => seen.push(['error', e.error && e.error.code]));
  const closed = new Promise((resolve) => ws.addEventListener('close', (e) => {
    seen.push(['close', e.code, e.reason, e.wasClean]);
    resolve(e);
  }));
  return { seen, closed };
}

async function wsPackageServer(t, opts, onConn) {
  const server = http.createServer((req, res) => { res.writeHead(200); res.end('not a websocket'); });
  const wss = new WebSocketServer({ server, ...opts });
  wss.on('connection', onConn);
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => { for (const c of wss.clients) c.terminate(); wss.close(); server.close(); });
  return `ws://127.0.0.1:${server.address().port}`;
}

test('against the library\'s own WebSocket endpoint', async (t) => {
  const state = { closes: [] };
  const { srv, port } = await serve(t, 'koffi', {}, (s) => {
    s.ws('/echo', {
      message(ws, data, isBinary) {
        if (data === 'close-me') ws.close(4001, 'server says bye');
        else ws.send(isBinary ? data : `echo ${data}`);
      },
      close(ws, code, reason) { state.closes.push([code, reason]); },
    });
  });
  const url = `ws://127.0.0.1:${port}/echo`;

  await t.test('open, text and binary both ways, client close handshake', async () => {
    const ws = new srv.WebSocket(url);
    assert.strictEqual(ws.readyState, ws.CONNECTING);
    assert.strictEqual(srv.WebSocket.OPEN, 1);
    assert.strictEqual(ws.url, url);
    assert.strictEqual(ws.binaryType, 'nodebuffer');
    const { seen, closed } = record(ws);
    await once(ws, 'open');
    assert.strictEqual(ws.readyState, ws.OPEN);
    assert.strictEqual(ws.protocol, '');
    ws.send('hi');
    ws.send(Buffer.from([1, 2, 3]));
    ws.send(new Uint8Array([4, 5]).buffer);
    ws.send(new DataView(new Uint8Array([9, 8, 7, 6]).buffer, 1, 2));
    ws.send(new Blob([Buffer.from('blob!')])); // read asynchronously: order is kept
    ws.send('after the blob');
    let n = 0;
    ws.onmessage = () => { if (++n === 6) ws.close(4000, 'client bye'); };
    await closed;
    assert.deepStrictEqual(seen, [
      ['open'],
      ['message', 'echo hi'],
      ['message', Buffer.from([1, 2, 3])],
      ['message', Buffer.from([4, 5])],
      ['message', Buffer.from([8, 7])],
      ['message', Buffer.from('blob!')],
      ['message', 'echo after the blob'],
      ['close', 4000, '', true], // the code the server echoed; its frame has no reason
    ]);
    assert.strictEqual(ws.readyState, ws.CLOSED);
    while (state.closes.length === 0) await turn();
    assert.deepStrictEqual(state.closes.shift(), [4000, 'client bye']);
  });

  await t.test('binaryType arraybuffer and blob', async () => {
    const ws = new srv.WebSocket(url);
    await once(ws, 'open');
    ws.binaryType = 'arraybuffer';
    ws.binaryType = 'bogus'; // ignored, as the standard says
    assert.strictEqual(ws.binaryType, 'arraybuffer');
    ws.send(Buffer.from([1, 2]));
    let e = await once(ws, 'message');
    assert.ok(e.data instanceof ArrayBuffer);
    assert.deepStrictEqual([...new Uint8Array(e.data)], [1, 2]);
    ws.binaryType = 'blob';
    ws.send(Buffer.from([3]));
    e = await once(ws, 'message');
    assert.ok(e.data instanceof Blob);
    assert.deepStrictEqual([...new Uint8Array(await e.data.arrayBuffer())], [3]);
    ws.close();
    const c = await once(ws, 'close');
    assert.strictEqual(c.code, 1000);
  });

  await t.test('the server closes: CloseEvent with its code and reason', async () => {
    const ws = new srv.WebSocket(url);
    const { closed } = record(ws);
    ws.onopen = () => ws.send('close-me');
    const e = await closed;
    assert.strictEqual(e.code, 4001);
    assert.strictEqual(e.reason, 'server says bye');
    assert.strictEqual(e.wasClean, true);
    assert.ok(e instanceof nanosrv.CloseEvent);
  });

  await t.test('bufferedAmount counts what the worker has not taken, then falls to 0', async () => {
    const ws = new srv.WebSocket(url);
    await once(ws, 'open');
    const big = crypto.randomBytes(1 << 20);
    const echoed = once(ws, 'message'); // may come while bufferedAmount is watched
    ws.send(big);
    assert.ok(ws.bufferedAmount >= big.length, `bufferedAmount ${ws.bufferedAmount} right after a 1 MiB send`);
    for (let i = 0; i < 10000 && ws.bufferedAmount > 0; i++) await turn();
    assert.strictEqual(ws.bufferedAmount, 0);
    const e = await echoed;
    assert.ok(Buffer.compare(e.data, big) === 0);
    ws.close();
    await once(ws, 'close');
    ws.send('late'); // after the close: dropped, but counted
    assert.strictEqual(ws.bufferedAmount, 4);
  });

  await t.test('handler attributes and listeners both fire; a replaced handler keeps its place', async () => {
    const ws = new srv.WebSocket(url);
    const order = [];
    ws.onmessage = () => order.push('first handler');
    ws.addEventListener('message', () => order.push('listener'));
    ws.onmessage = () => order.push('handler');
    assert.strictEqual(typeof ws.onmessage, 'function');
    ws.onopen = () => ws.send('x');
    await once(ws, 'message');
    assert.deepStrictEqual(order, ['handler', 'listener']);
    ws.onmessage = null;
    assert.strictEqual(ws.onmessage, null);
    ws.close();
    await once(ws, 'close');
  });

  await t.test('errors the standard names', async () => {
    assert.throws(() => new srv.WebSocket('not a url'), { name: 'SyntaxError' });
    assert.throws(() => new srv.WebSocket('ftp://127.0.0.1/'), { name: 'SyntaxError' });
    assert.throws(() => new srv.WebSocket(`${url}#frag`), { name: 'SyntaxError' });
    assert.throws(() => new srv.WebSocket(url, ['a b']), { name: 'SyntaxError' });
    assert.throws(() => new srv.WebSocket(url, ['chat', 'CHAT']), { name: 'SyntaxError' });
    const ws = new srv.WebSocket(url.replace('ws:', 'http:')); // mapped to ws:
    assert.strictEqual(ws.url, url);
    assert.throws(() => ws.send('too early'), { name: 'InvalidStateError' });
    await once(ws, 'open');
    assert.throws(() => ws.close(1001), { name: 'InvalidAccessError' });
    assert.throws(() => ws.close(1000, 'x'.repeat(124)), { name: 'SyntaxError' });
    assert.strictEqual(ws.readyState, ws.OPEN);
    ws.close(1000);
    await once(ws, 'close');
  });

  await t.test('close() while connecting: error, then close 1006', async () => {
    const ws = new srv.WebSocket(url);
    const { seen, closed } = record(ws);
    ws.close();
    assert.strictEqual(ws.readyState, ws.CLOSING);
    await closed;
    assert.deepStrictEqual(seen.map((s) => s[0]), ['error', 'close']);
    assert.strictEqual(seen[1][1], 1006);
    assert.strictEqual(seen[1][3], false);
  });

  await t.test('module-level WebSocketClient', async () => {
    const ws = new nanosrv.WebSocketClient(url);
    ws.onopen = () => ws.send('shared');
    const e = await once(ws, 'message');
    assert.strictEqual(e.data, 'echo shared');
    ws.close();
    await once(ws, 'close');
  });
});

test('against the ws package and failing servers', async (t) => {
  const { srv } = await serve(t, 'koffi', {});

  await t.test('subprotocol, headers, a 4 MiB message, the server\'s close code', async () => {
    let seenAuth = null;
    const base = await wsPackageServer(t, {
      handleProtocols: (protocols) => (protocols.has('v2') ? 'v2' : false),
    }, (sock, req) => {
      seenAuth = req.headers.authorization;
      sock.on('message', (data, isBinary) => {
        if (!isBinary && String(data) === 'bye') sock.close(4002, 'ws says bye');
        else sock.send(data, { binary: isBinary });
      });
    });
    const ws = new srv.WebSocket(`${base}/x?y=1`, { protocols: ['v1', 'v2'], headers: { authorization: 'Bearer abc' } });
    const { closed } = record(ws);
    await once(ws, 'open');
    assert.strictEqual(ws.protocol, 'v2');
    assert.strictEqual(seenAuth, 'Bearer abc');
    const big = crypto.randomBytes(4 << 20);
    ws.send(big);
    const e = await once(ws, 'message');
    assert.strictEqual(Buffer.compare(e.data, big), 0);
    ws.send('héllo');
    assert.strictEqual((await once(ws, 'message')).data, 'héllo');
    ws.send('bye');
    const c = await closed;
    assert.deepStrictEqual([c.code, c.reason, c.wasClean], [4002, 'ws says bye', true]);
  });

  await t.test('the server drops the TCP connection: error, close 1006, not clean', async () => {
    const base = await wsPackageServer(t, {}, (sock) => sock.on('message', () => sock.terminate()));
    const ws = new srv.WebSocket(base);
    const { seen, closed } = record(ws);
    ws.onopen = () => ws.send('drop me');
    const c = await closed;
    assert.strictEqual(c.code, 1006);
    assert.strictEqual(c.wasClean, false);
    assert.deepStrictEqual(seen.map((s) => s[0]), ['open', 'error', 'close']);
  });

  await t.test('refused and not-a-WebSocket answers: error (cause named), then close 1006', async () => {
    const free = http.createServer();
    await new Promise((r) => free.listen(0, '127.0.0.1', r));
    const port = free.address().port;
    await new Promise((r) => free.close(r));
    let ws = new srv.WebSocket(`ws://127.0.0.1:${port}/`);
    let r = record(ws);
    await r.closed;
    assert.deepStrictEqual(r.seen, [['error', 'NSV_ECONNREFUSED'], ['close', 1006, '', false]]);
    assert.strictEqual(ws.readyState, ws.CLOSED);

    const plain = http.createServer((req, res) => { res.writeHead(200); res.end('plain http'); });
    await new Promise((res) => plain.listen(0, '127.0.0.1', res));
    t.after(() => plain.close());
    ws = new srv.WebSocket(`ws://127.0.0.1:${plain.address().port}/`);
    r = record(ws);
    await r.closed;
    assert.deepStrictEqual(r.seen, [['error', 'NSV_EPARSE'], ['close', 1006, '', false]]);
  });
});

test('wss: verified against the client CA, refused without it', async (t) => {
  const certs = makeCerts();
  t.after(() => certs.cleanup());
  const srv = nanosrv.createServer({ tlsCertFile: certs.p('srv.crt'), tlsKeyFile: certs.p('srv.key') });
  srv.ws('/echo', { message(ws, data) { ws.send(data); } });
  const port = await srv.listen('wss://127.0.0.1:0');
  t.after(() => srv.close(1000));
  const client = nanosrv.createServer({ tlsClientCaPem: certs.read('ca.crt') });
  t.after(() => client.close(50));
  const ws = new client.WebSocket(`wss://localhost:${port}/echo`); // the certificate names localhost
  const { seen, closed } = record(ws);
  ws.onopen = () => ws.send('over tls');
  ws.onmessage = () => ws.close();
  await closed;
  assert.deepStrictEqual(seen, [['open'], ['message', 'over tls'], ['close', 1000, '', true]]);
  const other = nanosrv.createServer({ tlsClientCaPem: certs.read('other.crt') });
  t.after(() => other.close(50));
  const bad = new other.WebSocket(`wss://localhost:${port}/echo`);
  const r = record(bad);
  await r.closed;
  assert.deepStrictEqual(r.seen, [['error', 'NSV_ETLS'], ['close', 1006, '', false]]);
});
