#!/usr/bin/env node
'use strict';
// A WebSocket bridge: every client of /bridge gets its own connection to
// the upstream WebSocket, and messages go both ways unchanged (text as
// text, binary as binary). Both sides are the library's: the endpoint is
// srv.ws(), the upstream connection srv.WebSocket, on the same loop.
//
//   node examples/ws_bridge.js --port N --upstream ws://HOST:PORT/PATH [--backend koffi|ffi-napi]
//
// Prints "listening on PORT" once ready. The client's query string is
// added to the upstream URL. Messages a client sends
// before the upstream is open wait for it. When either side closes, the
// other is closed with the same code where that side may send it (else
// 1000) and the same reason; an upstream that cannot be reached closes the
// client with 1011. GET /health answers {"ok":true}. SIGTERM/SIGINT drain,
// then exit 0.
const nanosrv = require('..');

const args = { port: 8080, upstream: null, backend: undefined };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) {
  const flag = argv[i], v = argv[i + 1];
  if (v === undefined) args.bad = true;
  else if (flag === '--port') args.port = +v;
  else if (flag === '--upstream') args.upstream = v;
  else if (flag === '--backend') args.backend = v;
  else args.bad = true;
}
if (args.bad || !args.upstream || !/^wss?:\/\//.test(args.upstream)) {
  process.stderr.write('usage: ws_bridge.js --port N --upstream ws://HOST:PORT/PATH [--backend koffi|ffi-napi]\n');
  process.exit(2);
}

const srv = nanosrv.createServer({ backend: args.backend });

// Close codes each side may send: a client (WHATWG close()) 1000 and
// 3000-4999; a server also 1001-1003 and 1007-1014.
const clientMay = (c) => c === 1000 || (c >= 3000 && c <= 4999);
const serverMay = (c) => (c >= 1000 && c <= 1003) || (c >= 1007 && c <= 1014) || (c >= 3000 && c <= 4999);
const reasonOf = (r) => Buffer.from(r || '').subarray(0, 123).toString();

srv.get('/health', () => ({ ok: true }));

srv.ws('/bridge', {
  open(ws, req) {
    const url = new URL(args.upstream);
    if (req.querystring) url.search = req.querystring;
    const up = new srv.WebSocket(url.href);
    up.binaryType = 'nodebuffer';
    ws.data.up = up;
    ws.data.waiting = []; // [data, isBinary] sent before the upstream opened
    up.onopen = () => {
      for (const [d, bin] of ws.data.waiting) up.send(bin ? d : String(d));
      ws.data.waiting = null;
    };
    up.onmessage = (e) => { if (ws.readyState === 1) ws.send(e.data); };
    up.onclose = (e) => {
      if (ws.readyState !== 1) return;
      if (!e.wasClean) ws.close(1011, 'upstream unreachable');
      else ws.close(serverMay(e.code) ? e.code : 1000, reasonOf(e.reason));
    };
    up.onerror = () => {}; // the close event that follows says it
  },
  message(ws, data, isBinary) {
    const { up } = ws.data;
    if (ws.data.waiting) ws.data.waiting.push([data, isBinary]);
    else if (up.readyState === up.OPEN) up.send(data);
  },
  close(ws, code, reason) {
    const { up } = ws.data;
    if (up.readyState === up.OPEN) up.close(clientMay(code) ? code : 1000, reasonOf(reason));
    else if (up.readyState === up.CONNECTING) up.close();
  },
});

srv.listen(args.port, '127.0.0.1').then((port) => {
  process.stdout.write(`listening on ${port}\n`);
});
const stop = () => srv.close().then(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
