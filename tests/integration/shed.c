/* shed.c - shedding at NSV_OPT_MAX_CONNS (NSV_OPT_SHED): a connection
 * accepted at the limit closes the idle keep-alive connection idle longest
 * (even one younger than the slow clients), then the one longest inside an
 * unfinished request head, so a normal client is answered while 30
 * slowloris clients hold the server; connections that sent nothing (or not
 * their PROXY header) are inside their first head from accept, the
 * earliest closed first; NSV_OPT_SHED 0 keeps the 503; a
 * request at the host, a streamed reply, a streamed request body, an
 * unsent reply, a WebSocket, raw TCP and an outbound connection are never
 * closed for room (the newcomer gets the 503); the same on sharded servers
 * (SO_REUSEPORT workers and the single acceptor that hands sockets out).
 * Also the loop's counters: timeouts by kind, bytes in and out, output and
 * events queued. Counter checks skip while nsv_metrics says NSV_ENOTSUP.
 * Every wait is bounded in count and time. */
#define NSVNET_NO_BUFFERS
#include "nsvnet.h"
#include "tap.h"
#include <errno.h>
#include <stdlib.h>

#define MAXC 20
#define R_GET 1
#define R_WS 2
#define R_UP 3

static nsv_event evs[256];
static char arena[1 << 20];

/* Events polled and not yet taken by the test. */
static struct {
    int n;
    nsv_event ev[1024];
    int taken[1024];
} got;

static void pump(nsv_server *s, int ms)
{
    int n = nsv_poll(s, evs, 256, arena, sizeof arena, ms);
    for (int i = 0; i < n && got.n < 1024; i++) {
        got.taken[got.n] = 0;
        got.ev[got.n++] = evs[i];
    }
}

/* The first untaken event of type (of conn, unless 0), polling up to
 * `tries` times; 1 and *out, or 0. */
static int take(nsv_server *s, uint32_t type, uint64_t conn, nsv_event *out, int tries)
{
    for (int t = 0; t <= tries; t++) {
        for (int i = 0; i < got.n; i++)
            if (!got.taken[i] && got.ev[i].type == type && (!conn || got.ev[i].conn == conn)) {
                got.taken[i] = 1;
                if (out)
                    *out = got.ev[i];
                return 1;
            }
        if (t < tries)
            pump(s, 10);
    }
    return 0;
}

static void forget(void) { got.n = 0; }

static void settle(nsv_server *s, int polls)
{
    for (int i = 0; i < polls; i++)
        pump(s, 2);
}

/* The server closed fd: EOF or a reset is waiting. */
static int gone(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0)
        return 0;
    char c;
    ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

static int wait_gone(nsv_server *s, int fd, int tries)
{
    for (int i = 0; i < tries; i++) {
        if (gone(fd))
            return 1;
        pump(s, 5);
    }
    return gone(fd);
}

/* Reads fd (polling s meanwhile) until buf holds `stop`, EOF or 300 rounds. */
static int read_until(nsv_server *s, int fd, char *buf, size_t cap, const char *stop)
{
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < 300 && n < cap - 1; i++) {
        pump(s, 2);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 5) > 0) {
            ssize_t r = read(fd, buf + n, cap - 1 - n);
            if (r <= 0)
                break;
            n += (size_t)r;
            buf[n] = 0;
            if (stop && strstr(buf, stop))
                break;
        }
    }
    return (int)n;
}

static void skip(const char *why)
{
    printf("ok %d # SKIP %s\n", ++tap_n, why);
}

/* Counter checks: skipped while nsv_metrics is not there. */
static int metrics_of(nsv_server *s, uint64_t *m)
{
    memset(m, 0, sizeof(uint64_t) * NSV_M_COUNT);
    int r = nsv_metrics(s, m, NSV_M_COUNT);
    if (r == NSV_ENOTSUP)
        return 0;
    return r >= 0;
}

#define METRIC(s, id, want, what)                                                   \
    do {                                                                            \
        uint64_t m_[NSV_M_COUNT];                                                   \
        if (metrics_of((s), m_))                                                    \
            is_int(m_[id], (want), "%s", what);                                     \
        else                                                                        \
            skip("nsv_metrics is not implemented in this build: " what);            \
    } while (0)

static nsv_server *server(int workers, int shed, int max, int *port)
{
    nsv_server *s = workers ? nsv_server_new_sharded(workers) : nsv_server_new();
    nsv_set_int(s, NSV_OPT_MAX_CONNS, max);
    nsv_set_int(s, NSV_OPT_SHED, shed);
    nsv_route(s, "GET", 3, "/x", 2, R_GET, 0);
    nsv_route(s, "GET", 3, "/ws", 3, R_WS, NSV_ROUTE_WEBSOCKET);
    nsv_route(s, "POST", 4, "/up", 3, R_UP, NSV_ROUTE_STREAM_BODY);
    http_listen(s, port);
    return s;
}

static void server_free(nsv_server *s)
{
    nsv_stop(s);
    nsv_server_free(s);
    forget();
}

/* A slow client: the start of a head, never its end. */
static int slowloris(nsv_server *s, int port)
{
    int fd = client(port);
    sends(fd, "GET /x HTTP/1.1\r\nHost: t\r\nX-Slow: ");
    settle(s, 3);
    usleep(3000); /* apart by more than the deadlines' millisecond */
    return fd;
}

/* A request answered "ok": the connection stays as an idle keep-alive one.
 * 1 when the client read the answer. */
static int answered(nsv_server *s, int fd)
{
    sends(fd, "GET /x HTTP/1.1\r\nHost: t\r\n\r\n");
    nsv_event ev;
    if (!take(s, NSV_EV_REQUEST, 0, &ev, 200))
        return 0;
    nsv_reply(s, ev.conn, 200, NULL, 0, "ok", 2);
    char buf[512];
    read_until(s, fd, buf, sizeof buf, "\r\n\r\nok");
    return strncmp(buf, "HTTP/1.1 200", 12) == 0 && strstr(buf, "\r\n\r\nok") != NULL;
}

static int idle_client(nsv_server *s, int port)
{
    int fd = client(port);
    int ok_ = answered(s, fd);
    usleep(3000);
    return ok_ ? fd : -1;
}

static int open_count(const int *fds, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += !gone(fds[i]);
    return k;
}

/* Idle keep-alive connections go first, oldest idle first, even when they
 * are younger than the slow ones; then the slow ones, longest waiting
 * first; a normal client is answered throughout. */
static void single_loop(void)
{
    int port;
    nsv_server *s = server(0, 1, MAXC, &port);
    int slow[30], idle[5];
    for (int i = 0; i < 10; i++)
        slow[i] = slowloris(s, port);
    int idle_ok = 1;
    for (int i = 0; i < 5; i++)
        idle_ok &= (idle[i] = idle_client(s, port)) >= 0;
    ok(idle_ok, "5 keep-alive clients answered, now idle");
    for (int i = 10; i < 15; i++)
        slow[i] = slowloris(s, port);
    is_int(nsv_get_int(s, NSV_OPT_CONNECTIONS), MAXC, "10 slow, 5 idle and 5 slow connections: at max_conns");
    is_int(open_count(slow, 15) + open_count(idle, 5), 20, "none closed yet");

    int order = 1, slow_kept = 1;
    for (int i = 0; i < 5; i++) {
        slow[15 + i] = client(port);
        sends(slow[15 + i], "GET /x HTTP/1.1\r\nHost: t\r\nX-Slow: ");
        order &= wait_gone(s, idle[i], 200);
        order &= open_count(idle + i + 1, 4 - i) == 4 - i;
        slow_kept &= open_count(slow, 15) == 15;
        settle(s, 3);
        usleep(3000);
    }
    ok(order, "each new connection closed the idle keep-alive one idle longest");
    ok(slow_kept, "no slow client was closed while idle ones were left");

    order = 1;
    for (int i = 0; i < 10; i++) {
        slow[20 + i] = client(port);
        sends(slow[20 + i], "GET /x HTTP/1.1\r\nHost: t\r\nX-Slow: ");
        order &= wait_gone(s, slow[i], 200);
        order &= open_count(slow + i + 1, 19 - i) == 19 - i;
        settle(s, 3);
        usleep(3000);
    }
    ok(order, "then each closed the slow client inside its head longest");

    int fd = client(port);
    ok(answered(s, fd), "a normal client is answered while 30 slow clients try to hold the server");
    ok(gone(slow[10]), "room for it was made by closing the oldest slow client left");
    is_int(open_count(slow + 11, 19), 19, "the other slow clients stay");
    is_int(nsv_get_int(s, NSV_OPT_CONNECTIONS), MAXC, "connections stay at max_conns");
    METRIC(s, NSV_M_CONNS_EVICTED, 16, "16 connections closed for room (conns_evicted)");
    METRIC(s, NSV_M_CONNS_REFUSED, 0, "none refused (conns_refused)");
    METRIC(s, NSV_M_CONNS_ACCEPTED, 36, "36 accepted (conns_accepted)");
    close(fd);
    for (int i = 0; i < 30; i++)
        close(slow[i]);
    for (int i = 0; i < 5; i++)
        close(idle[i]);
    server_free(s);
}

/* A connection that has sent nothing, or (proxy) not its PROXY header, is
 * inside its first head from its accept: closed for room, the earliest
 * accepted first, before a slow client accepted later. */
static void silent(int proxy)
{
    int port;
    nsv_server *s = server(0, 1, 5, &port);
    const char *w = proxy ? "PROXY header not sent" : "nothing sent";
    if (proxy) {
        int r = nsv_listener_set_int(s, 0, NSV_LOPT_PROXY_PROTOCOL, NSV_PROXY_V1);
        if (r == NSV_ENOTSUP) {
            skip("NSV_LOPT_PROXY_PROTOCOL is not implemented in this build");
            server_free(s);
            return;
        }
    }
    const char *pre = proxy ? "PROXY TCP4 192.0.2.1 127.0.0.1 1000 80\r\n" : "";
    int q[5];
    for (int i = 0; i < 3; i++) {
        q[i] = client(port);
        settle(s, 3);
        usleep(3000);
    }
    for (int i = 3; i < 5; i++) { /* slow clients, accepted after the silent ones */
        q[i] = client(port);
        sends(q[i], pre);
        sends(q[i], "GET /x HTTP/1.1\r\nHost: t\r\nX-Slow: ");
        settle(s, 3);
        usleep(3000);
    }
    is_int(nsv_get_int(s, NSV_OPT_CONNECTIONS), 5, "%s: 3 such and 2 slow connections at max_conns 5", w);
    /* The new clients' requests stay at the host until all three came, so
     * no room comes back by itself. */
    int order = 1, answered_all = 1, fds[3];
    uint64_t ids[3] = {0};
    for (int i = 0; i < 3; i++) {
        fds[i] = client(port);
        char req[256];
        snprintf(req, sizeof req, "%sGET /x HTTP/1.1\r\nHost: t\r\n\r\n", pre);
        sends(fds[i], req);
        nsv_event ev;
        answered_all &= take(s, NSV_EV_REQUEST, 0, &ev, 200);
        ids[i] = ev.conn;
        order &= gone(q[i]) && open_count(q + i + 1, 4 - i) == 4 - i;
    }
    for (int i = 0; i < 3; i++) {
        nsv_reply(s, ids[i], 200, NULL, 0, "ok", 2);
        char buf[512];
        read_until(s, fds[i], buf, sizeof buf, "\r\n\r\nok");
        answered_all &= strstr(buf, "\r\n\r\nok") != NULL;
        close(fds[i]);
    }
    ok(answered_all, "%s: 3 new clients answered at max_conns", w);
    ok(order, "%s: each closed the one accepted earliest, before the slow ones", w);
    METRIC(s, NSV_M_CONNS_EVICTED, 3, "3 evicted (conns_evicted)");
    for (int i = 0; i < 5; i++)
        close(q[i]);
    server_free(s);
}

/* NSV_OPT_SHED 0: the newcomer gets the 503, the idle ones stay. */
static void shed_off(void)
{
    int port;
    nsv_server *s = server(0, 0, 3, &port);
    int idle[3], all = 1;
    for (int i = 0; i < 3; i++)
        all &= (idle[i] = idle_client(s, port)) >= 0;
    ok(all, "shed 0: 3 idle keep-alive connections at max_conns 3");
    int fd = client(port);
    char buf[512];
    read_until(s, fd, buf, sizeof buf, NULL);
    ok(strncmp(buf, "HTTP/1.1 503", 12) == 0, "shed 0: the fourth connection is refused with a 503");
    settle(s, 5);
    is_int(open_count(idle, 3), 3, "shed 0: the idle connections stay");
    ok(answered(s, idle[0]), "shed 0: and still serve requests");
    METRIC(s, NSV_M_CONNS_REFUSED, 1, "shed 0: counted in conns_refused");
    METRIC(s, NSV_M_CONNS_EVICTED, 0, "shed 0: nothing evicted");
    close(fd);
    for (int i = 0; i < 3; i++)
        close(idle[i]);
    server_free(s);
}

static const char ws_req[] = "GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

/* A masked text frame "hello". */
static void ws_hello(int fd)
{
    unsigned char f[11] = {0x81, 0x85, 1, 2, 3, 4};
    const char *p = "hello";
    for (int i = 0; i < 5; i++)
        f[6 + i] = (unsigned char)(p[i] ^ f[2 + i % 4]);
    sendn(fd, f, sizeof f);
}

static int listen_plain(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 8) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) != 0)
        return -1;
    *port = ntohs(a.sin_port);
    return fd;
}

/* Drains fd (polling s): at least min bytes, then what follows at once.
 * Returns the bytes read (fewer than min when nothing came for a while). */
static size_t drain(nsv_server *s, int fd, size_t min)
{
    static char buf[1 << 16];
    size_t total = 0;
    for (int idle = 0; idle < (total < min ? 300 : 3);) {
        pump(s, 0);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 5) <= 0) {
            idle++;
            continue;
        }
        ssize_t r = read(fd, buf, sizeof buf);
        if (r <= 0)
            break;
        total += (size_t)r;
        idle = 0;
    }
    return total;
}

/* Connections that are busy are never closed for room: with only those
 * open at max_conns, the newcomer is refused and each still works. */
static void never_evicted(int workers)
{
    enum { BIG = 24 << 20 };
    int port;
    nsv_server *s = server(workers, 1, 7, &port);
    nsv_set_int(s, NSV_OPT_MAX_OUTPUT, (int64_t)BIG * 2);
    int tl = nsv_listen(s, "tcp://127.0.0.1:0", 17);
    int tport = nsv_listener_port(s, tl);
    int oport = 0, ofd = listen_plain(&oport);
    const char *w = workers ? "sharded: " : "";
    nsv_event ev;

    int pend = client(port); /* a request at the host */
    sends(pend, "GET /x HTTP/1.1\r\nHost: t\r\n\r\n");
    ok(take(s, NSV_EV_REQUEST, 0, &ev, 200), "%sa request at the host", w);
    uint64_t pend_id = ev.conn;

    int strm = client(port); /* a streamed reply in progress */
    sends(strm, "GET /x HTTP/1.1\r\nHost: t\r\n\r\n");
    ok(take(s, NSV_EV_REQUEST, 0, &ev, 200), "%sa request for a streamed reply", w);
    uint64_t strm_id = ev.conn;
    nsv_reply_start(s, strm_id, 200, NULL, 0);
    nsv_send_chunk(s, strm_id, "part1", 5);

    int up = client(port); /* a streamed request body, 10 of 100 bytes sent */
    sends(up, "POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n0123456789");
    ok(take(s, NSV_EV_REQUEST, 0, &ev, 200) && (ev.flags & NSV_EVF_STREAM_BODY), "%sa streamed body", w);
    uint64_t up_id = ev.conn;

    int big = client(port); /* answered, but its reply is not read */
    sends(big, "GET /x HTTP/1.1\r\nHost: t\r\n\r\n");
    ok(take(s, NSV_EV_REQUEST, 0, &ev, 200), "%sa request for a large reply", w);
    char *body = malloc(BIG);
    memset(body, 'b', BIG);
    is_int(nsv_reply(s, ev.conn, 200, NULL, 0, body, BIG), NSV_OK, "%sa %d MiB reply the client does not read",
           w, BIG >> 20);
    free(body);

    int ws = client(port);
    sends(ws, ws_req);
    ok(take(s, NSV_EV_WS_OPEN, 0, &ev, 200), "%sa WebSocket", w);
    uint64_t ws_id = ev.conn;
    char buf[4096];
    read_until(s, ws, buf, sizeof buf, "\r\n\r\n");

    int raw = client(tport);
    ok(take(s, NSV_EV_TCP_OPEN, 0, &ev, 200), "%sa raw TCP connection", w);
    uint64_t raw_id = ev.conn;

    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", oport);
    int64_t out_id = nsv_connect(s, url, strlen(url));
    ok(out_id > 0 && take(s, NSV_EV_TCP_CONNECTED, (uint64_t)out_id, NULL, 200), "%san outbound connection", w);
    settle(s, 5);
    is_int(nsv_get_int(s, NSV_OPT_CONNECTIONS), 7, "%sat max_conns 7", w);

    int late = client(port);
    read_until(s, late, buf, sizeof buf, NULL);
    ok(strncmp(buf, "HTTP/1.1 503", 12) == 0, "%sthe eighth connection is refused: nothing may be closed", w);
    METRIC(s, NSV_M_CONNS_EVICTED, 0, "nothing evicted (conns_evicted)");
    METRIC(s, NSV_M_CONNS_REFUSED, 1, "one refused (conns_refused)");

    nsv_reply(s, pend_id, 200, NULL, 0, "ok", 2);
    read_until(s, pend, buf, sizeof buf, "\r\n\r\nok");
    ok(strstr(buf, "\r\n\r\nok") != NULL, "%sthe request at the host is answered", w);
    nsv_send_chunk(s, strm_id, "part2", 5);
    nsv_reply_end(s, strm_id);
    read_until(s, strm, buf, sizeof buf, "0\r\n\r\n");
    ok(strstr(buf, "part1") && strstr(buf, "part2") && strstr(buf, "0\r\n\r\n"), "%sthe streamed reply ends whole", w);
    char rest[91];
    memset(rest, 'r', 90);
    rest[90] = 0;
    sends(up, rest);
    int eof = 0;
    for (int i = 0; i < 20 && !eof; i++)
        if (take(s, NSV_EV_BODY, up_id, &ev, 20))
            eof = (ev.flags & NSV_EVF_EOF) != 0;
    ok(eof, "%sthe streamed body arrives to its end", w);
    ws_hello(ws);
    ok(take(s, NSV_EV_WS_MESSAGE, ws_id, &ev, 200), "%sthe WebSocket still carries messages", w);
    sends(raw, "ping");
    ok(take(s, NSV_EV_TCP_DATA, raw_id, &ev, 200), "%sthe raw TCP connection still carries bytes", w);
    int peer = accept(ofd, NULL, NULL);
    nsv_send(s, (uint64_t)out_id, "out", 3);
    settle(s, 5);
    ok(peer >= 0 && read_all(peer, buf, sizeof buf, 2000, 50) == 3, "%sthe outbound connection still sends", w);
    size_t n = drain(s, big, (size_t)BIG + 1);
    ok(n > (size_t)BIG, "%sthe large reply arrives whole (%zu bytes)", w, n);

    int fds[] = {pend, strm, up, big, ws, raw, late, peer, ofd};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    server_free(s);
}

/* Sharded: each worker makes room among its own connections, so which
 * ones close depends on where the kernel (or the acceptor) put them; a
 * normal client is still answered and a request at the host stays. */
static void sharded(int handoff)
{
    int port;
    nsv_server *s = nsv_server_new_sharded(2);
    nsv_set_int(s, NSV_OPT_MAX_CONNS, MAXC);
    nsv_set_int(s, NSV_OPT_SHARD_ACCEPT, handoff);
    nsv_route(s, "GET", 3, "/x", 2, R_GET, 0);
    http_listen(s, &port);
    const char *w = handoff ? "hand-off" : "reuseport";
    nsv_event ev;
    int pend = client(port);
    sends(pend, "GET /x HTTP/1.1\r\nHost: t\r\n\r\n");
    ok(take(s, NSV_EV_REQUEST, 0, &ev, 200), "%s: a request at the host", w);
    uint64_t pend_id = ev.conn;
    int idle[5], slow[30], all = 1;
    for (int i = 0; i < 5; i++)
        all &= (idle[i] = idle_client(s, port)) >= 0;
    ok(all, "%s: 5 idle keep-alive connections", w);
    for (int i = 0; i < 30; i++)
        slow[i] = slowloris(s, port);
    int fd = client(port);
    ok(answered(s, fd), "%s: a normal client is answered past max_conns", w);
    /* The workers may still be at the last accepts of the other worker. */
    int open_ = 0;
    for (int i = 0; i < 200; i++) {
        open_ = open_count(idle, 5) + open_count(slow, 30);
        if (open_ <= MAXC - 2)
            break;
        pump(s, 5);
    }
    settle(s, 5);
    open_ = open_count(idle, 5) + open_count(slow, 30);
    is_int(open_, MAXC - 2, "%s: 17 idle or slow connections were closed for the 37 that came", w);
    is_int(nsv_get_int(s, NSV_OPT_CONNECTIONS), MAXC, "%s: connections stay at max_conns", w);
    nsv_reply(s, pend_id, 200, NULL, 0, "ok", 2);
    char buf[512];
    read_until(s, pend, buf, sizeof buf, "\r\n\r\nok");
    ok(strstr(buf, "\r\n\r\nok") != NULL, "%s: the request at the host is answered", w);
    METRIC(s, NSV_M_CONNS_EVICTED, 17, "sharded: 17 evicted (conns_evicted)");
    close(fd);
    close(pend);
    for (int i = 0; i < 30; i++)
        close(slow[i]);
    for (int i = 0; i < 5; i++)
        close(idle[i]);
    server_free(s);
}

/* The loop's own counters: timeouts by kind, bytes, queued output and events. */
static void counters(void)
{
    int port;
    nsv_server *s = server(0, 1, 100, &port);
    uint64_t m[NSV_M_COUNT];
    if (!metrics_of(s, m)) {
        skip("nsv_metrics is not implemented in this build: timeouts, bytes, queued output and events");
        server_free(s);
        return;
    }
    nsv_set_int(s, NSV_OPT_REQUEST_TIMEOUT_MS, 200);
    nsv_set_int(s, NSV_OPT_IDLE_TIMEOUT_MS, 200);
    nsv_set_int(s, NSV_OPT_MAX_OUTPUT, 64 << 20);
    static const char head[] = "GET /x HTTP/1.1\r\nHost: t\r\nX-Slow: ";
    int slow = client(port);
    sends(slow, head);
    int idle = idle_client(s, port);
    char buf[4096];
    int n1 = read_until(s, slow, buf, sizeof buf, NULL);
    ok(strncmp(buf, "HTTP/1.1 408", 12) == 0, "an unfinished head gets its 408");
    ok(wait_gone(s, idle, 300), "an idle keep-alive connection is closed at its idle timeout");
    metrics_of(s, m);
    is_int(m[NSV_M_TIMEOUT_REQUEST], 1, "timeout_request counts the 408");
    is_int(m[NSV_M_TIMEOUT_IDLE], 1, "timeout_idle counts the idle one");
    is_int(m[NSV_M_TIMEOUT_OTHER], 0, "timeout_other: none");
    /* idle_client sent one request and read its answer; count the answer
     * from the same request sent again on a connection of our own */
    int fd = client(port);
    static const char req[] = "GET /x HTTP/1.1\r\nHost: t\r\n\r\n";
    sends(fd, req);
    nsv_event ev;
    take(s, NSV_EV_REQUEST, 0, &ev, 200);
    nsv_reply(s, ev.conn, 200, NULL, 0, "ok", 2);
    int n2 = read_until(s, fd, buf, sizeof buf, "\r\n\r\nok");
    metrics_of(s, m);
    is_int(m[NSV_M_BYTES_IN], (sizeof head - 1) + 2 * (sizeof req - 1), "bytes_in: every byte the clients sent");
    is_int(m[NSV_M_BYTES_OUT], n1 + 2 * n2, "bytes_out: every byte they read");
    close(fd);
    close(slow);
    close(idle);

    /* 24 MiB answered to a client that does not read: most of it waits. */
    nsv_set_int(s, NSV_OPT_IDLE_TIMEOUT_MS, 60000);
    fd = client(port);
    sends(fd, req);
    take(s, NSV_EV_REQUEST, 0, &ev, 200);
    size_t big = 24 << 20;
    char *body = malloc(big);
    memset(body, 'q', big);
    nsv_reply(s, ev.conn, 200, NULL, 0, body, big);
    free(body);
    settle(s, 5);
    metrics_of(s, m);
    ok(m[NSV_M_OUTPUT_QUEUED] > 0 && m[NSV_M_OUTPUT_QUEUED] <= big, "output_queued: %llu bytes wait",
       (unsigned long long)m[NSV_M_OUTPUT_QUEUED]);
    size_t n = drain(s, fd, big + 1);
    settle(s, 5);
    metrics_of(s, m);
    ok(n > big, "the client reads the reply");
    is_int(m[NSV_M_OUTPUT_QUEUED], 0, "output_queued: 0 once it is sent");
    close(fd);

    /* Three requests, polled with room for no event: they wait in the queue. */
    settle(s, 5);
    forget();
    int c[3];
    for (int i = 0; i < 3; i++) {
        c[i] = client(port);
        sends(c[i], req);
    }
    for (int i = 0; i < 100; i++) {
        nsv_poll(s, evs, 0, arena, sizeof arena, 5);
        metrics_of(s, m);
        if (m[NSV_M_EVENTS_QUEUED] == 3)
            break;
    }
    is_int(m[NSV_M_EVENTS_QUEUED], 3, "events_queued: 3 requests not polled yet");
    forget();
    pump(s, 0);
    metrics_of(s, m);
    is_int(got.n, 3, "a poll takes them");
    is_int(m[NSV_M_EVENTS_QUEUED], 0, "events_queued: 0 after it");
    for (int i = 0; i < 3; i++)
        close(c[i]);

    /* A large WebSocket frame to an idle socket leaves without the buffer. */
    settle(s, 5);
    metrics_of(s, m);
    uint64_t out0 = m[NSV_M_BYTES_OUT];
    int ws = client(port);
    sends(ws, ws_req);
    take(s, NSV_EV_WS_OPEN, 0, &ev, 200);
    char *frame = calloc(1, 256 << 10);
    nsv_ws_send(s, ev.conn, NSV_WS_BINARY, frame, 256 << 10);
    free(frame);
    n = drain(s, ws, (256 << 10) + 10 + 129); /* a 101 is at least 129 bytes, the frame head 10 */
    metrics_of(s, m);
    is_int(m[NSV_M_BYTES_OUT] - out0, n, "bytes_out: a 101 and a 256 KiB WebSocket frame, as the client read them");
    close(ws);
    server_free(s);
}

/* A sharded server's queue of events, summed over its workers. */
static void counters_sharded(void)
{
    int port;
    nsv_server *s = server(2, 1, 100, &port);
    uint64_t m[NSV_M_COUNT];
    if (!metrics_of(s, m)) {
        skip("nsv_metrics is not implemented in this build: events queued, sharded");
        server_free(s);
        return;
    }
    static const char req[] = "GET /x HTTP/1.1\r\nHost: t\r\n\r\n";
    pump(s, 0); /* the workers start */
    int c[3];
    for (int i = 0; i < 3; i++) {
        c[i] = client(port);
        sends(c[i], req);
    }
    for (int i = 0; i < 200; i++) {
        metrics_of(s, m);
        if (m[NSV_M_EVENTS_QUEUED] >= 3)
            break;
        usleep(5000);
    }
    is_int(m[NSV_M_EVENTS_QUEUED], 3, "sharded: events_queued: 3 requests not polled yet");
    for (int i = 0; i < 20 && got.n < 3; i++)
        pump(s, 10);
    metrics_of(s, m);
    is_int(got.n, 3, "sharded: a poll takes them");
    is_int(m[NSV_M_EVENTS_QUEUED], 0, "sharded: events_queued: 0 after it");
    for (int i = 0; i < 3; i++)
        close(c[i]);
    server_free(s);
}

static void timed(const char *name, void (*fn)(void))
{
    int64_t t0 = nsv_millis();
    fn();
    diag("%s: %lld ms", name, (long long)(nsv_millis() - t0));
}

static void silent_plain(void) { silent(0); }
static void silent_proxy(void) { silent(1); }
static void never_evicted_single(void) { never_evicted(0); }
static void never_evicted_sharded(void) { never_evicted(2); }
static void sharded_reuseport(void) { sharded(0); }
static void sharded_handoff(void) { sharded(1); }

int main(void)
{
    timed("single loop", single_loop);
    timed("silent", silent_plain);
    timed("silent, PROXY", silent_proxy);
    timed("shed 0", shed_off);
    timed("never evicted", never_evicted_single);
    timed("never evicted, sharded", never_evicted_sharded);
    timed("sharded", sharded_reuseport);
    timed("hand-off", sharded_handoff);
    timed("counters", counters);
    timed("counters, sharded", counters_sharded);
    return done_testing();
}
