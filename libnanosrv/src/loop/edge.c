/* edge.c - a connection's edge: the listener's address lists at accept and
 * the PROXY protocol header before anything else is read (the header comes
 * from the load balancer in front, ahead of TLS and the protocol). */
#include "edge.h"
#include "metrics.h"
#include "../tls/tls.h"
#include "../util/proxy_proto.h"
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

/* Longest TLV values copied into the event block: a host name, an ALPN
 * protocol id (both at most 255 by their own rules), a TLS version name. */
#define AUTHORITY_MAX 255
#define ALPN_MAX 255
#define SSL_VERSION_MAX 64

static int listed(const struct nsv__edge *e, int which, const struct sockaddr *sa)
{
    return nsv__cidr_match(e->list[which], e->nlist[which], sa);
}

/* DENY first, then ALLOW (an empty ALLOW lets everyone in). */
static int acl_refuses(const struct nsv__edge *e, const struct sockaddr *sa)
{
    if (e->nlist[NSV__EL_DENY] && listed(e, NSV__EL_DENY, sa))
        return 1;
    return e->nlist[NSV__EL_ALLOW] && !listed(e, NSV__EL_ALLOW, sa);
}

int nsv__edge_admit(nsv__loop *l, int lidx, const struct sockaddr_storage *ss)
{
    const struct nsv__edge *e = l->srv->listeners[lidx].edge;
    const struct sockaddr *sa = (const struct sockaddr *)ss;
    int refused = e->proxy ? e->nlist[NSV__EL_FROM] && !listed(e, NSV__EL_FROM, sa) : acl_refuses(e, sa);
    if (refused)
        nsv__log(NSV_LOG_DEBUG, "listener %d: connection refused at accept (%s)", lidx,
                 e->proxy ? "not in NSV_LOPT_PROXY_FROM" : "NSV_LOPT_ALLOW / NSV_LOPT_DENY");
    return refused ? -1 : 0;
}

static void unlink_conn(struct nsv__edge_conn *ec)
{
    if (ec->prev)
        ec->prev->next = ec->next;
    else
        ec->owner->live[ec->loop] = ec->next;
    if (ec->next)
        ec->next->prev = ec->prev;
}

static void conn_state_free(const nsv__alloc *a, struct nsv__edge_conn *ec)
{
    nsv__free(a, ec->acc);
    nsv__free(a, ec->info);
    nsv__free(a, ec);
}

void nsv__edge_conn_free(nsv__loop *l, nsv__conn *c)
{
    struct nsv__edge_conn *ec = c->edge;
    c->edge = NULL;
    if (!ec)
        return;
    unlink_conn(ec);
    conn_state_free(&l->srv->alloc, ec);
}

void nsv__edge_free(nsv_server *s, struct nsv__edge *e)
{
    if (!e)
        return;
    for (int i = 0; i < NSV__MAX_LOOPS; i++) {
        struct nsv__edge_conn *ec = e->live[i];
        while (ec) {
            struct nsv__edge_conn *next = ec->next;
            conn_state_free(&s->alloc, ec);
            ec = next;
        }
    }
    for (int i = 0; i < NSV__EL_LISTS; i++)
        nsv__free(&s->alloc, e->list[i]);
    nsv__free(&s->alloc, e);
}

/* ---- waiting for the header ---- */

static void refuse(nsv__loop *l, nsv__conn *c, int metric, const char *why)
{
    nsv__log(NSV_LOG_DEBUG, "listener %d: PROXY header from %.*s port %u: %s; closing", c->listener,
             (int)c->peer_len, c->peer, (unsigned)c->peer_port, why);
    NSV__COUNT(l, metric);
    nsv__conn_close(l, c);
}

/* (The sweep counts the timeout itself, NSV_M_TIMEOUT_OTHER for a
 * connection still before its protocol.) */
static void on_timer(nsv__loop *l, nsv__conn *c)
{
    refuse(l, c, NSV_M_PROXY_ERRORS, "no complete header before NSV_LOPT_PROXY_TIMEOUT_MS");
}

/* A drain closes connections that never got as far as a request. */
static void on_drain(nsv__loop *l, nsv__conn *c) { nsv__conn_close(l, c); }

static int has_nul(nsv__pp_str v) { return v.p && memchr(v.p, 0, v.len) != NULL; }

static size_t put_field(char *d, const void *p, size_t n)
{
    if (n)
        memcpy(d, p, n);
    d[n] = 0;
    return n + 1;
}

/* As nsv__addr_format, and an AF_UNIX address as its path (a v2 header's dst). */
static void addr_text(const struct sockaddr_storage *ss, char *out, size_t cap, unsigned *port)
{
    nsv__addr_format(ss, out, cap, port);
    if (ss->ss_family == AF_UNIX) {
        const struct sockaddr_un *a = (const void *)ss;
        snprintf(out, cap, "%s", a->sun_path);
    }
}

/* The front's fields of the event block (edge.h), from the header r and
 * the socket's own peer (the front). 0, or -1 out of memory. */
static int build_info(nsv__loop *l, nsv__conn *c, struct nsv__edge_conn *ec, const nsv__pp_result *r)
{
    char dst[112], fport[8], dport[8];
    unsigned dp;
    addr_text(&r->dst, dst, sizeof dst, &dp);
    int fl = snprintf(fport, sizeof fport, "%u", (unsigned)c->peer_port);
    int dl = snprintf(dport, sizeof dport, "%u", dp);
    size_t dlen = strlen(dst);
    size_t n = c->peer_len + (size_t)fl + dlen + (size_t)dl + r->ssl_version.len + r->authority.len +
               r->alpn.len + 7;
    char *d = nsv__malloc(&l->srv->alloc, n);
    if (!d)
        return -1;
    size_t o = 0;
    o += put_field(d + o, c->peer, c->peer_len);
    o += put_field(d + o, fport, (size_t)fl);
    o += put_field(d + o, dst, dlen);
    o += put_field(d + o, dport, (size_t)dl);
    o += put_field(d + o, r->ssl_version.p, r->ssl_version.len);
    o += put_field(d + o, r->authority.p, r->authority.len);
    o += put_field(d + o, r->alpn.p, r->alpn.len);
    ec->info = d;
    ec->info_len = (uint32_t)o;
    return 0;
}

/* The header is read: the client's address replaces the socket's peer,
 * the lists judge it, and the listener's protocol (and TLS) take over. */
static void header_done(nsv__loop *l, nsv__conn *c, const nsv__pp_result *r)
{
    struct nsv__edge_conn *ec = c->edge;
    const nsv__listener *L = &l->srv->listeners[c->listener];
    struct sockaddr_storage client;
    if (r->local) {
        /* The front speaking for itself (a health check): the socket's
         * own peer, no NSV_EVF_PROXY. */
        socklen_t sl = sizeof client;
        if (getpeername(c->fd, (struct sockaddr *)&client, &sl) != 0)
            client.ss_family = AF_UNSPEC;
        nsv__edge_conn_free(l, c);
    } else {
        if (has_nul(r->authority) || has_nul(r->alpn) || has_nul(r->ssl_version)) {
            refuse(l, c, NSV_M_PROXY_ERRORS, "a TLV value holds a NUL byte");
            return;
        }
        if (r->authority.len > AUTHORITY_MAX || r->alpn.len > ALPN_MAX ||
            r->ssl_version.len > SSL_VERSION_MAX) {
            refuse(l, c, NSV_M_PROXY_ERRORS, "a TLV value is too long");
            return;
        }
        if (build_info(l, c, ec, r) != 0) {
            refuse(l, c, NSV_M_PROXY_ERRORS, "out of memory");
            return;
        }
        nsv__free(&l->srv->alloc, ec->acc); /* r points into it until the block is built */
        ec->acc = NULL;
        client = r->src;
        nsv__conn_format_peer(c, &client); /* an AF_UNIX client: empty peer, port 0 */
    }
    const struct nsv__edge *e = L->edge;
    if (acl_refuses(e, (const struct sockaddr *)&client)) {
        refuse(l, c, NSV_M_CONNS_DENIED, "client refused by NSV_LOPT_ALLOW / NSV_LOPT_DENY");
        return;
    }
    c->proto = L->proto;
    c->deadline = l->now + l->srv->request_timeout_ms;
    /* Bytes after the header (a request, a ClientHello) stay in the
     * socket, so the poller reports them to the protocol next. */
    if (L->tls && nsv__tls_accept(l, c, L->tls) != 0) {
        nsv__conn_close(l, c);
        return;
    }
    if (c->proto->on_open)
        c->proto->on_open(l, c);
}

/* Every poller event while the header is awaited. Bytes are peeked, so
 * nothing past the header is taken from the socket; a partial header is
 * consumed into ec->acc (every byte of it is header, the parser says so),
 * which keeps a level-triggered poller from reporting it again. */
static void on_event(nsv__loop *l, nsv__conn *c)
{
    struct nsv__edge_conn *ec = c->edge;
    const struct nsv__edge *e = l->srv->listeners[c->listener].edge;
    uint8_t *buf = ec->acc ? ec->acc : (uint8_t *)l->scratch;
    size_t have = ec->acc_len;
    ssize_t n = recv(c->fd, buf + have, NSV__PP_MAX - have, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return;
        refuse(l, c, NSV_M_PROXY_ERRORS, strerror(errno));
        return;
    }
    if (n == 0) {
        refuse(l, c, NSV_M_PROXY_ERRORS, "the connection ended before the header did");
        return;
    }
    nsv__pp_result r;
    const char *why;
    int h = nsv__pp_parse(buf, have + (size_t)n, e->proxy, &r, &why);
    if (h < 0) {
        refuse(l, c, NSV_M_PROXY_ERRORS, why);
        return;
    }
    size_t take = h == 0 ? (size_t)n : (size_t)h - have;
    if (h == 0 && !ec->acc) {
        ec->acc = nsv__malloc(&l->srv->alloc, NSV__PP_MAX);
        if (!ec->acc) {
            refuse(l, c, NSV_M_PROXY_ERRORS, "out of memory");
            return;
        }
        memcpy(ec->acc, buf, (size_t)n);
        buf = ec->acc;
    }
    /* The same bytes again, now taken: they land where they were peeked. */
    ssize_t got = recv(c->fd, buf + have, take, MSG_DONTWAIT);
    if (got != (ssize_t)take) {
        refuse(l, c, NSV_M_PROXY_ERRORS, "the header could not be read back");
        return;
    }
    nsv__metric_add(l, NSV_M_BYTES_IN, (uint64_t)got);
    if (h == 0) {
        ec->acc_len += (uint32_t)take;
        return;
    }
    header_done(l, c, &r);
}

static void on_readable(nsv__loop *l, nsv__conn *c) { on_event(l, c); }

static const nsv__proto proto_proxy = {
    .name = "a connection awaiting its PROXY header",
    .on_readable = on_readable,
    .on_event = on_event,
    .on_timer = on_timer,
    .on_drain = on_drain,
};

int nsv__edge_adopt(nsv__loop *l, nsv__conn *c, int lidx)
{
    struct nsv__edge *e = l->srv->listeners[lidx].edge;
    if (!e->proxy)
        return 0;
    struct nsv__edge_conn *ec = nsv__calloc(&l->srv->alloc, sizeof *ec);
    if (!ec) {
        nsv__conn_close(l, c);
        return -1;
    }
    ec->owner = e;
    ec->loop = l->idx;
    ec->next = e->live[l->idx];
    if (ec->next)
        ec->next->prev = ec;
    e->live[l->idx] = ec;
    c->edge = ec;
    c->proto = &proto_proxy;
    c->deadline = l->now + e->timeout_ms;
    return 1;
}

/* ---- the block events carry ---- */

static int proxied(const nsv__conn *c) { return c->edge && c->edge->info; }

/* An HTTP/2 stream speaks for its session's connection (TLS, PROXY header). */
#define SESSION_OF(c) ((c)->h2_parent ? (const nsv__conn *)(c)->h2_parent : (c))

uint32_t nsv__conn_info_len(const nsv__conn *c)
{
    c = SESSION_OF(c);
    uint32_t t = nsv__tls_info_len(c);
    if (!proxied(c))
        return t;
    return (t ? t : 2) + c->edge->info_len;
}

uint32_t nsv__conn_info_put(const nsv__conn *c, char *dst)
{
    c = SESSION_OF(c);
    uint32_t t = nsv__tls_info_put(c, dst);
    if (!proxied(c))
        return t;
    if (!t) { /* "sni\0peer_subject\0" of a plain connection: both empty */
        dst[0] = dst[1] = 0;
        t = 2;
    }
    memcpy(dst + t, c->edge->info, c->edge->info_len);
    return t + c->edge->info_len;
}

uint32_t nsv__conn_info_flags(const nsv__conn *c)
{
    c = SESSION_OF(c);
    return (c->tls ? NSV_EVF_TLS : 0) | (proxied(c) ? NSV_EVF_PROXY : 0);
}

/* TCP_OPEN (and any event without a body) as nsv__evq_emit queues it, plus
 * NSV_EVF_PROXY and the block when the connection came through a header. */
int nsv__edge_emit_open(nsv__loop *l, nsv__conn *c, uint32_t type)
{
    uint32_t tlen = proxied(c) ? nsv__conn_info_len(c) : 0;
    nsv_event *ev;
    char *d = nsv__evq_push(l, &ev, (size_t)c->peer_len + tlen);
    if (!d)
        return NSV_ENOMEM;
    ev->type = type;
    ev->conn = nsv__conn_id(l, c);
    ev->tag = c->tag;
    ev->route = c->route;
    ev->listener = c->listener;
    ev->peer_port = c->peer_port;
    memcpy(d, c->peer, c->peer_len);
    ev->peer_len = c->peer_len;
    if (tlen) {
        ev->flags = NSV_EVF_PROXY;
        ev->tls_off = c->peer_len;
        ev->tls_len = nsv__conn_info_put(c, d + c->peer_len);
    }
    nsv__evq_commit(l);
    return 0;
}
