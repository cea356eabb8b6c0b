'use strict';
// One open WebSocket connection. The handshake, framing, masking, ping/pong
// and close handshake happen in C; this object only names the connection.
const { typeError, nsvError } = require('./errors');
const C = require('./abi').constants;

const STATE_NAMES = ['CONNECTING', 'OPEN', 'CLOSING', 'CLOSED'];
// Unconfirmed bytes after which a sharded server's WebSocket asks its
// worker to confirm them (see bufferedAmount).
const ACK_EVERY = 65536;

function validCloseCode(c) { return (c >= 1000 && c <= 1003) || (c >= 1007 && c <= 1014) || (c >= 3000 && c <= 4999); }

function bytes(data) { return typeof data === 'string' ? Buffer.from(data, 'utf8') : data; }

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
    // Bytes handed to the library that its worker has not taken yet (a
    // sharded server), and how many of them the acknowledgement asked for
    // covers (-1: none asked).
    this._unacked = 0;
    this._askedAt = -1;
    this._ackQueued = false;
  }

  // A string goes out as a text frame, a Buffer/Uint8Array as binary unless
  // { binary: false } says otherwise. cb(err) runs once the message is
  // queued (err undefined) or was dropped. A peer that is closing or gone
  // (its close not processed yet included) is no error: the message is
  // dropped, readyState moves on to CLOSING, and only cb hears of it.
  send(data, opts, cb) {
    if (typeof opts === 'function') { cb = opts; opts = undefined; }
    if (cb !== undefined && typeof cb !== 'function') throw typeError('callback', 'a function', cb);
    let opcode;
    if (typeof data === 'string') opcode = opts && opts.binary ? C.NSV_WS_BINARY : C.NSV_WS_TEXT;
    else if (data instanceof Uint8Array) opcode = opts && opts.binary === false ? C.NSV_WS_TEXT : C.NSV_WS_BINARY;
    else throw typeError('data', 'a string, Buffer or Uint8Array', data);
    this._out(opcode, bytes(data), cb);
  }

  ping(data = '', cb) {
    if (typeof data === 'function') { cb = data; data = ''; }
    if (cb !== undefined && typeof cb !== 'function') throw typeError('callback', 'a function', cb);
    if (typeof data !== 'string' && !(data instanceof Uint8Array)) throw typeError('data', 'a string, Buffer or Uint8Array', data);
    const b = bytes(data);
    // Checked here, as close() is: a sharded server's worker would only drop it.
    if (b.length > 125) throw nsvError(C.NSV_ETOOBIG, `ping payload is ${b.length} bytes; control frames carry at most 125`);
    this._out(C.NSV_WS_PING, b, cb);
  }

  _out(opcode, buf, cb) {
    if (this.readyState !== WebSocket.OPEN) { this._dropped(cb); return; }
    const r = this._srv._wsSend(this.id, opcode, buf);
    if (r < 0) { this._closing(); this._dropped(cb, r); return; }
    if (buf.length) this._sent(buf.length);
    if (cb) process.nextTick(cb);
  }

  // The library said the connection is closing (NSV_ESTATE) or gone
  // (NSV_ESTALE) before its close event reached us.
  _closing() { if (this.readyState === WebSocket.OPEN) this.readyState = WebSocket.CLOSING; }

  _dropped(cb, errno) {
    if (!cb) return;
    const st = this.readyState;
    const code = errno || (st === WebSocket.CLOSED ? C.NSV_ESTALE : C.NSV_ESTATE);
    process.nextTick(cb, nsvError(code, `WebSocket is not open: readyState ${st} (${STATE_NAMES[st]})`));
  }

  close(code = 1000, reason = '') {
    if (!Number.isInteger(code)) throw typeError('code', 'an integer', code);
    if (typeof reason !== 'string') throw typeError('reason', 'a string', reason);
    // Checked here: on a sharded server the library's worker would only
    // drop such a close. An invalid code or reason throws NSV_EINVAL and the
    // socket stays open.
    if (!validCloseCode(code)) {
      throw nsvError(C.NSV_EINVAL, `close code ${code} is ${(code >= 1004 && code <= 1006) || code === 1015 ? 'reserved' : 'not one a server may send'}; use 1000-1003, 1007-1014 or 3000-4999`);
    }
    const rb = Buffer.from(reason, 'utf8');
    if (rb.length > 123) throw nsvError(C.NSV_EINVAL, `close reason is ${rb.length} bytes; at most 123 fit a close frame`);
    if (this.readyState !== WebSocket.OPEN) return;
    this._srv._wsClose(this.id, code, rb);
    this.readyState = WebSocket.CLOSING;
  }

  // Bytes queued for output on this connection and not sent yet. A single
  // loop server asks the library; a sharded one (the usual case: the
  // library's workers own the sockets) counts what send() handed over and
  // the worker has not confirmed taking, known at once after each send.
  // Confirmations are asked for once ACK_EVERY bytes are unconfirmed and
  // whenever the count is read, so reading it in a loop sees it fall to 0
  // a turn after the worker took the bytes, and an echo that never reads
  // it pays for one confirmation per ACK_EVERY bytes. What the worker holds
  // for a peer that does not read is bounded by the library (it stops
  // reading such a peer past half of maxOutput).
  get bufferedAmount() {
    if (!this._srv.sharded && this.readyState === WebSocket.OPEN) {
      const q = this._srv._queuedOrNull(this.id);
      if (q !== null) return q;
    }
    if (this._unacked > 0) this._wantAck();
    return this._unacked;
  }

  _sent(n) {
    if (!this._srv.sharded) return;
    this._unacked += n;
    if (this._unacked >= ACK_EVERY) this._wantAck();
  }

  _wantAck() {
    if (this._askedAt >= 0 || this._ackQueued || !this._srv.sharded) return;
    this._ackQueued = true;
    this._srv._wsAskAck(this);
  }

  // The server's turn to ask the worker to confirm the sends so far (a
  // WAKEUP that comes back after it handled them).
  _askAck() {
    this._ackQueued = false;
    if (this._askedAt >= 0 || this._unacked === 0 || this.readyState !== WebSocket.OPEN) return;
    this._askedAt = this._unacked;
    if (this._srv._tcpAskAck(this.id) < 0) { this._askedAt = -1; this._unacked = 0; }
  }

  // The worker took every send made before the confirmation was asked.
  _ack() {
    if (this._askedAt < 0) return;
    this._unacked = Math.max(0, this._unacked - this._askedAt);
    this._askedAt = -1;
    if (this._unacked >= ACK_EVERY) this._wantAck();
  }
}
WebSocket.CONNECTING = 0;
WebSocket.OPEN = 1;
WebSocket.CLOSING = 2;
WebSocket.CLOSED = 3;

module.exports = { WebSocket };
