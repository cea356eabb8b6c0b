'use strict';
// One open WebSocket connection. The handshake, framing, masking, ping/pong
// and close handshake happen in C; this object only names the connection.
const { typeError } = require('./errors');
const C = require('./abi').constants;

class WebSocket {
  constructor(server, id, route, req) {
    this._srv = server;
    this.id = id;
    this.route = route;
    this.remoteAddress = req.remoteAddress;
    this.remotePort = req.remotePort;
    this.url = req.url;
    this.tls = req.tls; // { servername, subject, authorized } on wss://, else null
    this.readyState = WebSocket.OPEN;
    this.data = {}; // free for the application
  }

  // A string goes out as a text frame, a Buffer/Uint8Array as binary unless
  // { binary: false } says otherwise.
  send(data, opts) {
    let opcode;
    if (typeof data === 'string') opcode = opts && opts.binary ? C.NSV_WS_BINARY : C.NSV_WS_TEXT;
    else if (data instanceof Uint8Array) opcode = opts && opts.binary === false ? C.NSV_WS_TEXT : C.NSV_WS_BINARY;
    else throw typeError('data', 'a string, Buffer or Uint8Array', data);
    this._srv._wsSend(this.id, opcode, data);
  }

  ping(data = '') { this._srv._wsSend(this.id, C.NSV_WS_PING, data); }

  close(code = 1000, reason = '') {
    if (!Number.isInteger(code)) throw typeError('code', 'an integer', code);
    if (typeof reason !== 'string') throw typeError('reason', 'a string', reason);
    if (this.readyState !== WebSocket.OPEN) return;
    this.readyState = WebSocket.CLOSING;
    this._srv._wsClose(this.id, code, reason);
  }

  // Bytes queued for output on this connection (backpressure).
  get bufferedAmount() { return this._srv._queued(this.id); }
}
WebSocket.CONNECTING = 0;
WebSocket.OPEN = 1;
WebSocket.CLOSING = 2;
WebSocket.CLOSED = 3;

module.exports = { WebSocket };
