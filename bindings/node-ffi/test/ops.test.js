'use strict';
// Operating behind load balancers, on the native server: PROXY protocol v1
// (curl --haproxy-protocol, raw headers) and v2 (raw, with TLVs), address
// lists (curl --interface 127.0.0.2), metrics after known requests, the
// Prometheus text, the access log in each format, the draining flag during
// a drain, reuseport and adopting a listening socket. koffi for all of it;
// ffi-napi for the calls whose arguments it marshals differently.
const { describe, test } = require('node:test');
const assert = require('node:assert');
const net = require('node:net');
const { PassThrough } = require('node:stream');
const { nanosrv, BACKENDS, serve } = require('./helpers');
const { proxyV2, exchange, bodyOf, curl, get, until } = require('./ops-helpers');

// Every request gets its peer and front fields as JSON.
function whoami(srv) {
  srv.fallback((req) => ({ peer: req.remoteAddress, port: req.remotePort, proxy: req.proxy, socketProxy: req.socket.proxy }));
}

async function listenWith(t, backend, lopts, opts = {}) {
  const srv = nanosrv.createServer({ backend, ...opts });
  whoami(srv);
  const port = await srv.listen({ port: 0, host: '127.0.0.1', ...lopts });
  t.after(() => srv.close(1000));
  return { srv, port };
}

const GET = 'GET /who HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n';

{
  const backend = BACKENDS[0];
  describe(`operations (${backend})`, () => {
    test('PROXY v1: the peer is the header\'s client, req.proxy the front\'s fields', async (t) => {
      const { port } = await listenWith(t, backend, { proxyProtocol: 'v1' });
      // The header in two pieces: it may arrive split.
      const raw = await exchange(port, ['PROXY TCP4 203.0.113.7 198.51.100.1 5555 ', `443\r\n${GET}`]);
      const d = JSON.parse(bodyOf(raw));
      assert.strictEqual(d.peer, '203.0.113.7');
      assert.strictEqual(d.port, 5555);
      assert.strictEqual(d.proxy.front, '127.0.0.1');
      assert.ok(d.proxy.frontPort > 0);
      assert.deepStrictEqual({ ...d.proxy, frontPort: 0 }, { front: '127.0.0.1', frontPort: 0, dst: '198.51.100.1', dstPort: 443, ssl: '', authority: '', alpn: '' });
      assert.deepStrictEqual(d.socketProxy, d.proxy);
    });

    test('PROXY v2 with TLVs (proxyProtocol: true takes either version)', async (t) => {
      const { port } = await listenWith(t, backend, { proxyProtocol: true });
      const hdr = proxyV2('192.0.2.9', 40000, '198.51.100.2', 8443, { alpn: 'h2', authority: 'shop.example', ssl: 'TLSv1.3' });
      const d = JSON.parse(bodyOf(await exchange(port, Buffer.concat([hdr, Buffer.from(GET)]))));
      assert.strictEqual(d.peer, '192.0.2.9');
      assert.strictEqual(d.port, 40000);
      assert.strictEqual(d.proxy.dst, '198.51.100.2');
      assert.strictEqual(d.proxy.dstPort, 8443);
      assert.strictEqual(d.proxy.alpn, 'h2');
      assert.strictEqual(d.proxy.authority, 'shop.example');
      assert.strictEqual(d.proxy.ssl, 'TLSv1.3');
      // The v1 form is taken too.
      const v1 = JSON.parse(bodyOf(await exchange(port, `PROXY TCP4 203.0.113.8 198.51.100.1 1 2\r\n${GET}`)));
      assert.strictEqual(v1.peer, '203.0.113.8');
    });

    test('https behind a PROXY front: the header before the ClientHello; req.tls and req.proxy', async (t) => {
      const c = require('./certs').makeCerts();
      t.after(() => c.cleanup());
      const srv = nanosrv.createServer({ backend, tlsCertFile: c.p('srv.crt'), tlsKeyFile: c.p('srv.key') });
      srv.fallback((req) => ({ peer: req.remoteAddress, sni: req.tls && req.tls.servername, front: req.proxy && req.proxy.front, dst: req.proxy && req.proxy.dst }));
      t.after(() => srv.close(1000));
      const port = await srv.listen('https://127.0.0.1:0', { proxyProtocol: 'v1' });
      const raw = net.connect(port, '127.0.0.1');
      await new Promise((r) => raw.once('connect', r));
      raw.write('PROXY TCP4 203.0.113.10 198.51.100.3 6000 443\r\n');
      const sock = require('node:tls').connect({ socket: raw, servername: 'localhost', ca: c.read('ca.crt') });
      sock.write(GET);
      let text = '';
      sock.setEncoding('latin1');
      sock.on('data', (d) => { text += d; });
      await new Promise((r) => sock.once('close', r));
      assert.deepStrictEqual(JSON.parse(bodyOf(text)), { peer: '203.0.113.10', sni: 'localhost', front: '127.0.0.1', dst: '198.51.100.3' });
    });

    test('curl --haproxy-protocol; no header: closed, nothing answered, counted', async (t) => {
      const { srv, port } = await listenWith(t, backend, { proxyProtocol: 'any', proxyTimeoutMs: 2000 });
      const r = await curl(['--haproxy-protocol', `http://127.0.0.1:${port}/who`]);
      assert.strictEqual(r.code, 0, r.stderr);
      const d = JSON.parse(r.stdout);
      assert.strictEqual(d.peer, '127.0.0.1');
      assert.strictEqual(d.proxy.front, '127.0.0.1');
      assert.strictEqual(d.proxy.dstPort, port);
      const before = srv.metrics().proxy_errors;
      assert.strictEqual(await exchange(port, GET), '');
      assert.ok(await until(() => srv.metrics().proxy_errors === before + 1), 'proxy_errors counted');
      // Without the PROXY protocol the same request has no front.
      const { port: plain } = await listenWith(t, backend, {});
      assert.strictEqual(JSON.parse((await curl([`http://127.0.0.1:${plain}/who`])).stdout).proxy, null);
    });

    test('allow and deny lists: 127.0.0.2 refused at accept, 127.0.0.1 served', async (t) => {
      const { srv, port } = await listenWith(t, backend, { allow: ['127.0.0.1/32', '::1'] });
      const ok = await curl([`http://127.0.0.1:${port}/who`]);
      assert.strictEqual(JSON.parse(ok.stdout).peer, '127.0.0.1');
      const no = await curl(['--interface', '127.0.0.2', `http://127.0.0.1:${port}/who`]);
      assert.notStrictEqual(no.code, 0, 'refused');
      assert.strictEqual(no.stdout, '');
      assert.ok(await until(() => srv.metrics().conns_denied >= 1), 'conns_denied counted');
      // deny is checked first; a server-wide default applies to every listen().
      const d = await listenWith(t, backend, {}, { deny: '127.0.0.2' });
      assert.notStrictEqual((await curl(['--interface', '127.0.0.2', `http://127.0.0.1:${d.port}/who`])).code, 0);
      assert.strictEqual(JSON.parse((await curl([`http://127.0.0.1:${d.port}/who`])).stdout).peer, '127.0.0.1');
    });

    test('a bad list raises with the library\'s detail', async (t) => {
      const srv = nanosrv.createServer({ backend });
      t.after(() => srv.close(0));
      await assert.rejects(srv.listen({ port: 0, host: '127.0.0.1', allow: '10.0.0.0/8, 10.0.0.1/8' }),
        (e) => e.code === 'NSV_EINVAL' && /10\.0\.0\.1\/8/.test(e.message));
      assert.throws(() => nanosrv.createServer({ backend, proxyProtocol: 'v3' }), /proxyProtocol/);
      assert.throws(() => nanosrv.createServer({ backend, deny: 42 }), /deny/);
    });

    test('metrics after known requests; histograms; per worker', async (t) => {
      const { srv, base } = await serve(t, backend, {}, (s) => s.get('/ok', () => 'ok'));
      const m0 = srv.metrics();
      for (const k of ['conns_accepted', 'requests', 'resp_2xx', 'resp_4xx', 'bytes_in', 'draining']) assert.strictEqual(typeof m0[k], 'number', k);
      for (let i = 0; i < 3; i++) assert.strictEqual((await fetch(`${base}/ok`)).status, 200);
      assert.strictEqual((await fetch(`${base}/missing`)).status, 404);
      const m = await until(() => { const v = srv.metrics(); return v.lat_flushed.count >= m0.lat_flushed.count + 4 && v; });
      assert.strictEqual(m.requests - m0.requests, 4);
      assert.strictEqual(m.resp_2xx - m0.resp_2xx, 3);
      assert.strictEqual(m.resp_4xx - m0.resp_4xx, 1);
      assert.ok(m.bytes_in > m0.bytes_in && m.bytes_out > m0.bytes_out);
      assert.strictEqual(m.draining, 0);
      for (const h of [m.lat_queued, m.lat_flushed]) {
        assert.strictEqual(h.count, m.requests);
        assert.strictEqual(h.buckets.length, nanosrv.constants.NSV_M_LAT_BUCKETS);
        assert.deepStrictEqual(h.buckets.slice(0, 3).map((b) => b[0]), [0.0001, 0.00025, 0.0005]);
        assert.strictEqual(h.buckets[h.buckets.length - 1][0], Infinity);
        assert.strictEqual(h.buckets[h.buckets.length - 1][1], h.count);
        for (let i = 1; i < h.buckets.length; i++) assert.ok(h.buckets[i][1] >= h.buckets[i - 1][1], 'cumulative');
        assert.ok(h.sum_seconds > 0);
      }
      const w0 = srv.metrics(0);
      assert.strictEqual(w0.requests, m.requests); // one worker: all of it
      assert.throws(() => srv.metrics(7), (e) => e.code === 'NSV_ERANGE');
    });

    test('two workers: metrics(worker) add up, worker labels in the text', async (t) => {
      const { srv, base } = await serve(t, backend, { threads: 2 }, (s) => s.get('/ok', () => 'ok'));
      for (let i = 0; i < 6; i++) await get(`${base}/ok`, { Connection: 'close' });
      const m = await until(() => { const v = srv.metrics(); return v.requests === 6 && v; });
      assert.strictEqual(srv.metrics(0).requests + srv.metrics(1).requests, m.requests);
      assert.throws(() => srv.metrics(2), (e) => e.code === 'NSV_ERANGE');
      srv._promCap = 64; // the first buffer too small: sized again from the library's answer
      const text = srv.metricsText(undefined, { perWorker: true });
      assert.match(text, /worker="0"/);
      assert.match(text, /worker="1"/);
    });

    test('Prometheus text: shape, prefix, GET /metrics', async (t) => {
      const { srv, base } = await serve(t, backend, {}, (s) => s.get('/metrics', s.metricsHandler()));
      await (await fetch(`${base}/x`)).text();
      const r = await fetch(`${base}/metrics`);
      assert.strictEqual(r.headers.get('content-type'), 'text/plain; version=0.0.4');
      const text = await r.text();
      const lines = text.trimEnd().split('\n');
      const types = {};
      for (const l of lines) {
        if (l.startsWith('# ')) {
          const m = /^# (HELP|TYPE) (nanosrv_\w+) (.+)$/.exec(l);
          assert.ok(m, `comment line: ${l}`);
          if (m[1] === 'TYPE') types[m[2]] = m[3];
        } else {
          assert.match(l, /^nanosrv_\w+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? [0-9.e+-]+$/, `sample line: ${l}`);
        }
      }
      for (const [name, type] of Object.entries(types)) {
        assert.ok(['counter', 'gauge', 'histogram'].includes(type), `${name} ${type}`);
        if (type === 'counter') assert.match(name, /_total$/);
      }
      assert.ok(Object.values(types).filter((x) => x === 'histogram').length >= 2);
      assert.match(text, /_bucket\{le="\+Inf"\} \d+/);
      const own = srv.metricsText('myapp_');
      assert.ok(own.split('\n').filter((l) => l && !l.startsWith('#')).every((l) => l.startsWith('myapp_')));
      assert.throws(() => srv.metricsText('bad-prefix'), (e) => e.code === 'NSV_EINVAL');
    });

    test('access log: common, combined and json lines; a function; the access event', async (t) => {
      const streams = {};
      const servers = {};
      for (const fmt of ['common', 'combined', 'json']) {
        const out = new PassThrough();
        let text = '';
        out.on('data', (d) => { text += d; });
        streams[fmt] = () => text;
        servers[fmt] = await serve(t, backend, { accessLog: fmt, accessLogStream: out }, (s) => s.get('/a', () => 'hello'));
      }
      const got = [];
      const fnSrv = await serve(t, backend, { accessLog: (r) => got.push(r) }, (s) => s.get('/a', () => 'hello'));
      const events = [];
      const evSrv = await serve(t, backend, {}, (s) => { s.get('/a', () => 'hello'); s.on('access', (r) => events.push(r)); });
      const headers = { 'User-Agent': 'probe/1.0', Referer: 'http://ref.example/' };
      const answers = await Promise.all([...Object.values(servers), fnSrv, evSrv].map((s) => get(`${s.base}/a?b=1`, headers)));
      assert.ok(answers.every((a) => a.body === 'hello'));
      const date = '\\[\\d{2}/[A-Z][a-z]{2}/\\d{4}:\\d{2}:\\d{2}:\\d{2} [+-]\\d{4}\\]';
      const common = await until(() => streams.common());
      assert.match(common, new RegExp(`^127\\.0\\.0\\.1 - - ${date} "GET /a\\?b=1 HTTP/1\\.1" 200 \\d+\\n$`));
      const combined = await until(() => streams.combined());
      assert.match(combined, new RegExp(`^127\\.0\\.0\\.1 - - ${date} "GET /a\\?b=1 HTTP/1\\.1" 200 \\d+ "http://ref\\.example/" "probe/1\\.0"\\n$`));
      const json = JSON.parse(await until(() => streams.json()));
      assert.deepStrictEqual(Object.keys(json), ['time', 'peer', 'port', 'method', 'target', 'status', 'bytes_out', 'bytes_in',
        'duration_ms', 'user_agent', 'referer']);
      assert.match(json.time, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      assert.ok(Math.abs(Date.parse(json.time) - Date.now()) < 60000);
      assert.deepStrictEqual([json.peer, json.method, json.target, json.status, json.user_agent, json.referer],
        ['127.0.0.1', 'GET', '/a?b=1', 200, 'probe/1.0', 'http://ref.example/']);
      assert.ok(json.bytes_out > 5 && json.bytes_in > 20 && json.port > 0 && json.duration_ms >= 0);
      await until(() => got.length && events.length);
      for (const r of [got[0], events[0]]) {
        assert.ok(r, 'record delivered');
        assert.strictEqual(r.status, 200);
        assert.strictEqual(r.target, '/a?b=1');
        assert.strictEqual(r.userAgent, 'probe/1.0');
      }
      assert.strictEqual(got.length, 1);
      assert.strictEqual(events.length, 1);
      // A keep-alive request and then silence: no event wakes the server,
      // the periodic take brings the record.
      const quiet = [];
      const q = await serve(t, backend, { accessLog: (r) => quiet.push(r) }, (s) => s.get('/a', () => 'hello'));
      assert.strictEqual(await (await fetch(`${q.base}/a`)).text(), 'hello');
      assert.ok(await until(() => quiet.length === 1), 'record taken without another event');
    });

    test('draining: the flag and the readiness handler during a drain', async (t) => {
      let held = null;
      let ready;
      const { srv, port } = await serve(t, backend, {}, (s) => {
        ready = s.readinessHandler();
        s.get('/readyz', ready);
        s.get('/hold', (req, res) => { held = res; });
      });
      const r0 = await fetch(`http://127.0.0.1:${port}/readyz`);
      assert.deepStrictEqual([r0.status, await r0.text()], [200, 'ready']);
      assert.strictEqual(srv.draining, false);
      const pending = fetch(`http://127.0.0.1:${port}/hold`);
      await until(() => held);
      const closed = srv.close(5000);
      assert.strictEqual(srv.draining, true);
      assert.strictEqual(srv.metrics().draining, 1);
      ready(null, held); // the held request answers its readiness now
      const r = await pending;
      assert.deepStrictEqual([r.status, await r.text()], [503, 'draining']);
      await closed;
      assert.strictEqual(srv.draining, true);
    });
  });
}

describe(`the ops calls through ${BACKENDS[1]}`, () => {
  test('listener options, metrics, Prometheus text, access records', async (t) => {
    let text = '';
    const out = new PassThrough();
    out.on('data', (d) => { text += d; });
    const srv = nanosrv.createServer({ backend: BACKENDS[1], accessLog: 'json', accessLogStream: out });
    whoami(srv);
    t.after(() => srv.close(1000));
    const port = await srv.listen({ port: 0, host: '127.0.0.1', proxyProtocol: 'v2', proxyTimeoutMs: 3000, allow: ['192.0.2.0/24'], deny: [] });
    const hdr = proxyV2('192.0.2.9', 40000, '198.51.100.2', 8443, { authority: 'shop.example' });
    const d = JSON.parse(bodyOf(await exchange(port, Buffer.concat([hdr, Buffer.from(GET)]))));
    assert.deepStrictEqual([d.peer, d.proxy.authority], ['192.0.2.9', 'shop.example']);
    // The header's client is checked against allow: 203.0.113.1 is not in it.
    assert.strictEqual(await exchange(port, Buffer.concat([proxyV2('203.0.113.1', 1, '198.51.100.2', 2), Buffer.from(GET)])), '');
    const m = await until(() => { const v = srv.metrics(); return v.conns_denied === 1 && v.lat_flushed.count === 1 && v; });
    assert.strictEqual(m.requests, 1);
    assert.strictEqual(m.lat_queued.buckets[15][0], Infinity);
    assert.match(srv.metricsText(), /^nanosrv_\w*denied_total 1$/m);
    const rec = JSON.parse(await until(() => text));
    assert.deepStrictEqual([rec.peer, rec.port, rec.target, rec.status], ['192.0.2.9', 40000, '/who', 200]);
    const other = nanosrv.createServer({ backend: BACKENDS[1] });
    t.after(() => other.close(0));
    await assert.rejects(other.listen({ port: 0, host: '127.0.0.1', deny: 'nonsense' }), (e) => e.code === 'NSV_EINVAL' && /nonsense/.test(e.message));
  });
});

describe('many processes on one port (koffi)', () => {
  test('reuseport: two servers bind one port; without it the second fails', async (t) => {
    const a = nanosrv.createServer({ reuseport: true }, () => 'a');
    t.after(() => a.close(0));
    const port = await a.listen(0, '127.0.0.1');
    const b = nanosrv.createServer({ reuseport: true }, () => 'b');
    t.after(() => b.close(0));
    assert.strictEqual(await b.listen(port, '127.0.0.1'), port);
    const c = nanosrv.createServer({}, () => 'c');
    t.after(() => c.close(0));
    await assert.rejects(c.listen(port, '127.0.0.1'), (e) => e.code === 'NSV_EADDRINUSE');
    const seen = new Set();
    for (let i = 0; i < 20 && seen.size < 2; i++) seen.add(await (await fetch(`http://127.0.0.1:${port}/`, { headers: { Connection: 'close' } })).text());
    assert.ok([...seen].every((x) => x === 'a' || x === 'b'));
  });

  test('listen({ fd }) adopts a listening socket, with listener options', async (t) => {
    const ns = net.createServer();
    await new Promise((r) => ns.listen(0, '127.0.0.1', r));
    const port = ns.address().port;
    const fd = nanosrv.loadLibrary() && require('../lib/native').load().dup(ns._handle.fd);
    ns.close();
    const srv = nanosrv.createServer({}, (req) => `adopted ${req.remoteAddress}`);
    t.after(() => srv.close(0));
    assert.strictEqual(await srv.listen({ fd, proxyProtocol: 'v1' }), port);
    const raw = await exchange(port, `PROXY TCP4 203.0.113.9 127.0.0.1 7 ${port}\r\n${GET}`);
    assert.strictEqual(bodyOf(raw), 'adopted 203.0.113.9');
    await assert.rejects(srv.listen({ fd: -1 }), /fd/);
  });

  test('nanosrv/net behind a PROXY front: remoteAddress from the header', async (t) => {
    const nnet = require('../lib/net');
    const server = nnet.createServer((sock) => {
      sock.end(`${sock.remoteAddress}:${sock.remotePort} ${sock.proxied}\n`);
    });
    await new Promise((r) => server.listen({ port: 0, host: '127.0.0.1', proxyProtocol: 'v1' }, r));
    // The handler never reads: its socket still closes, and so the server.
    t.after(() => new Promise((r) => server.close(r)));
    const got = await exchange(server.address().port, 'PROXY TCP4 203.0.113.3 127.0.0.1 4242 1\r\n');
    assert.strictEqual(got, '203.0.113.3:4242 true\n');
  });

  test('maxConns and shed pass through; listenInherited without sockets', async (t) => {
    const srv = nanosrv.createServer({ maxConns: 50, shed: 0 });
    t.after(() => srv.close(0));
    assert.strictEqual(srv.getOption('maxConns'), 50);
    assert.strictEqual(srv.getOption('shed'), 0);
    srv.setOption('shed', true);
    assert.strictEqual(srv.getOption('shed'), 1);
    assert.deepStrictEqual(await srv.listenInherited(), []);
  });
});
