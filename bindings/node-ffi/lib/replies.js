'use strict';
// Replies of one drain go out in one nsv_reply_batch call. Records are built
// in one reusable Buffer: uint64 conn, int32 status, uint32 hlen, uint32 blen,
// uint32 reserved (24 bytes), then header and body bytes, padded to 8.
const HEAD = 24;
const TWO32 = 4294967296;

class ReplyBatch {
  constructor(size = 64 * 1024) {
    this._alloc(size);
    this.len = 0;
    this.count = 0;
  }

  _alloc(size) {
    const old = this.buf;
    this.buf = Buffer.alloc(size);
    this.u32 = new Uint32Array(this.buf.buffer, this.buf.byteOffset, size >>> 2);
    this.i32 = new Int32Array(this.buf.buffer, this.buf.byteOffset, size >>> 2);
    if (old) old.copy(this.buf, 0, 0, this.len);
  }

  _reserve(n) {
    const need = this.len + n;
    if (need <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < need) size *= 2;
    this._alloc(size);
  }

  // head: header block string (latin1, already validated); body: string,
  // Buffer/Uint8Array or null.
  add(conn, status, head, body) {
    const hcap = head.length;
    const bcap = body == null ? 0 : typeof body === 'string' ? body.length * 3 : body.length;
    this._reserve(HEAD + hcap + bcap + 8);
    const at = this.len;
    const w = at >>> 2;
    if (typeof conn === 'bigint') {
      this.u32[w] = Number(conn & 0xffffffffn);
      this.u32[w + 1] = Number(conn >> 32n);
    } else {
      this.u32[w] = conn >>> 0;
      this.u32[w + 1] = Math.floor(conn / TWO32);
    }
    this.i32[w + 2] = status;
    let p = at + HEAD;
    const hlen = hcap ? this.buf.latin1Write(head, p) : 0;
    p += hlen;
    let blen = 0;
    if (bcap) blen = typeof body === 'string' ? this.buf.utf8Write(body, p) : this._copy(body, p);
    this.u32[w + 3] = hlen;
    this.u32[w + 4] = blen;
    this.u32[w + 5] = 0;
    p += blen;
    const end = (p + 7) & ~7;
    this.buf.fill(0, p, end);
    this.len = end;
    this.count++;
  }

  _copy(src, p) {
    this.buf.set(src, p);
    return src.length;
  }

  // Iterates the records (used only when a batch was partly refused, to find
  // which replies failed).
  *records() {
    for (let at = 0; at < this.len;) {
      const w = at >>> 2;
      const lo = this.u32[w], hi = this.u32[w + 1];
      const conn = hi < 0x200000 ? hi * TWO32 + lo : (BigInt(hi) << 32n) | BigInt(lo);
      const hlen = this.u32[w + 3], blen = this.u32[w + 4];
      const h = at + HEAD;
      yield { conn, status: this.i32[w + 2], head: this.buf.subarray(h, h + hlen), body: this.buf.subarray(h + hlen, h + hlen + blen) };
      at = (h + hlen + blen + 7) & ~7;
    }
  }

  reset() {
    this.len = 0;
    this.count = 0;
  }
}

module.exports = { ReplyBatch };
