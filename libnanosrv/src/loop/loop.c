/* loop.c - one epoll loop: connection table, accept, flush, timers. */
#include "loop.h"
#include "edge.h"
#include "metrics.h"
#include "io.h"
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define TAG_CONN 0u
#define TAG_LISTENER 1u
#define TAG_WAKE 2u
/* epoll data: tag (bits 56-63) | listener index (bits 32-47, listeners
 * only) | connection slot or listener fd (bits 0-31). The
 * listener's fd travels in the event so no shared table is read on accept. */
#define EV_DATA(tag, v) (((uint64_t)(tag) << 56) | (uint32_t)(v))
#define CHUNK NSV__CHUNK
#define FILE_PIECE (256 * 1024)     /* file bytes per sendfile call */
#define FILE_COPY (64 * 1024)       /* file bytes read into `out` at a time (TLS) */
#define FILE_TURN (1024 * 1024)     /* file bytes per connection per flush: the others
                                       get their turn, the socket's EPOLLOUT brings it back */

nsv__loop *nsv__loop_new(nsv_server *s, int idx)
{
    nsv__loop *l = nsv__calloc(&s->alloc, sizeof *l);
    if (!l)
        return NULL;
    l->srv = s;
    l->idx = idx;
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    l->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    l->scratch = nsv__malloc(&s->alloc, NSV__SCRATCH);
    if (l->epfd < 0 || l->wakefd < 0 || !l->scratch) {
        nsv__loop_free(l);
        return NULL;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EV_DATA(TAG_WAKE, 0)};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wakefd, &ev) != 0) {
        nsv__loop_free(l);
        return NULL;
    }
    pthread_mutex_init(&l->qlock, NULL);
    pthread_cond_init(&l->qcond, NULL);
    pthread_mutex_init(&l->cmdlock, NULL);
    nsv__timers_init(&l->timers);
    l->locks_ready = 1;
    l->now = nsv_millis();
    l->next_sweep = l->now + NSV__SWEEP_MS;
    return l;
}

void nsv__loop_free(nsv__loop *l)
{
    if (!l)
        return;
    const nsv__alloc *a = &l->srv->alloc;
    /* HTTP/2 streams first, detached from their sessions, so a session's
     * own close (second pass) finds none left to close with events. */
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t i = 0; i < l->nslots; i++) {
            nsv__conn *c = NSV__CONN(l, i);
            if (!c->proto || (pass == 0) != (c->h2s != NULL))
                continue;
            if (c->proto->on_close)
                c->proto->on_close(l, c);
            if (c->h2s)
                l->srv->h2_hooks->closed(l, c);
            nsv__tls_free(l, c);
            nsv__free(a, c->tls_host);
            nsv__free(a, c->reason);
            if (c->fd >= 0)
                close(c->fd);
            if (c->file_on)
                close(c->file_fd);
            nsv__buf_release(l, &c->in);
            nsv__buf_release(l, &c->out);
            if (!c->h2s)
                atomic_fetch_sub(&l->srv->nconns, 1);
            c->proto = NULL;
        }
    if (l->srv->httpc_hooks)
        l->srv->httpc_hooks->loop_free(l);
    nsv__tls_loop_free(l);
    for (uint32_t i = 0; i < l->nchunks; i++) {
        nsv__free(a, l->chunks[i]);
        nsv__free(a, (void *)atomic_load(&l->tickets[i]));
    }
    nsv__free(a, l->freelist);
    nsv__free(a, l->throttled_ids);
    nsv__free(a, l->cmd);
    nsv__free(a, l->cmd_spare);
    for (int i = 0; i < l->npool; i++)
        nsv__free(a, l->pool[i]);
    for (int i = 0; i < l->nbig_bufs; i++)
        nsv__free(a, l->big_bufs[i].p);
    nsv__free(a, l->events.p);
    nsv__free(a, l->scratch);
    nsv__free(a, l->http);
    nsv__timers_free(l->srv, &l->timers);
    if (l->locks_ready) {
        pthread_mutex_destroy(&l->qlock);
        pthread_cond_destroy(&l->qcond);
        pthread_mutex_destroy(&l->cmdlock);
    }
    if (l->epfd >= 0)
        close(l->epfd);
    if (l->wakefd >= 0)
        close(l->wakefd);
    nsv__free(a, l);
}

int nsv__loop_add_listener(nsv__loop *l, int lidx)
{
    int fd = l->srv->listeners[lidx].wfd[l->idx];
    if (fd < 0)
        return 0; /* hand-off mode: only worker 0 accepts */
    struct epoll_event ev = {.events = EPOLLIN,
                             .data.u64 = EV_DATA(TAG_LISTENER, fd) | ((uint64_t)lidx << 32)};
    return epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : NSV_ESYS;
}

uint64_t nsv__conn_id(nsv__loop *l, nsv__conn *c) { return NSV__ID(c->slot, l->idx, c->gen); }

/* Large writes on a connection with nothing queued go straight to the
 * socket (head, then data, in one sendmsg): one copy fewer than buffering
 * them. Returns the bytes the kernel took; the caller queues the rest and
 * counts what went in NSV_M_BYTES_OUT (the connection does not know its
 * loop). Not through TLS, which frames records itself. */
size_t nsv__conn_send_direct(nsv__conn *c, const void *head, size_t hlen, const char *data, size_t len)
{
    if (len < NSV__DIRECT_MIN || !nsv__out_empty(c) || c->tls || c->fd < 0)
        return 0;
    struct iovec iov[2] = {{(void *)head, hlen}, {(void *)data, len}};
    struct msghdr m = {.msg_iov = hlen ? iov : iov + 1, .msg_iovlen = hlen ? 2 : 1};
    ssize_t n = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    return n > 0 ? (size_t)n : 0;
}

/* The poller is touched only in this file; these are the other layers' way in. */
int nsv__loop_fd(const nsv__loop *l) { return l->epfd; }

void nsv__loop_remove_fd(nsv__loop *l, int fd)
{
    struct epoll_event ev = {0};
    epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, &ev);
}

/* Watch a connection's socket that is not in the poller yet (an outbound
 * connect); adopted sockets are added by nsv__loop_adopt. */
int nsv__loop_watch(nsv__loop *l, nsv__conn *c, int rd, int wr)
{
    c->reading = (uint8_t)rd;
    c->writing = (uint8_t)wr;
    struct epoll_event ev = {.events = (rd ? EPOLLIN : 0) | (wr ? EPOLLOUT : 0),
                             .data.u64 = EV_DATA(TAG_CONN, c->slot)};
    return epoll_ctl(l->epfd, EPOLL_CTL_ADD, c->fd, &ev) == 0 ? 0 : NSV_ESYS;
}

nsv__conn *nsv__conn_get(nsv__loop *l, uint64_t id)
{
    uint32_t slot = NSV__ID_SLOT(id);
    if (slot >= l->nslots)
        return NULL;
    nsv__conn *c = NSV__CONN(l, slot);
    if (!c->proto || c->gen != NSV__ID_GEN(id))
        return NULL;
    return c;
}

nsv__conn *nsv__conn_alloc(nsv__loop *l)
{
    if (l->nfree == 0) {
        if (l->nslots >= 0xFFFFFFu)
            return NULL;
        if (l->nslots % CHUNK == 0) {
            if (l->nchunks >= NSV__MAX_CHUNKS)
                return NULL;
            uint32_t *fl = nsv__realloc(&l->srv->alloc, l->freelist, (l->nchunks + 1) * CHUNK * sizeof *fl);
            if (!fl)
                return NULL;
            l->freelist = fl;
            nsv__conn *ch = nsv__calloc(&l->srv->alloc, CHUNK * sizeof(nsv__conn));
            _Atomic uint32_t *tk = nsv__calloc(&l->srv->alloc, CHUNK * sizeof *tk);
            if (!ch || !tk) {
                nsv__free(&l->srv->alloc, ch);
                nsv__free(&l->srv->alloc, (void *)tk);
                return NULL;
            }
            l->chunks[l->nchunks] = ch;
            atomic_store_explicit(&l->tickets[l->nchunks], tk, memory_order_release);
            l->nchunks++;
            l->freecap = l->nchunks * CHUNK;
            /* Push the new slots so the lowest comes out first. */
            for (uint32_t i = CHUNK; i-- > 0;)
                l->freelist[l->nfree++] = l->nslots + i;
            l->nslots += CHUNK;
        }
    }
    if (l->nfree == 0)
        return NULL;
    uint32_t slot = l->freelist[--l->nfree];
    nsv__conn *c = NSV__CONN(l, slot);
    uint32_t gen = c->gen + 1;
    if (gen > NSV__GEN_MAX)
        gen = 1;
    /* A closed connection may still be linked on the flush or held list of
     * this turn: keep the links, so the lists stay whole (the new
     * connection passes through them harmlessly). */
    uint8_t dirty = c->dirty, on_held = c->on_held;
    nsv__conn *next_dirty = c->next_dirty, *next_held = c->next_held;
    memset(c, 0, sizeof *c);
    c->dirty = dirty;
    c->next_dirty = next_dirty;
    c->on_held = on_held;
    c->next_held = next_held;
    c->gen = gen;
    c->slot = slot;
    c->route = -1;
    l->nused++;
    nsv__metric_add(l, NSV_M_CONNS_ACTIVE, 1); /* this worker's share (nsv_metrics_worker) */
    nsv__ticket(l, c, NSV__T_IDLE);
    return c;
}

static void arm(nsv__loop *l, nsv__conn *c)
{
    if (c->h2s) { /* a virtual connection: its session reads for it */
        l->srv->h2_hooks->arm(l, c);
        return;
    }
    struct epoll_event ev = {.events = (c->reading ? EPOLLIN : 0) | (c->writing ? EPOLLOUT : 0) |
                                       (c->watch_hup ? EPOLLRDHUP : 0),
                             .data.u64 = EV_DATA(TAG_CONN, c->slot)};
    epoll_ctl(l->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* HTTP connections also watch EPOLLRDHUP, so a client that ends its side
 * while it is not being read (its input buffer full) is still noticed; the
 * connection stays open, since a client that half-closes after its request
 * still gets the response. */
void nsv__conn_set_events(nsv__loop *l, nsv__conn *c, int rd, int wr)
{
    if (c->reading == rd && c->writing == wr)
        return;
    c->reading = (uint8_t)rd;
    c->writing = (uint8_t)wr;
    arm(l, c);
}

void nsv__conn_close(nsv__loop *l, nsv__conn *c)
{
    if (!c->proto)
        return;
    int httpc = c->httpc;
    int32_t origin = c->route;
    int stream = c->h2s != NULL;
    if (httpc)
        l->srv->httpc_hooks->closed(l, c);
    if (c->proto->on_close)
        c->proto->on_close(l, c);
    if (stream) /* the stream ends (reset unless its reply is complete) */
        l->srv->h2_hooks->closed(l, c);
    /* Retire the id before the CLOSE is queued: on a sharded server the host
     * may poll the CLOSE at once on another thread, and from then on every
     * call on the id must say ESTALE. */
    _Atomic uint32_t *tk = atomic_load_explicit(&l->tickets[c->slot / CHUNK], memory_order_relaxed);
    atomic_store_explicit(&tk[c->slot % CHUNK], 0, memory_order_release);
    if (c->seen)
        nsv__evq_emit_simple(l, c, NSV_EV_CLOSE, 0, NULL, 0);
    nsv__tls_free(l, c);
    if (c->edge)
        nsv__edge_conn_free(l, c);
    if (c->tls_host) {
        nsv__free(&l->srv->alloc, c->tls_host);
        c->tls_host = NULL;
    }
    if (c->reason) {
        nsv__free(&l->srv->alloc, c->reason);
        c->reason = NULL;
    }
    if (c->fd >= 0)
        close(c->fd); /* also removes it from epoll */
    if (c->file_on) {
        close(c->file_fd);
        c->file_on = 0;
    }
    nsv__buf_release(l, &c->in);
    nsv__buf_release(l, &c->out);
    nsv__metric_sub(l, NSV_M_OUTPUT_QUEUED, c->out_counted);
    c->out_counted = 0;
    c->proto = NULL;
    c->state = 0;
    c->closing = 0;
    c->fd = -1;
    c->h2s = NULL;
    c->h2_parent = NULL;
    l->freelist[l->nfree++] = c->slot;
    l->nused--;
    if (!stream) { /* streams are not connections: their session is */
        nsv__metric_sub(l, NSV_M_CONNS_ACTIVE, 1);
        atomic_fetch_sub(&l->srv->nconns, 1);
    }
    if (httpc) {
        c->httpc = 0;
        l->srv->httpc_hooks->after_close(l, origin);
    }
}

void nsv__addr_format(const struct sockaddr_storage *ss, char *out, size_t cap, unsigned *port)
{
    out[0] = 0;
    *port = 0;
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const void *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, out, (socklen_t)cap);
        *port = ntohs(a->sin6_port);
    } else if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const void *)ss;
        inet_ntop(AF_INET, &a->sin_addr, out, (socklen_t)cap);
        *port = ntohs(a->sin_port);
    }
}

void nsv__conn_format_peer(nsv__conn *c, const struct sockaddr_storage *ss)
{
    unsigned port;
    nsv__addr_format(ss, c->peer, sizeof c->peer, &port);
    c->peer_port = (uint16_t)port;
    c->peer_len = (uint8_t)strlen(c->peer);
}

/* Adopt an accepted socket of listener lidx, speaking its protocol.
 * Returns NULL (and closes fd) on failure. */
nsv__conn *nsv__loop_adopt(nsv__loop *l, int fd, int lidx, const struct sockaddr_storage *ss)
{
    nsv__conn *c = nsv__conn_alloc(l);
    if (!c) {
        close(fd);
        atomic_fetch_sub(&l->srv->nconns, 1);
        return NULL;
    }
    c->fd = fd;
    c->proto = l->srv->listeners[lidx].proto;
    c->listener = (uint16_t)lidx;
    c->reading = 1;
    c->watch_hup = !!(c->proto->flags & NSV__P_WATCH_HUP);
    nsv__conn_format_peer(c, ss);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->deadline = l->now + l->srv->request_timeout_ms;
    c->accepted = l->now;
    struct epoll_event ev = {.events = EPOLLIN | (c->watch_hup ? EPOLLRDHUP : 0),
                             .data.u64 = EV_DATA(TAG_CONN, c->slot)};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        nsv__conn_close(l, c);
        return NULL;
    }
    if (l->srv->listeners[lidx].edge) { /* a PROXY header first: the edge starts TLS and on_open */
        int e = nsv__edge_adopt(l, c, lidx);
        if (e != 0)
            return e > 0 ? c : NULL;
    }
    int tls = l->srv->listeners[lidx].tls; /* the handshake starts with the first read */
    if (tls && nsv__tls_accept(l, c, tls) != 0) {
        nsv__conn_close(l, c);
        return NULL;
    }
    if (c->proto->on_open)
        c->proto->on_open(l, c);
    return c;
}

/* A connection accepted (and counted in nconns) that will not be served:
 * max_conns with nothing to close for room, or draining. */
static void refuse(nsv__loop *l, int fd, int lidx)
{
    static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                               "Connection: close\r\nRetry-After: 1\r\n\r\n";
    atomic_fetch_sub(&l->srv->nconns, 1);
    NSV__COUNT(l, NSV_M_CONNS_REFUSED);
    if (!l->srv->listeners[lidx].tls) { /* a plaintext 503 means nothing to a TLS client */
        ssize_t w = send(fd, busy, sizeof busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0)
            nsv__metric_add(l, NSV_M_BYTES_OUT, (uint64_t)w);
    }
    close(fd);
}

/* A connection accepted at max_conns, on the loop that is to serve it:
 * kept if this loop can close one of its own to make room (shed.c), or if
 * room was made elsewhere meanwhile (it waited in a hand-off), else refused. */
static void adopt_full(nsv__loop *l, int fd, int lidx, const struct sockaddr_storage *ss)
{
    nsv_server *s = l->srv;
    if (atomic_load(&s->draining) || (atomic_load(&s->nconns) > s->max_conns && !nsv__shed(l)))
        refuse(l, fd, lidx);
    else
        nsv__loop_adopt(l, fd, lidx, ss);
}

static void adopt_full_cmd(nsv__loop *l, const nsv__cmd *c)
{
    struct sockaddr_storage ss;
    memcpy(&ss, c->h, sizeof ss);
    adopt_full(l, (int)c->arg, c->status, &ss);
}

/* Shedding (NSV_OPT_SHED) closes connections of the loop that serves the
 * new one: workers own their connections, so in hand-off mode the acceptor
 * passes the socket to the next worker of its round robin, which makes
 * room among its own (or refuses it) as a worker of its own listener would.
 * Until then the socket counts in nconns, one past max_conns. */
static void accept_full(nsv__loop *l, int fd, int lidx, const struct sockaddr_storage *ss, int handoff)
{
    nsv_server *s = l->srv;
    nsv__loop *to = handoff ? s->loops[l->handoff_next++ % (uint32_t)s->nloops] : l;
    if (to == l) {
        adopt_full(l, fd, lidx, ss);
        return;
    }
    nsv__cmd c = {.fn = adopt_full_cmd, .status = lidx, .arg = (uint64_t)fd, .hlen = sizeof *ss};
    if (nsv__cmd_push(to, &c, (const char *)ss, NULL) != 0)
        refuse(l, fd, lidx);
}

static void on_accept(nsv__loop *l, int lidx, int lfd)
{
    nsv_server *s = l->srv;
    for (int i = 0; i < 64; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* Out of descriptors: stop accepting for a moment instead of
                 * spinning on a listener that stays readable. */
                nsv__log(NSV_LOG_ERROR, "accept: %s; pausing accepts", strerror(errno));
                for (int k = 0; k < s->nlisteners; k++) {
                    struct epoll_event ev = {0};
                    if (s->listeners[k].wfd[l->idx] >= 0)
                        epoll_ctl(l->epfd, EPOLL_CTL_DEL, s->listeners[k].wfd[l->idx], &ev);
                }
                l->accept_pause_end = l->now + 100;
            }
            return;
        }
        NSV__COUNT(l, NSV_M_CONNS_ACCEPTED);
        if (s->listeners[lidx].edge && nsv__edge_admit(l, lidx, &ss) != 0) {
            close(fd); /* refused before a byte is read: no answer */
            NSV__COUNT(l, NSV_M_CONNS_DENIED);
            continue;
        }
        int full = atomic_fetch_add(&s->nconns, 1) >= s->max_conns;
        int handoff = s->sharded && s->nloops > 1 && (s->shard_accept || s->listeners[lidx].handoff);
        if (atomic_load(&s->draining) || (full && !s->shed))
            refuse(l, fd, lidx);
        else if (full)
            accept_full(l, fd, lidx, &ss, handoff);
        else if (handoff)
            nsv__loop_handoff(l, fd, lidx, &ss);
        else
            nsv__loop_adopt(l, fd, lidx, &ss);
    }
}

/* Output queued past the high water mark (raw TCP, streamed replies):
 * TCP_WRITABLE code 0 tells the host to slow down; code 1 follows in
 * after_flush once the output is down to the low water mark. */
void nsv__out_queued(nsv__loop *l, nsv__conn *c)
{
    if (!c->unwritable && c->out.len - c->out.off >= c->high_water) {
        c->unwritable = 1;
        nsv__evq_emit(l, c, NSV_EV_TCP_WRITABLE, 0, 0, NULL, 0);
    }
}

/* Stream connections (raw TCP, WebSocket) stop being read while their own
 * unsent output is past half the cap (a peer that sends but does not read
 * is slowed by TCP, not buffered) and while a sharded host lags (throttle.c).
 * Reading resumes here once neither holds and the output is down to a quarter. */
void nsv__read_resume(nsv__loop *l, nsv__conn *c)
{
    if (!c->reading && !c->throttled && !c->paused && !c->peer_closed && !c->closing &&
        ((c->proto->flags & NSV__P_STREAM) || c->bstream) && !nsv__out_over(l, c, 4))
        nsv__conn_set_events(l, c, 1, c->writing);
}

/* The host stops or resumes reading a connection (raw TCP, a streamed
 * request body, a WebSocket); resuming waits like any other read stop.
 * Input read before the pause waits in `in` (protocols do not take it
 * while paused) and goes through the flush list once reading resumes. */
void nsv__conn_pause(nsv__loop *l, nsv__conn *c, int paused)
{
    c->paused = paused != 0;
    if (c->paused) {
        nsv__conn_set_events(l, c, 0, c->writing);
        return;
    }
    nsv__read_resume(l, c);
    if (c->in.len > c->in.off)
        nsv__conn_mark_dirty(l, c);
}

static int read_stopped(nsv__loop *l, nsv__conn *c)
{
    if (nsv__out_over(l, c, 2)) {
        nsv__conn_set_events(l, c, 0, c->writing);
        return 1;
    }
    return nsv__throttle(l, c);
}

/* After output moved: writability back (only streams that crossed the
 * high water mark are unwritable), reading back, then the protocol's part. */
static void after_flush(nsv__loop *l, nsv__conn *c)
{
    if (c->unwritable && c->out.len - c->out.off <= c->low_water) {
        c->unwritable = 0;
        nsv__evq_emit(l, c, NSV_EV_TCP_WRITABLE, 1, 0, NULL, 0);
    }
    nsv__read_resume(l, c);
    if (c->proto->on_flushed)
        c->proto->on_flushed(l, c);
}

/* Send len bytes of the open file fd from off after what is queued; the
 * connection owns fd from now on (closed when sent, or with the connection). */
void nsv__conn_attach_file(nsv__conn *c, int fd, uint64_t off, uint64_t len)
{
    c->file_fd = fd;
    c->file_on = 1;
    c->file_copy = c->tls != NULL || c->fd < 0; /* TLS and HTTP/2 frame it themselves: read, then write */
    c->file_off = off;
    c->file_left = len;
}

static void file_done(nsv__conn *c)
{
    close(c->file_fd);
    c->file_on = 0;
    c->file_fd = -1;
}

/* Move one piece of the attached file: sendfile to the socket, or (TLS, or
 * a file system sendfile refuses) pread into `out` for the caller to send.
 * 1 moved, 0 the socket is full, -1 broken: the file ended early (it shrank
 * after its length was promised) or an error. */
static int file_step(nsv__loop *l, nsv__conn *c)
{
    size_t want = c->file_left < FILE_PIECE ? (size_t)c->file_left : FILE_PIECE;
    ssize_t n;
    if (!c->file_copy) {
        off_t off = (off_t)c->file_off;
        n = sendfile(c->fd, c->file_fd, &off, want);
        if (n < 0 && (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
            c->file_copy = 1;
            return 1;
        }
        if (n > 0)
            nsv__metric_add(l, NSV_M_BYTES_OUT, (uint64_t)n);
    } else {
        if (want > FILE_COPY)
            want = FILE_COPY;
        if (nsv__buf_reserve(l, &c->out, want) != 0)
            return -1;
        n = pread(c->file_fd, c->out.p + c->out.len, want, (off_t)c->file_off);
        if (n > 0)
            c->out.len += (uint32_t)n;
    }
    if (n > 0) {
        c->file_off += (uint64_t)n;
        c->file_left -= (uint64_t)n;
        c->deadline = l->now + l->srv->idle_timeout_ms; /* progress: the idle clock restarts */
        return 1;
    }
    if (n < 0 && errno == EINTR)
        return 1;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    return -1;
}

/* NSV_M_OUTPUT_QUEUED: a connection's unsent bytes join the loop's sum
 * where a flush leaves them (output that leaves at once never counts) and
 * leave it at its next flush or its close; out_counted is its share. */
static void out_settle(nsv__loop *l, nsv__conn *c)
{
    uint32_t q = c->out.len - c->out.off;
    if (q > c->out_counted)
        nsv__metric_add(l, NSV_M_OUTPUT_QUEUED, q - c->out_counted);
    else if (q < c->out_counted)
        nsv__metric_sub(l, NSV_M_OUTPUT_QUEUED, c->out_counted - q);
    c->out_counted = q;
}

/* Send queued output, then the attached file. Returns 0, or -1 if the
 * connection was closed. */
int nsv__conn_flush(nsv__loop *l, nsv__conn *c)
{
    nsv__buf *b = &c->out;
    size_t budget = FILE_TURN;
    for (;;) {
        while (b->off < b->len) {
            ssize_t n = nsv__io_send(l, c, b->p + b->off, b->len - b->off);
            if (n > 0) {
                b->off += (uint32_t)n;
                continue;
            }
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                goto blocked;
            nsv__conn_close(l, c);
            return -1;
        }
        if (!c->file_on)
            break;
        if (c->file_left == 0) {
            file_done(c);
            break;
        }
        if (budget == 0) {
            /* This connection had its share of the turn: come back when the
             * poller says the socket still takes bytes (level-triggered). */
            nsv__conn_set_events(l, c, c->reading, 1);
            out_settle(l, c);
            after_flush(l, c);
            return c->proto ? 0 : -1;
        }
        uint64_t before = c->file_left;
        int r = file_step(l, c);
        if (r < 0) {
            nsv__conn_close(l, c);
            return -1;
        }
        if (r == 0)
            goto blocked;
        size_t moved = (size_t)(before - c->file_left);
        budget = moved < budget ? budget - moved : 0;
    }
    nsv__buf_release(l, b);
    out_settle(l, c);
    if (c->writing)
        nsv__conn_set_events(l, c, c->reading, 0);
    after_flush(l, c);
    if (!c->proto)
        return -1;
    if (c->closing) {
        int pending = 0;
        if (!c->peer_closed && c->fd >= 0 && (c->in.len > c->in.off || c->lingering ||
                                (ioctl(c->fd, FIONREAD, &pending) == 0 && pending > 0))) {
            /* Unread input: closing now would send RST and could destroy the
             * response in flight. Shut the write side and drain a while. */
            if (!c->lingering) {
                shutdown(c->fd, SHUT_WR);
                c->lingering = 1;
                c->deadline = l->now + 2000;
                nsv__buf_release(l, &c->in);
            }
            nsv__conn_set_events(l, c, 1, 0);
            return 0;
        }
        nsv__conn_close(l, c);
        return -1;
    }
    return 0;
blocked:
    nsv__conn_set_events(l, c, c->reading, 1);
    out_settle(l, c);
    after_flush(l, c);
    if (!c->proto)
        return -1;
    if (c->proto->on_blocked)
        c->proto->on_blocked(l, c);
    else
        c->deadline = l->now + l->srv->idle_timeout_ms;
    return 0;
}

void nsv__conn_mark_dirty(nsv__loop *l, nsv__conn *c)
{
    if (c->dirty)
        return;
    c->dirty = 1;
    c->next_dirty = l->dirty;
    l->dirty = c;
}

/* Hold a connection's answered output for one turn: its next pipelined
 * request has just gone to the host, and the answer to that one, if it
 * comes before the next turn, leaves in the same write. */
static void hold(nsv__loop *l, nsv__conn *c)
{
    c->held = 1;
    nsv__loop_defer(l, c);
}

/* The connection goes on the flush list (so its protocol's on_dirty runs)
 * at the start of the next turn. */
void nsv__loop_defer(nsv__loop *l, nsv__conn *c)
{
    if (c->on_held)
        return;
    c->on_held = 1;
    c->next_held = l->held;
    l->held = c;
}

/* A new turn (one nsv_poll, one nsv_run or worker iteration): output held
 * in the last one goes now, answered or not, so an answer never waits on a
 * later request the host keeps (a long poll). */
void nsv__loop_turn(nsv__loop *l)
{
    nsv__conn *c = l->held;
    l->held = NULL;
    while (c) {
        nsv__conn *next = c->next_held;
        c->on_held = 0;
        c->next_held = NULL;
        if (c->proto)
            nsv__conn_mark_dirty(l, c);
        c = next;
    }
}

/* Parse buffered requests of replied connections, then send what can go.
 * Output of a connection whose next request has just gone to the host is
 * held until the next turn (hold above), unless it grew large. */
void nsv__loop_flush_dirty(nsv__loop *l)
{
    nsv__conn *c = l->dirty;
    l->dirty = NULL;
    while (c) {
        nsv__conn *next = c->next_dirty;
        c->dirty = 0;
        c->next_dirty = NULL;
        int may_hold = c->proto && !c->closing && c->proto->on_dirty ? c->proto->on_dirty(l, c) : 0;
        if (c->proto && !nsv__out_empty(c)) {
            if (may_hold && c->proto && !c->held && !c->file_on && c->out.len - c->out.off < NSV__PIPELINE_OUT) {
                hold(l, c);
            } else {
                c->held = 0;
                nsv__conn_flush(l, c);
            }
        } else if (c->proto && c->closing && nsv__out_empty(c)) {
            nsv__conn_flush(l, c);
        }
        c = next;
    }
}

/* Drain bookkeeping of a loop: close idle connections, and
 * finish once none are left or the deadline passed. */
void nsv__drain_check(nsv__loop *l)
{
    nsv_server *s = l->srv;
    if (!atomic_load(&s->draining))
        return;
    for (uint32_t i = 0; i < l->nslots; i++) {
        nsv__conn *c = NSV__CONN(l, i);
        if (c->proto && c->proto->on_drain)
            c->proto->on_drain(l, c);
    }
    if (atomic_load(&s->nconns) == 0 || l->now >= s->drain_deadline) {
        for (uint32_t i = 0; i < l->nslots; i++) {
            nsv__conn *c = NSV__CONN(l, i);
            if (c->proto)
                nsv__conn_close(l, c);
        }
        if (s->httpc_hooks)
            s->httpc_hooks->stop(l);
        atomic_store(&s->stop, 1);
    }
}

static uint64_t timeouts(nsv__loop *l)
{
    uint64_t n = 0;
    for (int m = NSV_M_TIMEOUT_REQUEST; m <= NSV_M_TIMEOUT_OTHER; m++)
        n += atomic_load_explicit(&l->metrics[m], memory_order_relaxed);
    return n;
}

/* c's deadline passed. It counts once in NSV_M_TIMEOUT_*: the protocol's
 * on_timer counts the kind it knows (HTTP's 408 or idle close, an idle raw
 * TCP stream); one that counts nothing (a PROXY header not read in time,
 * the outbound clients) or has no on_timer counts as NSV_M_TIMEOUT_OTHER
 * here. A connection already on its way out (closing, or a lingering
 * close, which ends on time by design) is not counted again. */
static void expire(nsv__loop *l, nsv__conn *c)
{
    int quiet = c->closing || c->lingering;
    if (!c->proto->on_timer || c->closing) {
        if (!quiet)
            NSV__COUNT(l, NSV_M_TIMEOUT_OTHER);
        nsv__conn_close(l, c);
        return;
    }
    uint64_t before = timeouts(l);
    c->proto->on_timer(l, c);
    if (!quiet && timeouts(l) == before)
        NSV__COUNT(l, NSV_M_TIMEOUT_OTHER);
}

static void sweep(nsv__loop *l)
{
    l->next_sweep = l->now + NSV__SWEEP_MS;
    for (uint32_t i = 0; i < l->nslots; i++) {
        nsv__conn *c = NSV__CONN(l, i);
        if (!c->proto)
            continue;
        if (c->deadline && l->now >= c->deadline)
            expire(l, c);
        else if (c->proto->on_tick) {
            c->proto->on_tick(l, c);
        }
    }
    if (l->accept_pause_end && l->now >= l->accept_pause_end) {
        l->accept_pause_end = 0;
        for (int i = 0; i < l->srv->nlisteners; i++)
            nsv__loop_add_listener(l, i);
    }
}

/* A closing connection's input is read and dropped until the peer's EOF:
 * closing with unread input would reset the connection and could destroy
 * the response in flight (lingering close). */
static void discard_input(nsv__loop *l, nsv__conn *c)
{
    ssize_t n = nsv__io_recv(l, c, l->scratch, NSV__SCRATCH);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        if (c->lingering || nsv__out_empty(c))
            nsv__conn_close(l, c);
        else
            c->peer_closed = 1, nsv__conn_set_events(l, c, 0, c->writing);
    }
}

static void on_conn_event(nsv__loop *l, uint32_t slot, uint32_t events)
{
    if (slot >= l->nslots)
        return;
    nsv__conn *c = NSV__CONN(l, slot);
    if (!c->proto)
        return;
    if (c->proto->on_event) {
        c->proto->on_event(l, c);
        return;
    }
    if (c->tls) { /* until the handshake is done, events are for it */
        int h = nsv__tls_handshake(l, c);
        if (h <= 0)
            return;
        if (h == 2) {
            events |= EPOLLIN; /* application data may have come with it */
            if (c->proto->on_tls_ready)
                c->proto->on_tls_ready(l, c);
            if (!c->proto)
                return;
        }
    }
    if (events & EPOLLOUT) {
        if (nsv__conn_flush(l, c) < 0)
            return;
    }
    if ((events & EPOLLRDHUP) && !c->reading && c->watch_hup) {
        /* EOF while not reading: only HTTP needs to know now; stop watching
         * (it stays signalled) and let a later read find the EOF itself. */
        c->watch_hup = 0;
        arm(l, c);
        if (c->proto->on_peer_eof)
            c->proto->on_peer_eof(l, c);
    }
    if (events & EPOLLERR) {
        /* A reset after the peer's FIN (our bytes reached its closed socket):
         * reads return EOF forever, writes fail, and the error stays
         * signalled, so waiting would spin the loop. Nothing more can be said. */
        nsv__conn_close(l, c);
        return;
    }
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
        if (c->closing || c->lingering) {
            discard_input(l, c);
            return;
        }
        if ((c->proto->flags & NSV__P_STREAM) && read_stopped(l, c))
            return;
        c->proto->on_readable(l, c);
    }
}

int nsv__loop_run_once(nsv__loop *l, int timeout_ms)
{
    struct epoll_event evs[256];
    l->now = nsv_millis();
    int64_t until_sweep = l->next_sweep - l->now;
    if ((l->nused || l->accept_pause_end) && (timeout_ms < 0 || timeout_ms > until_sweep))
        timeout_ms = until_sweep < 0 ? 0 : (int)until_sweep;
    int64_t until_timer = nsv__timers_wait(l);
    if (until_timer >= 0 && (timeout_ms < 0 || timeout_ms > until_timer))
        timeout_ms = (int)until_timer;
    if (l->dirty || l->held || nsv__tls_has_ready(l))
        timeout_ms = 0; /* buffered requests, held output or decrypted bytes wait */
    int n = epoll_wait(l->epfd, evs, 256, timeout_ms);
    if (n < 0) {
        if (errno != EINTR)
            return NSV_ESYS;
        n = 0; /* a signal: behave like a wakeup */
    }
    l->now_us = nsv__mono_us(); /* one clock read: the turn's ms and µs */
    l->now = l->now_us / 1000;
    for (int i = 0; i < n; i++) {
        uint64_t d = evs[i].data.u64;
        uint32_t tag = (uint32_t)(d >> 56), v = (uint32_t)d;
        if (tag == TAG_CONN)
            on_conn_event(l, v, evs[i].events);
        else if (tag == TAG_LISTENER)
            on_accept(l, (int)((d >> 32) & 0xFFFF), (int)v);
        else {
            uint64_t x; /* a wakeup (nsv__loop_wake): just clear it */
            ssize_t r = read(l->wakefd, &x, sizeof x);
            (void)r;
        }
    }
    nsv__tls_run_pending(l, on_conn_event);
    nsv__timers_fire(l);
    if (l->now >= l->next_sweep)
        sweep(l);
    nsv__loop_flush_dirty(l);
    return n;
}
