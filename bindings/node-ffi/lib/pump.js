'use strict';
// How the main thread learns that events are waiting, in one place.
//
// Sharded server: its I/O runs on worker threads and nsv_fd() is a pipe read
// end that becomes readable when events are queued. Node watches a dup() of
// it with net.Socket (epoll in libuv: no thread held, nothing blocks), and
// each 'data' runs drain(). Node closes its copy; the server keeps its own.
//
// Single-loop server (fallback when sharding is unavailable): nsv_poll(0)
// itself runs the I/O, so the pump calls drain() from setImmediate while
// there is traffic and backs off to a 1 ms timer when idle.
const net = require('net');

const IDLE_SPINS = 2; // empty immediate rounds before backing off to a timer

class Pump {
  // drain() returns true when more events may be waiting right now.
  constructor(native, handle, sharded, drain, onError) {
    this._n = native;
    this._h = handle;
    this._sharded = sharded;
    this._drain = drain;
    this._onError = onError;
    this._sock = null;
    this._imm = null;
    this._timer = null;
    this._idle = 0;
    this._stopped = false;
    this._kick = () => this.kick();
    this._ref = true;
  }

  // Whether the pump keeps the process alive (net.Server#unref and the
  // shared client loop of lib/net.js turn it off).
  setRef(on) {
    this._ref = on;
    const f = on ? 'ref' : 'unref';
    if (this._sock) this._sock[f]();
    if (this._timer) this._timer[f]();
    if (this._imm) this._imm[f]();
    if (this._interval) this._interval[f]();
  }

  start() {
    if (this._sharded) {
      const fd = this._n.dup(this._n.fns.nsv_fd(this._h));
      if (fd < 0) throw new Error('nanosrv: dup(nsv_fd) failed');
      // onread with one reused buffer: the bytes are only wake-ups, so skip
      // the stream machinery and the buffer allocation of 'data' events.
      this._sock = new net.Socket({
        fd, readable: true, writable: false,
        onread: { buffer: Buffer.alloc(256), callback: () => { if (!this._imm) this.kick(); } },
      });
      this._sock.on('error', this._onError);
      if (!this._ref) this._sock.unref();
    }
    this.kick();
  }

  kick() {
    this._imm = null;
    if (this._timer) { clearTimeout(this._timer); this._timer = null; }
    if (this._stopped) return;
    const more = this._drain();
    if (this._stopped) return;
    if (more) this._idle = 0;
    if (more || (!this._sharded && ++this._idle <= IDLE_SPINS)) {
      // Yield between rounds so timers and other I/O run under load.
      this._imm = setImmediate(this._kick);
      if (!this._ref) this._imm.unref();
    } else if (!this._sharded) {
      this._timer = setTimeout(this._kick, 1);
      if (!this._ref) this._timer.unref();
    }
  }

  // Extra wake-ups while a drain is finishing (the stop may not write to
  // the pipe).
  pollEvery(ms) {
    if (!this._interval) this._interval = setInterval(this._kick, ms);
  }

  stop() {
    this._stopped = true;
    if (this._imm) clearImmediate(this._imm);
    if (this._timer) clearTimeout(this._timer);
    if (this._interval) clearInterval(this._interval);
    if (this._sock) { this._sock.destroy(); this._sock = null; }
  }
}

module.exports = { Pump };
