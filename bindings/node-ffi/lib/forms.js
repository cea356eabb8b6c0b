'use strict';
// Query strings, urlencoded forms and cookies, parsed in C (nsv_form_parse,
// nsv_cookie_parse) and Set-Cookie values built and validated in C
// (nsv_set_cookie). The parsers decode into one byte buffer plus a table of
// (offset, length) pairs; names and values become UTF-8 strings here.
const { check, nsvError, typeError } = require('./errors');
const { constants: C } = require('./abi');

const EMPTY = Buffer.alloc(0);
const NPAIRS = Buffer.alloc(4); // out-parameter, read right after each call (one thread)

// Decoded output is never longer than the input, so dst = input length; the
// pair count is guessed small and the call repeated once when it was not.
function pairs(f, fn, src) {
  if (src.length === 0) return [];
  let max = Math.min(64, src.length + 1);
  for (let round = 0; round < 2; round++) {
    const table = Buffer.alloc(max * 16);
    const dst = Buffer.allocUnsafe(src.length);
    const need = Number(check(f[fn](src, src.length, table, max, dst, dst.length, NPAIRS), fn));
    const n = NPAIRS.readUInt32LE(0);
    if (n <= max && need <= dst.length) {
      const out = new Array(n);
      for (let i = 0; i < n; i++) {
        const no = table.readUInt32LE(i * 16), nl = table.readUInt32LE(i * 16 + 4);
        const vo = table.readUInt32LE(i * 16 + 8), vl = table.readUInt32LE(i * 16 + 12);
        out[i] = [dst.toString('utf8', no, no + nl), dst.toString('utf8', vo, vo + vl)];
      }
      return out;
    }
    max = n;
  }
  throw nsvError(C.NSV_EINVAL, `${fn}: sizes changed between calls`);
}

function bytes(x, what) {
  if (x == null) return EMPTY;
  if (typeof x === 'string') return Buffer.from(x, 'utf8');
  if (x instanceof Uint8Array) return x;
  throw typeError(what, 'a string, Buffer or Uint8Array', x);
}

// Pairs -> object as Express's req.query: a repeated name gives an array of
// its values in order. No prototype, so a name like "__proto__" is data.
function toObject(list) {
  const o = Object.create(null);
  for (const [k, v] of list) {
    const prev = o[k];
    if (prev === undefined) o[k] = v;
    else if (Array.isArray(prev)) prev.push(v);
    else o[k] = [prev, v];
  }
  return o;
}

// Cookie values come back as sent; like the `cookie` package, a value with
// '%' is percent-decoded when that is valid, and the first of a repeated
// name wins (browsers send the most specific path first).
function cookieObject(list) {
  const o = Object.create(null);
  for (const [k, v] of list) {
    if (o[k] !== undefined) continue;
    let val = v;
    if (v.indexOf('%') >= 0) { try { val = decodeURIComponent(v); } catch { /* keep as sent */ } }
    o[k] = val;
  }
  return o;
}

const SAMESITE = {
  lax: C.NSV_COOKIE_SAMESITE_LAX, strict: C.NSV_COOKIE_SAMESITE_STRICT, none: C.NSV_COOKIE_SAMESITE_NONE,
};

// Options as Express's res.cookie: maxAge in milliseconds (gives Max-Age in
// seconds and Expires), expires a Date, path default '/', domain, secure,
// httpOnly, sameSite ('lax' | 'strict' | 'none' | true = 'strict'),
// partitioned, encode (default encodeURIComponent).
function setCookieValue(f, detail, name, value, opts = {}) {
  if (typeof name !== 'string') throw typeError('cookie name', 'a string', name);
  if (typeof value !== 'string') throw typeError('cookie value', 'a string', value);
  if (opts === null || typeof opts !== 'object') throw typeError('cookie options', 'an object', opts);
  const encode = opts.encode === undefined ? encodeURIComponent : opts.encode;
  if (typeof encode !== 'function') throw typeError('cookie encode option', 'a function', encode);
  const path = opts.path === undefined ? '/' : opts.path;
  let maxAge = -1, expires = -1;
  if (opts.maxAge != null) {
    if (typeof opts.maxAge !== 'number' || !Number.isFinite(opts.maxAge)) throw typeError('cookie maxAge', 'a finite number of milliseconds', opts.maxAge);
    maxAge = Math.max(0, Math.floor(opts.maxAge / 1000));
    expires = Math.floor((Date.now() + opts.maxAge) / 1000);
  } else if (opts.expires != null) {
    if (!(opts.expires instanceof Date) || Number.isNaN(opts.expires.getTime())) throw typeError('cookie expires', 'a valid Date', opts.expires);
    expires = Math.floor(opts.expires.getTime() / 1000);
  }
  if (expires < -1) expires = 0; // before 1970: already expired
  let flags = 0;
  if (opts.secure) flags |= C.NSV_COOKIE_SECURE;
  if (opts.httpOnly) flags |= C.NSV_COOKIE_HTTPONLY;
  if (opts.partitioned) flags |= C.NSV_COOKIE_PARTITIONED;
  if (opts.sameSite != null && opts.sameSite !== false) {
    const s = opts.sameSite === true ? 'strict' : String(opts.sameSite).toLowerCase();
    if (!SAMESITE[s]) throw nsvError(C.NSV_EINVAL, `cookie sameSite must be 'lax', 'strict' or 'none', got '${opts.sameSite}'`);
    flags |= SAMESITE[s];
  }
  const nb = Buffer.from(name, 'utf8'), vb = Buffer.from(String(encode(value)), 'utf8');
  const pb = bytes(path == null ? '' : path, 'cookie path'), db = bytes(opts.domain, 'cookie domain');
  const call = (dst) => f.nsv_set_cookie(nb, nb.length, vb, vb.length, pb, pb.length, db, db.length, maxAge, expires, flags, dst, dst ? dst.length : 0);
  const n = Number(call(null));
  if (n < 0) throw nsvError(n, `Set-Cookie ${name}: ${detail()}`);
  const dst = Buffer.allocUnsafe(n);
  check(call(dst), 'nsv_set_cookie');
  return dst.latin1Slice(0, n);
}

module.exports = { pairs, bytes, toObject, cookieObject, setCookieValue };
