'use strict';
// Errors carry the library's code the way Node's system errors do:
// err.code = 'NSV_ESTALE', err.errno = -3.
const { errNames } = require('./abi');

class NanosrvError extends Error {
  constructor(errno, message, detail) {
    const code = errNames[errno] || `NSV_E${-errno}`;
    super(detail ? `${message}: ${detail}` : message);
    this.name = 'NanosrvError';
    this.code = code;
    this.errno = errno;
  }
}

// Message lookup is injected by the native layer (nsv_strerror); the fallback
// keeps errors useful when they are raised before the library is loaded.
let strerror = (errno) => errNames[errno] || `error ${errno}`;
function setStrerror(fn) { strerror = fn; }

function nsvError(errno, detail) {
  return new NanosrvError(errno, strerror(errno), detail);
}

// Throws for a negative return code, passes anything else through.
function check(ret, detail) {
  if (ret < 0) throw nsvError(ret, typeof detail === 'function' ? detail() : detail);
  return ret;
}

function typeError(what, expected, value) {
  const e = new TypeError(`${what} must be ${expected}, got ${value === null ? 'null' : typeof value}`);
  e.code = 'ERR_INVALID_ARG_TYPE';
  return e;
}

module.exports = { NanosrvError, nsvError, check, typeError, setStrerror };
