/* listen_fd.c - nsv_listen_fd adopts a socket the host bound and listens
 * on (IPv4, IPv6, AF_UNIX) and serves requests through it; refuses what is
 * not a listening stream socket, a URL port that differs, a bad scheme,
 * with a detail, leaving the fd to the caller; owns the fd once adopted
 * (closed at free, or when a drain starts, while a copy held elsewhere
 * keeps the socket and its backlog for another server, as in a pre-fork
 * supervisor); sharded servers deal the adopted socket's connections to
 * their workers. NSV_OPT_REUSEPORT lets two servers bind one port. */
#include "tap.h"
#include "nsvnet.h"
#include <nanosrv.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define S(x) x, sizeof(x) - 1

static int detail_has(nsv_server *s, const char *a)
{
    const char *d = nsv_last_error_detail(s);
    int r = d && strstr(d, a);
    if (!r)
        diag("detail: '%s' (wanted '%s')", d ? d : "(null)", a);
    return r;
}

/* A blocking listening socket on 127.0.0.1 (or ::1), port in *port. */
static int tcp_socket(int family, int *port, int do_listen)
{
    int fd = socket(family, SOCK_STREAM, 0);
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t sl;
    if (family == AF_INET6) {
        struct sockaddr_in6 *a = (void *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        sl = sizeof *a;
    } else {
        struct sockaddr_in *a = (void *)&ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        sl = sizeof *a;
    }
    if (fd < 0 || bind(fd, (struct sockaddr *)&ss, sl) != 0 || (do_listen && listen(fd, 64) != 0)) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    *port = ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                     : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

static int client6(int port)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
    a.sin6_addr = in6addr_loopback;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One GET on client socket c answered by s: returns 1 when the body came
 * back; *lid gets the listener of the request, peer its address. */
static int roundtrip(nsv_server *s, int c, int *lid, char *peer, size_t pcap)
{
    sends(c, "GET /fd HTTP/1.1\r\nHost: x\r\n\r\n");
    nsv_event ev;
    if (!wait_event(s, NSV_EV_REQUEST, &ev, 100, 20))
        return 0;
    if (lid)
        *lid = (int)ev.listener;
    if (peer) {
        snprintf(peer, pcap, "%.*s", (int)ev.peer_len, arena + ev.peer_off);
    }
    nsv_reply(s, ev.conn, 200, NULL, 0, "adopted", 7);
    char buf[512];
    read_polling(s, c, buf, sizeof buf, 100, 20, "adopted");
    return strstr(buf, "HTTP/1.1 200") && strstr(buf, "adopted");
}

static void test_adopt_ipv4(void)
{
    nsv_server *s = nsv_server_new();
    int port = 0, fd = tcp_socket(AF_INET, &port, 1);
    ok(fd >= 0, "a listening socket on 127.0.0.1:%d", port);
    int lid = nsv_listen_fd(s, S("http://127.0.0.1:0"), fd);
    ok(lid >= 0, "nsv_listen_fd adopts it (id %d)", lid);
    is_int(nsv_listener_port(s, lid), port, "nsv_listener_port gives the socket's port");
    int fl = fcntl(fd, F_GETFL), fdfl = fcntl(fd, F_GETFD);
    ok(fl >= 0 && (fl & O_NONBLOCK), "the adopted socket is non-blocking");
    ok(fdfl >= 0 && (fdfl & FD_CLOEXEC), "and close-on-exec");
    int c = client(port);
    int got_lid = -1;
    char peer[64] = "";
    ok(roundtrip(s, c, &got_lid, peer, sizeof peer), "a request through the adopted socket is answered");
    is_int(got_lid, lid, "the event names the adopted listener");
    ok(strcmp(peer, "127.0.0.1") == 0, "peer is 127.0.0.1 ('%s')", peer);
    close(c);
    /* A second adopted listener beside one of the library's own. */
    int port2 = 0, fd2 = tcp_socket(AF_INET, &port2, 1);
    char url[64];
    int ul = snprintf(url, sizeof url, "http://127.0.0.1:%d", port2);
    int lid2 = nsv_listen_fd(s, url, (size_t)ul, fd2);
    ok(lid2 > lid, "a URL naming the socket's own port is accepted");
    c = client(port2);
    ok(roundtrip(s, c, &got_lid, NULL, 0) && got_lid == lid2, "the second one serves too");
    close(c);
    nsv_server_free(s);
    errno = 0;
    ok(fcntl(fd, F_GETFD) == -1 && errno == EBADF, "nsv_server_free closed the adopted fd");
    ok(client(port) < 0, "nothing listens on the port any more");
}

static void test_adopt_ipv6(void)
{
    int port = 0, fd = tcp_socket(AF_INET6, &port, 1);
    if (fd < 0) {
        ok(1, "# SKIP no IPv6 loopback here");
        return;
    }
    nsv_server *s = nsv_server_new();
    int lid = nsv_listen_fd(s, S("http://[::1]:0"), fd);
    ok(lid >= 0, "an IPv6 socket is adopted");
    int c = client6(port);
    char peer[64] = "";
    ok(roundtrip(s, c, NULL, peer, sizeof peer), "a request over ::1 is answered");
    ok(strcmp(peer, "::1") == 0, "peer is ::1 ('%s')", peer);
    close(c);
    nsv_server_free(s);
}

static void test_adopt_unix(void)
{
    char path[108];
    snprintf(path, sizeof path, "/tmp/nsv_listen_fd_%d.sock", (int)getpid());
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    ok(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 16) == 0, "a unix socket listens at %s", path);
    nsv_server *s = nsv_server_new();
    is_int(nsv_listen_fd(s, S("http://127.0.0.1:8000"), fd), NSV_EINVAL, "a port in the URL does not fit a unix socket");
    ok(detail_has(s, "bound to port 0"), "detail gives the socket's port");
    int lid = nsv_listen_fd(s, S("http://localhost:0"), fd);
    ok(lid >= 0, "the unix socket is adopted");
    is_int(nsv_listener_port(s, lid), 0, "its port is 0");
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    ok(connect(c, (struct sockaddr *)&a, sizeof a) == 0, "a unix client connects");
    char peer[64] = "x";
    ok(roundtrip(s, c, NULL, peer, sizeof peer), "a request over the unix socket is answered");
    ok(peer[0] == 0, "the peer address is empty ('%s')", peer);
    close(c);
    nsv_server_free(s);
    unlink(path);
}

static void test_errors(void)
{
    nsv_server *s = nsv_server_new();
    is_int(nsv_listen_fd(NULL, S("http://x"), 0), NSV_EINVAL, "NULL server");
    is_int(nsv_listen_fd(s, NULL, 0, 0), NSV_EINVAL, "NULL url");
    ok(detail_has(s, "url is NULL"), "detail says url");
    is_int(nsv_listen_fd(s, S("http://127.0.0.1:0"), -1), NSV_EINVAL, "fd -1");
    ok(detail_has(s, "fd is -1"), "detail says fd");
    int p[2];
    ok(pipe(p) == 0, "a pipe");
    is_int(nsv_listen_fd(s, S("http://127.0.0.1:0"), p[0]), NSV_EINVAL, "a pipe is refused");
    ok(detail_has(s, "is not a socket"), "detail: not a socket");
    close(p[0]);
    close(p[1]);
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    is_int(nsv_listen_fd(s, S("http://127.0.0.1:0"), u), NSV_EINVAL, "a UDP socket is refused");
    ok(detail_has(s, "not a stream socket"), "detail: not a stream socket");
    close(u);
    int port = 0, nl = tcp_socket(AF_INET, &port, 0);
    is_int(nsv_listen_fd(s, S("http://127.0.0.1:0"), nl), NSV_EINVAL, "a bound socket without listen() is refused");
    ok(detail_has(s, "not listening"), "detail: not listening");
    int fl = fcntl(nl, F_GETFL);
    ok(fl >= 0 && !(fl & O_NONBLOCK), "the refused fd is open and untouched");
    close(nl);
    int fd = tcp_socket(AF_INET, &port, 1);
    char url[64];
    int ul = snprintf(url, sizeof url, "http://127.0.0.1:%d", port == 65535 ? 1 : port + 1);
    is_int(nsv_listen_fd(s, url, (size_t)ul, fd), NSV_EINVAL, "a URL with another port is refused");
    ok(detail_has(s, "is bound to port"), "detail names the bound port");
    is_int(nsv_listen_fd(s, S("ftp://127.0.0.1:0"), fd), NSV_EURL, "an unknown scheme is refused");
    ok(detail_has(s, "malformed URL"), "detail: the URL");
    is_int(nsv_listen_fd(s, S("http://127.0.0.1:0/path"), fd), NSV_EURL, "a path is refused as by nsv_listen");
    fl = fcntl(fd, F_GETFL);
    ok(fl >= 0 && !(fl & O_NONBLOCK), "after the refusals the fd is still the caller's, blocking");
    int lid = nsv_listen_fd(s, S("http://127.0.0.1:0"), fd);
    ok(lid >= 0, "the same fd is adopted once the URL is right");
    int c = client(port);
    ok(roundtrip(s, c, NULL, NULL, 0), "and serves");
    close(c);
    nsv_drain_start(s, 1000);
    int fd2 = tcp_socket(AF_INET, &port, 1);
    is_int(nsv_listen_fd(s, S("http://127.0.0.1:0"), fd2), NSV_ESTOPPED, "no adoption once draining");
    ok(fcntl(fd2, F_GETFD) >= 0, "the fd refused then is still open");
    close(fd2);
    nsv_server_free(s);
}

/* The pre-fork pattern: a parent holds the socket, two servers adopt
 * copies; one drains (closing its copy), and a connection made after that
 * is served by the other: the socket and its backlog outlive a copy. */
static void test_shared_socket(void)
{
    int port = 0, parent = tcp_socket(AF_INET, &port, 1);
    nsv_server *a = nsv_server_new(), *b = nsv_server_new();
    int fa = dup(parent), fb = dup(parent);
    ok(nsv_listen_fd(a, S("http://127.0.0.1:0"), fa) >= 0, "server a adopts a copy");
    ok(nsv_listen_fd(b, S("http://127.0.0.1:0"), fb) >= 0, "server b adopts a copy");
    is_int(nsv_drain_start(a, 1000), NSV_OK, "a starts draining");
    for (int i = 0; i < 20 && nsv_poll(a, evs, NSVNET_EVS, arena, sizeof arena, 10) >= 0; i++)
        ;
    errno = 0;
    ok(fcntl(fa, F_GETFD) == -1 && errno == EBADF, "a's copy is closed by the drain");
    int c = client(port);
    ok(c >= 0, "the port still accepts (the parent and b hold the socket)");
    ok(roundtrip(b, c, NULL, NULL, 0), "b serves the connection made after a left");
    close(c);
    nsv_server_free(a);
    nsv_server_free(b);
    c = client(port);
    ok(c >= 0, "with both servers freed the parent's socket still queues connections");
    close(c);
    close(parent);
}

static void test_sharded(void)
{
    nsv_server *s = nsv_server_new_sharded(2);
    int port = 0, fd = tcp_socket(AF_INET, &port, 1);
    int lid = nsv_listen_fd(s, S("http://127.0.0.1:0"), fd);
    ok(lid >= 0, "a sharded server adopts a socket");
    int c[4];
    for (int i = 0; i < 4; i++) {
        c[i] = client(port);
        sends(c[i], "GET /s HTTP/1.1\r\nHost: x\r\n\r\n");
    }
    int got = 0, loops = 0;
    for (int t = 0; t < 200 && got < 4; t++) {
        int n = nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, 20);
        for (int i = 0; i < n; i++)
            if (evs[i].type == NSV_EV_REQUEST) {
                got++;
                loops |= 1 << (int)((evs[i].conn >> 24) & 0xff); /* the worker index in a connection id */
                nsv_reply(s, evs[i].conn, 200, NULL, 0, "sharded", 7);
            }
    }
    is_int(got, 4, "four requests through the adopted socket");
    is_int(loops, 3, "both workers got connections (hand-off from worker 0)");
    for (int i = 0; i < 4; i++) {
        char buf[256];
        read_polling(s, c[i], buf, sizeof buf, 100, 20, "sharded");
        ok(strstr(buf, "HTTP/1.1 200") && strstr(buf, "sharded"), "client %d answered", i);
        close(c[i]);
    }
    int port2 = 0, fd2 = tcp_socket(AF_INET, &port2, 1);
    is_int(nsv_listen_fd(s, S("http://127.0.0.1:0"), fd2), NSV_ESTATE, "not once the workers run");
    ok(detail_has(s, "nsv_listen_fd"), "detail names the call");
    close(fd2);
    nsv_server_free(s);
}

static void test_reuseport(void)
{
    is_int(nsv_opt_by_name(S("reuseport")), NSV_OPT_REUSEPORT, "option named reuseport");
    is_int(NSV_OPT_REUSEPORT, 26, "its id is 26");
    nsv_server *a = nsv_server_new(), *b = nsv_server_new(), *c = nsv_server_new();
    is_int(nsv_get_int(a, NSV_OPT_REUSEPORT), 0, "off by default");
    is_int(nsv_set_int(a, NSV_OPT_REUSEPORT, 2), NSV_ERANGE, "2 is out of range");
    is_int(nsv_set_int(a, NSV_OPT_REUSEPORT, 1), NSV_OK, "a: on");
    is_int(nsv_set_int(b, NSV_OPT_REUSEPORT, 1), NSV_OK, "b: on");
    is_int(nsv_get_int(a, NSV_OPT_REUSEPORT), 1, "reads back 1");
    int la = nsv_listen(a, S("http://127.0.0.1:0"));
    int port = nsv_listener_port(a, la);
    char url[64];
    int ul = snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    int lb = nsv_listen(b, url, (size_t)ul);
    ok(lb >= 0, "b binds the same port %d", port);
    is_int(nsv_listen(c, url, (size_t)ul), NSV_EADDRINUSE, "a server without the option cannot");
    /* Connections reach one or the other; each answers what it gets. */
    int served = 0;
    for (int i = 0; i < 8; i++) {
        int k = client(port);
        sends(k, "GET /r HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        nsv_event ev;
        int done = 0;
        for (int t = 0; t < 100 && !done; t++) {
            nsv_server *srv = t % 2 ? b : a;
            int n = nsv_poll(srv, evs, NSVNET_EVS, arena, sizeof arena, 10);
            for (int j = 0; j < n; j++)
                if (evs[j].type == NSV_EV_REQUEST) {
                    ev = evs[j];
                    nsv_reply(srv, ev.conn, 200, NULL, 0, "rp", 2);
                    nsv_poll(srv, evs, NSVNET_EVS, arena, sizeof arena, 0);
                    done = 1;
                }
        }
        char buf[256];
        read_all(k, buf, sizeof buf, 2000, 50);
        served += done && strstr(buf, "HTTP/1.1 200") != NULL;
        close(k);
    }
    is_int(served, 8, "every connection to the shared port is served");
    nsv_server_free(a);
    nsv_server_free(b);
    nsv_server_free(c);
}

int main(void)
{
    test_adopt_ipv4();
    test_adopt_ipv6();
    test_adopt_unix();
    test_errors();
    test_shared_socket();
    test_sharded();
    test_reuseport();
    return done_testing();
}
