'use strict';
// nanosrv: Node binding of libnanosrv. See README.md.
const abi = require('./lib/abi');
const native = require('./lib/native');
const { Server, inheritedFds } = require('./lib/server');
const { Request } = require('./lib/request');
const { Response } = require('./lib/response');
const { WebSocket } = require('./lib/websocket');
const { NanosrvError } = require('./lib/errors');
const { makeUtils } = require('./lib/utils');
const { serve } = require('./lib/fetch');
const client = require('./lib/client');
const { CloseEvent } = require('./lib/client/websocket');

// createServer([opts][, handler]): handler answers requests no route matched.
function createServer(opts, handler) {
  return new Server(opts, handler);
}

// Loads (once) the library with a backend; the utilities use the default one.
function loadLibrary(opts) {
  const n = native.load(opts);
  return { backend: n.name, backendVersion: n.version, path: n.path, missing: n.missing.slice() };
}

module.exports = {
  createServer,
  serve,
  fetch: client.fetch,
  WebSocketClient: client.WebSocketClient,
  CloseEvent,
  loadLibrary,
  // Sockets of systemd socket activation: [{ fd, name }] (removes the variables).
  inheritedFds: (opts) => inheritedFds(native.load(opts)),
  Server,
  Request,
  Response,
  WebSocket,
  NanosrvError,
  constants: Object.freeze({ ...abi.constants }),
  ...makeUtils(() => native.load()),
};
