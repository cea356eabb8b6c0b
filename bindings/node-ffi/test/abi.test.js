'use strict';
// The binding's view of the ABI against the generated description
// (bindings/cdef/nanosrv_abi.json, read here independently): constants,
// error names, event record layout, nsv_url layout; then NSV_EV_HANGUP and
// NSV_EVF_EOF as 'close' on the request, both backends.
const { describe, test } = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { nanosrv, BACKENDS, serve } = require('./helpers');
const abi = require('../lib/abi');
const { W, EV_WORDS } = require('../lib/events');

const JSON_PATH = path.join(__dirname, '..', '..', 'cdef', 'nanosrv_abi.json');
const desc = JSON.parse(fs.readFileSync(JSON_PATH, 'utf8'));

describe('the generated description', () => {
  test('the binding reads the repository JSON', () => {
    assert.strictEqual(fs.realpathSync(abi.file), fs.realpathSync(JSON_PATH));
    assert.strictEqual(abi.abiMajor, desc.abi_major);
    assert.strictEqual(nanosrv.abiVersion(), desc.abi_major);
  });

  test('every enum constant', () => {
    const flat = {};
    for (const g of Object.values(desc.enums)) Object.assign(flat, g);
    assert.deepStrictEqual(abi.constants, flat);
    assert.deepStrictEqual({ ...nanosrv.constants }, flat);
    assert.strictEqual(nanosrv.constants.NSV_EV_HANGUP, desc.enums.nsv_event_type.NSV_EV_HANGUP);
    assert.strictEqual(nanosrv.constants.NSV_EVF_EOF, desc.enums.nsv_event_flag.NSV_EVF_EOF);
    for (const [name, code] of Object.entries(desc.enums.nsv_err)) {
      if (code < 0) assert.strictEqual(nanosrv.errname(code), name);
      assert.strictEqual(abi.errNames[code], name);
    }
  });

  test('event record layout', () => {
    const ev = desc.structs.nsv_event;
    assert.strictEqual(abi.eventSize, ev.size);
    assert.strictEqual(EV_WORDS * 4, ev.size);
    assert.deepStrictEqual(Object.keys(W).sort(), ev.fields.map((f) => f.name).sort());
    for (const f of ev.fields) assert.strictEqual(W[f.name] * 4, f.offset, f.name);
  });

  test('nsv_url layout used by parseUrl', () => {
    const u = nanosrv.parseUrl('https://example.com:8443/p?q=1');
    assert.deepStrictEqual(u, { scheme: 'https', host: 'example.com', path: '/p', query: 'q=1', port: 8443, tls: true });
    assert.strictEqual(abi.structs.nsv_url.size, desc.structs.nsv_url.size);
  });
});

function once(emitter, ev) { return new Promise((r) => emitter.once(ev, r)); }

for (const backend of BACKENDS) {
  describe(`clients that leave (${backend})`, { timeout: 30000 }, () => {
    test("HANGUP emits 'close' on the request; the half-closed client still gets the reply", async (t) => {
      let held;
      const got = new Promise((resolve) => { held = resolve; });
      const { port } = await serve(t, backend, {}, (srv) => {
        srv.get('/long', (req, res) => { held({ req, res }); });
      });
      const s = net.connect(port, '127.0.0.1');
      let data = '';
      s.on('data', (d) => { data += d.toString('latin1'); });
      const ended = once(s, 'end');
      s.write('GET /long HTTP/1.1\r\nHost: x\r\n\r\n');
      const { req, res } = await got;
      assert.strictEqual(req.closed, false);
      const closed = once(req, 'close');
      s.end(); // FIN: the client ends its side, keeps reading
      await closed;
      assert.strictEqual(req.closed, true);
      assert.strictEqual(res.destroyed, false);
      res.setHeader('Connection', 'close');
      res.end('late');
      await ended;
      assert.match(data, /^HTTP\/1\.1 200/);
      assert.ok(data.endsWith('late'));
    });

    test("a request delivered after the client ended its side (NSV_EVF_EOF) gets 'close'", async (t) => {
      const seen = [];
      let first;
      const gotFirst = new Promise((resolve) => { first = resolve; });
      const { port } = await serve(t, backend, {}, (srv) => {
        srv.get('/a', (req, res) => { first({ req, res }); });
        srv.get('/b', (req, res) => {
          seen.push(req.closed);
          req.on('close', () => { seen.push('close'); res.end('b'); });
        });
      });
      const s = net.connect(port, '127.0.0.1');
      let data = '';
      s.on('data', (d) => { data += d.toString('latin1'); });
      const ended = once(s, 'end');
      s.write('GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n');
      s.end();
      const { req, res } = await gotFirst;
      if (!req.closed) await once(req, 'close');
      res.end('a');
      await ended;
      assert.deepStrictEqual(seen, [false, 'close']);
      assert.strictEqual((data.match(/HTTP\/1\.1 200/g) || []).length, 2);
    });
  });
}
