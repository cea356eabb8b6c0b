/* metrics.h - a worker's counters and gauges (enum nsv_metric).
 *
 * Each value is written by the worker that owns it only, so an update is a
 * relaxed load and store (a plain add on x86, no locked instruction) and a
 * reader on any thread (core/metrics.c) sums the workers' values with
 * relaxed loads: each value is exact, the set is not a snapshot. Gauges
 * that go down (active connections, queued bytes) are kept as two counters
 * or computed when read, never decremented by another thread. */
#ifndef NSV_LOOP_METRICS_H
#define NSV_LOOP_METRICS_H

#include "loop.h"

static inline void nsv__metric_add(nsv__loop *l, int m, uint64_t n)
{
    _Atomic uint64_t *v = &l->metrics[m];
    atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + n, memory_order_relaxed);
}

static inline void nsv__metric_sub(nsv__loop *l, int m, uint64_t n)
{
    _Atomic uint64_t *v = &l->metrics[m];
    atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) - n, memory_order_relaxed);
}

#define NSV__COUNT(l, m) nsv__metric_add((l), (m), 1)

#endif
