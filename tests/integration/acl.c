/* acl.c - listener address lists without the PROXY protocol
 * (NSV_LOPT_ALLOW / NSV_LOPT_DENY against the socket's peer at accept):
 * 127.0.0.1 against 127.0.0.2, DENY before ALLOW, IPv6 ::1, IPv4 entries
 * against v4-mapped peers of a dual-stack listener, AF_UNIX peers, raw
 * TCP, a sharded server; refused connections are closed unanswered,
 * counted and never seen by the host. Also the option calls' refusals and
 * nsv_inherited_fds (LISTEN_PID / LISTEN_FDS / LISTEN_FDNAMES). */
#include "tap.h"
#include "nsvnet.h"
#include <nanosrv.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
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

static uint64_t metric(nsv_server *s, int m)
{
    uint64_t v[NSV_M_COUNT];
    int n = nsv_metrics(s, v, NSV_M_COUNT);
    return n > m ? v[m] : UINT64_MAX;
}

/* A connection to port from the loopback address `from` (e.g. 127.0.0.2). */
static int client_from(const char *from, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in me = {.sin_family = AF_INET}, to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, from, &me.sin_addr);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&me, sizeof me) != 0 || connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int client6(int port)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 to = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port), .sin6_addr = in6addr_loopback};
    if (connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends a request on fd and polls s: 1 when the request came and was
 * answered (the peer text in peer), 0 when the server closed fd without
 * a byte, -1 when neither happened in time. *events counts the other
 * events (but CLOSE) polled. */
static int try_request(nsv_server *s, int fd, char *peer, size_t pcap, int *events)
{
    sendall(fd, "GET /acl HTTP/1.1\r\nHost: x\r\n\r\n");
    int answered = 0;
    for (int t = 0; t < 300; t++) {
        int n = nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, 10);
        for (int i = 0; i < n; i++) {
            if (evs[i].type == NSV_EV_REQUEST) {
                snprintf(peer, pcap, "%.*s", (int)evs[i].peer_len, arena + evs[i].peer_off);
                nsv_reply(s, evs[i].conn, 200, NULL, 0, S("ok"));
                answered = 1;
            } else if (evs[i].type != NSV_EV_CLOSE) {
                (*events)++;
            }
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 0) > 0) {
            char b[512];
            ssize_t r = recv(fd, b, sizeof b, MSG_DONTWAIT);
            if (r > 0)
                return answered ? 1 : -1;
            if (r == 0 || errno == ECONNRESET)
                return 0;
        }
    }
    return -1;
}

static void test_option_calls(void)
{
    nsv_server *s = nsv_server_new();
    int lid = nsv_listen(s, S("http://127.0.0.1:0"));
    is_int(nsv_listener_get_int(s, lid, NSV_LOPT_PROXY_PROTOCOL), 0, "PROXY protocol off by default");
    is_int(nsv_listener_get_int(s, lid, NSV_LOPT_PROXY_TIMEOUT_MS), 5000, "PROXY timeout 5000 by default");
    is_int(nsv_listener_set_int(s, lid + 1, NSV_LOPT_PROXY_PROTOCOL, 1), NSV_EINVAL, "unknown listener: EINVAL");
    ok(detail_has(s, "no listener 1"), "the detail names it");
    is_int(nsv_listener_set_int(s, -1, NSV_LOPT_PROXY_PROTOCOL, 1), NSV_EINVAL, "listener -1: EINVAL");
    is_int(nsv_listener_get_int(s, 7, NSV_LOPT_PROXY_PROTOCOL), NSV_EINVAL, "get_int, unknown listener: EINVAL");
    is_int(nsv_listener_set_int(s, lid, 99, 1), NSV_EINVAL, "unknown option: EINVAL");
    is_int(nsv_listener_set_int(s, lid, NSV_LOPT_ALLOW, 1), NSV_EINVAL, "a string option through set_int: EINVAL");
    is_int(nsv_listener_get_int(s, lid, NSV_LOPT_DENY), NSV_EINVAL, "a string option through get_int: EINVAL");
    is_int(nsv_listener_set_int(s, lid, NSV_LOPT_PROXY_PROTOCOL, 4), NSV_ERANGE, "PROXY protocol 4: ERANGE");
    is_int(nsv_listener_set_int(s, lid, NSV_LOPT_PROXY_PROTOCOL, -1), NSV_ERANGE, "PROXY protocol -1: ERANGE");
    is_int(nsv_listener_set_int(s, lid, NSV_LOPT_PROXY_TIMEOUT_MS, 0), NSV_ERANGE, "PROXY timeout 0: ERANGE");
    is_int(nsv_listener_get_int(s, lid, NSV_LOPT_PROXY_TIMEOUT_MS), 5000, "a refused value changes nothing");
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_PROXY_TIMEOUT_MS, S("1")), NSV_EINVAL,
           "an integer option through set_str: EINVAL");
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_ALLOW, S("10.0.0.0/8, 10.0.0.1/8")), NSV_EINVAL,
           "host bits past the prefix: EINVAL");
    ok(detail_has(s, "\"10.0.0.1/8\""), "the detail names the first bad entry");
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_ALLOW, S("1.2.3.4/33")), NSV_EINVAL, "IPv4 prefix 33: EINVAL");
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_ALLOW, S("::/129")), NSV_EINVAL, "IPv6 prefix 129: EINVAL");
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_ALLOW, S("1.2.3.0/024")), NSV_EINVAL, "a prefix with a leading 0");
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_ALLOW, S("localhost")), NSV_EINVAL, "a name: EINVAL");
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_DENY, S("1.2.3.4/")), NSV_EINVAL, "an empty prefix: EINVAL");
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_DENY, S("1.2.3.4;5.6.7.8")), NSV_EINVAL, "';' is no separator");
    is_int(nsv_listener_set_str(s, 9, NSV_LOPT_DENY, S("1.2.3.4")), NSV_EINVAL, "set_str, unknown listener");
    is_int(nsv_listener_set_str(s, lid, 3, S("1.2.3.4")), NSV_EINVAL, "set_str, unknown option");
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_ALLOW, S(" ,0.0.0.0/0 ,, ::/0 2001:db8::/32,")), 0,
           "separators: commas, spaces, both, at either end");
    char big[256 * 16 + 16];
    size_t n = 0;
    for (int i = 0; i < 257; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, "10.0.%d.%d,", i / 250, i % 250);
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_DENY, big, n), NSV_ERANGE, "257 entries: ERANGE");
    n = 0;
    for (int i = 0; i < 256; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, "10.0.%d.%d ", i / 250, i % 250);
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_DENY, big, n), 0, "256 entries: accepted");
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_DENY, NULL, 0), 0, "NULL clears");
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_PROXY_FROM, S("127.0.0.1")), 0, "PROXY_FROM accepted");
    is_int(nsv_listener_set_int(NULL, 0, NSV_LOPT_PROXY_PROTOCOL, 1), NSV_EINVAL, "NULL server: EINVAL");
    nsv_server_free(s);
}

static void test_v4(void)
{
    nsv_server *s = nsv_server_new();
    int port, lid = http_listen(s, &port);
    char peer[64];
    int events = 0;
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_ALLOW, S("127.0.0.1")), 0, "ALLOW 127.0.0.1");
    uint64_t denied = metric(s, NSV_M_CONNS_DENIED), acc = metric(s, NSV_M_CONNS_ACCEPTED);
    int fd = client_from("127.0.0.1", port);
    is_int(try_request(s, fd, peer, sizeof peer, &events), 1, "127.0.0.1 is served");
    close(fd);
    fd = client_from("127.0.0.2", port);
    is_int(try_request(s, fd, peer, sizeof peer, &events), 0, "127.0.0.2 is closed without an answer");
    close(fd);
    is_int(events, 0, "the refused connection produced no event");
    is_int(metric(s, NSV_M_CONNS_DENIED) - denied, 1, "NSV_M_CONNS_DENIED counts it");
    is_int(metric(s, NSV_M_CONNS_ACCEPTED) - acc, 2, "NSV_M_CONNS_ACCEPTED counts both");

    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_ALLOW, S("127.0.0.0/8")), 0, "ALLOW 127.0.0.0/8");
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_DENY, S("127.0.0.2")), 0, "DENY 127.0.0.2");
    fd = client_from("127.0.0.2", port);
    is_int(try_request(s, fd, peer, sizeof peer, &events), 0, "in ALLOW and DENY: refused (DENY first)");
    close(fd);
    fd = client_from("127.0.0.3", port);
    is_int(try_request(s, fd, peer, sizeof peer, &events), 1, "127.0.0.3: served");
    ok(!strcmp(peer, "127.0.0.3"), "its peer is the socket's");
    close(fd);
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_ALLOW, NULL, 0), 0, "ALLOW cleared");
    fd = client_from("127.0.0.9", port);
    is_int(try_request(s, fd, peer, sizeof peer, &events), 1, "only DENY: everyone else is served");
    close(fd);
    fd = client_from("127.0.0.2", port);
    is_int(try_request(s, fd, peer, sizeof peer, &events), 0, "and 127.0.0.2 still refused");
    close(fd);
    is_int(events, 0, "no refused connection produced an event");
    nsv_server_free(s);
}

static void test_v6(void)
{
    nsv_server *s = nsv_server_new();
    int lid = nsv_listen(s, S("http://[::1]:0"));
    if (lid < 0) {
        printf("ok %d # skip no IPv6 loopback\n", ++tap_n);
        nsv_server_free(s);
        return;
    }
    int port = nsv_listener_port(s, lid), events = 0;
    char peer[64];
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_ALLOW, S("::1")), 0, "[::1] listener: ALLOW ::1");
    int fd = client6(port);
    is_int(try_request(s, fd, peer, sizeof peer, &events), 1, "::1 is served");
    ok(!strcmp(peer, "::1"), "peer ::1");
    close(fd);
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_ALLOW, S("127.0.0.1, 2001:db8::/32")), 0,
           "ALLOW without ::1");
    fd = client6(port);
    is_int(try_request(s, fd, peer, sizeof peer, &events), 0, "::1 refused");
    close(fd);
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_ALLOW, NULL, 0), 0, "ALLOW cleared");
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_DENY, S("::/0")), 0, "DENY ::/0");
    fd = client6(port);
    is_int(try_request(s, fd, peer, sizeof peer, &events), 0, "::1 refused by ::/0");
    close(fd);
    is_int(events, 0, "no event from refused connections");
    nsv_server_free(s);

    /* A dual-stack socket sees IPv4 clients as v4-mapped. */
    int ds = socket(AF_INET6, SOCK_STREAM, 0), no = 0;
    struct sockaddr_in6 any = {.sin6_family = AF_INET6, .sin6_addr = in6addr_any};
    setsockopt(ds, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof no);
    if (bind(ds, (struct sockaddr *)&any, sizeof any) != 0 || listen(ds, 16) != 0) {
        printf("ok %d # skip no dual-stack socket\n", ++tap_n);
        close(ds);
        return;
    }
    s = nsv_server_new();
    lid = nsv_listen_fd(s, S("http://0.0.0.0:0"), ds);
    port = nsv_listener_port(s, lid);
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_ALLOW, S("127.0.0.1")), 0, "[::] listener: ALLOW 127.0.0.1");
    fd = client_from("127.0.0.1", port);
    is_int(try_request(s, fd, peer, sizeof peer, &events), 1, "127.0.0.1 as ::ffff:127.0.0.1 is served");
    ok(!strcmp(peer, "::ffff:127.0.0.1"), "its peer is v4-mapped (%s)", peer);
    close(fd);
    fd = client_from("127.0.0.2", port);
    is_int(try_request(s, fd, peer, sizeof peer, &events), 0, "::ffff:127.0.0.2 is refused");
    close(fd);
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_ALLOW, NULL, 0), 0, "ALLOW cleared");
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_DENY, S("127.0.0.0/30")), 0, "DENY 127.0.0.0/30");
    fd = client_from("127.0.0.2", port);
    is_int(try_request(s, fd, peer, sizeof peer, &events), 0, "v4-mapped peer inside a v4 DENY entry: refused");
    close(fd);
    fd = client_from("127.0.0.4", port);
    is_int(try_request(s, fd, peer, sizeof peer, &events), 1, "v4-mapped peer outside it: served");
    close(fd);
    is_int(events, 0, "no event from refused connections");
    nsv_server_free(s);
}

/* AF_UNIX peers match no entry: an ALLOW list keeps them out, a DENY list
 * alone lets them in. */
static void test_unix(void)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/nsv-acl-%d.sock", (int)getpid());
    unlink(path);
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(lfd, 8) != 0) {
        printf("ok %d # skip AF_UNIX socket\n", ++tap_n);
        close(lfd);
        return;
    }
    nsv_server *s = nsv_server_new();
    int lid = nsv_listen_fd(s, S("http://0.0.0.0:0"), lfd);
    char peer[64];
    int events = 0;
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_DENY, S("0.0.0.0/0 ::/0")), 0, "AF_UNIX listener: DENY everything");
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    connect(fd, (struct sockaddr *)&a, sizeof a);
    is_int(try_request(s, fd, peer, sizeof peer, &events), 1, "an AF_UNIX peer matches no DENY entry: served");
    close(fd);
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_ALLOW, S("0.0.0.0/0 ::/0")), 0, "ALLOW everything");
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    connect(fd, (struct sockaddr *)&a, sizeof a);
    is_int(try_request(s, fd, peer, sizeof peer, &events), 0, "an AF_UNIX peer is in no ALLOW list: refused");
    close(fd);
    is_int(events, 0, "no event");
    nsv_server_free(s);
    unlink(path);
}

/* Raw TCP: a refused connection never gets its TCP_OPEN. */
static void test_tcp(void)
{
    nsv_server *s = nsv_server_new();
    int lid = nsv_listen(s, S("tcp://127.0.0.1:0"));
    int port = nsv_listener_port(s, lid);
    nsv_listener_set_str(s, lid, NSV_LOPT_DENY, S("127.0.0.2/32"));
    int bad = client_from("127.0.0.2", port), good = client_from("127.0.0.1", port);
    int opens = 0, closed = 0;
    for (int t = 0; t < 300 && !(opens && closed); t++) {
        int n = nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, 10);
        for (int i = 0; i < n; i++)
            if (evs[i].type == NSV_EV_TCP_OPEN) {
                opens++;
                ok(!(evs[i].flags & NSV_EVF_PROXY), "TCP_OPEN without a PROXY header has no NSV_EVF_PROXY");
            }
        char b[8];
        struct pollfd p = {.fd = bad, .events = POLLIN};
        if (!closed && poll(&p, 1, 0) > 0 && recv(bad, b, sizeof b, MSG_DONTWAIT) <= 0)
            closed = 1;
    }
    is_int(opens, 1, "tcp://: one TCP_OPEN, the allowed one's");
    ok(closed, "tcp://: the denied one is closed");
    close(bad), close(good);
    nsv_server_free(s);
}

static void test_sharded(void)
{
    nsv_server *s = nsv_server_new_sharded(2);
    int port, lid = http_listen(s, &port);
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_ALLOW, S("127.0.0.1")), 0, "sharded: ALLOW 127.0.0.1");
    enum { N = 6 };
    int fds[N], events = 0;
    char peer[64];
    for (int i = 0; i < N; i++) {
        fds[i] = client_from(i % 2 ? "127.0.0.2" : "127.0.0.1", port);
        is_int(try_request(s, fds[i], peer, sizeof peer, &events), i % 2 ? 0 : 1, "sharded: connection %d from %s", i,
               i % 2 ? "127.0.0.2 refused" : "127.0.0.1 served");
        close(fds[i]);
    }
    is_int(events, 0, "sharded: no event from refused connections");
    is_int(metric(s, NSV_M_CONNS_DENIED), N / 2, "sharded: denied counted across workers");
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_ALLOW, NULL, 0), NSV_ESTATE, "sharded: ESTATE once workers run");
    nsv_server_free(s);
}

/* nsv_inherited_fds in a child (descriptors 3 and 4 are the child's to
 * set): the exit status is the number of failed checks. */
static int child_fds(void)
{
    int bad = 0;
    /* Out of the way first: the sockets may have been given 3 or 4. */
    int a0 = socket(AF_INET, SOCK_STREAM, 0), b0 = socket(AF_INET, SOCK_STREAM, 0);
    int a = fcntl(a0, F_DUPFD, 20), b = fcntl(b0, F_DUPFD, 20);
    close(a0), close(b0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(a, (struct sockaddr *)&sa, sizeof sa), listen(a, 8);
    dup2(a, 3), dup2(b, 4);
    close(a), close(b);
    for (int fd = 5; fd < 20; fd++)
        close(fd);
    char pid[16];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    unsetenv("LISTEN_PID"), unsetenv("LISTEN_FDS"), unsetenv("LISTEN_FDNAMES");
    bad += nsv_inherited_fds(0) != 0; /* nothing passed */
    setenv("LISTEN_PID", "1", 1), setenv("LISTEN_FDS", "2", 1);
    bad += nsv_inherited_fds(0) != 0; /* another process's */
    setenv("LISTEN_PID", "12x", 1);
    bad += nsv_inherited_fds(0) != NSV_EINVAL;
    setenv("LISTEN_PID", pid, 1), setenv("LISTEN_FDS", "-1", 1);
    bad += nsv_inherited_fds(0) != NSV_EINVAL;
    setenv("LISTEN_FDS", "02", 1);
    bad += nsv_inherited_fds(0) != NSV_EINVAL;
    setenv("LISTEN_FDS", "2", 1), setenv("LISTEN_FDNAMES", "web", 1);
    bad += nsv_inherited_fds(0) != NSV_EINVAL; /* one name for two sockets */
    setenv("LISTEN_FDS", "9", 1), unsetenv("LISTEN_FDNAMES");
    bad += nsv_inherited_fds(0) != NSV_EINVAL; /* descriptors 5.. are not open */
    setenv("LISTEN_FDS", "2", 1), setenv("LISTEN_FDNAMES", "web:admin", 1);
    bad += nsv_inherited_fds(0) != 2;
    bad += !getenv("LISTEN_PID"); /* unset_env 0 keeps them */
    bad += !(fcntl(3, F_GETFD) & FD_CLOEXEC);
    bad += nsv_inherited_fds(1) != 2;
    bad += getenv("LISTEN_PID") || getenv("LISTEN_FDS") || getenv("LISTEN_FDNAMES");
    bad += nsv_inherited_fds(0) != 0; /* gone now */
    nsv_server *s = nsv_server_new();
    bad += nsv_listen_fd(s, S("http://127.0.0.1:0"), 3) < 0; /* what a host does with them */
    nsv_server_free(s);
    return bad;
}

static void test_inherited(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(child_fds());
    int st = 0;
    waitpid(pid, &st, 0);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "nsv_inherited_fds: LISTEN_PID/LISTEN_FDS/LISTEN_FDNAMES (%d failed)",
       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    if (getenv("NSV_TEST_DEBUG"))
        nsv_set_log_level(NSV_LOG_DEBUG);
    test_option_calls();
    test_v4();
    test_v6();
    test_unix();
    test_tcp();
    test_sharded();
    test_inherited();
    return done_testing();
}
