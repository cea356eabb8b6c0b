/* server.c - server lifecycle, listeners, routes and the single-loop poll. */
#include "server.h"
#include "../loop/edge.h"
#include "http_client.h"
#include "../h2/h2.h"
#include "../tls/tls.h"
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>


/* Close every socket of listener i (removing them from the loops first). */
static void close_listener(nsv_server *s, int i)
{
    nsv__listener *L = &s->listeners[i];
    for (int k = 0; k < NSV__MAX_LOOPS; k++) {
        int fd = L->wfd[k];
        if (fd < 0)
            continue;
        if (k < s->nloops && s->loops[k])
            nsv__loop_remove_fd(s->loops[k], fd);
        close(fd);
        L->wfd[k] = -1;
    }
}

nsv_server *nsv_server_new_ex(int workers, nsv_alloc_fn fn, void *ud)
{
    nsv__alloc a = {fn ? fn : nsv__default_alloc.fn, fn ? ud : NULL};
    nsv_server *s = nsv__calloc(&a, sizeof *s);
    if (!s) {
        nsv__set_detail(NULL, NSV_ENOMEM, "nsv_server_new_ex: no memory for the server (%zu bytes)", sizeof *s);
        return NULL;
    }
    s->alloc = a;
    s->httpc_hooks = &nsv__httpc_hooks;
#ifdef NSV_WITH_NGHTTP2
    s->h2_hooks = &nsv__h2_server_hooks;
#endif
    s->detail_serial = nsv__detail_serial();
    nsv__options_defaults(s);
    for (int i = 0; i < NSV__MAX_LISTENERS; i++)
        for (int k = 0; k < NSV__MAX_LOOPS; k++)
            s->listeners[i].wfd[k] = -1;
    if (workers >= 0) {
        if (nsv__shard_start(s, workers) != 0) {
            nsv_server_free(s);
            return NULL;
        }
        return s;
    }
    s->loops[0] = nsv__loop_new(s, 0);
    if (s->loops[0] && nsv__http_loop_init(s->loops[0]) != 0) {
        nsv__loop_free(s->loops[0]);
        s->loops[0] = NULL;
    }
    if (!s->loops[0]) {
        nsv__set_detail(NULL, NSV_ENOMEM, "nsv_server_new_ex: cannot create the event loop "
                        "(memory, epoll or eventfd)");
        nsv__free(&a, s);
        return NULL;
    }
    s->nloops = 1;
    return s;
}

nsv_server *nsv_server_new(void) { return nsv_server_new_ex(-1, NULL, NULL); }
nsv_server *nsv_server_new_sharded(int workers) { return nsv_server_new_ex(workers < 0 ? 0 : workers, NULL, NULL); }

void nsv_server_free(nsv_server *s)
{
    if (!s)
        return;
    /* First: once this returns no signal handler can reach the server. */
    if (atomic_load(&s->signal_regs))
        nsv__signal_forget(s);
    atomic_store(&s->stop, 1);
    if (s->sharded)
        nsv__shard_stop(s);
    /* Name lookups post back to a loop: let them finish first (bounded). */
    for (int i = 0; i < 10000 && atomic_load(&s->resolvers) > 0; i++)
        usleep(1000);
    for (int i = 0; i < s->nlisteners; i++)
        close_listener(s, i);
    for (int i = 0; i < s->nloops; i++) {
        nsv__gzip_loop_free(s->loops[i]);
        nsv__access_loop_free(s->loops[i]);
        nsv__loop_free(s->loops[i]);
    }
    nsv__router_free(s->router);
    nsv__gzip_server_free(s);
    nsv__static_free(s);
    nsv__tls_server_free(s);
    for (int i = 0; i < s->nlisteners; i++) /* after the loops: their connections may still point at it */
        if (s->listeners[i].edge) {
            nsv__edge_free(s, s->listeners[i].edge);
            s->listeners[i].edge = NULL;
        }
    nsv__alloc a = s->alloc;
    nsv__free(&a, s);
}

static int open_listener(nsv_server *s, const char *host, size_t hlen, int port, int reuseport,
                         int *out_port)
{
    char h[256], p[8];
    if (hlen >= sizeof h)
        return nsv__set_detail(s, NSV_EURL, "host too long");
    memcpy(h, host, hlen);
    h[hlen] = 0;
    snprintf(p, sizeof p, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV}, *res = NULL;
    int gr = getaddrinfo(hlen ? h : NULL, p, &hints, &res);
    if (gr != 0 || !res)
        return nsv__set_detail(s, NSV_EURL, "cannot resolve '%s': %s", h, gai_strerror(gr));
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        freeaddrinfo(res);
        return nsv__set_detail(s, NSV_ESYS, "socket: %s", strerror(errno));
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
        int e = errno;
        freeaddrinfo(res);
        close(fd);
        return nsv__set_detail(s, NSV_ESYS, "setsockopt(SO_REUSEPORT): %s", strerror(e));
    }
    if (res->ai_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, res->ai_addr, res->ai_addrlen) != 0) {
        int e = errno;
        freeaddrinfo(res);
        close(fd);
        if (e == EADDRINUSE)
            return nsv__set_detail(s, NSV_EADDRINUSE, "bind %s:%d: address in use", h, port);
        return nsv__set_detail(s, NSV_ESYS, "bind %s:%d: %s", h, port, strerror(e));
    }
    freeaddrinfo(res);
    if (listen(fd, 4096) != 0) {
        int e = errno;
        close(fd);
        return nsv__set_detail(s, NSV_ESYS, "listen: %s", strerror(e));
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    *out_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                               : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

/* The checks nsv_listen and nsv_listen_fd share: room, state, and a URL of
 * scheme://host:port only. Sets *u and *tcp (a raw TCP scheme); TLS URLs
 * have the server's TLS set up here, before any socket exists. */
static int check_listen_url(nsv_server *s, const char *url, size_t len, nsv_url *u, int *tcp)
{
    if (s->nlisteners >= NSV__MAX_LISTENERS)
        return nsv__set_detail(s, NSV_ERANGE, "too many listeners");
    if (atomic_load(&s->draining) || atomic_load(&s->stop))
        return NSV_ESTOPPED;
    int shown = (int)(len > 200 ? 200 : len);
    if (nsv_url_parse(url, len, u) != 0)
        return nsv__set_detail(s, NSV_EURL, "malformed URL '%.*s'", shown, url);
    /* A listener is scheme://host:port; anything more would be ignored. */
    size_t auth = (size_t)u->scheme_len + 3;
    if (memchr(url + auth, '@', u->path_off - auth))
        return nsv__set_detail(s, NSV_EURL, "listen URL '%.*s': user info (user@) is not allowed",
                               shown, url);
    if (u->path_len > 1 || (u->path_len == 1 && url[u->path_off] != '/'))
        return nsv__set_detail(s, NSV_EURL,
                               "listen URL '%.*s': a listener has no path ('%.*s'); "
                               "use scheme://host:port, routes select paths",
                               shown, url, (int)(u->path_len > 100 ? 100 : u->path_len), url + u->path_off);
    if ((size_t)u->path_off + u->path_len < len)
        return nsv__set_detail(s, NSV_EURL, "listen URL '%.*s': a query or fragment is not allowed",
                               shown, url);
    const char *sc = url + u->scheme_off;
    int http = (u->scheme_len == 4 && nsv__strncaseeq(sc, "http", 4)) ||
               (u->scheme_len == 2 && nsv__strncaseeq(sc, "ws", 2)) ||
               (u->scheme_len == 5 && nsv__strncaseeq(sc, "https", 5)) ||
               (u->scheme_len == 3 && nsv__strncaseeq(sc, "wss", 3));
    *tcp = u->scheme_len == 3 && (nsv__strncaseeq(sc, "tcp", 3) || nsv__strncaseeq(sc, "tls", 3));
    if (!http && !*tcp)
        return nsv__set_detail(s, NSV_EURL, "unsupported scheme '%.*s'", (int)u->scheme_len, sc);
    if (u->is_tls) { /* NSV_ENOTSUP without TLS; NSV_ETLS for bad keys, before any socket */
        int r = nsv__tls_server_init(s);
        if (r < 0)
            return r;
    }
    if (u->port < 0 || u->port > 65535)
        return nsv__set_detail(s, NSV_EURL, "bad port");
    return 0;
}

/* Make listener `id` (== s->nlisteners) live on every loop. */
static int add_listener(nsv_server *s, int id)
{
    s->nlisteners++;
    for (int i = 0; i < s->nloops; i++)
        if (nsv__loop_add_listener(s->loops[i], id) != 0) {
            int e = errno;
            close_listener(s, id);
            s->nlisteners--;
            return nsv__set_detail(s, NSV_ESYS, "epoll_ctl: %s", strerror(e));
        }
    return id;
}

static int listen_url(nsv_server *s, const char *url, size_t len)
{
    nsv_url u;
    int tcp = 0;
    int r = check_listen_url(s, url, len, &u, &tcp);
    if (r < 0)
        return r;
    if (tcp && u.port == 0 && !memchr(url, ']', len) && !memchr(url + u.host_off + u.host_len, ':', len - u.host_off - u.host_len))
        return nsv__set_detail(s, NSV_EURL, "tcp:// needs a port (0 for an ephemeral one)");
    int port = 0;
    /* Sharded servers give each worker its own SO_REUSEPORT socket so the
     * kernel spreads connections, unless hand-off from one acceptor is chosen. */
    int per_worker = s->sharded && !s->shard_accept && s->nloops > 1;
    int fd = open_listener(s, url + u.host_off, u.host_len, u.port, per_worker || s->reuseport, &port);
    if (fd < 0)
        return fd;
    int id = s->nlisteners;
    nsv__listener *L = &s->listeners[id];
    L->wfd[0] = fd;
    L->port = port;
    L->proto = tcp ? &nsv__proto_tcp : &nsv__proto_http;
    L->tls = !u.is_tls ? NSV__TLS_NONE : tcp ? NSV__TLS_RAW : NSV__TLS_HTTP;
    L->http2 = tcp ? 0 : (int)s->http2;
    L->handoff = 0;
    for (int k = 1; per_worker && k < s->nloops; k++) {
        int p2 = 0;
        L->wfd[k] = open_listener(s, url + u.host_off, u.host_len, port, 1, &p2);
        if (L->wfd[k] < 0) {
            int err = L->wfd[k];
            L->wfd[k] = -1;
            close_listener(s, id);
            return err;
        }
    }
    return add_listener(s, id);
}

int nsv_listen(nsv_server *s, const char *url, size_t len)
{
    if (!s || !url)
        return NSV_EINVAL;
    int r = nsv__setup_begin(s, "nsv_listen", "add listeners");
    if (r)
        return r;
    r = listen_url(s, url, len);
    nsv__setup_end(s);
    return r;
}

/* The socket checks of nsv_listen_fd; *port gets the bound port (0 for AF_UNIX). */
static int check_listen_socket(nsv_server *s, int fd, int *port)
{
    int v = 0;
    socklen_t vl = sizeof v;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &vl) != 0) {
        int e = errno;
        if (e == ENOTSOCK)
            return nsv__set_detail(s, NSV_EINVAL, "nsv_listen_fd: fd %d is not a socket", fd);
        return nsv__set_detail(s, NSV_EINVAL, "nsv_listen_fd: fd %d: %s", fd, strerror(e));
    }
    if (v != SOCK_STREAM)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_listen_fd: fd %d is not a stream socket (SO_TYPE %d; "
                               "SOCK_STREAM is %d)", fd, v, SOCK_STREAM);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    memset(&ss, 0, sizeof ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_listen_fd: getsockname(fd %d): %s", fd, strerror(errno));
    if (ss.ss_family == AF_INET6)
        *port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    else if (ss.ss_family == AF_INET)
        *port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    else if (ss.ss_family == AF_UNIX)
        *port = 0;
    else
        return nsv__set_detail(s, NSV_EINVAL, "nsv_listen_fd: fd %d has address family %d; AF_INET, "
                               "AF_INET6 or AF_UNIX is needed", fd, (int)ss.ss_family);
    v = 0;
    vl = sizeof v;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &vl) != 0 || !v)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_listen_fd: fd %d is not listening (bind it and "
                               "call listen() first)", fd);
    return 0;
}

int nsv_listen_fd(nsv_server *s, const char *url, size_t len, int fd)
{
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_listen_fd: srv is NULL");
    if (!url)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_listen_fd: url is NULL");
    if (fd < 0)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_listen_fd: fd is %d; must be >= 0", fd);
    int r = nsv__setup_begin(s, "nsv_listen_fd", "add listeners");
    if (r)
        return r;
    nsv_url u;
    int tcp = 0, port = 0;
    r = check_listen_url(s, url, len, &u, &tcp);
    if (r >= 0)
        r = check_listen_socket(s, fd, &port);
    if (r >= 0 && u.port != 0 && u.port != port)
        r = nsv__set_detail(s, NSV_EINVAL, "nsv_listen_fd: the URL names port %d but fd %d is bound to "
                            "port %d (use port 0 to take the socket's)", u.port, fd, port);
    int fl = r >= 0 ? fcntl(fd, F_GETFL) : 0, fdfl = r >= 0 ? fcntl(fd, F_GETFD) : 0;
    if (r >= 0 && (fl < 0 || fdfl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0 ||
                   fcntl(fd, F_SETFD, fdfl | FD_CLOEXEC) != 0))
        r = nsv__set_detail(s, NSV_ESYS, "nsv_listen_fd: fcntl(fd %d): %s", fd, strerror(errno));
    if (r >= 0) {
        int id = s->nlisteners;
        nsv__listener *L = &s->listeners[id];
        L->wfd[0] = fd;
        L->port = port;
        L->proto = tcp ? &nsv__proto_tcp : &nsv__proto_http;
        L->tls = !u.is_tls ? NSV__TLS_NONE : tcp ? NSV__TLS_RAW : NSV__TLS_HTTP;
        L->http2 = tcp ? 0 : (int)s->http2;
        /* One socket for every worker: worker 0 accepts and deals them out. */
        L->handoff = s->sharded && s->nloops > 1;
        r = nsv__loop_add_listener(s->loops[0], id) != 0 ? -1 : 0;
        if (r != 0) {
            int e = errno;
            L->wfd[0] = -1; /* failure leaves fd to the caller, as it was */
            fcntl(fd, F_SETFL, fl);
            fcntl(fd, F_SETFD, fdfl);
            r = nsv__set_detail(s, NSV_ESYS, "nsv_listen_fd: epoll_ctl(fd %d): %s", fd, strerror(e));
        } else {
            s->nlisteners++;
            r = id;
        }
    }
    nsv__setup_end(s);
    return r;
}

int nsv_listener_port(nsv_server *s, int id)
{
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_listener_port: srv is NULL");
    if (id < 0 || id >= s->nlisteners)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_listener_port: listener %d does not exist (%d listening)",
                               id, s->nlisteners);
    return s->listeners[id].port;
}

int nsv_route(nsv_server *s, const char *method, size_t mlen, const char *pattern, size_t plen,
              int32_t id, uint32_t flags)
{
    if (!s || !method || !pattern || id < 0)
        return NSV_EINVAL;
    int ml = (int)(mlen > 64 ? 64 : mlen), pl = (int)(plen > 200 ? 200 : plen);
    const char *why;
    if (nsv__router_check(method, mlen, flags, &why)) {
        uint32_t unknown = flags & ~(uint32_t)(NSV_ROUTE_WEBSOCKET | NSV_ROUTE_STREAM_BODY);
        char up[65];
        int lower = 0;
        for (int i = 0; i < ml; i++) {
            up[i] = method[i] >= 'a' && method[i] <= 'z' ? (char)(method[i] - 'a' + 'A') : method[i];
            lower |= up[i] != method[i];
        }
        up[ml] = 0;
        if (lower && mlen <= 64 && !nsv__router_check(up, mlen, flags, NULL))
            return nsv__set_detail(s, NSV_EINVAL, "route %.*s %.*s: %s; register \"%s\"", ml, method, pl,
                                   pattern, why, up);
        if (unknown && !nsv__router_check(method, mlen, flags & ~unknown, NULL))
            return nsv__set_detail(s, NSV_EINVAL,
                                   "route %.*s %.*s: unknown route flags 0x%x (known: NSV_ROUTE_WEBSOCKET, NSV_ROUTE_STREAM_BODY)",
                                   ml, method, pl, pattern, (unsigned)unknown);
        return nsv__set_detail(s, NSV_EINVAL, "route %.*s %.*s: %s", ml, method, pl, pattern, why);
    }
    int r = nsv__setup_begin(s, "nsv_route", "add routes");
    if (r)
        return r;
    if (!s->router)
        s->router = nsv__router_new(&s->alloc);
    r = s->router ? nsv__router_add(s->router, method, mlen, pattern, plen, id, flags) : NSV_ENOMEM;
    if (r == 0 && (flags & NSV_ROUTE_STREAM_BODY))
        s->stream_routes = 1;
    nsv__setup_end(s);
    if (r < 0)
        return nsv__set_detail(s, r, "route %.*s %.*s: %s", ml, method, pl, pattern, nsv_strerror(r));
    return NSV_OK;
}

int nsv_set_callback(nsv_server *s, nsv_event_fn fn, void *ud)
{
    if (!s)
        return NSV_EINVAL;
    int r = nsv__setup_begin(s, "nsv_set_callback", "set the callback");
    if (r)
        return r;
    s->cb_ud = ud;
    s->cb = fn;
    nsv__setup_end(s);
    return NSV_OK;
}

int nsv_stop(nsv_server *s)
{
    if (!s) /* signal handlers call this: no printf */
        return nsv__set_detail_text(NULL, NSV_EINVAL, "nsv_stop: srv is NULL");
    atomic_store(&s->stop, 1);
    return nsv_wakeup(s);
}

int nsv_wakeup(nsv_server *s)
{
    if (!s)
        return nsv__set_detail_text(NULL, NSV_EINVAL, "nsv_wakeup: srv is NULL");
    for (int i = 0; i < s->nloops; i++)
        nsv__loop_wake(s->loops[i]); /* write(2): async-signal-safe */
    if (s->sharded) {
        char x = 1;
        ssize_t w = write(s->notify[1], &x, 1);
        (void)w;
        /* Per-worker pollers sleep on a condition variable, which a signal
         * handler must not touch (glibc's broadcast takes an internal lock
         * the interrupted thread may hold): the worker, woken above,
         * broadcasts for us (shard.c). */
        for (int i = 0; i < s->nloops; i++) {
            atomic_store(&s->loops[i]->wake_pollers, 1);
            nsv__loop_wake(s->loops[i]);
        }
    }
    return NSV_OK;
}

int nsv_drain_start(nsv_server *s, int timeout_ms)
{
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_drain: srv is NULL");
    if (atomic_exchange(&s->drain_claimed, 1))
        return NSV_OK;
    /* The deadline first: a worker that sees `draining` must not read 0
     * and close everything at once. */
    s->drain_total = timeout_ms < 0 ? 0 : timeout_ms;
    s->drain_deadline = nsv_millis() + s->drain_total;
    atomic_store(&s->draining, 1);
    for (int i = 0; i < s->nlisteners; i++)
        close_listener(s, i);
    return nsv_wakeup(s);
}

static int loop_step(nsv__loop *l, int timeout_ms)
{
    nsv__loop_turn(l); /* output held for pipelined answers goes now */
    nsv__cmd_run(l); /* name lookups that finished */
    nsv__loop_flush_dirty(l);
    /* Parsing buffered (pipelined) requests may have queued events: then
     * only look for I/O, do not sleep, and not on every call (a few
     * batches may go by without an epoll_wait; output is still flushed). */
    if (l->events.count && l->io_skips < 4) {
        l->io_skips++;
        nsv__drain_check(l); /* a reply may have closed a drain's last connection */
        return 0;
    }
    l->io_skips = 0;
    /* Before sleeping: a drain whose last connection closed outside the
     * poll (a reply from the host) is over now, and no I/O may ever come
     * to wake a poll without a timeout. */
    nsv__drain_check(l);
    if (atomic_load(&l->srv->stop))
        return 0;
    int r = nsv__loop_run_once(l, l->events.count ? 0 : timeout_ms);
    nsv__cmd_run(l); /* what woke the poll (a wakeup's event) goes out with this batch */
    nsv__drain_check(l);
    return r;
}

int nsv_poll(nsv_server *s, nsv_event *evs, int max, char *arena, size_t cap, int timeout_ms)
{
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_poll: srv is NULL");
    if (max < 0)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_poll: max_events is %d; must be >= 0", max);
    if (max > 0 && !evs)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_poll: events is NULL with max_events %d", max);
    if (max > 0 && !arena)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_poll: arena is NULL with max_events %d", max);
    if (s->sharded) {
        uint64_t mark = nsv__detail_mark();
        int n = nsv__shard_poll(s, evs, max, arena, cap, timeout_ms);
        if (n == NSV_ENOBUFS)
            nsv__set_detail(s, n, "nsv_poll: the next event needs %lld arena bytes; arena_cap is %zu",
                            (long long)nsv__shard_need(s), cap);
        else if (n == NSV_ESTOPPED)
            nsv__set_detail_since(s, mark, n, "nsv_poll: the server is stopped (nsv_stop or a finished drain)");
        return n;
    }
    nsv__loop *l = s->loops[0];
    if (l->events.count == 0) {
        if (atomic_load(&s->stop)) {
            nsv__loop_flush_dirty(l); /* replies made before the stop still go out */
            return nsv__set_detail(s, NSV_ESTOPPED, "nsv_poll: the server is stopped (nsv_stop or a "
                                   "finished drain)");
        }
        int r = loop_step(l, timeout_ms);
        if (r < 0)
            return nsv__set_detail(s, r, "nsv_poll: epoll_wait: %s", strerror(errno));
    } else {
        loop_step(l, 0);
    }
    size_t aoff = 0;
    int n = nsv__evq_copy_out(l, evs, max, arena, cap, &aoff);
    if (n == NSV_ENOBUFS)
        nsv__set_detail(s, n, "nsv_poll: the next event needs %lld arena bytes; arena_cap is %zu",
                        (long long)nsv__evq_need(l), cap);
    return n;
}

int64_t nsv_poll_need(nsv_server *s)
{
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_poll_need: srv is NULL");
    if (s->sharded) {
        return nsv__shard_need(s);
    }
    return nsv__evq_need(s->loops[0]);
}

int nsv_fd(nsv_server *s)
{
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_fd: srv is NULL");
    if (s->sharded) {
        return nsv__shard_fd(s);
    }
    return nsv__loop_fd(s->loops[0]);
}

int nsv_run(nsv_server *s)
{
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_run: srv is NULL");
    if (s->sharded) {
        return nsv__shard_run(s);
    }
    nsv__loop *l = s->loops[0];
    while (!atomic_load(&s->stop)) {
        int r = loop_step(l, 1000);
        if (r < 0)
            return nsv__set_detail(s, r, "nsv_run: epoll_wait: %s", strerror(errno));
    }
    return NSV_OK;
}

int nsv_drain(nsv_server *s, int timeout_ms)
{
    int r = nsv_drain_start(s, timeout_ms);
    if (r)
        return r;
    if (s->sharded) {
        return nsv__shard_drain_wait(s);
    }
    nsv__loop *l = s->loops[0];
    while (!atomic_load(&s->stop))
        loop_step(l, 50);
    return NSV_OK;
}
