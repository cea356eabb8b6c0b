'use strict';
// The server: routes, the drain loop and the per-event dispatch.
const EventEmitter = require('events');
const { load } = require('./native');
const { constants: C } = require('./abi');
const { check, nsvError, typeError } = require('./errors');
const { PollBuffers, connId, W } = require('./events');
const { ReplyBatch } = require('./replies');
const { Request } = require('./request');
const { Response, checkBody, checkStatus, headerBlock } = require('./response');
const crypto = require('crypto');
const { WebSocket } = require('./websocket');
const { Pump } = require('./pump');
const { fetchOn } = require('./client/fetch');
const { boundWebSocket } = require('./client/websocket');
const listener = require('./listener');
const metrics = require('./metrics');
const accessLog = require('./access_log');

const EMPTY = Buffer.alloc(0);
// String option ids start here (enum nsv_str_option).
const STR_OPTION_MIN = C.NSV_OPT_TLS_CERT_FILE;
// What the library answered when it ended a streamed body.
const STATUS_OF = { [C.NSV_ETOOBIG]: 413, [C.NSV_ETIMEDOUT]: 408, [C.NSV_EPARSE]: 400 };
// Options handled by the binding; every other key is a library option, given
// in camelCase (maxBody -> NSV_OPT_MAX_BODY via nsv_opt_by_name).
// The listener options given here are the defaults of every listen().
const OWN = new Set(['backend', 'library', 'threads', 'sharded', 'maxEvents', 'arenaSize', 'handler', 'bodyHighWaterMark',
  'accessLog', 'accessLogStream', 'accessLogQueue', ...listener.KEYS]);
// Records kept per worker for nsv_access_take when the access log is on.
const ACCESS_QUEUE = 4096;
// How often records are taken when no event wakes the server (a sharded
// server's workers write them after the replies the Node thread sent).
const ACCESS_EVERY_MS = 200;
// URL schemes listen() accepts as a string.
const SCHEMES = /^(https?|wss?|tcp|tls):\/\//;

// Flags of nsv_serve_dir / nsv_reply_file by option name.
const STATIC_FLAGS = {
  list: C.NSV_STATIC_LIST, symlinks: C.NSV_STATIC_SYMLINKS, precompressed: C.NSV_STATIC_PRECOMPRESSED,
  fallthrough: C.NSV_STATIC_FALLTHROUGH, dotfiles: C.NSV_STATIC_DOTFILES,
};

function staticFlags(opts) {
  let flags = opts.flags === undefined ? 0 : opts.flags;
  if (!Number.isInteger(flags) || flags < 0) throw typeError('flags', 'a non-negative integer', flags);
  for (const k of Object.keys(STATIC_FLAGS)) if (opts[k]) flags |= STATIC_FLAGS[k];
  return flags;
}

function toBuf(x) {
  if (x == null) return EMPTY;
  return typeof x === 'string' ? Buffer.from(x, 'utf8') : x;
}

// Servers not closed when the process exits are freed on 'exit': their
// worker threads would otherwise run on while the process tears down (the
// FFI unloads the library under them: a crash at exit). The shared client
// server of lib/client is one such server.
const live = new Set();
let exitHook = false;

function track(srv) {
  live.add(srv);
  if (exitHook) return;
  exitHook = true;
  process.once('exit', () => {
    for (const s of live) {
      if (s._h === null) continue;
      if (s._pump) s._pump.stop();
      s._f.nsv_server_free(s._h);
      s._h = null;
    }
    live.clear();
  });
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
    // sharded: false asks for that single loop (the library's own
    // backpressure answers, NSV_EAGAIN, reach the caller there).
    if (opts.sharded !== undefined && typeof opts.sharded !== 'boolean') throw typeError('sharded', 'a boolean', opts.sharded);
    let h = opts.sharded === false ? null : this._f.nsv_server_new_sharded(threads);
    this.sharded = h !== null && !n.isNull(h);
    if (!this.sharded) h = this._f.nsv_server_new();
    if (n.isNull(h)) throw nsvError(C.NSV_ENOMEM, 'cannot create a server');
    this._h = h;
    track(this);
    this._bufs = new PollBuffers(opts.maxEvents || 256, opts.arenaSize || 1 << 20);
    this._batch = new ReplyBatch();
    this._routes = []; // route id -> { handler, ws }
    this._wsRoutes = new Map(); // pattern -> route id
    this._pending = new Map(); // conn -> Response still being answered
    this._bodies = new Map(); // conn -> Request whose streamed body is still arriving
    const hwm = opts.bodyHighWaterMark;
    if (hwm !== undefined && (!Number.isInteger(hwm) || hwm < 1)) throw typeError('bodyHighWaterMark', 'a positive integer', hwm);
    this._streamOpts = hwm === undefined ? null : { autoDestroy: false, highWaterMark: hwm };
    this._bodyHighWater = hwm; // also the queue of a fetch response body (lib/client/fetch.js)
    // Outbound requests and WebSockets by id (lib/client): objects with
    // _ev* methods the dispatch calls.
    this._clients = new Map();
    this._autoRef = false; // a loop kept alive only while a client is in flight (the shared one)
    this._WebSocket = null;
    this._sockets = new Map(); // conn -> WebSocket
    this._tcp = new Map(); // conn -> raw TCP endpoint (lib/net.js Socket)
    this._tcpAccept = null; // (conn, info) -> endpoint, for tcp:// and tls:// listeners
    // Payload of the wakeups the binding sends itself (write acknowledgements),
    // unguessable so that an application's own wakeup is never taken for one.
    this._ackMark = crypto.randomBytes(16);
    this._timers = new Map(); // timer id -> callback
    this._live = []; // requests of the current batch
    this._inDrain = false;
    this._flushQueued = false;
    this._flushTick = () => { this._flushQueued = false; this._flush(); };
    this._pump = null;
    this._closing = null;
    this._closed = false;
    this._fallback = handler || opts.handler || null;
    this.port = null;
    this._lopts = listener.pick(opts);
    listener.validate(this._lopts);
    for (const key of Object.keys(opts)) if (!OWN.has(key)) this.setOption(key, opts[key]);
    this._setAuto404();
    this._access = null; // { write, buf, timer } once the access log is on
    this._accessSetup(opts);
    this.on('newListener', (ev) => { if (ev === 'access') this._accessEnable(); });
  }

  // ---- configuration ----

  // Integer options take numbers or booleans; string options (tlsCertFile,
  // tlsKeyPem, tlsKeyPassword, tlsCaFile, tlsClientCaPem, gzipTypes, ...)
  // take a string or Buffer (null or '' clears one).
  setOption(name, value) {
    if (typeof name !== 'string') throw typeError('option name', 'a string', name);
    const nb = Buffer.from(snake(name));
    const id = check(this._f.nsv_opt_by_name(nb, nb.length), `unknown option '${name}'`);
    if (id >= STR_OPTION_MIN) {
      if (value != null && typeof value !== 'string' && !(value instanceof Uint8Array)) throw typeError(`option ${name}`, 'a string or Buffer', value);
      const vb = value == null ? EMPTY : toBuf(value);
      // The value is never echoed: it may be a key or a password.
      check(this._f.nsv_set_str(this._h, id, vb, vb.length), () => `option ${name}: ${this._detail()}`);
      return this;
    }
    if (typeof value !== 'number' && typeof value !== 'bigint' && typeof value !== 'boolean') throw typeError(`option ${name}`, 'a number', value);
    check(this._f.nsv_set_int(this._h, id, typeof value === 'boolean' ? +value : value), () => `option ${name}=${value}`);
    this._hw = this._mo = undefined;
    return this;
  }

  // NSV_OPT_TCP_HIGH_WATER and NSV_OPT_MAX_OUTPUT, cached (streams pace
  // themselves with them).
  _highWater() {
    if (this._hw === undefined) this._hw = Number(this._f.nsv_get_int(this._h, C.NSV_OPT_TCP_HIGH_WATER)) || 65536;
    return this._hw;
  }

  _maxOutput() {
    if (this._mo === undefined) this._mo = Number(this._f.nsv_get_int(this._h, C.NSV_OPT_MAX_OUTPUT)) || 4194304;
    return this._mo;
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

  // opts: { streamBody: true } delivers the request as soon as its head is
  // parsed and streams the body (req is a Readable fed as it arrives); a
  // number is taken as NSV_ROUTE_* flags.
  route(method, pattern, handler, opts = 0, ws = null) {
    if (typeof method !== 'string') throw typeError('method', 'a string', method);
    let flags = 0;
    if (typeof opts === 'number') flags = opts;
    else if (opts !== null && typeof opts === 'object') { if (opts.streamBody) flags |= C.NSV_ROUTE_STREAM_BODY; }
    else throw typeError('route options', 'an object', opts);
    if (typeof pattern !== 'string') throw typeError('pattern', 'a string', pattern);
    if (!ws && typeof handler !== 'function') throw typeError('handler', 'a function', handler);
    const id = this._routes.length;
    const m = Buffer.from(method.toUpperCase()), p = Buffer.from(pattern);
    check(this._f.nsv_route(this._h, m, m.length, p, p.length, id, flags), () => `${method} ${pattern}`);
    this._routes.push({ handler, ws });
    return this;
  }

  get(p, h, o) { return this.route('GET', p, h, o); }
  post(p, h, o) { return this.route('POST', p, h, o); }
  put(p, h, o) { return this.route('PUT', p, h, o); }
  delete(p, h, o) { return this.route('DELETE', p, h, o); }
  patch(p, h, o) { return this.route('PATCH', p, h, o); }
  all(p, h, o) { return this.route('ALL', p, h, o); }

  // Serves the directory dir under the URL prefix ('/static/') in C, with
  // no event for the app. opts: cacheControl, and the flags by name: list,
  // symlinks, precompressed, fallthrough (a miss goes on to the routes),
  // dotfiles (or flags: NSV_STATIC_* bits). Before listen().
  static(prefix, dir, opts = {}) {
    if (typeof prefix !== 'string') throw typeError('prefix', 'a string', prefix);
    if (typeof dir !== 'string') throw typeError('dir', 'a string', dir);
    if (opts === null || typeof opts !== 'object') throw typeError('options', 'an object', opts);
    const cc = opts.cacheControl === undefined ? '' : opts.cacheControl;
    if (typeof cc !== 'string') throw typeError('cacheControl', 'a string', cc);
    const pb = Buffer.from(prefix), db = Buffer.from(dir), cb = Buffer.from(cc, 'latin1');
    return check(this._f.nsv_serve_dir(this._h, pb, pb.length, db, db.length, cb, cb.length, staticFlags(opts)),
      () => `static ${prefix} ${dir}: ${this._detail()}`);
  }

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

  // Resolves with the bound port. listen(port, host): http on host (IPv4/IPv6
  // literal or 'localhost'); listen(url): 'http://', 'https://', 'ws://',
  // 'wss://', 'tcp://' or 'tls://' host:port (TLS needs tlsCertFile/tlsKeyFile
  // or their Pem forms first). A sharded server's workers start on the
  // turn after the first listen(): listen() calls made in the same turn
  // all count, later ones are refused (NSV_ESTATE).
  // Node's forms work too: listen(port, cb), listen(port, host[, backlog],
  // cb), listen({ port, host }[, cb]); cb runs on 'listening' (emitted on
  // a later tick). A failure (EADDRINUSE: err.code 'NSV_EADDRINUSE') rejects
  // and is emitted as 'error' when the server has a listener for it or a
  // cb was given (the promise is then taken as handled).
  // Listener options (proxyProtocol, proxyTimeoutMs, proxyFrom, allow,
  // deny) go in the object form or after the port or URL:
  // listen({ port, host, allow: ['10.0.0.0/8'] }), listen(url, { proxyProtocol: 'v2' });
  // listen({ fd[, url] }) adopts a listening socket (nsv_listen_fd).
  listen(...args) {
    let cb = null;
    if (args.length && typeof args[args.length - 1] === 'function') cb = args.pop();
    let [port = 0, host = '0.0.0.0', lopts] = args;
    if (port !== null && typeof port === 'object') {
      lopts = port;
      host = port.host || '0.0.0.0';
      port = port.url !== undefined ? port.url : port.port === undefined ? 0 : port.port;
    } else if (host !== null && typeof host === 'object') {
      lopts = host; // listen(port | url, options)
      host = '0.0.0.0';
    } else if (typeof host !== 'string') {
      host = '0.0.0.0'; // listen(port, backlog)
    }
    if (lopts === null || typeof lopts !== 'object') lopts = undefined; // listen(port, host, backlog)
    if (cb) this.once('listening', () => cb.call(this));
    const p = new Promise((resolve) => resolve(this._listenNow(port, host, lopts)));
    p.catch((e) => {
      if (cb || this.listenerCount('error')) this.emit('error', e);
    });
    return p;
  }

  _listenNow(port, host, lopts) {
    const own = listener.pick(lopts);
    const lset = listener.validate({ ...this._lopts, ...own });
    const fd = lopts ? lopts.fd : undefined;
    if (fd !== undefined && (!Number.isInteger(fd) || fd < 0)) throw typeError('fd', 'a file descriptor (integer >= 0)', fd);
    let url;
    if (fd !== undefined && typeof port !== 'string') {
      url = 'http://0.0.0.0:0'; // the socket's own address counts; port 0 skips the check
    } else if (typeof port === 'string') {
      if (!SCHEMES.test(port)) throw typeError('url', "'http(s)://', 'ws(s)://', 'tcp://' or 'tls://' host:port", port);
      url = port;
    } else {
      if (!Number.isInteger(port) || port < 0 || port > 65535) throw typeError('port', 'an integer 0..65535', port);
      if (typeof host !== 'string') throw typeError('host', 'a string', host);
      url = `http://${host.includes(':') && host[0] !== '[' ? `[${host}]` : host}:${port}`;
    }
    if (this._closing || this._closed) throw nsvError(C.NSV_ESTOPPED, 'server is closed');
    const ub = Buffer.from(url);
    const lid = fd === undefined ? this._f.nsv_listen(this._h, ub, ub.length) : this._f.nsv_listen_fd(this._h, ub, ub.length, fd);
    check(lid, () => `${fd === undefined ? url : `fd ${fd} as ${url}`} (${this._detail()})`);
    listener.apply(this, lid, lset);
    const p = check(this._f.nsv_listener_port(this._h, lid));
    if (this.port === null) this.port = p;
    this._startPump();
    process.nextTick(() => this.emit('listening', p)); // as node's: never within listen()
    return p;
  }

  // Adopts the sockets passed by systemd socket activation (or a supervisor
  // speaking its protocol: LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES), each with
  // the listener options of opts (url: the scheme, default 'http://').
  // Resolves with [{ fd, name, port }], empty when none were passed. The
  // variables are removed from the environment (child processes must not
  // take the sockets for theirs).
  listenInherited(opts = {}) {
    if (opts === null || typeof opts !== 'object') throw typeError('options', 'an object', opts);
    return new Promise((resolve) => {
      const fds = inheritedFds(this._n);
      const out = fds.map(({ fd, name }) => {
        const p = this._listenNow(opts.url || 'http://0.0.0.0:0', '0.0.0.0', { ...opts, fd });
        return { fd, name, port: p };
      });
      resolve(out);
    });
  }

  // The pump (and with it a sharded server's workers) starts on the next
  // turn, so listeners opened in the same turn are all taken.
  _startPump() {
    if (this._pump) return;
    this._pump = new Pump(this._n, this._h, this.sharded, () => this._drain(), (e) => this.emit('error', e));
    this._accessTimer();
    if (this._unref) this._pump.setRef(false);
    setImmediate(() => { if (!this._closed) this._pump.start(); });
  }

  // Keeps the process alive (default) or not while the server runs.
  ref() { this._unref = false; if (this._pump) this._pump.setRef(true); return this; }
  unref() { this._unref = true; if (this._pump) this._pump.setRef(false); return this; }

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
    const clients = [...this._clients.values()];
    this._clients.clear();
    for (const c of clients) { try { c._evGone(); } catch (e) { process.nextTick(() => { throw e; }); } }
    const tcp = [...this._tcp.values()];
    this._tcp.clear();
    for (const ep of tcp) ep._tcpClose();
    if (this._access) {
      this._accessTake();
      if (this._access.timer) clearInterval(this._access.timer);
    }
    this._f.nsv_server_free(this._h);
    this._h = null;
    live.delete(this);
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
        if (this._access !== null) this._accessTake();
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
        case C.NSV_EV_REQUEST: this._onRequest(new Request(arena, u32, w, conn, this, this._streamOpts)); break;
        case C.NSV_EV_BODY: {
          const req = this._bodies.get(conn);
          if (req === undefined) break; // answered already: the library drops the rest
          const o = u32[w + W.body_off], l = u32[w + W.body_len];
          const eof = (u32[w + W.flags] & C.NSV_EVF_EOF) !== 0;
          if (eof) this._bodies.delete(conn);
          // The arena is reused by the next poll: the stream gets a copy.
          try { req._bodyPiece(l ? Buffer.from(arena.subarray(o, o + l)) : EMPTY, eof); } catch (e) { this._failed(e, req, req._res); }
          break;
        }
        case C.NSV_EV_HTTP_RESPONSE: {
          const cl = this._clients.get(conn);
          if (cl !== undefined) this._clientCall(cl, '_evResponse', u32, i32, w, arena);
          break;
        }
        case C.NSV_EV_HTTP_BODY: {
          const cl = this._clients.get(conn);
          if (cl === undefined) break;
          const o = u32[w + W.body_off], l = u32[w + W.body_len];
          // The arena is reused by the next poll: the stream gets a copy.
          this._clientCall(cl, '_evBody', l ? Buffer.from(arena.subarray(o, o + l)) : EMPTY, (u32[w + W.flags] & C.NSV_EVF_EOF) !== 0);
          break;
        }
        case C.NSV_EV_CLOSE: {
          const cl = this._clients.get(conn);
          if (cl !== undefined) { this._clientCall(cl, '_evClose'); break; }
          const ep = this._tcp.get(conn);
          if (ep !== undefined) { this._tcp.delete(conn); this._tcpCall(ep, '_tcpClose'); } else this._onClose(conn);
          break;
        }
        case C.NSV_EV_TCP_OPEN: {
          if (!this._tcpAccept) { this._f.nsv_abort(this._h, conn); break; }
          const o = u32[w + W.peer_off];
          const info = {
            remoteAddress: arena.latin1Slice(o, o + u32[w + W.peer_len]), remotePort: u32[w + W.peer_port],
            listener: u32[w + W.listener], encrypted: (u32[w + W.flags] & C.NSV_EVF_TLS) !== 0,
            proxied: (u32[w + W.flags] & C.NSV_EVF_PROXY) !== 0,
          };
          let ep;
          try { ep = this._tcpAccept(conn, info); } catch (e) { this._f.nsv_abort(this._h, conn); this.emit('error', e); }
          if (ep) this._tcp.set(conn, ep);
          break;
        }
        case C.NSV_EV_TCP_DATA: {
          const ep = this._tcp.get(conn);
          if (ep === undefined) break;
          const o = u32[w + W.body_off], l = u32[w + W.body_len];
          // The arena is reused by the next poll: the stream gets a copy.
          if (l) this._tcpCall(ep, '_tcpData', Buffer.from(arena.subarray(o, o + l)));
          if (u32[w + W.flags] & C.NSV_EVF_EOF) this._tcpCall(ep, '_tcpEnd');
          break;
        }
        case C.NSV_EV_TCP_CONNECTED: {
          const ep = this._tcp.get(conn);
          if (ep !== undefined) this._tcpCall(ep, '_tcpConnected', (u32[w + W.flags] & C.NSV_EVF_TLS) !== 0);
          break;
        }
        case C.NSV_EV_WAKEUP: {
          const o = u32[w + W.body_off], l = u32[w + W.body_len];
          const ep = this._tcp.get(conn);
          if (l === 16 && this._ackMark.equals(arena.subarray(o, o + l))) {
            if (ep !== undefined) this._tcpCall(ep, '_tcpAck');
            else { // a streamed HTTP answer pacing itself (lib/http), or a WebSocket counting its output
              const res = this._pending.get(conn);
              if (res !== undefined && typeof res._ack === 'function') {
                try { res._ack(); } catch (e) { this._failed(e, res.req, res); }
              } else {
                const ws = this._sockets.get(conn) || this._clients.get(conn);
                if (ws !== undefined && typeof ws._ack === 'function') ws._ack();
              }
            }
            break;
          }
          const data = Buffer.from(arena.subarray(o, o + l));
          if (ep !== undefined && ep.listenerCount('wakeup')) this._tcpCall(ep, 'emit', 'wakeup', data);
          this.emit('wakeup', conn, data);
          break;
        }
        case C.NSV_EV_TIMER: {
          const t = this._timers.get(conn);
          if (t === undefined) break;
          if (!t.repeat) this._timers.delete(conn);
          try { t.fn(); } catch (e) { this.emit('error', e); }
          break;
        }
        case C.NSV_EV_WS_OPEN: {
          const cl = this._clients.get(conn);
          if (cl !== undefined) this._clientCall(cl, '_evOpen', u32, i32, w, arena);
          else this._onWsOpen(new Request(arena, u32, w, conn, this));
          break;
        }
        case C.NSV_EV_WS_MESSAGE: this._onWs(conn, 'message', u32, i32, w, arena); break;
        case C.NSV_EV_WS_CLOSE: this._onWs(conn, 'close', u32, i32, w, arena); break;
        case C.NSV_EV_WS_PING: this._onWs(conn, 'ping', u32, i32, w, arena); break;
        case C.NSV_EV_WS_PONG: this._onWs(conn, 'pong', u32, i32, w, arena); break;
        case C.NSV_EV_ERROR: {
          const o = u32[w + W.body_off];
          const msg = arena.latin1Slice(o, o + u32[w + W.body_len]);
          const err = nsvError(i32[w + W.code], msg);
          const cl = conn ? this._clients.get(conn) : undefined;
          if (cl !== undefined) { this._clientCall(cl, '_evError', err); break; }
          const ep = conn ? this._tcp.get(conn) : undefined;
          if (ep !== undefined) { this._tcpCall(ep, '_tcpError', err); break; }
          const req = conn ? this._bodies.get(conn) : undefined;
          if (req !== undefined) { // a limit or the client ended a streamed body
            this._bodies.delete(conn);
            err.status = STATUS_OF[err.errno];
            try { req._fail(err); } catch (e) { this._failed(e, req, req._res); }
          }
          if (this.listenerCount('clientError')) this.emit('clientError', err, conn);
          break;
        }
        case C.NSV_EV_HANGUP: { // the client ended its side while its request is with us
          const res = this._pending.get(conn);
          if (res !== undefined) this._hangup(res);
          break;
        }
        case C.NSV_EV_TCP_WRITABLE: { // output crossed a water mark
          const cl = this._clients.get(conn);
          if (cl !== undefined) { this._clientCall(cl, '_evWritable', i32[w + W.code] !== 0); break; }
          const ep = this._tcp.get(conn);
          if (ep !== undefined) { this._tcpCall(ep, '_tcpWritable', i32[w + W.code] !== 0); break; }
          const res = this._pending.get(conn);
          if (res !== undefined) {
            // A throwing 'drain' listener must not cost the rest of the batch.
            try { res._writable(i32[w + W.code] !== 0); } catch (e) { this._failed(e, res.req, res); }
          }
          break;
        }
        default: break;
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
    if (req.streaming) this._bodies.set(req.conn, req);
    if (!handler) { res.statusCode = 404; res.json({ error: 'not found' }); return; }
    this._run(handler, req, res);
    // Delivered after the client ended its side: 'close' once the handler
    // had its chance to listen for it.
    if (req.flags & C.NSV_EVF_EOF) process.nextTick(() => this._hangup(res));
  }

  // The client ended its side or left: the request closes, and a response
  // still being prepared (a long poll) hears 'close' too. It is not
  // destroyed: a client that only shut its write side still gets the reply.
  _hangup(res) {
    try { res.req._hangup(); } catch (e) { this._failed(e, res.req, res); }
    if (!res.writableEnded && typeof res._hangupSeen === 'function') {
      try { res._hangupSeen(); } catch (e) { this._failed(e, res.req, res); }
    }
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
    // An error with a 4xx status (multipart, body limits, http-errors style)
    // is the client's: it becomes the answer, not a 500.
    const st = err && (err.status || err.statusCode);
    const clientError = Number.isInteger(st) && st >= 400 && st < 500;
    if (!clientError) {
      if (this.listenerCount('handlerError')) this.emit('handlerError', err, req, res);
      else console.error('nanosrv: handler failed:', err);
    }
    if (!res || res.writableEnded || res.destroyed) return;
    if (res.headersSent) { // mid-stream: the only honest signal left is closing
      res.writableEnded = true;
      this._pending.delete(res.conn);
      this._closeConn(res.conn);
      return;
    }
    res._h = null;
    if (clientError) res.json({ error: err.message }, st);
    else res.json({ error: 'internal server error' }, 500);
  }

  _onClose(conn) {
    const body = this._bodies.get(conn);
    if (body !== undefined) { this._bodies.delete(conn); body._hangup(); }
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
    if (ws === undefined) {
      const cl = this._clients.get(conn);
      if (cl !== undefined) this._clientCall(cl, '_evWs', kind, u32, i32, w, arena);
      return;
    }
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

  // A complete reply before a streamed body ended ends the body (the
  // library reads and drops the rest): the request stream ends here.
  _cutBody(res) {
    const req = this._bodies.get(res.conn);
    if (req === undefined || req !== res.req) return;
    this._bodies.delete(res.conn);
    if (req._pausedC) this._pauseRead(req.conn, false);
    req._fail(null);
  }

  _pauseRead(conn, on) {
    if (this._h !== null) this._f.nsv_pause_read(this._h, conn, on ? 1 : 0);
  }

  _detail() { return this._h === null ? '' : this._f.nsv_last_error_detail(this._h) || ''; }

  _queueReply(res, body) {
    this._cutBody(res);
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
    if (this._bodies.get(res.conn) === res.req) { // the library closes after the reply
      this._bodies.delete(res.conn);
      res.req._fail(null);
    }
    check(this._f.nsv_reply_end(this._h, res.conn), 'nsv_reply_end');
  }

  _sseStart(res) {
    this._direct();
    const head = Buffer.from(res._head(), 'latin1');
    this._pending.set(res.conn, res);
    check(this._f.nsv_sse_start(this._h, res.conn, head, head.length), () => `res.sse(): ${this._detail()}`);
  }

  // 0, or NSV_EAGAIN / NSV_ESTALE for the caller to handle; throws others.
  _sseSend(res, ev, id, data, retry) {
    this._direct();
    const r = this._f.nsv_sse_send(this._h, res.conn, ev, ev ? ev.length : 0, id, id ? id.length : 0,
      data, data ? data.length : 0, retry);
    if (r < 0 && r !== C.NSV_EAGAIN && r !== C.NSV_ESTALE) {
      throw nsvError(r, `sse send: ${this._detail() || this._f.nsv_last_error_detail(null) || ''}`);
    }
    return r;
  }

  // Raw chunk send for the SSE queue: 0, NSV_EAGAIN or NSV_ESTALE.
  _trySend(res, buf) {
    this._direct();
    const r = this._f.nsv_send_chunk(this._h, res.conn, buf, buf.length);
    if (r < 0 && r !== C.NSV_EAGAIN && r !== C.NSV_ESTALE) throw nsvError(r, 'nsv_send_chunk');
    return r;
  }

  // Answers with a file (nsv_reply_file). Returns false when there is no
  // such file (NSV_ENOTFOUND: nothing was sent).
  _replyFile(res, status, root, path, flags, extra) {
    this._direct();
    const req = res.req;
    const rb = Buffer.from(root), pb = Buffer.from(path);
    const a = req._arena();
    const rh = a.subarray(req._ho, req._ho + req._hl);
    const hb = Buffer.from(res._head() + extra, 'latin1');
    const r = this._f.nsv_reply_file(this._h, res.conn, status, rb, rb.length, pb, pb.length, rh, rh.length, hb, hb.length, flags);
    if (r === C.NSV_ENOTFOUND) return false;
    check(r, () => `sendFile ${path}: ${this._detail()}`);
    this._cutBody(res);
    this._pending.delete(res.conn);
    return true;
  }

  _closeConn(conn) {
    this._direct();
    return check(this._f.nsv_close(this._h, conn));
  }

  // 0, or NSV_ESTALE / NSV_ESTATE (closed, or its close handshake began)
  // for the caller to handle; throws others.
  _wsSend(id, opcode, data) {
    this._direct();
    const b = toBuf(data);
    const r = this._f.nsv_ws_send(this._h, id, opcode, b, b.length);
    if (r < 0 && r !== C.NSV_ESTALE && r !== C.NSV_ESTATE) throw nsvError(r, `nsv_ws_send: ${this._detail()}`);
    return r;
  }

  // As _wsSend; a connection already closing or gone is no error.
  _wsClose(id, code, reason) {
    this._direct();
    const b = toBuf(reason);
    const r = this._f.nsv_ws_close(this._h, id, code, b, b.length);
    if (r < 0 && r !== C.NSV_ESTALE && r !== C.NSV_ESTATE) throw nsvError(r, `nsv_ws_close: ${this._detail()}`);
    return r;
  }

  // nsv_conn_queued, or null where the library cannot tell (another
  // thread of a sharded server, a closed connection).
  _queuedOrNull(id) {
    if (this._h === null) return null;
    if (this._batch.count) this._flush();
    const q = this._f.nsv_conn_queued(this._h, id);
    return q < 0 ? null : Number(q);
  }

  // WebSockets that sent this turn ask for one acknowledgement each, after
  // the turn's sends (lib/websocket.js counts bufferedAmount with them).
  _wsAskAck(ws) {
    if (this._wsAcks === undefined) {
      this._wsAcks = [];
      this._wsAckTick = () => {
        const list = this._wsAcks;
        this._wsAcks = [];
        for (let i = 0; i < list.length; i++) list[i]._askAck();
      };
    }
    if (this._wsAcks.push(ws) === 1) process.nextTick(this._wsAckTick);
  }

  // ---- outbound clients (lib/client) ----

  // fetch(input, init) on this server's loop: resolves to a Response
  // (README "fetch and WebSocket clients").
  fetch(input, init) { return fetchOn(this, input, init); }

  // A WHATWG-shaped WebSocket class whose connections run on this server:
  // new srv.WebSocket(url, protocols).
  get WebSocket() {
    if (this._WebSocket === null) this._WebSocket = boundWebSocket(this);
    return this._WebSocket;
  }

  _clientAdd(id, c) {
    this._clients.set(id, c);
    if (this._autoRef && this._clients.size === 1) this.ref();
  }

  _clientDelete(id) {
    if (this._clients.delete(id) && this._autoRef && this._clients.size === 0) this.unref();
  }

  // An exception from a client's event (its user callbacks included) must
  // not cost the rest of the batch: it is thrown on its own tick.
  _clientCall(c, fn, ...args) {
    try { c[fn](...args); } catch (e) { process.nextTick(() => { throw e; }); }
  }

  // ---- by-id API (for code that keeps connection ids) ----

  // Complete reply by connection id; throws NSV_ESTALE, NSV_ESTATE, ...
  reply(conn, status, headers, body) {
    if (typeof conn !== 'number' && typeof conn !== 'bigint') throw typeError('conn', 'a number or bigint', conn);
    checkStatus(status);
    checkBody(body, 'body');
    // The same rules as res.setHeader: nothing reaches the wire unchecked.
    const head = headerBlock(headers);
    this._direct();
    const hb = Buffer.from(head, 'latin1'), bb = toBuf(body);
    const r = this._f.nsv_reply(this._h, conn, status, hb, hb.length, bb, bb.length);
    const res = this._pending.get(conn);
    if (r === C.NSV_ESTALE) { // the client left: a late reply is a no-op
      if (res) { this._pending.delete(conn); res._closed(); }
      return false;
    }
    check(r, () => `reply to ${conn}: ${this._detail()}`);
    if (res) { this._pending.delete(conn); res.writableEnded = res.headersSent = true; }
    return true;
  }

  // ---- raw TCP and wakeups ----

  // Opens an outbound connection ('tcp://host:port' or 'tls://host:port',
  // verified against tlsClientCaFile/tlsClientCaPem or the system bundle
  // unless tlsVerifyServer is 0). endpoint gets the _tcp* calls
  // (lib/net.js Socket). Returns the connection id.
  _tcpConnect(url, endpoint) {
    if (this._closing || this._closed) throw nsvError(C.NSV_ESTOPPED, 'server is closed');
    this._direct();
    const ub = Buffer.from(url);
    const id = check(this._f.nsv_connect(this._h, ub, ub.length), () => `connect ${url}: ${this._detail()}`);
    const conn = typeof id === 'bigint' && id < 0x20000000000000n ? Number(id) : id;
    this._tcp.set(conn, endpoint);
    this._startPump(); // never drains here: 'connect' and 'error' come on a later turn
    return conn;
  }

  // nsv_send: 0, or NSV_ESTALE / NSV_EAGAIN for the caller; throws others.
  _tcpSend(conn, buf) {
    this._direct();
    const r = this._f.nsv_send(this._h, conn, buf, buf.length);
    if (r < 0 && r !== C.NSV_ESTALE && r !== C.NSV_EAGAIN) throw nsvError(r, `send: ${this._detail()}`);
    return r;
  }

  _tcpOp(fn, conn, ...args) {
    if (this._h === null) return C.NSV_ESTALE;
    this._direct();
    return this._f[fn](this._h, conn, ...args);
  }

  _tcpAskAck(conn) {
    return this._tcpOp('nsv_wakeup_conn', conn, this._ackMark, this._ackMark.length);
  }

  _tcpCall(ep, fn, ...args) {
    try { ep[fn](...args); } catch (e) { process.nextTick(() => { throw e; }); }
  }

  // A WAKEUP event for conn carrying data, from this thread (worker
  // threads can call nsv_wakeup_conn through their own binding); the
  // server emits 'wakeup' (conn, data) and a net Socket of that connection
  // too. Returns false when the connection is gone.
  wakeup(conn, data) {
    if (typeof conn !== 'number' && typeof conn !== 'bigint') throw typeError('conn', 'a number or bigint', conn);
    checkBody(data, 'data');
    const b = toBuf(data);
    if (this._h === null) return false;
    const r = this._f.nsv_wakeup_conn(this._h, conn, b, b.length);
    if (r === C.NSV_ESTALE) return false;
    check(r, () => `wakeup ${conn}: ${this._detail()}`);
    return true;
  }

  // A library timer (NSV_EV_TIMER), delivered with the server's events:
  // fn runs after ms, and every repeat ms when repeat > 0. Returns its id
  // for clearTimer. setTimeout serves most programs; this one runs in
  // order with the connection events of the same poll.
  timer(ms, fn, repeat = 0) {
    if (typeof fn !== 'function') throw typeError('fn', 'a function', fn);
    if (this._h === null) throw nsvError(C.NSV_ESTOPPED, 'server is closed');
    const id = Number(check(this._f.nsv_timer_add(this._h, ms, repeat, 0), () => `timer: ${this._detail()}`));
    this._timers.set(id, { fn, repeat: repeat > 0 });
    this._startPump();
    return id;
  }

  clearTimer(id) {
    if (!this._timers.delete(id) || this._h === null) return false;
    return this._f.nsv_timer_cancel(this._h, id) === 0;
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

  // ---- operations: metrics, readiness, access log ----

  // Every metric by its library name (nsv_metric_name), read in one call;
  // histograms as { buckets: [[le_seconds, cumulative], ...], sum_seconds,
  // count }. metrics(worker): that worker's share.
  metrics(worker) { return metrics.readMetrics(this, worker); }

  // The Prometheus text exposition (prefix default 'nanosrv_'; perWorker
  // adds worker="N" labels).
  metricsText(prefix, opts = {}) { return metrics.metricsText(this, prefix, opts && opts.perWorker); }

  // A handler answering with metricsText: srv.get('/metrics', srv.metricsHandler()).
  metricsHandler(opts = {}) {
    const prefix = opts.prefix, perWorker = !!opts.perWorker;
    return (req, res) => {
      res.writeHead(200, { 'Content-Type': metrics.PROM_CONTENT_TYPE });
      res.end(this.metricsText(prefix, { perWorker }));
    };
  }

  // True once a drain has started (close(), a signal drain), also after it
  // ended: a readiness check fails while open connections still get answers.
  get draining() {
    if (this._h === null) return this._closed;
    return Number(this._f.nsv_get_int(this._h, C.NSV_OPT_DRAINING)) === 1;
  }

  // A readiness handler: 200 "ready", 503 "draining" once a drain started.
  readinessHandler() {
    return (req, res) => {
      const d = this.draining;
      res.writeHead(d ? 503 : 200, { 'Content-Type': 'text/plain' });
      res.end(d ? 'draining' : 'ready'); // echo-server's bodies
    };
  }

  // accessLog: 'common' | 'combined' | 'json' (lines written to
  // accessLogStream, default process.stdout), a function(record), or true
  // (records only as 'access' events). accessLogQueue: records kept per
  // worker between takes (NSV_OPT_ACCESS_LOG, default 4096).
  _accessSetup(opts) {
    const fmt = opts.accessLog;
    const q = opts.accessLogQueue === undefined ? ACCESS_QUEUE : opts.accessLogQueue;
    if (!Number.isInteger(q) || q < 1) throw typeError('accessLogQueue', 'a positive integer', q);
    this._accessQueue = q;
    if (fmt === undefined || fmt === false || fmt === null) return;
    let write = null;
    if (typeof fmt === 'function') write = fmt;
    else if (typeof fmt === 'string') {
      const line = accessLog.FORMATS[fmt];
      if (!line) throw typeError('accessLog', "'common', 'combined', 'json', a function or true", fmt);
      const stream = opts.accessLogStream || process.stdout;
      if (typeof stream.write !== 'function') throw typeError('accessLogStream', 'a writable stream', stream);
      write = (recs) => {
        let text = '';
        for (const r of recs) text += `${line(r)}\n`;
        stream.write(text);
      };
      write.batch = true;
    } else if (fmt !== true) throw typeError('accessLog', "'common', 'combined', 'json', a function or true", fmt);
    this._accessEnable();
    this._access.write = write;
  }

  _accessEnable() {
    if (this._access !== null) return;
    check(this._f.nsv_set_int(this._h, C.NSV_OPT_ACCESS_LOG, this._accessQueue), 'accessLog');
    this._access = { write: null, buf: Buffer.alloc(65536), timer: null };
    this._accessTimer();
  }

  _accessTimer() {
    const a = this._access;
    if (a === null || a.timer !== null || !this._pump) return;
    a.timer = setInterval(() => { if (!this._closed) this._accessTake(); }, ACCESS_EVERY_MS);
    a.timer.unref();
  }

  // Takes the waiting records (a few buffers' worth per call) and hands them
  // to the log and the 'access' listeners.
  _accessTake() {
    const a = this._access;
    for (let i = 0; i < 8 && this._h !== null; i++) {
      const r = Number(this._f.nsv_access_take(this._h, a.buf, a.buf.length));
      if (r === C.NSV_ENOBUFS) { a.buf = Buffer.alloc(a.buf.length * 2); continue; }
      if (r <= 0) return;
      const recs = accessLog.parse(a.buf, r);
      if (a.write) {
        try {
          if (a.write.batch) a.write(recs);
          else for (const rec of recs) a.write(rec);
        } catch (e) { process.nextTick(() => { throw e; }); }
      }
      if (this.listenerCount('access')) for (const rec of recs) this.emit('access', rec);
      if (r < a.buf.length / 2) return; // the queue is empty now
    }
  }
}

// Sockets passed by systemd socket activation: [{ fd, name }] (fds 3, 4,
// ... in the socket unit's order; names from LISTEN_FDNAMES, read before
// nsv_inherited_fds removes the variables), [] when none.
function inheritedFds(n, unsetEnv = true) {
  const names = (process.env.LISTEN_FDNAMES || '').split(':');
  const count = check(n.fns.nsv_inherited_fds(unsetEnv ? 1 : 0), 'LISTEN_FDS');
  // The library removed them from the C environment; Node keeps its own copy.
  if (unsetEnv && count > 0) for (const k of ['LISTEN_PID', 'LISTEN_FDS', 'LISTEN_FDNAMES']) delete process.env[k];
  const out = [];
  for (let i = 0; i < count; i++) out.push({ fd: 3 + i, name: names[i] || '' });
  return out;
}

module.exports = { Server, staticFlags, inheritedFds };
