'use strict';
// The snippets of the README's "node:http compatibility" section run as
// written (those that stop by themselves: they close their server).
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const path = require('path');
const { execFile } = require('child_process');
require('../fixtures/http/both'); // sets NANOSRV_LIBRARY

const readme = fs.readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8');
const section = readme.slice(readme.indexOf('## node:http compatibility'), readme.indexOf('\n## ', readme.indexOf('## node:http compatibility') + 5));
const snippets = [...section.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]).filter((s) => s.includes('server.close()'));

test('README node:http snippets run as written', async () => {
  assert.ok(snippets.length >= 3, `found ${snippets.length} snippets`);
  for (const code of snippets) {
    const out = await new Promise((resolve, reject) => {
      execFile(process.execPath, ['-e', code], { cwd: path.join(__dirname, '..'), env: process.env, timeout: 20000 },
        (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}\n--- snippet:\n${code}`)) : resolve(stdout)));
    });
    // A trailing "// value" comment on a console.log line is the expected output.
    const want = [...code.matchAll(/console\.log\([^\n]*\/\/ (.+)$/gm)].map((m) => m[1].trim());
    for (const w of want) assert.ok(out.includes(w), `expected ${w} in ${out}`);
    if (!want.length) assert.match(out, /listening on \d+/);
  }
});
