'use strict';
// TLS in the binding: examples/echo.js --cert/--key[/--ca] against curl,
// openssl s_client and a wss client; client certificates required and
// optional (req.tls, req.socket.getPeerCertificate()); certificate, key
// and CA given as files or PEM text, the key password; errors that name
// the cause; outbound TLS (nanosrv/net connect with tls) verified against
// a CA and the host name, with the explicit opt-out; tcp_echo.js on tls://.
const { describe, test, before, after } = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const crypto = require('node:crypto');
const tls = require('node:tls');
const { spawn, execFile } = require('node:child_process');
const { promisify } = require('node:util');
const { once } = require('node:events');
const { nanosrv } = require('./helpers');
const { makeCerts } = require('./certs');
const net = require('../lib/net');

const run = promisify(execFile);
const ECHO = path.join(__dirname, '..', 'examples', 'echo.js');
const TCP_ECHO = path.join(__dirname, '..', 'examples', 'tcp_echo.js');
const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');
const HAS_TLS = require('../lib/native').load().fns.nsv_tls_available() === 1;

async function start(script, argv) {
  const child = spawn(process.execPath, [script, '--port', '0', ...argv], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  for await (const d of child.stdout) {
    out += d;
    const m = /listening on (\d+)/.exec(out);
    if (m) return { child, port: +m[1] };
  }
  throw new Error(`${script} did not start`);
}

function stop(child) { if (child && child.exitCode === null) child.kill('SIGTERM'); }

// curl; resolves { code, out, err } whatever curl's exit status.
function curl(args) {
  return run('curl', ['-sS', '--max-time', '10', ...args]).then(
    (r) => ({ code: 0, out: r.stdout, err: r.stderr }),
    (e) => ({ code: e.code, out: e.stdout || '', err: e.stderr || '' }));
}

describe('TLS', { skip: !HAS_TLS && 'this build has no TLS', timeout: 120000 }, () => {
  let c;
  before(() => { c = makeCerts(); });
  after(() => c.cleanup());

  describe('echo.js --cert --key (https and wss)', () => {
    let child, port;
    before(async () => ({ child, port } = await start(ECHO, ['--cert', c.p('srv.crt'), '--key', c.p('srv.key')])));
    after(() => stop(child));

    test('curl: POST /echo over https, the body byte for byte; SNI reaches the handler', async () => {
      const body = crypto.randomBytes(200000).toString('base64');
      require('node:fs').writeFileSync(c.p('body.txt'), body);
      const r = await curl(['--cacert', c.p('ca.crt'), '--data-binary', `@${c.p('body.txt')}`, '-H', 'Content-Type: text/plain', `https://localhost:${port}/echo`]);
      assert.strictEqual(r.code, 0, r.err);
      assert.strictEqual(sha(r.out), sha(body));
      const d = await curl(['--cacert', c.p('ca.crt'), `https://localhost:${port}/x?q=1`]);
      const got = JSON.parse(d.out);
      assert.ok(Number.isInteger(got.peer_port) && got.peer_port > 0, `peer_port ${got.peer_port}`);
      assert.deepStrictEqual({ ...got, peer_port: 0 }, { method: 'GET', path: '/x', query: 'q=1', body_len: 0, sni: 'localhost', subject: '', peer: '127.0.0.1', peer_port: 0 });
    });

    test('curl refuses the server without our CA (the chain is really checked)', async () => {
      const r = await curl([`https://localhost:${port}/`]);
      assert.notStrictEqual(r.code, 0);
    });

    test('openssl s_client verifies the chain', async () => {
      const child2 = spawn('openssl', ['s_client', '-connect', `127.0.0.1:${port}`, '-servername', 'localhost',
        '-CAfile', c.p('ca.crt'), '-verify_return_error', '-ign_eof'], { stdio: ['pipe', 'pipe', 'pipe'] });
      child2.stdin.end('GET /s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
      let out = '';
      child2.stdout.on('data', (d) => { out += d; });
      await once(child2, 'close');
      assert.match(out, /Verify return code: 0/);
      assert.match(out, /"path":"\/s"/);
    });

    test('wss: a WebSocket client with our CA gets its messages back', async () => {
      const WebSocket = require('ws');
      const ws = new WebSocket(`wss://localhost:${port}/ws`, { ca: c.read('ca.crt') });
      await once(ws, 'open');
      const msg = crypto.randomBytes(70000);
      ws.send(msg);
      const [data] = await once(ws, 'message');
      assert.ok(Buffer.from(data).equals(msg));
      ws.close();
      await once(ws, 'close');
    });
  });

  describe('echo.js --ca: client certificate required', () => {
    let child, port;
    before(async () => ({ child, port } = await start(ECHO, ['--cert', c.p('srv.crt'), '--key', c.p('srv.key'), '--ca', c.p('ca.crt')])));
    after(() => stop(child));

    test('a certificate from our CA is let in and its subject reaches the handler', async () => {
      const r = await curl(['--cacert', c.p('ca.crt'), '--cert', c.p('alice.crt'), '--key', c.p('alice.key'), `https://localhost:${port}/m`]);
      assert.strictEqual(r.code, 0, r.err);
      assert.strictEqual(JSON.parse(r.out).subject, 'CN=alice, O=Example');
    });

    test('no certificate, or one from another CA, is refused', async () => {
      const none = await curl(['--cacert', c.p('ca.crt'), `https://localhost:${port}/m`]);
      assert.notStrictEqual(none.code, 0);
      const other = await curl(['--cacert', c.p('ca.crt'), '--cert', c.p('mallory.crt'), '--key', c.p('mallory.key'), `https://localhost:${port}/m`]);
      assert.notStrictEqual(other.code, 0);
    });
  });

  test('optional client certificates, PEM options, the key password, req.socket', async (t) => {
    const srv = nanosrv.createServer({
      tlsCertPem: c.read('srv.crt'), tlsKeyPem: Buffer.from(c.read('srv-enc.key')), tlsKeyPassword: 'secret',
      tlsCaPem: c.read('ca.crt'), tlsVerifyClient: 1,
    });
    srv.get('/who', (req, res) => {
      const s = req.socket;
      res.json({ enc: s.encrypted, sni: s.servername, auth: s.authorized, tls: req.tls, cn: s.getPeerCertificate().subject?.CN ?? null, proto: req.protocol });
    });
    const port = await srv.listen('https://127.0.0.1:0');
    t.after(() => srv.close(1000));
    const anon = await curl(['--cacert', c.p('ca.crt'), `https://localhost:${port}/who`, '--resolve', `localhost:${port}:127.0.0.1`]);
    assert.strictEqual(anon.code, 0, anon.err);
    assert.deepStrictEqual(JSON.parse(anon.out), {
      enc: true, sni: 'localhost', auth: false, tls: { servername: 'localhost', subject: '', authorized: false }, cn: null, proto: 'https',
    });
    const alice = await curl(['--cacert', c.p('ca.crt'), '--cert', c.p('alice.crt'), '--key', c.p('alice.key'), `https://localhost:${port}/who`]);
    assert.strictEqual(alice.code, 0, alice.err);
    const a = JSON.parse(alice.out);
    assert.strictEqual(a.cn, 'alice');
    assert.strictEqual(a.tls.subject, 'CN=alice, O=Example');
    assert.strictEqual(a.auth, true);
  });

  test('plain http requests have no TLS details', async (t) => {
    const srv = nanosrv.createServer();
    srv.get('/', (req, res) => res.json({ tls: req.tls, enc: req.socket.encrypted, proto: req.protocol }));
    const port = await srv.listen(0, '127.0.0.1');
    t.after(() => srv.close(1000));
    const r = await curl([`http://127.0.0.1:${port}/`]);
    assert.deepStrictEqual(JSON.parse(r.out), { tls: null, enc: false, proto: 'http' });
  });

  describe('errors name the cause', () => {
    const listenErr = async (opts) => {
      const srv = nanosrv.createServer(opts);
      try {
        await srv.listen('https://127.0.0.1:0');
      } catch (e) {
        return e;
      } finally {
        await srv.close(0);
      }
      assert.fail('listen succeeded');
    };

    test('a missing certificate file', () => {
      assert.throws(() => nanosrv.createServer({ tlsCertFile: path.join(c.dir, 'nope.crt') }),
        (e) => e.code === 'NSV_ETLS' && /nope\.crt/.test(e.message) && /tlsCertFile/.test(e.message));
    });

    test('bad PEM', async () => {
      const e = await listenErr({ tlsCertPem: 'not a certificate', tlsKeyPem: c.read('srv.key') });
      assert.strictEqual(e.code, 'NSV_ETLS');
      assert.match(e.message, /cert|PEM/i);
    });

    test('a wrong key password, and none', async () => {
      const e = await listenErr({ tlsCertFile: c.p('srv.crt'), tlsKeyFile: c.p('srv-enc.key'), tlsKeyPassword: 'wrong' });
      assert.strictEqual(e.code, 'NSV_ETLS');
      assert.match(e.message, /password/i);
      const e2 = await listenErr({ tlsCertFile: c.p('srv.crt'), tlsKeyFile: c.p('srv-enc.key') });
      assert.match(e2.message, /password/i);
    });

    test('https without a certificate', async () => {
      const e = await listenErr({});
      assert.strictEqual(e.code, 'NSV_ETLS');
      assert.match(e.message, /certificate|cert/i);
    });

    test('a string option given a number, an integer option given a string', () => {
      assert.throws(() => nanosrv.createServer({ tlsCertFile: 3 }), TypeError);
      assert.throws(() => nanosrv.createServer({ maxBody: '3' }), TypeError);
    });
  });

  describe('tls:// with examples/tcp_echo.js and outbound TLS', () => {
    let child, port, wrong, wrongPort;
    before(async () => {
      ({ child, port } = await start(TCP_ECHO, ['--cert', c.p('srv.crt'), '--key', c.p('srv.key')]));
      ({ child: wrong, port: wrongPort } = await start(TCP_ECHO, ['--cert', c.p('wronghost.crt'), '--key', c.p('wronghost.key')]));
    });
    after(() => { stop(child); stop(wrong); });

    test("node's tls client: 4 MiB echoed in order, half-close", async () => {
      const data = crypto.randomBytes(4 << 20);
      const s = tls.connect({ host: '127.0.0.1', port, servername: 'localhost', ca: c.read('ca.crt'), allowHalfOpen: true });
      await once(s, 'secureConnect');
      const got = [];
      s.on('data', (d) => got.push(d));
      s.end(data);
      await once(s, 'end');
      assert.strictEqual(sha(Buffer.concat(got)), sha(data));
      s.destroy();
    });

    test('nanosrv/net connect with tls: verified against our CA', async () => {
      const s = net.connect({ host: 'localhost', port, tls: { ca: c.read('ca.crt') } });
      await once(s, 'connect');
      assert.strictEqual(s.encrypted, true);
      const data = crypto.randomBytes(300000);
      const got = [];
      s.on('data', (d) => got.push(d));
      s.end(data);
      await once(s, 'end');
      assert.strictEqual(sha(Buffer.concat(got)), sha(data));
    });

    test('the wrong host name, and an unknown CA, fail; rejectUnauthorized: false opts out', async () => {
      const bad = net.connect({ host: 'localhost', port: wrongPort, tls: { ca: c.read('ca.crt') } });
      const [err] = await once(bad, 'error');
      assert.match(`${err.code} ${err.message}`, /SSL|TLS|verif|certificate|name/i);
      const unknown = net.connect({ host: 'localhost', port, tls: true }); // the system bundle knows no test CA
      const [err2] = await once(unknown, 'error');
      assert.match(`${err2.code} ${err2.message}`, /SSL|TLS|verif|certificate/i);
      const optOut = net.connect({ host: 'localhost', port: wrongPort, tls: { rejectUnauthorized: false } });
      await once(optOut, 'connect');
      const got = [];
      optOut.on('data', (d) => got.push(d));
      optOut.end('hello');
      await once(optOut, 'end');
      assert.strictEqual(Buffer.concat(got).toString(), 'hello');
    });
  });
});
