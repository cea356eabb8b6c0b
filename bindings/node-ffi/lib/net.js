'use strict';
// nanosrv/net: the node:net API (createServer, Server, connect,
// createConnection, Socket) on libnanosrv's raw TCP, so a program written
// for node:net runs by changing its require. The sockets are Duplex streams
// whose backpressure reaches the library both ways: a full read buffer
// pauses reading the socket (nsv_pause_read), and a write's callback waits
// while the library's queue is past the high water mark, so write() returns
// false and 'drain' follows as with node:net.
const { Duplex } = require('stream');
const EventEmitter = require('events');
const nodeNet = require('net');
const { Server: NsvServer } = require('./server');
const { constants: C } = require('./abi');
const { typeError } = require('./errors');

// Library codes by the names node:net programs test err.code against.
const NODE_CODES = {
  NSV_ECONNREFUSED: 'ECONNREFUSED', NSV_ETIMEDOUT: 'ETIMEDOUT', NSV_ENOTFOUND: 'ENOTFOUND',
  NSV_ECLOSED: 'ECONNRESET', NSV_EADDRINUSE: 'EADDRINUSE', NSV_ETLS: 'ERR_SSL_HANDSHAKE_FAILURE',
};
// node:net has no idle timeout: the library's (which cannot be off) is set to its maximum, one day.
const IDLE_MS = 86400000;

function nodeError(err) {
  if (err && NODE_CODES[err.code]) { err.nsvCode = err.code; err.code = NODE_CODES[err.code]; }
  return err;
}

function hostUrl(scheme, host, port) {
  return `${scheme}://${host.includes(':') && host[0] !== '[' ? `[${host}]` : host}:${port}`;
}

// ---- the loops that carry outbound connections ----
// One nanosrv server per distinct outbound TLS configuration, shared by
// every socket using it; it keeps the process alive only while one is open.
const clientLoops = new Map();

function clientLoop(tls) {
  const key = tls ? JSON.stringify([String(tls.ca || ''), tls.rejectUnauthorized !== false]) : 'tcp';
  let loop = clientLoops.get(key);
  if (loop) return loop;
  const opts = { idleTimeoutMs: IDLE_MS };
  if (tls) {
    if (tls.ca) opts.tlsClientCaPem = Array.isArray(tls.ca) ? tls.ca.join('\n') : tls.ca;
    opts.tlsVerifyServer = tls.rejectUnauthorized === false ? 0 : 1;
  }
  const srv = new NsvServer(opts);
  srv.unref();
  loop = { srv, open: 0 };
  clientLoops.set(key, loop);
  return loop;
}

function loopUse(loop, d) {
  loop.open += d;
  if (loop.open === 1 && d > 0) loop.srv.ref();
  else if (loop.open === 0) loop.srv.unref();
}

// connect(options[, cb]) | connect(port[, host][, cb]) | connect(path): the node:net argument forms.
function normalizeConnect(args) {
  let opts = {}, cb = null;
  if (args.length && typeof args[args.length - 1] === 'function') cb = args[args.length - 1];
  const a0 = args[0];
  if (a0 !== null && typeof a0 === 'object') opts = { ...a0 };
  else if (typeof a0 === 'string' && !/^\d+$/.test(a0)) opts.path = a0;
  else { opts.port = a0; if (typeof args[1] === 'string') opts.host = args[1]; }
  return [opts, cb];
}

class Socket extends Duplex {
  constructor(opts = {}) {
    super({
      allowHalfOpen: !!opts.allowHalfOpen,
      readableHighWaterMark: opts.readableHighWaterMark,
      writableHighWaterMark: opts.writableHighWaterMark,
      emitClose: false, // 'close' carries hadError, as node:net's does (see _destroy)
    });
    this._srv = null;
    this._conn = null;
    this._loop = null; // the shared client loop, for outbound sockets
    this.connecting = false;
    this.pending = true;
    this.encrypted = false;
    this.bytesRead = 0;
    this.bytesWritten = 0;
    this.remoteAddress = undefined;
    this.remotePort = undefined;
    this.remoteFamily = undefined;
    this.localPort = undefined;
    this._libPaused = false; // nsv_pause_read(conn, 1) in effect
    this._over = false; // the library said its queue is past the high water mark
    this._unacked = 0; // bytes sent since the library last said where the queue stands
    this._askedAt = -1; // _unacked when the pending acknowledgement was asked for
    this._held = null; // the write callback waiting for room
    this._retry = null; // a chunk refused with NSV_EAGAIN, sent again once drained
    this._gone = false; // the library closed the connection
    this._eof = false; // the peer ended its side
    this._timeoutMs = 0;
    this._timer = null;
  }

  // ---- set up ----

  _attach(srv, conn, info) {
    this._srv = srv;
    this._conn = conn;
    this.pending = false;
    this.remoteAddress = info.remoteAddress;
    // Came through a PROXY protocol front: remoteAddress is the client's from its header.
    this.proxied = !!info.proxied;
    this.remotePort = info.remotePort;
    this.remoteFamily = info.remoteAddress && info.remoteAddress.includes(':') ? 'IPv6' : 'IPv4';
    this.encrypted = !!info.encrypted;
    this._hw = srv._highWater();
  }

  connect(...args) {
    const [opts, cb] = normalizeConnect(args);
    if (opts.path !== undefined) throw new Error('nanosrv/net: Unix domain sockets are not supported');
    const port = Number(opts.port);
    if (!Number.isInteger(port) || port < 0 || port > 65535) {
      const e = new RangeError(`Port should be >= 0 and < 65536. Received ${opts.port}.`);
      e.code = 'ERR_SOCKET_BAD_PORT';
      throw e;
    }
    const host = opts.host || 'localhost';
    if (this._conn !== null) throw new Error('nanosrv/net: socket is already connected');
    if (cb) this.once('connect', cb);
    if (opts.timeout) this.setTimeout(opts.timeout);
    const tls = opts.tls ? (opts.tls === true ? {} : opts.tls) : null;
    this._loop = clientLoop(tls);
    this.connecting = true;
    let conn;
    try {
      conn = this._loop.srv._tcpConnect(hostUrl(tls ? 'tls' : 'tcp', host, port), this);
    } catch (e) {
      this.connecting = false;
      process.nextTick(() => this.destroy(nodeError(e)));
      return this;
    }
    loopUse(this._loop, 1);
    this._attach(this._loop.srv, conn, { remoteAddress: nodeNet.isIP(host) ? host : undefined, remotePort: port });
    this.pending = true;
    return this;
  }

  // ---- events from the library (lib/server.js dispatch) ----

  _tcpConnected(encrypted) {
    this.connecting = false;
    this.pending = false;
    this.encrypted = encrypted;
    this._touch();
    this.emit('connect');
    this.emit('ready');
  }

  _tcpData(buf) {
    this.bytesRead += buf.length;
    this._touch();
    if (!this.push(buf)) this._pauseLib(true);
  }

  // With nothing left unread, 'end' comes now (as node's read(0) at
  // accept makes it): a socket its handler never reads still closes.
  _tcpEnd() { this._eof = true; this.push(null); if (this.readableLength === 0 && !this.readableFlowing) this.read(0); }

  _tcpWritable(ok) {
    this._over = !ok;
    if (ok) { this._unacked = 0; this._release(); }
  }

  // The library has handled every send made before the acknowledgement was
  // asked for, and said nothing about a full queue: room again.
  _tcpAck() {
    if (this._askedAt >= 0) this._unacked = Math.max(0, this._unacked - this._askedAt);
    this._askedAt = -1;
    if (!this._over) this._release();
  }

  _tcpError(err) {
    this._gone = true; // the library closes it (CLOSE follows)
    this.connecting = false;
    this.destroy(nodeError(err));
  }

  _tcpClose() {
    this._gone = true;
    this._unuse();
    if (this.destroyed) return;
    if (this._eof) {
      // An orderly close: what is still buffered is read first ('end'),
      // then the stream closes.
      if (this.readableEnded) this.destroy();
      else this.once('end', () => process.nextTick(() => this.destroy()));
      return;
    }
    const e = new Error('read ECONNRESET');
    e.code = 'ECONNRESET';
    this.destroy(e);
  }

  _unuse() {
    if (this._loop && !this._unused) { this._unused = true; loopUse(this._loop, -1); }
  }

  // ---- stream internals ----

  _pauseLib(on) {
    if (this._libPaused === on || this._conn === null || this._gone) return;
    this._libPaused = on;
    this._srv._tcpOp('nsv_pause_read', this._conn, on ? 1 : 0);
  }

  _read() {
    if (this._libPaused && !this.isPaused()) this._pauseLib(false);
  }

  pause() {
    super.pause();
    this._pauseLib(true);
    return this;
  }

  resume() {
    super.resume();
    this._pauseLib(false);
    return this;
  }

  _write(chunk, enc, cb) {
    if (this._conn === null) { cb(new Error('nanosrv/net: socket is not connected')); return; }
    this._send(chunk, cb);
  }

  _writev(chunks, cb) {
    this._write(chunks.length === 1 ? chunks[0].chunk : Buffer.concat(chunks.map((c) => c.chunk)), null, cb);
  }

  _send(buf, cb) {
    if (this._gone) { cb(); return; } // the peer left: a late write is a no-op
    const r = this._srv._tcpSend(this._conn, buf);
    if (r === C.NSV_ESTALE) { cb(); return; }
    if (r === C.NSV_EAGAIN) { // the library's output cap: wait for it to drain
      this._over = true;
      this._retry = buf;
      this._held = cb;
      return;
    }
    this.bytesWritten += buf.length;
    this._unacked += buf.length;
    this._touch();
    if (!this._over && this._unacked < this._hw) { cb(); return; }
    // Past a high water mark of sends without news (on a sharded server the
    // library's TCP_WRITABLE comes a turn late): ask the library to confirm
    // with a wakeup that arrives after it has handled these sends.
    this._held = cb;
    if (!this._over && this._askedAt < 0) {
      this._askedAt = this._unacked;
      if (this._srv._tcpAskAck(this._conn) < 0) { this._askedAt = -1; this._release(); }
    }
  }

  _release() {
    const cb = this._held;
    if (cb === null) return;
    this._held = null;
    if (this._retry !== null) { const b = this._retry; this._retry = null; this._send(b, cb); return; }
    cb();
  }

  _final(cb) {
    if (this.connecting) { this.once('connect', () => this._final(cb)); return; }
    if (this._conn !== null && !this._gone) this._srv._tcpOp('nsv_shutdown', this._conn);
    cb();
  }

  _destroy(err, cb) {
    this._clearTimer();
    if (this._conn !== null && !this._gone) {
      // An orderly end lets the queued output go out; anything else resets.
      const orderly = !err && this.writableFinished;
      this._srv._tcpOp(orderly ? 'nsv_close' : 'nsv_abort', this._conn);
      this._gone = true;
      if (!orderly) this._srv._tcp.delete(this._conn);
    }
    if (this._srv && !this._srv._tcp.has(this._conn)) this._unuse();
    if (this._held) { const h = this._held; this._held = null; h(err || undefined); }
    this.connecting = false;
    cb(err);
    process.nextTick(() => this.emit('close', !!err)); // after 'error'
  }

  // ---- the rest of net.Socket ----

  // The library sets TCP_NODELAY on every connection.
  setNoDelay() { return this; }
  setKeepAlive() { return this; }
  ref() { return this; }
  unref() { return this; }

  // Per-connection water marks (nsv_set_water_marks): 'drain' pacing and
  // the point where write() starts returning false follow them.
  setWaterMarks(high, low) {
    if (this._conn === null) throw new Error('nanosrv/net: socket is not connected');
    const r = this._srv._tcpOp('nsv_set_water_marks', this._conn, high, low);
    if (r < 0) throw typeError('water marks', '0 <= low <= high', `${low}/${high}`);
    this._hw = high;
    return this;
  }

  setTimeout(ms, cb) {
    this._timeoutMs = ms;
    if (cb) { if (ms === 0) this.off('timeout', cb); else this.once('timeout', cb); }
    this._touch();
    return this;
  }

  _touch() {
    if (!this._timeoutMs) { this._clearTimer(); return; }
    if (this._timer) { this._timer.refresh(); return; }
    this._timer = setTimeout(() => { this._timer = null; this.emit('timeout'); }, this._timeoutMs);
    this._timer.unref();
  }

  _clearTimer() { if (this._timer) { clearTimeout(this._timer); this._timer = null; } }

  get timeout() { return this._timeoutMs || undefined; }

  get readyState() {
    if (this.connecting) return 'opening';
    if (this.readable && this.writable) return 'open';
    if (this.readable) return 'readOnly';
    if (this.writable) return 'writeOnly';
    return 'closed';
  }

  get bufferSize() { return this.writableLength; }

  address() {
    return this.localPort === undefined ? {} : { port: this.localPort, family: this._localFamily, address: this._localAddress };
  }

  // The id of the connection in the library (for server.wakeup).
  get id() { return this._conn; }
}

class Server extends EventEmitter {
  constructor(options, listener) {
    super();
    if (typeof options === 'function') { listener = options; options = {}; }
    this._opts = options || {};
    this.allowHalfOpen = !!this._opts.allowHalfOpen;
    this.pauseOnConnect = !!this._opts.pauseOnConnect;
    this.maxConnections = undefined;
    this._srv = null;
    this._conns = new Set();
    this._closing = false;
    this._addr = null;
    if (listener) this.on('connection', listener);
  }

  get listening() { return this._addr !== null && !this._closing; }

  // listen([port][, host][, backlog][, cb]) | listen({ port, host }[, cb]);
  // the object form also takes the listener options (proxyProtocol,
  // proxyTimeoutMs, proxyFrom, allow, deny: README "Behind a load balancer").
  listen(...args) {
    let port = 0, host = '0.0.0.0', cb = null, lopts;
    if (args.length && typeof args[args.length - 1] === 'function') cb = args.pop();
    const a0 = args[0];
    if (a0 !== null && typeof a0 === 'object') {
      if (a0.path !== undefined) throw new Error('nanosrv/net: Unix domain sockets are not supported');
      if (a0.port !== undefined) port = Number(a0.port);
      if (a0.host) host = a0.host;
      lopts = a0;
    } else {
      if (a0 !== undefined && a0 !== null) port = Number(a0);
      if (typeof args[1] === 'string') host = args[1];
    }
    if (host === '::' || host === 'localhost') host = host === '::' ? '::' : '127.0.0.1';
    if (cb) this.once('listening', cb);
    if (this._srv !== null) throw new Error('nanosrv/net: server is already listening');
    try {
      this._listen(port, host, lopts);
    } catch (e) {
      process.nextTick(() => this.emit('error', nodeError(e)));
    }
    return this;
  }

  _listen(port, host, lopts) {
    const o = this._opts;
    const nsvOpts = { idleTimeoutMs: IDLE_MS };
    if (o.threads !== undefined) nsvOpts.threads = o.threads;
    if (o.backend !== undefined) nsvOpts.backend = o.backend;
    if (this.maxConnections !== undefined) nsvOpts.maxConns = this.maxConnections;
    // tls: { cert, key, ca, passphrase, requestCert, rejectUnauthorized } as
    // PEM strings or Buffers (tls.createServer's names); or the library's
    // options (tlsCertFile, tlsKeyFile, tlsCaFile, ...) directly.
    let secure = false;
    for (const k of Object.keys(o)) if (/^tls[A-Z]/.test(k)) { nsvOpts[k] = o[k]; secure = true; }
    const t = o.tls;
    if (t) {
      secure = true;
      if (t.cert) nsvOpts.tlsCertPem = t.cert;
      if (t.key) nsvOpts.tlsKeyPem = t.key;
      if (t.passphrase) nsvOpts.tlsKeyPassword = t.passphrase;
      if (t.ca) nsvOpts.tlsCaPem = Array.isArray(t.ca) ? t.ca.join('\n') : t.ca;
      if (t.requestCert) nsvOpts.tlsVerifyClient = t.rejectUnauthorized === false ? 1 : 2;
    }
    const srv = new NsvServer(nsvOpts);
    srv._tcpAccept = (conn, info) => this._accept(conn, info);
    srv.on('error', (e) => this.emit('error', e));
    srv.on('wakeup', (conn, data) => this.emit('wakeup', conn, data));
    let p;
    try {
      p = srv._listenNow(hostUrl(secure ? 'tls' : 'tcp', host, port), undefined, lopts);
    } catch (e) {
      srv.close(0);
      throw e;
    }
    this._srv = srv;
    this._addr = { address: host, family: host.includes(':') ? 'IPv6' : 'IPv4', port: p };
    if (this._unref) srv.unref();
    process.nextTick(() => this.emit('listening'));
  }

  _accept(conn, info) {
    if (this._closing) { this._srv._tcpOp('nsv_abort', conn); return null; }
    const s = new Socket({ allowHalfOpen: this.allowHalfOpen });
    s._attach(this._srv, conn, info);
    s.localPort = this._addr.port;
    s._localAddress = this._addr.address;
    s._localFamily = this._addr.family;
    s.server = this;
    this._conns.add(s);
    s.once('close', () => { this._conns.delete(s); this._maybeClosed(); });
    if (this.pauseOnConnect) s.pause();
    this.emit('connection', s);
    return s;
  }

  address() { return this._addr; }

  // Stops taking connections; 'close' once the open ones have ended (as
  // node:net). Until then new connections are accepted and reset at once.
  close(cb) {
    if (cb) {
      if (this._srv === null || this._closing) {
        const e = new Error('Server is not running.');
        e.code = 'ERR_SERVER_NOT_RUNNING';
        process.nextTick(cb, e);
      } else {
        this.once('close', cb);
      }
    }
    if (this._srv === null || this._closing) return this;
    this._closing = true;
    this._maybeClosed();
    return this;
  }

  _maybeClosed() {
    if (!this._closing || this._conns.size || this._done) return;
    this._done = true;
    this._srv.close(0).then(() => this.emit('close'));
  }

  getConnections(cb) { process.nextTick(cb, null, this._conns.size); return this; }

  // A WAKEUP for a connection of this server, from this thread; the socket
  // and the server emit 'wakeup'. False when the connection is gone.
  wakeup(socketOrId, data = '') {
    if (this._srv === null) return false;
    return this._srv.wakeup(socketOrId instanceof Socket ? socketOrId._conn : socketOrId, data);
  }

  ref() { this._unref = false; if (this._srv) this._srv.ref(); return this; }
  unref() { this._unref = true; if (this._srv) this._srv.unref(); return this; }
}

function createServer(options, listener) { return new Server(options, listener); }

function connect(...args) {
  const [opts] = normalizeConnect(args);
  const s = new Socket(opts);
  return s.connect(...args);
}

module.exports = {
  Server, Socket, Stream: Socket, createServer, connect, createConnection: connect,
  isIP: nodeNet.isIP, isIPv4: nodeNet.isIPv4, isIPv6: nodeNet.isIPv6,
};
