'use strict';
// The answer side of one request, shaped like http.ServerResponse where it
// fits. A complete reply (end) is queued in the server's reply batch; write()
// switches to a chunked stream sent with direct calls.
const { nsvError, typeError } = require('./errors');
const C = require('./abi').constants;

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
const NAMES = new Map(); // header name as given -> lower case, once validated

function checkBody(chunk, what) {
  if (chunk == null || typeof chunk === 'string' || chunk instanceof Uint8Array) return;
  throw typeError(what, 'a string, Buffer or Uint8Array', chunk);
}

function checkStatus(status) {
  if (!Number.isInteger(status) || status < 100 || status > 999) {
    const e = new RangeError(`Invalid status code: ${status}`);
    e.code = 'ERR_HTTP_INVALID_STATUS_CODE';
    throw e;
  }
}

class Response {
  constructor(server, conn, req) {
    this._srv = server;
    this.conn = conn;
    this.req = req;
    this.statusCode = 200;
    this._h = null; // lower-case name -> [name as given, value]
    this.headersSent = false;
    this.writableEnded = false;
    this.destroyed = false; // the connection closed before the reply
    this.writableNeedDrain = false; // write() returned false: wait for 'drain'
    this._stream = false;
    this._on = null;
  }

  setHeader(name, value) {
    // Names repeat from request to request: validate and lower-case each once.
    let lower = NAMES.get(name);
    if (lower === undefined) {
      if (typeof name !== 'string' || !TOKEN.test(name)) throw typeError('header name', 'a valid HTTP token', name);
      lower = name.toLowerCase();
      if (NAMES.size < 1000) NAMES.set(name, lower);
    }
    const vals = Array.isArray(value) ? value : [value];
    for (const v of vals) {
      if (typeof v !== 'string' && typeof v !== 'number') throw typeError(`value of header '${name}'`, 'a string or number', v);
      if (BAD_VALUE.test(String(v))) {
        const e = new TypeError(`Invalid character in header content ["${name}"]`);
        e.code = 'ERR_INVALID_CHAR';
        throw e;
      }
    }
    if (this.headersSent) throw nsvError(C.NSV_ESTATE, 'headers already sent');
    (this._h || (this._h = {}))[lower] = [name, value];
    return this;
  }

  getHeader(name) { const e = this._h && this._h[String(name).toLowerCase()]; return e ? e[1] : undefined; }
  hasHeader(name) { return this.getHeader(name) !== undefined; }
  removeHeader(name) { if (this._h) delete this._h[String(name).toLowerCase()]; }
  getHeaders() {
    const o = {};
    if (this._h) for (const k of Object.keys(this._h)) o[k] = this._h[k][1];
    return o;
  }

  // writeHead(status[, statusMessage][, headers]); the status line reason is
  // chosen by the library, so a statusMessage is accepted and ignored.
  writeHead(status, msg, headers) {
    if (typeof msg !== 'string') headers = msg;
    checkStatus(status);
    this.statusCode = status;
    if (Array.isArray(headers)) for (let i = 0; i + 1 < headers.length; i += 2) this.setHeader(headers[i], headers[i + 1]);
    else if (headers) for (const k of Object.keys(headers)) this.setHeader(k, headers[k]);
    return this;
  }

  _head() {
    if (this._h === null) return '';
    let s = '';
    for (const k in this._h) {
      const [name, value] = this._h[k];
      if (Array.isArray(value)) for (const v of value) s += `${name}: ${v}\r\n`;
      else s += `${name}: ${value}\r\n`;
    }
    return s;
  }

  // Streams a chunk (chunked transfer encoding). Returns false when the
  // connection's queued output is past the high water mark (wait for
  // 'drain', as with a Node stream) or the connection is gone.
  write(chunk) {
    checkBody(chunk, 'chunk');
    if (this.writableEnded) throw nsvError(C.NSV_ESTATE, 'write after end');
    if (this.destroyed) return false;
    if (!this._stream) {
      checkStatus(this.statusCode);
      this._srv._replyStart(this);
      this._stream = true;
      this.headersSent = true;
    }
    if (chunk != null && chunk.length) this._srv._sendChunk(this, chunk);
    return !this.writableNeedDrain;
  }

  // TCP_WRITABLE from the library: false past the high water mark, true once drained.
  _writable(ok) {
    this.writableNeedDrain = !ok;
    if (ok) this._emit('drain');
  }

  end(body) {
    if (typeof body === 'function') body = undefined;
    checkBody(body, 'body');
    if (this.writableEnded) throw nsvError(C.NSV_ESTATE, 'the response was already sent');
    if (!this._stream) checkStatus(this.statusCode);
    this.writableEnded = true;
    this.headersSent = true;
    if (this.destroyed) return this;
    if (this._stream) {
      if (body != null && body.length) this._srv._sendChunk(this, body);
      this._srv._replyEnd(this);
    } else {
      this._srv._queueReply(this, body);
    }
    this._emit('finish');
    return this;
  }

  // Convenience: JSON body with its content type.
  json(value, status) {
    if (status !== undefined) this.statusCode = status;
    if (!this.hasHeader('content-type')) this.setHeader('Content-Type', 'application/json');
    return this.end(JSON.stringify(value));
  }

  // Minimal emitter: 'finish' after end(), 'close' when the connection closes
  // before the reply.
  on(event, fn) {
    ((this._on || (this._on = {}))[event] || (this._on[event] = [])).push(fn);
    return this;
  }

  once(event, fn) {
    const w = (...a) => { this.off(event, w); fn(...a); };
    return this.on(event, w);
  }

  off(event, fn) {
    const l = this._on && this._on[event];
    if (l) { const i = l.indexOf(fn); if (i >= 0) l.splice(i, 1); }
    return this;
  }

  _emit(event) {
    const l = this._on && this._on[event];
    if (l) for (const fn of l.slice()) fn();
  }

  _closed() {
    if (this.destroyed) return;
    this.destroyed = true;
    this._emit('close');
  }
}

module.exports = { Response, checkBody, checkStatus };
