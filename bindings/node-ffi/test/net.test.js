'use strict';
// nanosrv/net against node:net: programs written for node:net
// (fixtures/node-net) run unchanged except the require, against real node:net
// peers and raw sockets; 8 MiB random payloads through examples/tcp_echo.js
// and through the proxy; half-close; pause/resume and write()/'drain'
// backpressure; destroy as a reset; connect errors; wakeups and timers.
const { describe, test, before, after } = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const crypto = require('node:crypto');
const realNet = require('node:net');
const { spawn } = require('node:child_process');
const { once } = require('node:events');
require('./helpers');
const net = require('../lib/net');

const PKG = path.join(__dirname, '..');
// Outside test/: node --test would run anything under it.
const PROGRAMS = path.join(PKG, 'fixtures', 'node-net');
const TCP_ECHO = path.join(PKG, 'examples', 'tcp_echo.js');
const BIG = 8 << 20;
const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');

// A temporary directory where require('nanosrv/net') resolves to this package.
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nsv-node-net-'));
fs.mkdirSync(path.join(tmp, 'node_modules'));
fs.symlinkSync(PKG, path.join(tmp, 'node_modules', 'nanosrv'), 'dir');
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

// The program as written for node:net, or with its one require changed.
function program(name, onNanosrv) {
  const src = fs.readFileSync(path.join(PROGRAMS, name), 'utf8');
  if (!onNanosrv) return path.join(PROGRAMS, name);
  const changed = src.replace("require('node:net')", "require('nanosrv/net')");
  assert.notStrictEqual(changed, src, `${name} requires node:net`);
  const file = path.join(tmp, name);
  fs.writeFileSync(file, changed);
  return file;
}

const children = [];
after(() => { for (const c of children) if (c.exitCode === null) c.kill('SIGTERM'); });

async function startServer(file, args = []) {
  const child = spawn(process.execPath, [file, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  let out = '';
  for await (const d of child.stdout) {
    out += d;
    const m = /listening on (\d+)/.exec(out);
    if (m) return +m[1];
  }
  throw new Error(`${file} did not start`);
}

async function runClient(file, args) {
  const child = spawn(process.execPath, [file, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  const [code] = await once(child, 'exit');
  assert.strictEqual(code, 0, `client exited with ${code}: ${out}`);
  const m = /^sent (\d+) (\w+) received (\d+) (\w+)$/m.exec(out);
  assert.ok(m, out);
  return { sent: +m[1], out: m[2], received: +m[3], in: m[4] };
}

// A raw-socket client (node's own net, no stream helpers): sends data,
// shuts its write side, reads to EOF.
function rawEcho(port, data) {
  return new Promise((resolve, reject) => {
    const s = realNet.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    const got = [];
    s.on('data', (d) => got.push(d));
    s.on('end', () => { s.destroy(); resolve(Buffer.concat(got)); });
    s.on('error', reject);
    s.end(data);
  });
}

describe('node:net programs on nanosrv/net', { timeout: 120000 }, () => {
  test('echo server on nanosrv/net, client on node:net: 8 MiB', async () => {
    const port = await startServer(program('net_echo_server.js', true), ['--port', '0']);
    const r = await runClient(program('net_echo_client.js', false), ['--port', String(port), '--bytes', String(BIG)]);
    assert.strictEqual(r.received, BIG);
    assert.strictEqual(r.in, r.out);
  });

  test('echo client on nanosrv/net, server on node:net: 8 MiB', async () => {
    const port = await startServer(program('net_echo_server.js', false), ['--port', '0']);
    const r = await runClient(program('net_echo_client.js', true), ['--port', String(port), '--bytes', String(BIG)]);
    assert.strictEqual(r.received, BIG);
    assert.strictEqual(r.in, r.out);
  });

  test('both on nanosrv/net, through the node:net proxy on nanosrv/net: 8 MiB', async () => {
    const echo = await startServer(program('net_echo_server.js', true), ['--port', '0']);
    const proxy = await startServer(program('net_proxy.js', true), ['--port', '0', '--upstream', String(echo)]);
    const r = await runClient(program('net_echo_client.js', true), ['--port', String(proxy), '--bytes', String(BIG)]);
    assert.strictEqual(r.received, BIG);
    assert.strictEqual(r.in, r.out);
  });
});

describe('examples/tcp_echo.js with raw sockets', { timeout: 120000 }, () => {
  let port, proxy;
  before(async () => {
    port = await startServer(TCP_ECHO, ['--port', '0']);
    proxy = await startServer(program('net_proxy.js', true), ['--port', '0', '--upstream', String(port)]);
  });

  test('random payloads up to 8 MiB echoed in order, then the half-close', async () => {
    for (const n of [0, 1, 1000, 65536 + 7, 1 << 20, BIG]) {
      const data = crypto.randomBytes(n);
      const got = await rawEcho(port, data);
      assert.strictEqual(got.length, n);
      assert.strictEqual(sha(got), sha(data), `${n} bytes`);
    }
  });

  test('the same through the proxy', async () => {
    for (const n of [1, 300000, BIG]) {
      const data = crypto.randomBytes(n);
      const got = await rawEcho(proxy, data);
      assert.strictEqual(sha(got), sha(data), `${n} bytes through the proxy`);
    }
  });

  test('half-close: the server keeps sending after the client shut its side', async () => {
    const s = realNet.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    await once(s, 'connect');
    s.write('first ');
    const [d] = await once(s, 'data');
    assert.strictEqual(d.toString(), 'first ');
    s.end('last');
    const got = [];
    s.on('data', (x) => got.push(x));
    await once(s, 'end');
    assert.strictEqual(Buffer.concat(got).toString(), 'last');
    s.destroy();
  });
});

describe('nanosrv/net in process', { timeout: 120000 }, () => {
  // A listening server, closed (and unref'd, so that a failed test cannot
  // hold the process) when the test ends.
  async function listen(t, opts, onConn) {
    const srv = net.createServer(opts, onConn);
    srv.listen(0, '127.0.0.1');
    await once(srv, 'listening');
    t.after(() => { srv.unref(); if (srv.listening) srv.close(); });
    return srv;
  }

  test('address, remote address and port, byte counts, close', async (t) => {
    let server;
    const srv = await listen(t, {}, (s) => {
      server = s;
      s.on('data', (d) => s.end(d));
    });
    const { port, family, address } = srv.address();
    assert.strictEqual(family, 'IPv4');
    assert.strictEqual(address, '127.0.0.1');
    const c = realNet.connect(port, '127.0.0.1');
    await once(c, 'connect');
    c.write('hello');
    const [d] = await once(c, 'data');
    assert.strictEqual(d.toString(), 'hello');
    await once(c, 'end');
    assert.strictEqual(server.remoteAddress, '127.0.0.1');
    assert.strictEqual(server.remotePort, c.localPort);
    assert.strictEqual(server.bytesRead, 5);
    assert.strictEqual(server.bytesWritten, 5);
    assert.strictEqual(server.address().port, port);
    c.destroy();
    await new Promise((resolve) => srv.close(resolve));
    assert.strictEqual(srv.listening, false);
  });

  test('pause() stops reading the socket, resume() takes it up again', async (t) => {
    const total = 32 << 20;
    let server;
    const done = new Promise((resolve) => {
      listen(t, { pauseOnConnect: true }, (s) => {
        server = s;
        const h = crypto.createHash('sha256');
        let n = 0;
        s.on('wakeup', () => {});
        s.on('data', (d) => { n += d.length; h.update(d); });
        s.on('end', () => { s.end(); resolve({ n, digest: h.digest('hex') }); });
      }).then((srv) => { done.srv = srv; });
    });
    while (!done.srv) await new Promise((r) => setImmediate(r));
    const data = crypto.randomBytes(total);
    const c = realNet.connect(done.srv.address().port, '127.0.0.1');
    await once(c, 'connect');
    c.end(data);
    while (!server) await new Promise((r) => setImmediate(r));
    // Round trips through the library (each wakeup comes after the
    // connection's earlier events): reading has stopped, far short of the payload.
    for (let i = 0; i < 20; i++) {
      assert.ok(done.srv.wakeup(server, 'tick'));
      await once(server, 'wakeup');
      await new Promise((r) => setImmediate(r));
    }
    assert.ok(server.isPaused());
    assert.ok(server.bytesRead < total / 2, `read ${server.bytesRead} of ${total} while paused`);
    server.resume();
    const r = await done;
    assert.strictEqual(r.n, total);
    assert.strictEqual(r.digest, sha(data));
    c.destroy();
    done.srv.close();
  });

  test("write() returns false past the high water mark and 'drain' follows", async (t) => {
    const chunk = Buffer.alloc(65536, 7);
    const LIMIT = 64 << 20;
    let s;
    const srv = await listen(t, {}, (sock) => { s = sock; });
    const c = realNet.connect(srv.address().port, '127.0.0.1');
    c.pause(); // the client does not read: the server's output backs up
    await once(c, 'connect');
    while (!s) await new Promise((r) => setImmediate(r));
    // Write until 'drain' stops coming: after each false, ten round trips
    // through the library (wakeups) without 'drain' count as blocked.
    let written = 0, blocked = false, drained = null;
    while (written < LIMIT) {
      written += chunk.length;
      if (s.write(chunk)) continue;
      let got = false;
      drained = once(s, 'drain').then(() => { got = true; });
      for (let i = 0; i < 10 && !got; i++) {
        srv.wakeup(s, '');
        await once(s, 'wakeup');
        await new Promise((r) => setImmediate(r));
      }
      if (!got) { blocked = true; break; }
    }
    assert.ok(blocked, `write() kept draining up to ${written} bytes to a client that does not read`);
    assert.ok(s.writableNeedDrain);
    let got = 0;
    c.on('data', (d) => { got += d.length; });
    c.resume();
    await drained; // the client reads: room again
    s.end();
    await once(c, 'end');
    assert.strictEqual(got, written);
    c.destroy();
  });

  test('destroy() resets the connection; end() half-closes', async (t) => {
    const srv = await listen(t, { allowHalfOpen: true }, (s) => {
      s.once('data', (d) => {
        if (d.toString() === 'reset') { s.destroy(); return; }
        s.end('bye');
        s.on('data', () => {}); // our side is ended; the client's is read on (allowHalfOpen)
      });
    });
    const port = srv.address().port;
    const a = realNet.connect(port, '127.0.0.1');
    a.write('reset');
    const [err] = await once(a, 'error');
    assert.strictEqual(err.code, 'ECONNRESET');
    const b = realNet.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    b.write('hi');
    const got = [];
    b.on('data', (d) => got.push(d));
    await once(b, 'end');
    assert.strictEqual(Buffer.concat(got).toString(), 'bye');
    b.write('still open'); // our side is open: the server reads on (allowHalfOpen)
    b.end();
    await once(b, 'close');
    srv.close();
  });

  test('connect errors carry the node:net codes', async (t) => {
    const probe = realNet.createServer();
    probe.listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const { port } = probe.address();
    await new Promise((r) => probe.close(r));
    const s = net.connect(port, '127.0.0.1');
    const closed = new Promise((resolve) => s.on('close', resolve)); // once() would reject on 'error'
    const [err] = await once(s, 'error');
    assert.strictEqual(err.code, 'ECONNREFUSED');
    await closed;
    assert.throws(() => net.connect({ port: 70000 }), { code: 'ERR_SOCKET_BAD_PORT' });
  });

  test('server.wakeup(socket, data): the socket and the server emit it', async (t) => {
    let server;
    const srv = await listen(t, {}, (s) => { server = s; s.resume(); });
    const c = realNet.connect(srv.address().port, '127.0.0.1');
    await once(c, 'connect');
    while (!server) await new Promise((r) => setImmediate(r));
    const both = Promise.all([once(server, 'wakeup'), once(srv, 'wakeup')]);
    assert.strictEqual(srv.wakeup(server, Buffer.from('payload')), true);
    const [[a], [id, b]] = await both;
    assert.strictEqual(a.toString(), 'payload');
    assert.strictEqual(id, server.id);
    assert.strictEqual(b.toString(), 'payload');
    c.destroy();
    await once(server, 'close');
    // The library closes the connection once our end is flushed (bounded wait).
    for (let i = 0; i < 2000 && srv.wakeup(server, 'late'); i++) await new Promise((r) => setTimeout(r, 5));
    assert.strictEqual(srv.wakeup(server, 'late'), false); // gone: false, no exception
    srv.close();
  });
});
