'use strict';
// The snippets of the README's "fetch and WebSocket clients" section run
// as written; the trailing "// output" comments are what they must print.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const { execFile } = require('child_process');
require('./helpers'); // sets NANOSRV_LIBRARY

const readme = fs.readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8');
const at = readme.indexOf('## fetch and WebSocket clients');
const section = readme.slice(at, readme.indexOf('\n## ', at + 5));
const snippets = [...section.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);

test('README client snippets run as written', async () => {
  assert.ok(at >= 0 && snippets.length >= 3, `found ${snippets.length} snippets`);
  for (const code of snippets) {
    const out = await new Promise((resolve, reject) => {
      execFile(process.execPath, ['-e', code], { cwd: path.join(__dirname, '..'), env: process.env, timeout: 20000 },
        (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}\n--- snippet:\n${code}`)) : resolve(stdout)));
    });
    const want = [...code.matchAll(/console\.log\([^\n]*\/\/ (.+)$/gm)].map((m) => m[1].trim());
    assert.ok(want.length, code);
    for (const w of want) assert.ok(out.includes(w), `expected ${w} in ${out}`);
  }
});
