/* ws_client.c - outbound WebSocket connections (nsv_ws_connect): the
 * upgrade request, the check of the server's answer, then the connection is
 * a client-mode WebSocket of ws/ws_conn.c. The connection comes from the
 * outbound connect path (net/tcp.c) with the handshake protocol below as its
 * `then`; wss:// starts TLS here once TCP is up, so the request is queued
 * only on a finished handshake. */
#include "server.h"
#include "../http/req_write.h"
#include "../http/resp_parse.h"
#include "../loop/io.h"
#include "../tls/tls.h"
#include "../ws/handshake.h"
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MAX_PROTOCOLS 32

/* The handshake in progress (nsv__conn.hs). data: the request, then the
 * path, "?" and the query (query_len counts the "?"), and the offered
 * subprotocols ("a,b", no spaces). */
typedef struct wsc_hs {
    char key[24];
    uint8_t told;           /* an ERROR went to the host: the close adds none */
    size_t req_len;
    uint32_t path_len, query_len, protos_len;
    char data[];
} wsc_hs;

static const nsv__proto proto_wsc;

static void hs_fail(nsv__loop *l, nsv__conn *c, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void hs_fail(nsv__loop *l, nsv__conn *c, int code, const char *fmt, ...)
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
    wsc_hs *h = c->hs;
    if (h)
        h->told = 1;
    nsv__evq_emit(l, c, NSV_EV_ERROR, code, 0, msg, (size_t)n);
    nsv__conn_close(l, c);
}

/* TCP (and TLS) is up: the request goes out and the answer's clock starts. */
static void send_request(nsv__loop *l, nsv__conn *c)
{
    wsc_hs *h = c->hs;
    c->await_tls = 0;
    if (nsv__buf_append(l, &c->out, h->data, h->req_len) != 0)
        return hs_fail(l, c, NSV_ENOMEM, "no memory for the upgrade request");
    c->deadline = l->now + l->srv->http_head_timeout_ms;
    nsv__conn_set_events(l, c, 1, c->writing);
    nsv__conn_mark_dirty(l, c);
}

static void on_open(nsv__loop *l, nsv__conn *c)
{
    nsv__conn_set_events(l, c, 1, 0);
    if (!c->tls_host)
        return send_request(l, c);
    if (nsv__tls_client_start(l, c, c->tls_host, c->tls_host_len, -1) != 0)
        return hs_fail(l, c, NSV_ETLS, "TLS: %s", nsv_last_error_detail(l->srv));
    c->await_tls = 1; /* a failed handshake is reported by tls/ (ETLS) */
    c->deadline = l->now + l->srv->connect_timeout_ms;
    if (nsv__tls_handshake(l, c) == 2)
        send_request(l, c);
}

static void on_tls_ready(nsv__loop *l, nsv__conn *c)
{
    if (c->await_tls)
        send_request(l, c);
}

static void on_timer(nsv__loop *l, nsv__conn *c)
{
    nsv_server *s = l->srv;
    if (c->await_tls)
        hs_fail(l, c, NSV_ETIMEDOUT, "TLS: the handshake did not finish within connect_timeout_ms (%lld)",
                (long long)s->connect_timeout_ms);
    else
        hs_fail(l, c, NSV_ETIMEDOUT, "no answer head within http_head_timeout_ms (%lld)",
                (long long)s->http_head_timeout_ms);
}

static const nsv__hdr *find(const nsv__response *r, const char *name, size_t n, int *count)
{
    const nsv__hdr *first = NULL;
    *count = 0;
    for (size_t i = 0; i < r->num_headers; i++)
        if (r->headers[i].name_len == n && nsv__strncaseeq(r->headers[i].name, name, n)) {
            if (!first)
                first = &r->headers[i];
            ++*count;
        }
    return first;
}

/* Whether v is one of the offered subprotocols (exact, as tokens compare). */
static int offered(const wsc_hs *h, const char *v, size_t n)
{
    const char *p = h->data + h->req_len + h->path_len + h->query_len, *end = p + h->protos_len;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t k = comma ? (size_t)(comma - p) : (size_t)(end - p);
        if (k == n && memcmp(p, v, n) == 0)
            return 1;
        p += k + 1;
    }
    return 0;
}

/* RFC 6455 4.1: what makes the answer a valid 101 for our request. Writes
 * the rule that failed into why and returns 0 if one did. */
static int answer_ok(const wsc_hs *h, const nsv__response *r, char *why, size_t cap)
{
    if (r->status != 101) {
        snprintf(why, cap, "status line \"HTTP/1.%d %d %.*s\": a WebSocket needs 101 Switching Protocols",
                 r->minor_version, r->status, (int)(r->reason_len > 200 ? 200 : r->reason_len), r->reason);
        return 0;
    }
    if (r->minor_version < 1) {
        snprintf(why, cap, "a 101 in HTTP/1.0: a WebSocket needs HTTP/1.1");
        return 0;
    }
    if (!(r->flags & NSV__RESP_UPGRADE_WS)) {
        snprintf(why, cap, "the 101 has no \"Upgrade: websocket\" header");
        return 0;
    }
    if (!(r->flags & NSV__RESP_CONN_UPGRADE)) {
        snprintf(why, cap, "the 101 has no Connection header with \"upgrade\"");
        return 0;
    }
    char want[NSV__WS_ACCEPT_LEN];
    if (nsv__ws_accept_key(h->key, sizeof h->key, want) != 0) {
        snprintf(why, cap, "internal: the request's key is invalid");
        return 0;
    }
    if (!r->ws_accept) {
        snprintf(why, cap, "the 101 has no Sec-WebSocket-Accept header");
        return 0;
    }
    if (r->ws_accept_len != NSV__WS_ACCEPT_LEN || memcmp(r->ws_accept, want, NSV__WS_ACCEPT_LEN) != 0) {
        snprintf(why, cap, "Sec-WebSocket-Accept \"%.*s\" does not match the key (expected \"%.*s\")",
                 (int)(r->ws_accept_len > 64 ? 64 : r->ws_accept_len), r->ws_accept, NSV__WS_ACCEPT_LEN, want);
        return 0;
    }
    int n;
    const nsv__hdr *x = find(r, "sec-websocket-extensions", 24, &n);
    if (x) {
        snprintf(why, cap, "the server chose extension \"%.*s\"; none was offered",
                 (int)(x->value_len > 100 ? 100 : x->value_len), x->value);
        return 0;
    }
    x = find(r, "sec-websocket-protocol", 22, &n);
    if (n > 1) {
        snprintf(why, cap, "the 101 has %d Sec-WebSocket-Protocol headers; at most one may choose", n);
        return 0;
    }
    if (x && !offered(h, x->value, x->value_len)) {
        snprintf(why, cap, "the server chose subprotocol \"%.*s\", which was not offered%s",
                 (int)(x->value_len > 100 ? 100 : x->value_len), x->value, h->protos_len ? "" : " (none was)");
        return 0;
    }
    return 1;
}

static uint32_t put(char *d, uint32_t *off, const void *p, size_t n)
{
    uint32_t at = *off;
    if (n)
        memcpy(d + at, p, n);
    *off += (uint32_t)n;
    return at;
}

/* The answer is valid: the connection becomes a WebSocket, then WS_OPEN
 * (the state is switched first: a callback may send at once). */
static void open_ws(nsv__loop *l, nsv__conn *c, const nsv__response *r, size_t head)
{
    wsc_hs *h = c->hs;
    size_t hl = 0;
    for (size_t i = 0; i < r->num_headers; i++)
        hl += r->headers[i].name_len + 2 + r->headers[i].value_len + 2;
    uint32_t tlen = nsv__tls_info_len(c);
    size_t total = h->path_len + h->query_len + hl + c->peer_len + tlen;
    /* From here the connection is ws/'s: the handshake state goes before
     * the event, whose callback may close the connection. */
    if (nsv__ws_client_open(l, c) != 0)
        return hs_fail(l, c, NSV_ENOMEM, "no memory for the WebSocket");
    nsv_event *ev;
    char *d = nsv__evq_push(l, &ev, total);
    if (!d) {
        c->hs = NULL;
        nsv__free(&l->srv->alloc, h);
        nsv__conn_close(l, c); /* the host hears WS_CLOSE 1006, then CLOSE */
        return;
    }
    uint32_t off = 0;
    ev->type = NSV_EV_WS_OPEN;
    ev->code = 101;
    ev->conn = nsv__conn_id(l, c);
    ev->tag = c->tag;
    ev->route = -1;
    ev->listener = c->listener;
    ev->peer_port = c->peer_port;
    const char *path = h->data + h->req_len;
    ev->path_len = h->path_len;
    ev->path_off = put(d, &off, path, h->path_len);
    ev->query_len = h->query_len ? h->query_len - 1 : 0;
    ev->query_off = put(d, &off, path + h->path_len + (h->query_len ? 1 : 0), ev->query_len);
    ev->headers_off = off;
    for (size_t i = 0; i < r->num_headers; i++) {
        const nsv__hdr *x = &r->headers[i];
        put(d, &off, x->name, x->name_len);
        put(d, &off, ": ", 2);
        put(d, &off, x->value, x->value_len);
        put(d, &off, "\r\n", 2);
    }
    ev->headers_len = off - ev->headers_off;
    ev->nheaders = (uint32_t)r->num_headers;
    ev->params_off = ev->body_off = off;
    ev->peer_len = c->peer_len;
    ev->peer_off = put(d, &off, c->peer, c->peer_len);
    if (tlen) {
        ev->flags |= NSV_EVF_TLS;
        ev->tls_off = off;
        ev->tls_len = nsv__tls_info_put(c, d + off);
        off += ev->tls_len;
    }
    /* The head is consumed; what followed it is frames (ws/ reads them). */
    c->in.off += (uint32_t)head;
    if (c->in.off == c->in.len)
        nsv__buf_release(l, &c->in);
    c->hs = NULL;
    nsv__free(&l->srv->alloc, h);
    nsv__evq_commit(l);
}

static void on_readable(nsv__loop *l, nsv__conn *c)
{
    nsv_server *s = l->srv;
    ssize_t n = nsv__io_recv(l, c, l->scratch, NSV__SCRATCH);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n < 0)
        return hs_fail(l, c, NSV_ECLOSED, "the connection failed before the answer head: %s", strerror(errno));
    if (n == 0) {
        c->peer_closed = 1;
        return hs_fail(l, c, NSV_ECLOSED, "the server closed the connection before the answer head%s",
                       c->in.len > c->in.off ? " was complete" : "");
    }
    if (nsv__buf_append(l, &c->in, l->scratch, (size_t)n) != 0)
        return hs_fail(l, c, NSV_ENOMEM, "no memory for %zd bytes of the answer", n);
    nsv__hdr hdrs[256];
    nsv__response r;
    size_t avail = c->in.len - c->in.off;
    int k = nsv__parse_response(c->in.p + c->in.off, avail, &r, hdrs, (size_t)s->http_max_headers);
    if (k > s->http_max_head || (k == 0 && (int64_t)avail > s->http_max_head))
        return hs_fail(l, c, NSV_ETOOBIG, "the answer head is over http_max_head_bytes (%lld)",
                       (long long)s->http_max_head);
    if (k == 0)
        return;
    if (k == NSV_ETOOBIG)
        return hs_fail(l, c, NSV_ETOOBIG, "the answer head has more than http_max_headers (%lld) lines",
                       (long long)s->http_max_headers);
    if (k < 0)
        return hs_fail(l, c, NSV_EPARSE, "answer head: %s (byte %zu)", r.why ? r.why : "malformed", r.why_at);
    char why[300];
    if (!answer_ok(c->hs, &r, why, sizeof why))
        return hs_fail(l, c, NSV_EPARSE, "%s", why);
    open_ws(l, c, &r, (size_t)k);
}

/* Closed before the open without a word from us (a reset, the drain's
 * deadline, the host's nsv_close): the host learns why, unless it asked
 * (nsv_close) or the server is going away (nsv_server_free: no events). */
static void on_close(nsv__loop *l, nsv__conn *c)
{
    wsc_hs *h = c->hs;
    if (!h)
        return;
    c->hs = NULL;
    nsv_server *s = l->srv;
    if (c->proto == &proto_wsc && !h->told && !c->closing && !c->await_tls && !atomic_load(&s->stop)) {
        static const char stopped[] = "the server stopped before the WebSocket handshake finished";
        static const char closed[] = "the connection closed before the WebSocket handshake finished";
        if (atomic_load(&s->draining))
            nsv__evq_emit(l, c, NSV_EV_ERROR, NSV_ESTOPPED, 0, stopped, sizeof stopped - 1);
        else
            nsv__evq_emit(l, c, NSV_EV_ERROR, NSV_ECLOSED, 0, closed, sizeof closed - 1);
    }
    nsv__free(&l->srv->alloc, h);
}

static void on_blocked(nsv__loop *l, nsv__conn *c) { (void)l, (void)c; } /* the head timeout runs */

static const nsv__proto proto_wsc = {
    .name = "a WebSocket client connection (opening handshake)",
    .on_open = on_open,
    .on_readable = on_readable,
    .on_blocked = on_blocked,
    .on_timer = on_timer,
    .on_tls_ready = on_tls_ready,
    .on_close = on_close,
};

/* ---- the call ---- */

struct wsc_args {
    const char *url, *headers, *protocols;
    size_t url_len, headers_len, protocols_len;
    uint32_t flags;
};

static int is_ows(char ch) { return ch == ' ' || ch == '\t'; }

/* The header names the library writes itself. */
static int reserved_name(const char *n, size_t k)
{
    static const char *const names[] = {"host", "upgrade", "connection", "content-length", "transfer-encoding"};
    for (size_t i = 0; i < NSV__ARRAY_LEN(names); i++)
        if (strlen(names[i]) == k && nsv__strncaseeq(n, names[i], k))
            return 1;
    return k >= 14 && nsv__strncaseeq(n, "sec-websocket-", 14);
}

/* Check the caller's header names (nsv__write_request checks the syntax). */
static int check_headers(nsv_server *s, const char *hd, size_t n)
{
    size_t i = 0;
    while (i < n) {
        const char *line = hd + i;
        const char *eol = memchr(line, '\n', n - i);
        size_t ll = eol ? (size_t)(eol - line) + 1 : n - i;
        const char *colon = memchr(line, ':', ll);
        if (colon && reserved_name(line, (size_t)(colon - line)))
            return nsv__set_detail(s, NSV_EINVAL, "nsv_ws_connect: headers: %.*s is written by the library "
                                   "(Host, Upgrade, Connection, Content-Length, Transfer-Encoding and "
                                   "Sec-WebSocket-* may not be passed)", (int)(colon - line), line);
        i += ll;
    }
    return 0;
}

/* protocols: comma-separated tokens with optional spaces around them;
 * written compact into out ("a,b"). Returns its length or NSV_EINVAL. */
static int64_t check_protocols(nsv_server *s, const char *p, size_t n, char *out)
{
    size_t o = 0, i = 0, count = 0;
    if (n == 0)
        return 0;
    for (;;) {
        const char *comma = memchr(p + i, ',', n - i);
        size_t end = comma ? (size_t)(comma - p) : n, b = i, e = end;
        while (b < e && is_ows(p[b]))
            b++;
        while (e > b && is_ows(p[e - 1]))
            e--;
        if (e == b)
            return nsv__set_detail(s, NSV_EINVAL, "nsv_ws_connect: protocols: an empty element at byte %zu", i);
        for (size_t k = b; k < e; k++)
            if (!nsv__is_tchar((unsigned char)p[k]))
                return nsv__set_detail(s, NSV_EINVAL, "nsv_ws_connect: protocols: byte 0x%02x at offset %zu "
                                       "is not a token character (one token per element, ',' between)",
                                       (unsigned char)p[k], k);
        /* RFC 6455 4.1: the elements are unique */
        for (size_t q = 0; q < o;) {
            const char *c = memchr(out + q, ',', o - q);
            size_t k = c ? (size_t)(c - (out + q)) : o - q;
            if (k == e - b && memcmp(out + q, p + b, k) == 0)
                return nsv__set_detail(s, NSV_EINVAL, "nsv_ws_connect: protocols: \"%.*s\" is offered twice",
                                       (int)k, p + b);
            q += k + 1;
        }
        if (++count > MAX_PROTOCOLS)
            return nsv__set_detail(s, NSV_EINVAL, "nsv_ws_connect: protocols: more than %d offered",
                                   MAX_PROTOCOLS);
        if (o)
            out[o++] = ',';
        memcpy(out + o, p + b, e - b);
        o += e - b;
        if (!comma)
            return (int64_t)o;
        i = end + 1;
    }
}

static int64_t connect_here(nsv__loop *l, const void *args)
{
    const struct wsc_args *a = args;
    nsv_server *s = l->srv;
    if (atomic_load(&s->stop) || atomic_load(&s->draining))
        return nsv__set_detail(s, NSV_ESTOPPED, "nsv_ws_connect: the server is %s; no new connections",
                               atomic_load(&s->draining) ? "draining" : "stopped");
    if (a->flags)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_ws_connect: flags 0x%x: none are defined; pass 0",
                               (unsigned)a->flags);
    nsv_url u;
    int tls;
    const char *path;
    size_t target_len;
    int e = nsv__client_url(s, "nsv_ws_connect", a->url, a->url_len, "ws", &u, &tls, &path, &target_len);
    if (e)
        return e;
    size_t path_len = u.path_len ? u.path_len : 1;
    size_t query_len = target_len - path_len; /* with its "?" */
    const char *host = a->url + u.host_off;
    if (a->headers_len && (a->headers_len < 2 || memcmp(a->headers + a->headers_len - 2, "\r\n", 2) != 0))
        return nsv__set_detail(s, NSV_EINVAL, "nsv_ws_connect: headers: the block must end with \"\\r\\n\" "
                               "(each line is \"Name: value\\r\\n\")");
    if (check_headers(s, a->headers, a->headers_len) != 0)
        return NSV_EINVAL;
    char protos[1024];
    if (a->protocols_len > sizeof protos)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_ws_connect: protocols: %zu bytes; at most %zu",
                               a->protocols_len, sizeof protos);
    int64_t plen = check_protocols(s, a->protocols, a->protocols_len, protos);
    if (plen < 0)
        return plen;
    char key[24];
    if (nsv__ws_client_key(key) != 0)
        return nsv__set_detail(s, NSV_ESYS, "nsv_ws_connect: no random bytes for Sec-WebSocket-Key");
    /* Upgrade first, the caller's lines, then the Sec-WebSocket-* lines. */
    size_t bcap = 21 + a->headers_len + 64 + 30 + (plen ? 26 + (size_t)plen : 0);
    char authority[270];
    int v6 = memchr(host, ':', u.host_len) != NULL;
    int alen = snprintf(authority, sizeof authority, v6 ? "[%.*s]" : "%.*s", (int)u.host_len, host);
    if (u.port != (tls ? 443 : 80))
        alen += snprintf(authority + alen, sizeof authority - (size_t)alen, ":%d", (int)u.port);
    char *block = nsv__malloc(&s->alloc, bcap);
    if (!block)
        return nsv__set_detail(s, NSV_ENOMEM, "nsv_ws_connect: no memory for the request");
    size_t bl = 0;
    memcpy(block, "Upgrade: websocket\r\n", 20);
    bl = 20;
    memcpy(block + bl, a->headers, a->headers_len);
    bl += a->headers_len;
    bl += (size_t)snprintf(block + bl, bcap - bl, "Sec-WebSocket-Key: %.24s\r\nSec-WebSocket-Version: 13\r\n", key);
    if (plen)
        bl += (size_t)snprintf(block + bl, bcap - bl, "Sec-WebSocket-Protocol: %.*s\r\n", (int)plen, protos);
    const char *why = NULL;
    int hn = nsv__write_request(NULL, 0, "GET", 3, path, path_len + query_len, authority, (size_t)alen, block, bl,
                                0, NSV__WR_UPGRADE, &why);
    if (hn < 0) {
        nsv__free(&s->alloc, block);
        return nsv__set_detail(s, hn, "nsv_ws_connect: %s", why ? why : "invalid request");
    }
    size_t extra = (size_t)hn + path_len + query_len + (size_t)plen;
    wsc_hs *h = nsv__calloc(&s->alloc, sizeof *h + extra);
    if (!h) {
        nsv__free(&s->alloc, block);
        return nsv__set_detail(s, NSV_ENOMEM, "nsv_ws_connect: no memory for the request");
    }
    nsv__write_request(h->data, (size_t)hn, "GET", 3, path, path_len + query_len, authority, (size_t)alen, block,
                       bl, 0, NSV__WR_UPGRADE, &why);
    nsv__free(&s->alloc, block);
    memcpy(h->key, key, sizeof key);
    h->req_len = (size_t)hn;
    memcpy(h->data + hn, path, path_len + query_len);
    h->path_len = (uint32_t)path_len;
    h->query_len = (uint32_t)query_len;
    memcpy(h->data + hn + path_len + query_len, protos, (size_t)plen);
    h->protos_len = (uint32_t)plen;
    char curl[300];
    int cn = snprintf(curl, sizeof curl, v6 ? "%s://[%.*s]:%d" : "%s://%.*s:%d", tls ? "tls" : "tcp",
                      (int)u.host_len, host, (int)u.port);
    int64_t id = nsv__tcp_connect_then(l, curl, (size_t)cn, &proto_wsc, h);
    if (id < 0) {
        nsv__free(&s->alloc, h);
        char d[300];
        snprintf(d, sizeof d, "%s", nsv_last_error_detail(s));
        const char *t = strncmp(d, "nsv_connect: ", 13) == 0 ? d + 13 : d;
        return nsv__set_detail(s, (int)id, "nsv_ws_connect: %s", t);
    }
    return id;
}

NSV_API int64_t nsv_ws_connect(nsv_server *srv, const char *url, size_t url_len, const char *headers,
                               size_t headers_len, const char *protocols, size_t protocols_len, uint32_t flags)
{
    nsv_server *s = srv;
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_ws_connect: srv is NULL");
    if (!url)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_ws_connect: url is NULL");
    if (!headers && headers_len)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_ws_connect: headers is NULL with a length of %zu", headers_len);
    if (!protocols && protocols_len)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_ws_connect: protocols is NULL with a length of %zu",
                               protocols_len);
    struct wsc_args a = {.url = url, .url_len = url_len, .headers = headers ? headers : "",
                         .headers_len = headers_len, .protocols = protocols ? protocols : "",
                         .protocols_len = protocols_len, .flags = flags};
    return nsv__on_some_loop(s, "nsv_ws_connect", connect_here, &a);
}
