#!/usr/bin/env node
'use strict';
// The echo contract of echo-server (examples/echo_server.c), in Node:
//
//   node examples/echo.js --port N [--threads N] [--busy-us N] [--routes N]
//        [--request-timeout-ms N] [--idle-timeout-ms N] [--max-conns N]
//        [--max-body N] [--max-header-bytes N] [--backend koffi|ffi-napi]
//        [--cert FILE --key FILE [--ca FILE]]
//        [--proxy-protocol] [--proxy-from CIDRS] [--allow CIDRS] [--deny CIDRS]
//        [--reuseport] [--listen-fd N] [--access-log common|combined|json] [--drain-ms N]
//        [--shed 0|1] [--no-metrics-latency]
//
// With --cert/--key it serves https and wss (the same contract); --ca asks
// for client certificates verified against that CA (required), and the
// JSON description then carries the SNI and the verified subject.
// Prints "listening on PORT" once ready. POST|PUT /echo answers the body byte
// for byte; /ws echoes WebSocket messages; POST /upload parses a
// multipart/form-data body while it streams in and answers the JSON array
// of its parts {name, filename|null, content_type|null, size, sha256} (400
// malformed, 415 another media type); GET /sse?n=N sends N events with data
// 0..N-1, then ends; GET /metrics is the Prometheus text, GET /healthz
// answers "ok", GET /readyz "ready" (503 "draining" once a drain started);
// everything else gets a JSON description of the request, with the peer's
// address and port (the client's from the PROXY header behind a front,
// and then "front", the front's address). --proxy-protocol takes a PROXY
// header of either version on every connection; --proxy-from, --allow and
// --deny are the listener's address lists; --listen-fd N adopts a listening
// socket, and with neither --port nor --listen-fd a socket passed by systemd
// socket activation is adopted (fd 3). --access-log writes one line per
// request to stdout after "listening on PORT". SIGTERM/SIGINT drain (up to
// --drain-ms, default 5000), then exit 0.
const crypto = require('crypto');
const nanosrv = require('..');

const LIMITS = {
  '--request-timeout-ms': 'requestTimeoutMs', '--idle-timeout-ms': 'idleTimeoutMs',
  '--max-conns': 'maxConns', '--max-body': 'maxBody', '--max-header-bytes': 'maxHeaderBytes',
};

function usage() {
  process.stderr.write('usage: echo.js --port N [--threads N] [--busy-us N] [--routes N] [--backend koffi|ffi-napi]\n' +
    '       [--request-timeout-ms N] [--idle-timeout-ms N] [--max-conns N] [--max-body N] [--max-header-bytes N]\n' +
    '       [--cert FILE --key FILE [--ca FILE]]\n' +
    '       [--proxy-protocol] [--proxy-from CIDRS] [--allow CIDRS] [--deny CIDRS]\n' +
    '       [--reuseport] [--listen-fd N] [--access-log common|combined|json] [--drain-ms N]\n' +
    '       [--shed 0|1] [--no-metrics-latency]\n');
  process.exit(2);
}

const args = { port: null, threads: 1, busyUs: 0, routes: 0, backend: undefined, cert: null, key: null, ca: null,
  listenFd: null, drainMs: 5000 };
const opts = {};
const lopts = {}; // the listener's options
const LISTS = { '--proxy-from': 'proxyFrom', '--allow': 'allow', '--deny': 'deny' };
const SWITCHES = {
  '--proxy-protocol': () => { lopts.proxyProtocol = true; },
  '--reuseport': () => { opts.reuseport = true; },
  '--no-metrics-latency': () => { opts.metricsLatency = 0; },
};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) {
  const flag = argv[i], v = argv[i + 1];
  if (SWITCHES[flag]) { SWITCHES[flag](); i--; continue; }
  if (v === undefined) usage();
  if (flag === '--port') args.port = +v;
  else if (LISTS[flag]) lopts[LISTS[flag]] = v;
  else if (flag === '--listen-fd') args.listenFd = +v;
  else if (flag === '--access-log') opts.accessLog = v;
  else if (flag === '--drain-ms') args.drainMs = +v;
  else if (flag === '--shed') opts.shed = +v;
  else if (flag === '--threads') args.threads = +v;
  else if (flag === '--busy-us') args.busyUs = +v;
  else if (flag === '--routes') args.routes = +v;
  else if (flag === '--backend') args.backend = v;
  else if (flag === '--cert') args.cert = v;
  else if (flag === '--key') args.key = v;
  else if (flag === '--ca') args.ca = v;
  else if (LIMITS[flag]) opts[LIMITS[flag]] = +v;
  else usage();
}

function spin(us) {
  const end = process.hrtime.bigint() + BigInt(us) * 1000n;
  while (process.hrtime.bigint() < end);
}

const clip = (s) => (s.length > 8192 ? s.slice(0, 8192) : s);

// Each part hashed as it passes: memory is one piece, whatever the size.
async function upload(req, res) {
  const out = [];
  try {
    for await (const part of req.multipart({ maxParts: 10000 })) {
      const h = crypto.createHash('sha256');
      let size = 0;
      for await (const c of part) { h.update(c); size += c.length; }
      out.push({ name: part.name, filename: part.filename, content_type: part.contentType, size, sha256: h.digest('hex') });
    }
  } catch (e) {
    if (!e.status) throw e;
    res.writeHead(e.status, { 'Content-Type': 'text/plain' });
    res.end(`${e.detail || e.message}\n`);
    return;
  }
  res.json(out);
}

// GET /sse?n=N: N events with data 0 .. N-1, then the end; n is 0 .. 1e7
// (digits only), anything else gets 400, as in the C echo-server.
const SSE_MAX = 10000000;
function sse(req, res) {
  const q = Array.isArray(req.query.n) ? req.query.n[0] : req.query.n; // repeated: the first
  const n = typeof q === 'string' && /^[0-9]{1,9}$/.test(q) ? Number(q) : -1;
  if (n < 0 || n > SSE_MAX) {
    res.statusCode = 400;
    res.setHeader('Content-Type', 'text/plain');
    res.end(`n must be a number of events, 0..${SSE_MAX}\n`);
    return;
  }
  const s = res.sse();
  let i = 0;
  const pump = () => {
    while (i < n && !s.closed) if (!s.send(String(i++))) return;
    if (i >= n) s.end();
  };
  s.on('drain', pump);
  pump();
}

if (!args.cert !== !args.key || (args.ca && !args.cert)) usage();
if (args.cert) {
  opts.tlsCertFile = args.cert;
  opts.tlsKeyFile = args.key;
  if (args.ca) { opts.tlsCaFile = args.ca; opts.tlsVerifyClient = 2; }
}

async function main() {
  let srv;
  try {
    srv = nanosrv.createServer({ backend: args.backend, threads: args.threads, ...opts }, (req, res) => {
      if (args.busyUs) spin(args.busyUs);
      res.setHeader('Content-Type', 'application/json');
      const d = { method: req.method, path: clip(req.path), query: clip(req.querystring), body_len: req.bodyLength };
      if (req.tls) { d.sni = req.tls.servername; d.subject = req.tls.subject; }
      d.peer = req.remoteAddress;
      d.peer_port = req.remotePort;
      if (req.proxy) d.front = req.proxy.front;
      res.end(JSON.stringify(d));
    });
  } catch (e) {
    process.stderr.write(`echo.js: ${e.message}\n`);
    process.exit(2);
  }
  const echo = (req, res) => {
    if (args.busyUs) spin(args.busyUs);
    res.setHeader('Content-Type', 'application/octet-stream');
    res.end(req.body);
  };
  srv.post('/echo', echo).put('/echo', echo);
  srv.post('/upload', upload, { streamBody: true });
  srv.get('/sse', sse);
  srv.get('/metrics', srv.metricsHandler());
  srv.get('/healthz', (req, res) => { res.setHeader('Content-Type', 'text/plain'); res.end('ok'); });
  srv.get('/readyz', srv.readinessHandler());
  for (let i = 0; i < args.routes; i++) srv.get(`/dummy/${i}/:id`, (req, res) => res.end('dummy'));
  try {
    srv.ws('/ws', { message: (ws, data) => ws.send(data) });
  } catch (e) {
    process.stderr.write(`echo.js: no WebSocket endpoint: ${e.message}\n`);
  }
  let port;
  const scheme = args.cert ? 'https' : 'http';
  try {
    if (args.listenFd !== null) port = await srv.listen({ ...lopts, fd: args.listenFd, url: `${scheme}://0.0.0.0:0` });
    else if (args.port === null && (port = (await srv.listenInherited({ ...lopts, url: `${scheme}://0.0.0.0:0` }))[0])) port = port.port;
    else port = await srv.listen(`${scheme}://0.0.0.0:${args.port === null ? 8080 : args.port}`, lopts);
  } catch (e) {
    process.stderr.write(`echo.js: listen: ${e.message}\n`);
    // A bad address list is a usage error, as with echo-server.
    process.exit(e.code === 'NSV_EINVAL' || e.code === 'NSV_ERANGE' ? 2 : 1);
  }
  const stop = () => srv.close(args.drainMs).then(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  process.stdout.write(`listening on ${port}\n`);
}

main();
