'use strict';
// examples/echo.js against the echo contract of examples/echo_server.c for
// POST /upload (multipart parsed while it streams in) and GET /sse?n=N, as
// a separate process: curl -F, malformed bodies, and a 320 MiB upload whose
// peak memory must not follow the body size. Both backends.
const { describe, test, before, after } = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const http = require('node:http');
const crypto = require('node:crypto');
const { spawn, execFile } = require('node:child_process');
const { promisify } = require('node:util');
const { once } = require('node:events');
require('./helpers'); // sets NANOSRV_LIBRARY for the child

const ECHO = path.join(__dirname, '..', 'examples', 'echo.js');
const BIG = (+process.env.NSV_UPLOAD_MIB || 320) << 20;
const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');

function rssKiB(pid, field) {
  const m = new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? +m[1] : 0;
}

// One POST /upload from Node's http client, the body written in pieces
// with backpressure.
function post(port, boundary, pieces, length) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/upload',
      headers: { 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Content-Length': length } }, (res) => {
      const parts = [];
      res.on('data', (d) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(parts).toString() }));
    });
    req.on('error', reject);
    (async () => {
      for (const p of pieces()) if (!req.write(p)) await once(req, 'drain');
      req.end();
    })();
  });
}

for (const backend of ['koffi', 'ffi-napi']) {
  describe(`echo.js upload and sse (${backend})`, { timeout: 240000 }, () => {
    let child, port;
    before(async () => {
      child = spawn(process.execPath, [ECHO, '--port', '0', '--max-body', String(BIG + (16 << 20)), '--backend', backend],
        { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      for await (const d of child.stdout) {
        out += d;
        const m = /listening on (\d+)/.exec(out);
        if (m) { port = +m[1]; break; }
      }
      assert.ok(port, 'echo.js started');
    });
    after(() => { if (child.exitCode === null) child.kill('SIGTERM'); });

    test('curl -F: the JSON array of parts', async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nsv-echo-'));
      const file = path.join(dir, 'f.bin');
      const data = crypto.randomBytes(300000);
      fs.writeFileSync(file, data);
      const { stdout } = await promisify(execFile)('curl', ['-s', '-F', 'a=1', '-F', `f=@${file};type=image/png`,
        `http://127.0.0.1:${port}/upload`], { timeout: 30000 });
      fs.rmSync(dir, { recursive: true });
      assert.deepStrictEqual(JSON.parse(stdout), [
        { name: 'a', filename: null, content_type: null, size: 1, sha256: sha(Buffer.from('1')) },
        { name: 'f', filename: 'f.bin', content_type: 'image/png', size: 300000, sha256: sha(data) },
      ]);
    });

    test('400 malformed (naming the byte), 415 another media type', async () => {
      let bad = Buffer.from('--xx\r\nContent-Disposition: form-data; name="a"\r\n\r\nhello\r\n--xx');
      let r = await post(port, 'xx', () => [bad], bad.length);
      assert.strictEqual(r.status, 400);
      bad = Buffer.from('--xx\r\nbroken header\r\n\r\nhello\r\n--xx--\r\n');
      r = await post(port, 'xx', () => [bad], bad.length);
      assert.strictEqual(r.status, 400);
      assert.match(r.body, /multipart: byte 12:/);
      const f = await fetch(`http://127.0.0.1:${port}/upload`, { method: 'POST', body: 'x=1', headers: { 'Content-Type': 'application/x-www-form-urlencoded' } });
      assert.strictEqual(f.status, 415);
      await f.text();
    });

    test('GET /sse?n=5: five events 0..4, then the end', async () => {
      const r = await fetch(`http://127.0.0.1:${port}/sse?n=5`);
      assert.strictEqual(r.headers.get('content-type'), 'text/event-stream');
      const data = (await r.text()).split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6));
      assert.deepStrictEqual(data, ['0', '1', '2', '3', '4']);
    });

    test('a large upload (320 MiB) streams through with bounded memory', async () => {
      const boundary = `----nsvtest${crypto.randomBytes(8).toString('hex')}`;
      const block = crypto.randomBytes(1 << 20);
      const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="note"\r\n\r\nhello\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n` +
        'Content-Type: application/octet-stream\r\n\r\n');
      const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
      const want = crypto.createHash('sha256');
      for (let i = 0; i < BIG / block.length; i++) want.update(block);
      const beforeKiB = rssKiB(child.pid, 'VmRSS');
      const r = await post(port, boundary, function* pieces() {
        yield head;
        for (let i = 0; i < BIG / block.length; i++) yield block;
        yield tail;
      }, head.length + BIG + tail.length);
      const peakKiB = rssKiB(child.pid, 'VmHWM');
      assert.strictEqual(r.status, 200, r.body);
      const parts = JSON.parse(r.body);
      assert.deepStrictEqual(parts.map((p) => [p.name, p.filename, p.size]), [['note', null, 5], ['file', 'big.bin', BIG]]);
      assert.strictEqual(parts[1].sha256, want.digest('hex'));
      // Buffered whole, the body alone would add 320 MiB; streamed, the
      // growth is the garbage collector's slack (about 45 MiB with koffi,
      // 105 MiB with ffi-napi, the same for 150 and 400 MiB uploads).
      assert.ok(peakKiB - beforeKiB < 128 * 1024, `peak RSS grew ${peakKiB - beforeKiB} KiB for a ${BIG >> 20} MiB upload`);
      console.log(`# ${backend}: peak RSS +${peakKiB - beforeKiB} KiB for a ${BIG >> 20} MiB upload`);
    });
  });
}
