// A node:net port-forwarding proxy: --port N --upstream PORT, prints
// "listening on PORT". Each client gets its own upstream connection; pipe()
// carries backpressure both ways and allowHalfOpen carries a half-close.
// Run as is and on nanosrv/net.
'use strict';
const net = require('node:net');
const arg = (name) => Number(process.argv[process.argv.indexOf(name) + 1]);
const upstream = arg('--upstream');
const srv = net.createServer({ allowHalfOpen: true }, (client) => {
  const up = net.connect({ port: upstream, host: '127.0.0.1', allowHalfOpen: true });
  const fail = () => { client.destroy(); up.destroy(); };
  client.on('error', fail);
  up.on('error', fail);
  client.pipe(up);
  up.pipe(client);
});
srv.listen(arg('--port'), '127.0.0.1', () => {
  process.stdout.write(`listening on ${srv.address().port}\n`);
});
process.on('SIGTERM', () => process.exit(0));
