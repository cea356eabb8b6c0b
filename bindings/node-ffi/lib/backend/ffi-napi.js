'use strict';
// ffi-napi backend, through its maintained fork @2060.io/ffi-napi (ffi-napi
// 4.0.3 no longer builds on Node 20). Each call costs about 18 µs, so the
// server batches replies (nsv_reply_batch) to keep one crossing per batch.
const ffi = require('@2060.io/ffi-napi');
const ref = require('@2060.io/ref-napi');

const SCALARS = {
  void: 'void', int: 'int', int32_t: 'int32', uint32_t: 'uint32', int64_t: 'int64',
  uint64_t: 'uint64', size_t: 'size_t', double: 'double',
};

function ffiType(t, isReturn) {
  if (isReturn && t === 'const char *') return 'string';
  if (SCALARS[t]) return SCALARS[t];
  if (t.endsWith('*') || /_fn$/.test(t)) return 'pointer';
  throw new Error(`nanosrv: ffi-napi backend has no mapping for C type '${t}'`);
}

// ref-napi writes 64-bit integers from a Number or a decimal string; it does
// not take BigInt, which the binding uses for ids beyond 2^53.
function wrap64(fn, params) {
  const idx = params.map((p, i) => (/int64_t$/.test(p.type) ? i : -1)).filter((i) => i >= 0);
  if (!idx.length) return fn;
  return function (...args) {
    for (const i of idx) if (typeof args[i] === 'bigint') args[i] = args[i].toString();
    return fn(...args);
  };
}

function load(libPath, functions) {
  const lib = new ffi.DynamicLibrary(libPath, ffi.DynamicLibrary.FLAGS.RTLD_NOW);
  const fns = {};
  const missing = [];
  for (const f of functions) {
    let ptr;
    try { ptr = lib.get(f.name); } catch (e) { missing.push(f.name); continue; }
    const ff = ffi.ForeignFunction(ptr, ffiType(f.ret, true), f.params.map((p) => ffiType(p.type, false)));
    fns[f.name] = wrap64(ff, f.params);
  }
  const libc = ffi.Library('libc.so.6', { dup: ['int', ['int']] });
  // Pointers come back as Buffers, NULL as a Buffer at address 0.
  const isNull = (p) => p === null || ref.isNull(p);
  const version = require('@2060.io/ffi-napi/package.json').version;
  return { name: 'ffi-napi', version, fns, missing, dup: libc.dup, isNull };
}

module.exports = { load };
