/* answer.c - latency of each answer (NSV_OPT_METRICS_LATENCY) and the
 * hand-off to access records (access.c); the inline parts are in answer.h. */
#include "answer.h"
#include "access.h"
#include <time.h>

const int64_t nsv__lat_bound_us[NSV_M_LAT_BUCKETS] = {
    100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 10000000, -1,
};

/* One observation: its bucket alone (readers make them cumulative,
 * core/metrics.c) and the sum; two relaxed stores, no lock. */
static void observe(nsv__loop *l, int sum_id, int64_t us)
{
    if (us < 0)
        us = 0;
    int i = 0;
    while (i < NSV_M_LAT_BUCKETS - 1 && us > nsv__lat_bound_us[i])
        i++;
    nsv__metric_add(l, sum_id + 2 + i, 1);
    nsv__metric_add(l, sum_id, (uint64_t)us);
}

/* The previous answer on c still waits for its bytes to leave while a new
 * request starts: it is observed now (see answer.h). */
static void flush_pending(nsv__loop *l, nsv__conn *c, int64_t now)
{
    if (c->req_start_us < 0)
        observe(l, NSV_M_LAT_FLUSHED_SUM_US, now + c->req_start_us);
    c->req_start_us = 0;
}

void nsv__answer_head_slow(nsv__loop *l, nsv__conn *c, const nsv__request *r)
{
    /* The turn's clock (read after epoll_wait): the head arrived in this
     * turn's reads, and a clock read per request is saved. */
    int64_t now = l->now_us ? l->now_us : nsv__mono_us();
    if (l->srv->metrics_latency) {
        flush_pending(l, c, now);
        c->req_start_us = now;
    }
    if (l->srv->access_log)
        nsv__access_head(l, c, r, now);
}

void nsv__answer_status_slow(nsv__loop *l, nsv__conn *c, int status)
{
    int64_t now = 0;
    if (l->srv->metrics_latency && c->req_start_us <= 0) {
        /* Refused before its head was complete (400, 408, 431 ...): timed
         * from the refusal, so every answer is observed once. */
        now = nsv__mono_us();
        flush_pending(l, c, now);
        c->req_start_us = now;
    }
    if (l->srv->access_log) /* (a refusal may be the worker's first record: its queue is made then) */
        nsv__access_status(l, c, status, now);
}

void nsv__answer_done_slow(nsv__loop *l, nsv__conn *c)
{
    int64_t now = 0;
    if (c->req_start_us > 0) {
        now = nsv__mono_us();
        observe(l, NSV_M_LAT_QUEUED_SUM_US, now - c->req_start_us);
        c->req_start_us = -c->req_start_us; /* now waiting for its bytes to leave */
    }
    if (l->access)
        nsv__access_done(l, c, now);
}

void nsv__answer_flushed_slow(nsv__loop *l, nsv__conn *c)
{
    observe(l, NSV_M_LAT_FLUSHED_SUM_US, nsv__mono_us() + c->req_start_us);
    c->req_start_us = 0;
}

void nsv__answer_closed_slow(nsv__loop *l, nsv__conn *c)
{
    nsv__access_closed(l, c);
}
