'use strict';
// The server: routes, the drain loop and the per-event dispatch.
const EventEmitter = require('events');
const { load } = require('./native');
const { constants: C } = require('./abi');
const { check, nsvError, typeError } = require('./errors');
const { PollBuffers, connId, W } = require('./events');
const { ReplyBatch } = require('./replies');
const { Request } = require('./request');
const { Response, checkBody } = require('./response');
const { WebSocket } = require('./websocket');
const { Pump } = require('./pump');

const EMPTY = Buffer.alloc(0);
// Options handled by the binding; every other key is a library option, given
// in camelCase (maxBody -> NSV_OPT_MAX_BODY via nsv_opt_by_name).
const OWN = new Set(['backend', 'library', 'threads', 'maxEvents', 'arenaSize', 'handler']);

function toBuf(x) {
  if (x == null) return EMPTY;
  return typeof x === 'string' ? Buffer.from(x, 'utf8') : x;
}

function snake(name) { return name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`); }

class Server extends EventEmitter {
  constructor(opts = {}, handler) {
    super();
    if (typeof opts === 'function') { handler = opts; opts = {}; }
    if (opts === null || typeof opts !== 'object') throw typeError('options', 'an object', opts);
    if (handler !== undefined && typeof handler !== 'function') throw typeError('handler', 'a function', handler);
    const n = (this._n = load(opts));
    this._f = n.fns;
    this.backend = n.name;
    const threads = opts.threads === undefined ? 1 : opts.threads;
    if (!Number.isInteger(threads) || threads < 0) throw typeError('threads', 'a non-negative integer', threads);
    // A sharded server keeps the socket I/O off the main thread; a library
    // without sharding falls back to a single loop run by nsv_poll(0).
    let h = this._f.nsv_server_new_sharded(threads);
    this.sharded = !n.isNull(h);
    if (!this.sharded) h = this._f.nsv_server_new();
    if (n.isNull(h)) throw nsvError(C.NSV_ENOMEM, 'cannot create a server');
    this._h = h;
    this._bufs = new PollBuffers(opts.maxEvents || 256, opts.arenaSize || 1 << 20);
    this._batch = new ReplyBatch();
    this._routes = []; // route id -> { handler, ws }
    this._wsRoutes = new Map(); // pattern -> route id
    this._pending = new Map(); // conn -> Response still being answered
    this._sockets = new Map(); // conn -> WebSocket
    this._live = []; // requests of the current batch
    this._inDrain = false;
    this._flushQueued = false;
    this._flushTick = () => { this._flushQueued = false; this._flush(); };
    this._pump = null;
    this._closing = null;
    this._closed = false;
    this._fallback = handler || opts.handler || null;
    this.port = null;
    for (const key of Object.keys(opts)) if (!OWN.has(key)) this.setOption(key, opts[key]);
    this._setAuto404();
  }

  // ---- configuration ----

  setOption(name, value) {
    if (typeof name !== 'string') throw typeError('option name', 'a string', name);
    if (typeof value !== 'number' && typeof value !== 'bigint' && typeof value !== 'boolean') throw typeError(`option ${name}`, 'a number', value);
    const nb = Buffer.from(snake(name));
    const id = check(this._f.nsv_opt_by_name(nb, nb.length), `unknown option '${name}'`);
    check(this._f.nsv_set_int(this._h, id, typeof value === 'boolean' ? +value : value), () => `option ${name}=${value}`);
    return this;
  }

  getOption(name) {
    const nb = Buffer.from(snake(String(name)));
    const id = check(this._f.nsv_opt_by_name(nb, nb.length), `unknown option '${name}'`);
    return Number(check(this._f.nsv_get_int(this._h, id)));
  }

  // Unmatched requests get a 404 from C unless the app has a fallback handler.
  _setAuto404() { this._f.nsv_set_int(this._h, C.NSV_OPT_AUTO_404, this._fallback ? 0 : 1); }

  // The handler for requests no route matched (like http.createServer's).
  fallback(handler) {
    if (typeof handler !== 'function') throw typeError('handler', 'a function', handler);
    this._fallback = handler;
    this._setAuto404();
    return this;
  }

  route(method, pattern, handler, flags = 0, ws = null) {
    if (typeof method !== 'string') throw typeError('method', 'a string', method);
    if (typeof pattern !== 'string') throw typeError('pattern', 'a string', pattern);
    if (!ws && typeof handler !== 'function') throw typeError('handler', 'a function', handler);
    const id = this._routes.length;
    const m = Buffer.from(method.toUpperCase()), p = Buffer.from(pattern);
    check(this._f.nsv_route(this._h, m, m.length, p, p.length, id, flags), () => `${method} ${pattern}`);
    this._routes.push({ handler, ws });
    return this;
  }

  get(p, h) { return this.route('GET', p, h); }
  post(p, h) { return this.route('POST', p, h); }
  put(p, h) { return this.route('PUT', p, h); }
  delete(p, h) { return this.route('DELETE', p, h); }
  patch(p, h) { return this.route('PATCH', p, h); }
  all(p, h) { return this.route('ALL', p, h); }

  // WebSocket endpoint: handlers { open(ws, req), message(ws, data, isBinary),
  // close(ws, code, reason), ping(ws, data), pong(ws, data) }. The upgrade is
  // done by the library.
  ws(pattern, handlers = {}) {
    if (handlers === null || typeof handlers !== 'object') throw typeError('handlers', 'an object', handlers);
    this._need('nsv_ws_send');
    const id = this._routes.length;
    this.route('GET', pattern, null, C.NSV_ROUTE_WEBSOCKET, handlers);
    this._wsRoutes.set(pattern, id);
    return this;
  }

  _need(fn) {
    if (!this._n.has(fn)) throw nsvError(C.NSV_ENOTSUP, `${fn} is not in ${this._n.path}`);
  }

  // ---- lifecycle ----

  // Resolves with the bound port. host: IPv4/IPv6 literal or 'localhost'.
  listen(port = 0, host = '0.0.0.0') {
    return new Promise((resolve) => {
      if (!Number.isInteger(port) || port < 0 || port > 65535) throw typeError('port', 'an integer 0..65535', port);
      if (typeof host !== 'string') throw typeError('host', 'a string', host);
      if (this._closing || this._closed) throw nsvError(C.NSV_ESTOPPED, 'server is closed');
      const url = Buffer.from(`http://${host.includes(':') && host[0] !== '[' ? `[${host}]` : host}:${port}`);
      const lid = this._f.nsv_listen(this._h, url, url.length);
      check(lid, () => `${url} (${this._f.nsv_last_error_detail(this._h)})`);
      this.port = check(this._f.nsv_listener_port(this._h, lid));
      if (!this._pump) {
        this._pump = new Pump(this._n, this._h, this.sharded, () => this._drain(), (e) => this.emit('error', e));
        this._pump.start();
      }
      this.emit('listening', this.port);
      resolve(this.port);
    });
  }

  address() { return this.port === null ? null : { port: this.port }; }

  // Graceful stop: listeners close, replies in flight go out, idle
  // connections close; resolves when the library reports the drain done.
  close(timeoutMs = 5000) {
    if (this._closing) return this._closing;
    this._closing = new Promise((resolve) => {
      this._resolveClose = resolve;
    });
    this._flush();
    check(this._f.nsv_drain_start(this._h, timeoutMs));
    if (!this._pump) { this._finish(); return this._closing; }
    this._pump.pollEvery(10);
    return this._closing;
  }

  _finish() {
    if (this._closed) return;
    this._closed = true;
    if (this._pump) this._pump.stop();
    for (const res of this._pending.values()) res._closed();
    this._pending.clear();
    for (const ws of this._sockets.values()) ws.readyState = WebSocket.CLOSED;
    this._sockets.clear();
    this._f.nsv_server_free(this._h);
    this._h = null;
    this.emit('close');
    if (this._resolveClose) this._resolveClose();
  }

  // ---- the drain loop ----

  _poll() {
    const b = this._bufs;
    for (;;) {
      const n = this._f.nsv_poll(this._h, b.events, b.max, b.arena, b.arena.length, 0);
      if (n !== C.NSV_ENOBUFS) return n;
      b.growArena(Number(this._f.nsv_poll_need(this._h)) + 4096);
    }
  }

  // One wake-up: a few batches synchronously, then yield to the event loop.
  _drain() {
    if (this._closed) return false;
    this._inDrain = true;
    try {
      for (let round = 0; round < 4; round++) {
        const n = this._poll();
        if (n === 0) return false;
        if (n < 0) {
          if (n === C.NSV_ESTOPPED) { this._finish(); return false; }
          this.emit('error', nsvError(n, 'nsv_poll'));
          return false;
        }
        this._dispatch(n);
        this._endBatch();
      }
      return true;
    } finally {
      this._inDrain = false;
    }
  }

  _dispatch(n) {
    const { u32, i32, arena } = this._bufs;
    const stride = this._bufs.base(1);
    for (let i = 0, w = 0; i < n; i++, w += stride) {
      const type = u32[w + W.type];
      const conn = connId(u32, w);
      switch (type) {
        case C.NSV_EV_REQUEST: this._onRequest(new Request(arena, u32, w, conn)); break;
        case C.NSV_EV_CLOSE: this._onClose(conn); break;
        case C.NSV_EV_WS_OPEN: this._onWsOpen(new Request(arena, u32, w, conn)); break;
        case C.NSV_EV_WS_MESSAGE: this._onWs(conn, 'message', u32, i32, w, arena); break;
        case C.NSV_EV_WS_CLOSE: this._onWs(conn, 'close', u32, i32, w, arena); break;
        case C.NSV_EV_WS_PING: this._onWs(conn, 'ping', u32, i32, w, arena); break;
        case C.NSV_EV_WS_PONG: this._onWs(conn, 'pong', u32, i32, w, arena); break;
        case C.NSV_EV_ERROR: {
          const o = u32[w + W.body_off];
          const msg = arena.latin1Slice(o, o + u32[w + W.body_len]);
          if (this.listenerCount('clientError')) this.emit('clientError', nsvError(i32[w + W.code], msg), conn);
          break;
        }
        case C.NSV_EV_HANGUP: { // the client ended its side while its request is with us
          const res = this._pending.get(conn);
          if (res !== undefined) this._hangup(res);
          break;
        }
        case C.NSV_EV_TCP_WRITABLE: { // a streamed reply's output crossed a water mark
          const res = this._pending.get(conn);
          if (res !== undefined) {
            // A throwing 'drain' listener must not cost the rest of the batch.
            try { res._writable(i32[w + W.code] !== 0); } catch (e) { this._failed(e, res.req, res); }
          }
          break;
        }
        default: break; // raw TCP events: not used by this binding
      }
    }
  }

  // After each batch: flush replies, then make every request of the batch
  // independent of the arena the next poll will overwrite.
  _endBatch() {
    this._flush();
    const live = this._live;
    for (let i = 0; i < live.length; i++) {
      const req = live[i];
      if (req._res && !req._res.writableEnded) req._detach();
      else req._release();
    }
    live.length = 0;
  }

  _onRequest(req) {
    const route = req.route >= 0 ? this._routes[req.route] : null;
    const handler = route ? route.handler : this._fallback;
    const res = new Response(this, req.conn, req);
    req._res = res;
    this._live.push(req);
    if (!handler) { res.statusCode = 404; res.json({ error: 'not found' }); return; }
    this._run(handler, req, res);
    // Delivered after the client ended its side: 'close' once the handler
    // had its chance to listen for it.
    if (req.flags & C.NSV_EVF_EOF) process.nextTick(() => this._hangup(res));
  }

  _hangup(res) {
    try { res.req._hangup(); } catch (e) { this._failed(e, res.req, res); }
  }

  _run(handler, req, res) {
    let r;
    try {
      r = handler(req, res);
    } catch (e) {
      this._failed(e, req, res);
      return;
    }
    if (r !== undefined && r !== res) {
      if (r !== null && typeof r.then === 'function') {
        r.then((v) => { if (v !== undefined && v !== res && !res.writableEnded) this._endWith(res, v); },
          (e) => this._failed(e, req, res));
      } else if (!res.writableEnded) {
        this._endWith(res, r);
      }
    }
    if (!res.writableEnded) this._pending.set(req.conn, res);
  }

  // A handler's return value becomes the body: strings and bytes as they are,
  // anything else as JSON.
  _endWith(res, v) {
    try {
      if (typeof v === 'string' || v instanceof Uint8Array || v === null) res.end(v);
      else res.json(v);
    } catch (e) {
      this._failed(e, res.req, res);
    }
  }

  _failed(err, req, res) {
    if (this.listenerCount('handlerError')) this.emit('handlerError', err, req, res);
    else console.error('nanosrv: handler failed:', err);
    if (res.writableEnded || res.destroyed) return;
    if (res.headersSent) { // mid-stream: the only honest signal left is closing
      res.writableEnded = true;
      this._pending.delete(res.conn);
      this._closeConn(res.conn);
      return;
    }
    res._h = null;
    res.statusCode = 500;
    res.json({ error: 'internal server error' });
  }

  _onClose(conn) {
    const res = this._pending.get(conn);
    if (res !== undefined) {
      this._pending.delete(conn);
      try { res._closed(); } catch (e) { this._failed(e, res.req, res); }
      this._hangup(res);
    }
    const ws = this._sockets.get(conn);
    if (ws !== undefined) this._wsGone(ws, 1006, '');
  }

  _onWsOpen(req) {
    const route = this._routes[req.route];
    this._live.push(req);
    if (!route || !route.ws) return;
    const ws = new WebSocket(this, req.conn, req.route, req);
    this._sockets.set(req.conn, ws);
    if (route.ws.open) this._wsCall(route.ws.open, ws, req);
  }

  _onWs(conn, kind, u32, i32, w, arena) {
    const ws = this._sockets.get(conn);
    if (ws === undefined) return;
    const h = this._routes[ws.route].ws;
    const o = u32[w + W.body_off], l = u32[w + W.body_len], code = i32[w + W.code];
    if (kind === 'close') {
      this._wsGone(ws, code, arena.toString('utf8', o, o + l));
      return;
    }
    const fn = h[kind];
    if (!fn) return;
    if (kind === 'message' && code === C.NSV_WS_TEXT) this._wsCall(fn, ws, arena.toString('utf8', o, o + l), false);
    else this._wsCall(fn, ws, Buffer.from(arena.subarray(o, o + l)), true);
  }

  _wsGone(ws, code, reason) {
    this._sockets.delete(ws.id);
    ws.readyState = WebSocket.CLOSED;
    const h = this._routes[ws.route].ws;
    if (h.close) this._wsCall(h.close, ws, code, reason);
  }

  _wsCall(fn, ...args) {
    try {
      const r = fn(...args);
      if (r && typeof r.then === 'function') r.then(null, (e) => this._wsFailed(e, args[0]));
    } catch (e) {
      this._wsFailed(e, args[0]);
    }
  }

  _wsFailed(err, ws) {
    if (this.listenerCount('handlerError')) this.emit('handlerError', err, null, null);
    else console.error('nanosrv: websocket handler failed:', err);
    if (ws && ws.readyState === WebSocket.OPEN) { try { ws.close(1011, 'internal error'); } catch { /* gone */ } }
  }

  // ---- replies ----

  _queueReply(res, body) {
    this._pending.delete(res.conn);
    this._batch.add(res.conn, res.statusCode, res._head(), body);
    if (!this._inDrain && !this._flushQueued) {
      // Replies finished by async handlers in the same tick share one batch.
      this._flushQueued = true;
      process.nextTick(this._flushTick);
    }
  }

  _flush() {
    const b = this._batch;
    if (b.count === 0 || this._h === null) { b.reset(); return; }
    const ok = this._f.nsv_reply_batch(this._h, b.buf, b.len);
    if (ok !== b.count) this._retryBatch(b);
    b.reset();
  }

  // Some record was refused: replay the batch one reply at a time to find it.
  // Replies already accepted answer NSV_ESTATE and closed connections
  // NSV_ESTALE: both are fine. A connection over its output limit is closed
  // rather than left waiting for an answer that will never come.
  _retryBatch(b) {
    for (const r of b.records()) {
      const e = this._f.nsv_reply(this._h, r.conn, r.status, r.head, r.head.length, r.body, r.body.length);
      if (e === C.NSV_EAGAIN || e === C.NSV_EINVAL) this._f.nsv_close(this._h, r.conn);
    }
  }

  // Direct calls keep their order with batched replies by flushing first.
  _direct() {
    if (this._batch.count) this._flush();
    if (this._h === null) throw nsvError(C.NSV_ESTOPPED, 'server is closed');
  }

  _replyStart(res) {
    this._direct();
    const head = Buffer.from(res._head(), 'latin1');
    this._pending.set(res.conn, res);
    check(this._f.nsv_reply_start(this._h, res.conn, res.statusCode, head, head.length), 'nsv_reply_start');
  }

  _sendChunk(res, chunk) {
    this._direct();
    const b = toBuf(chunk);
    check(this._f.nsv_send_chunk(this._h, res.conn, b, b.length), 'nsv_send_chunk');
  }

  _replyEnd(res) {
    this._direct();
    this._pending.delete(res.conn);
    check(this._f.nsv_reply_end(this._h, res.conn), 'nsv_reply_end');
  }

  _closeConn(conn) {
    this._direct();
    return check(this._f.nsv_close(this._h, conn));
  }

  _wsSend(id, opcode, data) {
    this._direct();
    const b = toBuf(data);
    check(this._f.nsv_ws_send(this._h, id, opcode, b, b.length), 'nsv_ws_send');
  }

  _wsClose(id, code, reason) {
    this._direct();
    const b = toBuf(reason);
    check(this._f.nsv_ws_close(this._h, id, code, b, b.length), 'nsv_ws_close');
  }

  _queued(id) {
    this._direct();
    return Number(check(this._f.nsv_conn_queued(this._h, id)));
  }

  // ---- by-id API (for code that keeps connection ids) ----

  // Complete reply by connection id; throws NSV_ESTALE, NSV_ESTATE, ...
  reply(conn, status, headers, body) {
    if (typeof conn !== 'number' && typeof conn !== 'bigint') throw typeError('conn', 'a number or bigint', conn);
    if (!Number.isInteger(status)) throw typeError('status', 'an integer', status);
    checkBody(body, 'body');
    let head = '';
    if (headers) for (const k of Object.keys(headers)) head += `${k}: ${headers[k]}\r\n`;
    this._direct();
    const hb = Buffer.from(head, 'latin1'), bb = toBuf(body);
    check(this._f.nsv_reply(this._h, conn, status, hb, hb.length, bb, bb.length), () => `reply to ${conn}`);
    const res = this._pending.get(conn);
    if (res) { this._pending.delete(conn); res.writableEnded = res.headersSent = true; }
  }

  closeConnection(conn) {
    if (typeof conn !== 'number' && typeof conn !== 'bigint') throw typeError('conn', 'a number or bigint', conn);
    this._closeConn(conn);
  }

  // Sends to every open WebSocket of a ws() endpoint (in C, one call).
  broadcast(pattern, data) {
    this._need('nsv_ws_broadcast');
    const route = this._wsRoutes.get(pattern);
    if (route === undefined) throw nsvError(C.NSV_ENOTFOUND, `no WebSocket endpoint '${pattern}'`);
    checkBody(data, 'data');
    const opcode = typeof data === 'string' ? C.NSV_WS_TEXT : C.NSV_WS_BINARY;
    this._direct();
    const b = toBuf(data);
    return check(this._f.nsv_ws_broadcast(this._h, route, opcode, b, b.length), 'nsv_ws_broadcast');
  }

  get connections() { return this._pending.size + this._sockets.size; }
}

module.exports = { Server };
