'use strict';
// The library's utilities (base64, URL, JSON path extraction, clock, log
// level, versions). The C encoders return the full output length and write
// only if it fits, so each call sizes its output buffer first.
const { check, nsvError, typeError } = require('./errors');
const { constants: C, structs } = require('./abi');
const forms = require('./forms');

// nsv_url field name -> byte offset, from the generated description.
const URL_SIZE = structs.nsv_url.size;
const URL_OFF = {};
for (const fld of structs.nsv_url.fields) URL_OFF[fld.name] = fld.offset;

function bytes(x, what) {
  if (typeof x === 'string') return Buffer.from(x, 'utf8');
  if (x instanceof Uint8Array) return x;
  throw typeError(what, 'a string, Buffer or Uint8Array', x);
}

function makeUtils(getNative) {
  const f = () => getNative().fns;

  // Calls fn(dst, cap) once with a guess, again with the exact size if needed.
  function sized(guess, fn) {
    let dst = Buffer.allocUnsafe(Math.max(guess, 16));
    let n = Number(check(fn(dst, dst.length)));
    if (n > dst.length) {
      dst = Buffer.allocUnsafe(n);
      n = Number(check(fn(dst, dst.length)));
    }
    return dst.subarray(0, n);
  }

  const u = {
    base64Encode(data) {
      const s = bytes(data, 'data');
      return sized(Math.ceil(s.length / 3) * 4, (d, c) => f().nsv_base64_encode(s, s.length, d, c)).latin1Slice();
    },
    base64Decode(text) {
      const s = bytes(text, 'text');
      return Buffer.from(sized(s.length, (d, c) => f().nsv_base64_decode(s, s.length, d, c)));
    },
    urlEncode(text) {
      const s = bytes(text, 'text');
      return sized(s.length * 3, (d, c) => f().nsv_url_encode(s, s.length, d, c)).latin1Slice();
    },
    // form: also turn '+' into ' ' (application/x-www-form-urlencoded).
    urlDecode(text, form = false) {
      const s = bytes(text, 'text');
      return sized(s.length, (d, c) => f().nsv_url_decode(s, s.length, d, c, form ? 1 : 0)).toString('utf8');
    },
    parseUrl(url) {
      if (typeof url !== 'string') throw typeError('url', 'a string', url);
      const s = Buffer.from(url, 'utf8');
      const out = Buffer.alloc(URL_SIZE);
      check(f().nsv_url_parse(s, s.length, out), () => url);
      const part = (n) => {
        const o = out.readUInt32LE(URL_OFF[`${n}_off`]);
        return s.toString('utf8', o, o + out.readUInt32LE(URL_OFF[`${n}_len`]));
      };
      return {
        scheme: part('scheme'), host: part('host'), path: part('path'), query: part('query'),
        port: out.readInt32LE(URL_OFF.port), tls: out.readInt32LE(URL_OFF.is_tls) === 1,
      };
    },
    // JSON value at a path such as "$.a.b[2].c"; undefined when absent.
    jsonString(json, path) {
      const j = bytes(json, 'json'), p = bytes(path, 'path');
      try {
        return sized(j.length, (d, c) => f().nsv_json_string(j, j.length, p, p.length, d, c)).toString('utf8');
      } catch (e) {
        if (e.errno === C.NSV_ENOTFOUND) return undefined;
        throw e;
      }
    },
    jsonNumber(json, path) { return jsonScalar(json, path, 'nsv_json_number', 8, (b) => b.readDoubleLE(0)); },
    jsonInteger(json, path) {
      return jsonScalar(json, path, 'nsv_json_integer', 8, (b) => {
        const v = b.readBigInt64LE(0);
        return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
      });
    },
    jsonBoolean(json, path) { return jsonScalar(json, path, 'nsv_json_boolean', 4, (b) => b.readInt32LE(0) !== 0); },
    millis: () => Number(f().nsv_millis()),
    version: () => f().nsv_version_string(),
    abiVersion: () => f().nsv_abi_version(),
    tlsAvailable: () => f().nsv_tls_available() === 1,
    http2Available: () => f().nsv_http2_available() === 1,
    logLevel: () => f().nsv_log_level(),
    setLogLevel(level) {
      if (!Number.isInteger(level)) throw typeError('level', 'an integer', level);
      check(f().nsv_set_log_level(level));
    },
    // Query strings / urlencoded bodies as [name, value] pairs in order,
    // repeats kept ('+' is a space, %XX decoded, never an error).
    parseForm: (src) => forms.pairs(f(), 'nsv_form_parse', forms.bytes(src, 'src')),
    // A Cookie header as [name, value] pairs in header order, values as sent.
    parseCookie: (header) => forms.pairs(f(), 'nsv_cookie_parse', forms.bytes(header, 'header')),
    // A Set-Cookie value with res.cookie's options, validated in C.
    serializeCookie: (name, value, opts) => forms.setCookieValue(f(), () => f().nsv_last_error_detail(null) || '', name, value, opts),
    // The media type the static server sends for a file name.
    mimeType(name) {
      const b = bytes(name, 'name');
      return f().nsv_mime_type(b, b.length);
    },
    strerror: (code) => f().nsv_strerror(code),
    errname: (code) => f().nsv_errname(code),
  };

  function jsonScalar(json, path, fn, size, read) {
    const j = bytes(json, 'json'), p = bytes(path, 'path');
    const out = Buffer.alloc(size);
    const r = f()[fn](j, j.length, p, p.length, out);
    if (r === C.NSV_ENOTFOUND) return undefined;
    if (r < 0) throw nsvError(r, path);
    return read(out);
  }

  return u;
}

module.exports = { makeUtils };
