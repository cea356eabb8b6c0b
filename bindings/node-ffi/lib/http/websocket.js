'use strict';
// WebSocketServer and WebSocket in the shape of the `ws` package's server
// side, for nanosrv/http servers. The `ws` package itself cannot take over
// a nanosrv connection (it writes the handshake and the frames on a raw
// socket; here the library does both in C), so this module offers the same
// calls: new WebSocketServer({ server, path }) or { noServer: true } with
// handleUpgrade(req, socket, head, cb) in the server's 'upgrade' handler,
// 'connection' (ws, req), ws.on('message', (data, isBinary)), ws.send,
// ws.close, ws.terminate, 'close' (code, reason).
const EventEmitter = require('events');
const { constants: C } = require('../abi');

const CONNECTING = 0, OPEN = 1, CLOSING = 2, CLOSED = 3;

// The handlers the core server calls for connections upgraded here (see
// lib/server.js _onWs): they only pass the event to the socket object.
const RELAY = {
  message(ws, data, isBinary) { ws.emit('message', typeof data === 'string' ? Buffer.from(data) : data, isBinary); },
  close(ws, code, reason) { ws._closed(code, reason); },
};

function relayRoute(core) {
  if (core._wsRelay === undefined) {
    core._wsRelay = core._routes.length;
    core._routes.push({ handler: null, ws: RELAY });
  }
  return core._wsRelay;
}

class WebSocket extends EventEmitter {
  constructor(core, conn, req, protocol) {
    super();
    this._core = core;
    this.id = conn;
    this.route = relayRoute(core);
    this.readyState = OPEN;
    this.protocol = protocol;
    this.extensions = '';
    this.binaryType = 'nodebuffer';
    this.url = req.url;
    this._socket = req.socket;
  }

  // Sends to a peer that is closing, or gone, are no-ops (as in `ws`).
  send(data, opts, cb) {
    if (typeof opts === 'function') { cb = opts; opts = undefined; }
    if (typeof data === 'number') data = String(data);
    let opcode;
    if (typeof data === 'string') opcode = opts && opts.binary ? C.NSV_WS_BINARY : C.NSV_WS_TEXT;
    else opcode = opts && opts.binary === false ? C.NSV_WS_TEXT : C.NSV_WS_BINARY;
    if (!(typeof data === 'string' || data instanceof Uint8Array)) data = Buffer.from(data);
    if (this.readyState === OPEN) {
      const core = this._core;
      core._direct();
      const b = typeof data === 'string' ? Buffer.from(data) : data;
      const r = core._f.nsv_ws_send(core._h, this.id, opcode, b, b.length);
      if (r < 0 && r !== C.NSV_ESTALE && r !== C.NSV_ESTATE) {
        const e = new Error(`WebSocket send failed: ${core._detail() || r}`);
        if (cb) { process.nextTick(cb, e); return; }
        this.emit('error', e);
        return;
      }
    }
    if (cb) process.nextTick(cb);
  }

  ping(data, mask, cb) {
    if (typeof data === 'function') { cb = data; data = undefined; }
    if (this.readyState === OPEN) {
      const b = data === undefined ? Buffer.alloc(0) : Buffer.from(typeof data === 'string' ? data : data);
      this._core._tcpOp('nsv_ws_send', this.id, C.NSV_WS_PING, b, b.length);
    }
    if (typeof cb === 'function') process.nextTick(cb);
  }

  // The library answers pings itself.
  pong(data, mask, cb) { if (typeof cb === 'function') process.nextTick(cb); }

  close(code = 1000, reason = '') {
    if (this.readyState !== OPEN) return;
    this.readyState = CLOSING;
    const b = Buffer.from(String(reason));
    this._core._tcpOp('nsv_ws_close', this.id, code, b, b.length);
  }

  terminate() {
    if (this.readyState === CLOSED) return;
    this.readyState = CLOSING;
    this._core._tcpOp('nsv_abort', this.id);
  }

  _closed(code, reason) {
    if (this._gone) return;
    this._gone = true;
    this.readyState = CLOSED;
    this.emit('close', code, Buffer.from(reason || ''));
  }

  // The library keeps the queue; on a sharded server only its workers can
  // count it, and 'drain'-style pacing is not offered here.
  get bufferedAmount() { return 0; }
}
Object.assign(WebSocket, { CONNECTING, OPEN, CLOSING, CLOSED });
Object.assign(WebSocket.prototype, { CONNECTING, OPEN, CLOSING, CLOSED });

// As the `ws` package does for an upgrade it will not take: 400, closed.
function badRequest(socket) {
  const res = socket._res;
  if (!res || res.finished) { socket.destroy(); return; }
  res.writeHead(400, { Connection: 'close', 'Content-Type': 'text/html' });
  res.end('Bad Request');
}

class WebSocketServer extends EventEmitter {
  // { server, path } listens to the server's 'upgrade'; { noServer: true }
  // leaves the call of handleUpgrade to the application.
  constructor(options = {}, callback) {
    super();
    this.options = { path: null, handleProtocols: null, ...options };
    this.clients = new Set();
    if (options.server) {
      this._server = options.server;
      this._onUpgrade = (req, socket, head) => {
        if (!this.shouldHandle(req)) { badRequest(socket); return; }
        this.handleUpgrade(req, socket, head, (ws) => this.emit('connection', ws, req));
      };
      options.server.on('upgrade', this._onUpgrade);
    } else if (!options.noServer) {
      throw new TypeError('nanosrv/http WebSocketServer: one of the "server" or "noServer" options must be given');
    }
    if (callback) this.on('listening', callback);
  }

  shouldHandle(req) {
    if (!this.options.path) return true;
    const i = req.url.indexOf('?');
    return (i < 0 ? req.url : req.url.slice(0, i)) === this.options.path;
  }

  // Accepts the upgrade of a nanosrv/http request: the library sends the
  // 101 and frames from then on. cb(ws, req).
  handleUpgrade(req, socket, head, cb) {
    const core = socket && socket._core;
    if (!core || socket._res === undefined) throw new TypeError('handleUpgrade: the socket is not one of a nanosrv/http server');
    const offered = String(req.headers['sec-websocket-protocol'] || '').split(',').map((s) => s.trim()).filter(Boolean);
    let protocol = '';
    if (offered.length) {
      const hp = this.options.handleProtocols;
      const pick = hp ? hp(new Set(offered), req) : offered[0];
      if (pick) protocol = pick;
    }
    const conn = socket._conn;
    const res = socket._res;
    if (res) { socket._res = null; core._pending.delete(conn); res.finished = res.writableEnded = res.headersSent = true; }
    core._bodies.delete(conn);
    core._direct();
    const hb = Buffer.from(protocol ? `Sec-WebSocket-Protocol: ${protocol}\r\n` : '', 'latin1');
    const r = core._f.nsv_ws_upgrade(core._h, conn, hb, hb.length);
    if (r < 0) { socket._gone(null); return; } // the library answered 400/426 and closes
    const ws = new WebSocket(core, conn, req, protocol);
    core._sockets.set(conn, ws);
    this.clients.add(ws);
    ws.on('close', () => this.clients.delete(ws));
    cb(ws, req);
  }

  close(cb) {
    if (this._server) this._server.off('upgrade', this._onUpgrade);
    for (const ws of this.clients) ws.close(1001, '');
    if (cb) process.nextTick(cb);
    process.nextTick(() => this.emit('close'));
  }

  address() { return this._server ? this._server.address() : null; }
}

module.exports = { WebSocketServer, WebSocket, Server: WebSocketServer };
