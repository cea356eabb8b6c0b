/* answer.h - what each HTTP answer leaves behind: the request and status
 * counters, the latency histograms (NSV_OPT_METRICS_LATENCY) and access
 * records (NSV_OPT_ACCESS_LOG, access.c). The HTTP layer calls these where
 * a request's head completes, where a status line is committed, where the
 * answer is complete in the library, once its output is sent, and when the
 * connection closes.
 *
 * Latency stamps live in nsv__conn.req_start_us: > 0 the head completed
 * then (µs, CLOCK_MONOTONIC) and the answer is not complete; < 0 (minus the
 * stamp) the answer is queued and its bytes not all sent yet; 0 neither. A
 * pipelined request whose head completes before the previous answer left
 * observes that answer's "flushed" at that moment (one stamp per connection). */
#ifndef NSV_HTTP_ANSWER_H
#define NSV_HTTP_ANSWER_H

#include "http.h"
#include "../loop/metrics.h"

/* Upper bounds of the latency buckets in µs, the last -1 (+Inf). */
extern const int64_t nsv__lat_bound_us[NSV_M_LAT_BUCKETS];


/* Out of line: the parts that run only with latency or access records on. */
void nsv__answer_head_slow(nsv__loop *l, nsv__conn *c, const nsv__request *r);
void nsv__answer_status_slow(nsv__loop *l, nsv__conn *c, int status);
void nsv__answer_done_slow(nsv__loop *l, nsv__conn *c);
void nsv__answer_flushed_slow(nsv__loop *l, nsv__conn *c);
void nsv__answer_closed_slow(nsv__loop *l, nsv__conn *c);

/* access.c: the record being built for the request on c (NULL when access
 * records are off) and its byte counts. */
void nsv__access_bytes(nsv__loop *l, nsv__conn *c, uint64_t in, uint64_t out);

/* A request head is complete (parsed; refused or not). */
static inline void nsv__answer_head(nsv__loop *l, nsv__conn *c, const nsv__request *r)
{
    if (l->srv->metrics_latency | l->srv->access_log)
        nsv__answer_head_slow(l, c, r);
}

/* A status line for the request on c is committed (host replies, streamed
 * replies, answers made in C, 101 upgrades): counted by class. */
static inline void nsv__answer_status(nsv__loop *l, nsv__conn *c, int status)
{
    NSV__COUNT(l, NSV_M_REQUESTS);
    unsigned cls = (unsigned)status / 100u - 1u;
    if (cls < 5)
        NSV__COUNT(l, NSV_M_RESP_1XX + (int)cls);
    if ((c->req_start_us <= 0 && l->srv->metrics_latency) || l->srv->access_log)
        nsv__answer_status_slow(l, c, status);
}

/* The answer is complete in the library (the reply queued, a streamed
 * reply ended, an answer made in C queued). */
static inline void nsv__answer_done(nsv__loop *l, nsv__conn *c)
{
    if (c->req_start_us > 0 || l->access)
        nsv__answer_done_slow(l, c);
}

/* Output moved (the protocol's on_flushed): the answer's bytes may all be out. */
static inline void nsv__answer_flushed(nsv__loop *l, nsv__conn *c)
{
    if (c->req_start_us < 0 && nsv__out_empty(c))
        nsv__answer_flushed_slow(l, c);
}

/* The connection is closing: a request without a complete answer gets its
 * access record (status as sent, 0 if none). */
static inline void nsv__answer_closed(nsv__loop *l, nsv__conn *c)
{
    if (l->access)
        nsv__answer_closed_slow(l, c);
}

/* Bytes of the request (in) and of its answer (out) on the wire, for the
 * access record. */
static inline void nsv__answer_bytes(nsv__loop *l, nsv__conn *c, uint64_t in, uint64_t out)
{
    if (l->access)
        nsv__access_bytes(l, c, in, out);
}

/* A request the parser refused with status (400, 413, 414, 431, 501, 505). */
static inline void nsv__answer_refused(nsv__loop *l, int status)
{
    int m = status == 400   ? NSV_M_PARSE_BAD_REQUEST
            : status == 431 ? NSV_M_PARSE_HEAD_TOO_LARGE
            : status == 414 ? NSV_M_PARSE_URI_TOO_LONG
            : status == 413 ? NSV_M_PARSE_BODY_TOO_LARGE
                            : NSV_M_PARSE_OTHER;
    NSV__COUNT(l, m);
}

#endif
