'use strict';
// Access records (nsv_access_take) read into objects, and the line formats
// shared with the other bindings and echo-server: nginx's common and
// combined, and one JSON object per line. The record layout comes from
// bindings/cdef (struct nsv_access_record): offsets are never written here.
const { structs, constants: C } = require('./abi');

const REC = structs.nsv_access_record;
const OFF = {};
for (const fld of REC.fields) OFF[fld.name] = { offset: fld.offset, type: fld.type };
const FIXED = REC.size;
const STRINGS = ['method', 'target', 'peer', 'ua', 'referer']; // in the order they follow the fixed part

function field(buf, at, name) {
  const { offset, type } = OFF[name];
  const o = at + offset;
  switch (type) {
    case 'uint32_t': return buf.readUInt32LE(o);
    case 'int32_t': return buf.readInt32LE(o);
    case 'uint64_t': return Number(buf.readBigUInt64LE(o));
    case 'int64_t': return Number(buf.readBigInt64LE(o));
    default: throw new Error(`nanosrv: nsv_access_record field ${name} has type ${type}`);
  }
}

// The records of buf[0, len) as objects.
function parse(buf, len) {
  const out = [];
  for (let at = 0; at + FIXED <= len;) {
    const size = field(buf, at, 'size');
    if (size < FIXED || at + size > len) break; // never past what the library wrote
    let s = at + FIXED;
    const str = {};
    for (const k of STRINGS) {
      const l = field(buf, at, `${k}_len`);
      str[k] = buf.latin1Slice(s, s + l);
      s += l;
    }
    const flags = field(buf, at, 'flags');
    out.push({
      timeMs: field(buf, at, 'time_ms'),
      peer: str.peer,
      port: field(buf, at, 'peer_port'),
      method: str.method,
      target: str.target,
      httpVersion: flags & C.NSV_EVF_HTTP2 ? '2.0' : flags & C.NSV_EVF_HTTP10 ? '1.0' : '1.1',
      status: field(buf, at, 'status'),
      bytesOut: field(buf, at, 'bytes_out'),
      bytesIn: field(buf, at, 'bytes_in'),
      durationUs: field(buf, at, 'duration_us'),
      userAgent: str.ua,
      referer: str.referer,
      conn: field(buf, at, 'conn'),
      listener: field(buf, at, 'listener'),
      tls: (flags & C.NSV_EVF_TLS) !== 0,
      proxy: (flags & C.NSV_EVF_PROXY) !== 0,
      head: (flags & C.NSV_EVF_HEAD) !== 0,
    });
    at += size;
  }
  return out;
}

// ---- formats (the bytes of examples/lib/access_format.h) ----

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const p2 = (n) => (n < 10 ? `0${n}` : `${n}`);

// nginx's $time_local: local time with its UTC offset ("+0000", "-0500").
function timeLocal(ms) {
  const d = new Date(Math.floor(ms / 1000) * 1000);
  const off = -d.getTimezoneOffset();
  const a = Math.abs(off);
  return `${p2(d.getDate())}/${MONTHS[d.getMonth()]}/${d.getFullYear()}:` +
    `${p2(d.getHours())}:${p2(d.getMinutes())}:${p2(d.getSeconds())} ${off < 0 ? '-' : '+'}${p2(Math.floor(a / 60))}${p2(a % 60)}`;
}

// nginx's escape=default: '"', '\' and bytes outside 0x20..0x7e as \xHH;
// an empty field is "-". s holds bytes (latin1).
function ngx(s) {
  if (s === '') return '-';
  let out = '';
  let from = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x22 || c === 0x5c) {
      out += `${s.slice(from, i)}\\x${c.toString(16).toUpperCase().padStart(2, '0')}`;
      from = i + 1;
    }
  }
  return from === 0 ? s : out + s.slice(from);
}

// Byte count: the whole answer as framed on the wire (bytes_out), which is
// what the library records ($body_bytes_sent would be the body alone).
function common(r) {
  const request = r.method || r.target ? `${ngx(r.method)} ${ngx(r.target)} HTTP/${r.httpVersion}` : '-';
  return `${ngx(r.peer)} - - [${timeLocal(r.timeMs)}] "${request}" ${Math.max(r.status, 0)} ${r.bytesOut}`;
}

function combined(r) {
  return `${common(r)} "${ngx(r.referer)}" "${ngx(r.userAgent)}"`;
}

// Length of the valid UTF-8 sequence at byte i of s (1..4), 0 when none.
function utf8Seq(s, i) {
  const c = s.charCodeAt(i);
  let len, cp;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) { len = 2; cp = c & 0x1f; }
  else if (c >= 0xe0 && c <= 0xef) { len = 3; cp = c & 0x0f; }
  else if (c >= 0xf0 && c <= 0xf4) { len = 4; cp = c & 0x07; }
  else return 0;
  if (i + len > s.length) return 0;
  for (let k = 1; k < len; k++) {
    const b = s.charCodeAt(i + k);
    if ((b & 0xc0) !== 0x80) return 0;
    cp = (cp << 6) | (b & 0x3f);
  }
  if ((len === 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (len === 4 && (cp < 0x10000 || cp > 0x10ffff))) return 0;
  return len;
}

const SHORT = { 0x22: '\\"', 0x5c: '\\\\', 0x08: '\\b', 0x0c: '\\f', 0x0a: '\\n', 0x0d: '\\r', 0x09: '\\t' };

// A JSON string of bytes s (latin1): '"', '\\' and controls escaped, valid
// UTF-8 kept, any other byte \u00HH, so every line is valid JSON.
function jstr(s) {
  let out = '"';
  for (let i = 0; i < s.length;) {
    const c = s.charCodeAt(i);
    const k = utf8Seq(s, i);
    if (SHORT[c]) { out += SHORT[c]; i++; }
    else if (c < 0x20 || k === 0) { out += `\\u00${c.toString(16).padStart(2, '0')}`; i++; }
    else if (k === 1) { out += s[i]; i++; }
    else { out += Buffer.from(s.slice(i, i + k), 'latin1').toString('utf8'); i += k; }
  }
  return `${out}"`;
}

function json(r) {
  const us = r.durationUs;
  return `{"time":"${new Date(r.timeMs).toISOString()}","peer":${jstr(r.peer)},"port":${r.port},` +
    `"method":${jstr(r.method)},"target":${jstr(r.target)},"status":${Math.max(r.status, 0)},` +
    `"bytes_out":${r.bytesOut},"bytes_in":${r.bytesIn},"duration_ms":${Math.floor(us / 1000)}.${String(us % 1000).padStart(3, '0')},` +
    `"user_agent":${jstr(r.userAgent)},"referer":${jstr(r.referer)}}`;
}

const FORMATS = { common, combined, json };

module.exports = { parse, FORMATS, timeLocal };
