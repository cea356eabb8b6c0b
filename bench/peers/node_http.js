// node_http.js - the echo contract on Node's http module, with /ws served by
// the `ws` package (installed in bench/node_modules by `npm ci`) when present.
// Usage: node node_http.js [--port N]   (prints "listening on PORT")
'use strict';
const http = require('http');
const path = require('path');

let port = 0;
for (let i = 2; i < process.argv.length; i++) {
  if (process.argv[i] === '--port') port = Number(process.argv[++i]);
}

const server = http.createServer((req, res) => {
  const chunks = [];
  let len = 0;
  req.on('data', (c) => { chunks.push(c); len += c.length; });
  req.on('end', () => {
    const q = req.url.indexOf('?');
    const p = q < 0 ? req.url : req.url.slice(0, q);
    if ((req.method === 'POST' || req.method === 'PUT') && p === '/echo') {
      const body = Buffer.concat(chunks, len);
      res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': len });
      res.end(body);
      return;
    }
    const json = JSON.stringify({
      method: req.method, path: p, query: q < 0 ? '' : req.url.slice(q + 1), body_len: len,
    });
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(json) });
    res.end(json);
  });
});
// Node's default keep-alive timeout (5 s) would drop the idle connections of
// the memory case before they are counted.
server.keepAliveTimeout = 0;
server.headersTimeout = 0;
server.requestTimeout = 0;

let WebSocketServer = null;
try {
  ({ WebSocketServer } = require(path.join(__dirname, '..', 'node_modules', 'ws')));
} catch (e) { /* no ws package: /ws is simply not served */ }
if (WebSocketServer) {
  const wss = new WebSocketServer({ server, path: '/ws', perMessageDeflate: false, maxPayload: 1 << 24 });
  wss.on('connection', (ws) => {
    ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
  });
}

server.listen(port, '127.0.0.1', () => {
  console.log(`listening on ${server.address().port}`);
});
