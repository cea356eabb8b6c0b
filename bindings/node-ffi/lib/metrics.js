'use strict';
// Metrics of a server (nsv_metrics): every value by its library name, read
// in one call into one uint64 array, histograms grouped as
// { buckets: [[le_seconds, cumulative_count], ...], sum_seconds, count },
// and the Prometheus text (nsv_metrics_prometheus).
const { constants: C } = require('./abi');
const { check, nsvError, typeError } = require('./errors');

const COUNT = C.NSV_M_COUNT;
const PROM_CONTENT_TYPE = 'text/plain; version=0.0.4';

// The layout of the values, from the library's names (the same for every
// server of a process): made on the first read.
let layout = null;

function makeLayout(f) {
  const names = [];
  for (let i = 0; i < COUNT; i++) {
    const n = f.nsv_metric_name(i);
    if (!n) break; // an older library knows fewer values
    names.push(n);
  }
  // A name ending in _bucket marks a histogram: its _sum_us and _count
  // belong to it, the bounds come from nsv_metric_bucket_us.
  const bases = new Set(names.filter((n) => n.endsWith('_bucket')).map((n) => n.slice(0, -7)));
  const seen = {};
  const slots = names.map((name) => {
    if (name.endsWith('_bucket') && bases.has(name.slice(0, -7))) {
      const base = name.slice(0, -7);
      const k = (seen[base] = (seen[base] || 0) + 1) - 1;
      const us = Number(f.nsv_metric_bucket_us(k));
      return { kind: 'bucket', base, le: us < 0 ? Infinity : us / 1e6 };
    }
    for (const [suffix, kind] of [['_sum_us', 'sum'], ['_count', 'count']]) {
      const base = name.slice(0, -suffix.length);
      if (name.endsWith(suffix) && bases.has(base)) return { kind, base };
    }
    return { kind: 'value', name };
  });
  return { names, slots, histograms: [...bases] };
}

// One nsv_metrics (or nsv_metrics_worker) call; values as Numbers (exact up
// to 2^53, which no counter of a running server reaches).
function readMetrics(srv, worker) {
  const f = srv._f;
  if (srv._h === null) throw nsvError(C.NSV_ESTOPPED, 'server is closed');
  if (layout === null) layout = makeLayout(f);
  if (srv._metricsBuf === undefined) srv._metricsBuf = Buffer.alloc(COUNT * 8);
  const buf = srv._metricsBuf;
  const n = layout.names.length;
  if (worker === undefined) check(f.nsv_metrics(srv._h, buf, n), 'nsv_metrics');
  else {
    if (!Number.isInteger(worker) || worker < 0) throw typeError('worker', 'a non-negative integer', worker);
    check(f.nsv_metrics_worker(srv._h, worker, buf, n), () => `nsv_metrics_worker(${worker})`);
  }
  const out = {};
  for (const h of layout.histograms) out[h] = { buckets: [], sum_seconds: 0, count: 0 };
  for (let i = 0; i < n; i++) {
    const v = Number(buf.readBigUInt64LE(i * 8));
    const s = layout.slots[i];
    if (s.kind === 'value') out[s.name] = v;
    else if (s.kind === 'bucket') out[s.base].buckets.push([s.le, v]);
    else if (s.kind === 'sum') out[s.base].sum_seconds = v / 1e6;
    else out[s.base].count = v;
  }
  return out;
}

// Prometheus text exposition; prefix default "nanosrv_".
function metricsText(srv, prefix, perWorker) {
  if (prefix != null && typeof prefix !== 'string') throw typeError('prefix', 'a string', prefix);
  if (srv._h === null) throw nsvError(C.NSV_ESTOPPED, 'server is closed');
  const f = srv._f;
  const pb = prefix ? Buffer.from(prefix) : null;
  const pw = perWorker ? 1 : 0;
  // 32 KiB always holds the summed form; per worker the library says the
  // size it needs after NSV_ENOBUFS (in the detail), else it doubles.
  let cap = srv._promCap || 32768;
  for (let tries = 0; tries < 8; tries++) {
    const dst = Buffer.allocUnsafe(cap);
    const r = Number(f.nsv_metrics_prometheus(srv._h, pb, pb ? pb.length : 0, pw, dst, cap));
    if (r >= 0) {
      srv._promCap = cap;
      return dst.latin1Slice(0, r);
    }
    if (r !== C.NSV_ENOBUFS) check(r, () => `metrics text: ${srv._detail()}`);
    const need = /(\d+)/.exec(srv._detail());
    cap = need && +need[1] > cap ? +need[1] + 1024 : cap * 2; // room for numbers that grow
  }
  throw nsvError(C.NSV_ENOBUFS, 'metrics text: no buffer was large enough');
}

module.exports = { readMetrics, metricsText, PROM_CONTENT_TYPE };
