// ws_deflate_bench.js - compressed WebSocket echo (permessage-deflate), msgs/s:
// echo-server's /ws against a Node `ws` server with perMessageDeflate, driven by
// the same Node `ws` client (one outstanding message per connection). Servers
// run under `taskset -c SERVER_CPUS`, the client under `taskset -c CLIENT_CPUS`.
//
//   node bench/ws_deflate_bench.js [--build build] [--secs 5] [--conns 20]
//        [--size 4096] [--rounds 3] [--server-cpus 1] [--client-cpus 0]
//
// Prints one line per server (median msgs/s over rounds) and the ratio
// echo-server / node ws. bench/METHOD.md says how to read it. The `ws` package
// comes from bench/node_modules (npm ci in bench/) or the Node binding's.
'use strict';
const path = require('path');
const { spawn } = require('child_process');

const root = path.join(__dirname, '..');
const NODE_PATHS = [path.join(__dirname, 'node_modules'), path.join(root, 'bindings', 'node-ffi', 'node_modules')];
function loadWs() {
  for (const p of NODE_PATHS) {
    try { return require(path.join(p, 'ws')); } catch (e) { /* next */ }
  }
  console.error('ws_deflate_bench: no `ws` package (run npm ci in bench/)');
  process.exit(2);
}

function arg(name, def) {
  const i = process.argv.indexOf(name);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : def;
}

// A message that compresses like real JSON traffic: repeated keys, varying values.
function payload(size) {
  let s = '';
  for (let i = 0; s.length < size; i++)
    s += `{"id":${i},"user":"user${i % 97}","event":"update","value":${(i * 7919) % 10007}},`;
  return s.slice(0, size);
}

// --serve: the Node peer. perMessageDeflate with ws's defaults except the
// threshold, set to echo-server's NSV_OPT_WS_DEFLATE_MIN_SIZE default (64).
function serve() {
  const WebSocket = loadWs();
  const wss = new WebSocket.Server({ port: 0, host: '127.0.0.1', path: '/ws',
                                     perMessageDeflate: { threshold: 64 } });
  wss.on('listening', () => console.log(`listening on ${wss.address().port}`));
  wss.on('connection', (ws) => ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary })));
}

// --client PORT: echo load for secs; prints "msgs N" (or "error ...").
function client() {
  const WebSocket = loadWs();
  const port = process.argv[process.argv.indexOf('--client') + 1];
  const secs = Number(arg('--secs', '5')), conns = Number(arg('--conns', '20'));
  const msg = payload(Number(arg('--size', '4096')));
  let count = 0, open = 0, bad = 0, stop = false;
  const socks = [];
  for (let i = 0; i < conns; i++) {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`, { perMessageDeflate: { threshold: 0 } });
    socks.push(ws);
    ws.on('open', () => {
      if (!/permessage-deflate/.test(ws.extensions)) bad++;
      if (++open === conns) {
        setTimeout(() => { stop = true; console.log(`msgs ${count} bad ${bad}`);
                           socks.forEach((s) => s.terminate()); process.exit(0); }, secs * 1000);
        socks.forEach((s) => s.send(msg));
      }
    });
    ws.on('message', (data) => {
      if (data.length !== msg.length) bad++;
      count++;
      if (!stop) ws.send(msg);
    });
    ws.on('error', (e) => { console.log(`error ${e.message}`); process.exit(1); });
  }
}

function startServer(argv, cpus) {
  return new Promise((resolve, reject) => {
    const p = spawn('taskset', ['-c', cpus, ...argv], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'],
                                                       detached: true });
    let out = '';
    const t = setTimeout(() => reject(new Error(`${argv[0]} did not start`)), 10000);
    p.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (\d+)/.exec(out);
      if (m) { clearTimeout(t); resolve({ p, port: m[1] }); }
    });
    p.on('exit', () => reject(new Error(`${argv[0]} exited`)));
  });
}

function runClient(port, cpus) {
  return new Promise((resolve) => {
    const argv = ['-c', cpus, process.execPath, __filename, '--client', port, '--secs', arg('--secs', '5'),
                  '--conns', arg('--conns', '20'), '--size', arg('--size', '4096')];
    const p = spawn('taskset', argv, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.on('exit', () => resolve(out));
  });
}

async function main() {
  const build = arg('--build', process.env.NSV_BUILD || 'build');
  const rounds = Number(arg('--rounds', '3')), secs = Number(arg('--secs', '5'));
  const scpu = arg('--server-cpus', '1'), ccpu = arg('--client-cpus', '0');
  const servers = [
    ['echo-server', [path.join(build, 'echo-server'), '--port', '0']],
    ['node ws', [process.execPath, __filename, '--serve']],
  ];
  const rate = {};
  for (const [name, argv] of servers) {
    const { p, port } = await startServer(argv, scpu);
    const got = [];
    for (let r = 0; r < rounds; r++) {
      const out = await runClient(port, ccpu);
      const m = /msgs (\d+) bad (\d+)/.exec(out);
      if (!m || m[2] !== '0') {
        console.log(`${name}: client failed: ${out.trim()}`);
        process.kill(-p.pid);
        process.exit(1);
      }
      got.push(Number(m[1]) / secs);
    }
    process.kill(-p.pid);
    got.sort((a, b) => a - b);
    rate[name] = got[Math.floor(got.length / 2)];
    console.log(`${name.padEnd(12)} ${rate[name].toFixed(0).padStart(8)} msgs/s (median of ${rounds}; ` +
                `rounds ${got.map((x) => x.toFixed(0)).join(' ')})`);
  }
  console.log(`ratio echo-server / node ws: ${(rate['echo-server'] / rate['node ws']).toFixed(2)}`);
}

if (process.argv.includes('--serve')) serve();
else if (process.argv.includes('--client')) client();
else main().catch((e) => { console.error(e.message); process.exit(1); });
