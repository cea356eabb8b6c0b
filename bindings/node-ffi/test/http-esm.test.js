'use strict';
// The package's entry points by name: import (index.mjs, real named
// exports) and require, for '.', './http', './https' and './net'.
const test = require('node:test');
const assert = require('node:assert');
const path = require('path');
const { execFile } = require('child_process');
require('../fixtures/http/both'); // sets NANOSRV_LIBRARY

function run(file) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [path.join(__dirname, '..', 'fixtures', 'http', file)],
      { cwd: path.join(__dirname, '..'), env: process.env, timeout: 20000 }, (err, stdout, stderr) => {
        if (err) reject(new Error(`${file}: ${err.message}\n${stderr}`));
        else resolve(JSON.parse(stdout));
      });
  });
}

test('import { createServer, tlsAvailable } from "nanosrv" works at run time', async () => {
  const nanosrv = require('..');
  const out = await run('esm.mjs');
  assert.deepStrictEqual(out, {
    tls: 'boolean', version: nanosrv.version(), b64: 'aGk=', same: true, constant: 'number',
    status: 'Not Found', https: 'function', httpNamespace: 'function', body: 'esm /x',
  });
});

test('require of the same names', async () => {
  const nanosrv = require('..');
  const out = await run('cjs.cjs');
  assert.deepStrictEqual(out, { tls: 'boolean', version: nanosrv.version(), http: 'function', https: 'function', net: 'function', status: 'OK' });
});
