'use strict';
// nanosrv/http's node:http behaviours, each checked against node:http
// itself where both can run the same code.
const test = require('node:test');
const assert = require('node:assert');
const net = require('net');
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const { once } = require('events');
const { BACKENDS, nsvHttp, nodeHttp, start, request, STATIC } = require('../fixtures/http/both');

// Both modules, the nanosrv one bound to a backend.
function modules(backend) {
  return [
    ['node', nodeHttp, {}],
    ['nanosrv', nsvHttp, { backend }],
  ];
}

// Sends raw bytes on a new connection, resolves with what came back once
// the server closed it or `until` matched.
function raw(port, bytes, until) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let got = '';
    const timer = setTimeout(() => { s.destroy(); reject(new Error(`no answer; got ${JSON.stringify(got)}`)); }, 10000);
    s.on('data', (d) => {
      got += d.toString('latin1');
      if (until && until.test(got)) { clearTimeout(timer); s.destroy(); resolve(got); }
    });
    s.on('end', () => { clearTimeout(timer); resolve(got); });
    s.on('error', (e) => { clearTimeout(timer); reject(e); });
    s.write(bytes);
  });
}

test('module surface: STATUS_CODES, METHODS, classes', () => {
  assert.deepStrictEqual(nsvHttp.STATUS_CODES, nodeHttp.STATUS_CODES);
  assert.deepStrictEqual(nsvHttp.METHODS, nodeHttp.METHODS);
  for (const k of ['createServer', 'Server', 'IncomingMessage', 'ServerResponse', 'request', 'get', 'Agent']) {
    assert.ok(nsvHttp[k], k);
  }
  assert.ok(nsvHttp.IncomingMessage.prototype instanceof nodeHttp.IncomingMessage);
  const https = require('../https');
  assert.strictEqual(typeof https.createServer, 'function');
  assert.ok(https.createServer({}) instanceof nsvHttp.Server);
});

for (const backend of BACKENDS) {
  test(`listen forms, async 'listening', address, EADDRINUSE, close (${backend})`, async () => {
    const results = {};
    for (const [name, http, opts] of modules(backend)) {
      const log = [];
      const forms = [
        (s, cb) => s.listen(0, cb),
        (s, cb) => s.listen(0, '127.0.0.1', cb),
        (s, cb) => s.listen({ port: 0, host: '127.0.0.1' }, cb),
        (s, cb) => s.listen(0, '127.0.0.1', 511, cb),
      ];
      for (const form of forms) {
        const s = http.createServer(opts, (req, res) => res.end('ok'));
        let sync = true;
        const called = new Promise((resolve) => form(s, function cb() { log.push(['cb', sync, this === s]); resolve(); }));
        s.on('listening', () => log.push(['listening', sync]));
        sync = false;
        await called;
        const a = s.address();
        log.push(['address', typeof a.port, a.port > 0, a.family]);
        if (a.address !== '::') {
          const r = await request(`http://127.0.0.1:${a.port}`, '/', { agent: false });
          log.push(['get', r.status, r.body.toString()]);
        }
        // The same port again: an 'error' event, not a throw.
        const other = http.createServer(opts);
        const err = await new Promise((resolve) => {
          other.on('error', resolve);
          other.listen(a.port, a.address === '::' ? undefined : a.address);
        });
        log.push(['error', err.code, err.syscall, err.port === a.port, other.listening]);
        await new Promise((resolve) => s.close(() => { log.push(['closed', s.listening]); resolve(); }));
        const notRunning = await new Promise((resolve) => s.close(resolve));
        log.push(['close again', notRunning && notRunning.code]);
      }
      results[name] = log;
    }
    assert.deepStrictEqual(results.nanosrv, results.node);
  });

  test(`request headers, rawHeaders, version, socket as node's (${backend})`, async (t) => {
    const wire = 'GET /p/a%20b?x=1&x=2 HTTP/1.1\r\nHost: h\r\nX-Dup: a\r\nx-dup: b\r\nSet-Cookie: c=1\r\nSet-Cookie: d=2\r\n' +
      'Cookie: a=1\r\nCookie: b=2\r\nContent-Type: text/plain\r\nContent-Type: text/html\r\nUser-Agent: one\r\nUser-Agent: two\r\n' +
      'Accept: a\r\nAccept: b\r\nConnection: close\r\n\r\n';
    const seen = {};
    for (const [name, http, opts] of modules(backend)) {
      const srv = http.createServer(opts, (req, res) => {
        const s = req.socket;
        seen[name] = {
          method: req.method, url: req.url, headers: req.headers, rawHeaders: req.rawHeaders,
          httpVersion: req.httpVersion, major: req.httpVersionMajor, minor: req.httpVersionMinor,
          remoteAddress: s.remoteAddress, remotePortOk: s.remotePort > 0, localPort: s.localPort === srv.address().port,
          encrypted: s.encrypted, same: req.connection === s && res.socket === s, complete: req.complete,
        };
        res.end('x');
      });
      const base = await start(t, srv);
      await raw(Number(base.split(':')[2]), wire);
    }
    assert.deepStrictEqual(seen.nanosrv, seen.node);
    assert.strictEqual(seen.node.headers['x-dup'], 'a, b');
    assert.deepStrictEqual(seen.node.headers['set-cookie'], ['c=1', 'd=2']);
  });

  test(`response API: headers, errors, end(cb), finish and close (${backend})`, async (t) => {
    const logs = {};
    for (const [name, http, opts] of modules(backend)) {
      const log = (logs[name] = []);
      const unreadLog = [];
      const code = (fn) => { try { fn(); return 'ok'; } catch (e) { return e.code; } };
      const srv = http.createServer(opts, (req, res) => {
        if (req.url === '/api') {
          res.setHeader('X-One', 1);
          res.setHeader('X-Many', ['a', 'b']);
          res.appendHeader('X-Many', 'c');
          log.push(['get', res.getHeader('x-one'), res.getHeader('X-MANY'), res.hasHeader('x-one'), res.getHeaderNames()]);
          log.push(['headers', { ...res.getHeaders() }]);
          res.removeHeader('x-one');
          log.push(['bad name', code(() => res.setHeader('bad name', 'x'))]);
          log.push(['bad value', code(() => res.setHeader('x-bad', 'a\r\nb'))]);
          log.push(['undefined value', code(() => res.setHeader('x-bad', undefined))]);
          log.push(['bad status', code(() => res.writeHead(1000))]);
          res.writeHead(201, 'Made', ['X-Arr', '1', 'X-Other', '2']);
          log.push(['sent', res.headersSent, code(() => res.setHeader('x-late', '1')), code(() => res.writeHead(200))]);
          res.on('finish', () => log.push(['finish', res.writableEnded, res.writableFinished]));
          res.on('close', () => log.push(['close']));
          log.push(['write', res.write('hello ')]);
          res.end('world', () => log.push(['end cb']));
          log.push(['ended', res.writableEnded, res.writableFinished]);
          res.on('error', (e) => log.push(['error', e.code]));
          log.push(['write after end', res.write('x', (e) => log.push(['write cb', e && e.code]))]);
        } else if (req.url === '/length') {
          res.strictContentLength = true; // node's opt-in; always on with nanosrv
          res.setHeader('Content-Length', 5);
          log.push(['mismatch', code(() => res.end('too long'))]);
          // node's response cannot be used after that throw; nanosrv's can
          if (name === 'nanosrv') res.end('right'); else res.destroy();
        } else if (req.url === '/length-stream') {
          res.strictContentLength = true;
          res.setHeader('Content-Length', 4);
          res.write('ab');
          log.push(['mismatch stream', code(() => res.write('cde'))]);
          res.end('cd');
        } else if (req.url === '/arr') {
          res.writeHead(200, ['X-Arr', '1', 'X-Arr', '2', 'Set-Cookie', 'a=1', 'Set-Cookie', 'b=2']);
          res.end();
        } else if (req.url === '/flush') {
          res.setHeader('X-Early', 'yes');
          res.flushHeaders();
          log.push(['flushed', res.headersSent]);
          setTimeout(() => res.end('late'), 20);
        } else if (req.url === '/unread') {
          // a body nobody reads: the request still ends and closes after the answer
          req.on('end', () => unreadLog.push('req end'));
          req.on('close', () => unreadLog.push('req close'));
          res.on('close', () => unreadLog.push('res close'));
          res.end('done');
        } else {
          res.end(req.url);
        }
      });
      const base = await start(t, srv);
      const agent = new nodeHttp.Agent({ keepAlive: true, maxSockets: 1 });
      const r = await request(base, '/api', { agent });
      log.push(['client', r.status, r.statusMessage, r.headers['x-many'], r.headers['x-arr'], r.headers['x-one'], r.body.toString()]);
      const l = await request(base, '/length', { agent }).catch((e) => e);
      if (name === 'nanosrv') assert.deepStrictEqual([l.status, l.body.toString()], [200, 'right']);
      const ls = await request(base, '/length-stream', { agent });
      log.push(['client length stream', ls.status, ls.body.toString()]);
      // the connection kept its framing: the next answer on it is intact
      const after = await request(base, '/after', { agent });
      log.push(['client after', after.status, after.body.toString()]);
      const unread = await request(base, '/unread', { agent, method: 'POST', body: 'x'.repeat(1000) });
      log.push(['client unread', unread.status, unread.body.toString()]);
      for (let i = 0; i < 100 && unreadLog.length < 3; i++) await new Promise((r) => setImmediate(r));
      log.push(['unread events', unreadLog.sort()]);
      const arr = await request(base, '/arr', { agent });
      log.push(['client arr', arr.headers['x-arr'], arr.headers['set-cookie']]);
      const f = await request(base, '/flush', { agent });
      log.push(['client flush', f.headers['x-early'], f.body.toString()]);
      agent.destroy();
      await new Promise((resolve) => setImmediate(resolve));
    }
    assert.deepStrictEqual(logs.nanosrv, logs.node);
  });

  test(`write() returns false at the high water mark synchronously; 'drain' paces 32 MiB (${backend})`, async (t) => {
    const total = 32 << 20, piece = Buffer.alloc(64 * 1024, 'z');
    let falses = 0, needDrainSeen = true;
    const srv = nsvHttp.createServer({ backend }, async (req, res) => {
      res.setHeader('Content-Type', 'application/octet-stream');
      for (let sent = 0; sent < total; sent += piece.length) {
        if (!res.write(piece)) {
          falses++;
          if (!res.writableNeedDrain) needDrainSeen = false;
          await once(res, 'drain');
        }
      }
      res.end();
    });
    const base = await start(t, srv);
    const h = crypto.createHash('sha256');
    let got = 0;
    await new Promise((resolve, reject) => {
      nodeHttp.get(base + '/big', (res) => {
        res.on('data', (c) => { got += c.length; h.update(c); });
        res.on('end', resolve);
        res.on('error', reject);
      }).on('error', reject);
    });
    assert.strictEqual(got, total);
    const want = crypto.createHash('sha256');
    for (let i = 0; i < total / piece.length; i++) want.update(piece);
    assert.strictEqual(h.digest('hex'), want.digest('hex'));
    assert.ok(falses > 0, 'write() returned false at least once');
    assert.ok(needDrainSeen);
  });

  test(`pipe() into the response, request body streamed with backpressure (${backend})`, async (t) => {
    const file = path.join(STATIC, 'hello.txt');
    const srv = nsvHttp.createServer({ backend }, (req, res) => {
      if (req.url === '/file') { fs.createReadStream(file).pipe(res); return; }
      // echo: the request piped into the response
      res.setHeader('Content-Type', 'application/octet-stream');
      req.pipe(res);
    });
    const base = await start(t, srv);
    const r = await request(base, '/file');
    assert.strictEqual(r.body.toString(), fs.readFileSync(file, 'utf8'));
    const blob = crypto.randomBytes(8 << 20);
    const e = await request(base, '/echo', { method: 'PUT', body: blob });
    assert.strictEqual(e.status, 200);
    assert.ok(e.body.equals(blob));
  });

  test(`client leaving: 'aborted' mid-body, a long poll hears 'close' (${backend})`, async (t) => {
    const logs = {};
    for (const [name, http, opts] of modules(backend)) {
      const log = (logs[name] = []);
      let done;
      const finished = new Promise((resolve) => { done = resolve; });
      let expect = 0, gotUpload, gotPoll;
      const uploading = new Promise((resolve) => { gotUpload = resolve; });
      const polling = new Promise((resolve) => { gotPoll = resolve; });
      const srv = http.createServer(opts, (req, res) => {
        if (req.url === '/upload') {
          req.on('data', () => gotUpload());
          req.on('aborted', () => log.push(['aborted', req.aborted]));
          req.on('error', (e) => log.push(['req error', e.code]));
          req.on('close', () => { log.push(['upload req close', req.complete]); if (++expect === 2) done(); });
        } else {
          gotPoll();
          req.on('close', () => log.push(['poll req close']));
          res.on('close', () => { log.push(['poll res close', res.writableEnded]); if (++expect === 2) done(); });
        }
      });
      const base = await start(t, srv);
      const port = Number(base.split(':')[2]);
      const up = net.connect(port, '127.0.0.1');
      up.write('POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n' + 'a'.repeat(1000));
      await uploading;
      up.destroy();
      const poll = net.connect(port, '127.0.0.1');
      poll.write('GET /poll HTTP/1.1\r\nHost: x\r\n\r\n');
      await polling;
      poll.destroy();
      await finished;
      log.sort((a, b) => a[0].localeCompare(b[0]));
    }
    assert.deepStrictEqual(logs.nanosrv, logs.node);
    assert.ok(logs.node.some((e) => e[0] === 'aborted'));
  });
}
