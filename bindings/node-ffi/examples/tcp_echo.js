#!/usr/bin/env node
'use strict';
// Raw TCP echo on nanosrv/net (the node:net API):
//
//   node examples/tcp_echo.js --port N [--threads N] [--cert FILE --key FILE]
//
// Prints "listening on PORT". Every byte comes back in order; pipe() keeps
// the backpressure (a client that does not read is paused, not buffered).
// allowHalfOpen: when the client ends its side, what remains is echoed,
// then ours ends. With --cert/--key it listens on tls://.
const net = require('../lib/net'); // in an application: require('nanosrv/net')

const args = { port: 0, threads: undefined, cert: null, key: null };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) {
  const flag = argv[i], v = argv[i + 1];
  if (v === undefined || !['--port', '--threads', '--cert', '--key'].includes(flag)) {
    process.stderr.write('usage: tcp_echo.js --port N [--threads N] [--cert FILE --key FILE]\n');
    process.exit(2);
  }
  args[flag.slice(2)] = flag === '--port' || flag === '--threads' ? Number(v) : v;
}
if (!args.cert !== !args.key) {
  process.stderr.write('tcp_echo.js: --cert and --key go together\n');
  process.exit(2);
}

const opts = { allowHalfOpen: true, threads: args.threads };
if (args.cert) { opts.tlsCertFile = args.cert; opts.tlsKeyFile = args.key; }
const srv = net.createServer(opts, (sock) => {
  sock.on('error', () => sock.destroy());
  sock.pipe(sock);
});
srv.on('error', (e) => {
  process.stderr.write(`tcp_echo.js: ${e.message}\n`);
  process.exit(1);
});
srv.listen(args.port, '0.0.0.0', () => {
  process.stdout.write(`listening on ${srv.address().port}\n`);
});
const stop = () => process.exit(0);
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
