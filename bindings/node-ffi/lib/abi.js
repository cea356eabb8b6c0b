'use strict';
// The ABI description shared by every binding (bindings/cdef/nanosrv_abi.json,
// generated from nanosrv.h). Functions, enums and the event layout are read
// from it so that a function added to the header appears here after `make cdef`
// without touching this package.
const fs = require('fs');
const path = require('path');

function findAbiJson() {
  const candidates = [
    process.env.NANOSRV_ABI_JSON,
    path.join(__dirname, '..', '..', 'cdef', 'nanosrv_abi.json'), // in the source tree
    path.join(__dirname, '..', 'nanosrv_abi.json'), // copied into a packed package
  ].filter(Boolean);
  for (const p of candidates) if (fs.existsSync(p)) return p;
  throw new Error(`nanosrv: cannot find nanosrv_abi.json (looked in: ${candidates.join(', ')})`);
}

const file = findAbiJson();
const abi = JSON.parse(fs.readFileSync(file, 'utf8'));

// "const char *name" -> { type: "const char *", name: "name" }
function splitParam(p) {
  const m = /^(.*?)([A-Za-z_]\w*)$/.exec(p.trim());
  return { type: m[1].trim(), name: m[2] };
}

const functions = abi.functions.map((f) => ({
  name: f.name,
  ret: f.ret.trim(),
  params: f.params.map(splitParam),
  proto: f.proto,
}));

// Flat name -> value map of every enum constant (NSV_ESTALE -> -3, ...).
const constants = {};
for (const group of Object.values(abi.enums)) Object.assign(constants, group);

// Error code -> name, for errors raised without a library call.
const errNames = {};
for (const [name, value] of Object.entries(abi.enums.nsv_err)) errNames[value] = name;

// Field name -> 32-bit word index inside one event record. Every field is
// 4-byte aligned, so typed-array reads over the event buffer need no DataView.
const ev = abi.structs.nsv_event;
const eventWords = {};
for (const f of ev.fields) {
  if (f.offset % 4 !== 0 || f.count !== 1 || !/^u?int(32|64)_t$/.test(f.type)) {
    throw new Error(`nanosrv: nsv_event field ${f.name} (${f.type} at ${f.offset}) in ${file} cannot be read as 32-bit words`);
  }
  eventWords[f.name] = f.offset / 4;
}
if (ev.size % 8 !== 0) throw new Error(`nanosrv: nsv_event size ${ev.size} in ${file} is not a multiple of 8`);

module.exports = {
  file,
  abiMajor: abi.abi_major,
  version: abi.version,
  functions,
  constants,
  errNames,
  eventSize: ev.size,
  eventWords,
  structs: abi.structs,
};
