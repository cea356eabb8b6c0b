'use strict';
// examples/echo.js's operations flags, as a separate process: the "peer",
// "peer_port" and "front" fields behind --proxy-protocol, GET /metrics,
// /healthz and /readyz, --access-log lines on stdout, --allow, a bad list
// (exit 2), --listen-fd and systemd socket activation (LISTEN_PID and
// LISTEN_FDS with the socket as fd 3), and the SIGTERM drain (exit 0).
const test = require('node:test');
const assert = require('node:assert');
const net = require('node:net');
const path = require('node:path');
const { spawn } = require('node:child_process');
require('./helpers'); // sets NANOSRV_LIBRARY for the child
const { exchange, bodyOf, curl, get, until } = require('./ops-helpers');

const ECHO = path.join(__dirname, '..', 'examples', 'echo.js');
const C_ECHO = path.join(__dirname, '..', '..', '..', process.env.NSV_BUILD || 'build', 'echo-server');

// Starts echo.js (argv after the script, or a full command with opts.cmd)
// and resolves once it printed its port; out() is all of its stdout so far.
async function start(t, argv, opts = {}) {
  const child = spawn(opts.cmd || process.execPath, opts.cmd ? argv : [ECHO, ...argv],
    { stdio: opts.stdio || ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...opts.env } });
  let out = '', err = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { err += d; });
  const exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  t.after(() => { if (child.exitCode === null) child.kill('SIGKILL'); });
  const port = await until(() => { const m = /listening on (\d+)/.exec(out); return (m && +m[1]) || child.exitCode !== null; }, 250, 20);
  return { child, port: port === true ? null : port, out: () => out, err: () => err, exited };
}

test('--proxy-protocol: peer, peer_port and front; /metrics, /healthz, /readyz; --access-log combined', async (t) => {
  const e = await start(t, ['--port', '0', '--proxy-protocol', '--access-log', 'combined', '--drain-ms', '2000']);
  assert.ok(e.port, e.err());
  const raw = await exchange(e.port, 'PROXY TCP4 203.0.113.7 198.51.100.1 5555 80\r\nGET /who?x=1 HTTP/1.1\r\nHost: x\r\nUser-Agent: probe\r\nConnection: close\r\n\r\n');
  const d = JSON.parse(bodyOf(raw));
  assert.deepStrictEqual([d.method, d.path, d.query, d.peer, d.peer_port, d.front], ['GET', '/who', 'x=1', '203.0.113.7', 5555, '127.0.0.1']);
  const c = await curl(['--haproxy-protocol', `http://127.0.0.1:${e.port}/metrics`, `http://127.0.0.1:${e.port}/healthz`, `http://127.0.0.1:${e.port}/readyz`, '-w', '%{content_type}\\n']);
  assert.strictEqual(c.code, 0, c.stderr);
  assert.match(c.stdout, /^text\/plain; version=0\.0\.4$/m);
  assert.match(c.stdout, /^nanosrv_\w+_bucket\{le="\+Inf"\} \d+$/m);
  assert.match(c.stdout, /^ok/m);
  assert.match(c.stdout, /^ready/m);
  const lines = (await until(() => { const l = e.out().split('\n').filter((x) => / - - \[/.test(x)); return l.length >= 4 && l; })) || [];
  assert.match(lines[0], /^203\.0\.113\.7 - - \[[^\]]+\] "GET \/who\?x=1 HTTP\/1\.1" 200 \d+ "-" "probe"$/);
  assert.ok(lines.slice(1).every((l) => l.startsWith('127.0.0.1 - - [')), lines.join('\n'));
  assert.ok(e.out().startsWith('listening on '), 'access lines come after the listening line');
  // Without the header: closed, nothing answered.
  assert.strictEqual(await exchange(e.port, 'GET / HTTP/1.1\r\nHost: x\r\n\r\n'), '');
  e.child.kill('SIGTERM');
  assert.strictEqual(await e.exited, 0);
});

test('--allow: 127.0.0.2 refused, 127.0.0.1 served; a bad list exits 2 with the detail', async (t) => {
  const e = await start(t, ['--port', '0', '--allow', '127.0.0.1']);
  assert.ok(e.port, e.err());
  const ok = await get(`http://127.0.0.1:${e.port}/a`);
  assert.strictEqual(JSON.parse(ok.body).peer, '127.0.0.1');
  assert.strictEqual(JSON.parse(ok.body).front, undefined);
  assert.notStrictEqual((await curl(['--interface', '127.0.0.2', `http://127.0.0.1:${e.port}/a`])).code, 0);
  const bad = await start(t, ['--port', '0', '--deny', '300.1.2.3']);
  assert.strictEqual(await bad.exited, 2);
  assert.match(bad.err(), /300\.1\.2\.3/);
});

test('--listen-fd 3 and systemd socket activation adopt the socket', async (t) => {
  const ns = net.createServer();
  await new Promise((r) => ns.listen(0, '127.0.0.1', r));
  const port = ns.address().port;
  // A copy of the socket, and this process stops accepting on it: only the
  // children serve it.
  const fd = require('../lib/native').load().dup(ns._handle.fd);
  await new Promise((r) => ns.close(r));
  t.after(() => require('node:fs').closeSync(fd));
  const stdio = ['ignore', 'pipe', 'pipe', fd];
  const a = await start(t, ['--listen-fd', '3', '--drain-ms', '1000'], { stdio });
  assert.strictEqual(a.port, port, a.err());
  assert.strictEqual(JSON.parse((await get(`http://127.0.0.1:${port}/x`, { Connection: 'close' })).body).path, '/x');
  a.child.kill('SIGTERM');
  assert.strictEqual(await a.exited, 0);
  // LISTEN_PID must be the process's own pid: the shell's $$, kept by exec.
  const sd = await start(t, ['-c', `LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=http exec "${process.execPath}" "${ECHO}" --drain-ms 1000`],
    { cmd: '/bin/sh', stdio });
  assert.strictEqual(sd.port, port, sd.err());
  const d = JSON.parse((await get(`http://127.0.0.1:${port}/y`, { Connection: 'close' })).body);
  assert.deepStrictEqual([d.path, d.peer], ['/y', '127.0.0.1']);
  sd.child.kill('SIGTERM');
  assert.strictEqual(await sd.exited, 0);
});

// The same request to echo-server (C) and echo.js: the same access lines,
// but for what differs between two requests (time, client port, duration).
test('access lines are the bytes echo-server writes', async (t) => {
  const help = (() => { try { return require('node:child_process').execFileSync(C_ECHO, ['--help'], { stdio: ['ignore', 'pipe', 'pipe'] }).toString(); } catch (e) { return `${e.stdout || ''}${e.stderr || ''}`; } })();
  if (!/--access-log/.test(help)) { t.skip(`${C_ECHO} has no --access-log`); return; }
  const req = Buffer.concat([Buffer.from('GET /healthz?q="\\%20 HTTP/1.1\r\nHost: x\r\nUser-Agent: a"b\\c'),
    Buffer.from([0xff, 0xc3, 0xa9, 0x09]), Buffer.from('z\r\nReferer: http://r.example/\r\nConnection: close\r\n\r\n')]);
  const norm = (l) => l.replace(/\[[^\]]+\]/, '[T]').replace(/"time":"[^"]+"/, '"time":"T"').replace(/"port":\d+/, '"port":P')
    .replace(/"duration_ms":[0-9.]+/, '"duration_ms":D');
  for (const fmt of ['common', 'combined', 'json']) {
    const lines = [];
    for (const [cmd, argv] of [[C_ECHO, ['--port', '0', '--access-log', fmt]], [process.execPath, [ECHO, '--port', '0', '--access-log', fmt]]]) {
      const e = await start(t, argv, { cmd });
      assert.ok(e.port, e.err());
      const raw = await exchange(e.port, req);
      assert.match(raw, /^HTTP\/1\.1 200 /);
      const line = await until(() => e.out().split('\n').slice(1).find((l) => l.length));
      lines.push(norm(line || ''));
      e.child.kill('SIGTERM');
      await e.exited;
    }
    assert.ok(lines[0].length > 20, lines[0]);
    assert.strictEqual(lines[1], lines[0], fmt);
    console.log(`# ${lines[0]}`);
  }
});
