'use strict';
// The event loop stays responsive while the server is under load: a timer
// keeps firing on schedule while another process hammers the server.
const { describe, test } = require('node:test');
const assert = require('node:assert');
const { spawn } = require('node:child_process');
const { BACKENDS, serve } = require('./helpers');

// Load generator in its own process so that it does not share our loop.
const LOAD = `
const [base, ms, conc] = process.argv.slice(1);
const end = Date.now() + +ms;
let n = 0, bad = 0;
async function worker() {
  while (Date.now() < end) {
    try { const r = await fetch(base + '/work?x=' + n, { method: 'POST', body: 'payload' }); if ((await r.text()) !== 'payload') bad++; n++; }
    catch { bad++; }
  }
}
Promise.all(Array.from({ length: +conc }, worker)).then(() => process.stdout.write(JSON.stringify({ n, bad })));
`;

function load(base, ms, conc) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ['-e', LOAD, base, String(ms), String(conc)]);
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.on('error', reject);
    p.on('exit', () => resolve(JSON.parse(out)));
  });
}

for (const backend of BACKENDS) {
  describe(`event loop (${backend})`, { timeout: 60000 }, () => {
    test('a 5 ms timer keeps firing while the server is under load', async (t) => {
      const { base } = await serve(t, backend, {}, (srv) => {
        srv.post('/work', (req, res) => res.end(req.body));
      });
      const period = 5, duration = 1500;
      let ticks = 0, maxGap = 0, last = performance.now();
      const iv = setInterval(() => {
        const now = performance.now();
        maxGap = Math.max(maxGap, now - last);
        last = now;
        ticks++;
      }, period);
      const result = await load(base, duration, 32);
      clearInterval(iv);
      t.diagnostic(`${result.n} requests, ${ticks} ticks, max gap ${maxGap.toFixed(1)} ms`);
      assert.strictEqual(result.bad, 0);
      assert.ok(result.n > 100, `only ${result.n} requests`);
      // Generous bounds: the machine may be shared; a blocked loop would
      // show ticks near 0 and a gap near the whole duration.
      assert.ok(ticks > duration / period / 4, `only ${ticks} ticks`);
      assert.ok(maxGap < 300, `timer delayed by ${maxGap} ms`);
    });
  });
}
