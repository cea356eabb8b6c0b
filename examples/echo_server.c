/* echo_server.c - the reference "echo contract" server.
 *
 *   echo-server --port N [--threads N] [--busy-us N] [--routes N] [--callback|--pull]
 *               [--accept reuseport|handoff]
 *               [--request-timeout-ms N] [--idle-timeout-ms N] [--max-conns N]
 *               [--max-body N] [--max-header-bytes N] [--gzip MIN]
 *               [--cert FILE --key FILE [--ca FILE | --ca-optional FILE]]
 *               [--static DIR]
 *
 * Prints "listening on PORT" once ready. POST|PUT /echo answers the body
 * byte for byte; /ws is a WebSocket echo (messages up to 16 MiB, no
 * extensions); POST /upload parses a multipart/form-data body while it
 * streams in and answers one JSON object per part (name, filename,
 * content_type, size, sha256; lib/upload.h); GET /sse?n=N streams N
 * server-sent events with data "0" ... "N-1" and ends (N up to ten million,
 * paced by TCP_WRITABLE; lib/sse_count.h); everything else gets a JSON
 * description of the request.
 * With --static DIR, files of DIR are served under /static/ (index.html,
 * ETag, Range, precompressed NAME.br / NAME.gz; docs/STATIC.md).
 * With --cert and --key it serves https and wss instead of http and ws;
 * --ca asks for client certificates signed by that CA (--ca-optional lets
 * clients without one in); the JSON then also names the SNI and the
 * verified client subject.
 * --gzip MIN compresses replies of at least MIN bytes for clients that
 * accept gzip (NSV_OPT_GZIP_MIN_SIZE; the JSON answers qualify).
 * SIGTERM/SIGINT drain: in-flight requests finish, then it exits 0. */
#include <nanosrv.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/sse_count.h"
#include "lib/upload.h"

enum { ROUTE_ECHO = 1, ROUTE_WS = 2, ROUTE_UPLOAD = 3, ROUTE_SSE = 4, ROUTE_DUMMY = 100 };

static nsv_server *srv;
static volatile sig_atomic_t got_signal;
static long busy_us;

static int callback_mode;

static void on_signal(int sig)
{
    (void)sig;
    got_signal = 1;
    if (callback_mode)
        nsv_drain_start(srv, 5000); /* syscalls and atomics only: signal-safe */
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

static void handle(nsv_server *s, const nsv_event *ev, const char *a)
{
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
    if (busy_us)
        spin(busy_us);
    if (ev->route == ROUTE_ECHO) {
        nsv_reply(s, ev->conn, 200, "Content-Type: application/octet-stream\r\n", 40,
                  a + ev->body_off, ev->body_len);
        return;
    }
    /* one per thread: in callback mode handlers run on the workers */
    static _Thread_local char out[3 * 8192 * 6 + 128 + 6 * 640]; /* + escaped SNI and subject */
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
        const char *sni = a + ev->tls_off;
        size_t sl = strlen(sni);
        k += (size_t)sprintf(out + k, ",\"sni\":");
        k += json_str(out + k, sni, sl);
        k += (size_t)sprintf(out + k, ",\"subject\":");
        k += json_str(out + k, sni + sl + 1, strlen(sni + sl + 1));
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

int main(int argc, char **argv)
{
    int port = 8080, threads = 0, routes = 0, callback = 0, verify = 0, handoff = 0;
    const char *cert = NULL, *key = NULL, *ca = NULL, *static_dir = NULL;
    struct { const char *flag, *opt, *val; } opts[] = {
        {"--request-timeout-ms", "request_timeout_ms", NULL}, {"--idle-timeout-ms", "idle_timeout_ms", NULL},
        {"--max-conns", "max_conns", NULL}, {"--max-body", "max_body", NULL},
        {"--max-header-bytes", "max_header_bytes", NULL}, {"--gzip", "gzip_min_size", NULL},
    };
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int used = 0;
        if (!strcmp(argv[i], "--callback")) {
            callback = 1;
            continue;
        }
        if (!strcmp(argv[i], "--pull")) {
            callback = -1;
            continue;
        }
        if (v && !strcmp(argv[i], "--port")) port = atoi(v), used = 1;
        else if (v && !strcmp(argv[i], "--threads")) threads = atoi(v), used = 1;
        else if (v && !strcmp(argv[i], "--busy-us")) busy_us = atol(v), used = 1;
        else if (v && !strcmp(argv[i], "--routes")) routes = atoi(v), used = 1;
        else if (v && !strcmp(argv[i], "--accept")) handoff = !strcmp(v, "handoff"), used = 1;
        else if (v && !strcmp(argv[i], "--cert")) cert = v, used = 1;
        else if (v && !strcmp(argv[i], "--key")) key = v, used = 1;
        else if (v && !strcmp(argv[i], "--ca")) ca = v, verify = 2, used = 1;
        else if (v && !strcmp(argv[i], "--ca-optional")) ca = v, verify = 1, used = 1;
        else if (v && !strcmp(argv[i], "--static")) static_dir = v, used = 1;
        for (size_t k = 0; v && !used && k < sizeof opts / sizeof opts[0]; k++)
            if (!strcmp(argv[i], opts[k].flag))
                opts[k].val = v, used = 1;
        if (!used) {
            fprintf(stderr, "usage: %s --port N [--threads N] [--busy-us N] [--routes N] [--callback|--pull]\n"
                            "       [--accept reuseport|handoff]\n"
                            "       [--request-timeout-ms N] [--idle-timeout-ms N] [--max-conns N]\n"
                            "       [--max-body N] [--max-header-bytes N] [--gzip MIN]\n"
                            "       [--cert FILE --key FILE [--ca FILE | --ca-optional FILE]]\n"
                            "       [--static DIR]\n", argv[0]);
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
    nsv_route(srv, "POST", 4, "/echo", 5, ROUTE_ECHO, 0);
    nsv_route(srv, "PUT", 3, "/echo", 5, ROUTE_ECHO, 0);
    nsv_route(srv, "GET", 3, "/ws", 3, ROUTE_WS, NSV_ROUTE_WEBSOCKET);
    nsv_route(srv, "POST", 4, "/upload", 7, ROUTE_UPLOAD, NSV_ROUTE_STREAM_BODY);
    nsv_route(srv, "GET", 3, "/sse", 4, ROUTE_SSE, 0);
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
    char url[64];
    snprintf(url, sizeof url, "%s://0.0.0.0:%d", cert && key ? "https" : "http", port);
    int lid = nsv_listen(srv, url, strlen(url));
    if (lid < 0) {
        fprintf(stderr, "echo-server: listen %s: %s (%s)\n", url, nsv_strerror(lid),
                nsv_last_error_detail(srv));
        return 1;
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
        if (got_signal)
            nsv_drain_start(srv, 5000);
        nsv_run(srv);
        signal(SIGTERM, SIG_IGN); /* a late signal must not reach the freed server */
        signal(SIGINT, SIG_IGN);
        nsv_server_free(srv);
        return 0;
    }
    enum { MAXEV = 256 };
    static nsv_event evs[MAXEV];
    size_t cap = 1 << 20;
    char *arena = malloc(cap);
    int draining = 0;
    for (;;) {
        if (got_signal && !draining) {
            draining = 1;
            nsv_drain_start(srv, 5000);
        }
        int n = nsv_poll(srv, evs, MAXEV, arena, cap, 1000);
        if (n == NSV_ENOBUFS) {
            cap = (size_t)nsv_poll_need(srv) + 4096;
            arena = realloc(arena, cap);
            continue;
        }
        if (n < 0)
            break; /* NSV_ESTOPPED after the drain */
        for (int i = 0; i < n; i++)
            handle(srv, &evs[i], arena);
    }
    free(arena);
    signal(SIGTERM, SIG_IGN); /* a late signal must not reach the freed server */
    signal(SIGINT, SIG_IGN);
    nsv_server_free(srv);
    return 0;
}
