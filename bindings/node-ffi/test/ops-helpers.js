'use strict';
// Shared by the ops tests: PROXY protocol headers built by hand, a raw
// HTTP exchange over one socket, curl, and a bounded wait.
const net = require('node:net');
const http = require('node:http');
const { execFile } = require('node:child_process');

const V2_SIG = Buffer.from('0d0a0d0a000d0a515549540a', 'hex');

function tlv(type, value) {
  const v = Buffer.isBuffer(value) ? value : Buffer.from(value);
  const h = Buffer.alloc(3);
  h[0] = type;
  h.writeUInt16BE(v.length, 1);
  return Buffer.concat([h, v]);
}

// A PROXY v2 header, command PROXY over TCP4, with the TLVs of tlvs
// ({ alpn, authority, ssl }: ssl is the TLS version the client spoke).
function proxyV2(src, sport, dst, dport, tlvs = {}) {
  const addr = Buffer.alloc(12);
  src.split('.').forEach((b, i) => { addr[i] = +b; });
  dst.split('.').forEach((b, i) => { addr[4 + i] = +b; });
  addr.writeUInt16BE(sport, 8);
  addr.writeUInt16BE(dport, 10);
  const ext = [];
  if (tlvs.alpn) ext.push(tlv(0x01, tlvs.alpn));
  if (tlvs.authority) ext.push(tlv(0x02, tlvs.authority));
  if (tlvs.ssl) {
    const head = Buffer.alloc(5); // client flags (PP2_CLIENT_SSL) + verify (0: verified)
    head[0] = 0x01;
    ext.push(tlv(0x20, Buffer.concat([head, tlv(0x21, tlvs.ssl)])));
  }
  const body = Buffer.concat([addr, ...ext]);
  const len = Buffer.alloc(2);
  len.writeUInt16BE(body.length);
  return Buffer.concat([V2_SIG, Buffer.from([0x21, 0x11]), len, body]);
}

// Sends bytes (one write, or each piece after a pause) on a fresh
// connection from localAddress and resolves with everything read until
// the server closes ('' when it closed without a byte).
function exchange(port, pieces, { localAddress = '127.0.0.1', timeoutMs = 5000 } = {}) {
  return new Promise((resolve, reject) => {
    const s = net.connect({ port, host: '127.0.0.1', localAddress });
    const got = [];
    const timer = setTimeout(() => { s.destroy(); reject(new Error('exchange timed out')); }, timeoutMs);
    s.on('data', (d) => got.push(d));
    s.on('error', () => {}); // a reset counts as closed
    s.on('close', () => { clearTimeout(timer); resolve(Buffer.concat(got).toString('latin1')); });
    s.on('connect', async () => {
      for (const p of [].concat(pieces)) {
        s.write(p);
        await new Promise((r) => setTimeout(r, 20));
      }
    });
  });
}

// The body of the first response in a raw exchange.
function bodyOf(raw) { return raw.slice(raw.indexOf('\r\n\r\n') + 4); }

function curl(args, timeout = 10000) {
  return new Promise((resolve) => {
    execFile('curl', ['-sS', ...args], { timeout }, (err, stdout, stderr) => resolve({ code: err ? err.code : 0, stdout, stderr }));
  });
}

// A GET with node's http client on a fresh connection: { status, headers, body }.
function get(url, headers = {}) {
  return new Promise((resolve, reject) => {
    http.get(url, { headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('latin1');
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
    }).on('error', reject);
  });
}

// Waits until fn() is truthy: at most `tries` checks, `ms` apart.
async function until(fn, tries = 100, ms = 20) {
  for (let i = 0; i < tries; i++) {
    const v = await fn();
    if (v) return v;
    await new Promise((r) => setTimeout(r, ms));
  }
  return fn();
}

module.exports = { proxyV2, exchange, bodyOf, curl, get, until };
