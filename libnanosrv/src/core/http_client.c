/* http_client.c - the HTTP/1.1 client: requests, a keep-alive pool per origin,
 * response heads and bodies (resp_parse.c, chunked.c), timeouts and limits.
 * Connections come from the outbound connect path (net/tcp.c) marked httpc
 * and speak nsv__proto_httpc once up. Requests live in a per-loop table of
 * fixed chunks: records never move, so a host callback that starts a
 * request while one is being processed cannot pull it from under us. */
#include "http_client.h"
#include "../http/req_write.h"
#include "../http/resp_parse.h"
#include "server.h"
#include "../loop/io.h"
#include "../net/tcp.h"
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define RQ_CHUNK 1024
#define RQ_MAX_CHUNKS 1024
#define REQ_BIT (1ULL << 62) /* request ids never equal a connection id */
#define MAX_INTERIM 16       /* 1xx heads skipped before a final one */
#define MAX_METHOD 32
#define MAX_ORIGINS 4096
/* Request bytes sent per turn: a server that reads as fast as we send
 * would otherwise take a whole upload in one turn, before its early
 * answer is read (on_event reads first, each turn). */
#define SEND_TURN (512 * 1024)

enum { RS_FREE = 0, RS_WAIT, RS_SENT, RS_BODY };

typedef struct hreq {
    uint32_t gen, slot;     /* slot: its index in the loop's table */
    uint8_t state, streamed, ended, retry_ok, retried, paused, want_writable, kind, reuse, interim;
    uint8_t body_stopped;   /* the server answered early: the rest of the body is dropped */
    uint8_t method_len;
    char method[MAX_METHOD];
    int32_t origin;
    uint32_t next;          /* FIFO link: slot + 1, 0 = last */
    uint64_t conn;          /* its connection once it has one (checked against the tag) */
    /* The request's bytes, sent from here by send_wire (never queued in the
     * connection's output, which the loop flushes before it reads and drops
     * with the connection on a send error: an early answer in the socket
     * would be lost). Kept whole for a retry until a response comes. */
    char *wire;
    size_t wire_len, wire_cap, wire_off; /* wire_off: sent on the current connection */
    int64_t declared;       /* streamed: the content_length given, -1 chunked */
    uint64_t sent_body;     /* streamed: body bytes passed so far */
    int64_t deadline_all;   /* NSV_OPT_HTTP_TIMEOUT_MS, 0 none */
    int64_t body_left;      /* Content-Length bytes still owed */
    uint64_t wire_body;     /* response body bytes on the wire (the limit) */
    nsv__chunked chunk;
} hreq;

typedef struct origin {
    uint8_t tls;
    uint16_t port;
    uint8_t host_len;
    char host[256];
    char authority[264]; /* the Host header */
    uint8_t alen;
    uint32_t nconns;     /* open or connecting */
    uint32_t nidle;
    uint64_t idle[256];  /* pooled connections, most recent last */
    uint32_t wait_head, wait_tail; /* requests waiting for a connection: slot + 1 */
} origin;

struct nsv__httpc_loop {
    hreq *chunks[RQ_MAX_CHUNKS];
    uint32_t nchunks, nslots;
    uint32_t *freelist;
    uint32_t nfree;
    origin **origins;
    uint32_t norigins, ocap;
    int busy;            /* inside process(): a cancel closes the connection later */
    int dispatching, redispatch;
};

#define RQ(h, i) (&(h)->chunks[(i) / RQ_CHUNK][(i) % RQ_CHUNK])

static uint64_t rid_of(nsv__loop *l, struct nsv__httpc_loop *h, hreq *r, uint32_t slot)
{
    (void)h;
    return REQ_BIT | NSV__ID(slot, l->idx, r->gen);
}

static hreq *req_get(nsv__loop *l, uint64_t id, uint32_t *slot)
{
    struct nsv__httpc_loop *h = l->httpc;
    if (!h || !(id & REQ_BIT) || NSV__ID_LOOP(id) != (uint32_t)l->idx)
        return NULL;
    uint32_t s = NSV__ID_SLOT(id);
    if (s >= h->nslots)
        return NULL;
    hreq *r = RQ(h, s);
    if (r->state == RS_FREE || r->gen != (NSV__ID_GEN(id) & NSV__GEN_MAX))
        return NULL;
    if (slot)
        *slot = s;
    return r;
}

static hreq *req_of(nsv__loop *l, nsv__conn *c) { return c->tag ? req_get(l, c->tag, NULL) : NULL; }

static struct nsv__httpc_loop *state(nsv__loop *l)
{
    if (!l->httpc)
        l->httpc = nsv__calloc(&l->srv->alloc, sizeof *l->httpc);
    return l->httpc;
}

static hreq *req_alloc(nsv__loop *l, uint32_t *slot)
{
    struct nsv__httpc_loop *h = state(l);
    if (!h)
        return NULL;
    if (h->nfree == 0) {
        if (h->nchunks >= RQ_MAX_CHUNKS)
            return NULL;
        uint32_t *fl = nsv__realloc(&l->srv->alloc, h->freelist, (h->nchunks + 1) * RQ_CHUNK * sizeof *fl);
        if (!fl)
            return NULL;
        h->freelist = fl;
        hreq *ch = nsv__calloc(&l->srv->alloc, RQ_CHUNK * sizeof *ch);
        if (!ch)
            return NULL;
        h->chunks[h->nchunks++] = ch;
        for (uint32_t i = RQ_CHUNK; i-- > 0;)
            h->freelist[h->nfree++] = h->nslots + i;
        h->nslots += RQ_CHUNK;
    }
    uint32_t s = h->freelist[--h->nfree];
    hreq *r = RQ(h, s);
    uint32_t gen = r->gen + 1 > NSV__GEN_MAX ? 1 : r->gen + 1;
    memset(r, 0, sizeof *r);
    r->gen = gen;
    r->slot = s;
    *slot = s;
    return r;
}

static void req_free(nsv__loop *l, hreq *r)
{
    struct nsv__httpc_loop *h = l->httpc;
    nsv__free(&l->srv->alloc, r->wire);
    r->wire = NULL;
    r->wire_len = r->wire_cap = 0;
    r->state = RS_FREE;
    h->freelist[h->nfree++] = r->slot;
}

static int wire_add(nsv__loop *l, hreq *r, const char *p, size_t n)
{
    if (r->wire_off && !r->retry_ok && r->wire_cap - r->wire_len < n) { /* drop what went out */
        memmove(r->wire, r->wire + r->wire_off, r->wire_len - r->wire_off);
        r->wire_len -= r->wire_off;
        r->wire_off = 0;
    }
    if (r->wire_cap - r->wire_len < n) {
        size_t cap = r->wire_cap ? r->wire_cap : 1024;
        while (cap - r->wire_len < n)
            cap *= 2;
        char *w = nsv__realloc(&l->srv->alloc, r->wire, cap);
        if (!w)
            return NSV_ENOMEM;
        r->wire = w;
        r->wire_cap = cap;
    }
    memcpy(r->wire + r->wire_len, p, n);
    r->wire_len += n;
    return NSV_OK;
}

/* ---- events ---- */

static void emit(nsv__loop *l, uint64_t id, uint32_t type, int32_t code, uint32_t flags, const char *p,
                 size_t n)
{
    nsv_event *ev;
    char *d = nsv__evq_push(l, &ev, n);
    if (!d)
        return;
    ev->type = type;
    ev->code = code;
    ev->flags = flags;
    ev->conn = id;
    if (n)
        memcpy(d, p, n);
    ev->body_len = (uint32_t)n;
    nsv__evq_commit(l);
}

/* The request's final event is an ERROR: it is freed first, so nothing a
 * callback does can see it half-ended. */
static void fail(nsv__loop *l, hreq *r, uint64_t id, int code, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof msg)
        n = sizeof msg - 1;
    req_free(l, r);
    emit(l, id, NSV_EV_ERROR, code, 0, msg, (size_t)n);
}

static void emit_head(nsv__loop *l, uint64_t id, hreq *r, const nsv__response *resp, int tls)
{
    size_t hl = 0;
    for (size_t i = 0; i < resp->num_headers; i++)
        hl += resp->headers[i].name_len + 2 + resp->headers[i].value_len + 2;
    size_t n = r->method_len + resp->reason_len + hl;
    nsv_event *ev;
    char *d = nsv__evq_push(l, &ev, n);
    if (!d)
        return;
    ev->type = NSV_EV_HTTP_RESPONSE;
    ev->code = resp->status;
    ev->conn = id;
    ev->flags = (r->reuse ? NSV_EVF_KEEPALIVE : 0) | (tls ? NSV_EVF_TLS : 0) |
                (resp->minor_version == 0 ? NSV_EVF_HTTP10 : 0);
    memcpy(d, r->method, r->method_len);
    ev->method_off = 0;
    ev->method_len = r->method_len;
    memcpy(d + r->method_len, resp->reason, resp->reason_len);
    ev->path_off = r->method_len;
    ev->path_len = (uint32_t)resp->reason_len;
    char *w = d + r->method_len + resp->reason_len;
    ev->headers_off = (uint32_t)(w - d);
    for (size_t i = 0; i < resp->num_headers; i++) {
        const nsv__hdr *x = &resp->headers[i];
        memcpy(w, x->name, x->name_len);
        w += x->name_len;
        *w++ = ':', *w++ = ' ';
        memcpy(w, x->value, x->value_len);
        w += x->value_len;
        *w++ = '\r', *w++ = '\n';
    }
    ev->headers_len = (uint32_t)hl;
    ev->nheaders = (uint32_t)resp->num_headers;
    nsv__evq_commit(l);
}

/* ---- origins and the pool ---- */

static int32_t origin_find(nsv__loop *l, int tls, const char *host, size_t hlen, int port)
{
    struct nsv__httpc_loop *h = state(l);
    if (!h)
        return NSV_ENOMEM;
    for (uint32_t i = 0; i < h->norigins; i++) {
        origin *o = h->origins[i];
        if (o->tls == tls && o->port == port && o->host_len == hlen && nsv__strncaseeq(o->host, host, hlen))
            return (int32_t)i;
    }
    if (h->norigins >= MAX_ORIGINS)
        return nsv__set_detail(l->srv, NSV_ERANGE, "nsv_http_request: %d origins (scheme, host, port) were "
                               "used on this loop, the most it keeps", MAX_ORIGINS);
    if (h->norigins == h->ocap) {
        uint32_t cap = h->ocap ? h->ocap * 2 : 8;
        origin **p = nsv__realloc(&l->srv->alloc, h->origins, cap * sizeof *p);
        if (!p)
            return NSV_ENOMEM;
        h->origins = p;
        h->ocap = cap;
    }
    origin *o = nsv__calloc(&l->srv->alloc, sizeof *o);
    if (!o)
        return NSV_ENOMEM;
    o->tls = (uint8_t)tls;
    o->port = (uint16_t)port;
    o->host_len = (uint8_t)hlen;
    memcpy(o->host, host, hlen);
    int v6 = memchr(host, ':', hlen) != NULL;
    int deflt = port == (tls ? 443 : 80);
    int n = snprintf(o->authority, sizeof o->authority, v6 ? "[%.*s]" : "%.*s", (int)hlen, host);
    if (!deflt)
        n += snprintf(o->authority + n, sizeof o->authority - (size_t)n, ":%d", port);
    o->alen = (uint8_t)n;
    h->origins[h->norigins] = o;
    return (int32_t)h->norigins++;
}

static void fifo_push(struct nsv__httpc_loop *h, origin *o, uint32_t slot, int front)
{
    hreq *r = RQ(h, slot);
    r->state = RS_WAIT;
    if (front) {
        r->next = o->wait_head;
        o->wait_head = slot + 1;
        if (!o->wait_tail)
            o->wait_tail = slot + 1;
        return;
    }
    r->next = 0;
    if (o->wait_tail)
        RQ(h, o->wait_tail - 1)->next = slot + 1;
    else
        o->wait_head = slot + 1;
    o->wait_tail = slot + 1;
}

static void fifo_remove(struct nsv__httpc_loop *h, origin *o, uint32_t slot)
{
    uint32_t prev = 0;
    for (uint32_t i = o->wait_head; i; prev = i, i = RQ(h, i - 1)->next) {
        if (i != slot + 1)
            continue;
        uint32_t nx = RQ(h, i - 1)->next;
        if (prev)
            RQ(h, prev - 1)->next = nx;
        else
            o->wait_head = nx;
        if (o->wait_tail == i)
            o->wait_tail = prev;
        return;
    }
}

static void arm(nsv__loop *l, nsv__conn *c, hreq *r, int64_t ms)
{
    int64_t d = l->now + ms;
    if (r->deadline_all && r->deadline_all < d)
        d = r->deadline_all;
    c->deadline = d;
}

/* Hand r to c: its bytes go out from r->wire when c is on the flush list
 * (on_dirty); a retry-able request keeps them whole until the head. */
static void send_on(nsv__loop *l, hreq *r, uint64_t rid, nsv__conn *c)
{
    nsv_server *s = l->srv;
    c->tag = rid;
    r->conn = nsv__conn_id(l, c);
    r->state = RS_SENT;
    r->interim = 0;
    if (!r->deadline_all && s->http_timeout_ms)
        r->deadline_all = l->now + s->http_timeout_ms;
    r->wire_off = 0;
    r->body_stopped = 0;
    if (c->proto == &nsv__proto_httpc) {
        arm(l, c, r, s->http_head_timeout_ms);
        nsv__conn_mark_dirty(l, c);
    }
}

static void run_origin(nsv__loop *l, int32_t oi)
{
    struct nsv__httpc_loop *h = l->httpc;
    nsv_server *s = l->srv;
    origin *o = h->origins[oi];
    while (o->wait_head) {
        uint32_t slot = o->wait_head - 1;
        hreq *r = RQ(h, slot);
        uint64_t rid = rid_of(l, h, r, slot);
        nsv__conn *c = NULL;
        while (o->nidle && !c) {
            c = nsv__conn_get(l, o->idle[--o->nidle]);
            if (c && (c->proto != &nsv__proto_httpc || c->closing || c->tag))
                c = NULL;
        }
        if (!c && o->nconns >= (uint32_t)s->http_per_origin)
            return;
        o->wait_head = r->next;
        if (!o->wait_head)
            o->wait_tail = 0;
        if (c) {
            send_on(l, r, rid, c);
            continue;
        }
        char url[300];
        int n = snprintf(url, sizeof url, memchr(o->host, ':', o->host_len) ? "%s://[%.*s]:%u" : "%s://%.*s:%u",
                         o->tls ? "tls" : "tcp", (int)o->host_len, o->host, (unsigned)o->port);
        r->state = RS_SENT;
        o->nconns++;
        int64_t cid = nsv__tcp_connect_as(l, url, (size_t)n, oi, rid);
        if (cid < 0) {
            o->nconns--;
            fail(l, r, rid, (int)cid, "connect: %s",
                 nsv_last_error_detail(s));
            continue;
        }
        c = nsv__conn_get(l, (uint64_t)cid);
        if (c && c->tag == rid && req_get(l, rid, NULL) == r)
            send_on(l, r, rid, c);
    }
}

/* Hand waiting requests connections; reentrant calls (a callback starting
 * a request, a refused connect closing at once) only ask for another pass. */
static void dispatch(nsv__loop *l, int32_t oi)
{
    struct nsv__httpc_loop *h = l->httpc;
    if (!h || oi < 0 || (uint32_t)oi >= h->norigins)
        return;
    if (h->dispatching) {
        h->redispatch = 1;
        return;
    }
    h->dispatching = 1;
    run_origin(l, oi);
    while (h->redispatch) {
        h->redispatch = 0;
        for (uint32_t i = 0; i < h->norigins; i++)
            run_origin(l, (int32_t)i);
    }
    h->dispatching = 0;
}

static void pool_put(nsv__loop *l, nsv__conn *c)
{
    origin *o = l->httpc->origins[c->route];
    c->tag = 0;
    if (o->nidle >= NSV__ARRAY_LEN(o->idle)) {
        nsv__conn_close(l, c);
        return;
    }
    o->idle[o->nidle++] = nsv__conn_id(l, c);
    if (c->paused) { /* the pause was the ended request's, not the connection's */
        c->paused = 0;
        nsv__conn_set_events(l, c, 1, c->writing);
    }
    c->deadline = l->now + l->srv->http_pool_idle_ms;
    c->in.len = c->in.off = 0;
    c->served = 1;
    dispatch(l, c->route);
}

/* ---- hooks from the loop and the connect path ---- */

void nsv__httpc_connected(nsv__loop *l, nsv__conn *c)
{
    c->proto = &nsv__proto_httpc;
    nsv__conn_set_events(l, c, 1, 0);
    hreq *r = req_of(l, c);
    if (!r) { /* cancelled while connecting */
        if (l->srv->http_pool_idle_ms && !atomic_load(&l->srv->draining))
            pool_put(l, c);
        else
            nsv__conn_close(l, c);
        return;
    }
    arm(l, c, r, l->srv->http_head_timeout_ms);
    nsv__conn_mark_dirty(l, c);
}

void nsv__httpc_conn_error(nsv__loop *l, nsv__conn *c, int code, const char *msg, size_t n)
{
    hreq *r = req_of(l, c);
    uint64_t rid = c->tag;
    c->tag = 0;
    if (r)
        fail(l, r, rid, code, "%.*s", (int)n, msg);
}

void nsv__httpc_closed(nsv__loop *l, nsv__conn *c)
{
    struct nsv__httpc_loop *h = l->httpc;
    if (!h || c->route < 0 || (uint32_t)c->route >= h->norigins)
        return;
    origin *o = h->origins[c->route];
    if (o->nconns)
        o->nconns--;
    uint32_t slot;
    uint64_t rid = c->tag;
    hreq *r = rid ? req_get(l, rid, &slot) : NULL;
    c->tag = 0;
    if (!r)
        return;
    nsv_server *s = l->srv;
    /* A pooled connection the server closed while our request was on its
     * way: nothing of a response came, so the request can go again. */
    if (c->served && r->state == RS_SENT && c->in.len == c->in.off && r->retry_ok && !r->retried &&
        !atomic_load(&s->draining) && !atomic_load(&s->stop)) {
        r->retried = 1;
        fifo_push(h, o, slot, 1);
        return; /* nsv__httpc_after_close dispatches it */
    }
    if (atomic_load(&s->draining) || atomic_load(&s->stop))
        fail(l, r, rid, NSV_ESTOPPED, "the server stopped (drain deadline) before the response ended");
    else if (r->state == RS_SENT)
        fail(l, r, rid, NSV_ECLOSED, "the server closed the connection before the response head%s",
             c->in.len > c->in.off ? " was complete" : "");
    else
        fail(l, r, rid, NSV_ECLOSED, "the server closed the connection before the response body ended");
}

void nsv__httpc_after_close(nsv__loop *l, int32_t oi) { dispatch(l, oi); }

void nsv__httpc_stop(nsv__loop *l)
{
    struct nsv__httpc_loop *h = l->httpc;
    if (!h)
        return;
    for (uint32_t i = 0; i < h->norigins; i++) {
        origin *o = h->origins[i];
        while (o->wait_head) {
            uint32_t slot = o->wait_head - 1;
            hreq *r = RQ(h, slot);
            o->wait_head = r->next;
            if (!o->wait_head)
                o->wait_tail = 0;
            fail(l, r, rid_of(l, h, r, slot), NSV_ESTOPPED, "the server stopped before the request got a "
                 "connection");
        }
    }
}

void nsv__httpc_loop_free(nsv__loop *l)
{
    struct nsv__httpc_loop *h = l->httpc;
    if (!h)
        return;
    const nsv__alloc *a = &l->srv->alloc;
    for (uint32_t i = 0; i < h->nchunks; i++) {
        for (uint32_t j = 0; j < RQ_CHUNK; j++)
            nsv__free(a, h->chunks[i][j].wire);
        nsv__free(a, h->chunks[i]);
    }
    for (uint32_t i = 0; i < h->norigins; i++)
        nsv__free(a, h->origins[i]);
    nsv__free(a, h->origins);
    nsv__free(a, h->freelist);
    nsv__free(a, h);
    l->httpc = NULL;
}

/* ---- the response ---- */

static void wire_drop(nsv__loop *l, hreq *r)
{
    nsv__free(&l->srv->alloc, r->wire);
    r->wire = NULL;
    r->wire_len = r->wire_cap = r->wire_off = 0;
}

/* No more of the request body goes out; pieces the host still passes are
 * dropped, and the connection is not reused. */
static void stop_body(nsv__loop *l, nsv__conn *c, hreq *r)
{
    r->body_stopped = 1;
    r->reuse = 0;
    wire_drop(l, r);
    if (c->writing)
        nsv__conn_set_events(l, c, c->reading, 0);
}

/* The body ended: the request is freed before its last event, then the
 * connection goes back to the pool or is closed. */
static void complete(nsv__loop *l, nsv__conn *c, hreq *r, const char *p, size_t n, size_t used)
{
    nsv_server *s = l->srv;
    uint64_t rid = c->tag;
    int reuse = r->reuse && (!r->streamed || r->ended) && !r->body_stopped && r->wire_off == r->wire_len &&
                s->http_pool_idle_ms && !atomic_load(&s->draining);
    req_free(l, r);
    c->tag = 0;
    emit(l, rid, NSV_EV_HTTP_BODY, 0, NSV_EVF_EOF, p, n);
    c->in.off += (uint32_t)used;
    if (reuse && c->in.len == c->in.off && !c->closing && !c->peer_closed)
        pool_put(l, c);
    else
        nsv__conn_close(l, c);
}

static void piece(nsv__loop *l, nsv__conn *c, uint64_t rid, const char *p, size_t n)
{
    (void)c;
    if (n)
        emit(l, rid, NSV_EV_HTTP_BODY, 0, 0, p, n);
}

/* Returns 1 to go on (the state moved), 0 to wait for input, -1 when the
 * connection was closed or handed on. */
static int step(nsv__loop *l, nsv__conn *c, hreq *r, int eof)
{
    nsv_server *s = l->srv;
    uint64_t rid = c->tag;
    char *p = c->in.p + c->in.off;
    size_t avail = c->in.len - c->in.off;
    if (r->state == RS_SENT) {
        nsv__hdr hdrs[256];
        nsv__response resp;
        int k = avail ? nsv__parse_response(p, avail, &resp, hdrs, (size_t)s->http_max_headers) : 0;
        if (k > s->http_max_head || (k == 0 && (int64_t)avail > s->http_max_head)) {
            c->tag = 0;
            fail(l, r, rid, NSV_ETOOBIG, "the response head is over http_max_head_bytes (%lld)",
                 (long long)s->http_max_head);
            return nsv__conn_close(l, c), -1;
        }
        if (k == 0) {
            if (eof)
                return nsv__conn_close(l, c), -1;
            return 0;
        }
        if (k < 0) {
            c->tag = 0;
            fail(l, r, rid, k == NSV_ETOOBIG ? NSV_ETOOBIG : NSV_EPARSE, "response head: %s (byte %zu)%s",
                 resp.why ? resp.why : "malformed", resp.why_at,
                 k == NSV_ETOOBIG ? "; see http_max_headers" : "");
            return nsv__conn_close(l, c), -1;
        }
        int kind = nsv__resp_body_kind(&resp, r->method, r->method_len);
        if (kind == NSV__BODY_INTERIM) {
            if (++r->interim > MAX_INTERIM) {
                c->tag = 0;
                fail(l, r, rid, NSV_EPARSE, "the server sent more than %d 1xx responses", MAX_INTERIM);
                return nsv__conn_close(l, c), -1;
            }
            c->in.off += (uint32_t)k;
            return 1;
        }
        if (kind == NSV__BODY_LENGTH && resp.content_length > s->http_max_body) {
            c->tag = 0;
            fail(l, r, rid, NSV_ETOOBIG, "Content-Length %lld is over http_max_body (%lld)",
                 (long long)resp.content_length, (long long)s->http_max_body);
            return nsv__conn_close(l, c), -1;
        }
        r->kind = (uint8_t)kind;
        r->reuse = (uint8_t)(nsv__resp_reusable(&resp, kind) && s->http_pool_idle_ms);
        r->body_left = resp.content_length;
        memset(&r->chunk, 0, sizeof r->chunk);
        /* A final answer while the body is still going out: a server that
         * closes or refuses (>= 300) does not want the rest (RFC 9112 9.5),
         * so it is dropped and the connection ends with this response. */
        int unsent = r->wire_off < r->wire_len || (r->streamed && !r->ended);
        if (unsent && (!(resp.flags & NSV__RESP_KEEP_ALIVE) || resp.status >= 300))
            stop_body(l, c, r);
        else if (r->retry_ok && !unsent)
            wire_drop(l, r); /* a response came: no retry any more */
        r->retry_ok = 0;
        r->state = RS_BODY;
        l->httpc->busy++;
        emit_head(l, rid, r, &resp, c->tls != NULL);
        l->httpc->busy--;
        if (req_get(l, rid, NULL) != r) /* cancelled in a callback */
            return nsv__conn_close(l, c), -1;
        c->in.off += (uint32_t)k;
        arm(l, c, r, s->http_read_timeout_ms);
        if (kind == NSV__BODY_NONE || kind == NSV__BODY_UPGRADE) {
            if (kind == NSV__BODY_UPGRADE)
                r->reuse = 0; /* no upgrades in this client: the connection ends here */
            complete(l, c, r, NULL, 0, 0);
            return -1;
        }
        return 1;
    }
    if (c->paused)
        return 0;
    if (avail)
        arm(l, c, r, s->http_read_timeout_ms);
    switch (r->kind) {
    case NSV__BODY_LENGTH: {
        size_t take = avail < (uint64_t)r->body_left ? avail : (size_t)r->body_left;
        r->body_left -= (int64_t)take;
        if (r->body_left == 0) {
            complete(l, c, r, p, take, take);
            return -1;
        }
        if (eof && take == avail)
            return nsv__conn_close(l, c), -1;
        if (!take)
            return 0;
        l->httpc->busy++;
        piece(l, c, rid, p, take);
        l->httpc->busy--;
        c->in.off += (uint32_t)take;
        return 1;
    }
    case NSV__BODY_CHUNKED: {
        if (!avail)
            return eof ? (nsv__conn_close(l, c), -1) : 0;
        size_t used = 0, made = 0;
        int rc = nsv__chunked_decode(&r->chunk, p, p, avail, &used, &made);
        r->wire_body += used;
        if (r->wire_body > (uint64_t)s->http_max_body) {
            c->tag = 0;
            fail(l, r, rid, NSV_ETOOBIG, "the chunked body is over http_max_body (%lld bytes on the wire)",
                 (long long)s->http_max_body);
            return nsv__conn_close(l, c), -1;
        }
        if (rc < 0) {
            c->tag = 0;
            fail(l, r, rid, NSV_EPARSE, "chunked body: bad chunk size line, missing CRLF or overlong line");
            return nsv__conn_close(l, c), -1;
        }
        if (rc == 1) {
            complete(l, c, r, p, made, used);
            return -1;
        }
        if (used == 0)
            return eof ? (nsv__conn_close(l, c), -1) : 0;
        l->httpc->busy++;
        piece(l, c, rid, p, made);
        l->httpc->busy--;
        c->in.off += (uint32_t)used;
        return 1;
    }
    default: /* NSV__BODY_CLOSE */
        r->wire_body += avail;
        if (r->wire_body > (uint64_t)s->http_max_body) {
            c->tag = 0;
            fail(l, r, rid, NSV_ETOOBIG, "the body is over http_max_body (%lld)", (long long)s->http_max_body);
            return nsv__conn_close(l, c), -1;
        }
        if (eof) {
            complete(l, c, r, p, avail, avail);
            return -1;
        }
        if (!avail)
            return 0;
        l->httpc->busy++;
        piece(l, c, rid, p, avail);
        l->httpc->busy--;
        c->in.off += (uint32_t)avail;
        return 1;
    }
}

static void process(nsv__loop *l, nsv__conn *c, int eof)
{
    for (;;) {
        hreq *r = req_of(l, c);
        if (!r || c->closing) { /* cancelled from a callback; or stray bytes on an idle connection */
            nsv__conn_close(l, c);
            return;
        }
        uint64_t rid = c->tag;
        int k = step(l, c, r, eof);
        if (k < 0)
            return;
        if (req_get(l, rid, NULL) != r || c->tag != rid) {
            nsv__conn_close(l, c);
            return;
        }
        if (k == 0)
            break;
    }
    if (c->in.off == c->in.len)
        c->in.off = c->in.len = 0;
    else if (c->in.off > c->in.cap / 2) {
        memmove(c->in.p, c->in.p + c->in.off, c->in.len - c->in.off);
        c->in.len -= c->in.off;
        c->in.off = 0;
    }
}

static void on_readable(nsv__loop *l, nsv__conn *c)
{
    hreq *r = req_of(l, c);
    if (c->paused || c->peer_closed) {
        nsv__conn_set_events(l, c, 0, c->writing);
        return;
    }
    /* Bounded input: while the host pauses, nothing more is read. */
    ssize_t n = nsv__io_recv(l, c, l->scratch, NSV__SCRATCH);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (!r || n < 0) { /* idle: the server closed or sent stray bytes; or a reset */
        nsv__conn_close(l, c);
        return;
    }
    if (n == 0) {
        c->peer_closed = 1;
        nsv__conn_set_events(l, c, 0, c->writing);
        process(l, c, 1);
        return;
    }
    if (nsv__buf_append(l, &c->in, l->scratch, (size_t)n) != 0) {
        uint64_t rid = c->tag;
        c->tag = 0;
        fail(l, r, rid, NSV_ENOMEM, "no memory for %zd bytes of the response", n);
        nsv__conn_close(l, c);
        return;
    }
    process(l, c, 0);
}

/* The socket takes no more (a reset: the server closed with our bytes
 * unread), or it reported an error or hang-up while nothing was watched
 * (paused): what the server sent before is in the socket. Take all of it
 * (a socket buffer at most), stop watching the socket (a hang-up is
 * signalled for ever), and let the parser end the request with it, now or
 * on resume. Returns -1 when c was closed. */
static int read_dead(nsv__loop *l, nsv__conn *c)
{
    uint64_t id = nsv__conn_id(l, c);
    for (;;) {
        ssize_t n = nsv__io_recv(l, c, l->scratch, NSV__SCRATCH);
        if (n > 0 && nsv__buf_append(l, &c->in, l->scratch, (size_t)n) == 0)
            continue;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        c->peer_closed = 1; /* EOF, an error, or no memory: nothing more comes */
        break;
    }
    if (c->peer_closed) {
        nsv__conn_set_events(l, c, 0, 0);
        nsv__loop_remove_fd(l, c->fd);
    }
    if (!c->paused)
        process(l, c, c->peer_closed);
    return nsv__conn_get(l, id) == c ? 0 : -1;
}

/* Send what r has for c, from r->wire, SEND_TURN bytes at most (then the
 * poller comes back at once, writable). Progress restarts the head timeout
 * and, once half of max_output is left, tells a streamed body that met
 * NSV_EAGAIN to go on. Returns -1 when c was closed. */
static int send_wire(nsv__loop *l, nsv__conn *c, hreq *r, uint64_t rid)
{
    nsv_server *s = l->srv;
    size_t before = r->wire_off;
    while (r->wire_off < r->wire_len && r->wire_off - before < SEND_TURN) {
        size_t want = r->wire_len - r->wire_off;
        if (want > SEND_TURN - (r->wire_off - before))
            want = SEND_TURN - (r->wire_off - before);
        ssize_t n = nsv__io_send(l, c, r->wire + r->wire_off, want);
        if (n > 0) {
            r->wire_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        /* The rest is dropped; a retry (nsv__httpc_closed) starts over. */
        r->body_stopped = 1;
        r->wire_off = r->wire_len;
        nsv__conn_set_events(l, c, c->reading, 0);
        return read_dead(l, c);
    }
    int blocked = r->wire_off < r->wire_len;
    if (!blocked && !r->retry_ok) {
        if (r->streamed)
            r->wire_len = r->wire_off = 0; /* the buffer stays for the next pieces */
        else
            wire_drop(l, r);
    }
    nsv__conn_set_events(l, c, c->reading, blocked);
    if (r->wire_off == before && blocked)
        return 0;
    if (r->state == RS_SENT)
        arm(l, c, r, s->http_head_timeout_ms);
    if (r->want_writable && (int64_t)(r->wire_len - r->wire_off) <= s->max_output / 2) {
        r->want_writable = 0;
        emit(l, rid, NSV_EV_TCP_WRITABLE, 1, 0, NULL, 0);
    }
    return 0;
}

/* Every poller event of a client connection comes here instead of the
 * loop's flush-then-read: the response is read first, so an answer that
 * came while the request is still going out is taken before a send can
 * fail; then the request's bytes go on. */
static void on_event(nsv__loop *l, nsv__conn *c)
{
    uint64_t id = nsv__conn_id(l, c);
    if (c->closing || c->lingering) { /* cancelled: drop input until the server's EOF */
        ssize_t n = nsv__io_recv(l, c, l->scratch, NSV__SCRATCH);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            nsv__conn_close(l, c);
        return;
    }
    int armed = c->reading || c->writing;
    if (c->reading) {
        on_readable(l, c);
        if (nsv__conn_get(l, id) != c || c->closing)
            return;
    }
    hreq *r = req_of(l, c);
    if (r && c->writing)
        send_wire(l, c, r, c->tag);
    else if (!armed)
        read_dead(l, c);
}

/* On the flush list (a request was handed over, a body piece came): send. */
static int on_dirty(nsv__loop *l, nsv__conn *c)
{
    hreq *r = req_of(l, c);
    if (r && !c->writing && r->wire_off < r->wire_len)
        send_wire(l, c, r, c->tag);
    return 0;
}

static void on_timer(nsv__loop *l, nsv__conn *c)
{
    hreq *r = req_of(l, c);
    if (!r) {
        nsv__conn_close(l, c);
        return;
    }
    nsv_server *s = l->srv;
    uint64_t rid = c->tag;
    c->tag = 0;
    if (r->deadline_all && l->now >= r->deadline_all)
        fail(l, r, rid, NSV_ETIMEDOUT, "the request took longer than http_timeout_ms (%lld)",
             (long long)s->http_timeout_ms);
    else if (r->state == RS_SENT)
        fail(l, r, rid, NSV_ETIMEDOUT, "no response head within http_head_timeout_ms (%lld)",
             (long long)s->http_head_timeout_ms);
    else
        fail(l, r, rid, NSV_ETIMEDOUT, "no response body data within http_read_timeout_ms (%lld)",
             (long long)s->http_read_timeout_ms);
    nsv__conn_close(l, c);
}

static void on_drain(nsv__loop *l, nsv__conn *c)
{
    if (!c->tag)
        nsv__conn_close(l, c);
}

const nsv__proto nsv__proto_httpc = {
    .name = "an HTTP client connection",
    .on_readable = on_readable,
    .on_event = on_event,
    .on_dirty = on_dirty,
    .on_timer = on_timer,
    .on_drain = on_drain,
};

/* ---- the calls ---- */

struct req_args {
    const char *method, *url, *headers, *body;
    size_t method_len, url_len, headers_len, body_len;
    int64_t content_length;
    uint32_t flags;
};

static int idempotent(const char *m, size_t n)
{
    static const char *const ok[] = {"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"};
    for (size_t i = 0; i < NSV__ARRAY_LEN(ok); i++)
        if (strlen(ok[i]) == n && memcmp(ok[i], m, n) == 0)
            return 1;
    return 0;
}

/* NSV_HTTP_HOST_HEADER: the one "Host:" line of the block, taken out of it
 * (the rest is copied to out, which must hold len bytes). 0, or -1 with
 * *why when there is none or more than one. The writer checks the value as
 * an authority. */
static int take_host(const char *h, size_t len, char *out, size_t *olen, const char **val, size_t *vlen,
                     const char **why)
{
    size_t o = 0, i = 0;
    int found = 0;
    while (i < len) {
        const char *e = memchr(h + i, '\n', len - i);
        size_t end = e ? (size_t)(e - h) + 1 : len;
        if (end - i >= 5 && nsv__strncaseeq(h + i, "host:", 5)) {
            if (found++) {
                *why = "headers: more than one Host line with NSV_HTTP_HOST_HEADER";
                return -1;
            }
            size_t a = i + 5, b = end;
            while (b > a && (h[b - 1] == '\n' || h[b - 1] == '\r'))
                b--;
            while (a < b && (h[a] == ' ' || h[a] == '\t'))
                a++;
            while (b > a && (h[b - 1] == ' ' || h[b - 1] == '\t'))
                b--;
            *val = h + a;
            *vlen = b - a;
        } else {
            memcpy(out + o, h + i, end - i);
            o += end - i;
        }
        i = end;
    }
    if (!found || !*vlen) {
        *why = found ? "headers: the Host line is empty" : "headers: NSV_HTTP_HOST_HEADER without a Host line";
        return -1;
    }
    *olen = o;
    return 0;
}

static int64_t request_here(nsv__loop *l, const void *args)
{
    const struct req_args *a = args;
    nsv_server *s = l->srv;
    if (atomic_load(&s->stop) || atomic_load(&s->draining))
        return nsv__set_detail(s, NSV_ESTOPPED, "nsv_http_request: the server is %s; no new requests",
                               atomic_load(&s->draining) ? "draining" : "stopped");
    nsv_url u;
    int tls;
    const char *target;
    size_t tlen;
    int e = nsv__client_url(s, "nsv_http_request", a->url, a->url_len, "http", &u, &tls, &target, &tlen);
    if (e)
        return e;
    if (a->method_len == 0 || a->method_len >= MAX_METHOD)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_http_request: method is %zu bytes; 1-%d allowed",
                               a->method_len, MAX_METHOD - 1);
    int streamed = (a->flags & NSV_HTTP_STREAM_BODY) != 0;
    if (a->flags & ~(uint32_t)(NSV_HTTP_STREAM_BODY | NSV_HTTP_HOST_HEADER))
        return nsv__set_detail(s, NSV_EINVAL, "nsv_http_request: flags 0x%x: only NSV_HTTP_STREAM_BODY (1) "
                               "and NSV_HTTP_HOST_HEADER (2) are defined", (unsigned)a->flags);
    int64_t blen;
    if (streamed) {
        if (a->body_len)
            return nsv__set_detail(s, NSV_EINVAL, "nsv_http_request: body: %zu bytes with "
                                   "NSV_HTTP_STREAM_BODY; send them with nsv_http_request_body", a->body_len);
        if (a->content_length < -1)
            return nsv__set_detail(s, NSV_EINVAL, "nsv_http_request: content_length %lld: -1 (chunked) or "
                                   "the body's size", (long long)a->content_length);
        blen = a->content_length < 0 ? NSV__BODY_CHUNKED_LEN : a->content_length;
    } else {
        if (a->content_length != -1 && (uint64_t)a->content_length != a->body_len)
            return nsv__set_detail(s, NSV_EINVAL, "nsv_http_request: content_length %lld differs from "
                                   "body_len %zu; pass -1", (long long)a->content_length, a->body_len);
        blen = (int64_t)a->body_len;
    }
    int32_t oi = origin_find(l, tls, a->url + u.host_off, u.host_len, u.port);
    if (oi < 0)
        return oi == NSV_ENOMEM ? nsv__set_detail(s, NSV_ENOMEM, "nsv_http_request: no memory for the origin") : oi;
    origin *o = l->httpc->origins[oi];
    const char *why = NULL;
    unsigned wf = s->http_pool_idle_ms ? 0 : NSV__WR_CLOSE;
    /* The Host: the URL's authority, or the host's own (a proxy passing its
     * client's); the pool stays keyed by the URL's origin either way. */
    const char *host = o->authority, *hdrs = a->headers;
    size_t host_len = o->alen, hdrs_len = a->headers_len;
    char small[2048], *copy = NULL;
    if (a->flags & NSV_HTTP_HOST_HEADER) {
        copy = a->headers_len <= sizeof small ? small : nsv__malloc(&s->alloc, a->headers_len);
        if (!copy)
            return nsv__set_detail(s, NSV_ENOMEM, "nsv_http_request: no memory for the header block");
        if (take_host(a->headers, a->headers_len, copy, &hdrs_len, &host, &host_len, &why) != 0) {
            if (copy != small)
                nsv__free(&s->alloc, copy);
            return nsv__set_detail(s, NSV_EINVAL, "nsv_http_request: %s", why);
        }
        hdrs = copy;
    }
    int hn = nsv__write_request(NULL, 0, a->method, a->method_len, target, tlen, host, host_len, hdrs, hdrs_len,
                                blen, wf, &why);
    if (hn < 0) {
        if (copy && copy != small)
            nsv__free(&s->alloc, copy);
        return nsv__set_detail(s, hn, "nsv_http_request: %s", why ? why : "invalid request");
    }
    uint32_t slot;
    hreq *r = req_alloc(l, &slot);
    size_t total = (size_t)hn + (streamed ? 0 : a->body_len);
    if (r) {
        r->state = RS_WAIT;
        r->wire = nsv__malloc(&s->alloc, total ? total : 1);
    }
    if (r && r->wire) {
        r->wire_cap = total ? total : 1;
        nsv__write_request(r->wire, (size_t)hn, a->method, a->method_len, target, tlen, host, host_len, hdrs,
                           hdrs_len, blen, wf, &why);
    }
    if (copy && copy != small)
        nsv__free(&s->alloc, copy);
    if (!r)
        return nsv__set_detail(s, NSV_ENOMEM, "nsv_http_request: no memory for a request record");
    if (!r->wire) {
        req_free(l, r);
        return nsv__set_detail(s, NSV_ENOMEM, "nsv_http_request: no memory for %zu request bytes", total);
    }
    if (a->body_len)
        memcpy(r->wire + hn, a->body, a->body_len);
    r->wire_len = total;
    memcpy(r->method, a->method, a->method_len);
    r->method_len = (uint8_t)a->method_len;
    r->origin = oi;
    r->streamed = (uint8_t)streamed;
    r->declared = streamed ? a->content_length : (int64_t)a->body_len;
    r->retry_ok = (uint8_t)(!streamed && idempotent(a->method, a->method_len));
    uint64_t rid = rid_of(l, l->httpc, r, slot);
    fifo_push(l->httpc, o, slot, 0);
    dispatch(l, oi);
    return (int64_t)rid;
}

int64_t nsv_http_request(nsv_server *s, const char *method, size_t method_len, const char *url, size_t url_len,
                         const char *headers, size_t headers_len, const char *body, size_t body_len,
                         int64_t content_length, uint32_t flags)
{
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_http_request: srv is NULL");
    if (!method || !url)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_http_request: %s is NULL", !method ? "method" : "url");
    if ((!headers && headers_len) || (!body && body_len))
        return nsv__set_detail(s, NSV_EINVAL, "nsv_http_request: %s is NULL with a length of %zu",
                               !headers && headers_len ? "headers" : "body",
                               !headers && headers_len ? headers_len : body_len);
    struct req_args a = {.method = method, .method_len = method_len, .url = url, .url_len = url_len,
                         .headers = headers ? headers : "", .headers_len = headers_len, .body = body,
                         .body_len = body_len, .content_length = content_length, .flags = flags};
    return nsv__on_some_loop(s, "nsv_http_request", request_here, &a);
}

enum { OP_BODY = 1, OP_END, OP_PAUSE, OP_RESUME, OP_CANCEL };
static const char *const op_names[] = {"", "nsv_http_request_body", "nsv_http_request_end", "nsv_http_pause",
                                       "nsv_http_pause", "nsv_http_cancel"};

static nsv__conn *conn_of(nsv__loop *l, hreq *r, uint64_t rid)
{
    if (r->state != RS_SENT && r->state != RS_BODY)
        return NULL;
    nsv__conn *c = nsv__conn_get(l, r->conn);
    return c && c->httpc && c->tag == rid ? c : NULL;
}

/* Queue streamed body bytes (framed) behind what r already has. */
static int body_out(nsv__loop *l, hreq *r, nsv__conn *c, const char *p, size_t n)
{
    int e = wire_add(l, r, p, n);
    if (!e && c && c->proto == &nsv__proto_httpc)
        nsv__conn_mark_dirty(l, c);
    return e;
}

static int op_here(nsv__loop *l, uint64_t rid, int op, const char *data, size_t len)
{
    nsv_server *s = l->srv;
    const char *fn = op_names[op];
    uint32_t slot;
    hreq *r = req_get(l, rid, &slot);
    if (!r)
        return nsv__set_detail(s, NSV_ESTALE, "%s: request 0x%llx is not in flight (ended, cancelled or never "
                               "started)", fn, (unsigned long long)rid);
    nsv__conn *c = conn_of(l, r, rid);
    switch (op) {
    case OP_CANCEL:
        if (r->state == RS_WAIT)
            fifo_remove(l->httpc, l->httpc->origins[r->origin], slot);
        req_free(l, r);
        if (c) {
            c->tag = 0;
            if (l->httpc->busy) { /* its bytes are being read: closed on return */
                c->closing = 1;
                nsv__conn_mark_dirty(l, c);
            } else {
                nsv__conn_close(l, c);
            }
        }
        return NSV_OK;
    case OP_PAUSE:
    case OP_RESUME:
        r->paused = op == OP_PAUSE;
        if (c) {
            c->paused = r->paused;
            if (r->paused) {
                nsv__conn_set_events(l, c, 0, c->writing);
                c->deadline = r->deadline_all ? r->deadline_all : 0;
            } else if (c->proto == &nsv__proto_httpc) {
                arm(l, c, r, r->state == RS_SENT ? s->http_head_timeout_ms : s->http_read_timeout_ms);
                if (!c->peer_closed)
                    nsv__conn_set_events(l, c, 1, c->writing);
                if ((c->in.len > c->in.off || c->peer_closed) && !l->httpc->busy)
                    process(l, c, c->peer_closed); /* an EOF taken while paused ends it now */
            }
        }
        return NSV_OK;
    default:
        break;
    }
    if (!r->streamed)
        return nsv__set_detail(s, NSV_ESTATE, "%s: request 0x%llx was not started with NSV_HTTP_STREAM_BODY",
                               fn, (unsigned long long)rid);
    if (r->ended)
        return nsv__set_detail(s, NSV_ESTATE, "%s: request 0x%llx: its body was ended already", fn,
                               (unsigned long long)rid);
    if (op == OP_END) {
        if (r->declared >= 0 && r->sent_body != (uint64_t)r->declared)
            return nsv__set_detail(s, NSV_ESTATE, "nsv_http_request_end: request 0x%llx declared "
                                   "content_length %lld and %llu bytes were sent; send the rest or cancel",
                                   (unsigned long long)rid, (long long)r->declared,
                                   (unsigned long long)r->sent_body);
        int e = r->declared < 0 && !r->body_stopped ? body_out(l, r, c, "0\r\n\r\n", 5) : 0;
        if (e)
            return nsv__set_detail(s, e, "nsv_http_request_end: no memory");
        r->ended = 1;
        return NSV_OK;
    }
    if (r->declared >= 0 && len > (uint64_t)r->declared - r->sent_body)
        return nsv__set_detail(s, NSV_ERANGE, "nsv_http_request_body: request 0x%llx: %zu more bytes would pass "
                               "the declared content_length %lld (%llu sent)", (unsigned long long)rid, len,
                               (long long)r->declared, (unsigned long long)r->sent_body);
    if (len == 0)
        return NSV_OK;
    if (r->body_stopped) { /* the server answered and wants no more: dropped */
        r->sent_body += len;
        return NSV_OK;
    }
    size_t queued = r->wire_len - r->wire_off;
    if (queued && queued + len > nsv__out_limit(l)) {
        r->want_writable = 1;
        return nsv__set_detail(s, NSV_EAGAIN, "nsv_http_request_body: request 0x%llx has %zu bytes waiting; "
                               "%zu more would pass max_output (%lld); wait for its TCP_WRITABLE event",
                               (unsigned long long)rid, queued, len, (long long)s->max_output);
    }
    int e = 0;
    if (r->declared < 0) {
        char sz[NSV__CHUNK_SIZE_MAX];
        size_t k = nsv__write_chunk_size(sz, len);
        e = body_out(l, r, c, sz, k);
        if (!e)
            e = body_out(l, r, c, data, len);
        if (!e)
            e = body_out(l, r, c, "\r\n", 2);
    } else {
        e = body_out(l, r, c, data, len);
    }
    if (e)
        return nsv__set_detail(s, e, "nsv_http_request_body: no memory for %zu bytes", len);
    r->sent_body += len;
    return NSV_OK;
}

static void op_cmd(nsv__loop *l, const nsv__cmd *k)
{
    l->forwarded = 1; /* accepted before this worker saw it: four times max_output (nsv__out_limit) */
    int r = op_here(l, k->id, (int)k->op, k->b, k->blen);
    l->forwarded = 0;
    uint32_t slot;
    hreq *q;
    if (r && r != NSV_ESTALE && (q = req_get(l, k->id, &slot)) != NULL) {
        /* the caller heard NSV_OK: the failure ends the request */
        char msg[400];
        snprintf(msg, sizeof msg, "%s", nsv_last_error_detail(l->srv));
        op_here(l, k->id, OP_CANCEL, NULL, 0);
        emit(l, k->id, NSV_EV_ERROR, r, 0, msg, strlen(msg));
    }
}

static int call_op(nsv_server *s, uint64_t rid, int op, const char *data, size_t len)
{
    const char *fn = op_names[op];
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "%s: srv is NULL", fn);
    if (!data && len)
        return nsv__set_detail(s, NSV_EINVAL, "%s: data is NULL with a length of %zu", fn, len);
    uint32_t li = NSV__ID_LOOP(rid);
    if (!(rid & REQ_BIT) || li >= (uint32_t)s->nloops)
        return nsv__set_detail(s, NSV_ESTALE, "%s: 0x%llx is not a request id of this server", fn,
                               (unsigned long long)rid);
    nsv__loop *l = s->loops[li];
    if (!s->sharded || nsv__shard_current(s) == l)
        return op_here(l, rid, op, data, len);
    if (len > UINT32_MAX)
        return nsv__set_detail(s, NSV_ETOOBIG, "%s: %zu bytes; at most 4294967295 from another thread", fn, len);
    nsv__cmd k = {.fn = op_cmd, .op = (uint32_t)op, .id = rid, .blen = len};
    return nsv__cmd_push(l, &k, NULL, data);
}

int nsv_http_request_body(nsv_server *s, uint64_t req, const char *data, size_t len)
{
    return call_op(s, req, OP_BODY, data, len);
}

int nsv_http_request_end(nsv_server *s, uint64_t req) { return call_op(s, req, OP_END, NULL, 0); }

int nsv_http_pause(nsv_server *s, uint64_t req, int paused)
{
    return call_op(s, req, paused ? OP_PAUSE : OP_RESUME, NULL, 0);
}

int nsv_http_cancel(nsv_server *s, uint64_t req) { return call_op(s, req, OP_CANCEL, NULL, 0); }

/* What the loop, the connect path and TLS tell the client of its
 * connections (loop/loop.h nsv__conn_hooks): they sit below this layer. */
const nsv__conn_hooks nsv__httpc_hooks = {
    .connected = nsv__httpc_connected,
    .conn_error = nsv__httpc_conn_error,
    .closed = nsv__httpc_closed,
    .after_close = nsv__httpc_after_close,
    .stop = nsv__httpc_stop,
    .loop_free = nsv__httpc_loop_free,
};
