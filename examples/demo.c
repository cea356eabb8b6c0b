/* demo.c - what `make run` starts on http://127.0.0.1:8080: a page with its
 * assets served from a directory (nsv_serve_dir), a file upload parsed while
 * it streams in (POST /upload, lib/upload.h), a clock pushed by server-sent
 * events (GET /clock, demo/clock.h), a WebSocket echo (/ws), small JSON,
 * chunked and echo routes, and the server's metrics in the Prometheus text
 * format (GET /metrics, docs/OPERATIONS.md).
 * Usage: demo [--port N] [--www DIR]. N 0 picks a free port; DIR defaults to
 * examples/demo/www of the tree the demo was built from (DEMO_WWW, which the
 * Makefile sets), so the demo starts from any working directory. */
#include <nanosrv.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo/clock.h"
#include "lib/upload.h"

#ifndef DEMO_WWW
#define DEMO_WWW "examples/demo/www"
#endif

enum { R_USER, R_STREAM, R_ECHO, R_HEALTH, R_WS, R_UPLOAD, R_CLOCK, R_METRICS };

static nsv_server *srv;
static void on_signal(int sig) { (void)sig; nsv_stop(srv); }

static void on_request(const nsv_event *e, const char *a)
{
    char buf[512];
    switch (e->route) {
    case R_USER: {
        uint32_t len = 0;
        int64_t off = nsv_ev_param_by_name(e, a, "id", 2, &len);
        int n = snprintf(buf, sizeof buf, "{\"id\":\"%.*s\",\"query\":\"%.*s\",\"peer\":\"%.*s\"}\n",
                         off < 0 ? 0 : (int)(len > 64 ? 64 : len), off < 0 ? "" : a + off,
                         (int)(e->query_len > 64 ? 64 : e->query_len), a + e->query_off,
                         (int)e->peer_len, a + e->peer_off);
        nsv_reply(srv, e->conn, 200, "Content-Type: application/json\r\n", 32, buf, (size_t)n);
        break;
    }
    case R_STREAM:
        nsv_reply_start(srv, e->conn, 200, "Content-Type: text/plain\r\n", 26);
        for (int i = 1; i <= 5; i++) {
            int n = snprintf(buf, sizeof buf, "chunk %d of 5\n", i);
            nsv_send_chunk(srv, e->conn, buf, (size_t)n);
        }
        nsv_reply_end(srv, e->conn);
        break;
    case R_ECHO:
        nsv_reply(srv, e->conn, 200, NULL, 0, a + e->body_off, e->body_len);
        break;
    case R_HEALTH:
        nsv_reply(srv, e->conn, 200, "Content-Type: application/json\r\n", 32, "{\"ok\":true}\n", 12);
        break;
    case R_METRICS: {
        static char text[32768]; /* enough for the server-wide text (nanosrv.h) */
        int64_t n = nsv_metrics_prometheus(srv, NULL, 0, 0, text, sizeof text);
        if (n < 0)
            nsv_reply(srv, e->conn, 500, "Content-Type: text/plain\r\n", 26, nsv_strerror((int)n),
                      strlen(nsv_strerror((int)n)));
        else
            nsv_reply(srv, e->conn, 200, "Content-Type: text/plain; version=0.0.4\r\n", 41, text, (size_t)n);
        break;
    }
    case R_UPLOAD: /* the body follows in BODY events */
        upload_begin(srv, e, a);
        break;
    case R_CLOCK:
        clock_open(srv, e);
        break;
    default:
        nsv_reply(srv, e->conn, 404, "Content-Type: text/plain\r\n", 26, "not found\n", 10);
    }
}

static void on_event(const nsv_event *e, const char *a)
{
    switch (e->type) {
    case NSV_EV_REQUEST:
        on_request(e, a);
        break;
    case NSV_EV_BODY: /* only POST /upload streams its body */
        upload_body(srv, e, a);
        break;
    case NSV_EV_WS_MESSAGE: /* /ws echoes every message with its opcode */
        nsv_ws_send(srv, e->conn, e->code, a + e->body_off, e->body_len);
        break;
    case NSV_EV_TCP_WRITABLE: /* a streamed reply backs up (0) or drained (1) */
        clock_writable(e->conn, e->code);
        break;
    case NSV_EV_HANGUP:
        clock_hangup(srv, e->conn);
        break;
    case NSV_EV_CLOSE:
        upload_gone(e->conn);
        clock_remove(e->conn);
        break;
    }
}

int main(int argc, char **argv)
{
    int port = 8080;
    const char *www = DEMO_WWW;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 < argc && !strcmp(argv[i], "--port"))
            port = atoi(argv[i + 1]);
        else if (i + 1 < argc && !strcmp(argv[i], "--www"))
            www = argv[i + 1];
        else {
            fprintf(stderr, "usage: %s [--port N] [--www DIR]\n", argv[0]);
            return 2;
        }
    }
    srv = nsv_server_new();
    nsv_set_int(srv, NSV_OPT_MAX_BODY, 256 << 20); /* uploads; the default is 1 MiB */
    nsv_route(srv, "GET", 3, "/api/users/:id", 14, R_USER, 0);
    nsv_route(srv, "GET", 3, "/stream", 7, R_STREAM, 0);
    nsv_route(srv, "POST", 4, "/echo", 5, R_ECHO, 0);
    nsv_route(srv, "GET", 3, "/health", 7, R_HEALTH, 0);
    nsv_route(srv, "GET", 3, "/ws", 3, R_WS, NSV_ROUTE_WEBSOCKET);
    nsv_route(srv, "POST", 4, "/upload", 7, R_UPLOAD, NSV_ROUTE_STREAM_BODY);
    nsv_route(srv, "GET", 3, "/clock", 6, R_CLOCK, 0);
    nsv_route(srv, "GET", 3, "/metrics", 8, R_METRICS, 0);
    /* The page and its assets; a path with no file goes on to the routes.
     * no-cache: browsers revalidate every load (ETag, 304), so edits show. */
    int r = nsv_serve_dir(srv, "/", 1, www, strlen(www), "no-cache", 8, NSV_STATIC_FALLTHROUGH);
    if (r < 0) {
        fprintf(stderr, "demo: cannot serve %s: %s %s (give the page's directory with --www DIR)\n", www,
                nsv_strerror(r), nsv_last_error_detail(srv));
        return 1;
    }
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    int lid = nsv_listen(srv, url, strlen(url));
    if (lid < 0) {
        fprintf(stderr, "demo: %s: %s\n", nsv_strerror(lid), nsv_last_error_detail(srv));
        return 1;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    printf("listening on %d\ndemo: open http://127.0.0.1:%d/ (page from %s)\n", nsv_listener_port(srv, lid),
           nsv_listener_port(srv, lid), www);
    fflush(stdout);
    static nsv_event evs[128];
    static char arena[2 << 20];
    int n;
    while ((n = nsv_poll(srv, evs, 128, arena, sizeof arena, clock_wait_ms())) >= 0) {
        for (int i = 0; i < n; i++)
            on_event(&evs[i], arena);
        clock_tick(srv);
    }
    signal(SIGTERM, SIG_IGN); /* a late signal must not reach the freed server */
    signal(SIGINT, SIG_IGN);
    nsv_server_free(srv);
    return 0;
}
