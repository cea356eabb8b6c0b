'use strict';
// Finds and loads libnanosrv.so.1 through the selected FFI backend and checks
// that the library and the declarations agree before anything else runs.
const fs = require('fs');
const path = require('path');
const abi = require('./abi');
const { setStrerror } = require('./errors');

const BACKENDS = { koffi: './backend/koffi', 'ffi-napi': './backend/ffi-napi' };
const loaded = {}; // backend name -> native

// Lookup order shared by every binding: $NANOSRV_LIBRARY, a copy next to the
// package, then the system search path.
function libraryPath(explicit) {
  if (explicit) return explicit;
  if (process.env.NANOSRV_LIBRARY) return process.env.NANOSRV_LIBRARY;
  const local = path.join(__dirname, '..', 'libnanosrv.so.1');
  if (fs.existsSync(local)) return local;
  return 'libnanosrv.so.1';
}

// Where libraryPath looked, for the error when nothing loads.
function lookedAt(explicit) {
  if (explicit) return 'the library option names it';
  if (process.env.NANOSRV_LIBRARY) return 'NANOSRV_LIBRARY names it';
  return `looked at NANOSRV_LIBRARY (unset), ${path.join(__dirname, '..', 'libnanosrv.so.1')} (absent), then the system search path`;
}

function backendName(name) {
  const b = name || process.env.NANOSRV_BACKEND || 'koffi';
  if (!BACKENDS[b]) throw new Error(`nanosrv: unknown backend '${b}' (expected koffi or ffi-napi)`);
  return b;
}

function load(opts = {}) {
  const name = backendName(opts.backend);
  if (loaded[name]) return loaded[name];
  const libPath = libraryPath(opts.library);
  let backend;
  try {
    backend = require(BACKENDS[name]);
  } catch (e) {
    throw new Error(`nanosrv: backend '${name}' is not installed (${e.message}); run npm ci in ${path.join(__dirname, '..')}`);
  }
  let n;
  try {
    n = backend.load(libPath, abi.functions);
  } catch (e) {
    throw new Error(`nanosrv: cannot load ${libPath} with ${name}: ${e.message}. ${lookedAt(opts.library)}; ` +
      'point NANOSRV_LIBRARY (or the library option) at libnanosrv.so.1, e.g. build/libnanosrv.so.1 after make in the source tree');
  }
  const f = n.fns;
  const libAbi = f.nsv_abi_version();
  const evSize = Number(f.nsv_event_size());
  if (libAbi !== abi.abiMajor || evSize !== abi.eventSize) {
    throw new Error(`nanosrv: ABI mismatch: ${libPath} has ABI ${libAbi} and event size ${evSize}, ` +
      `the declarations (${abi.file}) expect ABI ${abi.abiMajor} and event size ${abi.eventSize}`);
  }
  n.path = libPath;
  n.has = (fn) => typeof f[fn] === 'function';
  setStrerror((e) => f.nsv_strerror(e));
  loaded[name] = n;
  return n;
}

module.exports = { load, libraryPath, backendName };
