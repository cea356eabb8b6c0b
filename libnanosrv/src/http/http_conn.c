/* http_conn.c - the HTTP/1.1 read side: buffer, parse, frame the body,
 * and hand one complete request at a time to the host as an event. */
#include "http.h"
#include "answer.h"
#include "field.h"
#include "../loop/edge.h"
#include "../ws/ws.h"
#include "../loop/io.h"
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PIPELINE_IN (64 * 1024) /* input buffered while the host works */

enum { H_ERROR = -1, H_MORE = 0, H_DONE = 1 };

static void request_reset(nsv__conn *c)
{
    c->head_len = 0;
    c->body_need = 0;
    c->body_len = 0;
    c->raw_off = 0;
    c->req_started = 0;
    c->scan_len = 0;
    c->resp_started = 0;
    c->continue_sent = 0;
    memset(&c->chunk, 0, sizeof c->chunk);
}

/* The parser (or a limit it enforces) refused the request: counted by kind. */
static int refuse(nsv__loop *l, nsv__conn *c, int status)
{
    nsv__answer_refused(l, status);
    nsv__error_reply(l, c, status);
    return H_ERROR;
}

static size_t headers_block_len(const nsv__request *r)
{
    size_t n = 0;
    for (size_t i = 0; i < r->num_headers; i++)
        n += r->headers[i].name_len + r->headers[i].value_len + 4;
    return n;
}

/* The raw header lines when each is already "Name: value\r\n" (the usual
 * case): then one copy serves them all instead of four per header. */
static const char *canonical_block(const nsv__request *r)
{
    const char *p = r->num_headers ? r->headers[0].name : NULL;
    for (size_t i = 0; i < r->num_headers; i++) {
        const nsv__hdr *h = &r->headers[i];
        if (h->name != p || h->value != p + h->name_len + 2 || p[h->name_len + 1] != ' ')
            return NULL;
        p = h->value + h->value_len;
        if (*p != '\r') /* trailing whitespace was trimmed */
            return NULL;
        p += 2;
    }
    return r->num_headers ? r->headers[0].name : NULL;
}

static uint32_t put(char *d, uint32_t *off, const char *p, size_t n)
{
    uint32_t at = *off;
    if (n)
        memcpy(d + at, p, n);
    *off += (uint32_t)n;
    return at;
}

/* Auto 404 answered in C for servers configured so. */
static int auto_404(nsv__loop *l, nsv__conn *c)
{
    static const char body[] = "{\"error\":\"not found\"}\n";
    static const char hdr[] = "Content-Type: application/json\r\n";
    return nsv__reply(l, c, 404, hdr, sizeof hdr - 1, body, sizeof body - 1, 0);
}

/* Serialize one request into the event queue. */
/* A route match made for this request earlier in the same pass. */
typedef struct route_match {
    int valid;
    int32_t route;
    uint32_t np, rflags;
} route_match;

static int emit_request(nsv__loop *l, nsv__conn *c, const char *data, const nsv__request *parsed,
                        const char *body, size_t blen, int stream, const route_match *m)
{
    nsv_server *s = l->srv;
    nsv__request r;
    if (parsed) /* head parsed in this same pass: no second parse */
        r = *parsed;
    else if (nsv__http_parse_request(data, c->head_len, &r, l->http->hdrs, NSV__ARRAY_LEN(l->http->hdrs),
                                     (size_t)s->max_uri) <= 0)
        return refuse(l, c, 400);
    if (s->nmounts && nsv__static_request(l, c, &r)) /* mounts first; none: no cost */
        return !c->proto ? H_ERROR : H_DONE;
    uint32_t np = 0, rflags = 0;
    int32_t route = -1;
    if (parsed && m && m->valid) /* matched while deciding how the body comes */
        route = m->route, np = m->np, rflags = m->rflags;
    else if (s->router)
        route = nsv__router_match(s->router, r.method, r.method_len, r.path, r.path_len,
                                  l->http->params, NSV__MAX_PARAMS, &np, &rflags);
    c->route = route;
    int ws_route = route >= 0 && (rflags & NSV_ROUTE_WEBSOCKET);
    if ((r.flags & NSV__RF_UPGRADE_WS) || ws_route)
        nsv__ws_check_request(c, &r);
    else
        c->ws_check = 0;
    if (ws_route && c->ws_check != 1)
        return nsv__error_reply(l, c, c->ws_check ? c->ws_check : 426), H_ERROR;
    if (route < 0 && s->auto_404) {
        c->state = NSV__C_PENDING;
        auto_404(l, c);
        return !c->proto ? H_ERROR : H_DONE;
    }
    size_t plen = 0;
    for (uint32_t i = 0; i < np; i++)
        plen += l->http->params[i].name_len + l->http->params[i].val_len + 2;
    size_t hlen = headers_block_len(&r);
    uint32_t tlen = nsv__conn_info_len(c); /* "sni\0subject\0" of TLS connections, more through a front (edge.c) */
    size_t total = r.method_len + r.path_len + r.query_len + hlen + plen + blen + c->peer_len + tlen;
    nsv_event *ev;
    char *d = nsv__evq_push(l, &ev, total);
    if (!d) {
        nsv__error_reply(l, c, 503);
        return H_ERROR;
    }
    uint32_t off = 0;
    ev->type = ws_route ? NSV_EV_WS_OPEN : NSV_EV_REQUEST;
    ev->conn = nsv__conn_id(l, c);
    ev->tag = c->tag;
    ev->route = route;
    ev->listener = c->listener;
    ev->peer_port = c->peer_port;
    ev->flags = (c->keepalive ? NSV_EVF_KEEPALIVE : 0) | (c->head ? NSV_EVF_HEAD : 0) |
                (c->http10 ? NSV_EVF_HTTP10 : 0) | (c->body_need < 0 ? NSV_EVF_CHUNKED : 0) |
                ((r.flags & NSV__RF_UPGRADE_WS) ? NSV_EVF_UPGRADE : 0) |
                (c->eof_seen ? NSV_EVF_EOF : 0) | (stream ? NSV_EVF_STREAM_BODY : 0) |
                (c->h2s ? NSV_EVF_HTTP2 : 0) | (ws_route && nsv__ws_deflate_agreed(s, c) ? NSV_EVF_DEFLATE : 0);
    ev->method_len = (uint32_t)r.method_len;
    ev->method_off = put(d, &off, r.method, r.method_len);
    ev->path_len = (uint32_t)r.path_len;
    ev->path_off = put(d, &off, r.path, r.path_len);
    ev->query_len = (uint32_t)r.query_len;
    ev->query_off = put(d, &off, r.query, r.query_len);
    ev->headers_off = off;
    const char *block = canonical_block(&r);
    if (block) {
        put(d, &off, block, hlen);
    } else {
        for (size_t i = 0; i < r.num_headers; i++) {
            put(d, &off, r.headers[i].name, r.headers[i].name_len);
            put(d, &off, ": ", 2);
            put(d, &off, r.headers[i].value, r.headers[i].value_len);
            put(d, &off, "\r\n", 2);
        }
    }
    ev->headers_len = off - ev->headers_off;
    ev->nheaders = (uint32_t)r.num_headers;
    ev->params_off = off;
    for (uint32_t i = 0; i < np; i++) {
        put(d, &off, l->http->params[i].name, l->http->params[i].name_len);
        d[off++] = 0;
        put(d, &off, r.path + l->http->params[i].val_off, l->http->params[i].val_len);
        d[off++] = 0;
    }
    ev->params_len = off - ev->params_off;
    ev->nparams = np;
    ev->body_len = (uint32_t)blen;
    ev->body_off = put(d, &off, body, blen);
    ev->peer_len = c->peer_len;
    ev->peer_off = put(d, &off, c->peer, c->peer_len);
    if (tlen) {
        ev->flags |= nsv__conn_info_flags(c);
        ev->tls_off = off;
        ev->tls_len = nsv__conn_info_put(c, d + off);
        off += ev->tls_len;
    }
    c->state = NSV__C_PENDING;
    c->seen = 1;
    if (!stream) /* a streamed body still runs under the request deadline */
        c->deadline = 0;
    nsv__ticket(l, c, NSV__T_PENDING);
    nsv__evq_commit(l);
    if (ws_route) /* WebSocket routes upgrade in C; the host sees WS_* events */
        nsv__ws_accept(l, c, NULL, 0);
    return H_DONE;
}

static void send_continue(nsv__loop *l, nsv__conn *c)
{
    static const char msg[] = "HTTP/1.1 100 Continue\r\n\r\n";
    c->continue_sent = 1;
    if (nsv__buf_append(l, &c->out, msg, sizeof msg - 1) == 0)
        nsv__conn_flush(l, c);
}

/* NSV__OP_CONTINUE: the host polled again without answering a request
 * that waits for "100 Continue" (sharded servers in pull mode), or, with
 * asked set, called nsv_continue (any waiting kind goes out now). */
void nsv__http_continue(nsv__loop *l, nsv__conn *c, int asked)
{
    if (c->continue_wait == 0 || (!asked && c->continue_wait != 2))
        return;
    c->continue_wait = 0;
    if (c->bstream && c->state == NSV__C_PENDING && !c->resp_started)
        send_continue(l, c);
}

/* Parse the head once it is complete and decide how the body is framed. */
static int start_request(nsv__loop *l, nsv__conn *c, const char *data, size_t len, nsv__request *rp)
{
    nsv_server *s = l->srv;
    nsv__request *r = rp;
    size_t maxh = (size_t)s->max_headers < NSV__ARRAY_LEN(l->http->hdrs) ? (size_t)s->max_headers
                                                                  : NSV__ARRAY_LEN(l->http->hdrs);
    int n = nsv__http_parse_request(data, len, r, l->http->hdrs, maxh, (size_t)s->max_uri);
    if (n == 0) {
        if (len > (size_t)s->max_header_bytes)
            return refuse(l, c, 431);
        return H_MORE;
    }
    if (n < 0)
        return refuse(l, c, -n);
    if ((size_t)n > (size_t)s->max_header_bytes)
        return refuse(l, c, 431);
    c->head_len = (uint32_t)n;
    c->http10 = r->minor_version == 0;
    c->keepalive = c->http10 ? !!(r->flags & NSV__RF_CONN_KEEPALIVE) : !(r->flags & NSV__RF_CONN_CLOSE);
    if (c->h2s)
        c->keepalive = 0; /* an HTTP/2 stream carries one request */
    c->head = r->method_len == 4 && memcmp(r->method, "HEAD", 4) == 0;
    /* Accept-Encoding is read only while gzip is on: nothing to pay otherwise. */
    c->gzip_ok = s->gzip_min_size > 0 && nsv__gzip_accepts(r->headers, r->num_headers);
    nsv__answer_head(l, c, r);
    if (r->flags & NSV__RF_CHUNKED) {
        c->body_need = -1;
        c->raw_off = (uint32_t)n;
    } else {
        int64_t cl = r->content_length < 0 ? 0 : r->content_length;
        if (cl > s->max_body)
            return refuse(l, c, 413);
        c->body_need = cl;
    }
    return H_DONE;
}

/* Whether this request's body goes to the host in pieces: the option, or
 * the route's flag (matched here only on servers that have such routes). */
static int stream_wanted(nsv__loop *l, const nsv__request *r, route_match *m)
{
    nsv_server *s = l->srv;
    if (r->flags & NSV__RF_UPGRADE_WS)
        return 0;
    if (s->stream_body)
        return 1;
    if (!s->stream_routes || !s->router)
        return 0;
    m->route = nsv__router_match(s->router, r->method, r->method_len, r->path, r->path_len,
                                 l->http->params, NSV__MAX_PARAMS, &m->np, &m->rflags);
    m->valid = 1;
    return m->route >= 0 && (m->rflags & NSV_ROUTE_STREAM_BODY);
}

/* Deliver the head now; the body follows in BODY events (body.c). */
static int emit_streaming(nsv__loop *l, nsv__conn *c, const char *data, const nsv__request *r,
                          const route_match *m, int expect, size_t *consumed)
{
    int64_t cl = c->body_need; /* -1: chunked */
    int rc = emit_request(l, c, data, r, NULL, 0, 1, m);
    *consumed = c->head_len;
    if (rc != H_DONE)
        return rc;
    request_reset(c);
    if (c->state == NSV__C_PENDING) {
        nsv__body_start(l, c, cl, expect);
    } else if (c->proto && !c->closing) {
        /* answered in C (auto 404): the body is not read, so the connection ends */
        c->keepalive = 0;
        c->closing = 1;
        c->state = NSV__C_NONE;
        nsv__conn_mark_dirty(l, c);
    }
    return H_DONE;
}

/* The first request of a plain connection may switch it to HTTP/2, as its
 * listener allows (mode: NSV_H2_PRIOR or NSV_H2_UPGRADE). */
static int h2_allowed(nsv__loop *l, const nsv__conn *c, int mode)
{
    return l->srv->h2_hooks && !c->tls && !c->h2s && !c->served &&
           (l->srv->listeners[c->listener].http2 & mode);
}

/* A bodiless request asking for "Upgrade: h2c" with one HTTP2-Settings
 * (RFC 7540 3.2): becomes stream 1 of a session after the 101. */
static int h2c_upgrade(nsv__loop *l, nsv__conn *c, const nsv__request *r, const char *data, size_t len)
{
    const char *settings = NULL;
    size_t slen = 0;
    int h2c = 0, nsettings = 0;
    for (size_t i = 0; i < r->num_headers; i++) {
        const nsv__hdr *h = &r->headers[i];
        cptr name = (cptr)h->name, val = (cptr)h->value;
        if (IEQ(name, h->name_len, "http2-settings")) {
            settings = h->value, slen = h->value_len, nsettings++;
        } else if (IEQ(name, h->name_len, "upgrade")) {
            cptr p = val, es;
            size_t el;
            while (next_elem(&p, val + h->value_len, &es, &el))
                h2c |= IEQ(es, el, "h2c");
        }
    }
    if (!h2c || nsettings != 1 || c->body_need != 0)
        return 0;
    nsv__h2_upgrade up = {.settings = settings, .settings_len = slen, .req = data, .req_len = c->head_len,
                          .head = c->head};
    return l->srv->h2_hooks->start(l, c, data + c->head_len, len - c->head_len, &up) != 0;
}

/* Handle one request from data[0..len). *consumed is set when H_DONE. */
static int handle(nsv__loop *l, nsv__conn *c, char *data, size_t len, size_t *consumed)
{
    nsv_server *s = l->srv;
    if (!c->req_started) {
        c->req_started = 1;
        c->deadline = l->now + s->request_timeout_ms;
    }
    nsv__request req, *parsed = NULL;
    route_match m = {0};
    if (c->head_len == 0 && data[0] == 'P' && h2_allowed(l, c, NSV_H2_PRIOR)) {
        size_t k = len < NSV__H2_PREFACE_LEN ? len : NSV__H2_PREFACE_LEN;
        if (memcmp(data, NSV__H2_PREFACE, k) == 0) {
            if (len < NSV__H2_PREFACE_LEN)
                return H_MORE;
            /* h2c with prior knowledge: the connection is a session now,
             * which took every byte (H_ERROR: nothing more for HTTP/1 here) */
            s->h2_hooks->start(l, c, data, len, NULL);
            return H_ERROR;
        }
    }
    if (c->head_len == 0) {
        /* A head only completes at a line end: re-parse only when new bytes
         * hold one, so a byte-at-a-time sender costs linear, not quadratic. */
        if (c->scan_len && len > c->scan_len && !memchr(data + c->scan_len, '\n', len - c->scan_len) &&
            len <= (size_t)s->max_header_bytes)
            return H_MORE;
        int r = start_request(l, c, data, len, &req);
        if (r == H_MORE)
            c->scan_len = (uint32_t)len;
        if (r != H_DONE)
            return r;
        parsed = &req;
        if (c->body_need == 0 && h2_allowed(l, c, NSV_H2_UPGRADE) && h2c_upgrade(l, c, &req, data, len))
            return H_ERROR; /* (a session now, as above) */
        /* No body byte yet: a client that sent Expect: 100-continue waits for it. */
        int expect = (req.flags & NSV__RF_EXPECT_CONTINUE) && !c->http10 && c->body_need != 0 &&
                     len == c->head_len;
        if (c->body_need != 0 && (s->stream_body || s->stream_routes) && stream_wanted(l, &req, &m))
            return emit_streaming(l, c, data, &req, &m, expect, consumed);
        if (expect)
            send_continue(l, c);
    }
    if (c->body_need >= 0) {
        size_t total = c->head_len + (size_t)c->body_need;
        if (len < total)
            return H_MORE;
        nsv__answer_bytes(l, c, (uint64_t)c->body_need, 0);
        int r = emit_request(l, c, data, parsed, data + c->head_len, (size_t)c->body_need, 0, &m);
        *consumed = total;
        if (r == H_DONE)
            request_reset(c);
        return r;
    }
    size_t cons = 0, prod = 0;
    int r = nsv__chunked_decode(&c->chunk, data + c->head_len + c->body_len, data + c->raw_off,
                                len - c->raw_off, &cons, &prod);
    c->raw_off += (uint32_t)cons;
    c->body_len += (uint32_t)prod;
    if ((int64_t)c->body_len > s->max_body)
        return refuse(l, c, 413);
    if (r < 0)
        return refuse(l, c, 400);
    if (r == 0)
        return H_MORE;
    *consumed = c->raw_off;
    nsv__answer_bytes(l, c, c->raw_off - c->head_len, 0);
    r = emit_request(l, c, data, parsed, data + c->head_len, c->body_len, 0, &m);
    if (r == H_DONE)
        request_reset(c);
    return r;
}

/* Process requests buffered in c->in (after a reply, or after a read). */
void nsv__http_process(nsv__loop *l, nsv__conn *c)
{
    /* (a body the host paused waits in `in`; resuming brings it back here,
     * nsv__conn_pause) */
    while (c->in.len > c->in.off && c->bstream && !c->paused) { /* body bytes that waited */
        size_t used = nsv__body_feed(l, c, c->in.p + c->in.off, c->in.len - c->in.off);
        if (!c->proto || c->closing || used == 0)
            return;
        c->in.off += (uint32_t)used;
        if (c->in.off == c->in.len)
            nsv__buf_release(l, &c->in);
    }
    while (c->state == NSV__C_READ && c->in.len > c->in.off) {
        if (c->out.len - c->out.off >= NSV__PIPELINE_OUT || c->file_on)
            break; /* the client is not reading, or a file goes out: stop producing responses */
        size_t consumed = 0;
        int r = handle(l, c, c->in.p + c->in.off, c->in.len - c->in.off, &consumed);
        if (r == H_ERROR || !c->proto)
            return;
        if (r == H_MORE)
            break;
        c->in.off += (uint32_t)consumed;
        if (c->in.off == c->in.len)
            nsv__buf_release(l, &c->in);
        while (c->bstream && c->in.len > c->in.off && !c->paused) { /* a streamed body right behind its head */
            size_t used = nsv__body_feed(l, c, c->in.p + c->in.off, c->in.len - c->in.off);
            if (!c->proto || c->closing || used == 0)
                return;
            c->in.off += (uint32_t)used;
            if (c->in.off == c->in.len)
                nsv__buf_release(l, &c->in);
        }
    }
    if (c->state == NSV__C_READ && !c->reading && !c->peer_closed)
        nsv__conn_set_events(l, c, 1, c->writing);
}

/* Process fresh bytes from the loop's scratch buffer; keep the rest. */
static void process_scratch(nsv__loop *l, nsv__conn *c, char *data, size_t n)
{
    size_t done = 0;
    while (done < n) {
        if (c->bstream) { /* body bytes go to the host as they come */
            size_t used = nsv__body_feed(l, c, data + done, n - done);
            if (!c->proto || c->closing)
                return;
            if (used == 0)
                break;
            done += used;
            continue;
        }
        if (c->state != NSV__C_READ || c->file_on)
            break; /* (after a file, the rest waits in `in` until it is sent) */
        size_t consumed = 0;
        int r = handle(l, c, data + done, n - done, &consumed);
        if (r == H_ERROR || !c->proto)
            return;
        if (r == H_MORE)
            break;
        done += consumed;
    }
    if (done < n && !c->closing) {
        if (nsv__buf_append(l, &c->in, data + done, n - done) != 0)
            nsv__error_reply(l, c, 503);
    }
}

static size_t read_room(const nsv__conn *c)
{
    size_t want = 4096;
    if (c->head_len && c->body_need > 0) {
        size_t have = c->in.len - c->in.off;
        size_t total = c->head_len + (size_t)c->body_need;
        if (total > have)
            want = total - have;
        if (want > 1024 * 1024)
            want = 1024 * 1024;
    }
    return want;
}

/* The peer ended its side (EOF): a request with the host hears of it by a
 * HANGUP event; requests delivered later carry NSV_EVF_EOF instead. */
static void peer_eof(nsv__loop *l, nsv__conn *c)
{
    if (c->eof_seen)
        return;
    c->eof_seen = 1;
    if (c->state == NSV__C_PENDING || c->state == NSV__C_STREAM)
        nsv__evq_emit(l, c, NSV_EV_HANGUP, 0, 0, NULL, 0);
}

static void on_readable(nsv__loop *l, nsv__conn *c)
{
    if (c->bstream && c->paused) {
        nsv__conn_set_events(l, c, 0, c->writing); /* the host reads the body at its pace */
        return;
    }
    if (c->bstream && nsv__throttle(l, c))
        return; /* (reading stays off until the host takes its events) */
    int into_scratch = (c->state == NSV__C_READ || c->bstream) && c->in.len == c->in.off &&
                       c->out.len - c->out.off < NSV__PIPELINE_OUT && !c->file_on;
    ssize_t n;
    if (into_scratch) {
        n = nsv__io_recv(l, c, l->scratch, NSV__SCRATCH);
    } else {
        size_t room = read_room(c);
        if (c->state != NSV__C_READ || c->out.len - c->out.off >= NSV__PIPELINE_OUT || c->file_on) {
            /* The host is busy with a request, or the client is not reading
             * its responses (parsing stopped): buffer a bounded amount. */
            if (c->in.len - c->in.off >= PIPELINE_IN) {
                nsv__conn_set_events(l, c, 0, c->writing);
                return;
            }
        }
        if (nsv__buf_reserve(l, &c->in, room) != 0) {
            nsv__error_reply(l, c, 503);
            return;
        }
        n = nsv__io_recv(l, c, c->in.p + c->in.len, c->in.cap - c->in.len);
    }
    if (n > 0) {
        if (into_scratch) {
            process_scratch(l, c, l->scratch, (size_t)n);
        } else {
            c->in.len += (uint32_t)n;
            if (c->state == NSV__C_READ || c->bstream)
                nsv__http_process(l, c);
        }
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n < 0) {
        nsv__conn_close(l, c);
        return;
    }
    /* EOF. A client may half-close after sending its request: answer it,
     * and tell the host, which may rather stop working for it. */
    c->peer_closed = 1;
    nsv__conn_set_events(l, c, 0, c->writing);
    peer_eof(l, c);
    if (c->bstream) {
        nsv__body_aborted(l, c); /* the client left in the middle of the body */
        return;
    }
    if (c->state == NSV__C_READ && nsv__out_empty(c))
        nsv__conn_close(l, c);
}

/* The deadline passed: a request still arriving gets 408; anything else
 * (an idle keep-alive connection, a reply the client does not read) closes. */
static void on_timer(nsv__loop *l, nsv__conn *c)
{
    if (c->bstream) {
        nsv__body_timeout(l, c);
        return;
    }
    if (c->state == NSV__C_READ && c->req_started && !c->resp_started &&
        nsv__out_empty(c) && !c->lingering) {
        NSV__COUNT(l, NSV_M_TIMEOUT_REQUEST);
        nsv__error_reply(l, c, 408);
        return;
    }
    if (!c->lingering) /* (a lingering close ends on time by design) */
        NSV__COUNT(l, c->state == NSV__C_READ && !c->req_started && nsv__out_empty(c) ? NSV_M_TIMEOUT_IDLE
                                                                                        : NSV_M_TIMEOUT_OTHER);
    nsv__conn_close(l, c);
}

static void on_open(nsv__loop *l, nsv__conn *c)
{
    (void)l;
    c->state = NSV__C_READ;
}

/* ALPN chose "h2" (offered only with NSV_H2_TLS): a session from the start. */
static void on_tls_ready(nsv__loop *l, nsv__conn *c)
{
    const char *alpn = nsv__tls_alpn(c);
    if (alpn && l->srv->h2_hooks && strcmp(alpn, "h2") == 0)
        l->srv->h2_hooks->start(l, c, NULL, 0, NULL);
}

/* On the flush list: parse requests buffered while the host was busy. The
 * answered output may wait one turn when the next request went to the host. */
static int on_dirty(nsv__loop *l, nsv__conn *c)
{
    if (c->continue_wait == 1) { /* a turn went by and the host has not answered */
        c->continue_wait = 0;
        if (c->bstream && c->state == NSV__C_PENDING && !c->resp_started)
            send_continue(l, c);
        if (!c->proto)
            return 0;
    }
    if ((c->state == NSV__C_READ || c->bstream) && c->in.len > c->in.off)
        nsv__http_process(l, c);
    return c->proto && c->state == NSV__C_PENDING;
}

/* All output sent: parse what waits (parsing stopped for the backlog), or
 * close an idle connection whose client has gone. */
static void on_flushed(nsv__loop *l, nsv__conn *c)
{
    nsv__answer_flushed(l, c);
    if (!nsv__out_empty(c) || c->state != NSV__C_READ)
        return;
    if (c->in.len > c->in.off)
        nsv__conn_mark_dirty(l, c);
    else if (c->peer_closed)
        nsv__conn_close(l, c);
}

/* A full socket: a request still arriving keeps its own deadline. */
static void on_blocked(nsv__loop *l, nsv__conn *c)
{
    if (c->deadline == 0 || c->state != NSV__C_READ)
        c->deadline = l->now + l->srv->idle_timeout_ms;
}

/* Draining: idle keep-alive connections go; a fresh one may still be about
 * to send its first request (then answered with Connection: close), so it
 * gets a short grace. */
static void on_drain(nsv__loop *l, nsv__conn *c)
{
    nsv_server *s = l->srv;
    int idle = c->served || l->now >= s->drain_deadline - s->drain_total + 500;
    if (c->state == NSV__C_READ && idle && !c->req_started && c->in.len == c->in.off &&
        nsv__out_empty(c))
        nsv__conn_close(l, c);
}

/* A streamed reply cut short (the peer left, a timeout, the server freed)
 * still holds its deflate stream. */
static void on_close(nsv__loop *l, nsv__conn *c)
{
    nsv__answer_closed(l, c);
    nsv__gzip_stream_free(l, c);
}

/* HTTP's per-loop scratch; the loop frees it as plain memory (its deflate
 * stream is freed by the server first, nsv__gzip_loop_free). */
int nsv__http_loop_init(nsv__loop *l)
{
    l->http = nsv__calloc(&l->srv->alloc, sizeof *l->http);
    return l->http ? NSV_OK : NSV_ENOMEM;
}

const nsv__proto nsv__proto_http = {
    .name = "an HTTP connection",
    .flags = NSV__P_WATCH_HUP,
    .on_open = on_open,
    .on_readable = on_readable,
    .on_dirty = on_dirty,
    .on_flushed = on_flushed,
    .on_blocked = on_blocked,
    .on_timer = on_timer,
    .on_drain = on_drain,
    .on_tls_ready = on_tls_ready,
    .on_peer_eof = peer_eof,
    .on_close = on_close,
};
