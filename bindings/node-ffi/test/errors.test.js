'use strict';
// Bad input from JS: wrong types, stale ids, replying twice, bad options.
const { describe, test } = require('node:test');
const assert = require('node:assert');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { nanosrv, BACKENDS, serve } = require('./helpers');

const isNsv = (code, errno) => (e) => {
  assert.ok(e instanceof Error);
  assert.ok(e instanceof nanosrv.NanosrvError);
  assert.strictEqual(e.code, code);
  assert.strictEqual(e.errno, errno);
  return true;
};

for (const backend of BACKENDS) {
  describe(`errors (${backend})`, { timeout: 60000 }, () => {
    test('wrong types are TypeErrors', async (t) => {
      const srv = nanosrv.createServer({ backend });
      t.after(() => srv.close());
      assert.throws(() => srv.route('GET', '/a', 'not a function'), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
      assert.throws(() => srv.route(1, '/a', () => {}), TypeError);
      assert.throws(() => srv.route('GET', null, () => {}), TypeError);
      assert.throws(() => srv.setOption('maxBody', 'big'), TypeError);
      await assert.rejects(srv.listen('80'), TypeError);
      await assert.rejects(srv.listen(70000), TypeError);
      assert.throws(() => nanosrv.createServer({ backend }, 42), TypeError);
      assert.throws(() => nanosrv.createServer({ backend, threads: -1 }), TypeError);
      assert.throws(() => srv.reply('12', 200), TypeError);
      assert.throws(() => nanosrv.base64Encode(12), TypeError);
    });

    test('library errors carry code and errno', async (t) => {
      const srv = nanosrv.createServer({ backend });
      t.after(() => srv.close());
      assert.throws(() => srv.setOption('noSuchOption', 1), isNsv('NSV_ENOTFOUND', -13));
      assert.throws(() => srv.setOption('maxBody', -5), isNsv('NSV_ERANGE', -12));
      srv.get('/dup', () => {});
      assert.throws(() => srv.get('/dup', () => {}), isNsv('NSV_EEXIST', -20));
      // A connection that is not open (never was, or its client left): a
      // late reply is a no-op that answers false.
      assert.strictEqual(srv.reply(123456789, 200, null, 'x'), false);
      assert.strictEqual(srv.reply(2n ** 62n + 5n, 200, null, 'x'), false);
      assert.throws(() => srv.closeConnection(987654321), isNsv('NSV_ESTALE', -3));
      const port = await srv.listen(0, '127.0.0.1');
      const other = nanosrv.createServer({ backend });
      t.after(() => other.close());
      await assert.rejects(other.listen(port, '127.0.0.1'), isNsv('NSV_EADDRINUSE', -7));
    });

    test('bad responses: reply twice, bad status, bad headers, bad body', async (t) => {
      const seen = {};
      const { srv, base } = await serve(t, backend, {}, (s) => {
        s.get('/twice', (req, res) => {
          res.end('first');
          try { res.end('second'); } catch (e) { seen.twice = e; }
          try { res.write('more'); } catch (e) { seen.write = e; }
          try { s.reply(req.conn, 200, null, 'third'); } catch (e) { seen.byId = e; }
        });
        s.get('/status', (req, res) => {
          try { res.writeHead(42); } catch (e) { seen.status = e; }
          res.statusCode = 1000;
          try { res.end('x'); } catch (e) { seen.status2 = e; }
          res.statusCode = 200;
          res.end('fine');
        });
        s.get('/header', (req, res) => {
          try { res.setHeader('Bad Name', 'x'); } catch (e) { seen.name = e; }
          try { res.setHeader('X-Split', 'a\r\nInjected: 1'); } catch (e) { seen.value = e; }
          try { res.setHeader('X-Obj', {}); } catch (e) { seen.obj = e; }
          try { res.end(12345); } catch (e) { seen.body = e; }
          res.end('ok');
        });
        s.get('/bad-return', () => 12345 /* numbers become JSON */);
      });
      assert.strictEqual(await (await fetch(`${base}/twice`)).text(), 'first');
      assert.ok(isNsv('NSV_ESTATE', -4)(seen.twice));
      assert.ok(isNsv('NSV_ESTATE', -4)(seen.write));
      assert.ok(isNsv('NSV_ESTATE', -4)(seen.byId)); // from the library: no request pending
      const r = await fetch(`${base}/status`);
      assert.strictEqual(r.status, 200);
      await r.text();
      assert.strictEqual(seen.status.code, 'ERR_HTTP_INVALID_STATUS_CODE');
      assert.strictEqual(seen.status2.code, 'ERR_HTTP_INVALID_STATUS_CODE');
      const h = await fetch(`${base}/header`);
      assert.strictEqual(await h.text(), 'ok');
      assert.strictEqual(h.headers.get('injected'), null);
      assert.strictEqual(seen.name.code, 'ERR_INVALID_ARG_TYPE');
      assert.strictEqual(seen.value.code, 'ERR_INVALID_CHAR');
      assert.strictEqual(seen.obj.code, 'ERR_INVALID_ARG_TYPE');
      assert.strictEqual(seen.body.code, 'ERR_INVALID_ARG_TYPE');
      assert.strictEqual(await (await fetch(`${base}/bad-return`)).text(), '12345');
      assert.strictEqual(srv.connections, 0);
    });

    test('request data read after the reply is refused, not garbage', async (t) => {
      let late;
      const { base } = await serve(t, backend, {}, (s) => {
        s.get('/keep', (req, res) => {
          res.end('ok');
          setTimeout(() => { try { late = req.path; } catch (e) { late = e; } }, 5);
        });
      });
      await (await fetch(`${base}/keep`)).text();
      await new Promise((r) => setTimeout(r, 30));
      assert.ok(isNsv('NSV_ESTATE', -4)(late));
    });

    test('using a closed server', async () => {
      const srv = nanosrv.createServer({ backend });
      await srv.close();
      await assert.rejects(srv.listen(0), isNsv('NSV_ESTOPPED', -18));
      assert.throws(() => srv.reply(1, 200), isNsv('NSV_ESTOPPED', -18));
    });
  });
}

describe('loading', () => {
  test('unknown backend', () => {
    assert.throws(() => nanosrv.createServer({ backend: 'nope' }), /unknown backend 'nope'/);
  });

  test('ABI mismatch names both values and the library path', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nsv-abi-'));
    const src = JSON.parse(fs.readFileSync(require('../lib/abi').file, 'utf8'));
    src.abi_major = 99;
    fs.writeFileSync(path.join(dir, 'abi.json'), JSON.stringify(src));
    let out = '';
    try {
      execFileSync(process.execPath, ['-e', `require(${JSON.stringify(path.join(__dirname, '..'))}).createServer()`], {
        env: { ...process.env, NANOSRV_ABI_JSON: path.join(dir, 'abi.json') }, stdio: 'pipe',
      });
    } catch (e) {
      out = e.stderr.toString();
    }
    fs.rmSync(dir, { recursive: true });
    assert.match(out, /ABI mismatch: .*libnanosrv\.so\.1 has ABI 1 and event size 112, .*expect ABI 99 and event size 112/);
  });

  test('a missing library gives a clear message', () => {
    let out = '';
    try {
      execFileSync(process.execPath, ['-e', `require(${JSON.stringify(path.join(__dirname, '..'))}).createServer()`], {
        env: { ...process.env, NANOSRV_LIBRARY: '/nonexistent/libnanosrv.so.1' }, stdio: 'pipe',
      });
    } catch (e) {
      out = e.stderr.toString();
    }
    assert.match(out, /cannot load \/nonexistent\/libnanosrv\.so\.1 with koffi/);
  });
});
