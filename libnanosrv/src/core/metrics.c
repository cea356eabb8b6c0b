/* metrics.c - reading the workers' counters (loop/metrics.h) from any
 * thread: nsv_metrics, nsv_metrics_worker, names, bucket bounds and the
 * Prometheus text exposition. */
#include "server.h"
#include "../http/answer.h" /* nsv__lat_bound_us: the bounds the workers observe with */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Names of the values before the histograms (nsv_metric_name). */
static const char *const names[NSV_M_LAT_QUEUED_SUM_US] = {
    "conns_accepted", "conns_active", "conns_refused", "conns_denied", "conns_evicted", "requests",
    "resp_1xx", "resp_2xx", "resp_3xx", "resp_4xx", "resp_5xx", "bytes_in", "bytes_out",
    "parse_bad_request", "parse_head_too_large", "parse_uri_too_long", "parse_body_too_large", "parse_other",
    "proxy_errors", "timeout_request", "timeout_idle", "timeout_other", "ws_messages_in", "ws_messages_out",
    "tls_handshakes", "tls_failures", "output_queued", "events_queued", "draining", "access_dropped",
};

const char *nsv_metric_name(int m)
{
    if (m < 0 || m >= NSV_M_COUNT)
        return NULL;
    if (m < NSV_M_LAT_QUEUED_SUM_US)
        return names[m];
    switch (m) {
    case NSV_M_LAT_QUEUED_SUM_US: return "lat_queued_sum_us";
    case NSV_M_LAT_QUEUED_COUNT: return "lat_queued_count";
    case NSV_M_LAT_FLUSHED_SUM_US: return "lat_flushed_sum_us";
    case NSV_M_LAT_FLUSHED_COUNT: return "lat_flushed_count";
    }
    if (m < NSV_M_LAT_FLUSHED_SUM_US)
        return "lat_queued_bucket";
    if (m < NSV_M_LAT_FLUSHED_BUCKET + NSV_M_LAT_BUCKETS)
        return "lat_flushed_bucket";
    static const char *const after[] = {"tls_resumed", "h2_conns", "h2_streams", "h2_abuse"};
    return after[m - NSV_M_TLS_RESUMED];
}

int64_t nsv_metric_bucket_us(int i)
{
    if (i < 0 || i >= NSV_M_LAT_BUCKETS)
        return NSV_ERANGE;
    return nsv__lat_bound_us[i];
}

/* Add one worker's values to v (gauges included: the loop keeps them as
 * stored values, loop/metrics.h). Workers keep each histogram bucket on its
 * own (one store per observation, http/answer.c) and no count: finish()
 * makes them cumulative, the count being the last bucket, so a reader
 * never sees a count that disagrees with its buckets. */
static void add_loop(nsv__loop *l, uint64_t *v)
{
    for (int m = 0; m < NSV_M_COUNT; m++)
        v[m] += atomic_load_explicit(&l->metrics[m], memory_order_relaxed);
}

static void finish(nsv_server *s, uint64_t *v)
{
    static const int hist[2] = {NSV_M_LAT_QUEUED_SUM_US, NSV_M_LAT_FLUSHED_SUM_US};
    for (int h = 0; h < 2; h++) {
        uint64_t *b = v + hist[h] + 2, run = 0;
        for (int i = 0; i < NSV_M_LAT_BUCKETS; i++)
            b[i] = run += b[i];
        v[hist[h] + 1] = run;
    }
    v[NSV_M_DRAINING] = atomic_load(&s->draining) ? 1 : 0;
}

static int copy_out(const uint64_t *v, uint64_t *dst, int n)
{
    if (n > NSV_M_COUNT)
        n = NSV_M_COUNT;
    if (n > 0)
        memcpy(dst, v, (size_t)n * sizeof *v);
    return NSV_M_COUNT;
}

static int check_args(nsv_server *s, const char *fn, uint64_t *dst, int n)
{
    if (!s)
        return NSV_EINVAL;
    if (n < 0 || (n > 0 && !dst))
        return nsv__set_detail(s, NSV_EINVAL, "%s: dst is NULL or n (%d) is negative", fn, n);
    return NSV_OK;
}

static void sum_all(nsv_server *s, uint64_t *v)
{
    memset(v, 0, NSV_M_COUNT * sizeof *v);
    for (int i = 0; i < s->nloops; i++)
        add_loop(s->loops[i], v);
    finish(s, v);
    /* All connections, outbound ones too, whichever worker holds them. */
    int nc = atomic_load(&s->nconns);
    v[NSV_M_CONNS_ACTIVE] = nc > 0 ? (uint64_t)nc : 0;
}

int nsv_metrics(nsv_server *s, uint64_t *dst, int n)
{
    int r = check_args(s, "nsv_metrics", dst, n);
    if (r)
        return r;
    uint64_t v[NSV_M_COUNT];
    sum_all(s, v);
    return copy_out(v, dst, n);
}

static void worker_values(nsv_server *s, int w, uint64_t *v)
{
    memset(v, 0, NSV_M_COUNT * sizeof *v);
    add_loop(s->loops[w], v);
    finish(s, v);
    if (s->nloops == 1) {
        int nc = atomic_load(&s->nconns);
        v[NSV_M_CONNS_ACTIVE] = nc > 0 ? (uint64_t)nc : 0;
    }
}

int nsv_metrics_worker(nsv_server *s, int worker, uint64_t *dst, int n)
{
    int r = check_args(s, "nsv_metrics_worker", dst, n);
    if (r)
        return r;
    if (worker < 0 || worker >= s->nloops)
        return nsv__set_detail(s, NSV_ERANGE, "nsv_metrics_worker: worker %d outside 0..%d", worker, s->nloops - 1);
    uint64_t v[NSV_M_COUNT];
    worker_values(s, worker, v);
    return copy_out(v, dst, n);
}

/* ---- Prometheus text format 0.0.4 ---- */

/* Output that keeps counting past the end of dst, so a failed call can
 * say how much room it needed. */
typedef struct out {
    char *p;
    size_t cap, len;
} out;

static void put(out *o, const char *s, size_t n)
{
    if (o->len + n <= o->cap)
        memcpy(o->p + o->len, s, n);
    o->len += n;
}

__attribute__((format(printf, 2, 3))) static void putf(out *o, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        put(o, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

enum { COUNTER, GAUGE };

/* A family of the exposition: one metric, or several sharing a name told
 * apart by a label (label = "class", values in vals). */
typedef struct family {
    const char *name; /* without the prefix and _total */
    int type;
    int first, n;     /* metric ids first .. first + n - 1 */
    const char *label;
    const char *const *vals;
    const char *help;
} family;

static const char *const classes[] = {"1xx", "2xx", "3xx", "4xx", "5xx"};
static const char *const parse_kinds[] = {"bad_request", "head_too_large", "uri_too_long", "body_too_large", "other"};
static const char *const timeout_kinds[] = {"request", "idle", "other"};

static const family families[] = {
    {"connections_accepted", COUNTER, NSV_M_CONNS_ACCEPTED, 1, NULL, NULL, "Connections accepted."},
    {"connections_active", GAUGE, NSV_M_CONNS_ACTIVE, 1, NULL, NULL, "Connections open, accepted and outbound."},
    {"connections_refused", COUNTER, NSV_M_CONNS_REFUSED, 1, NULL, NULL,
     "Connections closed at accept (max_conns with nothing to evict, or draining)."},
    {"connections_denied", COUNTER, NSV_M_CONNS_DENIED, 1, NULL, NULL,
     "Connections closed by the listener's address lists."},
    {"connections_evicted", COUNTER, NSV_M_CONNS_EVICTED, 1, NULL, NULL, "Connections closed to make room."},
    {"requests", COUNTER, NSV_M_REQUESTS, 1, NULL, NULL, "Requests answered, by the host or the library."},
    {"responses", COUNTER, NSV_M_RESP_1XX, 5, "class", classes, "Answers by status class."},
    {"received_bytes", COUNTER, NSV_M_BYTES_IN, 1, NULL, NULL, "Bytes read from sockets (plain text)."},
    {"sent_bytes", COUNTER, NSV_M_BYTES_OUT, 1, NULL, NULL, "Bytes written to sockets (plain text)."},
    {"parse_errors", COUNTER, NSV_M_PARSE_BAD_REQUEST, 5, "kind", parse_kinds, "Requests refused by the parser."},
    {"proxy_errors", COUNTER, NSV_M_PROXY_ERRORS, 1, NULL, NULL, "PROXY headers missing, malformed or late."},
    {"timeouts", COUNTER, NSV_M_TIMEOUT_REQUEST, 3, "kind", timeout_kinds, "Timeouts by kind."},
    {"websocket_messages_received", COUNTER, NSV_M_WS_MESSAGES_IN, 1, NULL, NULL, "WebSocket data messages received."},
    {"websocket_messages_sent", COUNTER, NSV_M_WS_MESSAGES_OUT, 1, NULL, NULL, "WebSocket data messages sent."},
    {"tls_handshakes", COUNTER, NSV_M_TLS_HANDSHAKES, 1, NULL, NULL, "TLS handshakes completed."},
    {"tls_handshake_failures", COUNTER, NSV_M_TLS_FAILURES, 1, NULL, NULL, "TLS handshakes failed."},
    {"output_queued_bytes", GAUGE, NSV_M_OUTPUT_QUEUED, 1, NULL, NULL, "Bytes waiting to be sent."},
    {"events_queued", GAUGE, NSV_M_EVENTS_QUEUED, 1, NULL, NULL, "Events waiting for the host."},
    {"draining", GAUGE, NSV_M_DRAINING, 1, NULL, NULL, "1 once a drain started."},
    {"access_records_dropped", COUNTER, NSV_M_ACCESS_DROPPED, 1, NULL, NULL,
     "Access records dropped (queue full)."},
    {"tls_resumed", COUNTER, NSV_M_TLS_RESUMED, 1, NULL, NULL, "TLS handshakes that resumed a session."},
    {"http2_connections", COUNTER, NSV_M_H2_CONNS, 1, NULL, NULL, "Connections that switched to HTTP/2."},
    {"http2_streams", COUNTER, NSV_M_H2_STREAMS, 1, NULL, NULL, "HTTP/2 request streams opened."},
    {"http2_abuse", COUNTER, NSV_M_H2_ABUSE, 1, NULL, NULL, "HTTP/2 connections ended by a defence."},
};

static const struct hist {
    const char *name;
    int sum;
    const char *help;
} hists[] = {
    {"request_queued_seconds", NSV_M_LAT_QUEUED_SUM_US, "Request head complete to its answer queued."},
    {"request_flushed_seconds", NSV_M_LAT_FLUSHED_SUM_US, "Request head complete to its answer's last byte sent."},
};

/* The labels of one sample: {a="x",worker="N"}, or nothing. */
static void labels(out *o, const char *k, const char *val, int worker)
{
    if (!k && worker < 0)
        return;
    put(o, "{", 1);
    if (k)
        putf(o, "%s=\"%s\"", k, val);
    if (worker >= 0)
        putf(o, "%sworker=\"%d\"", k ? "," : "", worker);
    put(o, "}", 1);
}

static void le(char *b, size_t n, int64_t us)
{
    if (us < 0)
        snprintf(b, n, "+Inf");
    else if (us % 1000000 == 0)
        snprintf(b, n, "%lld", (long long)(us / 1000000));
    else
        snprintf(b, n, "%g", (double)us / 1e6);
}

/* The values of sample set w: the sum (per_worker 0) computed once into
 * all, else worker w's, read again for each family (no allocation; the
 * exposition is no snapshot of the set either way). */
static const uint64_t *values(nsv_server *s, int per_worker, int w, uint64_t *all, uint64_t *one)
{
    if (!per_worker)
        return all;
    worker_values(s, w, one);
    return one;
}

static void render(out *o, nsv_server *s, const char *px, size_t pl, int per_worker)
{
    uint64_t all[NSV_M_COUNT], one[NSV_M_COUNT];
    int nv = per_worker ? s->nloops : 1;
    if (!per_worker)
        sum_all(s, all);
    for (size_t f = 0; f < NSV__ARRAY_LEN(families); f++) {
        const family *fm = &families[f];
        const char *sfx = fm->type == COUNTER ? "_total" : "";
        putf(o, "# HELP %.*s%s%s %s\n", (int)pl, px, fm->name, sfx, fm->help);
        putf(o, "# TYPE %.*s%s%s %s\n", (int)pl, px, fm->name, sfx, fm->type == COUNTER ? "counter" : "gauge");
        for (int w = 0; w < nv; w++) {
            const uint64_t *x = values(s, per_worker, w, all, one);
            for (int i = 0; i < fm->n; i++) {
                putf(o, "%.*s%s%s", (int)pl, px, fm->name, sfx);
                labels(o, fm->label, fm->label ? fm->vals[i] : NULL, per_worker ? w : -1);
                putf(o, " %llu\n", (unsigned long long)x[fm->first + i]);
            }
        }
    }
    for (size_t h = 0; h < NSV__ARRAY_LEN(hists); h++) {
        const struct hist *hs = &hists[h];
        putf(o, "# HELP %.*s%s %s\n", (int)pl, px, hs->name, hs->help);
        putf(o, "# TYPE %.*s%s histogram\n", (int)pl, px, hs->name);
        for (int w = 0; w < nv; w++) {
            const uint64_t *x = values(s, per_worker, w, all, one);
            int wl = per_worker ? w : -1;
            for (int i = 0; i < NSV_M_LAT_BUCKETS; i++) {
                char b[32];
                le(b, sizeof b, nsv__lat_bound_us[i]);
                putf(o, "%.*s%s_bucket", (int)pl, px, hs->name);
                labels(o, "le", b, wl);
                putf(o, " %llu\n", (unsigned long long)x[hs->sum + 2 + i]);
            }
            uint64_t sum = x[hs->sum];
            putf(o, "%.*s%s_sum", (int)pl, px, hs->name);
            labels(o, NULL, NULL, wl);
            putf(o, " %llu.%06llu\n", (unsigned long long)(sum / 1000000), (unsigned long long)(sum % 1000000));
            putf(o, "%.*s%s_count", (int)pl, px, hs->name);
            labels(o, NULL, NULL, wl);
            putf(o, " %llu\n", (unsigned long long)x[hs->sum + 1]);
        }
    }
}

#define PREFIX_MAX 64 /* keeps "32 KiB is always enough" true */

int64_t nsv_metrics_prometheus(nsv_server *s, const char *prefix, size_t plen, int per_worker, char *dst, size_t cap)
{
    if (!s)
        return NSV_EINVAL;
    if (!prefix || plen == 0)
        prefix = "nanosrv_", plen = 8;
    if (plen > PREFIX_MAX)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_metrics_prometheus: prefix of %zu bytes, at most %d", plen,
                               PREFIX_MAX);
    for (size_t i = 0; i < plen; i++) {
        unsigned char ch = (unsigned char)prefix[i];
        int ok = ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (i && ch >= '0' && ch <= '9');
        if (!ok)
            return nsv__set_detail(s, NSV_EINVAL, "nsv_metrics_prometheus: prefix byte %zu (0x%02x) is not a letter, "
                                   "'_' or (after the first) a digit", i, ch);
    }
    if (per_worker != 0 && per_worker != 1)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_metrics_prometheus: per_worker is %d, not 0 or 1", per_worker);
    if (cap && !dst)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_metrics_prometheus: dst is NULL with cap %zu", cap);
    out o = {dst, cap, 0};
    render(&o, s, prefix, plen, per_worker);
    if (o.len > cap)
        return nsv__set_detail(s, NSV_ENOBUFS, "nsv_metrics_prometheus: %zu bytes needed, cap is %zu", o.len, cap);
    return (int64_t)o.len;
}
