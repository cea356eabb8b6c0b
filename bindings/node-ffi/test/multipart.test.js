'use strict';
// multipart/form-data through the binding: the streaming iterator, spooling
// to temp files, limits and malformed bodies, with fetch's FormData and curl.
const { describe, test } = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const crypto = require('node:crypto');
const { execFile } = require('node:child_process');
const { promisify } = require('node:util');
const os = require('node:os');
const path = require('node:path');
const { BACKENDS, serve } = require('./helpers');

const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');

function raw(base, body, ct) {
  return fetch(`${base}/up`, { method: 'POST', body, headers: { 'Content-Type': ct } });
}

for (const backend of BACKENDS) {
  describe(`multipart (${backend})`, { timeout: 120000 }, () => {
    const routes = (srv, seen) => {
      srv.post('/up', async (req) => {
        const out = [];
        for await (const part of req.multipart({ maxPartSize: 4 << 20, maxParts: 20 })) {
          const h = crypto.createHash('sha256');
          let n = 0;
          for await (const c of part) { h.update(c); n += c.length; }
          out.push({ name: part.name, filename: part.filename, type: part.contentType, n, sha: h.digest('hex') });
        }
        return out;
      }, { streamBody: true });
      srv.post('/skip', async (req) => { // parts not read are skipped
        const names = [];
        for await (const part of req.multipart()) names.push(part.name);
        return names;
      }, { streamBody: true });
      srv.post('/spool', async (req) => {
        const out = [];
        for await (const p of req.multipart({ spoolThreshold: 1000, tmpdir: seen.dir })) {
          out.push({ name: p.name, size: p.size, inMemory: p.buffer !== null,
            sha: sha(p.buffer || fs.readFileSync(p.filepath)), file: p.filepath });
        }
        seen.files = out.filter((p) => p.file).map((p) => p.file);
        seen.existed = seen.files.map((f) => fs.existsSync(f));
        return out.map(({ file, ...rest }) => rest);
      }, { streamBody: true });
    };

    test('parts in order with name, filename, content type, data (FormData)', async (t) => {
      const { base } = await serve(t, backend, { maxBody: 64 << 20 }, (srv) => routes(srv, {}));
      const big = crypto.randomBytes(3 << 20);
      const fd = new FormData();
      fd.append('field', 'héllo');
      fd.append('file', new Blob([big], { type: 'image/png' }), 'pic.png');
      fd.append('empty', new Blob([]), 'e.txt');
      const r = await fetch(`${base}/up`, { method: 'POST', body: fd });
      assert.strictEqual(r.status, 200);
      assert.deepStrictEqual(await r.json(), [
        { name: 'field', filename: null, type: null, n: 6, sha: sha(Buffer.from('héllo')) },
        { name: 'file', filename: 'pic.png', type: 'image/png', n: big.length, sha: sha(big) },
        { name: 'empty', filename: 'e.txt', type: 'application/octet-stream', n: 0, sha: sha(Buffer.alloc(0)) },
      ]);
      const r2 = await fetch(`${base}/skip`, { method: 'POST', body: fd });
      assert.deepStrictEqual(await r2.json(), ['field', 'file', 'empty']);
    });

    test('spooling: small parts in memory, large ones in temp files removed after the answer', async (t) => {
      const seen = { dir: fs.mkdtempSync(path.join(os.tmpdir(), 'nsv-spool-')) };
      t.after(() => fs.rmSync(seen.dir, { recursive: true, force: true }));
      const { base } = await serve(t, backend, { maxBody: 64 << 20 }, (srv) => routes(srv, seen));
      const big = crypto.randomBytes(200000);
      const fd = new FormData();
      fd.append('small', 'x'.repeat(1000));
      fd.append('big', new Blob([big]), 'b.bin');
      const r = await fetch(`${base}/spool`, { method: 'POST', body: fd });
      assert.deepStrictEqual(await r.json(), [
        { name: 'small', size: 1000, inMemory: true, sha: sha(Buffer.from('x'.repeat(1000))) },
        { name: 'big', size: big.length, inMemory: false, sha: sha(big) },
      ]);
      assert.deepStrictEqual(seen.existed, [true]);
      for (let i = 0; i < 100 && fs.readdirSync(seen.dir).length; i++) await new Promise((res) => setTimeout(res, 10));
      assert.deepStrictEqual(fs.readdirSync(seen.dir), [], 'the temp file is gone after the answer');
    });

    test('malformed -> 400 with the reason, not multipart -> 415, over maxPartSize -> 413, maxParts', async (t) => {
      const { base } = await serve(t, backend, { maxBody: 64 << 20 }, (srv) => routes(srv, {}));
      let r = await raw(base, '--xx\r\nContent-Disposition: form-data; name="a"\r\n\r\nhello\r\n--xx', 'multipart/form-data; boundary=xx');
      assert.strictEqual(r.status, 400);
      assert.match((await r.json()).error, /final boundary/);
      r = await raw(base, '--xx\r\nbroken header\r\n\r\nhello\r\n--xx--\r\n', 'multipart/form-data; boundary=xx');
      assert.strictEqual(r.status, 400);
      assert.match((await r.json()).error, /multipart: byte 12:/);
      r = await raw(base, 'x', 'multipart/form-data');
      assert.strictEqual(r.status, 400, 'no boundary');
      await r.text();
      r = await raw(base, 'a=1', 'application/x-www-form-urlencoded');
      assert.strictEqual(r.status, 415);
      await r.text();
      const fd = new FormData();
      fd.append('f', new Blob([Buffer.alloc(5 << 20)]), 'big');
      r = await fetch(`${base}/up`, { method: 'POST', body: fd });
      assert.strictEqual(r.status, 413);
      await r.text();
      const many = new FormData();
      for (let i = 0; i < 25; i++) many.append(`k${i}`, 'v');
      r = await fetch(`${base}/up`, { method: 'POST', body: many });
      assert.ok(r.status === 400 || r.status === 413, `too many parts: ${r.status}`);
      await r.text();
    });

    test('curl -F', async (t) => {
      const { port } = await serve(t, backend, {}, (srv) => routes(srv, {}));
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nsv-curl-'));
      t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
      const file = path.join(dir, 'data.bin');
      const data = crypto.randomBytes(300000);
      fs.writeFileSync(file, data);
      // Asynchronous: the server runs in this process.
      const { stdout: out } = await promisify(execFile)('curl', ['-s', '-F', 'a=1', '-F', `f=@${file};type=image/png`, `http://127.0.0.1:${port}/up`], { timeout: 30000 });
      assert.deepStrictEqual(JSON.parse(out), [
        { name: 'a', filename: null, type: null, n: 1, sha: sha(Buffer.from('1')) },
        { name: 'f', filename: 'data.bin', type: 'image/png', n: data.length, sha: sha(data) },
      ]);
    });
  });
}
