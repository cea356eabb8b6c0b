'use strict';
// The package as npm packs it loads (its ABI description travels with it),
// and a library that cannot be found is named with the way to point at it.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');
require('../fixtures/http/both'); // sets NANOSRV_LIBRARY

const pkgDir = path.join(__dirname, '..');

test('npm pack gives a package that loads, with its http and https entries', (t) => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nsv-pack-'));
  t.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const out = execFileSync('npm', ['pack', '--silent', '--pack-destination', tmp], { cwd: pkgDir, encoding: 'utf8', timeout: 60000 });
  assert.ok(!fs.existsSync(path.join(pkgDir, 'nanosrv_abi.json')), 'the copy made for packing is removed again');
  const mods = path.join(tmp, 'app', 'node_modules');
  fs.mkdirSync(mods, { recursive: true });
  execFileSync('tar', ['xzf', path.join(tmp, out.trim().split('\n').pop()), '-C', tmp]);
  fs.renameSync(path.join(tmp, 'package'), path.join(mods, 'nanosrv'));
  fs.symlinkSync(path.join(pkgDir, 'node_modules', 'koffi'), path.join(mods, 'koffi'));
  const code = "const n = require('nanosrv'); const h = require('nanosrv/http'); require('nanosrv/https');" +
    "console.log(n.version(), typeof h.createServer, n.abiVersion())";
  const got = execFileSync(process.execPath, ['-e', code], { cwd: path.join(tmp, 'app'), encoding: 'utf8', env: { ...process.env, NANOSRV_ABI_JSON: '' } });
  const nanosrv = require('..');
  assert.strictEqual(got.trim(), `${nanosrv.version()} function ${nanosrv.abiVersion()}`);
});

test('a library that cannot be loaded: the error says where it looked and how to point at it', () => {
  const code = "try { require('.').loadLibrary(); } catch (e) { console.log(e.message); }";
  const env = { ...process.env, NANOSRV_LIBRARY: '/nonexistent/libnanosrv.so.1' };
  const msg = execFileSync(process.execPath, ['-e', code], { cwd: pkgDir, encoding: 'utf8', env });
  assert.match(msg, /cannot load \/nonexistent\/libnanosrv\.so\.1/);
  assert.match(msg, /NANOSRV_LIBRARY names it/);
  assert.match(msg, /point NANOSRV_LIBRARY \(or the library option\) at libnanosrv\.so\.1/);
});
