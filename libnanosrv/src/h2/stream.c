/* stream.c - HTTP/2 request streams as HTTP/1.1 connections. A stream's
 * header block is written out as an HTTP/1.1 request head (its body as
 * received, chunk-framed when no content-length came) into a virtual
 * connection of the HTTP layer, which parses, limits, routes and answers
 * it like any other; the HTTP/1.1 response it writes there is parsed back
 * (strictly, as the client parses responses) into HEADERS and DATA.
 * The host sees an ordinary REQUEST and answers with the ordinary calls. */
#include "h2.h"

#ifdef NSV_WITH_NGHTTP2
#include "../http/http.h"
#include "../http/answer.h"
#include "../http/resp_parse.h"
#include "../loop/metrics.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

enum { R_HEAD = 0, R_BODY = 1, R_DONE = 2 };
#define RESP_MAX_HEADERS 256

static nsv__h2s *stream_of(nghttp2_session *ng, int32_t id)
{
    return nghttp2_session_get_stream_user_data(ng, id);
}

void nsv__h2s_free(nsv__h2 *h, nsv__h2s *s)
{
    nsv__loop *l = h->l;
    if (s->prev)
        s->prev->next = s->next;
    else
        h->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    h->nstreams--;
    nghttp2_session_set_stream_user_data(h->ng, s->id, NULL);
    nsv__buf_release(l, &s->req);
    nsv__buf_release(l, &s->rhead);
    nsv__buf_release(l, &s->body);
    nsv__free(&l->srv->alloc, s->pseudo);
    nsv__free(&l->srv->alloc, s->cookie);
    nsv__free(&l->srv->alloc, s);
}

static nsv__h2s *stream_new(nsv__h2 *h, int32_t id)
{
    nsv__h2s *s = nsv__calloc(&h->l->srv->alloc, sizeof *s);
    if (!s)
        return NULL;
    s->h = h;
    s->id = id;
    s->next = h->streams;
    if (h->streams)
        h->streams->prev = s;
    h->streams = s;
    h->nstreams++;
    nghttp2_session_set_stream_user_data(h->ng, id, s);
    return s;
}

/* Append to a plain growable string (pseudo-headers, cookies). */
static int grow_put(nsv__h2 *h, char **p, uint32_t *len, uint32_t *cap, const void *d, size_t n)
{
    if (!n)
        return 0;
    if (*len + n > *cap) {
        uint32_t nc = *cap ? *cap : 128;
        while (nc < *len + n)
            nc *= 2;
        char *q = nsv__realloc(&h->l->srv->alloc, *p, nc);
        if (!q)
            return -1;
        *p = q;
        *cap = nc;
    }
    memcpy(*p + *len, d, n);
    *len += (uint32_t)n;
    return 0;
}

int nsv__h2s_begin(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    (void)ng;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    return stream_new(ud, f->hd.stream_id) ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
}

static int put(nsv__h2 *h, nsv__h2s *s, const char *p, size_t n)
{
    return nsv__buf_append(h->l, &s->req, p, n);
}

/* "METHOD target HTTP/1.1" and Host from :authority. CONNECT has no :path:
 * its target is the authority (the HTTP layer then answers it). */
static int request_line(nsv__h2 *h, nsv__h2s *s)
{
    s->line_done = 1;
    const char *ps = s->pseudo ? s->pseudo : "";
    int r = put(h, s, ps + s->m_off, s->m_len) | put(h, s, " ", 1);
    if (s->p_len)
        r |= put(h, s, ps + s->p_off, s->p_len);
    else
        r |= put(h, s, ps + s->a_off, s->a_len);
    r |= put(h, s, " HTTP/1.1\r\n", 11);
    if (s->a_len)
        r |= put(h, s, "host: ", 6) | put(h, s, ps + s->a_off, s->a_len) | put(h, s, "\r\n", 2);
    return r;
}

int nsv__h2s_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                    const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
    (void)flags;
    nsv__h2 *h = ud;
    nsv__h2s *s = stream_of(ng, f->hd.stream_id);
    if (!s || f->headers.cat != NGHTTP2_HCAT_REQUEST || s->too_big)
        return 0; /* (trailers are not passed on) */
    /* The header list as SETTINGS_MAX_HEADER_LIST_SIZE counts it: an HPACK
     * bomb expands to at most this much before it is a 431. */
    s->hdr_bytes += (uint32_t)(nlen + vlen + 32);
    if (s->hdr_bytes > (uint64_t)h->l->srv->max_header_bytes) {
        s->too_big = 1;
        return 0;
    }
    const char *n = (const char *)name, *v = (const char *)value;
    if (nlen && n[0] == ':') {
        uint32_t at = s->pseudo_len;
        int which = nlen == 7 && !memcmp(n, ":method", 7) ? 1 : nlen == 5 && !memcmp(n, ":path", 5) ? 2
                  : nlen == 10 && !memcmp(n, ":authority", 10) ? 3 : 0;
        if (!which) /* :scheme (the connection says it) */
            return 0;
        if (grow_put(h, &s->pseudo, &s->pseudo_len, &s->pseudo_cap, v, vlen))
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        if (which == 1)
            s->m_off = at, s->m_len = (uint32_t)vlen;
        else if (which == 2)
            s->p_off = at, s->p_len = (uint32_t)vlen;
        else
            s->a_off = at, s->a_len = (uint32_t)vlen;
        return 0;
    }
    if (!s->line_done && request_line(h, s))
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    if (nlen == 6 && !memcmp(n, "cookie", 6)) {
        if ((s->cookie_len && grow_put(h, &s->cookie, &s->cookie_len, &s->cookie_cap, "; ", 2)) ||
            grow_put(h, &s->cookie, &s->cookie_len, &s->cookie_cap, v, vlen))
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        return 0;
    }
    if (nlen == 4 && !memcmp(n, "host", 4) && s->a_len) {
        /* :authority already gave it; a Host naming another is malformed
         * (RFC 9113 8.3.1): answered 400 */
        if (vlen != s->a_len || strncasecmp(v, s->pseudo + s->a_off, vlen) != 0)
            s->bad_host = 1;
        return 0;
    }
    if (nlen == 14 && !memcmp(n, "content-length", 14))
        s->has_cl = 1;
    if (put(h, s, n, nlen) | put(h, s, ": ", 2) | put(h, s, v, vlen) | put(h, s, "\r\n", 2))
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    return 0;
}

/* The stream's virtual connection: an HTTP connection of the session's
 * listener and peer, with the request bytes as its input. */
static nsv__conn *stream_conn(nsv__h2 *h, nsv__h2s *s)
{
    nsv__loop *l = h->l;
    nsv__conn *p = h->c, *c = nsv__conn_alloc(l);
    if (!c)
        return NULL;
    nsv__metric_sub(l, NSV_M_CONNS_ACTIVE, 1); /* (a stream, not a connection) */
    NSV__COUNT(l, NSV_M_H2_STREAMS);
    c->fd = -1;
    c->proto = &nsv__proto_http;
    c->h2s = s;
    c->h2_parent = p;
    c->listener = p->listener;
    c->peer_port = p->peer_port;
    memcpy(c->peer, p->peer, p->peer_len);
    c->peer_len = p->peer_len;
    c->accepted = l->now;
    c->reading = 1;
    c->state = NSV__C_READ;
    c->in = s->req;
    memset(&s->req, 0, sizeof s->req);
    s->c = c;
    h->nlive++;
    nsv__conn_mark_dirty(l, c);
    return c;
}

static void end_headers(nsv__h2 *h, nsv__h2s *s, int end_stream)
{
    int r = 0;
    if (!s->too_big) {
        if (!s->line_done)
            r |= request_line(h, s);
        if (s->cookie_len)
            r |= put(h, s, "cookie: ", 8) | put(h, s, s->cookie, s->cookie_len) | put(h, s, "\r\n", 2);
        if (!end_stream && !s->has_cl) {
            r |= put(h, s, "transfer-encoding: chunked\r\n", 28);
            s->chunked_req = 1;
        }
        r |= put(h, s, "\r\n", 2);
    }
    s->req_end = (uint8_t)end_stream;
    nsv__conn *c = r ? NULL : stream_conn(h, s);
    if (!c) {
        nghttp2_submit_rst_stream(h->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_REFUSED_STREAM);
        return;
    }
    if (s->too_big || s->bad_host) { /* as HTTP/1.1 answers a head over the limit, or a bad one */
        nsv__buf_release(h->l, &c->in);
        nsv__answer_refused(h->l, s->too_big ? 431 : 400);
        nsv__error_reply(h->l, c, s->too_big ? 431 : 400);
    }
}

static void req_finished(nsv__h2 *h, nsv__h2s *s)
{
    s->req_end = 1;
    if (s->chunked_req && s->c) {
        if (nsv__buf_append(h->l, &s->c->in, "0\r\n\r\n", 5) != 0)
            nghttp2_submit_rst_stream(h->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
        nsv__conn_mark_dirty(h->l, s->c);
    }
}

int nsv__h2s_frame(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    nsv__h2 *h = ud;
    if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA)
        return 0;
    nsv__h2s *s = stream_of(ng, f->hd.stream_id);
    if (!s)
        return 0;
    int end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST)
        end_headers(h, s, end);
    else if (end)
        req_finished(h, s);
    return 0;
}

/* A stream whose request the HTTP layer still buffers, unseen by the host
 * (a body that is not streamed arrives whole before the REQUEST event), and
 * the bytes it holds. */
static uint64_t unseen_bytes(const nsv__h2s *s)
{
    const nsv__conn *c = s->c;
    if (!c || s->gone || c->seen || c->closing || c->state != NSV__C_READ)
        return 0;
    return c->in.len - c->in.off;
}

/* Stop buffering the request of s: nothing of it was processed, so
 * REFUSED_STREAM lets the client send it again (RFC 9113 8.7). The host
 * never saw it and hears nothing. */
static void refuse(nsv__h2 *h, nsv__h2s *s)
{
    s->gone = 1; /* (the stream's close submits no reset of its own) */
    nghttp2_submit_rst_stream(h->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_REFUSED_STREAM);
    if (s->unconsumed) {
        nghttp2_session_consume(h->ng, s->id, (size_t)s->unconsumed);
        s->unconsumed = 0;
    }
    nsv__conn_close(h->l, s->c);
}

/* The session's bound on request bytes buffered for the host: with 100
 * streams each holding up to max_body, one connection would hold what
 * 100 HTTP/1.1 connections may. Past NSV_OPT_H2_BODY_BUFFER the newest
 * unseen streams are refused, never the oldest (max_body bounds it, and it
 * can always finish). held_bound only grows between counts (the HTTP layer
 * takes bytes without telling), so the streams are counted again only when
 * it passes the budget: about once per budget's worth of DATA while the
 * connection holds little; at every DATA frame (at most h2_max_streams
 * streams to look at) only while it holds close to the budget. */
static void body_budget(nsv__h2 *h, size_t added)
{
    uint64_t budget = (uint64_t)h->l->srv->h2_body_buffer;
    h->held_bound += added;
    if (h->held_bound <= budget)
        return;
    uint64_t total = 0;
    nsv__h2s *oldest = NULL;
    for (nsv__h2s *s = h->streams; s; s = s->next) { /* newest first */
        uint64_t n = unseen_bytes(s);
        total += n;
        if (n)
            oldest = s;
    }
    for (nsv__h2s *s = h->streams, *next; s && total > budget; s = next) {
        next = s->next; /* (refusing leaves s in the list until nghttp2 closes it) */
        uint64_t n = unseen_bytes(s);
        if (!n || s == oldest)
            continue;
        total -= n;
        refuse(h, s);
    }
    h->held_bound = total;
}

int nsv__h2s_data(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *ud)
{
    (void)flags;
    nsv__h2 *h = ud;
    nsv__h2s *s = stream_of(ng, id);
    if (!s || !s->c) { /* nobody reads it: the window opens again at once */
        nghttp2_session_consume(ng, id, len);
        return 0;
    }
    nsv__conn *c = s->c;
    char hex[24];
    int r = 0;
    if (s->chunked_req) {
        int k = snprintf(hex, sizeof hex, "%zx\r\n", len);
        r |= nsv__buf_append(h->l, &c->in, hex, (size_t)k);
    }
    r |= nsv__buf_append(h->l, &c->in, data, len);
    if (s->chunked_req)
        r |= nsv__buf_append(h->l, &c->in, "\r\n", 2);
    if (r) {
        nghttp2_session_consume(ng, id, len);
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_INTERNAL_ERROR);
        return 0;
    }
    /* The window reopens as the HTTP layer reads: at once unless the host
     * paused a streamed body (then when it resumes, nsv__h2s_arm). */
    if (c->reading)
        nghttp2_session_consume(ng, id, len);
    else
        s->unconsumed += len;
    nsv__conn_mark_dirty(h->l, c);
    body_budget(h, len);
    return 0;
}

int nsv__h2s_closed(nghttp2_session *ng, int32_t id, uint32_t code, void *ud)
{
    (void)code;
    nsv__h2 *h = ud;
    nsv__h2s *s = stream_of(ng, id);
    if (!s)
        return 0;
    s->gone = 1;
    if (s->c) /* the client reset it, or the session ends: the host hears CLOSE */
        nsv__conn_close(h->l, s->c);
    nsv__h2s_free(h, s);
    return 0;
}

/* The response ended before the request did: RST_STREAM NO_ERROR tells the
 * client to stop sending (RFC 9113 8.1), once the last frame is out. */
int nsv__h2s_sent(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    (void)ud;
    if ((f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) || !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    nsv__h2s *s = stream_of(ng, f->hd.stream_id);
    if (s && !s->req_end)
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_NO_ERROR);
    return 0;
}

/* Stream 1 after "Upgrade: h2c": the request as it came, less the lines
 * that asked for the upgrade. Its body was empty, so it has ended. */
int nsv__h2s_upgraded(nsv__h2 *h, const char *req, size_t len)
{
    nsv__h2s *s = stream_new(h, 1);
    if (!s)
        return -1;
    s->req_end = 1;
    const char *p = req, *end = req + len;
    int r = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl + 1 : end;
        size_t n = (size_t)(e - p);
        int drop = (n > 8 && !strncasecmp(p, "upgrade:", 8)) || (n > 11 && !strncasecmp(p, "connection:", 11)) ||
                   (n > 15 && !strncasecmp(p, "http2-settings:", 15));
        if (!drop)
            r |= put(h, s, p, n);
        p = e;
    }
    s->line_done = 1;
    return r || !stream_conn(h, s) ? -1 : 0;
}

/* ---- the response: HTTP/1.1 bytes from the HTTP layer into frames ---- */

static ssize_t read_body(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                         nghttp2_data_source *src, void *ud)
{
    (void)ng, (void)id, (void)ud;
    nsv__h2s *s = src->ptr;
    size_t avail = s->body.len - s->body.off;
    size_t take = avail < length ? avail : length;
    if (take) {
        memcpy(buf, s->body.p + s->body.off, take);
        s->body.off += (uint32_t)take;
        if (s->body.off == s->body.len)
            s->body.off = s->body.len = 0; /* (the block stays for the next piece) */
        if (s->c && !nsv__out_empty(s->c)) /* the rest of the reply waits for this room */
            nsv__conn_mark_dirty(s->h->l, s->c);
    }
    if (s->body.len == s->body.off && s->resp_end) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        return (ssize_t)take;
    }
    if (!take) {
        s->deferred = 1;
        return NGHTTP2_ERR_DEFERRED;
    }
    return (ssize_t)take;
}

static void resume(nsv__h2s *s)
{
    if (s->deferred) {
        s->deferred = 0;
        nghttp2_session_resume_data(s->h->ng, s->id);
    }
    nsv__h2_wake(s->h);
}

/* Header fields that mean something only to an HTTP/1.1 connection. */
static int hop_by_hop(const char *n, size_t len)
{
    static const char *const names[] = {"connection", "keep-alive", "proxy-connection", "transfer-encoding",
                                        "upgrade"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == len && !strncasecmp(n, names[i], len))
            return 1;
    return 0;
}

static void fail(nsv__h2s *s)
{
    s->rstate = R_DONE;
    s->gone = 1; /* (what the HTTP layer still writes is dropped) */
    nghttp2_submit_rst_stream(s->h->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
    nsv__h2_wake(s->h);
}

/* Submit the parsed head; 0, or -1 when the stream cannot take it. */
static int submit_head(nsv__h2s *s, const nsv__response *r, int kind)
{
    nsv__h2 *h = s->h;
    nghttp2_nv nva[RESP_MAX_HEADERS + 1];
    char status[3];
    int st = r->status % 1000;
    status[0] = (char)('0' + st / 100), status[1] = (char)('0' + st / 10 % 10), status[2] = (char)('0' + st % 10);
    nva[0] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)status, 7, 3, NGHTTP2_NV_FLAG_NONE};
    size_t nv = 1, names = 0;
    for (size_t i = 0; i < r->num_headers; i++)
        names += r->headers[i].name_len;
    if (names > h->names_cap) {
        char *p = nsv__realloc(&h->l->srv->alloc, h->names, names);
        if (!p)
            return -1;
        h->names = p;
        h->names_cap = names;
    }
    char *lc = h->names;
    for (size_t i = 0; i < r->num_headers; i++) {
        const nsv__hdr *f = &r->headers[i];
        if (hop_by_hop(f->name, f->name_len))
            continue;
        for (size_t k = 0; k < f->name_len; k++) {
            char ch = f->name[k];
            lc[k] = ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
        }
        nva[nv++] = (nghttp2_nv){(uint8_t *)lc, (uint8_t *)f->value, f->name_len, f->value_len, NGHTTP2_NV_FLAG_NONE};
        lc += f->name_len;
    }
    if (kind == NSV__BODY_INTERIM)
        return nghttp2_submit_headers(h->ng, NGHTTP2_FLAG_NONE, s->id, NULL, nva, nv, NULL) == 0 ? 0 : -1;
    int empty = kind == NSV__BODY_NONE || (kind == NSV__BODY_LENGTH && r->content_length == 0);
    nghttp2_data_provider prd = {.source.ptr = s, .read_callback = read_body};
    if (nghttp2_submit_response(h->ng, s->id, nva, nv, empty ? NULL : &prd) != 0)
        return -1;
    s->submitted = 1;
    s->kind = (uint8_t)kind;
    s->left = kind == NSV__BODY_LENGTH ? (uint64_t)r->content_length : 0;
    s->rstate = empty ? R_DONE : R_BODY;
    s->resp_end = (uint8_t)empty;
    return 0;
}

/* Take response head bytes from p[0..n): returns how many were used. */
static ssize_t take_head(nsv__h2s *s, const char *p, size_t n)
{
    nsv__loop *l = s->h->l;
    const char *hp = p;
    size_t hn = n, before = 0;
    if (s->rhead.len) { /* a head in pieces: parse what has come so far */
        before = s->rhead.len;
        if (nsv__buf_append(l, &s->rhead, p, n) != 0)
            return -1;
        hp = s->rhead.p;
        hn = s->rhead.len;
    }
    nsv__hdr hdrs[RESP_MAX_HEADERS];
    nsv__response r;
    int k = nsv__parse_response(hp, hn, &r, hdrs, RESP_MAX_HEADERS);
    if (k == 0) {
        if (hn > NSV__H2_HEAD_MAX)
            return -1;
        if (!s->rhead.len && nsv__buf_append(l, &s->rhead, p, n) != 0)
            return -1;
        return (ssize_t)n;
    }
    if (k < 0)
        return -1;
    int kind = nsv__resp_body_kind(&r, s->c && s->c->head ? "HEAD" : "GET", s->c && s->c->head ? 4 : 3);
    if (kind == NSV__BODY_UPGRADE || submit_head(s, &r, kind) != 0)
        return -1;
    memset(&s->ck, 0, sizeof s->ck);
    nsv__buf_release(l, &s->rhead);
    return (ssize_t)((size_t)k - before);
}

/* Take body bytes, decoded, while the stream's buffer has room. */
static size_t take_body(nsv__h2s *s, const char *p, size_t n)
{
    nsv__loop *l = s->h->l;
    size_t pending = s->body.len - s->body.off;
    size_t room = pending < NSV__H2_STREAM_BUF ? NSV__H2_STREAM_BUF - pending : 0;
    size_t want = n < room ? n : room;
    if (s->kind == NSV__BODY_LENGTH && want > s->left)
        want = (size_t)s->left;
    if (!want || nsv__buf_reserve(l, &s->body, want) != 0)
        return 0;
    if (s->kind == NSV__BODY_CHUNKED) {
        size_t cons = 0, prod = 0;
        int r = nsv__chunked_decode(&s->ck, s->body.p + s->body.len, p, want, &cons, &prod);
        s->body.len += (uint32_t)prod;
        if (r < 0)
            return (size_t)-1;
        if (r == 1)
            s->resp_end = 1, s->rstate = R_DONE;
        return cons;
    }
    memcpy(s->body.p + s->body.len, p, want);
    s->body.len += (uint32_t)want;
    if (s->kind == NSV__BODY_LENGTH && (s->left -= want) == 0)
        s->resp_end = 1, s->rstate = R_DONE;
    return want;
}

ssize_t nsv__h2s_send(nsv__loop *l, nsv__conn *c, const char *p, size_t n)
{
    (void)l;
    nsv__h2s *s = c->h2s;
    size_t used = 0;
    while (used < n && !s->gone) {
        if (s->rstate == R_HEAD) {
            ssize_t k = take_head(s, p + used, n - used);
            if (k < 0) {
                fail(s);
                break;
            }
            used += (size_t)k;
        } else if (s->rstate == R_BODY) {
            size_t k = take_body(s, p + used, n - used);
            if (k == (size_t)-1) {
                fail(s);
                break;
            }
            if (k == 0 && s->rstate == R_BODY)
                break; /* the window is full */
            used += k;
        } else {
            break;
        }
    }
    if (s->gone || s->rstate == R_DONE)
        used = n; /* (nothing follows a complete response on a stream) */
    if (!s->gone)
        resume(s);
    if (!used) {
        errno = EAGAIN;
        return -1;
    }
    return (ssize_t)used;
}

/* Reading resumed (the host unpaused a streamed body; what waited in the
 * connection's input goes to the host through nsv__conn_pause): the window
 * reopens by what the client sent meanwhile. */
void nsv__h2s_arm(nsv__loop *l, nsv__conn *c)
{
    (void)l;
    nsv__h2s *s = c->h2s;
    if (!c->reading)
        return;
    if (s->unconsumed && !s->gone) {
        nghttp2_session_consume(s->h->ng, s->id, (size_t)s->unconsumed);
        s->unconsumed = 0;
        nsv__h2_wake(s->h);
    }
}

/* The stream's connection closes (answered, or the host closed it, or a
 * timeout): a response left incomplete resets the stream. */
void nsv__h2s_conn_closed(nsv__loop *l, nsv__conn *c)
{
    (void)l;
    nsv__h2s *s = c->h2s;
    s->c = NULL;
    s->h->nlive--;
    if (s->gone)
        return;
    if (s->rstate == R_BODY && s->kind == NSV__BODY_CLOSE) {
        s->resp_end = 1; /* a body delimited by the close ends here */
        s->rstate = R_DONE;
    }
    if (s->rstate != R_DONE) {
        s->gone = 1;
        nghttp2_submit_rst_stream(s->h->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
    }
    if (s->unconsumed) {
        nghttp2_session_consume(s->h->ng, s->id, (size_t)s->unconsumed);
        s->unconsumed = 0;
    }
    resume(s);
}
#endif
