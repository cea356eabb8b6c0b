/* options.c - the integer option table: ids, names, ranges, storage. */
#include "server.h"
#include "../ws/deflate.h"
#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef struct opt_def {
    int id;
    const char *name;
    size_t field; /* offset in nsv_server; 0 = read-only/computed */
    int64_t min, max;
} opt_def;

#define F(x) offsetof(nsv_server, x)
static const opt_def opts[] = {
    {NSV_OPT_MAX_HEADER_BYTES, "max_header_bytes", F(max_header_bytes), 256, 16 << 20},
    {NSV_OPT_MAX_HEADERS, "max_headers", F(max_headers), 1, 256},
    {NSV_OPT_MAX_URI, "max_uri", F(max_uri), 16, 1 << 20},
    {NSV_OPT_MAX_BODY, "max_body", F(max_body), 0, (int64_t)1 << 31},
    {NSV_OPT_REQUEST_TIMEOUT_MS, "request_timeout_ms", F(request_timeout_ms), 1, 86400000},
    {NSV_OPT_IDLE_TIMEOUT_MS, "idle_timeout_ms", F(idle_timeout_ms), 1, 86400000},
    {NSV_OPT_MAX_CONNS, "max_conns", F(max_conns), 1, 10000000},
    {NSV_OPT_MAX_OUTPUT, "max_output", F(max_output), 1024, (int64_t)1 << 31},
    {NSV_OPT_AUTO_404, "auto_404", F(auto_404), 0, 1},
    {NSV_OPT_WS_MAX_MESSAGE, "ws_max_message", F(ws_max_message), 125, (int64_t)1 << 31},
    {NSV_OPT_WS_PING_INTERVAL_MS, "ws_ping_interval_ms", F(ws_ping_interval_ms), 0, 86400000},
    {NSV_OPT_WS_CONTROL_EVENTS, "ws_control_events", F(ws_control_events), 0, 1},
    {NSV_OPT_WS_CLOSE_TIMEOUT_MS, "ws_close_timeout_ms", F(ws_close_timeout_ms), 1, 600000},
    {NSV_OPT_TCP_HIGH_WATER, "tcp_high_water", F(tcp_high_water), 1, (int64_t)1 << 31},
    {NSV_OPT_TCP_LOW_WATER, "tcp_low_water", F(tcp_low_water), 0, (int64_t)1 << 31},
    {NSV_OPT_CONNECT_TIMEOUT_MS, "connect_timeout_ms", F(connect_timeout_ms), 1, 86400000},
    {NSV_OPT_SHARD_ACCEPT, "shard_accept", F(shard_accept), 0, 1},
    {NSV_OPT_WORKERS, "workers", 0, 0, 0},
    {NSV_OPT_TLS_VERIFY_CLIENT, "tls_verify_client", F(tls_verify_client), 0, 2},
    {NSV_OPT_TLS_VERIFY_SERVER, "tls_verify_server", F(tls_verify_server), 0, 1},
    {NSV_OPT_TLS_HANDSHAKE_FAILURES, "tls_handshake_failures", 0, 0, 0},
    {NSV_OPT_STREAM_BODY, "stream_body", F(stream_body), 0, 1},
    {NSV_OPT_GZIP_MIN_SIZE, "gzip_min_size", F(gzip_min_size), 0, (int64_t)1 << 31},
    {NSV_OPT_GZIP_LEVEL, "gzip_level", F(gzip_level), 1, 9},
    {NSV_OPT_CONNECTIONS, "connections", 0, 0, 0},
    {NSV_OPT_REUSEPORT, "reuseport", F(reuseport), 0, 1},
    {NSV_OPT_EXPECT_MANUAL, "expect_manual", F(expect_manual), 0, 1},
    {NSV_OPT_HTTP_CONNS_PER_ORIGIN, "http_conns_per_origin", F(http_per_origin), 1, 256},
    {NSV_OPT_HTTP_POOL_IDLE_MS, "http_pool_idle_ms", F(http_pool_idle_ms), 0, 86400000},
    {NSV_OPT_HTTP_HEAD_TIMEOUT_MS, "http_head_timeout_ms", F(http_head_timeout_ms), 1, 86400000},
    {NSV_OPT_HTTP_TIMEOUT_MS, "http_timeout_ms", F(http_timeout_ms), 0, 86400000},
    {NSV_OPT_HTTP_READ_TIMEOUT_MS, "http_read_timeout_ms", F(http_read_timeout_ms), 1, 86400000},
    {NSV_OPT_HTTP_MAX_HEAD_BYTES, "http_max_head_bytes", F(http_max_head), 256, 16 << 20},
    {NSV_OPT_HTTP_MAX_HEADERS, "http_max_headers", F(http_max_headers), 1, 256},
    {NSV_OPT_HTTP_MAX_BODY, "http_max_body", F(http_max_body), 0, INT64_MAX},
    {NSV_OPT_DRAINING, "draining", 0, 0, 0},
    {NSV_OPT_METRICS_LATENCY, "metrics_latency", F(metrics_latency), 0, 1},
    {NSV_OPT_ACCESS_LOG, "access_log", F(access_log), 0, 1 << 20},
    {NSV_OPT_SHED, "shed", F(shed), 0, 1},
    {NSV_OPT_HTTP2, "http2", F(http2), 0, NSV_H2_ALL},
    {NSV_OPT_H2_MAX_STREAMS, "h2_max_streams", F(h2_max_streams), 1, 65535},
    {NSV_OPT_H2_WINDOW, "h2_window", F(h2_window), 65535, 0x7FFFFFFF},
    {NSV_OPT_H2_HPACK_TABLE, "h2_hpack_table", F(h2_hpack_table), 0, 65536},
    {NSV_OPT_H2_MAX_RESETS, "h2_max_resets", F(h2_max_resets), 1, 100000},
    {NSV_OPT_TLS_TICKETS, "tls_tickets", F(tls_tickets), 0, 1},
    {NSV_OPT_TLS_TICKET_LIFETIME_S, "tls_ticket_lifetime_s", F(tls_ticket_lifetime_s), 60, 86400},
    {NSV_OPT_TLS_SESSION_CACHE, "tls_session_cache", F(tls_session_cache), 0, 1 << 20},
    {NSV_OPT_WS_DEFLATE, "ws_deflate", F(ws_deflate), 0, 1},
    {NSV_OPT_WS_DEFLATE_MIN_SIZE, "ws_deflate_min_size", F(ws_deflate_min_size), 0, (int64_t)1 << 31},
    {NSV_OPT_WS_DEFLATE_WINDOW_BITS, "ws_deflate_window_bits", F(ws_deflate_window_bits), 8, 15},
    {NSV_OPT_H2_BODY_BUFFER, "h2_body_buffer", F(h2_body_buffer), 65536, (int64_t)1 << 62},
};
#undef F

void nsv__options_defaults(nsv_server *s)
{
    s->max_header_bytes = 16384;
    s->max_headers = 100;
    s->max_uri = 8192;
    s->max_body = 1 << 20;
    s->request_timeout_ms = 30000;
    s->idle_timeout_ms = 60000;
    s->max_conns = 10000;
    s->max_output = 4 << 20;
    s->ws_max_message = 16 << 20;
    s->ws_close_timeout_ms = 5000;
    s->tcp_high_water = 65536;
    s->tcp_low_water = 32768;
    s->connect_timeout_ms = 30000;
    s->tls_verify_server = 1; /* outbound TLS is verified unless turned off */
    s->http_per_origin = 8;
    s->http_pool_idle_ms = 30000;
    s->http_head_timeout_ms = 30000;
    s->http_read_timeout_ms = 30000;
    s->http_max_head = 65536;
    s->http_max_headers = 100;
    s->http_max_body = (int64_t)1 << 30;
    s->metrics_latency = 1;
    s->shed = 1;
    s->h2_max_streams = 100;
    s->h2_window = 1 << 20;
    s->h2_hpack_table = 4096;
    s->h2_max_resets = 200;
    s->h2_body_buffer = 8 << 20;
    s->tls_tickets = 1;
    s->tls_ticket_lifetime_s = 3600;
    s->tls_session_cache = 1000;
    s->ws_deflate_min_size = 64;
    s->ws_deflate_window_bits = 15;
    s->gzip_level = 6;        /* zlib's own default: most of level 9's gain at a fraction of its cost */
}

static const opt_def *find(int id)
{
    for (size_t i = 0; i < NSV__ARRAY_LEN(opts); i++)
        if (opts[i].id == id)
            return &opts[i];
    return NULL;
}

int nsv_set_int(nsv_server *s, int opt, int64_t v)
{
    if (!s)
        return NSV_EINVAL;
    const opt_def *d = find(opt);
    if (!d)
        return nsv__set_detail(s, NSV_EINVAL, "unknown option id %d", opt);
    if (!d->field)
        return nsv__set_detail(s, NSV_EINVAL, "option %s is read-only", d->name);
    if (v < d->min || v > d->max)
        return nsv__set_detail(s, NSV_ERANGE, "option %s: %lld outside %lld..%lld", d->name,
                               (long long)v, (long long)d->min, (long long)d->max);
    if (opt == NSV_OPT_HTTP2 && v > 0 && !nsv_http2_available())
        return nsv__set_detail(s, NSV_ENOTSUP, "option http2: this libnanosrv was built without nghttp2 "
                               "(install libnghttp2-dev and rebuild)");
    if (opt == NSV_OPT_WS_DEFLATE && v > 0 && !nsv__pmd_available())
        return nsv__set_detail(s, NSV_ENOTSUP, "option ws_deflate: this libnanosrv was built without zlib "
                               "(install zlib1g-dev and rebuild)");
    if (opt == NSV_OPT_GZIP_MIN_SIZE && v > 0 && !nsv__gzip_available())
        return nsv__set_detail(s, NSV_ENOTSUP, "option gzip_min_size: this libnanosrv was built without zlib "
                               "(install zlib1g-dev and rebuild)");
    char what[64];
    snprintf(what, sizeof what, "nsv_set_int(%s)", d->name);
    int r = nsv__setup_begin(s, what, "set options");
    if (r)
        return r;
    /* The water marks stay a pair with low <= high at every step. */
    if (opt == NSV_OPT_TCP_LOW_WATER && v > s->tcp_high_water)
        r = nsv__set_detail(s, NSV_ERANGE,
                            "option tcp_low_water: %lld is above tcp_high_water (%lld); "
                            "raise tcp_high_water first", (long long)v, (long long)s->tcp_high_water);
    else if (opt == NSV_OPT_TCP_HIGH_WATER && v < s->tcp_low_water)
        r = nsv__set_detail(s, NSV_ERANGE,
                            "option tcp_high_water: %lld is below tcp_low_water (%lld); "
                            "lower tcp_low_water first", (long long)v, (long long)s->tcp_low_water);
    else
        *(int64_t *)((char *)s + d->field) = v;
    nsv__setup_end(s);
    return r;
}

int64_t nsv_get_int(nsv_server *s, int opt)
{
    if (!s)
        return NSV_EINVAL;
    const opt_def *d = find(opt);
    if (!d)
        return NSV_EINVAL;
    if (opt == NSV_OPT_WORKERS)
        return s->sharded ? s->nloops : 0;
    if (opt == NSV_OPT_TLS_HANDSHAKE_FAILURES)
        return atomic_load(&s->tls_failures);
    if (opt == NSV_OPT_CONNECTIONS)
        return atomic_load(&s->nconns);
    if (opt == NSV_OPT_DRAINING)
        return atomic_load(&s->draining) ? 1 : 0;
    return *(int64_t *)((char *)s + d->field);
}

int nsv_opt_by_name(const char *name, size_t len)
{
    if (!name)
        return NSV_EINVAL;
    if (len > 8 && nsv__strncaseeq(name, "NSV_OPT_", 8)) {
        name += 8;
        len -= 8;
    }
    for (size_t i = 0; i < NSV__ARRAY_LEN(opts); i++)
        if (strlen(opts[i].name) == len && nsv__strncaseeq(opts[i].name, name, len))
            return opts[i].id;
    int nsv__str_opt_by_name(const char *name, size_t len);
    return nsv__str_opt_by_name(name, len);
}
