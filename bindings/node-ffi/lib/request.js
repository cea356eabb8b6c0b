'use strict';
// A request read from one event record. Offsets are copied from the record;
// strings are made from the arena only when the handler reads them. The
// arena is reused by the next poll, so after the batch a request either owns
// a private copy of its bytes (still being answered) or is released.
//
// The request is a stream.Readable of its body. A whole-body request pushes
// its body on the first read (nothing is copied unless it is read). A
// streamed one (NSV_EVF_STREAM_BODY) is fed by the BODY events; when its
// buffer passes the high water mark the server stops reading the socket
// (nsv_pause_read) and resumes on _read, so memory stays bounded however
// large the body and TCP slows the client.
const { Readable } = require('stream');
const { W } = require('./events');
const { nsvError } = require('./errors');
const forms = require('./forms');
const C = require('./abi').constants;

// autoDestroy off: 'close' keeps its meaning "the client ended its side or
// left" (the server destroys the stream then), not "the body was read".
const STREAM_OPTS = { autoDestroy: false, highWaterMark: 64 * 1024 };

// "CN=alice, O=Example" -> { CN: 'alice', O: 'Example' } (a repeated
// attribute keeps its last value, as far as getPeerCertificate goes).
function parseSubject(text) {
  const o = {};
  for (const part of text.split(/,\s*/)) {
    const i = part.indexOf('=');
    if (i > 0) o[part.slice(0, i).trim()] = part.slice(i + 1);
  }
  return o;
}

// The front's fields of a PROXY protocol connection (block fields 2..8):
// front (the load balancer's address), frontPort, dst and dstPort (where
// the client connected on the front), ssl (the TLS version the client spoke
// to the front), authority (its SNI) and alpn; '' where the header said nothing.
function proxyInfo(parts) {
  const s = (i) => parts[i] || '';
  const n = (i) => (parts[i] ? Number(parts[i]) : 0);
  return { front: s(2), frontPort: n(3), dst: s(4), dstPort: n(5), ssl: s(6), authority: s(7), alpn: s(8) };
}

class Request extends Readable {
  constructor(arena, u32, w, conn, srv, streamOpts) {
    super(streamOpts || STREAM_OPTS);
    this._srv = srv;
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
    // TLS block "sni\0subject\0", extended by the front's fields when the
    // connection came through a PROXY protocol front: small, read now (the
    // arena is reused).
    this.tls = null;
    this.proxy = null;
    const f = this.flags;
    if (f & (C.NSV_EVF_TLS | C.NSV_EVF_PROXY)) {
      const to = u32[w + W.tls_off], tl = u32[w + W.tls_len];
      const parts = tl ? arena.toString('utf8', to, to + tl).split('\0') : [];
      if (f & C.NSV_EVF_TLS) this.tls = { servername: parts[0] || '', subject: parts[1] || '', authorized: !!parts[1] };
      if (f & C.NSV_EVF_PROXY) this.proxy = proxyInfo(parts);
    }
    this._socket = undefined;
    this.streaming = (this.flags & C.NSV_EVF_STREAM_BODY) !== 0;
    this.complete = !this.streaming; // the whole body has arrived
    this.aborted = false; // the client left before the body was complete
    this._pausedC = false; // nsv_pause_read(conn, 1) is in effect
    this._pushed = false;
    this._method = this._path = this._qs = this._query = this._headers = this._params = this._body = undefined;
    this._cookies = undefined;
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
  // Raw query string after '?', without it ('' when absent).
  get querystring() { return this._qs === undefined ? (this._qs = this._str(this._qo, this._ql)) : this._qs; }
  // Decoded query as Express's req.query: { name: value }, a repeated name
  // gives an array of its values in order (nsv_form_parse).
  get query() {
    if (this._query !== undefined) return this._query;
    const list = this._ql ? forms.pairs(this._srv._f, 'nsv_form_parse', this._arena().subarray(this._qo, this._qo + this._ql)) : [];
    return (this._query = forms.toObject(list));
  }
  // The query as [name, value] pairs in order, repeats kept.
  get queryPairs() {
    return this._ql ? forms.pairs(this._srv._f, 'nsv_form_parse', this._arena().subarray(this._qo, this._qo + this._ql)) : [];
  }
  // Cookies of the Cookie header(s) as { name: value } (nsv_cookie_parse).
  get cookies() {
    if (this._cookies !== undefined) return this._cookies;
    let h = this.headers.cookie;
    if (Array.isArray(h)) h = h.join('; ');
    // Several Cookie lines were joined with ', ' by the header getter.
    const src = h ? Buffer.from(h.indexOf(', ') >= 0 ? h.split(', ').join('; ') : h, 'latin1') : null;
    return (this._cookies = src ? forms.cookieObject(forms.pairs(this._srv._f, 'nsv_cookie_parse', src)) : Object.create(null));
  }
  // Like http.IncomingMessage#url: path plus '?query'.
  get url() { return this._ql ? `${this.path}?${this.querystring}` : this.path; }
  // '2.0' on an HTTP/2 stream, as node:http2's compatibility API says.
  get httpVersion() { return this.flags & C.NSV_EVF_HTTP2 ? '2.0' : this.flags & C.NSV_EVF_HTTP10 ? '1.0' : '1.1'; }
  get remoteAddress() { return this._str(this._eo, this._el); }
  // 'https' on a TLS connection (as Express's req.protocol), else 'http'.
  get protocol() { return this.tls ? 'https' : 'http'; }
  get secure() { return this.tls !== null; }
  // The part of http.IncomingMessage#socket that describes the peer:
  // encrypted, servername (SNI), authorized (a client certificate was
  // verified against tlsCaFile/tlsCaPem), getPeerCertificate() with
  // { subject: { CN, O, ... }, subjectString } or {} when none.
  get socket() {
    if (this._socket !== undefined) return this._socket;
    const tls = this.tls;
    const sock = {
      encrypted: tls !== null,
      remoteAddress: this._el ? this.remoteAddress : undefined,
      remotePort: this.remotePort,
      proxy: this.proxy,
      servername: tls ? tls.servername || false : undefined,
      authorized: tls ? tls.authorized : undefined,
      getPeerCertificate: () => (tls && tls.subject ? { subject: parseSubject(tls.subject), subjectString: tls.subject } : {}),
    };
    return (this._socket = sock);
  }
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
  // A streamed body is read from the stream instead (or with buffer()).
  get body() {
    if (this._body !== undefined) return this._body;
    if (this.streaming) throw nsvError(C.NSV_ESTATE, 'the body of this request is streamed: read it from the request (a Readable) or await req.buffer()');
    const b = Buffer.allocUnsafe(this._bl);
    this._arena().copy(b, 0, this._bo, this._bo + this._bl);
    return (this._body = b);
  }

  text() {
    if (this._body !== undefined || this.streaming) return this.body.toString('utf8');
    return this._arena().toString('utf8', this._bo, this._bo + this._bl);
  }
  json() { return JSON.parse(this.text()); }
  // A urlencoded body as an object (as query).
  form() { return forms.toObject(forms.pairs(this._srv._f, 'nsv_form_parse', this.streaming ? this.body : this._arena().subarray(this._bo, this._bo + this._bl))); }

  // The whole body as one Buffer, streamed or not (memory: the body size,
  // bounded by maxBody). Streamed bodies are read to the end first.
  async buffer() {
    if (!this.streaming) return this.body;
    if (this._body !== undefined) return this._body;
    const parts = [];
    for await (const c of this.iterator({ destroyOnReturn: false })) parts.push(c);
    return (this._body = Buffer.concat(parts));
  }

  // multipart/form-data part by part; see lib/multipart.js.
  multipart(opts) { return require('./multipart').parts(this, opts); }

  // ---- the stream ----

  _read() {
    if (!this.streaming) {
      if (this._pushed) return;
      this._pushed = true;
      let b;
      try { b = this.body; } catch (e) { this.destroy(e); return; }
      if (b.length) this.push(b);
      this.push(null);
      return;
    }
    if (this._pausedC) { // the consumer caught up: read the socket again
      this._pausedC = false;
      this._srv._pauseRead(this.conn, false);
    }
  }

  // A BODY event: bytes is a private copy; eof on the last piece.
  _bodyPiece(bytes, eof) {
    if (this.destroyed) return;
    const more = bytes.length ? this.push(bytes) : true;
    if (eof) {
      this.complete = true;
      this.push(null);
    } else if (!more && !this._pausedC) {
      this._pausedC = true;
      this._srv._pauseRead(this.conn, true);
    }
  }

  // The body will not come (early complete reply, a limit, an error).
  _fail(err) {
    if (this.destroyed || this.complete) return;
    if (err && err.errno === C.NSV_ECLOSED) this._abort();
    else this.destroy(err || undefined);
  }

  _abort() {
    if (this.aborted) return;
    this.aborted = true;
    const e = new Error('aborted');
    e.code = 'ECONNRESET';
    this.destroy(e);
    // After destroy: stream.finished() takes 'aborted' on a stream that
    // has an `aborted` field as a premature close unless the error is set.
    this.emit('aborted');
  }

  // Like IncomingMessage: 'error' only reaches listeners (stream consumers
  // such as pipeline and for await have one), never an unhandled throw.
  _destroy(err, cb) { cb(err && this.listenerCount('error') ? err : null); }

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

  // 'close' (destroy) once the client has ended its side while the request
  // is with the handler (NSV_EV_HANGUP), had ended it before the request
  // was delivered (NSV_EVF_EOF), or the connection closed. The response may
  // still be sent: a half-closed client gets it. A body cut short is an
  // 'aborted' and an ECONNRESET error; a complete body still buffered is
  // left to be read, and 'close' follows its 'end'.
  _hangup() {
    if (this.destroyed) return;
    if (!this.complete) { this._abort(); return; }
    if (this.streaming && !this.readableEnded && this.readableLength) {
      this.once('end', () => this.destroy());
      return;
    }
    this.destroy();
  }
}

function decodeParam(v) {
  if (v.indexOf('%') < 0) return v;
  try { return decodeURIComponent(v); } catch { return v; }
}

module.exports = { Request, parseSubject, proxyInfo };
