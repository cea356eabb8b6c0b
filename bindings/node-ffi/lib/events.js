'use strict';
// The poll buffers: an array of fixed-layout event records and the byte
// arena holding their strings. Both are Buffers owned by JS, so reading an
// event is typed-array indexing and making a string is one latin1Slice/utf8
// slice: no FFI call and no pointer decoding per field.
const { eventSize, eventWords } = require('./abi');

const W = eventWords;
const EV_WORDS = eventSize / 4;
const TWO32 = 4294967296;

class PollBuffers {
  constructor(maxEvents, arenaSize) {
    this.max = maxEvents;
    // Buffer.alloc never hands out a slice of the shared pool, so the memory
    // is 8-byte aligned as the C records expect.
    this.events = Buffer.alloc(maxEvents * eventSize);
    this.u32 = new Uint32Array(this.events.buffer, this.events.byteOffset, maxEvents * EV_WORDS);
    this.i32 = new Int32Array(this.events.buffer, this.events.byteOffset, maxEvents * EV_WORDS);
    this.arena = Buffer.alloc(arenaSize);
  }

  // Called after NSV_ENOBUFS: the next event needs `need` arena bytes.
  growArena(need) {
    let size = this.arena.length;
    while (size < need) size *= 2;
    this.arena = Buffer.alloc(size);
  }

  base(i) { return i * EV_WORDS; }
}

// Connection ids are 64-bit: Numbers while they fit 2^53 (the usual case),
// BigInt beyond, both accepted by the backends.
function connId(u32, w) {
  const lo = u32[w + W.conn], hi = u32[w + W.conn + 1];
  return hi < 0x200000 ? hi * TWO32 + lo : (BigInt(hi) << 32n) | BigInt(lo);
}

module.exports = { PollBuffers, connId, W, EV_WORDS };
