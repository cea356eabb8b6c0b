// A node:net echo server (the bench's node:net peer): --port N, prints
// "listening on PORT". Run as is with node:net, and with
// require('nanosrv/net') in place of require('node:net') by net.test.js.
'use strict';
const net = require('node:net');
const i = process.argv.indexOf('--port');
const port = i > 0 ? Number(process.argv[i + 1]) : 0;
const srv = net.createServer({ allowHalfOpen: true, noDelay: true }, (sock) => {
  sock.on('error', () => sock.destroy());
  sock.pipe(sock);
});
srv.listen(port, '127.0.0.1', () => {
  process.stdout.write(`listening on ${srv.address().port}\n`);
});
process.on('SIGTERM', () => process.exit(0));
