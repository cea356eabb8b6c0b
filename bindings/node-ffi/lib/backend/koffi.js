'use strict';
// koffi backend: calls cost about 40 ns, Buffers pass as pointers without
// copies, 64-bit integers accept Number or BigInt.
const koffi = require('koffi');

// Types of the header that koffi does not need to know: opaque handles,
// records the binding reads itself and C-only function pointer types.
function koffiType(t) {
  if (t === 'const char *' || t === 'char *') return t;
  if (/^(const )?nsv_\w+ \*$/.test(t) || /_fn$/.test(t)) return 'void *';
  return t;
}

function load(libPath, functions) {
  const lib = koffi.load(libPath);
  const fns = {};
  const missing = [];
  for (const f of functions) {
    try {
      fns[f.name] = lib.func(f.name, koffiType(f.ret), f.params.map((p) => koffiType(p.type)));
    } catch (e) {
      missing.push(f.name); // declared in the JSON, absent from an older library
    }
  }
  // dup(2) lets Node own a copy of the server's wake-up fd (see waiter.js).
  const libc = koffi.load('libc.so.6');
  const dup = libc.func('int dup(int fd)');
  // NULL comes back as null (or 0n for void * in some versions).
  const isNull = (p) => p === null || p === 0n;
  // The library objects are kept: koffi unloads a library whose object is
  // garbage collected, which would pull the code from under the server's
  // worker threads (they crash in unmapped memory).
  return { name: 'koffi', version: koffi.version, fns, missing, dup, isNull, libs: [lib, libc] };
}

module.exports = { load };
