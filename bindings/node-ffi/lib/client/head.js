'use strict';
// Shared by the outbound clients: ids as the rest of the binding keys them,
// the header block of an event as a WHATWG Headers, the header lines a
// request sends, and the errors fetch and WebSocket report.
const { constants: C } = require('../abi');
const { nsvError } = require('../errors');

const SAFE = 0x20000000000000n; // 2^53

// A 64-bit id from a backend (BigInt from koffi, a Number or a decimal
// string from ffi-napi) in the form connId gives the same id in events:
// a Number below 2^53, a BigInt past it.
function normId(x) {
  if (typeof x === 'string') x = BigInt(x);
  if (typeof x === 'bigint') return x < SAFE && x > -SAFE ? Number(x) : x;
  return x;
}

function isNeg(id) { return typeof id === 'bigint' ? id < 0n : id < 0; }

// "Name: value\r\n" lines (the arena's header block) into Headers; a line
// Headers refuses is left out rather than failing the whole answer.
function headersOf(block) {
  const h = new Headers();
  for (let i = 0; i < block.length;) {
    let eol = block.indexOf('\r\n', i);
    if (eol < 0) eol = block.length;
    const colon = block.indexOf(':', i);
    if (colon > i && colon < eol) {
      try { h.append(block.slice(i, colon), block.slice(colon + 1, eol).trim()); } catch { /* not a valid header */ }
    }
    i = eol + 2;
  }
  return h;
}

// The error a rejected fetch carries, as undici's: TypeError('fetch
// failed') whose cause is the library's error (cause.code 'NSV_ECONNREFUSED').
function fetchFailed(cause, message = 'fetch failed') {
  return new TypeError(message, { cause });
}

function causeOf(errno, detail) { return nsvError(errno, detail); }

function abortReason(signal) {
  if (signal.reason !== undefined) return signal.reason;
  return new DOMException('This operation was aborted', 'AbortError');
}

module.exports = { normId, isNeg, headersOf, fetchFailed, causeOf, abortReason, C };
