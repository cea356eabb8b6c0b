// Node's http2 client against echo-server: h2c (prior knowledge) and h2
// over TLS. Prints TAP. Usage: node h2_node_client.js PLAIN_PORT TLS_PORT CA_FILE
'use strict';
const http2 = require('http2');
const crypto = require('crypto');
const fs = require('fs');
const [plainPort, tlsPort, caFile] = process.argv.slice(2);
let n = 0, failed = 0;
function ok(cond, name, diag) {
  n++;
  if (!cond) failed++;
  console.log(`${cond ? '' : 'not '}ok ${n} - ${name}`);
  if (!cond && diag !== undefined) console.log(`#   ${JSON.stringify(diag).slice(0, 500)}`);
}
function connect(url, opts) {
  return new Promise((resolve, reject) => {
    const s = http2.connect(url, opts);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}
function request(s, headers, body) {
  return new Promise((resolve, reject) => {
    const req = s.request(headers, { endStream: body === undefined });
    const parts = [];
    let head = {};
    req.on('response', (h) => { head = h; });
    req.on('data', (d) => parts.push(d));
    req.on('end', () => resolve({ status: head[':status'], headers: head, body: Buffer.concat(parts) }));
    req.on('error', reject);
    if (body !== undefined) req.end(body);
  });
}
async function suite(label, s) {
  const gets = await Promise.all(Array.from({ length: 16 }, (_, i) => request(s, { ':path': `/n/${i}?i=${i}` })));
  ok(gets.every((r, i) => r.status === 200 && JSON.parse(r.body).path === `/n/${i}` && JSON.parse(r.body).query === `i=${i}`),
    `${label}: 16 concurrent GETs, each its own JSON`, gets.map((r) => r.status));
  ok(gets.every((r) => r.headers.connection === undefined && r.headers['transfer-encoding'] === undefined),
    `${label}: no connection-specific fields`);
  const bodies = [Buffer.from('hello h2'), crypto.randomBytes(200000), crypto.randomBytes(900000)];
  const posts = await Promise.all(bodies.map((b) => request(s, { ':method': 'POST', ':path': '/echo' }, b)));
  ok(posts.every((r, i) => r.status === 200 && Buffer.compare(r.body, bodies[i]) === 0),
    `${label}: POST /echo bodies of 8, 200000 and 900000 bytes echoed`, posts.map((r) => [r.status, r.body.length]));
  const sse = await request(s, { ':path': '/sse?n=3' });
  ok(sse.status === 200 && sse.body.toString() === 'data: 0\n\ndata: 1\n\ndata: 2\n\n', `${label}: streamed reply`,
    sse.body.toString());
  const h = await request(s, { ':path': '/healthz' });
  ok(h.status === 200 && h.body.toString() === 'ok', `${label}: /healthz`);
}
(async () => {
  const timer = setTimeout(() => { console.log('not ok - timeout'); process.exit(1); }, 25000);
  const plain = await connect(`http://127.0.0.1:${plainPort}`);
  await suite('h2c', plain);
  plain.close();
  const tls = await connect(`https://localhost:${tlsPort}`, { ca: fs.readFileSync(caFile) });
  ok(tls.alpnProtocol === 'h2', 'TLS: ALPN h2', tls.alpnProtocol);
  await suite('h2', tls);
  tls.close();
  clearTimeout(timer);
  console.log(`1..${n}`);
  process.exit(failed ? 1 : 0);
})().catch((e) => { console.log(`not ok - ${e.stack || e}`); process.exit(1); });
