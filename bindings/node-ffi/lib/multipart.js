'use strict';
// multipart/form-data as an async iterator of parts, parsed in C while the
// request body streams in (nsv_multipart_*). Each part is a Readable of its
// data; backpressure runs end to end: a part whose reader is behind stops
// the feeding, which stops reading the request stream, which pauses the
// socket in C. At most one part is handed out but not yet taken, so memory
// is a part's buffer plus one parser, whatever the body size.
//
// With spoolThreshold, parts are yielded complete instead: in memory up to
// the threshold ({ buffer }), in a temp file above it ({ filepath }),
// removed when the response finishes unless keepFiles.
//
// Errors carry an HTTP status (err.status): 415 not multipart, 400
// malformed (the library's reason, naming the byte), 413 over a limit. A
// handler that lets one escape answers with that status.
const { Readable } = require('stream');
const fs = require('fs');
const os = require('os');
const path = require('path');
const crypto = require('crypto');
const { nsvError, typeError } = require('./errors');
const { constants: C, structs } = require('./abi');

const REC = structs.nsv_multipart_event;
const REC_SIZE = REC.size;
const RW = {}; // field -> 32-bit word index
for (const fld of REC.fields) RW[fld.name] = fld.offset / 4;
const MAX_RECS = 64;

function httpError(status, errno, message, detail) {
  const e = nsvError(errno, message);
  e.status = e.statusCode = status;
  e.detail = detail || message;
  return e;
}

function statusOf(errno) { return errno === C.NSV_ETOOBIG ? 413 : 400; }

function boundaryOf(f, ct) {
  const none = () => httpError(415, C.NSV_ENOTFOUND, `not multipart/form-data${ct ? ` (Content-Type: ${ct})` : ''}`);
  if (typeof ct !== 'string' || !ct) throw none();
  const b = Buffer.from(ct, 'latin1');
  const off = Buffer.alloc(4), len = Buffer.alloc(4);
  const r = f.nsv_multipart_boundary(b, b.length, off, len);
  if (r === C.NSV_ENOTFOUND) throw none();
  if (r < 0) {
    const d = f.nsv_last_error_detail(null) || 'bad boundary';
    throw httpError(400, r, `bad multipart boundary: ${d}`, d);
  }
  const o = off.readUInt32LE(0);
  return Buffer.from(b.subarray(o, o + len.readUInt32LE(0)));
}

function parseHeaders(block) {
  const h = {};
  for (const line of block.split('\r\n')) {
    const c = line.indexOf(':');
    if (c > 0) h[line.slice(0, c).toLowerCase()] = line.slice(c + 1).trim();
  }
  return h;
}

// One nsv_multipart parser with its record and arena buffers.
class Parser {
  constructor(n, boundary, maxHeaderBytes, maxParts) {
    this._n = n;
    this._f = n.fns;
    const h = this._f.nsv_multipart_new(boundary, boundary.length, maxHeaderBytes, maxParts);
    if (n.isNull(h)) {
      const d = this._f.nsv_last_error_detail(null) || 'cannot create the parser';
      throw httpError(400, C.NSV_EINVAL, `multipart: ${d}`, d);
    }
    this._h = h;
    this.recs = Buffer.alloc(MAX_RECS * REC_SIZE);
    this.u32 = new Uint32Array(this.recs.buffer, this.recs.byteOffset, this.recs.length >>> 2);
    this.arena = Buffer.alloc(256 * 1024);
    this._used = Buffer.alloc(8);
  }

  // Feeds bytes: returns the record count; this.used is the bytes taken.
  feed(chunk) {
    for (;;) {
      const r = this._f.nsv_multipart_feed(this._h, chunk, chunk.length, this.recs, MAX_RECS, this.arena, this.arena.length, this._used);
      if (r === C.NSV_ENOBUFS) {
        this.arena = Buffer.alloc(Number(this._f.nsv_multipart_need(this._h)) + 4096);
        continue;
      }
      if (r < 0) throw this._error(r);
      this.used = this._used.readUInt32LE(0) + this._used.readUInt32LE(4) * 4294967296;
      return r;
    }
  }

  finish() {
    const r = this._f.nsv_multipart_finish(this._h);
    if (r < 0) throw this._error(r);
  }

  _error(r) {
    const d = this._f.nsv_last_error_detail(null) || 'malformed body';
    return httpError(statusOf(r), r, d, d);
  }

  type(i) { return this.u32[i * (REC_SIZE >>> 2) + RW.type]; }

  _str(i, field, enc) {
    const w = i * (REC_SIZE >>> 2);
    const o = this.u32[w + RW[`${field}_off`]];
    return this.arena.toString(enc, o, o + this.u32[w + RW[`${field}_len`]]);
  }

  info(i) {
    const flags = this.u32[i * (REC_SIZE >>> 2) + RW.flags];
    return {
      name: this._str(i, 'name', 'utf8'),
      filename: flags & C.NSV_MPF_FILENAME ? this._str(i, 'filename', 'utf8') : null,
      contentType: flags & C.NSV_MPF_CONTENT_TYPE ? this._str(i, 'content_type', 'latin1') : null,
      headers: parseHeaders(this._str(i, 'headers', 'latin1')),
    };
  }

  // A private copy: the arena is reused by the next feed.
  data(i) {
    const w = i * (REC_SIZE >>> 2);
    const o = this.u32[w + RW.data_off];
    return Buffer.from(this.arena.subarray(o, o + this.u32[w + RW.data_len]));
  }

  free() {
    if (this._h !== null) { this._f.nsv_multipart_free(this._h); this._h = null; }
  }
}

// One part: name, filename (null when none), contentType (null when none:
// read it as text/plain), headers (lower-case names), size (bytes so far);
// a Readable of its data.
class Part extends Readable {
  constructor(info, hwm) {
    super({ highWaterMark: hwm });
    this.name = info.name;
    this.filename = info.filename;
    this.contentType = info.contentType;
    this.headers = info.headers;
    this.size = 0;
    this._wake = null;
  }

  _read() {
    const w = this._wake;
    if (w) { this._wake = null; w(); }
  }

  _destroy(err, cb) {
    this._read(); // a feeder waiting for room goes on (and drops the rest)
    cb(err && this.listenerCount('error') ? err : null);
  }
}

class PartIterator {
  constructor(req, boundary, opts) {
    this._req = req;
    this._boundary = boundary;
    this._o = opts;
    this._queue = [];
    this._waiting = null; // the consumer's pending next()
    this._taken = null; // the feeder waiting for the queue to empty
    this._feeding = null; // the part whose room the feeder waits for
    this._current = null;
    this._started = false;
    this._stopped = false;
    this._done = false;
    this._err = null;
  }

  [Symbol.asyncIterator]() { return this; }

  next() {
    if (!this._started) { this._started = true; this._run(); }
    // Moving on drops what the app did not read of the previous part.
    const cur = this._current;
    if (cur && !cur.readableEnded && !cur.destroyed) cur.resume();
    this._current = null;
    return new Promise((resolve, reject) => {
      this._waiting = { resolve, reject };
      this._settle();
    });
  }

  // break / return in for await: stop feeding; the request is left as it is
  // (answer it; the library drops the rest of the body).
  return() {
    this._stop();
    return Promise.resolve({ value: undefined, done: true });
  }

  throw(err) {
    this._stop();
    return Promise.reject(err);
  }

  _stop() {
    this._stopped = true;
    if (this._current && !this._current.readableEnded) this._current.destroy();
    for (const p of this._queue) p.destroy();
    this._queue.length = 0;
    this._wakeFeeder();
  }

  _wakeFeeder() {
    const t = this._taken;
    if (t) { this._taken = null; t(); }
    const p = this._feeding;
    if (p) p._read();
  }

  _settle() {
    const w = this._waiting;
    if (!w) return;
    if (this._queue.length) {
      this._waiting = null;
      const p = this._queue.shift();
      this._current = p;
      this._wakeFeeder();
      w.resolve({ value: p, done: false });
    } else if (this._err) {
      this._waiting = null;
      const e = this._err;
      this._err = null; // reported once; then the iterator is done
      w.reject(e);
    } else if (this._done) {
      this._waiting = null;
      w.resolve({ value: undefined, done: true });
    }
  }

  async _run() {
    const o = this._o;
    let mp = null, part = null;
    try {
      mp = new Parser(this._req._srv._n, this._boundary, o.maxHeaderBytes || 0, o.maxParts || 0);
      for await (const chunk of this._req.iterator({ destroyOnReturn: false })) {
        let off = 0;
        while (off < chunk.length) {
          const n = mp.feed(off ? chunk.subarray(off) : chunk);
          if (n === 0 && mp.used === 0) throw httpError(400, C.NSV_EPARSE, 'multipart: the parser took no input');
          off += mp.used;
          for (let i = 0; i < n; i++) {
            const t = mp.type(i);
            if (t === C.NSV_MP_PART) {
              if (this._queue.length) await new Promise((r) => { this._taken = r; });
              if (this._stopped) return;
              part = new Part(mp.info(i), o.highWaterMark || 64 * 1024);
              this._queue.push(part);
              this._settle();
            } else if (t === C.NSV_MP_DATA) {
              const d = mp.data(i);
              part.size += d.length;
              if (part.size > o.maxPartSize) {
                throw httpError(413, C.NSV_ETOOBIG, `multipart: part '${part.name}' is larger than ${o.maxPartSize} bytes`);
              }
              if (!part.destroyed && !part.push(d)) {
                this._feeding = part;
                await new Promise((r) => { part._wake = r; });
                this._feeding = null;
              }
              if (this._stopped) return;
            } else if (t === C.NSV_MP_PART_END) {
              if (!part.destroyed) part.push(null);
              part = null;
            }
          }
        }
        if (this._stopped) return;
      }
      mp.finish();
    } catch (e) {
      if (!this._stopped) {
        // The request stream cut short: the client left or a limit hit.
        let err = e;
        if (e && e.code === 'ERR_STREAM_PREMATURE_CLOSE') err = httpError(400, C.NSV_ECLOSED, 'multipart: the body ended early');
        this._err = err;
        if (part && !part.destroyed) part.destroy(err);
      }
    } finally {
      if (mp) mp.free();
      this._done = true;
      this._settle();
    }
  }
}

async function writeAll(fh, buf) {
  for (let off = 0; off < buf.length;) off += (await fh.write(buf, off, buf.length - off)).bytesWritten;
}

async function* spooled(it, req, o) {
  const threshold = o.spoolThreshold;
  const dir = o.tmpdir || os.tmpdir();
  const files = [];
  if (!o.keepFiles && req._res) {
    let done = false;
    const rm = () => {
      if (done) return;
      done = true;
      for (const p of files) fs.unlink(p, () => {});
    };
    req._res.once('finish', rm).once('close', rm);
  }
  for await (const part of it) {
    const chunks = [];
    let size = 0, fh = null, fp = null;
    try {
      for await (const c of part) {
        size += c.length;
        if (fh) { await writeAll(fh, c); continue; }
        chunks.push(c);
        if (size > threshold) {
          fp = path.join(dir, `nanosrv-upload-${crypto.randomBytes(12).toString('hex')}`);
          fh = await fs.promises.open(fp, 'wx', 0o600);
          files.push(fp);
          for (const x of chunks) await writeAll(fh, x);
          chunks.length = 0;
        }
      }
    } finally {
      if (fh) await fh.close();
    }
    yield {
      name: part.name, filename: part.filename, contentType: part.contentType, headers: part.headers,
      size, buffer: fp ? null : Buffer.concat(chunks, size), filepath: fp,
    };
  }
}

const OPTS = ['maxParts', 'maxHeaderBytes', 'maxPartSize', 'highWaterMark', 'spoolThreshold'];

// req.multipart([opts]): maxParts, maxHeaderBytes (one part's header block,
// default 16384), maxPartSize (bytes of one part's data), highWaterMark (a
// part's buffer), spoolThreshold + tmpdir + keepFiles (spooled parts).
function parts(req, opts = {}) {
  if (opts === null || typeof opts !== 'object') throw typeError('options', 'an object', opts);
  for (const k of OPTS) {
    const v = opts[k];
    if (v !== undefined && (!Number.isSafeInteger(v) || v < 0)) throw typeError(k, 'a non-negative integer', v);
  }
  if (opts.tmpdir !== undefined && typeof opts.tmpdir !== 'string') throw typeError('tmpdir', 'a string', opts.tmpdir);
  const o = { ...opts, maxPartSize: opts.maxPartSize === undefined ? Infinity : opts.maxPartSize };
  const boundary = boundaryOf(req._srv._f, req.headers['content-type']);
  const it = new PartIterator(req, boundary, o);
  return o.spoolThreshold === undefined ? it : spooled(it, req, o);
}

module.exports = { parts, Part, boundaryOf };
