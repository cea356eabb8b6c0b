'use strict';
// serve({ fetch }): fetch-style serving (WHATWG Request in, Response out) as
// Deno.serve and Bun.serve do it, so Hono, itty-router and other fetch-style
// apps run on the library. Built on the native server (lib/server.js; a
// quick wrk run of a Hono app answered a third more requests per second
// than the same adapter on nanosrv/http): the request body is the library's
// streamed body (a Readable whose backpressure pauses the socket) seen as a
// ReadableStream; a Response body that is all there at once (string,
// ArrayBuffer, Blob, FormData, ...) goes out in one reply with its
// Content-Length, any other is read chunk by chunk and written with the
// library's backpressure ('drain').
const { Readable } = require('stream');
const { Server: Core } = require('./server');

const PENDING = Symbol('pending');
// A body read at once up to this size goes out in one reply; past it, or
// when the next chunk is not there yet, the answer is streamed.
const ONE_REPLY_MAX = 1 << 20;
const EMPTY = Buffer.alloc(0);
const MAX_BODY = 2 ** 31; // the largest the library takes (2 GiB), as nanosrv/http
const CLOSE_WAIT_MS = 2147483647; // close() waits for the requests in flight
const { STATUS_CODES } = require('http');

function nextTurn() {
  let id;
  const p = new Promise((resolve) => { id = setImmediate(resolve, PENDING); });
  p.cancel = () => clearImmediate(id);
  return p;
}

function isResponse(r) {
  return r instanceof Response || (r !== null && typeof r === 'object' && typeof r.status === 'number'
    && r.headers && typeof r.headers.get === 'function' && 'body' in r);
}

function formatHost(h) { return h.includes(':') && h[0] !== '[' ? `[${h}]` : h; }

// The Request the app gets: url absolute (scheme from TLS, host from Host),
// headers as sent, the body streamed. Its signal is this server's own
// (aborted when the client leaves), made on first read: a Request given a
// signal costs twice as much to make, and most apps never look at it.
function makeRequest(req, scheme, fallbackHost, state) {
  const block = req._str(req._ho, req._hl);
  const headers = new Headers();
  let host = fallbackHost;
  let te = false, cl = null;
  for (let i = 0; i < block.length;) {
    let eol = block.indexOf('\r\n', i);
    if (eol < 0) eol = block.length;
    const colon = block.indexOf(':', i);
    if (colon > i && colon < eol) {
      const name = block.slice(i, colon);
      const value = block.slice(colon + 1, eol).trim();
      try { headers.append(name, value); } catch { /* a name or value Headers refuses is left out */ }
      const n = name.length;
      if (n === 4 && name.toLowerCase() === 'host') host = value;
      else if (n === 14 && name.toLowerCase() === 'content-length') cl = value;
      else if (n === 17 && name.toLowerCase() === 'transfer-encoding') te = true;
    }
    i = eol + 2;
  }
  const u = req.url;
  const url = u[0] === '/' ? `${scheme}://${host}${u}` : u.includes('://') ? u : `${scheme}://${host}/${u}`;
  const m = req.method;
  const init = { method: m, headers };
  if (m !== 'GET' && m !== 'HEAD' && (te || (cl !== null && cl !== '0'))) {
    init.body = req.streaming ? Readable.toWeb(req) : req.body;
    init.duplex = 'half';
  }
  const request = new Request(url, init);
  Object.defineProperty(request, 'signal', { configurable: true, enumerable: true, get: () => state.signal() });
  return request;
}

// The client-left signal of one request, made when asked for.
class AbortState {
  constructor() { this.ac = null; this.gone = false; }
  signal() {
    if (this.ac === null) { this.ac = new AbortController(); if (this.gone) this.ac.abort(); }
    return this.ac.signal;
  }
  abort() { this.gone = true; if (this.ac !== null) this.ac.abort(); }
}

// [name, value] pairs of a Response's headers (Set-Cookie kept apart).
function headerPairs(headers) {
  const pairs = [];
  for (const kv of headers) pairs.push(kv);
  return pairs;
}

function waitDrain(res) {
  return new Promise((resolve) => {
    const done = () => { res.off('drain', done); res.off('close', done); resolve(); };
    res.on('drain', done);
    res.on('close', done);
  });
}

function concat(chunks, n) {
  if (chunks.length === 1) return chunks[0];
  const out = Buffer.allocUnsafe(n);
  let o = 0;
  for (const c of chunks) { out.set(c, o); o += c.length; }
  return out;
}

function toBytes(v) {
  if (v instanceof Uint8Array) return v;
  if (typeof v === 'string') return Buffer.from(v);
  if (ArrayBuffer.isView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  if (v instanceof ArrayBuffer) return new Uint8Array(v);
  throw new TypeError('a Response body stream gave a chunk that is not bytes');
}

// The head of the answer on the native response: headers grouped by name
// (a repeated one, Set-Cookie, as an array), a reason phrase of the app's
// through nsv_set_reason.
function writeHead(core, res, status, reason, pairs, drop) {
  res.statusCode = status;
  const seen = new Map();
  for (let i = 0; i < pairs.length; i++) {
    const [k, v] = pairs[i];
    if (drop && (k === 'content-length' || k === 'transfer-encoding')) continue;
    const prev = seen.get(k);
    if (prev === undefined) seen.set(k, v);
    else if (Array.isArray(prev)) prev.push(v);
    else seen.set(k, [prev, v]);
  }
  for (const [k, v] of seen) res.setHeader(k, v);
  if (reason !== undefined && !res.destroyed && core._n.has('nsv_set_reason')) {
    core._direct();
    const b = Buffer.from(reason, 'latin1');
    core._f.nsv_set_reason(core._h, res.conn, b, b.length);
  }
}

// Writes a Response to the native response.
async function writeResponse(core, res, response, method) {
  const status = response.status;
  let reason = response.statusText || undefined;
  if (reason !== undefined && reason === STATUS_CODES[status]) reason = undefined;
  const pairs = headerPairs(response.headers);
  const body = response.body;
  const bodiless = status === 204 || status === 304 || (status >= 100 && status < 200);
  if (body === null || bodiless || method === 'HEAD') {
    if (body !== null) body.cancel().catch(() => {});
    writeHead(core, res, status, reason, pairs, status === 204 || status < 200);
    res.end();
    return;
  }
  const reader = body.getReader();
  // What the body has right now, before the event loop turns: all of it
  // (a string, a buffer, a Blob) is one reply; else the answer streams.
  const chunks = [];
  let n = 0;
  let done = false;
  let next = reader.read();
  while (n <= ONE_REPLY_MAX) {
    const turn = nextTurn();
    const r = await Promise.race([next, turn]);
    turn.cancel();
    if (r === PENDING) break;
    next = null;
    if (r.done) { done = true; break; }
    const b = toBytes(r.value);
    chunks.push(b);
    n += b.length;
    next = reader.read();
  }
  if (res.destroyed) { reader.cancel().catch(() => {}); return; }
  if (done) {
    writeHead(core, res, status, reason, pairs, false);
    res.end(n ? concat(chunks, n) : undefined);
    return;
  }
  writeHead(core, res, status, reason, pairs, false);
  const onClose = () => { reader.cancel().catch(() => {}); };
  res.once('close', onClose);
  try {
    let ok = res.write(EMPTY); // the head goes out now
    for (const c of chunks) ok = res.write(c);
    for (;;) {
      if (res.destroyed) return;
      if (!ok) await waitDrain(res);
      if (res.destroyed) return;
      const r = await (next || reader.read());
      next = null;
      if (r.done) break;
      if (res.destroyed) return;
      ok = res.write(toBytes(r.value));
    }
    if (!res.destroyed) res.end();
  } finally {
    res.off('close', onClose);
  }
}

function defaultOnError(err) {
  console.error('nanosrv serve: the fetch handler failed:', err);
  return new Response('Internal Server Error', { status: 500, headers: { 'content-type': 'text/plain; charset=utf-8' } });
}

function pem(x) { return Array.isArray(x) ? x.map(String).join('\n') : x == null ? x : String(x); }

// serve(fetch) | serve(options[, fetch]); see README ("fetch-style serving").
function serve(options, handler) {
  if (typeof options === 'function') { handler = options; options = {}; }
  options = options || {};
  const fetch = handler || options.fetch;
  if (typeof fetch !== 'function') throw new TypeError('serve: options.fetch must be a function (request) => Response');
  const self = handler ? undefined : options;
  const tls = options.tls || (options.cert && options.key ? { cert: options.cert, key: options.key, ca: options.ca, passphrase: options.passphrase } : null);
  const scheme = tls ? 'https' : 'http';
  const onError = typeof options.onError === 'function' ? options.onError : null;
  const coreOpts = { streamBody: true, maxBody: MAX_BODY };
  for (const k of ['backend', 'library', 'threads', 'accessLog', 'accessLogStream', 'accessLogQueue', 'maxConns', 'shed', 'reuseport',
    'http2']) {
    if (options[k] !== undefined) coreOpts[k] = options[k];
  }
  if (tls) {
    if (tls.cert) coreOpts.tlsCertPem = pem(tls.cert);
    if (tls.key) coreOpts.tlsKeyPem = pem(tls.key);
    if (tls.passphrase) coreOpts.tlsKeyPassword = tls.passphrase;
    if (tls.ca) coreOpts.tlsCaPem = pem(tls.ca);
    if (tls.requestCert) coreOpts.tlsVerifyClient = tls.rejectUnauthorized === false ? 1 : 2;
  }
  if (options.nanosrv) Object.assign(coreOpts, options.nanosrv);
  const core = new Core(coreOpts);
  core.on('error', (e) => { console.error('nanosrv serve:', e); });
  core.on('handlerError', (e) => { console.error('nanosrv serve:', e); });
  let fallbackHost = 'localhost';
  let server;

  // Mid-stream the only honest signal left is closing the connection.
  function cut(res) {
    res.writableEnded = true;
    core._pending.delete(res.conn);
    core.closeConnection(res.conn);
  }

  async function failed(err, request, res) {
    let r = null;
    if (onError) {
      try { r = await onError(err, request); } catch (e) { console.error('nanosrv serve: onError failed:', e); }
    }
    if (!isResponse(r)) r = defaultOnError(err);
    if (res.destroyed || res.writableEnded) return;
    if (res.headersSent) { cut(res); return; }
    res._h = null; // what the failed answer had set
    await writeResponse(core, res, r, request ? request.method : 'GET');
  }

  core.fallback((req, res) => {
    const state = new AbortState();
    res.on('close', () => { if (!res.writableEnded) state.abort(); });
    let request = null;
    const info = {
      remoteAddr: { hostname: req.remoteAddress, port: req.remotePort, transport: 'tcp' },
      proxy: req.proxy, // the front's fields behind a PROXY protocol front, else null
      server, incoming: req, outgoing: res,
    };
    const method = req.method;
    return (async () => {
      try {
        request = makeRequest(req, scheme, fallbackHost, state);
        const r = await fetch.call(self, request, info);
        if (!isResponse(r)) throw new TypeError(`the fetch handler returned ${r === null ? 'null' : typeof r}, not a Response`);
        await writeResponse(core, res, r, method);
      } catch (err) {
        if (res.destroyed) return;
        await failed(err, request, res);
      }
    })().catch((err) => {
      console.error('nanosrv serve: could not answer:', err);
      if (!res.destroyed && !res.writableEnded) cut(res);
    });
  });

  const port = options.port === undefined ? 3000 : Number(options.port);
  const hostname = options.hostname || '0.0.0.0';
  let p;
  try {
    // throws (NSV_EADDRINUSE, a bad address list...) here, as Deno.serve does
    p = core._listenNow(options.fd !== undefined ? `${scheme}://0.0.0.0:0` : `${scheme}://${formatHost(hostname)}:${port}`, undefined, options);
  } catch (e) {
    core.close(0);
    throw e;
  }
  const shown = hostname === '0.0.0.0' || hostname === '::' ? 'localhost' : hostname;
  fallbackHost = `${formatHost(shown)}:${p}`;

  let resolveFinished;
  const finished = new Promise((resolve) => { resolveFinished = resolve; });
  let closing = null;
  function close(force) {
    if (!closing) closing = core.close(force ? 0 : CLOSE_WAIT_MS).then(() => resolveFinished());
    return closing;
  }

  server = {
    port: p,
    hostname,
    address: { address: hostname, family: hostname.includes(':') ? 'IPv6' : 'IPv4', port: p },
    url: new URL(`${scheme}://${fallbackHost}/`),
    // Stops taking connections; resolves once the requests in flight are answered.
    close: () => close(false),
    // As Bun's: stop(true) also ends the connections at once.
    stop: (force) => close(!!force),
    // As Deno's: resolves when the server has closed.
    finished,
    ref() { core.ref(); return server; },
    unref() { core.unref(); return server; },
    core,
    [Symbol.asyncDispose]: () => close(false),
  };

  if (options.signal) {
    if (options.signal.aborted) close(false);
    else options.signal.addEventListener('abort', () => close(false), { once: true });
  }
  core.once('listening', () => {
    if (typeof options.onListen === 'function') options.onListen({ hostname: server.hostname, port: server.port });
  });
  return server;
}

module.exports = { serve };
