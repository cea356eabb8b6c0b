'use strict';
// nanosrv/https: node:https's createServer({ key, cert, ca, requestCert,
// rejectUnauthorized }) on the library's TLS, compared with node:https.
const test = require('node:test');
const assert = require('node:assert');
const nodeHttps = require('https');
const { once } = require('events');
const { BACKENDS } = require('../fixtures/http/both');
const nsvHttps = require('../https');
const { makeCerts } = require('./certs');
const nanosrv = require('..');

function get(port, ca, extra = {}) {
  return new Promise((resolve, reject) => {
    nodeHttps.get({ host: '127.0.0.1', port, path: '/who', ca, agent: false, ...extra }, (res) => {
      let body = '';
      res.on('data', (c) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
    }).on('error', reject);
  });
}

test('nanosrv/https serves as node:https does', async (t) => {
  if (!nanosrv.tlsAvailable()) { t.skip('library built without TLS'); return; }
  const certs = makeCerts();
  t.after(() => certs.cleanup());
  const ca = certs.read('ca.crt');
  for (const backend of BACKENDS) {
    const seen = {};
    for (const [name, https, opts] of [['node', nodeHttps, {}], ['nanosrv', nsvHttps, { backend }]]) {
      const srv = https.createServer({
        ...opts, key: certs.read('srv.key'), cert: certs.read('srv.crt'), ca, requestCert: true, rejectUnauthorized: false,
      }, (req, res) => {
        const s = req.socket;
        const peer = s.getPeerCertificate();
        res.end(JSON.stringify({ encrypted: s.encrypted, authorized: s.authorized, cn: peer.subject ? peer.subject.CN : null }));
      });
      srv.listen(0, '127.0.0.1');
      await once(srv, 'listening');
      const port = srv.address().port;
      const anon = await get(port, ca);
      const alice = await get(port, ca, { key: certs.read('alice.key'), cert: certs.read('alice.crt') });
      seen[name] = [anon, alice];
      await new Promise((resolve) => srv.close(resolve));
    }
    assert.deepStrictEqual(seen.nanosrv, seen.node, backend);
    assert.deepStrictEqual(JSON.parse(seen.node[1].body), { encrypted: true, authorized: true, cn: 'alice' });
  }
});
