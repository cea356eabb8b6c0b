/* http_proxy.c - a streaming HTTP/1.1 and WebSocket reverse proxy on the
 * library's server and its HTTP client:
 *
 *   http-proxy --listen PORT --to http://HOST:PORT [--bind ADDR] [--workers N]
 *              [--max-body BYTES] [--connect-timeout-ms N] [--head-timeout-ms N]
 *              [--read-timeout-ms N] [--request-timeout-ms N] [--idle-timeout-ms N]
 *              [--conns-per-origin N] [--pool-idle-ms N] [--host-header client|upstream]
 *              [--ca FILE] [--insecure] [--http2]
 *
 * --http2 also takes h2c clients (prior knowledge and Upgrade: h2c) on the
 * listening port; upstream requests stay HTTP/1.1. --to may be https:// (certificate and name verified against --ca, default
 * the system bundle; --insecure turns that off). --listen 0 picks a port;
 * "listening on PORT" is printed once ready. SIGTERM/SIGINT drain (5 s).
 * The rules (which headers cross, what is added, the error statuses,
 * backpressure, WebSocket pass-through) are in docs/PROXY.md. Beside this
 * file: lib/proxy_headers.h (header rewriting), lib/proxy_xchg.h (the
 * exchanges), lib/proxy_ws.h (WebSocket relay), lib/proxy_map.h (id table).
 *
 * Flow: each client request is one exchange. Its body (NSV_OPT_STREAM_BODY)
 * goes upstream piece by piece; when the upstream connection is full
 * (NSV_EAGAIN) the piece waits in the exchange and the client's connection
 * stops being read (nsv_pause_read) until the request's TCP_WRITABLE. The
 * response comes back the same way: pieces go out with nsv_send_chunk, and
 * the upstream response is paused (nsv_http_pause) from the client
 * connection's TCP_WRITABLE code 0 (or an NSV_EAGAIN) to its code 1. So at
 * most one read per direction waits in the proxy, whatever the body sizes
 * and speeds. A response that arrives whole in one piece goes out with one
 * nsv_reply. */
#include <nanosrv.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/proxy_ws.h"
#include "lib/proxy_xchg.h"

static struct {
    char origin[600], ws_origin[600];
    const char *proto;
    int host_upstream;
} cfg;

static nsv_server *srv;

static void end_response(nsv_server *s, xchg *x);

/* The proxy's own answer in an exchange: at once when the client's body is
 * complete, else as a stream whose end waits for the rest of the body
 * (end_response says why). */
static void answer_x(nsv_server *s, xchg *x, int status, const char *text)
{
    x->up_done = 1;
    x->req_started = 1; /* no (new) upstream request for the rest of the body */
    if (!x->req_open) {
        unblock(s, x);
        answer(s, x->down, status, text);
        finish(s, x);
        return;
    }
    char h[160];
    size_t n = strlen(text);
    int k = snprintf(h, sizeof h, "Content-Type: text/plain; charset=utf-8\r\nCache-Control: no-store\r\n"
                     "Content-Length: %zu\r\n", n);
    if (nsv_reply_start(s, x->down, status, h, (size_t)k) < 0 || nsv_send_chunk(s, x->down, text, n) < 0) {
        finish(s, x);
        return;
    }
    x->resp = RESP_STREAM;
    end_response(s, x);
}

/* The text of a 502 or 504 for an upstream failure; returns the status. */
static int error_text(int code, const char *what, char *t, size_t cap)
{
    int st = code == NSV_ETIMEDOUT ? 504 : 502;
    snprintf(t, cap, "%s: %s (%s)\n", st == 504 ? "504 Gateway Timeout" : "502 Bad Gateway", what, nsv_errname(code));
    return st;
}

static int start_upstream(nsv_server *s, xchg *x, const char *m, size_t ml, const char *url, size_t ul,
                          const char *h, size_t hl, const char *body, size_t blen, int stream)
{
    uint32_t flags = (stream ? NSV_HTTP_STREAM_BODY : 0) | (x->pass_host ? NSV_HTTP_HOST_HEADER : 0);
    int64_t id = nsv_http_request(s, m, ml, url, ul, h, hl, body, blen, stream ? x->req_cl : -1, flags);
    if (id < 0) {
        /* A request the client cannot frame (a target or header the client
         * refuses to send) is the client's fault; anything else is ours. */
        if (id == NSV_EINVAL || id == NSV_EURL)
            answer_x(s, x, 400, "400 Bad Request: the request cannot be forwarded\n");
        else if (id == NSV_ESTOPPED)
            answer_x(s, x, 503, "503 Service Unavailable: the proxy is stopping\n");
        else
            answer_x(s, x, 502, "502 Bad Gateway: cannot start the request\n");
        return -1;
    }
    x->up = (uint64_t)id;
    x->req_started = 1;
    if (pm_put(&ts->xm, x->up, x)) {
        nsv_http_cancel(s, x->up);
        x->up_done = 1;
        answer(s, x->down, 503, "503 Service Unavailable: out of memory\n");
        finish(s, x);
        return -1;
    }
    return 0;
}

/* ---- request side ---- */

static int64_t header_int(const nsv_event *e, const char *a, const char *name)
{
    uint32_t vl;
    int64_t off = nsv_ev_header(e, a, name, strlen(name), &vl);
    if (off < 0)
        return -1;
    int64_t v = 0;
    for (uint32_t i = 0; i < vl && a[off + i] >= '0' && a[off + i] <= '9'; i++)
        v = v * 10 + (a[off + i] - '0');
    return v;
}

static int build_url(const char *origin, const nsv_event *e, const char *a)
{
    ts->ub.len = 0;
    int r = pb_add(&ts->ub, origin, strlen(origin)) || pb_add(&ts->ub, a + e->path_off, e->path_len);
    if (!r && e->query_len)
        r = pb_lit(&ts->ub, "?") || pb_add(&ts->ub, a + e->query_off, e->query_len);
    return r ? -1 : 0;
}

static void on_request(nsv_server *s, const nsv_event *e, const char *a)
{
    const char *m = a + e->method_off;
    size_t ml = e->method_len;
    if (!e->path_len || a[e->path_off] != '/') { /* "*" and authority forms */
        answer(s, e->conn, ph_ieq(m, ml, "connect") ? 405 : 400, "the proxy forwards origin-form targets only\n");
        return;
    }
    xchg *x = calloc(1, sizeof *x);
    if (!x || pm_put(&ts->xm, e->conn, x)) {
        free(x);
        answer(s, e->conn, 503, "503 Service Unavailable: out of memory\n");
        return;
    }
    x->down = e->conn;
    x->down_open = 1;
    x->head = (e->flags & NSV_EVF_HEAD) != 0;
    int ws = (e->flags & NSV_EVF_UPGRADE) != 0;
    ph_fwd f = {a + e->peer_off, e->peer_len, cfg.proto, ws};
    const char *host;
    size_t hlen;
    ts->hb.len = 0;
    if (ph_request(&ts->hb, e, a, &f, &host, &hlen) || build_url(ws ? cfg.ws_origin : cfg.origin, e, a)) {
        answer(s, e->conn, 503, "503 Service Unavailable: out of memory\n");
        xfree(s, x);
        return;
    }
    /* The client's Host goes upstream unless --host-header upstream (the
     * server side already checked it: one Host, a valid authority). A
     * WebSocket upstream gets the --to authority: nsv_ws_connect writes its
     * own Host. */
    if (!cfg.host_upstream && !ws && hlen) {
        if (pb_add(&ts->hb, "Host: ", 6) || pb_add(&ts->hb, host, hlen) || pb_add(&ts->hb, "\r\n", 2)) {
            answer(s, e->conn, 503, "503 Service Unavailable: out of memory\n");
            xfree(s, x);
            return;
        }
        x->pass_host = 1;
    }
    if (ws) {
        ws_start(s, x, e, a);
        return;
    }
    if (e->flags & NSV_EVF_STREAM_BODY) {
        /* Started at the first piece: a body that comes in one read goes
         * upstream in one piece, which the client may retry on a fresh
         * connection if a pooled one turns out dead. */
        x->req_open = 1;
        x->req_cl = (e->flags & NSV_EVF_CHUNKED) ? -1 : header_int(e, a, "content-length");
        x->start_url = ml + 1;
        x->start_hdr = x->start_url + ts->ub.len + 1;
        if (pb_add(&x->start, m, ml) || pb_add(&x->start, "", 1) || pb_add(&x->start, ts->ub.p, ts->ub.len) ||
            pb_add(&x->start, "", 1) || pb_add(&x->start, ts->hb.p, ts->hb.len)) {
            answer(s, e->conn, 503, "503 Service Unavailable: out of memory\n");
            xfree(s, x);
        }
        return;
    }
    start_upstream(s, x, m, ml, ts->ub.p, ts->ub.len, ts->hb.p, ts->hb.len, a + e->body_off, e->body_len, 0);
}

static void send_req_piece(nsv_server *s, xchg *x, const char *d, size_t n, int eof)
{
    if (n) {
        int r = nsv_http_request_body(s, x->up, d, n);
        if (r == NSV_EAGAIN) {
            x->preq.len = 0;
            if (pb_add(&x->preq, d, n)) {
                nsv_abort(s, x->down);
                return;
            }
            x->req_eof = (uint8_t)eof;
            x->req_blocked = 1;
            nsv_pause_read(s, x->down, 1);
            return;
        }
        if (r < 0)
            return; /* the upstream request ended (it answered early): the rest is dropped */
    }
    if (eof)
        nsv_http_request_end(s, x->up);
}

static void on_req_body(nsv_server *s, xchg *x, const nsv_event *e, const char *a)
{
    const char *d = a + e->body_off;
    size_t n = e->body_len;
    int eof = (e->flags & NSV_EVF_EOF) != 0;
    if (eof)
        x->req_open = 0;
    if (x->up_done && x->req_started) {
        if (eof && x->end_wait) { /* the whole body was read: the answer may end now */
            nsv_reply_end(s, x->down);
            finish(s, x);
        }
        return; /* the upstream does not want the rest: dropped */
    }
    if (!x->req_started) {
        const char *p = x->start.p;
        int whole = eof && (x->req_cl < 0 || (int64_t)n == x->req_cl);
        if (start_upstream(s, x, p, x->start_url - 1, p + x->start_url, x->start_hdr - x->start_url - 1,
                           p + x->start_hdr, x->start.len - x->start_hdr, whole ? d : NULL, whole ? n : 0,
                           !whole))
            return;
        free(x->start.p);
        x->start = (pbuf){0};
        if (whole)
            return;
    }
    if (x->req_blocked) { /* a read that was already under way when reading stopped */
        if (pb_add(&x->preq, d, n))
            nsv_abort(s, x->down);
        x->req_eof |= (uint8_t)eof;
        return;
    }
    send_req_piece(s, x, d, n, eof);
}

/* The upstream connection has room again for the request body. */
static void on_up_writable(nsv_server *s, xchg *x)
{
    if (!x->req_blocked)
        return;
    int r = x->preq.len ? nsv_http_request_body(s, x->up, x->preq.p, x->preq.len) : 0;
    if (r == NSV_EAGAIN)
        return;
    x->preq.len = 0;
    x->req_blocked = 0;
    if (x->req_eof && r == 0)
        nsv_http_request_end(s, x->up);
    nsv_pause_read(s, x->down, 0);
}

/* ---- response side ---- */

static void on_response(nsv_server *s, xchg *x, const nsv_event *e, const char *a)
{
    int64_t cl;
    x->rhead.len = 0;
    if (e->code == 101 || ph_response(&x->rhead, e, a, &cl)) {
        answer_x(s, x, 502, "502 Bad Gateway: the upstream switched protocols\n");
        return;
    }
    x->status = e->code;
    x->resp_cl = cl;
    /* the upstream's reason phrase, unless it is the usual one */
    if (e->path_len && !(e->code == 200 && e->path_len == 2 && !memcmp(a + e->path_off, "OK", 2)))
        nsv_set_reason(s, x->down, a + e->path_off, e->path_len > 128 ? 128 : e->path_len);
    if (x->head || e->code == 204 || e->code == 304) {
        /* No body follows: answer now. HEAD and 304 keep the length a GET
         * would have had. */
        char line[48];
        if (cl >= 0 && e->code != 204) {
            int k = snprintf(line, sizeof line, "Content-Length: %lld\r\n", (long long)cl);
            pb_add(&x->rhead, line, (size_t)k);
        }
        unblock(s, x);
        if (nsv_reply(s, x->down, e->code, x->rhead.p, x->rhead.len, NULL, 0) == NSV_EINVAL)
            answer(s, x->down, 502, "502 Bad Gateway: the upstream response cannot be relayed\n");
        x->resp = RESP_DONE;
        return;
    }
    x->resp = RESP_HEAD;
}

/* The response is complete. If the client is still sending its body (the
 * upstream answered early), the answer's end waits until the body is read
 * (and dropped): the library closes a connection whose body was cut short
 * by an answer, and bytes still unread then turn that close into a reset
 * that can destroy the answer on its way to the client. */
static void end_response(nsv_server *s, xchg *x)
{
    if (x->req_open) {
        x->end_wait = 1;
        unblock(s, x);
        return;
    }
    nsv_reply_end(s, x->down);
    finish(s, x);
}

static void send_resp_piece(nsv_server *s, xchg *x, const char *d, size_t n, int eof)
{
    if (n) {
        int r = nsv_send_chunk(s, x->down, d, n);
        if (r == NSV_EAGAIN) {
            x->presp.len = 0;
            if (pb_add(&x->presp, d, n)) {
                nsv_abort(s, x->down);
                finish(s, x);
                return;
            }
            x->presp_eof = (uint8_t)eof;
            if (!x->up_done && !x->up_paused) {
                nsv_http_pause(s, x->up, 1);
                x->up_paused = 1;
            }
            return;
        }
        if (r < 0) { /* the client is gone or refused: nothing more can go out */
            nsv_abort(s, x->down);
            finish(s, x);
            return;
        }
    }
    if (eof)
        end_response(s, x);
}

static void on_resp_body(nsv_server *s, xchg *x, const nsv_event *e, const char *a)
{
    const char *d = a + e->body_off;
    size_t n = e->body_len;
    int eof = (e->flags & NSV_EVF_EOF) != 0;
    if (eof)
        x->up_done = 1; /* the request id is stale from here on */
    if (x->resp == RESP_DONE) {
        if (eof)
            finish(s, x);
        return;
    }
    if (x->resp == RESP_HEAD) {
        if (eof && !x->req_open) {
            unblock(s, x);
            int r = nsv_reply(s, x->down, x->status, x->rhead.p, x->rhead.len, d, n);
            if (r != NSV_EAGAIN) {
                if (r == NSV_EINVAL)
                    answer(s, x->down, 502, "502 Bad Gateway: the upstream response cannot be relayed\n");
                finish(s, x);
                return;
            }
            /* output of earlier pipelined answers is still queued: stream it */
        }
        if (x->resp_cl >= 0) { /* a fixed-length stream keeps the length for the client */
            char line[48];
            int k = snprintf(line, sizeof line, "Content-Length: %lld\r\n", (long long)x->resp_cl);
            pb_add(&x->rhead, line, (size_t)k);
        }
        int r = nsv_reply_start(s, x->down, x->status, x->rhead.p, x->rhead.len);
        if (r < 0) {
            if (r == NSV_EINVAL)
                answer(s, x->down, 502, "502 Bad Gateway: the upstream response cannot be relayed\n");
            finish(s, x);
            return;
        }
        x->resp = RESP_STREAM;
    }
    if (x->presp.len) { /* a piece that was already read when the upstream was paused */
        if (pb_add(&x->presp, d, n)) {
            nsv_abort(s, x->down);
            finish(s, x);
            return;
        }
        x->presp_eof |= (uint8_t)eof;
        return;
    }
    send_resp_piece(s, x, d, n, eof);
}

/* TCP_WRITABLE of the client's connection (a streamed response). */
static void on_down_writable(nsv_server *s, xchg *x, int code)
{
    if (x->resp != RESP_STREAM)
        return;
    if (code == 0) {
        if (!x->up_done && !x->up_paused) {
            nsv_http_pause(s, x->up, 1);
            x->up_paused = 1;
        }
        return;
    }
    if (x->presp.len) {
        int r = nsv_send_chunk(s, x->down, x->presp.p, x->presp.len);
        if (r == NSV_EAGAIN)
            return;
        x->presp.len = 0;
        if (r < 0) {
            nsv_abort(s, x->down);
            finish(s, x);
            return;
        }
    }
    if (x->presp_eof) {
        end_response(s, x);
        return;
    }
    if (x->up_paused && !x->up_done) {
        nsv_http_pause(s, x->up, 0);
        x->up_paused = 0;
    }
}

/* ERROR of the upstream request: 502/504 if nothing was sent to the client
 * yet; otherwise the client's connection is aborted, so a body cut short
 * never looks complete (no last chunk, or fewer bytes than its length). */
static void on_up_error(nsv_server *s, xchg *x, const nsv_event *e, const char *a)
{
    x->up_done = 1;
    if (x->resp == RESP_WAIT || x->resp == RESP_HEAD) {
        char what[120], t[200];
        snprintf(what, sizeof what, "%.*s", (int)(e->body_len < 100 ? e->body_len : 100), a + e->body_off);
        answer_x(s, x, error_text(e->code, what[0] ? what : "upstream failed", t, sizeof t), t);
        return;
    }
    if (x->resp == RESP_STREAM) {
        nsv_abort(s, x->down);
    }
    finish(s, x);
}

/* ---- dispatch ---- */

static void dispatch(nsv_server *s, const nsv_event *e, const char *a)
{
    if (e->type == NSV_EV_REQUEST) {
        xchg *old = pm_get(&ts->xm, e->conn);
        if (old) /* the previous exchange of this connection is over for the client */
            finish(s, old);
        on_request(s, e, a);
        return;
    }
    if (e->type == NSV_EV_TIMER) { /* a WebSocket retry: back to the worker that owns it */
        nsv_wakeup_conn(s, e->tag, NULL, 0);
        return;
    }
    xchg *x = pm_get(&ts->xm, e->conn);
    if (!x)
        return;
    if (x->ws) {
        if (e->type == NSV_EV_WAKEUP)
            ws_flush(s, x);
        else
            ws_event(s, x, e, a);
        return;
    }
    int up = e->conn == x->up;
    switch (e->type) {
    case NSV_EV_BODY:
        if (!up)
            on_req_body(s, x, e, a);
        break;
    case NSV_EV_HTTP_RESPONSE:
        on_response(s, x, e, a);
        break;
    case NSV_EV_HTTP_BODY:
        on_resp_body(s, x, e, a);
        break;
    case NSV_EV_TCP_WRITABLE:
        if (up)
            on_up_writable(s, x);
        else
            on_down_writable(s, x, e->code);
        break;
    case NSV_EV_ERROR:
        if (up) {
            on_up_error(s, x, e, a);
        } else { /* the client's request failed (body, deadline, gone): the upstream must not see it end */
            if (x->req_started && !x->up_done)
                nsv_http_cancel(s, x->up);
            x->up_done = 1;
            xfree(s, x);
        }
        break;
    case NSV_EV_CLOSE:
        if (!up)
            finish(s, x);
        break;
    }
}

static void handle(nsv_server *s, const nsv_event *e, const char *a)
{
    if (!ts) {
        if (!(ts = calloc(1, sizeof *ts))) {
            fprintf(stderr, "http-proxy: out of memory\n");
            abort();
        }
        pthread_mutex_lock(&ts_lock);
        ts->next = all_ts;
        all_ts = ts;
        pthread_mutex_unlock(&ts_lock);
    }
    ts->depth++;
    dispatch(s, e, a);
    if (--ts->depth == 0)
        bury();
}

static void on_event(nsv_server *s, const nsv_event *e, const char *a, void *ud)
{
    (void)ud;
    handle(s, e, a);
}

static int set_int(const char *flag, int opt, const char *v)
{
    char *end;
    long long n = strtoll(v, &end, 10);
    int r = *end ? NSV_EINVAL : nsv_set_int(srv, opt, n);
    if (r < 0)
        fprintf(stderr, "http-proxy: %s %s: %s (%s)\n", flag, v, nsv_strerror(r), nsv_last_error_detail(srv));
    return r;
}

int main(int argc, char **argv)
{
    const char *listen_port = NULL, *to = NULL, *bind = "0.0.0.0", *ca = NULL;
    int workers = 0, insecure = 0, http2 = 0;
    static const struct { const char *flag; int opt; } iopts[] = {
        {"--max-body", NSV_OPT_MAX_BODY},
        {"--connect-timeout-ms", NSV_OPT_CONNECT_TIMEOUT_MS},
        {"--head-timeout-ms", NSV_OPT_HTTP_HEAD_TIMEOUT_MS},
        {"--read-timeout-ms", NSV_OPT_HTTP_READ_TIMEOUT_MS},
        {"--request-timeout-ms", NSV_OPT_REQUEST_TIMEOUT_MS},
        {"--idle-timeout-ms", NSV_OPT_IDLE_TIMEOUT_MS},
        {"--conns-per-origin", NSV_OPT_HTTP_CONNS_PER_ORIGIN},
        {"--pool-idle-ms", NSV_OPT_HTTP_POOL_IDLE_MS},
    };
    const char *ival[sizeof iopts / sizeof iopts[0]] = {0};
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int used = 1;
        if (!strcmp(argv[i], "--insecure")) insecure = 1, used = 0;
        else if (!strcmp(argv[i], "--http2")) http2 = 1, used = 0;
        else if (v && !strcmp(argv[i], "--listen")) listen_port = v;
        else if (v && !strcmp(argv[i], "--to")) to = v;
        else if (v && !strcmp(argv[i], "--bind")) bind = v;
        else if (v && !strcmp(argv[i], "--workers")) workers = atoi(v);
        else if (v && !strcmp(argv[i], "--ca")) ca = v;
        else if (v && !strcmp(argv[i], "--host-header") && (!strcmp(v, "client") || !strcmp(v, "upstream")))
            cfg.host_upstream = !strcmp(v, "upstream");
        else {
            used = -1;
            for (size_t k = 0; v && k < sizeof iopts / sizeof iopts[0]; k++)
                if (!strcmp(argv[i], iopts[k].flag))
                    ival[k] = v, used = 1;
        }
        if (used < 0) {
            listen_port = NULL;
            break;
        }
        i += used;
    }
    nsv_url u;
    int tls = to && !strncmp(to, "https://", 8);
    if (!listen_port || !to || nsv_url_parse(to, strlen(to), &u) || (strncmp(to, "http://", 7) && !tls) ||
        u.query_len || (u.path_len > 1)) {
        fprintf(stderr, "usage: %s --listen PORT --to http[s]://HOST:PORT [--bind ADDR] [--workers N]\n"
                        "       [--max-body BYTES] [--connect-timeout-ms N] [--head-timeout-ms N]\n"
                        "       [--read-timeout-ms N] [--request-timeout-ms N] [--idle-timeout-ms N]\n"
                        "       [--conns-per-origin N] [--pool-idle-ms N] [--host-header client|upstream]\n"
                        "       [--ca FILE] [--insecure] [--http2]\n", argv[0]);
        return 2;
    }
    /* scheme://authority, the path of every request is appended */
    size_t olen = strlen(to);
    if (u.path_len)
        olen = u.path_off;
    if (olen >= sizeof cfg.origin - 8) {
        fprintf(stderr, "http-proxy: --to is too long\n");
        return 2;
    }
    memcpy(cfg.origin, to, olen);
    snprintf(cfg.ws_origin, sizeof cfg.ws_origin, "%s%.*s", tls ? "wss" : "ws", (int)(olen - (tls ? 5 : 4)),
             to + (tls ? 5 : 4));
    cfg.proto = "http";

    srv = workers > 0 ? nsv_server_new_sharded(workers) : nsv_server_new();
    if (!srv) {
        fprintf(stderr, "http-proxy: cannot create the server\n");
        return 1;
    }
    /* Defaults for a proxy: every body streams, bodies up to 1 GiB, no cap
     * on concurrent upstream requests but the library's 256 per origin,
     * pings reach the proxy so it can pass them on. */
    nsv_set_int(srv, NSV_OPT_STREAM_BODY, 1);
    nsv_set_int(srv, NSV_OPT_MAX_BODY, 1LL << 30);
    nsv_set_int(srv, NSV_OPT_HTTP_CONNS_PER_ORIGIN, 256);
    nsv_set_int(srv, NSV_OPT_HTTP_MAX_BODY, 1LL << 40);
    nsv_set_int(srv, NSV_OPT_WS_CONTROL_EVENTS, 1);
    for (size_t k = 0; k < sizeof iopts / sizeof iopts[0]; k++)
        if (ival[k] && set_int(iopts[k].flag, iopts[k].opt, ival[k]) < 0)
            return 2;
    if (ca && nsv_set_str(srv, NSV_OPT_TLS_CLIENT_CA_FILE, ca, strlen(ca)) < 0) {
        fprintf(stderr, "http-proxy: --ca %s: %s\n", ca, nsv_last_error_detail(srv));
        return 2;
    }
    if (insecure)
        nsv_set_int(srv, NSV_OPT_TLS_VERIFY_SERVER, 0);
    if (http2 && nsv_set_int(srv, NSV_OPT_HTTP2, NSV_H2_PRIOR | NSV_H2_UPGRADE) < 0) {
        fprintf(stderr, "http-proxy: --http2: %s\n", nsv_last_error_detail(srv));
        return 2;
    }
    char url[128];
    snprintf(url, sizeof url, strchr(bind, ':') ? "http://[%s]:%s" : "http://%s:%s", bind, listen_port);
    int lid = nsv_listen(srv, url, strlen(url));
    if (lid < 0) {
        fprintf(stderr, "http-proxy: listen %s: %s (%s)\n", url, nsv_strerror(lid), nsv_last_error_detail(srv));
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    nsv_drain_on_signal(srv, SIGTERM, 5000);
    nsv_drain_on_signal(srv, SIGINT, 5000);
    printf("listening on %d\n", nsv_listener_port(srv, lid));
    fflush(stdout);
    if (workers > 0) { /* each worker runs its exchanges in its own callback */
        nsv_set_callback(srv, on_event, NULL);
        nsv_run(srv);
    } else {
        enum { MAXEV = 256 };
        static nsv_event evs[MAXEV];
        size_t cap = 1 << 20;
        char *arena = malloc(cap);
        for (;;) {
            int n = nsv_poll(srv, evs, MAXEV, arena, cap, 1000);
            if (n == NSV_ENOBUFS) {
                cap = (size_t)nsv_poll_need(srv) + 4096;
                arena = realloc(arena, cap);
                continue;
            }
            if (n < 0)
                break; /* NSV_ESTOPPED after a drain */
            for (int i = 0; i < n; i++)
                handle(srv, &evs[i], arena);
        }
        free(arena);
    }
    nsv_server_free(srv);
    /* the workers are gone: free what each left (exchanges still open at exit) */
    while (all_ts) {
        ts = all_ts;
        all_ts = ts->next;
        for (size_t i = 0; i < ts->xm.cap; i++)
            if (ts->xm.k[i] && !((xchg *)ts->xm.v[i])->dead) {
                xchg *x = ts->xm.v[i];
                x->dead = 1;
                x->next_dead = ts->graveyard;
                ts->graveyard = x;
            }
        bury();
        free(ts->xm.k);
        free(ts->xm.v);
        free(ts->hb.p);
        free(ts->ub.p);
        free(ts);
    }
    return 0;
}
