'use strict';
// Listener options (nsv_listener_set_int / nsv_listener_set_str): the PROXY
// protocol and the address lists of one listener, given by name at listen().
const { constants: C } = require('./abi');
const { nsvError, typeError } = require('./errors');

const KEYS = ['proxyProtocol', 'proxyTimeoutMs', 'proxyFrom', 'allow', 'deny'];
const LISTS = { proxyFrom: C.NSV_LOPT_PROXY_FROM, allow: C.NSV_LOPT_ALLOW, deny: C.NSV_LOPT_DENY };
const VERSIONS = { off: C.NSV_PROXY_OFF, v1: C.NSV_PROXY_V1, v2: C.NSV_PROXY_V2, any: C.NSV_PROXY_ANY };
// Only addresses no client has: what a listener whose list was refused
// answers to (nobody), since a listener cannot be closed on its own.
const NOBODY = '0.0.0.0/32, ::/128';

// The listener options among opts (undefined ones left out).
function pick(opts) {
  const o = {};
  if (opts) for (const k of KEYS) if (opts[k] !== undefined) o[k] = opts[k];
  return o;
}

function proxyVersion(v) {
  if (v === true) return C.NSV_PROXY_ANY; // either version, told apart by the first byte
  if (v === false || v === null) return C.NSV_PROXY_OFF;
  if (typeof v === 'string' && VERSIONS[v.toLowerCase()] !== undefined) return VERSIONS[v.toLowerCase()];
  if (Number.isInteger(v) && v >= 0 && v <= C.NSV_PROXY_ANY) return v;
  throw typeError('proxyProtocol', "true, false, 'v1', 'v2' or 'any'", v);
}

// "10.0.0.0/8, ::1" or ['10.0.0.0/8', '::1'] -> the library's list text.
function listText(name, v) {
  if (v === null || v === '') return '';
  if (typeof v === 'string') return v;
  if (Array.isArray(v) && v.every((e) => typeof e === 'string')) return v.join(', ');
  throw typeError(name, 'a string or an array of CIDR strings', v);
}

// Checks the values before the listener exists (types only: the library
// checks the lists themselves).
function validate(o) {
  const out = [];
  if (o.proxyProtocol !== undefined) out.push(['int', C.NSV_LOPT_PROXY_PROTOCOL, proxyVersion(o.proxyProtocol), 'proxyProtocol']);
  if (o.proxyTimeoutMs !== undefined) {
    if (!Number.isInteger(o.proxyTimeoutMs) || o.proxyTimeoutMs < 0) throw typeError('proxyTimeoutMs', 'a non-negative integer', o.proxyTimeoutMs);
    out.push(['int', C.NSV_LOPT_PROXY_TIMEOUT_MS, o.proxyTimeoutMs, 'proxyTimeoutMs']);
  }
  for (const k of Object.keys(LISTS)) if (o[k] !== undefined) out.push(['str', LISTS[k], listText(k, o[k]), k]);
  return out;
}

// Applies validated options to listener lid. A refused value throws with the
// library's detail; the listener, already bound, is first set to serve
// nobody, so that a list that failed never leaves it open to everyone.
function apply(srv, lid, list) {
  const f = srv._f;
  for (const [kind, opt, value, name] of list) {
    let r;
    if (kind === 'int') r = f.nsv_listener_set_int(srv._h, lid, opt, value);
    else {
      const b = Buffer.from(value, 'latin1');
      r = f.nsv_listener_set_str(srv._h, lid, opt, b, b.length);
    }
    if (r < 0) {
      const detail = srv._detail();
      const nb = Buffer.from(NOBODY);
      f.nsv_listener_set_str(srv._h, lid, C.NSV_LOPT_ALLOW, nb, nb.length);
      throw nsvError(r, `listener option ${name}${kind === 'str' ? ` '${value}'` : `=${value}`}${detail ? `: ${detail}` : ''}`);
    }
  }
}

module.exports = { KEYS, pick, validate, apply };
