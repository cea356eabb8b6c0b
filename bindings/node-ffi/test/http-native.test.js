'use strict';
// The native API's node-style behaviours: listen's callback forms, an
// asynchronous 'listening', 'error' for a port in use, res.end(cb), and a
// long poll hearing that its client left.
const test = require('node:test');
const assert = require('node:assert');
const net = require('net');
const { once } = require('events');
const { nanosrv, BACKENDS } = require('./helpers');

for (const backend of BACKENDS) {
  test(`listen(port, cb), listen(port, host, cb), listen({ port, host }, cb) (${backend})`, async () => {
    const forms = [
      (s, cb) => s.listen(0, cb),
      (s, cb) => s.listen(0, '127.0.0.1', cb),
      (s, cb) => s.listen({ port: 0, host: '127.0.0.1' }, cb),
      (s, cb) => s.listen(0, '127.0.0.1', 511, cb),
    ];
    for (const form of forms) {
      const srv = nanosrv.createServer({ backend }, (req, res) => res.end('ok'));
      let sync = true;
      const log = [];
      srv.on('listening', (port) => log.push(['listening', sync, port > 0]));
      const called = new Promise((resolve) => form(srv, function cb() { log.push(['cb', sync, this === srv]); resolve(); }));
      sync = false;
      await called;
      assert.deepStrictEqual(log, [['listening', false, true], ['cb', false, true]]);
      const r = await fetch(`http://127.0.0.1:${srv.port}/`);
      assert.strictEqual(await r.text(), 'ok');
      await srv.close(1000);
    }
  });

  test(`a port in use: 'error' with code NSV_EADDRINUSE, and the promise rejects (${backend})`, async () => {
    const a = nanosrv.createServer({ backend });
    const port = await a.listen(0, '127.0.0.1');
    const b = nanosrv.createServer({ backend });
    const err = new Promise((resolve) => b.on('error', resolve));
    await assert.rejects(b.listen(port, '127.0.0.1'), { code: 'NSV_EADDRINUSE' });
    assert.strictEqual((await err).code, 'NSV_EADDRINUSE');
    // With a callback and no 'error' listener the failure is the 'error' event.
    const c = nanosrv.createServer({ backend });
    const cerr = once(c, 'error');
    c.listen(port, '127.0.0.1', () => assert.fail('must not listen'));
    assert.strictEqual((await cerr)[0].code, 'NSV_EADDRINUSE');
    await Promise.all([a.close(1000), b.close(1000), c.close(1000)]);
  });

  test(`res.end(cb) and res.end(body, cb) call cb; a long poll hears 'close' when its client leaves (${backend})`, async (t) => {
    const srv = nanosrv.createServer({ backend });
    const calls = [];
    let polled, heard;
    const polling = new Promise((resolve) => { polled = resolve; });
    const closed = new Promise((resolve) => { heard = resolve; });
    srv.get('/a', (req, res) => { res.end(() => calls.push('a')); });
    srv.get('/b', (req, res) => { res.end('body', () => calls.push('b')); });
    srv.get('/c', (req, res) => { res.end('body', 'latin1', () => calls.push('c')); });
    srv.get('/poll', (req, res) => { res.on('close', () => heard(res.writableEnded)); polled(); });
    const port = await srv.listen(0, '127.0.0.1');
    t.after(() => srv.close(1000));
    for (const p of ['/a', '/b', '/c']) await (await fetch(`http://127.0.0.1:${port}${p}`)).text();
    assert.deepStrictEqual(calls, ['a', 'b', 'c']);
    const sock = net.connect(port, '127.0.0.1');
    sock.write('GET /poll HTTP/1.1\r\nHost: x\r\n\r\n');
    await polling;
    sock.destroy();
    assert.strictEqual(await closed, false);
  });
}
