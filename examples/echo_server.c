/* echo_server.c - the reference "echo contract" server.
 *
 *   echo-server [--port N | --listen-fd N] [--threads N] [--busy-us N] [--routes N]
 *               [--callback|--pull] [--accept reuseport|handoff] [--reuseport]
 *               [--request-timeout-ms N] [--idle-timeout-ms N] [--max-conns N]
 *               [--max-body N] [--max-header-bytes N] [--gzip MIN] [--shed 0|1]
 *               [--cert FILE --key FILE [--ca FILE | --ca-optional FILE]]
 *               [--static DIR] [--proxy-protocol] [--proxy-from CIDRS]
 *               [--allow CIDRS] [--deny CIDRS] [--access-log common|combined|json]
 *               [--drain-ms N] [--no-metrics-latency] [--no-ws-deflate] [--help]
 *
 * Prints "listening on PORT" once ready. POST|PUT /echo answers the body
 * byte for byte; /ws is a WebSocket echo (messages up to 16 MiB,
 * permessage-deflate when the client offers it, unless --no-ws-deflate); POST /upload parses a multipart/form-data body while it
 * streams in and answers one JSON object per part (name, filename,
 * content_type, size, sha256; lib/upload.h); GET /sse?n=N streams N
 * server-sent events with data "0" ... "N-1" and ends (N up to ten million,
 * paced by TCP_WRITABLE; lib/sse_count.h); GET /metrics answers the
 * server's metrics in the Prometheus text format; GET /healthz answers
 * "ok", GET /readyz "ready", or 503 "draining" once SIGTERM started the
 * drain (for keep-alive connections a front still holds); everything else
 * gets a JSON description of the request: method, path, query, body_len,
 * the client's peer and peer_port, and "front" (the load balancer's
 * address) when a PROXY protocol header named the client.
 * With --static DIR, files of DIR are served under /static/ (index.html,
 * ETag, Range, precompressed NAME.br / NAME.gz; docs/STATIC.md).
 * With --cert and --key it serves https and wss instead of http and ws;
 * --ca asks for client certificates signed by that CA (--ca-optional lets
 * clients without one in); the JSON then also names the SNI and the
 * verified client subject.
 * --gzip MIN compresses replies of at least MIN bytes for clients that
 * accept gzip (NSV_OPT_GZIP_MIN_SIZE; the JSON answers qualify).
 * Behind a load balancer (docs/OPERATIONS.md): --proxy-protocol makes every
 * connection start with a PROXY protocol header (v1 or v2); --proxy-from
 * lists the fronts allowed to connect; --allow and --deny are client
 * address lists ("10.0.0.0/8, ::1"). --reuseport lets several processes
 * bind the port; --listen-fd N serves the listening socket N instead of
 * binding one; with neither --port nor --listen-fd, sockets passed by
 * systemd socket activation (LISTEN_FDS) are served. --access-log writes
 * one line per request to stdout, after the "listening on" line
 * (lib/access_format.h). --no-metrics-latency turns the latency histograms
 * off; --shed 0 refuses new connections at --max-conns instead of closing
 * idle ones for room.
 * SIGTERM/SIGINT drain: in-flight requests finish, then it exits 0
 * (--drain-ms, default 5000, bounds the drain). */
#include <nanosrv.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/access_format.h"
#include "lib/sse_count.h"
#include "lib/upload.h"

enum {
    ROUTE_ECHO = 1, ROUTE_WS = 2, ROUTE_UPLOAD = 3, ROUTE_SSE = 4, ROUTE_METRICS = 5, ROUTE_HEALTHZ = 6,
    ROUTE_READYZ = 7, ROUTE_DUMMY = 100
};
enum { TAG_ACCESS_LOG = 1 };

static nsv_server *srv;
static volatile sig_atomic_t got_signal;
static long busy_us;
static int drain_ms = 5000;
static int access_fmt; /* ACCESS_*: --access-log */

static int callback_mode;

static void on_signal(int sig)
{
    (void)sig;
    got_signal = 1;
    if (callback_mode)
        nsv_drain_start(srv, drain_ms); /* syscalls and atomics only: signal-safe */
    else
        nsv_wakeup(srv);
}

static void spin(long us)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

/* Append s as a JSON string body (escaped). */
static size_t json_str(char *o, const char *s, size_t n)
{
    size_t k = 0;
    o[k++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            o[k++] = '\\';
            o[k++] = (char)ch;
        } else if (ch < 0x20) {
            static const char hex[] = "0123456789abcdef";
            memcpy(o + k, "\\u00", 4);
            o[k + 4] = hex[ch >> 4];
            o[k + 5] = hex[ch & 15];
            k += 6;
        } else {
            o[k++] = (char)ch;
        }
    }
    o[k++] = '"';
    return k;
}

/* Append a literal; cheaper than sprintf on the per-request path. */
static size_t lit(char *o, const char *s)
{
    size_t n = strlen(s);
    memcpy(o, s, n);
    return n;
}

static size_t uint_str(char *o, uint32_t v)
{
    char t[12];
    size_t n = 0, k = 0;
    do {
        t[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        o[k++] = t[--n];
    return k;
}

/* GET /metrics: the Prometheus text exposition. */
static void reply_metrics(nsv_server *s, uint64_t conn)
{
    size_t cap = 32768; /* enough for the server-wide text (nanosrv.h) */
    char *text = malloc(cap);
    int64_t n = text ? nsv_metrics_prometheus(s, NULL, 0, 0, text, cap) : NSV_ENOMEM;
    if (n < 0) {
        const char *why = nsv_strerror((int)n);
        nsv_reply(s, conn, 500, "Content-Type: text/plain\r\n", 26, why, strlen(why));
    } else {
        nsv_reply(s, conn, 200, "Content-Type: text/plain; version=0.0.4\r\n", 41, text, (size_t)n);
    }
    free(text);
}

/* The i-th NUL-terminated field of an event's tls block, or "" past it. */
static const char *tls_field(const nsv_event *ev, const char *a, int i, size_t *len)
{
    const char *p = a + ev->tls_off, *end = p + ev->tls_len;
    for (; p < end; i--) {
        const char *z = memchr(p, 0, (size_t)(end - p));
        if (!z)
            break;
        if (!i) {
            *len = (size_t)(z - p);
            return p;
        }
        p = z + 1;
    }
    *len = 0;
    return "";
}

static void handle(nsv_server *s, const nsv_event *ev, const char *a)
{
    if (ev->type == NSV_EV_TIMER) { /* callback mode: the access log's turn */
        access_log_write(s, access_fmt, stdout);
        return;
    }
    if (ev->type == NSV_EV_WS_MESSAGE) { /* /ws echoes every message with its opcode */
        nsv_ws_send(s, ev->conn, ev->code, a + ev->body_off, ev->body_len);
        return;
    }
    if (ev->type == NSV_EV_BODY) { /* only POST /upload streams its body */
        upload_body(s, ev, a);
        return;
    }
    if (ev->type == NSV_EV_TCP_WRITABLE) { /* a paced GET /sse stream */
        sse_writable(s, ev);
        return;
    }
    if (ev->type == NSV_EV_CLOSE || ev->type == NSV_EV_ERROR || ev->type == NSV_EV_HANGUP) {
        if (ev->type != NSV_EV_HANGUP)
            upload_gone(ev->conn);
        sse_gone(s, ev);
        return;
    }
    if (ev->type != NSV_EV_REQUEST)
        return;
    if (ev->route == ROUTE_UPLOAD) {
        upload_begin(s, ev, a);
        return;
    }
    if (ev->route == ROUTE_SSE) {
        sse_begin(s, ev, a);
        return;
    }
    if (ev->route == ROUTE_METRICS) {
        reply_metrics(s, ev->conn);
        return;
    }
    if (ev->route == ROUTE_HEALTHZ) {
        nsv_reply(s, ev->conn, 200, "Content-Type: text/plain\r\n", 26, "ok", 2);
        return;
    }
    if (ev->route == ROUTE_READYZ) { /* fails from the drain's start, before connections are refused */
        if (nsv_get_int(s, NSV_OPT_DRAINING) == 1)
            nsv_reply(s, ev->conn, 503, "Content-Type: text/plain\r\n", 26, "draining", 8);
        else
            nsv_reply(s, ev->conn, 200, "Content-Type: text/plain\r\n", 26, "ready", 5);
        return;
    }
    if (busy_us)
        spin(busy_us);
    if (ev->route == ROUTE_ECHO) {
        nsv_reply(s, ev->conn, 200, "Content-Type: application/octet-stream\r\n", 40,
                  a + ev->body_off, ev->body_len);
        return;
    }
    /* one per thread: in callback mode handlers run on the workers */
    static _Thread_local char out[3 * 8192 * 6 + 128 + 6 * 640 + 2 * 6 * 128]; /* + SNI, subject, peer, front */
    size_t k = 0;
    k += lit(out + k, "{\"method\":");
    k += json_str(out + k, a + ev->method_off, ev->method_len);
    k += lit(out + k, ",\"path\":");
    k += json_str(out + k, a + ev->path_off, ev->path_len > 8192 ? 8192 : ev->path_len);
    k += lit(out + k, ",\"query\":");
    k += json_str(out + k, a + ev->query_off, ev->query_len > 8192 ? 8192 : ev->query_len);
    k += lit(out + k, ",\"body_len\":");
    k += uint_str(out + k, ev->body_len);
    if (ev->flags & NSV_EVF_TLS) { /* block: "sni\0subject\0" */
        size_t sl, jl;
        const char *sni = tls_field(ev, a, 0, &sl), *subject = tls_field(ev, a, 1, &jl);
        k += lit(out + k, ",\"sni\":");
        k += json_str(out + k, sni, sl);
        k += lit(out + k, ",\"subject\":");
        k += json_str(out + k, subject, jl);
    }
    /* peer is the client's address, also through a PROXY protocol front */
    k += lit(out + k, ",\"peer\":");
    k += json_str(out + k, a + ev->peer_off, ev->peer_len > 128 ? 128 : ev->peer_len);
    k += lit(out + k, ",\"peer_port\":");
    k += uint_str(out + k, ev->peer_port);
    if (ev->flags & NSV_EVF_PROXY) { /* block: "sni\0subject\0front\0..." */
        size_t fl;
        const char *front = tls_field(ev, a, 2, &fl);
        k += lit(out + k, ",\"front\":");
        k += json_str(out + k, front, fl > 128 ? 128 : fl);
    }
    out[k++] = '}';
    nsv_reply(s, ev->conn, 200, "Content-Type: application/json\r\n", 32, out, k);
}

static void on_event(nsv_server *s, const nsv_event *ev, const char *arena, void *ud)
{
    (void)ud;
    handle(s, ev, arena);
}

static int set_opt(const char *name, const char *val)
{
    int id = nsv_opt_by_name(name, strlen(name));
    int r = id < 0 ? id : nsv_set_int(srv, id, atoll(val));
    if (r < 0)
        fprintf(stderr, "echo-server: --%s %s: %s\n", name, val, nsv_strerror(r));
    return r;
}

static int set_tls(int opt, const char *file)
{
    int r = nsv_set_str(srv, opt, file, strlen(file));
    if (r < 0)
        fprintf(stderr, "echo-server: %s: %s (%s)\n", file, nsv_strerror(r), nsv_last_error_detail(srv));
    return r;
}

static const char usage[] =
    "usage: %s [--port N | --listen-fd N] [--threads N] [--busy-us N] [--routes N] [--callback|--pull]\n"
    "       [--accept reuseport|handoff] [--reuseport]\n"
    "       [--request-timeout-ms N] [--idle-timeout-ms N] [--max-conns N]\n"
    "       [--max-body N] [--max-header-bytes N] [--gzip MIN] [--shed 0|1]\n"
    "       [--cert FILE --key FILE [--ca FILE | --ca-optional FILE]]\n"
    "       [--static DIR] [--proxy-protocol] [--proxy-from CIDRS] [--allow CIDRS] [--deny CIDRS]\n"
    "       [--access-log common|combined|json] [--drain-ms N] [--no-metrics-latency] [--no-http2]\n"
    "       [--no-ws-deflate]\n"
    "Without --port or --listen-fd it serves the sockets of systemd socket activation\n"
    "(LISTEN_FDS) when there are some, else port 8080.\n";

/* Listener options of one listener: the PROXY protocol and address lists. */
static int set_edge(int lid, int proxy, const char *lists[3])
{
    static const int ids[3] = {NSV_LOPT_PROXY_FROM, NSV_LOPT_ALLOW, NSV_LOPT_DENY};
    static const char *flags[3] = {"--proxy-from", "--allow", "--deny"};
    if (proxy && nsv_listener_set_int(srv, lid, NSV_LOPT_PROXY_PROTOCOL, NSV_PROXY_ANY) < 0) {
        fprintf(stderr, "echo-server: --proxy-protocol: %s\n", nsv_last_error_detail(srv));
        return -1;
    }
    for (int i = 0; i < 3; i++)
        if (lists[i] && nsv_listener_set_str(srv, lid, ids[i], lists[i], strlen(lists[i])) < 0) {
            fprintf(stderr, "echo-server: %s %s: %s\n", flags[i], lists[i], nsv_last_error_detail(srv));
            return -1;
        }
    return 0;
}

int main(int argc, char **argv)
{
    int port = 8080, threads = 0, routes = 0, callback = 0, verify = 0, handoff = 0;
    int port_given = 0, listen_fd = -1, proxy = 0, reuseport = 0, no_latency = 0, no_http2 = 0;
    const char *cert = NULL, *key = NULL, *ca = NULL, *static_dir = NULL;
    int no_ws_deflate = 0;
    const char *lists[3] = {NULL, NULL, NULL}; /* --proxy-from, --allow, --deny */
    struct { const char *flag, *opt, *val; } opts[] = {
        {"--request-timeout-ms", "request_timeout_ms", NULL}, {"--idle-timeout-ms", "idle_timeout_ms", NULL},
        {"--max-conns", "max_conns", NULL}, {"--max-body", "max_body", NULL},
        {"--max-header-bytes", "max_header_bytes", NULL}, {"--gzip", "gzip_min_size", NULL},
        {"--shed", "shed", NULL},
    };
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int used = 0;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf(usage, argv[0]);
            return 0;
        }
        if (!strcmp(argv[i], "--callback") || !strcmp(argv[i], "--pull")) {
            callback = argv[i][2] == 'c' ? 1 : -1;
            continue;
        }
        if (!strcmp(argv[i], "--proxy-protocol")) {
            proxy = 1;
            continue;
        }
        if (!strcmp(argv[i], "--reuseport")) {
            reuseport = 1;
            continue;
        }
        if (!strcmp(argv[i], "--no-ws-deflate")) {
            no_ws_deflate = 1;
            continue;
        }
        if (!strcmp(argv[i], "--no-metrics-latency")) {
            no_latency = 1;
            continue;
        }
        if (!strcmp(argv[i], "--no-http2")) {
            no_http2 = 1;
            continue;
        }
        if (v && !strcmp(argv[i], "--port")) port = atoi(v), port_given = used = 1;
        else if (v && !strcmp(argv[i], "--listen-fd")) listen_fd = atoi(v), used = 1;
        else if (v && !strcmp(argv[i], "--threads")) threads = atoi(v), used = 1;
        else if (v && !strcmp(argv[i], "--busy-us")) busy_us = atol(v), used = 1;
        else if (v && !strcmp(argv[i], "--routes")) routes = atoi(v), used = 1;
        else if (v && !strcmp(argv[i], "--accept")) handoff = !strcmp(v, "handoff"), used = 1;
        else if (v && !strcmp(argv[i], "--cert")) cert = v, used = 1;
        else if (v && !strcmp(argv[i], "--key")) key = v, used = 1;
        else if (v && !strcmp(argv[i], "--ca")) ca = v, verify = 2, used = 1;
        else if (v && !strcmp(argv[i], "--ca-optional")) ca = v, verify = 1, used = 1;
        else if (v && !strcmp(argv[i], "--static")) static_dir = v, used = 1;
        else if (v && !strcmp(argv[i], "--proxy-from")) lists[0] = v, used = 1;
        else if (v && !strcmp(argv[i], "--allow")) lists[1] = v, used = 1;
        else if (v && !strcmp(argv[i], "--deny")) lists[2] = v, used = 1;
        else if (v && !strcmp(argv[i], "--drain-ms")) drain_ms = atoi(v), used = 1;
        else if (v && !strcmp(argv[i], "--access-log")) used = (access_fmt = access_format_by_name(v)) > 0;
        for (size_t k = 0; v && !used && k < sizeof opts / sizeof opts[0]; k++)
            if (!strcmp(argv[i], opts[k].flag))
                opts[k].val = v, used = 1;
        if (!used || drain_ms < 0 || (port_given && listen_fd >= 0)) {
            fprintf(stderr, usage, argv[0]);
            return 2;
        }
        i++;
    }
    srv = threads > 0 ? nsv_server_new_sharded(threads) : nsv_server_new();
    if (!srv) {
        fprintf(stderr, "echo-server: cannot create server\n");
        return 1;
    }
    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++)
        if (opts[k].val && set_opt(opts[k].opt, opts[k].val) < 0)
            return 2;
    if (handoff) /* one acceptor hands connections to the workers */
        nsv_set_int(srv, NSV_OPT_SHARD_ACCEPT, 1);
    if (reuseport)
        nsv_set_int(srv, NSV_OPT_REUSEPORT, 1);
    if (no_latency)
        nsv_set_int(srv, NSV_OPT_METRICS_LATENCY, 0);
    if (access_fmt)
        nsv_set_int(srv, NSV_OPT_ACCESS_LOG, 4096);
    if (!no_ws_deflate) /* permessage-deflate on /ws; NSV_ENOTSUP without zlib: plain */
        nsv_set_int(srv, NSV_OPT_WS_DEFLATE, 1);
    /* HTTP/2 when the library has it: h2c (prior knowledge and Upgrade) on
     * the plain port, h2 by ALPN on the TLS port. */
    if (!no_http2 && nsv_http2_available())
        nsv_set_int(srv, NSV_OPT_HTTP2, NSV_H2_ALL);
    nsv_route(srv, "POST", 4, "/echo", 5, ROUTE_ECHO, 0);
    nsv_route(srv, "PUT", 3, "/echo", 5, ROUTE_ECHO, 0);
    nsv_route(srv, "GET", 3, "/ws", 3, ROUTE_WS, NSV_ROUTE_WEBSOCKET);
    nsv_route(srv, "POST", 4, "/upload", 7, ROUTE_UPLOAD, NSV_ROUTE_STREAM_BODY);
    nsv_route(srv, "GET", 3, "/sse", 4, ROUTE_SSE, 0);
    nsv_route(srv, "GET", 3, "/metrics", 8, ROUTE_METRICS, 0);
    nsv_route(srv, "GET", 3, "/healthz", 8, ROUTE_HEALTHZ, 0);
    nsv_route(srv, "GET", 3, "/readyz", 7, ROUTE_READYZ, 0);
    if (static_dir) {
        int m = nsv_serve_dir(srv, "/static/", 8, static_dir, strlen(static_dir), NULL, 0, NSV_STATIC_PRECOMPRESSED);
        if (m < 0) {
            fprintf(stderr, "echo-server: --static %s: %s (%s)\n", static_dir, nsv_strerror(m),
                    nsv_last_error_detail(srv));
            return 2;
        }
    }
    for (int i = 0; i < routes; i++) {
        char pat[64];
        int n = snprintf(pat, sizeof pat, "/dummy/%d/:id", i);
        nsv_route(srv, "GET", 3, pat, (size_t)n, ROUTE_DUMMY, 0);
    }
    if (cert && key && (set_tls(NSV_OPT_TLS_CERT_FILE, cert) < 0 || set_tls(NSV_OPT_TLS_KEY_FILE, key) < 0 ||
                        (ca && set_tls(NSV_OPT_TLS_CA_FILE, ca) < 0) ||
                        nsv_set_int(srv, NSV_OPT_TLS_VERIFY_CLIENT, verify) < 0))
        return 2;
    /* The sockets: --listen-fd N, else systemd's (descriptors 3 .. 3 + n - 1)
     * when neither flag names one, else a socket of our own on the port. */
    int first_fd = listen_fd, nfds = listen_fd >= 0;
    if (!port_given && listen_fd < 0) {
        int n = nsv_inherited_fds(1);
        if (n < 0) {
            fprintf(stderr, "echo-server: LISTEN_FDS: %s\n", nsv_strerror(n));
            return 2;
        }
        if (n > 0)
            first_fd = 3, nfds = n;
    }
    const char *scheme = cert && key ? "https" : "http";
    char url[64];
    int lid = -1;
    for (int i = 0; i < (nfds ? nfds : 1); i++) {
        int id;
        if (nfds) { /* port 0: whatever port the socket is bound to */
            snprintf(url, sizeof url, "%s://0.0.0.0:0", scheme);
            id = nsv_listen_fd(srv, url, strlen(url), first_fd + i);
        } else {
            snprintf(url, sizeof url, "%s://0.0.0.0:%d", scheme, port);
            id = nsv_listen(srv, url, strlen(url));
        }
        if (id < 0) {
            if (nfds)
                fprintf(stderr, "echo-server: listening socket %d: %s (%s)\n", first_fd + i, nsv_strerror(id),
                        nsv_last_error_detail(srv));
            else
                fprintf(stderr, "echo-server: listen %s: %s (%s)\n", url, nsv_strerror(id),
                        nsv_last_error_detail(srv));
            return 1;
        }
        if (set_edge(id, proxy, lists) < 0)
            return 2;
        if (lid < 0)
            lid = id;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    printf("listening on %d\n", nsv_listener_port(srv, lid));
    fflush(stdout);

    /* With worker threads a C program answers on the workers themselves
     * (callback mode), so handler work runs in parallel; --pull keeps the
     * host-thread model the bindings use. */
    if (callback > 0 || (threads > 0 && callback == 0)) {
        callback_mode = 1;
        nsv_set_callback(srv, on_event, NULL);
        if (access_fmt) /* the callback runs on the workers: the log gets a timer's turn */
            nsv_timer_add(srv, 100, 100, TAG_ACCESS_LOG);
        if (got_signal)
            nsv_drain_start(srv, drain_ms);
        nsv_run(srv);
        signal(SIGTERM, SIG_IGN); /* a late signal must not reach the freed server */
        signal(SIGINT, SIG_IGN);
        if (access_fmt)
            access_log_write(srv, access_fmt, stdout);
        nsv_server_free(srv);
        return 0;
    }
    enum { MAXEV = 256 };
    static nsv_event evs[MAXEV];
    size_t cap = 1 << 20;
    char *arena = malloc(cap);
    int draining = 0;
    /* Sharded replies are recorded by the workers after the batch: a short
     * wait takes their records soon enough. */
    int wait_ms = access_fmt ? 100 : 1000;
    for (;;) {
        if (got_signal && !draining) {
            draining = 1;
            nsv_drain_start(srv, drain_ms);
        }
        int n = nsv_poll(srv, evs, MAXEV, arena, cap, wait_ms);
        if (n == NSV_ENOBUFS) {
            cap = (size_t)nsv_poll_need(srv) + 4096;
            arena = realloc(arena, cap);
            continue;
        }
        if (n < 0)
            break; /* NSV_ESTOPPED after the drain */
        for (int i = 0; i < n; i++)
            handle(srv, &evs[i], arena);
        if (access_fmt)
            access_log_write(srv, access_fmt, stdout);
    }
    if (access_fmt)
        access_log_write(srv, access_fmt, stdout);
    free(arena);
    signal(SIGTERM, SIG_IGN); /* a late signal must not reach the freed server */
    signal(SIGINT, SIG_IGN);
    nsv_server_free(srv);
    return 0;
}
