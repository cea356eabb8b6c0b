'use strict';
// Test certificates made with the openssl command in a temporary directory
// (as tests/integration/test_tls.py makes them): a CA, a server certificate
// for localhost/127.0.0.1, a client certificate "CN=alice, O=Example",
// one from another CA, one for another host name, and the server key
// encrypted (AES-128) with the password "secret".
const { execFileSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

function makeCerts() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nsv-node-tls-'));
  const p = (n) => path.join(dir, n);
  const sh = (...a) => execFileSync('openssl', a, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  const ca = (name, cn) => sh('req', '-x509', ...ec, '-keyout', `${name}.key`, '-out', `${name}.crt`, '-days', '30', '-subj', `/CN=${cn}`);
  const cert = (name, caName, subj, san) => {
    sh('req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subj);
    const argv = ['x509', '-req', '-in', `${name}.csr`, '-CA', `${caName}.crt`, '-CAkey', `${caName}.key`,
      '-CAcreateserial', '-out', `${name}.crt`, '-days', '30'];
    if (san) { fs.writeFileSync(p(`${name}.ext`), `subjectAltName=${san}\n`); argv.push('-extfile', `${name}.ext`); }
    sh(...argv);
  };
  ca('ca', 'nanosrv test CA');
  ca('other', 'some other CA');
  cert('srv', 'ca', '/CN=localhost', 'DNS:localhost,IP:127.0.0.1');
  cert('alice', 'ca', '/CN=alice/O=Example');
  cert('mallory', 'other', '/CN=mallory');
  cert('wronghost', 'ca', '/CN=wrong.example', 'DNS:wrong.example');
  // Traditional PEM encryption (Proc-Type/DEK-Info), which mbedTLS reads.
  sh('ec', '-in', 'srv.key', '-out', 'srv-enc.key', '-aes128', '-passout', 'pass:secret');
  const read = (n) => fs.readFileSync(p(n), 'utf8');
  return { dir, p, read, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

module.exports = { makeCerts };
