'use strict';
// Server-sent events on a response (nsv_sse_start / nsv_sse_send). send()
// follows Writable#write: it returns false once the connection's queued
// output passed the high water mark (TCP_WRITABLE code 0) and 'drain' comes
// when it is back at the low water mark. An event refused at the output cap
// (NSV_EAGAIN) is kept here, formatted, and sent first on 'drain', so
// nothing is lost. The client leaving emits 'close' and later sends are
// dropped (send returns false).
const EventEmitter = require('events');
const { nsvError, typeError } = require('./errors');
const C = require('./abi').constants;

function field(v, what) {
  if (v === undefined || v === null) return null;
  if (typeof v === 'number') return Buffer.from(String(v));
  if (typeof v === 'string') return Buffer.from(v, 'utf8');
  throw typeError(what, 'a string', v);
}

class EventStream extends EventEmitter {
  constructor(res) {
    super();
    this._res = res;
    this._queue = []; // formatted events refused with NSV_EAGAIN
    this.closed = false; // the client left
    this.ended = false;
    this._ending = false;
    this._onReqClose = () => this._gone();
    res.req.once('close', this._onReqClose);
  }

  get writableNeedDrain() { return this._res.writableNeedDrain || this._queue.length > 0; }

  // send(data) or send({ data, event, id, retry }). data: a string (line
  // breaks become several data: lines, joined again by the client), a
  // Buffer, or any other value as JSON. Invalid names/ids throw with the
  // library's reason.
  send(msg) {
    if (this.ended || this._ending) throw nsvError(C.NSV_ESTATE, 'send after end');
    let data = msg, ev = null, id = null, retry = -1;
    if (msg !== null && typeof msg === 'object' && !(msg instanceof Uint8Array)) {
      ({ data } = msg);
      ev = field(msg.event, 'event');
      id = field(msg.id, 'id');
      if (msg.retry !== undefined && msg.retry !== null) {
        if (!Number.isInteger(msg.retry) || msg.retry < 0) throw typeError('retry', 'a non-negative integer (ms)', msg.retry);
        retry = msg.retry;
      }
    }
    let db = null;
    if (data !== undefined) {
      db = typeof data === 'string' ? Buffer.from(data, 'utf8') : data instanceof Uint8Array ? data : Buffer.from(JSON.stringify(data), 'utf8');
    }
    const srv = this._res._srv;
    if (this.closed) { // still validate, then drop
      this._format(ev, id, db, retry);
      return false;
    }
    if (this._queue.length) {
      this._queue.push(this._format(ev, id, db, retry));
      return false;
    }
    const r = srv._sseSend(this._res, ev, id, db, retry);
    if (r === C.NSV_ESTALE) { this._gone(); return false; }
    if (r === C.NSV_EAGAIN) { this._queue.push(this._format(ev, id, db, retry)); return false; }
    this._res._sent((db ? db.length : 0) + (ev ? ev.length : 0) + (id ? id.length : 0) + 16);
    return !this._res.writableNeedDrain;
  }

  // A comment line (": text"), e.g. a keepalive; clients ignore it.
  comment(text = '') {
    if (this.ended || this._ending) throw nsvError(C.NSV_ESTATE, 'comment after end');
    if (typeof text !== 'string') throw typeError('comment', 'a string', text);
    const f = this._res._srv._f;
    const tb = Buffer.from(text, 'utf8');
    const buf = Buffer.allocUnsafe(Number(f.nsv_sse_comment(tb, tb.length, null, 0)));
    f.nsv_sse_comment(tb, tb.length, buf, buf.length);
    return this._sendRaw(buf);
  }

  // Ends the stream after the events still queued here.
  end() {
    if (this.ended || this._ending) return;
    if (this.closed) { this.ended = true; return; }
    this._ending = true;
    if (!this._queue.length) this._finish();
  }

  _format(ev, id, db, retry) {
    const f = this._res._srv._f;
    const call = (dst) => f.nsv_sse_format(ev, ev ? ev.length : 0, id, id ? id.length : 0, db, db ? db.length : 0, retry, dst, dst ? dst.length : 0);
    const n = Number(call(null));
    if (n < 0) throw nsvError(n, `sse event: ${f.nsv_last_error_detail(null) || ''}`);
    const buf = Buffer.allocUnsafe(n);
    call(buf);
    return buf;
  }

  _sendRaw(buf) {
    if (this.closed) return false;
    if (this._queue.length) { this._queue.push(buf); return false; }
    const r = this._res._srv._trySend(this._res, buf);
    if (r === C.NSV_ESTALE) { this._gone(); return false; }
    if (r === C.NSV_EAGAIN) { this._queue.push(buf); return false; }
    this._res._sent(buf.length);
    return !this._res.writableNeedDrain;
  }

  _drained() {
    while (this._queue.length && !this.closed) {
      const r = this._res._srv._trySend(this._res, this._queue[0]);
      if (r === C.NSV_EAGAIN) return; // the next drain goes on
      if (r === C.NSV_ESTALE) { this._gone(); return; }
      this._res._sent(this._queue.shift().length);
    }
    if (this._ending && !this.ended) { this._finish(); return; }
    if (!this.closed && !this._res.writableNeedDrain) this.emit('drain');
  }

  _finish() {
    this.ended = true;
    this._res.req.off('close', this._onReqClose);
    if (this.closed) return;
    this._res.end();
    this.emit('finish');
  }

  // The client left (or ended its side, which an EventSource never does
  // while listening): stop, and finish the reply so the connection goes.
  _gone() {
    if (this.closed) return;
    this.closed = true;
    this._queue.length = 0;
    this._res.req.off('close', this._onReqClose);
    const res = this._res;
    if (!res.writableEnded && !res.destroyed) { try { res.end(); } catch { /* already gone */ } }
    this.emit('close');
  }
}

module.exports = { EventStream };
