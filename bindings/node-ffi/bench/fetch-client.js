#!/usr/bin/env node
'use strict';
// Requests per second of three fetch clients from one Node process against
// the same server: srv.fetch (the library's client on a nanosrv server's
// loop), Node's own fetch (undici), and, for a body, POSTs of SIZE bytes.
//
//   node bench/fetch-client.js URL [REQUESTS] [CONCURRENCY] [SIZE]
//
// Each client runs CONCURRENCY loops that each await one request (and read
// its body) at a time, after a warm-up of one round; the figures are for
// comparison with each other on the same machine, not absolute.
const nanosrv = require('..');

const [url, n = '5000', c = '50', size = '0'] = process.argv.slice(2);
if (!url) { process.stderr.write('usage: fetch-client.js URL [REQUESTS] [CONCURRENCY] [SIZE]\n'); process.exit(2); }
const N = +n, C = +c;
const body = +size ? Buffer.alloc(+size, 'x') : undefined;
const init = body ? { method: 'POST', body } : undefined;

async function run(name, f) {
  const once = async () => { const r = await f(url, init); await r.arrayBuffer(); if (r.status !== 200) throw new Error(`${name}: ${r.status}`); };
  await Promise.all(Array.from({ length: C }, once)); // warm-up: connections made
  let left = N;
  const t0 = process.hrtime.bigint();
  await Promise.all(Array.from({ length: C }, async () => { while (left-- > 0) await once(); }));
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  const rps = N / s;
  console.log(`${name.padEnd(12)} ${Math.round(rps).toString().padStart(7)} req/s`);
  return rps;
}

(async () => {
  const srv = nanosrv.createServer({ httpConnsPerOrigin: Math.min(256, C) });
  const a = await run('srv.fetch', (u, i) => srv.fetch(u, i));
  const b = await run('node fetch', (u, i) => fetch(u, i));
  console.log(`ratio srv.fetch / node fetch: ${(a / b).toFixed(2)}`);
  await srv.close();
})();
