'use strict';
// The utilities, through each backend.
const { describe, test } = require('node:test');
const assert = require('node:assert');
const { execFileSync } = require('node:child_process');
const path = require('node:path');
const { nanosrv, BACKENDS } = require('./helpers');

test('utilities (default backend)', () => {
  assert.strictEqual(nanosrv.base64Encode('hello'), 'aGVsbG8=');
  assert.strictEqual(nanosrv.base64Encode(Buffer.alloc(0)), '');
  assert.deepStrictEqual(nanosrv.base64Decode('aGVsbG8'), Buffer.from('hello'));
  assert.throws(() => nanosrv.base64Decode('a b'), { code: 'NSV_EPARSE', errno: -19 });
  assert.strictEqual(nanosrv.urlEncode('a b/ü'), 'a%20b%2F%C3%BC');
  assert.strictEqual(nanosrv.urlDecode('a%20b+c'), 'a b+c');
  assert.strictEqual(nanosrv.urlDecode('a%20b+c', true), 'a b c');
  assert.deepStrictEqual(nanosrv.parseUrl('https://[::1]:8443/p?q=1'),
    { scheme: 'https', host: '::1', path: '/p', query: 'q=1', port: 8443, tls: true });
  assert.throws(() => nanosrv.parseUrl('::nope'), { code: 'NSV_EURL' });
  const doc = '{"a":{"b":[1,{"c":"x\\u00e9"}]},"n":2.5,"i":9007199254740993,"t":true}';
  assert.strictEqual(nanosrv.jsonString(doc, '$.a.b[1].c'), 'xé');
  assert.strictEqual(nanosrv.jsonString(doc, '$.missing'), undefined);
  assert.strictEqual(nanosrv.jsonNumber(doc, '$.n'), 2.5);
  assert.strictEqual(nanosrv.jsonInteger(doc, '$.i'), 9007199254740993n);
  assert.strictEqual(nanosrv.jsonInteger(doc, '$.a.b[0]'), 1);
  assert.strictEqual(nanosrv.jsonBoolean(doc, '$.t'), true);
  assert.throws(() => nanosrv.jsonString('{bad', '$.a'), { code: 'NSV_EPARSE' });
  assert.strictEqual(nanosrv.version(), '1.5.0');
  assert.strictEqual(nanosrv.abiVersion(), 1);
  assert.strictEqual(typeof nanosrv.tlsAvailable(), 'boolean');
  assert.strictEqual(typeof nanosrv.http2Available(), 'boolean');
  assert.ok(nanosrv.millis() > 0);
  assert.strictEqual(nanosrv.errname(-3), 'NSV_ESTALE');
  assert.strictEqual(nanosrv.constants.NSV_ESTALE, -3);
  const lvl = nanosrv.logLevel();
  nanosrv.setLogLevel(0);
  assert.strictEqual(nanosrv.logLevel(), 0);
  nanosrv.setLogLevel(lvl);
});

// The utilities use the backend named by NANOSRV_BACKEND.
for (const backend of BACKENDS) {
  describe(`NANOSRV_BACKEND=${backend}`, () => {
    test('selects the backend', () => {
      const code = `const n=require(${JSON.stringify(path.join(__dirname, '..'))});` +
        "const s=n.createServer();process.stdout.write(s.backend+' '+n.base64Encode('hi')+' '+n.loadLibrary().backend);s.close()";
      const out = execFileSync(process.execPath, ['-e', code], { env: { ...process.env, NANOSRV_BACKEND: backend } }).toString();
      assert.strictEqual(out, `${backend} aGk= ${backend}`);
    });
  });
}
