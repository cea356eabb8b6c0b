'use strict';
// nanosrv/https: node:https's createServer({ key, cert, ca, passphrase,
// requestCert, rejectUnauthorized }, listener) on libnanosrv's TLS.
const nodeHttps = require('https');
const http = require('./lib/http');

function pem(x) { return Array.isArray(x) ? x.map(String).join('\n') : x; }

class Server extends http.Server {
  constructor(options, listener) {
    if (typeof options === 'function') { listener = options; options = {}; }
    super(options || {}, listener);
    const o = options || {};
    const tls = {};
    if (o.cert) tls.tlsCertPem = pem(o.cert);
    if (o.key) tls.tlsKeyPem = pem(o.key);
    if (o.passphrase) tls.tlsKeyPassword = o.passphrase;
    if (o.ca) tls.tlsCaPem = pem(o.ca);
    // requestCert: ask for a client certificate; rejectUnauthorized (default
    // true, as node's) makes one that does not verify fail the handshake.
    if (o.requestCert) tls.tlsVerifyClient = o.rejectUnauthorized === false ? 1 : 2;
    this._tls = tls;
    this._secure = true;
  }
}

function createServer(options, listener) { return new Server(options, listener); }

module.exports = {
  ...http,
  createServer,
  Server,
  request: nodeHttps.request,
  get: nodeHttps.get,
  Agent: nodeHttps.Agent,
  globalAgent: nodeHttps.globalAgent,
};
