'use strict';
// nanosrv/http: node:http's server API (createServer, Server,
// IncomingMessage, ServerResponse, STATUS_CODES, METHODS) on libnanosrv, so
// an app written for node:http (Express, Koa, Connect, ...) runs by changing
// its require. The C library parses, frames and writes; this module shapes
// its events as node:http's objects.
//
// Frameworks replace the prototype of the request and the response with
// their own, which inherit from node's http.IncomingMessage and
// http.ServerResponse (Express does so for every request). So:
// - the request IS a node IncomingMessage (a subclass adding nothing), fed
//   with push() like node's own parser does; its backpressure reaches the
//   library through the socket's pause()/resume(), which node's _read calls;
// - the response keeps its methods and state as own properties, which no
//   prototype swap can hide.
const EventEmitter = require('events');
const nodeHttp = require('http');
const { Stream } = require('stream');
const { Server: Core } = require('../server');
const { constants: C } = require('../abi');
const { check } = require('../errors');

const EMPTY = Buffer.alloc(0);
// node:http has no body limit and no "no timeout": the library's limits
// are set to their largest useful values instead.
const MAX_BODY = 2 ** 31; // the largest the library takes (2 GiB)
const DAY_MS = 86400000;
// Graceful close waits this long for requests still being answered (node
// waits for ever; closeAllConnections() ends them at once).
const CLOSE_WAIT_MS = 2147483647;

// ---- errors shaped as node's (code, message) ----

function nodeError(Ctor, code, message) {
  const e = new Ctor(message);
  e.code = code;
  return e;
}

const headersSentError = (what) => nodeError(Error, 'ERR_HTTP_HEADERS_SENT', `Cannot ${what} headers after they are sent to the client`);
const lengthMismatch = (actual, expected) => nodeError(Error, 'ERR_HTTP_CONTENT_LENGTH_MISMATCH',
  `Response body's content-length of ${actual} byte(s) does not match the content-length of ${expected} byte(s) set in header`);

function invalidArgType(name, expected, value) {
  const got = value === null ? 'null' : typeof value;
  return nodeError(TypeError, 'ERR_INVALID_ARG_TYPE', `The "${name}" argument must be ${expected}. Received type ${got}`);
}

function chunkBuffer(chunk, encoding, what) {
  if (typeof chunk === 'string') return Buffer.from(chunk, typeof encoding === 'string' ? encoding : 'utf8');
  if (chunk instanceof Uint8Array) return chunk;
  throw invalidArgType(what, 'of type string or an instance of Buffer or Uint8Array', chunk);
}

function listenError(err, host, port) {
  const codes = { NSV_EADDRINUSE: ['EADDRINUSE', -98, 'address already in use'] };
  const m = codes[err.code];
  if (!m) return err;
  const e = new Error(`listen ${m[0]}: ${m[2]} ${host.includes(':') ? `[${host}]` : host}:${port}`);
  Object.assign(e, { code: m[0], errno: m[1], syscall: 'listen', address: host, port, nsvCode: err.code });
  return e;
}

function hostUrl(scheme, host, port) {
  return `${scheme}://${host.includes(':') && host[0] !== '[' ? `[${host}]` : host}:${port}`;
}

// ---- the socket: one per connection, shaped as the parts of net.Socket
// that frameworks read (addresses, readable/writable, 'close', timeouts) ----

class Socket extends EventEmitter {
  constructor(server, conn, info) {
    super();
    this.server = server;
    this._core = server._core;
    this._conn = conn;
    this.remoteAddress = info.remoteAddress;
    this.remotePort = info.remotePort;
    // The front's fields when the connection came through a PROXY protocol
    // front (remoteAddress is then the client's, from the header), else null.
    this.proxy = info.proxy || null;
    this.remoteFamily = info.remoteAddress && info.remoteAddress.includes(':') ? 'IPv6' : 'IPv4';
    const a = server._addr;
    this.localAddress = a ? a.address : undefined;
    this.localPort = a ? a.port : undefined;
    if (info.tls) {
      const t = info.tls;
      this.encrypted = true;
      this.authorized = t.authorized;
      this.servername = t.servername || false;
      this.getPeerCertificate = () => (t.subject ? { subject: t.subjectObject(), subjectString: t.subject } : {});
    }
    this.readable = true;
    this.writable = true;
    this.destroyed = false;
    this.connecting = false;
    this.readableHighWaterMark = 65536;
    this._paused = false; // node's server flag for pipelined requests; never set here
    this._libPaused = false;
    this._res = null; // the response being answered on this connection
    this._body = null; // the request body still arriving
    this._timeoutMs = 0;
    this._timer = null;
    this.bytesRead = 0;
    this.bytesWritten = 0;
  }

  // Reading the request body, for node's IncomingMessage#_read and the
  // body's high water mark (nsv_pause_read: TCP slows the client).
  pause() { this._pauseLib(true); return this; }
  resume() { this._pauseLib(false); return this; }
  _pauseLib(on) {
    if (this._libPaused === on || this.destroyed) return;
    this._libPaused = on;
    this._core._tcpOp('nsv_pause_read', this._conn, on ? 1 : 0);
  }

  // Resets the connection (what is queued is dropped).
  destroy(err) {
    if (this.destroyed) return this;
    this._core._tcpOp('nsv_abort', this._conn);
    this._gone(err);
    return this;
  }

  // Closes the connection after what is queued has been sent.
  end() {
    if (!this.destroyed) this._core._tcpOp('nsv_close', this._conn);
    return this;
  }

  destroySoon() { return this.end(); }

  write() {
    throw nodeError(Error, 'ERR_NANOSRV_RAW_WRITE',
      'nanosrv/http: raw writes to an HTTP connection are not supported (answer with the response; WebSockets: server.ws())');
  }

  _gone(err) {
    if (this.destroyed) return;
    this.destroyed = true;
    this.readable = this.writable = false;
    this._clearTimer();
    const res = this._res;
    this._res = null;
    if (res) res._connClosed();
    process.nextTick(() => {
      if (err && this.listenerCount('error')) this.emit('error', err);
      this.emit('close', !!err);
    });
  }

  setTimeout(ms, cb) {
    this._timeoutMs = ms;
    if (cb) { if (ms === 0) this.off('timeout', cb); else this.once('timeout', cb); }
    this._touch();
    return this;
  }

  _touch() {
    if (!this._timeoutMs || this.destroyed) { this._clearTimer(); return; }
    if (this._timer) { this._timer.refresh(); return; }
    this._timer = setTimeout(() => { this._timer = null; this._timedOut(); }, this._timeoutMs);
    this._timer.unref();
  }

  // As node's server: the request, the response and the server hear of it;
  // with no listener anywhere the connection is destroyed.
  _timedOut() {
    const res = this._res;
    const req = res && res.req;
    let heard = this.emit('timeout');
    if (req && !req.complete && req.emit('timeout', this)) heard = true;
    if (res && res.emit('timeout', this)) heard = true;
    if (this.server.emit('timeout', this)) heard = true;
    if (!heard) this.destroy();
  }

  _clearTimer() { if (this._timer) { clearTimeout(this._timer); this._timer = null; } }

  get timeout() { return this._timeoutMs || undefined; }
  // The library sets TCP_NODELAY on every connection and keeps its own idle timer.
  setNoDelay() { return this; }
  setKeepAlive() { return this; }
  ref() { return this; }
  unref() { return this; }
  cork() {}
  uncork() {}
  address() { return { address: this.localAddress, family: this.remoteFamily, port: this.localPort }; }
  get readyState() { return this.destroyed ? 'closed' : 'open'; }
  get writableLength() { return this._res ? this._res.writableLength : 0; }
  // The connection's id in the library (for the by-id calls of nanosrv).
  get id() { return this._conn; }
}

// ---- the request ----

// A node IncomingMessage: frameworks put their own prototype (which
// inherits from node's) in place of this one, so it adds no behaviour.
class IncomingMessage extends nodeHttp.IncomingMessage {}

// Where a streamed body goes: the core server calls _bodyPiece for each
// BODY event and _fail when the body will not come.
class BodySink {
  constructor(msg, socket) {
    this.msg = msg;
    this.socket = socket;
    this.conn = socket._conn;
    this._pausedC = false;
  }

  _bodyPiece(bytes, eof) {
    const msg = this.msg;
    if (msg.destroyed) return;
    this.socket.bytesRead += bytes.length;
    this.socket._touch();
    if (bytes.length && !msg.push(bytes)) this.socket.pause();
    if (eof) {
      this.socket._body = null;
      msg.complete = true;
      msg.push(null);
    }
  }

  // The body will not come: the answer ended it (the library drops the
  // rest, as node's _dump reads it away), a limit or the client leaving.
  _fail(err) {
    const msg = this.msg;
    this.socket._body = null;
    if (this.socket._libPaused) this.socket.resume();
    if (msg.destroyed || msg.complete) return;
    if (err === null) {
      if (!msg._consuming) { msg._dumped = true; msg.complete = true; msg.push(null); msg.resume(); return; }
      msg.destroy();
      return;
    }
    if (err.errno === C.NSV_ECLOSED) err = econnreset('aborted');
    msg.destroy(err);
  }
}

function econnreset(msg) {
  const e = new Error(msg);
  e.code = 'ECONNRESET';
  return e;
}

// "Name: value\r\n" block -> [name, value, ...] as node's rawHeaders.
function rawHeaders(block) {
  const raw = [];
  for (let i = 0; i < block.length;) {
    let eol = block.indexOf('\r\n', i);
    if (eol < 0) eol = block.length;
    const colon = block.indexOf(':', i);
    if (colon > i && colon < eol) raw.push(block.slice(i, colon), block.slice(colon + 1, eol).trim());
    i = eol + 2;
  }
  return raw;
}

// ---- the response ----

function statusCheck(code) {
  const c = code | 0;
  if (c !== +code || c < 100 || c > 999) {
    throw nodeError(RangeError, 'ERR_HTTP_INVALID_STATUS_CODE', `Invalid status code: ${code}`);
  }
  return c;
}

// The methods as own properties of every response: they must survive the
// frameworks' Object.setPrototypeOf(res, app.response). Written out as
// named stores (checked against the prototype below): copied in a loop by
// computed name they cost ~20x more per response, since V8 then takes the
// generic path for each of the ~40 keyed stores.
function ownMethods(o) {
  o.setHeader = P.setHeader; o.appendHeader = P.appendHeader; o.setHeaders = P.setHeaders;
  o.getHeader = P.getHeader; o.hasHeader = P.hasHeader; o.removeHeader = P.removeHeader;
  o.getHeaders = P.getHeaders; o.getHeaderNames = P.getHeaderNames;
  o.getRawHeaderNames = P.getRawHeaderNames; o.writeHead = P.writeHead;
  o._implicitHeader = P._implicitHeader; o._commit = P._commit; o._head = P._head; o._reason = P._reason;
  o._start = P._start; o.flushHeaders = P.flushHeaders; o.write = P.write; o._send = P._send;
  o._askAck = P._askAck; o._ack = P._ack; o._writable = P._writable; o._drained = P._drained; o.end = P.end;
  o._finishStream = P._finishStream; o._done = P._done; o._emitClose = P._emitClose;
  o._connClosed = P._connClosed; o._hangup = P._hangup; o.destroy = P.destroy; o.setTimeout = P.setTimeout;
  o.cork = P.cork; o.uncork = P.uncork; o.writeContinue = P.writeContinue;
  o.writeProcessing = P.writeProcessing; o.writeEarlyHints = P.writeEarlyHints;
  o.addTrailers = P.addTrailers; o.assignSocket = P.assignSocket; o.detachSocket = P.detachSocket;
}

function ServerResponse(req, socket, server) {
  EventEmitter.call(this);
  ownMethods(this);
  this.req = req;
  this.socket = socket;
  this.connection = socket;
  this._server = server;
  this._core = server._core;
  this.conn = socket._conn;
  this.statusCode = 200;
  this.statusMessage = undefined;
  this.sendDate = true;
  this.chunkedEncoding = false;
  this.useChunkedEncodingByDefault = true;
  this.shouldKeepAlive = true;
  this.strictContentLength = true; // always: a wrong Content-Length never reaches the wire
  this._hdr = null; // Map: lower-case name -> [name as given, value]
  this._header = null; // the status line and headers once committed (writeHead)
  this._lines = ''; // the header lines given to the library
  this._headerSent = false;
  this.headersSent = false;
  this.finished = false;
  this.writableEnded = false;
  this.writableFinished = false;
  this.writableNeedDrain = false;
  this.writableLength = 0;
  this.writableHighWaterMark = this._core._highWater();
  this.writableObjectMode = false;
  this.writableCorked = 0;
  this.writable = true;
  this.destroyed = false;
  this.closed = false;
  this.errored = null;
  this._isHead = req.method === 'HEAD';
  this._noBody = this._isHead;
  this._declared = -1; // Content-Length of the app's, or -1
  this._written = 0; // body bytes given so far
  this._streaming = false; // nsv_reply_start was called
  this._unacked = 0; // bytes sent since the library last said where the queue stands
  this._askedAt = -1; // _unacked when the pending acknowledgement was asked for
  this._over = false; // the library said the queue is past the high water mark
  this._backlog = null; // chunks refused with NSV_EAGAIN, sent once drained
  this._endAfterBacklog = null;
  this._closeEmitted = false;
  this._body = null; // BodySink of the request, while its body arrives
}
Object.setPrototypeOf(ServerResponse.prototype, Stream.prototype);
Object.setPrototypeOf(ServerResponse, Stream);
const P = ServerResponse.prototype;

P.setHeader = function setHeader(name, value) {
  if (this._header) throw headersSentError('set');
  nodeHttp.validateHeaderName(name);
  nodeHttp.validateHeaderValue(name, value);
  (this._hdr || (this._hdr = new Map())).set(name.toLowerCase(), [name, value]);
  return this;
};

P.appendHeader = function appendHeader(name, value) {
  if (this._header) throw headersSentError('append');
  nodeHttp.validateHeaderName(name);
  nodeHttp.validateHeaderValue(name, value);
  const h = this._hdr || (this._hdr = new Map());
  const k = name.toLowerCase();
  const prev = h.get(k);
  if (prev === undefined) h.set(k, [name, value]);
  else h.set(k, [prev[0], [].concat(prev[1], value)]);
  return this;
};

P.setHeaders = function setHeaders(headers) {
  if (this._header) throw headersSentError('set');
  for (const [k, v] of headers) this.setHeader(k, v);
  return this;
};

P.getHeader = function getHeader(name) {
  if (typeof name !== 'string') throw invalidArgType('name', 'of type string', name);
  const e = this._hdr && this._hdr.get(name.toLowerCase());
  return e ? e[1] : undefined;
};

P.hasHeader = function hasHeader(name) {
  if (typeof name !== 'string') throw invalidArgType('name', 'of type string', name);
  return !!(this._hdr && this._hdr.has(name.toLowerCase()));
};

P.removeHeader = function removeHeader(name) {
  if (typeof name !== 'string') throw invalidArgType('name', 'of type string', name);
  if (this._header) throw headersSentError('remove');
  if (this._hdr) this._hdr.delete(name.toLowerCase());
};

P.getHeaders = function getHeaders() {
  const o = Object.create(null);
  if (this._hdr) for (const [k, e] of this._hdr) o[k] = e[1];
  return o;
};

P.getHeaderNames = function getHeaderNames() { return this._hdr ? [...this._hdr.keys()] : []; };
P.getRawHeaderNames = function getRawHeaderNames() {
  return this._hdr ? Array.from(this._hdr.values(), (e) => e[0]) : [];
};

// writeHead(status[, statusMessage][, headers]): headers an object, a flat
// [name, value, ...] array or an array of [name, value] pairs (repeats kept).
P.writeHead = function writeHead(status, reason, obj) {
  if (this._header) throw headersSentError('write');
  const code = statusCheck(status);
  if (typeof reason === 'string') {
    this.statusMessage = reason;
  } else {
    if (this.statusMessage == null) this.statusMessage = nodeHttp.STATUS_CODES[code] || 'unknown';
    obj = obj === undefined ? reason : obj;
  }
  if (/[^\t\x20-\x7e\x80-\xff]/.test(this.statusMessage)) {
    throw nodeError(TypeError, 'ERR_INVALID_CHAR', 'Invalid character in statusMessage');
  }
  this.statusCode = code;
  if (Array.isArray(obj)) {
    if (obj.length && Array.isArray(obj[0])) {
      for (const [k, v] of obj) this.appendHeader(k, v);
    } else {
      if (obj.length % 2 !== 0) throw nodeError(TypeError, 'ERR_INVALID_ARG_VALUE', "The argument 'headers' is invalid.");
      for (let i = 0; i < obj.length; i += 2) this.appendHeader(obj[i], obj[i + 1]);
    }
  } else if (obj) {
    for (const k of Object.keys(obj)) if (obj[k] !== undefined) this.setHeader(k, obj[k]);
  }
  this._commit();
  return this;
};

// Like node's: end() and write() commit the head through writeHead, so
// wrappers of writeHead (on-headers, compression) see it.
P._implicitHeader = function _implicitHeader() { this.writeHead(this.statusCode); };

// Freezes the head: the header lines the library gets, the framing.
// Only the lines are built (the library writes the status line); _header,
// which apps read mostly as a flag, is a cheap rope of the same text as
// node's (concatenation, flattened only if someone reads its characters).
P._commit = function _commit() {
  const code = this.statusCode;
  const noFraming = code === 204 || code < 200;
  if (code === 304 || noFraming) this._noBody = true;
  const h = this._hdr;
  let lines = '';
  this._declared = -1;
  if (h !== null) {
    // Map iteration by forEach: no iterator or destructuring per header.
    h.forEach((e, k) => {
      const name = e[0], value = e[1];
      if (k === 'content-length') {
        // 204 has no Content-Length (the library refuses one), 1xx/204/304 no framing.
        if (noFraming) return;
        if (!this._isHead && code !== 304) {
          const n = Number(Array.isArray(value) ? value[0] : value);
          if (Number.isSafeInteger(n) && n >= 0) this._declared = n;
        }
      } else if (k === 'transfer-encoding') {
        if (noFraming) return;
        this.chunkedEncoding = true;
      }
      if (Array.isArray(value)) for (let i = 0; i < value.length; i++) lines += name + ': ' + value[i] + '\r\n';
      else lines += name + ': ' + value + '\r\n';
    });
  }
  this._lines = lines;
  // (an HTTP/2 stream's head is written as HTTP/1.1 too: the library frames it)
  const hv = this.req.httpVersion === '1.0' ? '1.0' : '1.1';
  this._header = 'HTTP/' + hv + ' ' + code + ' ' + this.statusMessage + '\r\n' + lines + '\r\n';
  this.headersSent = true;
};

P._head = function _head() { return this._lines; };

// The reason phrase of the status line, when it is not the standard one
// (nsv_set_reason, applied to the next status line of this request).
P._reason = function _reason() {
  const m = this.statusMessage;
  if (!m || m === nodeHttp.STATUS_CODES[this.statusCode]) return;
  const core = this._core;
  if (!core._n.has('nsv_set_reason')) return;
  core._direct();
  const b = Buffer.from(m, 'latin1');
  check(core._f.nsv_set_reason(core._h, this.conn, b, b.length), () => `statusMessage: ${core._detail()}`);
};

// Starts the streamed answer (chunked, or fixed-length with a Content-Length).
P._start = function _start() {
  if (this._streaming) return;
  if (!this._header) this._implicitHeader();
  this._streaming = true;
  this._headerSent = true;
  if (this.destroyed) return;
  this._reason();
  this._core._replyStart(this);
};

P.flushHeaders = function flushHeaders() {
  if (this.finished) return;
  this._start();
};

P.write = function write(chunk, encoding, cb) {
  if (typeof encoding === 'function') { cb = encoding; encoding = undefined; }
  if (chunk === null) throw nodeError(TypeError, 'ERR_STREAM_NULL_VALUES', 'May not write null values to stream');
  const buf = chunkBuffer(chunk, encoding, 'chunk');
  let err = null;
  if (this.finished) err = nodeError(Error, 'ERR_STREAM_WRITE_AFTER_END', 'write after end');
  else if (this.destroyed) err = nodeError(Error, 'ERR_STREAM_DESTROYED', 'Cannot call write after a stream was destroyed');
  if (err) {
    process.nextTick(() => {
      if (cb) cb(err);
      if (!this.destroyed) this.emit('error', err);
    });
    return false;
  }
  if (!this._header) this._implicitHeader();
  if (!this._noBody && this._declared >= 0 && this._written + buf.length > this._declared) {
    throw lengthMismatch(this._written + buf.length, this._declared);
  }
  this._start();
  if (this._noBody || !buf.length) { if (cb) process.nextTick(cb); return true; }
  this._written += buf.length;
  const ok = this._send(buf);
  if (cb) process.nextTick(cb);
  return ok;
};

// One chunk to the library; false once the bytes sent without news pass
// the high water mark (counted here, so the answer is known at once).
P._send = function _send(buf) {
  if (this.destroyed) return false;
  if (this._backlog !== null) { this._backlog.push(buf); return false; }
  const r = this._core._trySend(this, buf);
  if (r === C.NSV_ESTALE) { this._connClosed(); return false; }
  if (r === C.NSV_EAGAIN) { // the library's output cap: hold the chunk until drained
    this._backlog = [buf];
    this._over = true;
    this.writableNeedDrain = true;
    this.writableLength = this._unacked + buf.length;
    return false;
  }
  this.socket.bytesWritten += buf.length;
  this.socket._touch();
  this._unacked += buf.length;
  this.writableLength = this._unacked;
  if (!this._over && this._unacked < this.writableHighWaterMark) return true;
  this.writableNeedDrain = true;
  this._askAck();
  return false;
};

// Asks the library for a wakeup that comes after it handled the sends so far.
P._askAck = function _askAck() {
  if (this._over || this._askedAt >= 0 || this.destroyed) return;
  this._askedAt = this._unacked;
  if (this._core._tcpAskAck(this.conn) < 0) { this._askedAt = -1; this._drained(); }
};

// The acknowledgement: the sends before it are handled and the queue was
// not reported past the high water mark.
P._ack = function _ack() {
  if (this._askedAt >= 0) this._unacked = Math.max(0, this._unacked - this._askedAt);
  this._askedAt = -1;
  if (this._over) return;
  if (this._unacked >= this.writableHighWaterMark) { this._askAck(); return; }
  this._drained();
};

// TCP_WRITABLE: false past the high water mark, true once down to the low one.
P._writable = function _writable(ok) {
  this._over = !ok;
  if (!ok) return;
  this._unacked = 0;
  this._drained();
};

P._drained = function _drained() {
  if (this._backlog !== null) {
    const chunks = this._backlog;
    this._backlog = null;
    this._over = false;
    for (let i = 0; i < chunks.length; i++) {
      if (!this._send(chunks[i]) && this._backlog !== null) {
        this._backlog.push(...chunks.slice(i + 1));
        return;
      }
    }
    if (this._endAfterBacklog) { const f = this._endAfterBacklog; this._endAfterBacklog = null; f(); }
  }
  this.writableLength = this._unacked;
  if (this.writableNeedDrain && this._unacked < this.writableHighWaterMark) {
    this.writableNeedDrain = false;
    this.emit('drain');
  }
};

P.end = function end(chunk, encoding, cb) {
  if (typeof chunk === 'function') { cb = chunk; chunk = undefined; } else if (typeof encoding === 'function') { cb = encoding; encoding = undefined; }
  if (this.finished) {
    if (cb) {
      const e = nodeError(Error, 'ERR_STREAM_ALREADY_FINISHED', 'Cannot call end after a stream was finished');
      if (this.writableFinished) process.nextTick(cb, e); else this.once('finish', cb);
    }
    return this;
  }
  const buf = chunk == null ? null : chunkBuffer(chunk, encoding, 'chunk');
  if (cb) this.once('finish', cb);
  if (!this._streaming) {
    if (!this._header) this._implicitHeader();
    const n = buf ? buf.length : 0;
    if (!this._noBody && this._declared >= 0 && n !== this._declared) throw lengthMismatch(n, this._declared);
    this.finished = this.writableEnded = true;
    this.writable = false;
    this._headerSent = true;
    if (!this.destroyed) {
      if (this.chunkedEncoding) { // the app framed it chunked: only a stream can say so
        this._streaming = true;
        this._reason();
        this._core._replyStart(this);
        if (n && !this._noBody) this._send(buf);
        this._finishStream();
        return this;
      }
      this._reason();
      this._core._queueReply(this, this._noBody ? null : buf);
    }
    this._done();
    return this;
  }
  if (buf && buf.length && !this._noBody) {
    if (this._declared >= 0 && this._written + buf.length > this._declared) throw lengthMismatch(this._written + buf.length, this._declared);
    this._written += buf.length;
    this._send(buf);
  }
  this.finished = this.writableEnded = true;
  this.writable = false;
  this._finishStream();
  return this;
};

P._finishStream = function _finishStream() {
  if (this._backlog !== null) { this._endAfterBacklog = () => this._finishStream(); return; }
  const short = !this._noBody && this._declared >= 0 && this._written !== this._declared;
  if (!this.destroyed) {
    // Short of its Content-Length the library closes the connection after
    // what was sent: the client sees a short body, never a desync.
    const r = this._core._replyEnd(this);
    if (r === C.NSV_ESTALE) this._connClosed();
  }
  this._done();
  if (short) throw lengthMismatch(this._written, this._declared);
};

// The answer is the library's now: finished (node says so once the socket
// took the bytes), 'finish' and 'close' on the next ticks.
P._done = function _done() {
  const socket = this.socket;
  if (socket._res === this) socket._res = null;
  this._server._finished(this);
  // As node's server: a body nobody reads is read away, so the request
  // ends and closes.
  const req = this.req;
  if (req && !req._consuming && !req._readableState.resumeScheduled && typeof req._dump === 'function') req._dump();
  if (this.destroyed) return;
  this.writableFinished = true;
  process.nextTick(finishTick, this);
};

// 'finish', then 'close' on the next tick as node does; with no 'close'
// listener (the usual case) nothing can see that tick, so the response
// closes at once and no second tick is scheduled.
function finishTick(res) {
  res.emit('finish');
  if (res.listenerCount('close') === 0) res._emitClose();
  else process.nextTick(closeTick, res);
}

function closeTick(res) { res._emitClose(); }

P._emitClose = function _emitClose() {
  if (this._closeEmitted) return;
  this._closeEmitted = true;
  this.closed = true;
  this.destroyed = true;
  this.emit('close');
};

// The connection closed before the answer was complete.
P._connClosed = function _connClosed() {
  if (this.destroyed) return;
  this.destroyed = true;
  this.writable = false;
  this._backlog = null;
  if (this.socket._res === this) this.socket._res = null;
  const req = this.req;
  if (req && !req.destroyed) {
    if (!req.complete) req.destroy(econnreset('aborted'));
    else req.destroy();
  }
  if (!this.writableFinished) process.nextTick(() => this._emitClose());
};

// The client ended its side while this request is with the app (node's
// server, not half-open, ends the connection then): the request closes
// (aborted when its body was cut short) and so does the response; the
// connection closes after what is queued.
P._hangup = function _hangup() {
  if (this.finished) return;
  const socket = this.socket;
  if (!socket.destroyed) {
    this._core._tcpOp('nsv_close', this.conn);
    socket._gone(null);
  }
};

P.destroy = function destroy(err) {
  if (this.destroyed) return this;
  this.socket.destroy(err);
  if (!this.destroyed) this._connClosed();
  return this;
};

P.setTimeout = function setTimeout(ms, cb) {
  if (cb) this.on('timeout', cb);
  this.socket.setTimeout(ms);
  return this;
};

P.cork = function cork() { this.writableCorked++; };
P.uncork = function uncork() { if (this.writableCorked) this.writableCorked--; };
// The library answers Expect: 100-continue itself, and has no 1xx or trailer API.
P.writeContinue = function writeContinue(cb) { if (cb) process.nextTick(cb); };
P.writeProcessing = function writeProcessing(cb) { if (cb) process.nextTick(cb); };
P.writeEarlyHints = function writeEarlyHints(hints, cb) { if (cb) process.nextTick(cb); };
P.addTrailers = function addTrailers() {};
P.assignSocket = function assignSocket() {};
P.detachSocket = function detachSocket() {};

{
  // ownMethods() copies every method of the prototype (a method added
  // without it would vanish on the frameworks' prototype swap).
  const t = {};
  ownMethods(t);
  const missing = Object.getOwnPropertyNames(P).filter((k) => k !== 'constructor' && typeof P[k] === 'function' && t[k] !== P[k]);
  if (missing.length) throw new Error(`nanosrv/http: ownMethods() misses ${missing.join(', ')}`);
}

// ---- the core server: lib/server.js with this module's objects ----

class HttpCore extends Core {
  constructor(opts, owner) {
    super(opts);
    this._owner = owner;
    this.fallback(() => {}); // every request reaches _onRequest (no 404 in C)
  }

  _onRequest(nreq) { this._owner._request(nreq); }
  _hangup(res) { if (typeof res._hangup === 'function') res._hangup(); }

  _onClose(conn) {
    this._bodies.delete(conn);
    this._pending.delete(conn);
    this._owner._connClosed(conn);
    super._onClose(conn); // WebSockets of server.ws()
  }

  _cutBody(res) {
    const b = this._bodies.get(res.conn);
    if (b === undefined || b !== res._body) return;
    this._bodies.delete(res.conn);
    b._fail(null);
  }

  // Returns the library's code: NSV_ESTALE when the client is gone.
  _replyEnd(res) {
    this._direct();
    this._pending.delete(res.conn);
    this._cutBody(res);
    const r = this._f.nsv_reply_end(this._h, res.conn);
    if (r < 0 && r !== C.NSV_ESTALE && r !== C.NSV_EINVAL) check(r, 'nsv_reply_end');
    return r;
  }

  // An exception from an app's listener is the app's, as with node:http
  // (uncaught); it must not cost the rest of the batch.
  _failed(err) { process.nextTick(() => { throw err; }); }
}

// ---- the server ----

const NODE_ONLY = new Set(['IncomingMessage', 'ServerResponse', 'insecureHTTPParser', 'joinDuplicateHeaders',
  'noDelay', 'keepAlive', 'keepAliveInitialDelay', 'requireHostHeader', 'uniqueHeaders', 'connectionsCheckingInterval',
  'highWaterMark', 'maxHeaderSize', 'requestTimeout', 'headersTimeout', 'keepAliveTimeout', 'rejectNonStandardBodyWrites',
  'nanosrv', 'key', 'cert', 'ca', 'passphrase', 'requestCert', 'rejectUnauthorized', 'pfx', 'ciphers', 'ALPNProtocols',
  'SNICallback', 'secureOptions', 'minVersion', 'maxVersion', 'allowHTTP1', 'maxHeadersCount', 'signal']);

// "CN=alice, O=Example" -> { CN: 'alice', O: 'Example' }, as the native request reads it.
const { parseSubject } = require('../request');

class Server extends EventEmitter {
  constructor(options, listener) {
    super();
    if (typeof options === 'function') { listener = options; options = {}; }
    if (options == null) options = {};
    if (typeof options !== 'object') throw invalidArgType('options', 'of type object', options);
    this._opts = options;
    this._secure = false;
    this.timeout = 0;
    this.keepAliveTimeout = options.keepAliveTimeout === undefined ? 5000 : options.keepAliveTimeout;
    this.requestTimeout = options.requestTimeout === undefined ? 300000 : options.requestTimeout;
    this.headersTimeout = options.headersTimeout === undefined ? 60000 : options.headersTimeout;
    this.maxHeadersCount = null;
    this.maxRequestsPerSocket = 0;
    this._core = null;
    this._addr = null;
    this._closing = false;
    this._sockets = new Map(); // conn -> Socket
    this._ws = []; // server.ws() calls made before listen
    this._accessCore = null;
    if (listener) this.on('request', listener);
    this.on('newListener', (ev) => { if (ev === 'access' && this._core) this._forwardAccess(this._core); });
  }

  get listening() { return this._addr !== null && !this._closing; }

  // The library's options for node's: limits node does not have are lifted,
  // the timeouts are mapped (requestTimeout, else headersTimeout: the
  // library's whole-request deadline; keepAliveTimeout: its idle timeout).
  _coreOptions() {
    const o = this._opts;
    const c = { streamBody: true, maxBody: MAX_BODY };
    for (const k of ['backend', 'library', 'threads', 'maxEvents', 'arenaSize']) if (o[k] !== undefined) c[k] = o[k];
    c.requestTimeoutMs = this.requestTimeout || this.headersTimeout || DAY_MS;
    c.idleTimeoutMs = this.keepAliveTimeout || DAY_MS;
    if (o.maxHeaderSize !== undefined) c.maxHeaderBytes = o.maxHeaderSize;
    if (this.maxHeadersCount) c.maxHeaders = this.maxHeadersCount;
    if (this._tls) Object.assign(c, this._tls);
    for (const k of Object.keys(o)) if (!NODE_ONLY.has(k) && !(k in c)) c[k] = o[k];
    if (o.nanosrv) Object.assign(c, o.nanosrv);
    return c;
  }

  // listen([port][, host][, backlog][, cb]) | listen({ port, host, fd,
  // proxyProtocol, proxyTimeoutMs, proxyFrom, allow, deny }[, cb]): fd
  // adopts a listening TCP socket (an inherited one), the others are the
  // listener's options (README "Behind a load balancer").
  listen(...args) {
    let port = 0, host = null, cb = null, lopts;
    if (args.length && typeof args[args.length - 1] === 'function') cb = args.pop();
    const a0 = args[0];
    if (a0 !== null && typeof a0 === 'object') {
      if (a0.path !== undefined || a0.handle !== undefined || a0._handle !== undefined) {
        throw nodeError(Error, 'ERR_NANOSRV_UNSUPPORTED', 'nanosrv/http: only TCP ports and listening fds can be listened on');
      }
      if (a0.port !== undefined) port = a0.port;
      if (a0.host) host = a0.host;
      lopts = a0;
    } else {
      if (a0 !== undefined && a0 !== null) port = a0;
      if (typeof args[1] === 'string') host = args[1];
    }
    if (typeof port === 'string' && /^\d+$/.test(port)) port = Number(port);
    if (!Number.isInteger(port) || port < 0 || port > 65535) {
      throw nodeError(RangeError, 'ERR_SOCKET_BAD_PORT', `options.port should be >= 0 and < 65536. Received ${port}.`);
    }
    if (cb) this.once('listening', cb);
    if (this._core !== null) throw nodeError(Error, 'ERR_SERVER_ALREADY_LISTEN', 'Listen method has been called more than once without closing.');
    try {
      this._listen(port, host, lopts);
    } catch (e) {
      process.nextTick(() => this.emit('error', e));
    }
    return this;
  }

  _listen(port, host, lopts) {
    const core = new HttpCore(this._coreOptions(), this);
    core.on('error', (e) => this.emit('error', e));
    for (const [pattern, handlers] of this._ws) core.ws(pattern, handlers);
    if (this.listenerCount('access')) this._forwardAccess(core);
    const scheme = this._secure ? 'https' : 'http';
    // No host: every address, IPv4 and IPv6 (node's '::'); 'localhost': both loopbacks.
    const fd = lopts ? lopts.fd : undefined;
    const pairs = fd !== undefined ? ['0.0.0.0'] : host === null || host === '::' ? ['0.0.0.0', '::'] : host === 'localhost' ? ['127.0.0.1', '::1'] : [host];
    let p;
    try {
      p = core._listenNow(fd !== undefined ? `${scheme}://0.0.0.0:0` : hostUrl(scheme, pairs[0], port), undefined, lopts);
      for (let i = 1; i < pairs.length; i++) {
        try { core._listenNow(hostUrl(scheme, pairs[i], p), undefined, lopts); } catch (e) {
          if (e.code === 'NSV_EINVAL' || e.code === 'NSV_ERANGE') throw e; // a listener option, not a missing IPv6
        }
      }
    } catch (e) {
      core.close(0);
      throw listenError(e, pairs[pairs.length > 1 && host === null ? 1 : 0], port);
    }
    this._core = core;
    const address = host === null ? '::' : host === 'localhost' ? '127.0.0.1' : host;
    this._addr = { address, family: address.includes(':') ? 'IPv6' : 'IPv4', port: p };
    if (this._unref) core.unref();
    process.nextTick(() => this.emit('listening'));
  }

  address() { return this._addr; }

  // ---- operations (the core's; README "Behind a load balancer") ----

  _running(what) {
    if (this._core === null) throw nodeError(Error, 'ERR_SERVER_NOT_RUNNING', `${what}: the server is not listening`);
    return this._core;
  }

  metrics(worker) { return this._running('metrics()').metrics(worker); }
  metricsText(prefix, opts) { return this._running('metricsText()').metricsText(prefix, opts); }
  // Handlers for an app's routes: app.get('/metrics', server.metricsHandler()).
  metricsHandler(opts = {}) {
    return (req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4' });
      res.end(this.metricsText(opts.prefix, { perWorker: !!opts.perWorker }));
    };
  }

  get draining() { return this._closing || (this._core !== null && this._core.draining); }

  readinessHandler() {
    return (req, res) => {
      const d = this.draining;
      res.writeHead(d ? 503 : 200, { 'Content-Type': 'text/plain' });
      res.end(d ? 'draining' : 'ready'); // echo-server's bodies
    };
  }

  // 'access' (record) of the core, for listeners of this server.
  _forwardAccess(core) {
    if (this._accessCore === core) return;
    this._accessCore = core;
    core.on('access', (r) => this.emit('access', r));
  }

  // A request from the core (its fields are read now: the arena is reused).
  _request(nreq) {
    const conn = nreq.conn;
    let socket = this._sockets.get(conn);
    if (socket === undefined) {
      const tls = nreq.tls ? { ...nreq.tls, subjectObject() { return parseSubject(this.subject); } } : null;
      socket = new Socket(this, conn, { remoteAddress: nreq._el ? nreq.remoteAddress : undefined, remotePort: nreq.remotePort, tls, proxy: nreq.proxy });
      this._sockets.set(conn, socket);
      if (this.timeout) socket.setTimeout(this.timeout);
      this.emit('connection', socket);
    }
    socket._touch();
    const msg = new IncomingMessage(socket);
    msg.method = nreq.method;
    msg.url = nreq.url;
    const v = nreq.httpVersion;
    msg.httpVersion = v;
    msg.httpVersionMajor = v === '2.0' ? 2 : 1;
    msg.httpVersionMinor = v === '1.1' ? 1 : 0;
    const raw = rawHeaders(nreq._str(nreq._ho, nreq._hl));
    msg._addHeaderLines(raw, raw.length);
    const res = new ServerResponse(msg, socket, this);
    res.shouldKeepAlive = (nreq.flags & C.NSV_EVF_KEEPALIVE) !== 0;
    socket._res = res;
    const core = this._core;
    core._pending.set(conn, res);
    if (nreq.streaming) {
      const sink = new BodySink(msg, socket);
      res._body = sink;
      socket._body = sink;
      core._bodies.set(conn, sink);
    }
    // A listener's exception is the app's (uncaught, as with node:http),
    // but it must not cost the other events of this batch.
    try {
      if ((nreq.flags & C.NSV_EVF_UPGRADE) && this.listenerCount('upgrade')) {
        msg.upgrade = true;
        this.emit('upgrade', msg, socket, EMPTY);
      } else {
        this.emit('request', msg, res);
      }
    } catch (e) {
      process.nextTick(() => { throw e; });
    }
    // A request without a body is complete right after 'request', as in
    // node (its parser ends the message after the head's callback).
    if (!nreq.streaming) {
      msg.complete = true;
      msg.push(null);
    }
    // Sent after the client ended its side: as a HANGUP, once the app had
    // its turn to listen.
    if (nreq.flags & C.NSV_EVF_EOF) process.nextTick(() => res._hangup());
  }

  _finished(res) {
    const core = this._core;
    if (core && core._pending.get(res.conn) === res) core._pending.delete(res.conn);
  }

  _connClosed(conn) {
    const socket = this._sockets.get(conn);
    if (socket === undefined) return;
    this._sockets.delete(conn);
    socket._gone(null);
  }

  // Stops taking connections; 'close' once the open ones have ended (idle
  // keep-alive connections are closed at once, as node >= 19 does).
  close(cb) {
    if (cb) {
      if (this._core === null || this._closing) {
        process.nextTick(cb, nodeError(Error, 'ERR_SERVER_NOT_RUNNING', 'Server is not running.'));
      } else {
        this.once('close', cb);
      }
    }
    if (this._core === null || this._closing) return this;
    this._closing = true;
    this._core.close(CLOSE_WAIT_MS).then(() => {
      for (const conn of [...this._sockets.keys()]) this._connClosed(conn);
      // Closed: listen() may be called again, as with node's servers.
      this._core = null;
      this._addr = null;
      this._closing = false;
      this.emit('close');
    });
    return this;
  }

  closeAllConnections() {
    for (const s of [...this._sockets.values()]) s.destroy();
  }

  closeIdleConnections() {
    for (const s of [...this._sockets.values()]) if (s._res === null) s.end();
  }

  setTimeout(ms, cb) {
    this.timeout = ms;
    if (cb) this.on('timeout', cb);
    for (const s of this._sockets.values()) s.setTimeout(ms);
    return this;
  }

  getConnections(cb) { process.nextTick(cb, null, this._sockets.size); return this; }

  ref() { this._unref = false; if (this._core) this._core.ref(); return this; }
  unref() { this._unref = true; if (this._core) this._core.unref(); return this; }

  // WebSocket endpoint answered by the library (the upgrade happens in C):
  // handlers { open(ws, req), message(ws, data, isBinary), close(ws, code,
  // reason) } as nanosrv's server.ws(). Before listen().
  ws(pattern, handlers) {
    if (this._core !== null) throw nodeError(Error, 'ERR_NANOSRV_STATE', 'server.ws() must be called before listen()');
    this._ws.push([pattern, handlers]);
    return this;
  }

  // Sends to every open WebSocket of a ws() endpoint.
  broadcast(pattern, data) { return this._core ? this._core.broadcast(pattern, data) : 0; }

  [Symbol.asyncDispose]() {
    return new Promise((resolve) => { if (this._core && !this._closing) this.close(() => resolve()); else resolve(); });
  }
}

function createServer(options, listener) { return new Server(options, listener); }

// The `ws` package's server shape on the library's WebSockets (lib/http/websocket.js).
const { WebSocketServer, WebSocket } = require('./websocket');
WebSocketServer.WebSocket = WebSocket;

module.exports = {
  createServer,
  Server,
  IncomingMessage,
  ServerResponse,
  Socket,
  WebSocketServer,
  STATUS_CODES: nodeHttp.STATUS_CODES,
  METHODS: nodeHttp.METHODS,
  // The client side and the helpers are node's own.
  request: nodeHttp.request,
  get: nodeHttp.get,
  Agent: nodeHttp.Agent,
  globalAgent: nodeHttp.globalAgent,
  ClientRequest: nodeHttp.ClientRequest,
  OutgoingMessage: nodeHttp.OutgoingMessage,
  validateHeaderName: nodeHttp.validateHeaderName,
  validateHeaderValue: nodeHttp.validateHeaderValue,
  maxHeaderSize: nodeHttp.maxHeaderSize,
};
