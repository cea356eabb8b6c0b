#!/usr/bin/env node
'use strict';
// The echo contract with Node's own http module, for comparison in benchmarks:
//   node bench/http-echo.js --port N
const http = require('http');

let port = 8080;
const i = process.argv.indexOf('--port');
if (i > 0) port = +process.argv[i + 1];

const srv = http.createServer((req, res) => {
  const q = req.url.indexOf('?');
  const path = q < 0 ? req.url : req.url.slice(0, q);
  const query = q < 0 ? '' : req.url.slice(q + 1);
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    if ((req.method === 'POST' || req.method === 'PUT') && path === '/echo') {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': body.length });
      res.end(body);
      return;
    }
    const out = JSON.stringify({ method: req.method, path, query, body_len: body.length });
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(out) });
    res.end(out);
  });
});
srv.keepAliveTimeout = 60000;
srv.listen(port, '0.0.0.0', () => process.stdout.write(`listening on ${srv.address().port}\n`));
process.once('SIGTERM', () => srv.close(() => process.exit(0)));
