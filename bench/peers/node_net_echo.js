// Raw TCP echo on node:net (the Node peer of the TCP echo bench): --port N,
// prints "listening on PORT". pipe() keeps the backpressure; allowHalfOpen
// lets a client's end pass through: what remains is echoed, then ours ends.
'use strict';
const net = require('node:net');
const i = process.argv.indexOf('--port');
const port = i > 0 ? Number(process.argv[i + 1]) : 0;
const srv = net.createServer({ allowHalfOpen: true, noDelay: true }, (sock) => {
  sock.on('error', () => sock.destroy());
  sock.pipe(sock);
});
srv.listen(port, '0.0.0.0', () => {
  process.stdout.write(`listening on ${srv.address().port}\n`);
});
process.on('SIGTERM', () => process.exit(0));
