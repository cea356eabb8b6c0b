'use strict';
// A request read from one event record. Offsets are copied from the record;
// strings are made from the arena only when the handler reads them. The
// arena is reused by the next poll, so after the batch a request either owns
// a private copy of its bytes (still being answered) or is released.
const { W } = require('./events');
const { nsvError } = require('./errors');
const C = require('./abi').constants;

class Request {
  constructor(arena, u32, w, conn) {
    this._a = arena;
    this.conn = conn;
    this.flags = u32[w + W.flags];
    this.route = u32[w + W.route] | 0;
    this._mo = u32[w + W.method_off]; this._ml = u32[w + W.method_len];
    this._po = u32[w + W.path_off]; this._pl = u32[w + W.path_len];
    this._qo = u32[w + W.query_off]; this._ql = u32[w + W.query_len];
    this._ho = u32[w + W.headers_off]; this._hl = u32[w + W.headers_len];
    this._ao = u32[w + W.params_off]; this._al = u32[w + W.params_len];
    this._bo = u32[w + W.body_off]; this._bl = u32[w + W.body_len];
    this._eo = u32[w + W.peer_off]; this._el = u32[w + W.peer_len];
    this.remotePort = u32[w + W.peer_port];
    this.closed = false; // the client ended its side or left ('close' emitted)
    this._on = null;
    this._method = this._path = this._query = this._headers = this._params = this._body = undefined;
  }

  _arena() {
    if (this._a === null) {
      throw nsvError(C.NSV_ESTATE, 'request data was released after the reply; read it before answering or keep a copy');
    }
    return this._a;
  }

  _str(off, len) { return this._arena().latin1Slice(off, off + len); }

  get method() { return this._method === undefined ? (this._method = this._str(this._mo, this._ml)) : this._method; }
  // Raw request path, not percent-decoded (as sent).
  get path() { return this._path === undefined ? (this._path = this._str(this._po, this._pl)) : this._path; }
  // Query string after '?', without it ('' when absent).
  get query() { return this._query === undefined ? (this._query = this._str(this._qo, this._ql)) : this._query; }
  // Like http.IncomingMessage#url: path plus '?query'.
  get url() { return this._ql ? `${this.path}?${this.query}` : this.path; }
  get httpVersion() { return this.flags & C.NSV_EVF_HTTP10 ? '1.0' : '1.1'; }
  get remoteAddress() { return this._str(this._eo, this._el); }
  get bodyLength() { return this._bl; }

  // Header names lower-cased, repeated headers joined with ', ' (set-cookie
  // kept as an array), as in http.IncomingMessage#headers.
  get headers() {
    if (this._headers !== undefined) return this._headers;
    const h = {};
    const block = this._str(this._ho, this._hl);
    for (let i = 0; i < block.length;) {
      let eol = block.indexOf('\r\n', i);
      if (eol < 0) eol = block.length;
      const colon = block.indexOf(':', i);
      if (colon > i && colon < eol) {
        const name = block.slice(i, colon).toLowerCase();
        const value = block.slice(colon + 1, eol).trim();
        const prev = h[name];
        if (prev === undefined) h[name] = name === 'set-cookie' ? [value] : value;
        else if (Array.isArray(prev)) prev.push(value);
        else h[name] = `${prev}, ${value}`;
      }
      i = eol + 2;
    }
    return (this._headers = h);
  }

  header(name) { return this.headers[String(name).toLowerCase()]; }

  // Route parameters ("/users/:id" -> { id }), percent-decoded.
  get params() {
    if (this._params !== undefined) return this._params;
    const p = {};
    const parts = this._arena().toString('utf8', this._ao, this._ao + this._al).split('\0');
    for (let i = 0; i + 1 < parts.length; i += 2) p[parts[i]] = decodeParam(parts[i + 1]);
    return (this._params = p);
  }

  // Request body as a Buffer the handler may keep (a copy of the arena bytes).
  get body() {
    if (this._body !== undefined) return this._body;
    const b = Buffer.allocUnsafe(this._bl);
    this._arena().copy(b, 0, this._bo, this._bo + this._bl);
    return (this._body = b);
  }

  text() { return this._body !== undefined ? this._body.toString('utf8') : this._arena().toString('utf8', this._bo, this._bo + this._bl); }
  json() { return JSON.parse(this.text()); }

  // Gives the request its own copy of its bytes: its handler has not answered
  // yet and the arena is about to be overwritten by the next poll.
  _detach() {
    const a = this._a;
    if (a === null) return;
    const pairs = ['_mo', '_ml', '_po', '_pl', '_qo', '_ql', '_ho', '_hl', '_ao', '_al', '_bo', '_bl', '_eo', '_el'];
    let lo = Infinity, hi = 0;
    for (let i = 0; i < pairs.length; i += 2) {
      const o = this[pairs[i]], l = this[pairs[i + 1]];
      if (l) { if (o < lo) lo = o; if (o + l > hi) hi = o + l; }
    }
    if (hi === 0) { this._a = Buffer.alloc(0); return; }
    this._a = Buffer.from(a.subarray(lo, hi));
    for (let i = 0; i < pairs.length; i += 2) if (this[pairs[i + 1]]) this[pairs[i]] -= lo;
  }

  _release() { this._a = null; }

  // Minimal emitter: 'close' once the client has ended its side while the
  // request is with the handler (NSV_EV_HANGUP), had ended it before the
  // request was delivered (NSV_EVF_EOF), or the connection closed. The
  // response may still be sent: a half-closed client gets it.
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

  _hangup() {
    if (this.closed) return;
    this.closed = true;
    const l = this._on && this._on.close;
    if (l) for (const fn of l.slice()) fn();
  }
}

function decodeParam(v) {
  if (v.indexOf('%') < 0) return v;
  try { return decodeURIComponent(v); } catch { return v; }
}

module.exports = { Request };
