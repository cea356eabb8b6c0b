'use strict';
// The answer side of one request, shaped like http.ServerResponse where it
// fits. A complete reply (end) is queued in the server's reply batch; write()
// switches to a chunked stream sent with direct calls.
const { nsvError, typeError } = require('./errors');
const forms = require('./forms');
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

// "Name: value\r\n" lines of a { name: value | [values] } object or a flat
// [name, value, ...] array, each checked as res.setHeader checks it.
function headerBlock(headers) {
  if (headers == null) return '';
  if (typeof headers !== 'object') throw typeError('headers', 'an object or array', headers);
  let s = '';
  const one = (k, v) => {
    if (typeof k !== 'string' || !TOKEN.test(k)) throw typeError('header name', 'a valid HTTP token', k);
    for (const x of Array.isArray(v) ? v : [v]) {
      if (typeof x !== 'string' && typeof x !== 'number') throw typeError(`value of header '${k}'`, 'a string or number', x);
      const sx = String(x);
      if (BAD_VALUE.test(sx)) {
        const e = new TypeError(`Invalid character in header content ["${k}"]`);
        e.code = 'ERR_INVALID_CHAR';
        throw e;
      }
      s += `${k}: ${sx}\r\n`;
    }
  };
  if (Array.isArray(headers)) {
    if (headers.length % 2) throw typeError('headers', 'an array of name, value pairs', headers);
    for (let i = 0; i < headers.length; i += 2) one(headers[i], headers[i + 1]);
  } else {
    for (const k of Object.keys(headers)) one(k, headers[k]);
  }
  return s;
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
    this._unacked = 0;
    this._over = false;
    this._stream = false;
    this._sse = null;
    this._on = null;
    this._closeEmitted = false; // 'close' was emitted (the client left or ended its side)
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
    if (chunk != null && chunk.length) {
      this._srv._sendChunk(this, chunk);
      this._sent(chunk.length);
    }
    return !this.writableNeedDrain;
  }

  // Bytes sent since the library last said where the output stands. On a
  // sharded server TCP_WRITABLE comes back a turn later (later still when
  // the worker thread is short of CPU), so a tight loop of sends could pass
  // the high water mark, and the output cap that closes the connection,
  // before write() says so. After one high water mark of sends without
  // news, write() returns false, and 'drain' follows a turn later (at once
  // if the library reports meanwhile). Sends without news are counted
  // across those turns: past a quarter of NSV_OPT_MAX_OUTPUT (a sixteenth
  // of what a worker accepts from another thread) the next 'drain' waits
  // for the library's report or 20 ms, so a worker that is not running
  // cannot be buried.
  _sent(n) {
    this._unacked += n;
    if (this.writableNeedDrain || this._unacked < this._srv._highWater()) return;
    this.writableNeedDrain = true;
    const guess = () => {
      if (!this._over && this.writableNeedDrain && !this.destroyed) this._drained();
    };
    if (this._unacked < this._srv._maxOutput() / 4) setImmediate(guess);
    else setTimeout(guess, 20);
  }

  // TCP_WRITABLE from the library: false past the high water mark, true once drained.
  _writable(ok) {
    this._over = !ok;
    this._unacked = 0;
    this.writableNeedDrain = !ok;
    if (ok) this._drained();
  }

  _drained() {
    this.writableNeedDrain = false;
    if (this._sse) this._sse._drained();
    this._emit('drain');
  }

  // Set-Cookie as Express's res.cookie(name, value, { maxAge (ms), expires,
  // path ('/'), domain, secure, httpOnly, sameSite, partitioned, encode }),
  // built and validated by nsv_set_cookie: a bad name, value or attribute
  // throws NSV_EINVAL with the library's reason.
  cookie(name, value, opts) {
    const f = this._srv._f;
    const line = forms.setCookieValue(f, () => f.nsv_last_error_detail(null) || '', name, value, opts);
    this._addHeader('Set-Cookie', line);
    return this;
  }

  // Expires the cookie (Max-Age=0 and an Expires in 1970); path and domain
  // must match the ones it was set with.
  clearCookie(name, opts = {}) {
    const o = { ...opts, expires: new Date(0) };
    delete o.maxAge;
    const f = this._srv._f;
    const line = forms.setCookieValue(f, () => f.nsv_last_error_detail(null) || '', name, '', o);
    this._addHeader('Set-Cookie', line.replace(/; Expires=/, '; Max-Age=0; Expires='));
    return this;
  }

  _addHeader(name, value) {
    const prev = this.getHeader(name);
    if (prev === undefined) this.setHeader(name, [value]);
    else this.setHeader(name, (Array.isArray(prev) ? prev : [prev]).concat(value));
  }

  // Starts a server-sent event stream (status 200, text/event-stream, the
  // headers set so far): returns an EventStream (send, comment, end).
  sse() {
    if (this.headersSent) throw nsvError(C.NSV_ESTATE, 'headers already sent');
    const { EventStream } = require('./sse');
    this._srv._sseStart(this);
    this._stream = true;
    this.headersSent = true;
    this._sse = new EventStream(this);
    return this._sse;
  }

  // Answers with a file: path is a file system path, or with opts.root a
  // URL path (percent-encoded, as in the request) resolved under root with
  // the static rules (no way out of root). Range, conditional requests and
  // HEAD are handled in C; opts.status (or a statusCode set before) sends
  // the whole file with that status; opts.headers are added. Throws
  // NanosrvError NSV_ENOTFOUND when there is no such file (nothing was
  // sent: answer otherwise, e.g. let the next route try).
  sendFile(path, opts = {}) {
    if (typeof path !== 'string') throw typeError('path', 'a string', path);
    if (opts === null || typeof opts !== 'object') throw typeError('options', 'an object', opts);
    if (this.writableEnded || this.headersSent) throw nsvError(C.NSV_ESTATE, 'the response was already sent');
    const root = opts.root === undefined ? '' : opts.root;
    if (typeof root !== 'string') throw typeError('root', 'a string', root);
    let status = opts.status === undefined ? (this.statusCode === 200 ? 0 : this.statusCode) : opts.status;
    if (status !== 0) checkStatus(status);
    // opts.headers go into this answer only (a miss leaves res untouched).
    const extra = headerBlock(opts.headers);
    const { staticFlags } = require('./server');
    if (this.destroyed) { this.writableEnded = this.headersSent = true; return this; }
    if (!this._srv._replyFile(this, status, root, path, staticFlags(opts), extra)) {
      throw nsvError(C.NSV_ENOTFOUND, `no such file: ${path}`);
    }
    this.writableEnded = this.headersSent = true;
    this._emit('finish');
    return this;
  }

  // end([body][, encoding][, cb]): cb runs after 'finish' (or at once
  // when the client is gone).
  end(body, encoding, cb) {
    if (typeof body === 'function') { cb = body; body = undefined; } else if (typeof encoding === 'function') { cb = encoding; encoding = undefined; }
    if (typeof body === 'string' && typeof encoding === 'string' && encoding !== 'utf8' && encoding !== 'utf-8') body = Buffer.from(body, encoding);
    checkBody(body, 'body');
    if (cb !== undefined && typeof cb !== 'function') throw typeError('callback', 'a function', cb);
    if (this.writableEnded) throw nsvError(C.NSV_ESTATE, 'the response was already sent');
    if (!this._stream) checkStatus(this.statusCode);
    if (cb) process.nextTick(cb);
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

  // True once the client left: end(), write() and sendFile() are then
  // no-ops (a late reply is not an error), write() returns false.
  get closed() { return this.destroyed; }

  _closed() {
    if (this.destroyed) return;
    this.destroyed = true;
    if (this._sse) this._sse._gone();
    if (!this._closeEmitted) { this._closeEmitted = true; this._emit('close'); }
  }

  // The client ended its side while this answer is still to come.
  _hangupSeen() {
    if (this._closeEmitted) return;
    this._closeEmitted = true;
    this._emit('close');
  }
}

module.exports = { Response, checkBody, checkStatus, headerBlock };
