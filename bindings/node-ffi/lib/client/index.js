'use strict';
// The module-level clients: fetch and WebSocketClient on one shared
// nanosrv server made on first use, which keeps the process alive only
// while a request or a WebSocket of it is open. Programs that serve use
// their own server's srv.fetch and srv.WebSocket instead (the same loop).
const { Server } = require('../server');
const { boundWebSocket } = require('./websocket');

let shared = null;

function sharedServer() {
  if (shared === null || shared._closing || shared._closed) {
    shared = new Server({});
    shared._autoRef = true;
    shared.unref();
  }
  return shared;
}

function fetch(input, init) { return sharedServer().fetch(input, init); }

const WebSocketClient = boundWebSocket(sharedServer);

module.exports = { fetch, WebSocketClient, sharedServer };
