'use strict';
// A WebSocket client shaped like the WHATWG WebSocket (the browser's, and
// Node 22's global one), on the library's client (nsv_ws_connect): the
// handshake, masking, framing, UTF-8 checks and the close handshake run in
// C on the server's workers; this object keeps the state the standard
// shows (readyState, protocol, bufferedAmount) and fires its events.
const { normId, isNeg, headersOf, C } = require('./head');
const { W } = require('../events');

const CONNECTING = 0, OPEN = 1, CLOSING = 2, CLOSED = 3;
const BINARY_TYPES = new Set(['nodebuffer', 'arraybuffer', 'blob']);
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
// Unconfirmed bytes after which a sharded server is asked to confirm its
// worker took them (as lib/websocket.js counts bufferedAmount).
const ACK_EVERY = 65536;

// CloseEvent is not a global before Node 23.
class CloseEvent extends Event {
  #code; #reason; #wasClean;
  constructor(type, init = {}) {
    super(type, init);
    this.#code = init.code === undefined ? 0 : init.code;
    this.#reason = init.reason === undefined ? '' : String(init.reason);
    this.#wasClean = !!init.wasClean;
  }
  get code() { return this.#code; }
  get reason() { return this.#reason; }
  get wasClean() { return this.#wasClean; }
}

// The 'error' event, with the library's error as .error (ErrorEvent is not
// a global in Node either).
class WsErrorEvent extends Event {
  #error; #message;
  constructor(type, init = {}) {
    super(type, init);
    this.#error = init.error;
    this.#message = init.message || '';
  }
  get error() { return this.#error; }
  get message() { return this.#message; }
}

function syntaxError(msg) { return new DOMException(msg, 'SyntaxError'); }

// url: ws:, wss:, or http:/https: (mapped as the standard maps them).
function parseUrl(url) {
  let u;
  try { u = new URL(String(url)); } catch { throw syntaxError(`Invalid URL '${url}'`); }
  if (u.protocol === 'http:') u.protocol = 'ws:';
  else if (u.protocol === 'https:') u.protocol = 'wss:';
  if (u.protocol !== 'ws:' && u.protocol !== 'wss:') throw syntaxError(`The URL's scheme must be ws, wss, http or https, not '${u.protocol.slice(0, -1)}'`);
  if (u.hash || u.href.endsWith('#')) throw syntaxError('The URL contains a fragment identifier');
  return u;
}

// protocols: a string, an array of strings, or (as undici allows) an
// object { protocols, headers }.
function parseOptions(arg) {
  let protocols = arg, headers = null;
  if (arg !== null && typeof arg === 'object' && !Array.isArray(arg) && typeof arg[Symbol.iterator] !== 'function') {
    protocols = arg.protocols;
    headers = arg.headers || null;
  }
  if (protocols === undefined || protocols === null) protocols = [];
  else if (typeof protocols === 'string') protocols = [protocols];
  else protocols = [...protocols].map(String);
  const seen = new Set();
  for (const p of protocols) {
    if (!TOKEN.test(p)) throw syntaxError(`Invalid subprotocol '${p}'`);
    const k = p.toLowerCase();
    if (seen.has(k)) throw syntaxError(`Duplicate subprotocol '${p}'`);
    seen.add(k);
  }
  let lines = '';
  if (headers) for (const [n, v] of new Headers(headers)) lines += `${n}: ${v}\r\n`;
  return { protocols, lines };
}

function validCode(code) { return code === 1000 || (code >= 3000 && code <= 4999); }

class ClientWebSocket extends EventTarget {
  #srv;
  #id = null;
  #url;
  #state = CONNECTING;
  #protocol = '';
  #binaryType = 'nodebuffer';
  #handlers = Object.create(null); // 'open' -> { fn, wrap }
  #closeCode = 0; // from the server's close frame (WS_CLOSE), 0 if none came
  #closeReason = '';
  #failed = false; // an error event is owed before the close event
  #err = null;
  #lost = 0; // bytes of sends after the close began (they count, as the standard says)
  #chain = null; // a Blob being read: later sends wait behind it
  // bufferedAmount on a sharded server (see lib/websocket.js).
  _unacked = 0;
  _askedAt = -1;
  _ackQueued = false;

  constructor(srv, url, protocols) {
    super();
    const u = parseUrl(url);
    const { protocols: list, lines } = parseOptions(protocols);
    this.#srv = srv;
    this.#url = u.href;
    if (srv._closing || srv._closed) { this.#failSoon('the server is closed', C.NSV_ESTOPPED); return; }
    srv._startPump();
    srv._direct();
    const ub = Buffer.from(u.href), hb = Buffer.from(lines, 'latin1'), pb = Buffer.from(list.join(', '));
    const id = normId(srv._f.nsv_ws_connect(srv._h, ub, ub.length, hb, hb.length, pb, pb.length, 0));
    if (isNeg(id)) {
      const errno = Number(id);
      const detail = srv._detail();
      if (errno === C.NSV_EURL || errno === C.NSV_EINVAL) throw syntaxError(detail || `Invalid URL '${url}'`);
      this.#failSoon(detail, errno);
      return;
    }
    this.#id = id;
    srv._clientAdd(id, this);
  }

  // A failure known at once still comes as events, on a later turn.
  #failSoon(detail, errno) {
    const { nsvError } = require('../errors');
    this.#err = nsvError(errno, detail);
    this.#failed = true;
    process.nextTick(() => this.#closed());
  }

  get url() { return this.#url; }
  get readyState() { return this.#state; }
  get protocol() { return this.#protocol; }
  get extensions() { return ''; }
  get binaryType() { return this.#binaryType; }
  set binaryType(t) { if (BINARY_TYPES.has(t)) this.#binaryType = t; }

  // Bytes handed over and not yet sent. A single-loop server asks the
  // library; a sharded one counts what send() gave its worker and the
  // worker has not confirmed (a wakeup asked for every ACK_EVERY bytes
  // and when the count is read).
  get bufferedAmount() {
    if (this.#state === OPEN && !this.#srv.sharded) {
      const q = this.#srv._queuedOrNull(this.#id);
      if (q !== null) return q + this.#lost;
    }
    if (this._unacked > 0) this.#wantAck();
    return this._unacked + this.#lost;
  }

  send(data) {
    if (this.#state === CONNECTING) throw new DOMException('Still in CONNECTING state', 'InvalidStateError');
    let opcode = C.NSV_WS_BINARY, bytes;
    if (typeof data === 'string') { opcode = C.NSV_WS_TEXT; bytes = Buffer.from(data, 'utf8'); }
    else if (data instanceof ArrayBuffer || (typeof SharedArrayBuffer === 'function' && data instanceof SharedArrayBuffer)) bytes = Buffer.from(new Uint8Array(data).slice());
    else if (ArrayBuffer.isView(data)) bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    else if (data instanceof Blob) bytes = data;
    else { opcode = C.NSV_WS_TEXT; bytes = Buffer.from(String(data), 'utf8'); } // as the standard: anything else is a string
    if (this.#state !== OPEN) { this.#lost += bytes.length === undefined ? bytes.size : bytes.length; return; }
    if (bytes instanceof Blob || this.#chain !== null) {
      // Blobs are read asynchronously; messages keep their order.
      const prev = this.#chain || Promise.resolve();
      const p = prev.then(async () => {
        const b = bytes instanceof Blob ? Buffer.from(await bytes.arrayBuffer()) : bytes;
        this.#out(opcode, b);
      }).catch(() => {});
      this.#chain = p;
      p.then(() => { if (this.#chain === p) this.#chain = null; });
      return;
    }
    this.#out(opcode, bytes);
  }

  #out(opcode, buf) {
    if (this.#state !== OPEN) { this.#lost += buf.length; return; }
    let r;
    try {
      r = this.#srv._wsSend(this.#id, opcode, buf);
    } catch (e) {
      // The library's output limit: as the standard says for a full
      // buffer, the connection is closed.
      this.#err = e;
      this.#failed = true;
      r = -1;
      this.#srv._tcpOp('nsv_close', this.#id);
    }
    if (r < 0) { this.#state = CLOSING; this.#lost += buf.length; return; }
    if (this.#srv.sharded && buf.length) {
      this._unacked += buf.length;
      if (this._unacked >= ACK_EVERY) this.#wantAck();
    }
  }

  close(code, reason) {
    if (code !== undefined) {
      code = Number(code);
      if (!Number.isInteger(code) || !validCode(code)) throw new DOMException(`The close code must be either 1000, or between 3000 and 4999. ${code} is neither.`, 'InvalidAccessError');
    }
    const rb = Buffer.from(reason === undefined ? '' : String(reason), 'utf8');
    if (rb.length > 123) throw syntaxError(`The close reason is ${rb.length} bytes; at most 123`);
    if (this.#state === CLOSING || this.#state === CLOSED) return;
    if (this.#state === CONNECTING) {
      // The standard fails the connection: error, then close 1006.
      this.#failed = true;
      this.#state = CLOSING;
      if (this.#id !== null) this.#srv._tcpOp('nsv_close', this.#id);
      return;
    }
    this.#state = CLOSING;
    const r = this.#srv._wsClose(this.#id, code === undefined ? 1000 : code, rb);
    if (r < 0 && this.#srv._h !== null) this.#srv._tcpOp('nsv_close', this.#id);
  }

  // ---- events (lib/server.js dispatch) ----

  _evOpen(u32, i32, w, arena) {
    if (this.#state !== CONNECTING) return; // close() was called meanwhile: its CLOSE follows
    const ho = u32[w + W.headers_off];
    const headers = headersOf(arena.latin1Slice(ho, ho + u32[w + W.headers_len]));
    this.#protocol = headers.get('sec-websocket-protocol') || '';
    this.#state = OPEN;
    this.dispatchEvent(new Event('open'));
  }

  _evWs(kind, u32, i32, w, arena) {
    const o = u32[w + W.body_off], l = u32[w + W.body_len], code = i32[w + W.code];
    if (kind === 'close') {
      // The server's close frame; the library answers it (or it answers
      // ours) and then closes the connection: CLOSE follows.
      // 1006 (and 1015) are never sent: the library reports a connection
      // lost without a close frame with them.
      if (code === 1006 || code === 1015) { this.#failed = true; return; }
      this.#closeCode = code || 1005;
      this.#closeReason = arena.toString('utf8', o, o + l);
      if (this.#state === OPEN) this.#state = CLOSING;
      return;
    }
    if (kind !== 'message' || this.#state !== OPEN) return;
    let data;
    if (code === C.NSV_WS_TEXT) data = arena.toString('utf8', o, o + l);
    else if (this.#binaryType === 'arraybuffer') data = arena.buffer.slice(arena.byteOffset + o, arena.byteOffset + o + l);
    else if (this.#binaryType === 'blob') data = new Blob([arena.subarray(o, o + l)]);
    else data = Buffer.from(arena.subarray(o, o + l));
    this.dispatchEvent(new MessageEvent('message', { data, origin: new URL(this.#url).origin }));
  }

  _evError(err) {
    this.#err = err;
    this.#failed = true;
  }

  _evClose() { this.#closed(); }

  _evGone() { this.#closed(); }

  #closed() {
    if (this.#state === CLOSED) return;
    this.#state = CLOSED;
    if (this.#id !== null) this.#srv._clientDelete(this.#id);
    const clean = this.#closeCode !== 0 && !this.#failed;
    if (this.#failed || (!clean && this.#closeCode === 0)) {
      const e = this.#err;
      this.dispatchEvent(new WsErrorEvent('error', { error: e, message: e ? e.message : 'WebSocket connection closed abnormally' }));
    }
    this.dispatchEvent(new CloseEvent('close', {
      code: clean ? this.#closeCode : 1006, reason: clean ? this.#closeReason : '', wasClean: clean,
    }));
  }

  // ---- bufferedAmount confirmations (lib/server.js _wsAskAck, WAKEUP) ----

  #wantAck() {
    if (this._askedAt >= 0 || this._ackQueued || !this.#srv.sharded) return;
    this._ackQueued = true;
    this.#srv._wsAskAck(this);
  }

  _askAck() {
    this._ackQueued = false;
    if (this._askedAt >= 0 || this._unacked === 0 || this.#state !== OPEN) return;
    this._askedAt = this._unacked;
    if (this.#srv._tcpAskAck(this.#id) < 0) { this._askedAt = -1; this._unacked = 0; }
  }

  _ack() {
    if (this._askedAt < 0) return;
    this._unacked = Math.max(0, this._unacked - this._askedAt);
    this._askedAt = -1;
    if (this._unacked >= ACK_EVERY) this.#wantAck();
  }

  // Event handler attributes: one listener each, added on the first set,
  // calling whatever handler is current.
  #handler(type) { const h = this.#handlers[type]; return h ? h.fn : null; }
  #setHandler(type, fn) {
    let h = this.#handlers[type];
    if (!h) {
      h = this.#handlers[type] = { fn: null, wrap: null };
      h.wrap = (e) => { if (typeof h.fn === 'function') h.fn.call(this, e); };
      this.addEventListener(type, h.wrap);
    }
    h.fn = typeof fn === 'function' ? fn : null;
  }

  get onopen() { return this.#handler('open'); }
  set onopen(fn) { this.#setHandler('open', fn); }
  get onmessage() { return this.#handler('message'); }
  set onmessage(fn) { this.#setHandler('message', fn); }
  get onerror() { return this.#handler('error'); }
  set onerror(fn) { this.#setHandler('error', fn); }
  get onclose() { return this.#handler('close'); }
  set onclose(fn) { this.#setHandler('close', fn); }
}

for (const [k, v] of Object.entries({ CONNECTING, OPEN, CLOSING, CLOSED })) {
  Object.defineProperty(ClientWebSocket, k, { value: v, enumerable: true });
  Object.defineProperty(ClientWebSocket.prototype, k, { value: v, enumerable: true });
}

// The class applications use: new WebSocket(url, protocols) on server srv
// (or on the server getSrv() returns when it is made).
function boundWebSocket(srv) {
  const get = typeof srv === 'function' ? srv : () => srv;
  return class WebSocket extends ClientWebSocket {
    constructor(url, protocols) { super(get(), url, protocols); }
  };
}

module.exports = { ClientWebSocket, boundWebSocket, CloseEvent };
