'use strict';
// Static files through the binding: server.static (nsv_serve_dir) and
// res.sendFile (nsv_reply_file), with fetch. Both backends.
const { describe, test } = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { BACKENDS, serve, nanosrv } = require('./helpers');

function tree(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nsv-static-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, 'index.html'), '<h1>home</h1>');
  fs.writeFileSync(path.join(dir, 'app.js'), 'console.log(1)');
  fs.writeFileSync(path.join(dir, '.secret'), 'no');
  fs.mkdirSync(path.join(dir, 'sub'));
  fs.writeFileSync(path.join(dir, 'sub', 'data.txt'), '0123456789');
  return dir;
}

for (const backend of BACKENDS) {
  describe(`static files (${backend})`, { timeout: 60000 }, () => {
    test('server.static: files, index.html, Range, 304, dot files, no way out, fallthrough', async (t) => {
      const dir = tree(t);
      const { base } = await serve(t, backend, {}, (srv) => {
        srv.static('/s/', dir, { cacheControl: 'max-age=60' });
        srv.static('/f/', dir, { fallthrough: true });
        srv.get('/f/*', (req, res) => res.end('from the route'));
      });
      let r = await fetch(`${base}/s/app.js`);
      assert.strictEqual(r.status, 200);
      assert.match(r.headers.get('content-type'), /javascript/);
      assert.strictEqual(r.headers.get('cache-control'), 'max-age=60');
      assert.strictEqual(await r.text(), 'console.log(1)');
      const etag = r.headers.get('etag');
      r = await fetch(`${base}/s/app.js`, { headers: { 'If-None-Match': etag } });
      assert.strictEqual(r.status, 304);
      r = await fetch(`${base}/s/`);
      assert.strictEqual(await r.text(), '<h1>home</h1>');
      r = await fetch(`${base}/s/sub/data.txt`, { headers: { Range: 'bytes=2-4' } });
      assert.strictEqual(r.status, 206);
      assert.strictEqual(await r.text(), '234');
      r = await fetch(`${base}/s/.secret`);
      assert.strictEqual(r.status, 404);
      await r.text();
      r = await fetch(`${base}/s/%2e%2e/%2e%2e/etc/passwd`);
      assert.strictEqual(r.status, 404);
      await r.text();
      r = await fetch(`${base}/f/missing.txt`);
      assert.strictEqual(await r.text(), 'from the route');
      r = await fetch(`${base}/f/app.js`);
      assert.strictEqual(await r.text(), 'console.log(1)');
    });

    test('res.sendFile: root + URL path, a file path, status and headers, NSV_ENOTFOUND falls through', async (t) => {
      const dir = tree(t);
      const { base } = await serve(t, backend, {}, (srv) => {
        srv.get('/files/*', (req, res) => {
          try {
            res.sendFile(req.path.slice('/files'.length), { root: dir, headers: { 'X-From': 'sendFile' } });
          } catch (e) {
            if (e.code !== 'NSV_ENOTFOUND') throw e;
            res.statusCode = 404;
            res.end(`fell through: ${e.code}`);
          }
        });
        srv.get('/abs', (req, res) => res.sendFile(path.join(dir, 'sub', 'data.txt'), { status: 203 }));
        srv.get('/bad', (req, res) => res.sendFile(42));
      });
      let r = await fetch(`${base}/files/sub/data.txt`);
      assert.strictEqual(r.status, 200);
      assert.strictEqual(r.headers.get('x-from'), 'sendFile');
      assert.strictEqual(await r.text(), '0123456789');
      r = await fetch(`${base}/files/nope.txt`);
      assert.strictEqual(r.status, 404);
      assert.strictEqual(await r.text(), 'fell through: NSV_ENOTFOUND');
      r = await fetch(`${base}/files/%2e%2e/%2e%2e/etc/passwd`);
      assert.strictEqual(r.status, 404);
      await r.text();
      r = await fetch(`${base}/abs`);
      assert.strictEqual(r.status, 203);
      assert.strictEqual(await r.text(), '0123456789');
      r = await fetch(`${base}/bad`);
      assert.strictEqual(r.status, 500);
      await r.text();
    });

    test('mimeType and bad mounts', async (t) => {
      nanosrv.loadLibrary({ backend });
      assert.match(nanosrv.mimeType('index.html'), /^text\/html/);
      assert.strictEqual(nanosrv.mimeType('x.unknownext'), 'application/octet-stream');
      const srv = nanosrv.createServer({ backend });
      t.after(() => srv.close(1000));
      assert.throws(() => srv.static('/s/', '/no/such/dir/here'), { code: 'NSV_ENOTFOUND' });
      assert.throws(() => srv.static('nos', os.tmpdir()), { code: 'NSV_EINVAL' });
      assert.throws(() => srv.static('/s/', 5), { code: 'ERR_INVALID_ARG_TYPE' });
    });
  });
}
