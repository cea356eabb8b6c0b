'use strict';
// fetch() on the library's HTTP/1.1 client (nsv_http_request), on the loop
// of a nanosrv server: the request runs on the server's workers and its
// events come out of the same poll as the server's own, so a handler can
// call an upstream without a second event loop. The argument handling is
// the platform's: input and init go through the global Request (URL,
// method, headers, body types and their Content-Type), and the answer is
// the global Response, whose body is a ReadableStream fed by HTTP_BODY
// events with backpressure (nsv_http_pause while its queue is full).
const { normId, isNeg, headersOf, fetchFailed, causeOf, abortReason, C } = require('./head');
const { W } = require('../events');
const { nsvError } = require('../errors');

const REDIRECT_STATUS = new Set([301, 302, 303, 307, 308]);
// Statuses whose Response must have a null body (and HEAD answers).
const NULL_BODY = new Set([101, 204, 205, 304]);
const MAX_REDIRECTS = 20; // as undici and the Fetch standard
// Headers the library writes itself (it frames every request once).
// Given to fetch they are left out; content-length declares the length of
// a streamed body instead of chunking it.
const LIBRARY_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'te', 'upgrade', 'keep-alive']);
// Dropped when a redirect leaves the origin, as undici does.
const CREDENTIAL_HEADERS = new Set(['authorization', 'cookie', 'proxy-authorization']);
const BODY_HIGH_WATER = 65536; // bytes the response stream queues before the socket is paused
// Bytes of a streamed request body sent to a sharded server's worker
// between two turns of the event loop (see _upload).
const UPLOAD_TURN = 262144;

function isStaticBody(b) {
  return typeof b === 'string' || b instanceof ArrayBuffer || ArrayBuffer.isView(b)
    || b instanceof URLSearchParams || b instanceof Blob || b instanceof FormData
    || (typeof SharedArrayBuffer === 'function' && b instanceof SharedArrayBuffer);
}

function nextTurn() { return new Promise((resolve) => setImmediate(resolve)); }

// Everything one hop needs, from the caller's input and init.
async function specOf(input, init) {
  const hasBody = init != null && init.body != null;
  const streamed = hasBody && !isStaticBody(init.body);
  // duplex 'half' is what Node's fetch asks for with a stream; it is the
  // only mode there is, so it is added when missing.
  const request = new Request(input, streamed && init.duplex === undefined ? { ...init, duplex: 'half' } : init);
  const spec = {
    method: request.method,
    url: request.url.replace(/#.*$/s, ''),
    headers: [...request.headers],
    body: null, // a Buffer sent in one piece with its Content-Length
    stream: null, // a ReadableStream sent as it is read
    // The caller's own signal: the Request's copy follows it only while
    // undici's internal controller lives (a weak reference), so an abort
    // after a garbage collection would be lost on it.
    signal: init != null && init.signal != null ? init.signal : input instanceof Request ? input.signal : request.signal,
    redirect: request.redirect,
    hops: 0,
  };
  if (spec.signal.aborted) throw abortReason(spec.signal);
  if (request.body !== null) {
    // A static init.body is read whole here (its bytes and type are known);
    // a stream, an async iterable or a Request's own body is streamed.
    if (hasBody && !streamed) spec.body = Buffer.from(await request.arrayBuffer());
    else spec.stream = request.body;
  }
  return spec;
}

// The header lines and the declared length of a streamed body.
function headerLines(spec) {
  let lines = '';
  let declared = -1;
  let accept = false;
  for (const [name, value] of spec.headers) {
    if (name === 'content-length') {
      if (spec.stream && /^\d+$/.test(value)) declared = Number(value);
      continue;
    }
    if (LIBRARY_HEADERS.has(name)) continue;
    if (name === 'accept') accept = true;
    lines += `${name}: ${value}\r\n`;
  }
  if (!accept) lines += 'accept: */*\r\n';
  return { lines, declared };
}

// One request on the wire: from nsv_http_request to its final event.
class Exchange {
  constructor(srv, spec, resolve, reject) {
    this._srv = srv;
    this.spec = spec;
    this.id = null;
    this._resolve = resolve;
    this._reject = reject;
    this._head = false; // the HTTP_RESPONSE came
    this._done = false; // its final event came, or it was cancelled
    this._ctl = null; // the response body's stream controller
    this._paused = false;
    this._writable = null; // resolves a streamed upload waiting for TCP_WRITABLE
    this._reader = null;
    this._onAbort = () => this._abort();
  }

  start() {
    const srv = this._srv;
    const { spec } = this;
    // Aborted between the call and now (the body was being read, or a
    // redirect was being followed).
    if (spec.signal.aborted) throw abortReason(spec.signal);
    const { lines, declared } = headerLines(spec);
    const mb = Buffer.from(spec.method, 'latin1');
    const ub = Buffer.from(spec.url, 'utf8');
    const hb = Buffer.from(lines, 'latin1');
    const body = spec.body && spec.body.length ? spec.body : null;
    const flags = spec.stream ? C.NSV_HTTP_STREAM_BODY : 0;
    srv._direct();
    const id = normId(srv._f.nsv_http_request(srv._h, mb, mb.length, ub, ub.length, hb, hb.length,
      body, body ? body.length : 0, spec.stream ? declared : -1, flags));
    if (isNeg(id)) {
      const errno = Number(id);
      const detail = srv._detail();
      // A refused argument is the caller's mistake, said at once; the rest
      // are failures to fetch.
      if (errno === C.NSV_EURL || errno === C.NSV_EINVAL) throw fetchFailed(causeOf(errno, detail), `fetch: ${detail || 'invalid request'}`);
      throw fetchFailed(causeOf(errno, detail));
    }
    this.id = id;
    srv._clientAdd(id, this);
    spec.signal.addEventListener('abort', this._onAbort, { once: true });
    if (spec.stream) this._upload(spec.stream);
  }

  // ---- events (lib/server.js dispatch) ----

  _evResponse(u32, i32, w, arena) {
    if (this._done) return;
    this._head = true;
    const status = i32[w + W.code];
    const ro = u32[w + W.path_off], ho = u32[w + W.headers_off];
    const statusText = arena.latin1Slice(ro, ro + u32[w + W.path_len]);
    const headers = headersOf(arena.latin1Slice(ho, ho + u32[w + W.headers_len]));
    const nullBody = NULL_BODY.has(status) || this.spec.method === 'HEAD';
    let stream = null;
    if (!nullBody) {
      stream = new ReadableStream({
        start: (c) => { this._ctl = c; },
        pull: () => { if (this._paused) this._pause(false); },
        cancel: () => this._cancel(),
      }, { highWaterMark: this._srv._bodyHighWater || BODY_HIGH_WATER, size: (c) => c.byteLength });
    }
    // Response takes 200..599; a 101 (the library ends the request after
    // reporting it) is given its real status afterwards.
    let res;
    try {
      res = new Response(stream, { status: status >= 200 && status <= 599 ? status : 200, statusText, headers });
    } catch (e) { // a reason phrase Response refuses
      res = new Response(stream, { status: status >= 200 && status <= 599 ? status : 200, headers });
    }
    if (res.status !== status) Object.defineProperty(res, 'status', { value: status, enumerable: true });
    Object.defineProperty(res, 'url', { value: this.spec.url, enumerable: true });
    if (this.spec.hops > 0) Object.defineProperty(res, 'redirected', { value: true, enumerable: true });
    this._resolve({ res, ex: this });
  }

  _evBody(buf, eof) {
    if (this._done) return;
    const c = this._ctl;
    if (c !== null && buf.length) c.enqueue(buf);
    if (eof) {
      this._end();
      if (c !== null) c.close();
    } else if (c !== null && c.desiredSize <= 0 && !this._paused) {
      this._pause(true);
    }
  }

  _evError(err) {
    if (this._done) return;
    this._end();
    this._stopUpload(err);
    if (!this._head) this._reject(fetchFailed(err));
    else if (this._ctl !== null) this._ctl.error(fetchFailed(err, 'terminated'));
  }

  // TCP_WRITABLE with code 1: a streamed body that met NSV_EAGAIN may go on.
  _evWritable(ok) {
    if (ok && this._writable) { const w = this._writable; this._writable = null; w(); }
  }

  // The server was freed with the request in flight.
  _evGone() { this._evError(nsvError(C.NSV_ESTOPPED, 'the server closed')); }

  // ---- the caller's side ----

  _end() {
    this._done = true;
    this._srv._clientDelete(this.id);
    this.spec.signal.removeEventListener('abort', this._onAbort);
    if (this._writable) { const w = this._writable; this._writable = null; w(); }
  }

  _pause(on) {
    this._paused = on;
    if (!this._done && this._srv._h !== null) this._srv._f.nsv_http_pause(this._srv._h, this.id, on ? 1 : 0);
  }

  // Drops the request: no more events carry its id.
  cancel() {
    if (this._done) return;
    this._end();
    this._stopUpload(null);
    if (this._srv._h !== null) { this._srv._direct(); this._srv._f.nsv_http_cancel(this._srv._h, this.id); }
  }

  _cancel() { this.cancel(); } // the response body was cancelled by its reader

  _abort() {
    if (this._done) return;
    const reason = abortReason(this.spec.signal);
    this.cancel();
    if (!this._head) this._reject(reason);
    else if (this._ctl !== null) { try { this._ctl.error(reason); } catch { /* closed already */ } }
  }

  // ---- a streamed request body ----

  _stopUpload(reason) {
    const r = this._reader;
    if (r === null) return;
    this._reader = null;
    r.cancel(reason === null ? undefined : reason).catch(() => {});
  }

  // Reads the body stream and sends each chunk. A single-loop server says
  // NSV_EAGAIN when maxOutput bytes wait and TCP_WRITABLE when they have
  // gone: the next chunk is read only then. On a sharded server the chunks
  // are queued to the request's worker: the loop yields a turn every
  // UPLOAD_TURN bytes so the poll runs in between (an early answer or an
  // error stops the upload).
  async _upload(stream) {
    const srv = this._srv;
    let reader;
    try {
      reader = stream.getReader();
    } catch (e) {
      this._failUpload(e);
      return;
    }
    this._reader = reader;
    let sinceTurn = 0;
    try {
      for (;;) {
        const { value, done } = await reader.read();
        // The request ended (answered in full, failed, cancelled): the
        // rest of the source is not wanted.
        if (this._done || this._reader === null) { this._stopUpload(null); return; }
        if (done) break;
        if (!(value instanceof Uint8Array)) throw new TypeError('fetch: a request body stream must give Uint8Array chunks');
        const buf = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
        for (;;) {
          if (srv._h === null) return;
          srv._direct();
          const r = srv._f.nsv_http_request_body(srv._h, this.id, buf, buf.length);
          if (r === 0) break;
          if (r === C.NSV_EAGAIN) {
            await new Promise((resolve) => { this._writable = resolve; });
            if (this._done) return;
            continue;
          }
          // The request ended (its final event is on the way) or answered
          // already: the rest of the body is not wanted.
          if (r === C.NSV_ESTALE || (r === C.NSV_ESTATE && this._head)) { this._stopUpload(null); return; }
          throw nsvError(r, srv._detail());
        }
        sinceTurn += buf.length;
        if (srv.sharded && sinceTurn >= UPLOAD_TURN) {
          sinceTurn = 0;
          await nextTurn();
          if (this._done) return;
        }
      }
      this._reader = null;
      if (srv._h === null || this._done) return;
      srv._direct();
      const r = srv._f.nsv_http_request_end(srv._h, this.id);
      if (r < 0 && r !== C.NSV_ESTALE && !(r === C.NSV_ESTATE && this._head)) throw nsvError(r, srv._detail());
    } catch (e) {
      this._failUpload(e);
    }
  }

  _failUpload(err) {
    if (this._done) return;
    this._reader = null;
    this.cancel();
    if (!this._head) this._reject(fetchFailed(err));
    else if (this._ctl !== null) { try { this._ctl.error(fetchFailed(err, 'terminated')); } catch { /* closed */ } }
  }
}

function hop(srv, spec) {
  return new Promise((resolve, reject) => new Exchange(srv, spec, resolve, reject).start());
}

// The next hop of a redirect, or null when the answer is not one to follow.
function redirectSpec(spec, res) {
  if (!REDIRECT_STATUS.has(res.status)) return null;
  const loc = res.headers.get('location');
  if (loc === null) return null;
  let next;
  try {
    next = new URL(loc, spec.url);
  } catch (e) {
    throw fetchFailed(e);
  }
  if (next.protocol !== 'http:' && next.protocol !== 'https:') throw fetchFailed(new Error(`redirect to ${next.protocol} URL`));
  if (spec.hops >= MAX_REDIRECTS) throw fetchFailed(new Error('redirect count exceeded'));
  const toGet = res.status === 303 ? spec.method !== 'HEAD' : (res.status === 301 || res.status === 302) && spec.method === 'POST';
  if (!toGet && spec.stream) throw fetchFailed(new Error('cannot follow a redirect with a streamed request body'));
  const cross = new URL(spec.url).origin !== next.origin;
  let headers = spec.headers;
  if (toGet) headers = headers.filter(([n]) => !n.startsWith('content-'));
  if (cross) headers = headers.filter(([n]) => !CREDENTIAL_HEADERS.has(n));
  return {
    ...spec,
    method: toGet ? 'GET' : spec.method,
    url: next.href.replace(/#.*$/s, ''),
    headers,
    body: toGet ? null : spec.body,
    stream: toGet ? null : spec.stream,
    hops: spec.hops + 1,
  };
}

// fetch(input, init) on server srv. redirect: 'follow' (default, at most
// 20 hops), 'manual' (the 3xx answer as it is) or 'error'.
async function fetchOn(srv, input, init) {
  let spec = await specOf(input, init);
  for (;;) {
    if (srv._closing || srv._closed) throw fetchFailed(causeOf(C.NSV_ESTOPPED, 'the server is closed'));
    srv._startPump();
    const { res, ex } = await hop(srv, spec);
    if (spec.redirect === 'manual' || !REDIRECT_STATUS.has(res.status) || !res.headers.has('location')) return res;
    ex.cancel(); // its body is not read: the connection is closed, not pooled
    if (spec.redirect === 'error') throw fetchFailed(new Error(`unexpected redirect (${res.status}) to ${res.headers.get('location')}`));
    spec = redirectSpec(spec, res);
  }
}

module.exports = { fetchOn };
