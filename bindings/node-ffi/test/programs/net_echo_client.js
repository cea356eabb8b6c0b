// A node:net echo client: --port N --bytes N. Sends N random bytes with
// backpressure, half-closes, reads the echo to the end and prints
// "sent N SHA received M SHA". Run as is and on nanosrv/net.
'use strict';
const net = require('node:net');
const crypto = require('node:crypto');
const arg = (name) => Number(process.argv[process.argv.indexOf(name) + 1]);
const port = arg('--port'), total = arg('--bytes');
const inHash = crypto.createHash('sha256'), outHash = crypto.createHash('sha256');
let received = 0;
const sock = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true }, () => {
  let sent = 0;
  const more = () => {
    while (sent < total) {
      const chunk = crypto.randomBytes(Math.min(65536, total - sent));
      outHash.update(chunk);
      sent += chunk.length;
      if (!sock.write(chunk)) { sock.once('drain', more); return; }
    }
    sock.end();
  };
  more();
});
sock.on('data', (d) => { received += d.length; inHash.update(d); });
sock.on('end', () => {
  process.stdout.write(`sent ${total} ${outHash.digest('hex')} received ${received} ${inHash.digest('hex')}\n`);
});
sock.on('error', (e) => { process.stderr.write(`client: ${e.code || e.message}\n`); process.exit(1); });
