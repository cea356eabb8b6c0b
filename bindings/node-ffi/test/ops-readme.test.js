'use strict';
// The snippet of the README's "Behind a load balancer" section that stops
// by itself runs as written; its trailing "// output" comments are what it
// must print (the others need a front or a signal).
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const { execFile } = require('child_process');
require('./helpers'); // sets NANOSRV_LIBRARY

const readme = fs.readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8');
const at = readme.indexOf('## Behind a load balancer');
const section = readme.slice(at, readme.indexOf('\n## ', at + 5));
const snippets = [...section.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);

test('README load balancer snippet runs as written', async () => {
  const runnable = snippets.filter((s) => s.includes('await srv.close()'));
  assert.ok(at >= 0 && snippets.length >= 3 && runnable.length === 1, `found ${snippets.length} snippets`);
  for (const code of runnable) {
    const out = await new Promise((resolve, reject) => {
      execFile(process.execPath, ['-e', code], { cwd: path.join(__dirname, '..'), env: process.env, timeout: 20000 },
        (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}\n--- snippet:\n${code}`)) : resolve(stdout)));
    });
    const want = [...code.matchAll(/console\.log\([^\n]*\/\/ (.+)$/gm)].map((m) => m[1].trim());
    assert.ok(want.length, code);
    for (const w of want) assert.ok(out.includes(w), `expected ${w} in ${out}`);
    // accessLog: 'json': the scrape's line, on stdout.
    const line = out.split('\n').find((l) => l.startsWith('{"time":'));
    assert.ok(line, out);
    assert.strictEqual(JSON.parse(line).target, '/readyz');
  }
});
