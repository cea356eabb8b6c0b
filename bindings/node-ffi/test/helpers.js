'use strict';
// Shared by the test files: which backends to run, a server factory that
// always closes, and the library path of the build under test.
const path = require('path');

if (!process.env.NANOSRV_LIBRARY) {
  // tests/run sets it; running a file by hand from the repo falls back to build/.
  process.env.NANOSRV_LIBRARY = path.join(__dirname, '..', '..', '..', process.env.NSV_BUILD || 'build', 'libnanosrv.so.1');
}
const nanosrv = require('..');

const BACKENDS = ['koffi', 'ffi-napi'];

// Creates a server, applies setup(srv), listens on 127.0.0.1, and registers
// its close with the test.
async function serve(t, backend, opts, setup) {
  const srv = nanosrv.createServer({ backend, ...opts });
  srv.on('handlerError', () => {}); // tests provoke handler failures on purpose
  if (setup) setup(srv);
  const port = await srv.listen(0, '127.0.0.1');
  t.after(() => srv.close(1000));
  return { srv, port, base: `http://127.0.0.1:${port}` };
}

function hasWebSocket(backend) {
  return !nanosrv.loadLibrary({ backend }).missing.includes('nsv_ws_send');
}

module.exports = { nanosrv, BACKENDS, serve, hasWebSocket };
