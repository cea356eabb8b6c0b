/* tcp.c - raw TCP streams: accepted (tcp:// listeners) and outbound
 * (nsv_connect), with data/writable events, water marks, pause/resume,
 * half-close and abort. Names resolve on a short-lived thread so the loop
 * never blocks on DNS. */
#include "tcp.h"
#include "../loop/edge.h"
#include "../loop/io.h"
#include "../tls/tls.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void emit(nsv__loop *l, nsv__conn *c, uint32_t type, int32_t code, uint32_t flags,
                 const char *p, size_t n)
{
    nsv__evq_emit(l, c, type, code, flags, p, n);
}

/* An open raw TCP stream, and one whose connect is still under way. */
static int open_tcp(const nsv__conn *c) { return c->proto == &nsv__proto_tcp && !c->closing; }
static int raw(const nsv__conn *c)
{
    return open_tcp(c) || (c->proto == &nsv__proto_connect && !c->closing && !c->then);
}

static void on_readable(nsv__loop *l, nsv__conn *c)
{
    /* (Own output past half the cap stops reading before this: loop.c. Not
     * at the high water mark: a proxy pausing both sides there could deadlock.) */
    if (c->paused || c->peer_closed) {
        nsv__conn_set_events(l, c, 0, c->writing);
        return;
    }
    ssize_t n = nsv__io_recv(l, c, l->scratch, NSV__SCRATCH);
    if (n > 0) {
        c->deadline = l->now + l->srv->idle_timeout_ms;
        emit(l, c, NSV_EV_TCP_DATA, 0, 0, l->scratch, (size_t)n);
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n < 0) {
        nsv__conn_close(l, c);
        return;
    }
    /* EOF: tell the host (empty DATA with NSV_EVF_EOF); it may still send. */
    c->peer_closed = 1;
    nsv__conn_set_events(l, c, 0, c->writing);
    emit(l, c, NSV_EV_TCP_DATA, 0, NSV_EVF_EOF, NULL, 0);
    if (c->shut_wr && c->out.len == c->out.off)
        nsv__conn_close(l, c);
}

/* After output moved (or a shutdown request): a pending half-close. */
static void on_flushed(nsv__loop *l, nsv__conn *c)
{
    if (c->out.len == c->out.off && c->shut_wr && !c->closing) {
        shutdown(c->fd, SHUT_WR);
        if (c->peer_closed)
            nsv__conn_close(l, c);
    }
}

/* A raw TCP call on a connection that is not one. */
static int not_tcp(nsv__loop *l, nsv__conn *c, const char *what)
{
    return nsv__set_detail(l->srv, NSV_ESTATE, "%s: connection 0x%llx is not a raw TCP connection "
                           "(it is %s); raw TCP comes from tcp:// listeners and nsv_connect", what,
                           (unsigned long long)nsv__conn_id(l, c),
                           c->then ? c->then->name : c->proto->name);
}

int nsv__tcp_send(nsv__loop *l, nsv__conn *c, const char *data, size_t len)
{
    if (!raw(c))
        return not_tcp(l, c, "nsv_send");
    if (c->shut_wr)
        return nsv__set_detail(l->srv, NSV_ESTATE, "nsv_send: connection 0x%llx shut its write side "
                               "(nsv_shutdown); nothing more can be sent",
                               (unsigned long long)nsv__conn_id(l, c));
    size_t queued = c->out.len - c->out.off;
    if (queued && queued + len > nsv__out_limit(l))
        return nsv__set_detail(l->srv, NSV_EAGAIN, "nsv_send: connection 0x%llx has %zu bytes queued; "
                               "%zu more would pass the output limit of %llu (max_output); nothing "
                               "was queued", (unsigned long long)nsv__conn_id(l, c), queued, len,
                               (unsigned long long)nsv__out_limit(l));
    if (len == 0)
        return NSV_OK;
    size_t n = open_tcp(c) ? nsv__conn_send_direct(c, NULL, 0, data, len) : 0;
    if (n) { /* large write, idle socket: keep only what the kernel left */
        nsv__metric_add(l, NSV_M_BYTES_OUT, n);
        data += n;
        len -= n;
        c->deadline = l->now + l->srv->idle_timeout_ms;
        if (len == 0)
            return NSV_OK;
    }
    int r = nsv__buf_append(l, &c->out, data, len);
    if (r)
        return r;
    if (open_tcp(c))
        nsv__conn_mark_dirty(l, c);
    nsv__out_queued(l, c);
    return NSV_OK;
}

int nsv__tcp_op(nsv__loop *l, nsv__conn *c, int op, int64_t a, int64_t b)
{
    if (op == NSV__OP_TCP_PAUSE && c->proto == &nsv__proto_ws && !c->closing) {
        /* WebSockets pause too (frames already read wait in `in`). */
        nsv__conn_pause(l, c, a != 0);
        return NSV_OK;
    }
    if (op == NSV__OP_TCP_WATER && c->proto == &nsv__proto_ws && !c->closing) {
        /* A WebSocket whose host sets water marks gets TCP_WRITABLE events
         * (code 0 past high, code 1 back at low), so it can pace its sends
         * instead of retrying NSV_EAGAIN on a timer. Opt-in: hosts that never
         * set marks see no new event type on WebSockets. */
        if (a <= 0 || b < 0 || b > a || a > UINT32_MAX)
            return nsv__set_detail(l->srv, NSV_ERANGE, "nsv_set_water_marks: high %lld, low %lld; need "
                                   "0 <= low <= high and 1 <= high <= 4294967295", (long long)a,
                                   (long long)b);
        c->high_water = (uint32_t)a;
        c->low_water = (uint32_t)b;
        c->water_events = 1;
        nsv__out_queued(l, c);
        return NSV_OK;
    }
    if (!raw(c)) {
        if (op == NSV__OP_TCP_ABORT)
            return nsv__conn_close(l, c), NSV_OK;
        return not_tcp(l, c, op == NSV__OP_TCP_SHUTDOWN ? "nsv_shutdown"
                             : op == NSV__OP_TCP_PAUSE  ? "nsv_pause_read"
                                                        : "nsv_set_water_marks");
    }
    switch (op) {
    case NSV__OP_TCP_SHUTDOWN:
        c->shut_wr = 1;
        if (open_tcp(c))
            on_flushed(l, c);
        return NSV_OK;
    case NSV__OP_TCP_ABORT: {
        struct linger lg = {1, 0}; /* RST: the peer learns at once */
        if (c->fd >= 0)
            setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        nsv__conn_close(l, c);
        return NSV_OK;
    }
    case NSV__OP_TCP_PAUSE:
        if (open_tcp(c))
            nsv__conn_pause(l, c, a != 0);
        else
            c->paused = a != 0; /* connecting: reading starts paused */
        return NSV_OK;
    case NSV__OP_TCP_WATER:
        if (a <= 0 || b < 0 || b > a || a > UINT32_MAX)
            return nsv__set_detail(l->srv, NSV_ERANGE, "nsv_set_water_marks: high %lld, low %lld; need "
                                   "0 <= low <= high and 1 <= high <= 4294967295", (long long)a,
                                   (long long)b);
        c->high_water = (uint32_t)a;
        c->low_water = (uint32_t)b;
        return NSV_OK;
    }
    return NSV_EINVAL;
}

static void connect_failed(nsv__loop *l, nsv__conn *c, int err, const char *what)
{
    char msg[160];
    int n = snprintf(msg, sizeof msg, "connect: %s", what);
    if (c->httpc)
        l->srv->httpc_hooks->conn_error(l, c, err, msg, (size_t)n);
    else
        emit(l, c, NSV_EV_ERROR, err, 0, msg, (size_t)n);
    nsv__conn_close(l, c);
}

static void start_connect(nsv__loop *l, nsv__conn *c, const struct sockaddr_storage *ss)
{
    socklen_t sl = ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return connect_failed(l, c, NSV_ESYS, strerror(errno));
    c->fd = fd;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (const struct sockaddr *)ss, sl) != 0 && errno != EINPROGRESS)
        return connect_failed(l, c, errno == ECONNREFUSED ? NSV_ECONNREFUSED : NSV_ESYS, strerror(errno));
    if (nsv__loop_watch(l, c, 0, 1) != 0)
        return connect_failed(l, c, NSV_ESYS, strerror(errno));
}

static void tls_connected(nsv__loop *l, nsv__conn *c);

/* The connect finished (any poller event while connecting): its outcome. */
static void connect_event(nsv__loop *l, nsv__conn *c)
{
    int err = 0;
    socklen_t el = sizeof err;
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
    if (err)
        return connect_failed(l, c, err == ECONNREFUSED ? NSV_ECONNREFUSED
                                    : err == ETIMEDOUT  ? NSV_ETIMEDOUT
                                                        : NSV_ESYS,
                              strerror(err));
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getpeername(c->fd, (struct sockaddr *)&ss, &sl) == 0)
        nsv__conn_format_peer(c, &ss);
    c->proto = &nsv__proto_tcp;
    c->deadline = l->now + l->srv->idle_timeout_ms;
    if (c->then) { /* made for another protocol: it takes over (and does its own TLS) */
        c->proto = c->then;
        c->then = NULL;
        c->proto->on_open(l, c);
        return;
    }
    if (c->tls_host) { /* tls://: connected means handshake done */
        int r = nsv__tls_client_start(l, c, c->tls_host, c->tls_host_len, -1);
        if (r != 0)
            return connect_failed(l, c, NSV_ETLS, nsv_last_error_detail(l->srv));
        c->await_tls = 1;
        nsv__conn_set_events(l, c, 1, 0);
        int h = nsv__tls_handshake(l, c);
        if (h == 2)
            tls_connected(l, c);
        return;
    }
    if (c->httpc)
        return l->srv->httpc_hooks->connected(l, c);
    nsv__conn_set_events(l, c, !c->paused, 0);
    emit(l, c, NSV_EV_TCP_CONNECTED, 0, 0, NULL, 0);
    if (c->out.len > c->out.off || c->shut_wr)
        nsv__conn_mark_dirty(l, c);
}

/* The outbound TLS handshake completed. */
static void tls_connected(nsv__loop *l, nsv__conn *c)
{
    c->await_tls = 0;
    if (c->httpc)
        return l->srv->httpc_hooks->connected(l, c);
    c->deadline = l->now + l->srv->idle_timeout_ms;
    nsv__conn_set_events(l, c, !c->paused, c->writing);
    emit(l, c, NSV_EV_TCP_CONNECTED, 0, NSV_EVF_TLS, NULL, 0);
    if (c->out.len > c->out.off || c->shut_wr)
        nsv__conn_mark_dirty(l, c);
}

struct resolve_job {
    nsv_server *srv;
    nsv__loop *loop;
    uint64_t id;
    char host[256];
    char port[8];
};

/* A name lookup finished (on its thread); this runs on the loop. */
static void resolved_cmd(nsv__loop *l, const nsv__cmd *cmd)
{
    nsv__conn *c = nsv__conn_get(l, cmd->id);
    if (!c || c->proto != &nsv__proto_connect)
        return; /* aborted or timed out meanwhile */
    if (cmd->status)
        return connect_failed(l, c, cmd->status, "name not resolved");
    struct sockaddr_storage ss; /* the address travels as the command's bytes */
    memcpy(&ss, cmd->h, sizeof ss);
    start_connect(l, c, &ss);
}

static void *resolve_main(void *arg)
{
    struct resolve_job *j = arg;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int gr = getaddrinfo(j->host, j->port, &hints, &res);
    struct sockaddr_storage ss = {0};
    if (gr == 0 && res)
        memcpy(&ss, res->ai_addr, res->ai_addrlen);
    nsv__cmd c = {.fn = resolved_cmd, .id = j->id, .status = gr == 0 && res ? 0 : NSV_ENOTFOUND,
                  .hlen = sizeof ss};
    nsv__cmd_push(j->loop, &c, (const char *)&ss, NULL);
    if (res)
        freeaddrinfo(res);
    nsv_server *s = j->srv;
    nsv__free(&s->alloc, j);
    atomic_fetch_sub(&s->resolvers, 1);
    return NULL;
}


static int64_t connect_start(nsv__loop *l, const char *url, size_t len, int32_t origin, uint64_t tag,
                             const nsv__proto *then, void *hs);

/* Create the connection on this loop. Returns its id or an error. */
int64_t nsv__tcp_connect_here(nsv__loop *l, const char *url, size_t len)
{
    return connect_start(l, url, len, -1, 0, NULL, NULL);
}

/* origin >= 0: a connection of the HTTP client (core/http_client.c) for that
 * origin, carrying request tag: marked before the connect starts, since a
 * refusal can close it before this returns. */
int64_t nsv__tcp_connect_as(nsv__loop *l, const char *url, size_t len, int32_t origin, uint64_t tag)
{
    return connect_start(l, url, len, origin, tag, NULL, NULL);
}

int64_t nsv__tcp_connect_then(nsv__loop *l, const char *url, size_t len, const nsv__proto *then, void *hs)
{
    return connect_start(l, url, len, -1, 0, then, hs);
}

static int64_t connect_start(nsv__loop *l, const char *url, size_t len, int32_t origin, uint64_t tag,
                             const nsv__proto *then, void *hs)
{
    nsv_server *s = l->srv;
    nsv_url u;
    if (nsv_url_parse(url, len, &u) != 0)
        return nsv__set_detail(s, NSV_EURL, "nsv_connect: %s", nsv_last_error_detail(NULL));
    const char *sc = url + u.scheme_off;
    int tls = u.scheme_len == 3 && nsv__strncaseeq(sc, "tls", 3);
    if (tls && !nsv_tls_available())
        return nsv__set_detail(s, NSV_ENOTSUP, "nsv_connect: tls:// needs TLS, which this build lacks "
                               "(nsv_tls_available() is 0)");
    if (!tls && !(u.scheme_len == 3 && nsv__strncaseeq(sc, "tcp", 3)))
        return nsv__set_detail(s, NSV_EURL, "nsv_connect: scheme '%.*s' is not tcp:// or tls://",
                               (int)u.scheme_len, sc);
    if (u.port <= 0 || u.port > 65535)
        return nsv__set_detail(s, NSV_EURL, "nsv_connect: port %d is not 1-65535", (int)u.port);
    if (u.host_len == 0 || u.host_len >= 256)
        return nsv__set_detail(s, NSV_EURL, "nsv_connect: the host is %u bytes; 1-255 allowed",
                               (unsigned)u.host_len);
    if (atomic_fetch_add(&s->nconns, 1) >= s->max_conns) {
        atomic_fetch_sub(&s->nconns, 1);
        return nsv__set_detail(s, NSV_ERANGE, "nsv_connect: %lld connections are open, the max_conns "
                               "limit", (long long)s->max_conns);
    }
    nsv__conn *c = nsv__conn_alloc(l);
    if (!c) {
        atomic_fetch_sub(&s->nconns, 1);
        return nsv__set_detail(s, NSV_ENOMEM, "nsv_connect: no memory for a connection slot");
    }
    c->fd = -1;
    c->proto = &nsv__proto_connect;
    c->seen = 1;
    c->listener = 0xFFFF;
    c->high_water = (uint32_t)s->tcp_high_water;
    c->low_water = (uint32_t)s->tcp_low_water;
    /* A host call, maybe long after this loop's last turn: its timeout
     * counts from now, not from the turn's cached clock. */
    c->deadline = nsv_millis() + s->connect_timeout_ms;
    if (origin >= 0) {
        c->httpc = 1;
        c->seen = 0; /* its request hears of it, the host does not */
        c->route = origin;
        c->tag = tag;
    }
    c->then = then;
    c->hs = hs;
    uint64_t id = nsv__conn_id(l, c);
    if (tls) { /* kept for SNI and certificate verification once connected */
        c->tls_host = nsv__malloc(&s->alloc, u.host_len);
        if (!c->tls_host) {
            c->then = NULL; /* a failed call leaves hs to the caller */
            nsv__conn_close(l, c);
            return nsv__set_detail(s, NSV_ENOMEM, "nsv_connect: no memory for the TLS host name");
        }
        memcpy(c->tls_host, url + u.host_off, u.host_len);
        c->tls_host_len = (uint8_t)u.host_len;
    }
    char host[256];
    memcpy(host, url + u.host_off, u.host_len);
    host[u.host_len] = 0;
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *a4 = (void *)&ss;
    struct sockaddr_in6 *a6 = (void *)&ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)u.port);
        start_connect(l, c, &ss);
        return (int64_t)id;
    }
    if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)u.port);
        start_connect(l, c, &ss);
        return (int64_t)id;
    }
    struct resolve_job *j = nsv__calloc(&s->alloc, sizeof *j);
    pthread_t th;
    pthread_attr_t at;
    if (j) {
        j->srv = s;
        j->loop = l;
        j->id = id;
        memcpy(j->host, host, u.host_len + 1);
        snprintf(j->port, sizeof j->port, "%d", u.port);
        atomic_fetch_add(&s->resolvers, 1);
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (nsv__thread_start(&th, &at, resolve_main, j) != 0) {
            atomic_fetch_sub(&s->resolvers, 1);
            nsv__free(&s->alloc, j);
            j = NULL;
        }
        pthread_attr_destroy(&at);
    }
    if (!j) {
        c->then = NULL;
        nsv__conn_close(l, c);
        return nsv__set_detail(s, NSV_ENOMEM, "nsv_connect: cannot start the name lookup of '%s'", host);
    }
    return (int64_t)id;
}

/* The TLS handshake of an outbound tls:// connection finished. */
static void on_tls_ready(nsv__loop *l, nsv__conn *c)
{
    if (c->await_tls)
        tls_connected(l, c);
}

/* Why c cannot start TLS now, or NULL (nsv_tls_upgrade's preconditions). */
static const char *upgrade_refusal(const nsv__conn *c)
{
    if (c->proto == &nsv__proto_connect)
        return c->closing ? "is closing" : "is still connecting; wait for its TCP_CONNECTED event";
    if (c->proto != &nsv__proto_tcp)
        return "is not a raw TCP connection; only outbound ones (nsv_connect(\"tcp://...\")) can start TLS";
    if (c->listener != 0xFFFF)
        return "was accepted by a listener; only outbound connections (nsv_connect) can start TLS";
    if (c->await_tls)
        return "is already in a TLS handshake";
    if (c->tls)
        return "already speaks TLS";
    if (c->closing)
        return "is closing";
    if (c->shut_wr || c->peer_closed)
        return "has a side shut (nsv_shutdown, or the peer's EOF); a handshake needs both";
    return NULL;
}

/* Bytes the peer sent before the upgrade are plain text: read them out of
 * the socket (they become TCP_DATA events, in order, before the handshake's
 * outcome), so mbedTLS never takes them for a handshake record. 0, or the
 * connection saw EOF (1) or an error (-1). Bounded: a peer that keeps
 * sending plain text while we read would make the handshake fail anyway. */
static int read_plaintext(nsv__loop *l, nsv__conn *c)
{
    for (int i = 0; i < 16; i++) {
        ssize_t n = recv(c->fd, l->scratch, NSV__SCRATCH, MSG_DONTWAIT);
        if (n > 0) {
            nsv__metric_add(l, NSV_M_BYTES_IN, (uint64_t)n);
            emit(l, c, NSV_EV_TCP_DATA, 0, 0, l->scratch, (size_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n == 0) {
            c->peer_closed = 1;
            emit(l, c, NSV_EV_TCP_DATA, 0, NSV_EVF_EOF, NULL, 0);
            return 1;
        }
        return -1;
    }
    return 0;
}

int nsv__tcp_tls_upgrade(nsv__loop *l, nsv__conn *c, const char *name, size_t len, uint32_t flags)
{
    nsv_server *s = l->srv;
    unsigned long long id = (unsigned long long)nsv__conn_id(l, c);
    const char *why = upgrade_refusal(c);
    if (why)
        return nsv__set_detail(s, NSV_ESTATE, "nsv_tls_upgrade: connection 0x%llx %s", id, why);
    if (!nsv__out_empty(c))
        return nsv__set_detail(s, NSV_EAGAIN, "nsv_tls_upgrade: connection 0x%llx has %zu bytes of plain "
                               "text queued; retry once they are sent (a later poll, or TCP_WRITABLE)", id,
                               (size_t)(c->out.len - c->out.off));
    int rd = read_plaintext(l, c);
    if (rd != 0) {
        if (rd < 0) {
            int e = errno;
            nsv__conn_close(l, c);
            return nsv__set_detail(s, NSV_ECLOSED, "nsv_tls_upgrade: connection 0x%llx failed: %s", id,
                                   strerror(e));
        }
        return nsv__set_detail(s, NSV_ECLOSED, "nsv_tls_upgrade: the peer of connection 0x%llx closed its "
                               "side; no handshake was started", id);
    }
    int r = nsv__tls_client_start(l, c, name, len, (flags & NSV_TLS_UPGRADE_VERIFY) != 0);
    if (r)
        return nsv__set_detail(s, r, "nsv_tls_upgrade: connection 0x%llx: %s", id, nsv_last_error_detail(s));
    /* The handshake is bounded like a connect; the idle clock takes over
     * again in tls_connected. */
    c->await_tls = 1;
    c->deadline = nsv_millis() + s->connect_timeout_ms; /* from the call, as in nsv_connect */
    nsv__conn_set_events(l, c, 1, 0);
    if (nsv__tls_handshake(l, c) == 2) /* < 0: ERROR and CLOSE are queued */
        tls_connected(l, c);
    return NSV_OK;
}

/* A raw TCP connection's deadline passed: idle, or (await_tls) a TLS
 * handshake that did not finish in NSV_OPT_CONNECT_TIMEOUT_MS. */
static void tcp_timeout(nsv__loop *l, nsv__conn *c)
{
    /* An accepted stream's idleness; an outbound one's (as every outbound
     * timeout) and the handshake's count as other. */
    NSV__COUNT(l, c->await_tls || c->listener == 0xFFFF ? NSV_M_TIMEOUT_OTHER : NSV_M_TIMEOUT_IDLE);
    if (c->await_tls) {
        char msg[96];
        int n = snprintf(msg, sizeof msg, "TLS: the handshake did not finish within %lld ms",
                         (long long)l->srv->connect_timeout_ms);
        if (c->httpc)
            l->srv->httpc_hooks->conn_error(l, c, NSV_ETIMEDOUT, msg, (size_t)n);
        else
            emit(l, c, NSV_EV_ERROR, NSV_ETIMEDOUT, 0, msg, (size_t)n);
    }
    nsv__conn_close(l, c);
}

/* Accepted from a tcp:// listener: the host hears of it at once. */
static void on_open(nsv__loop *l, nsv__conn *c)
{
    c->seen = 1;
    c->high_water = (uint32_t)l->srv->tcp_high_water;
    c->low_water = (uint32_t)l->srv->tcp_low_water;
    c->deadline = l->now + l->srv->idle_timeout_ms;
    nsv__edge_emit_open(l, c, NSV_EV_TCP_OPEN);
}

/* NSV_OPT_CONNECT_TIMEOUT_MS passed before the connect finished. */
static void connect_timeout(nsv__loop *l, nsv__conn *c)
{
    static const char msg[] = "connect: timed out";
    NSV__COUNT(l, NSV_M_TIMEOUT_OTHER);
    if (c->httpc)
        l->srv->httpc_hooks->conn_error(l, c, NSV_ETIMEDOUT, msg, sizeof msg - 1);
    else
        nsv__evq_emit_simple(l, c, NSV_EV_ERROR, NSV_ETIMEDOUT, msg, sizeof msg - 1);
    nsv__conn_close(l, c);
}

const nsv__proto nsv__proto_tcp = {
    .name = "a raw TCP connection",
    .flags = NSV__P_STREAM,
    .on_open = on_open,
    .on_readable = on_readable,
    .on_flushed = on_flushed,
    .on_tls_ready = on_tls_ready,
    .on_timer = tcp_timeout,
};

/* A connect made for another protocol failed: that protocol frees its state. */
static void connect_closed(nsv__loop *l, nsv__conn *c)
{
    if (c->then && c->then->on_close)
        c->then->on_close(l, c);
    c->then = NULL;
}

const nsv__proto nsv__proto_connect = {
    .name = "a raw TCP connection (connecting)",
    .on_readable = connect_event,
    .on_event = connect_event,
    .on_timer = connect_timeout,
    .on_close = connect_closed,
};
