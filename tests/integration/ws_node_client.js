// WebSocket echo through Node's `ws` client against echo-server's /ws.
// Prints TAP. Usage: node ws_node_client.js PORT
'use strict';
const WebSocket = require('ws');
const port = process.argv[2];
let n = 0, failed = 0;
function ok(cond, name) {
  n++;
  if (!cond) failed++;
  console.log(`${cond ? '' : 'not '}ok ${n} - ${name}`);
}
function open(path = '/ws') {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}${path}`, { perMessageDeflate: false });
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}
function next(ws) {
  return new Promise((resolve) => ws.once('message', (data, isBinary) => resolve({ data, isBinary })));
}
(async () => {
  const timer = setTimeout(() => { console.log('not ok - timeout'); process.exit(1); }, 20000);
  const ws = await open();
  ws.send('hello node');
  let m = await next(ws);
  ok(!m.isBinary && m.data.toString() === 'hello node', 'text echo');
  const bin = Buffer.alloc(70000, 7);
  ws.send(bin);
  m = await next(ws);
  ok(m.isBinary && Buffer.compare(m.data, bin) === 0, 'binary echo of 70000 bytes');
  const big = 'x'.repeat(3 << 20);
  ws.send(big);
  m = await next(ws);
  ok(m.data.toString() === big, '3 MiB text echo');
  const pong = new Promise((resolve) => ws.once('pong', resolve));
  ws.ping(Buffer.from('pp'));
  ok((await pong).toString() === 'pp', 'ping answered with the same payload');
  const closed = new Promise((resolve) => ws.once('close', (code) => resolve(code)));
  ws.close(4002, 'bye');
  ok((await closed) === 4002, 'close code echoed');
  const many = await Promise.all(Array.from({ length: 20 }, async (_, i) => {
    const c = await open();
    c.send(`c${i}`);
    const r = await next(c);
    c.close();
    return r.data.toString() === `c${i}`;
  }));
  ok(many.every(Boolean), '20 concurrent clients');
  let refused = false;
  try { await open('/not-ws'); } catch (e) { refused = true; }
  ok(refused, 'upgrade refused on a plain route');
  clearTimeout(timer);
  console.log(`1..${n}`);
  process.exit(failed ? 1 : 0);
})().catch((e) => { console.log(`not ok - ${e}`); process.exit(1); });
