/* test_tls_upgrade.c - nsv_tls_upgrade (STARTTLS on an outbound raw TCP
 * connection): an echo round trip through a tls:// listener of the same
 * server, verification (right CA and name, wrong name, untrusted
 * certificate with and without NSV_TLS_UPGRADE_VERIFY), plain text before
 * the handshake delivered first, a peer answering garbage, a peer that
 * never answers (the handshake timeout), the preconditions, and a sharded
 * server called from the polling thread. Certificates are made with
 * openssl in a temporary directory. */
#include "tap.h"
#include <nanosrv.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static nsv_event evs[256];
static char arena[1 << 20];
static char dir[64];

/* One connection's events in order, bytes kept (bodies up to 256 bytes). */
typedef struct {
    uint32_t type, flags;
    int32_t code;
    char body[256];
    uint32_t len;
} rec;

static rec logv[512];
static int logn;

static void log_events(uint64_t conn, int n)
{
    for (int i = 0; i < n; i++) {
        if (evs[i].conn != conn || logn >= 512)
            continue;
        rec *r = &logv[logn++];
        r->type = evs[i].type;
        r->flags = evs[i].flags;
        r->code = evs[i].code;
        r->len = evs[i].body_len < sizeof r->body ? evs[i].body_len : (uint32_t)sizeof r->body - 1;
        memcpy(r->body, arena + evs[i].body_off, r->len);
        r->body[r->len] = 0;
    }
}

/* Echo for the accepted side of a single loop: TCP_DATA goes back. */
static void echo_events(nsv_server *s, int n, uint64_t skip)
{
    for (int i = 0; i < n; i++)
        if (evs[i].type == NSV_EV_TCP_DATA && evs[i].conn != skip && evs[i].body_len)
            nsv_send(s, evs[i].conn, arena + evs[i].body_off, evs[i].body_len);
}

/* Polls s (echoing other connections' data) until conn logged an event of
 * type, at most ms. Returns its index in the log, or -1. */
static int wait_rec(nsv_server *s, uint64_t conn, uint32_t type, int from, int ms)
{
    int64_t end = nsv_millis() + ms;
    for (;;) {
        for (int i = from; i < logn; i++)
            if (logv[i].type == type)
                return i;
        if (nsv_millis() >= end)
            return -1;
        int n = nsv_poll(s, evs, 256, arena, sizeof arena, 20);
        if (n > 0) {
            log_events(conn, n);
            echo_events(s, n, conn);
        }
    }
}

static int find_rec(uint32_t type, int from)
{
    for (int i = from; i < logn; i++)
        if (logv[i].type == type)
            return i;
    return -1;
}

static void sh(const char *cmd)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "cd %s && %s >/dev/null 2>&1", dir, cmd);
    if (system(buf) != 0)
        diag("command failed: %s", cmd);
}

static void make_certs(void)
{
    sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.crt "
       "-days 30 -subj /CN=testca");
    sh("openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout good.key -out good.csr "
       "-subj /CN=localhost");
    sh("printf 'subjectAltName=DNS:localhost\\n' > good.ext");
    sh("openssl x509 -req -in good.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out good.crt -days 30 "
       "-extfile good.ext");
    sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout self.key -out self.crt "
       "-days 30 -subj /CN=localhost -addext subjectAltName=DNS:localhost");
}

static int set_file(nsv_server *s, int opt, const char *name)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return nsv_set_str(s, opt, p, strlen(p));
}

/* A server with a tls:// listener using cert (good or self), the client CA
 * set to ca.crt. Returns the listener's port. */
static int tls_server(nsv_server *s, const char *cert)
{
    char c[32], k[32];
    snprintf(c, sizeof c, "%s.crt", cert);
    snprintf(k, sizeof k, "%s.key", cert);
    set_file(s, NSV_OPT_TLS_CERT_FILE, c);
    set_file(s, NSV_OPT_TLS_KEY_FILE, k);
    set_file(s, NSV_OPT_TLS_CLIENT_CA_FILE, "ca.crt");
    int lid = nsv_listen(s, "tls://127.0.0.1:0", 17);
    if (lid < 0)
        diag("tls listen: %s", nsv_last_error_detail(s));
    return lid < 0 ? -1 : nsv_listener_port(s, lid);
}

static uint64_t connect_port(nsv_server *s, int port)
{
    char url[64];
    int n = snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    int64_t id = nsv_connect(s, url, (size_t)n);
    return id < 0 ? 0 : (uint64_t)id;
}

/* Connect, wait for the plain TCP_CONNECTED; the log starts empty. */
static uint64_t connected(nsv_server *s, int port)
{
    logn = 0;
    uint64_t id = connect_port(s, port);
    if (!id || wait_rec(s, id, NSV_EV_TCP_CONNECTED, 0, 3000) < 0)
        return 0;
    return id;
}

/* Upgrade, then wait for the outcome: 1 TLS connected, 0 ERROR (its index in *err). */
static int upgrade(nsv_server *s, uint64_t id, const char *name, uint32_t flags, int *err)
{
    int from = logn;
    int r = nsv_tls_upgrade(s, id, name, strlen(name), flags);
    if (r != 0) {
        diag("nsv_tls_upgrade: %s: %s", nsv_errname(r), nsv_last_error_detail(s));
        return -1;
    }
    for (int64_t end = nsv_millis() + 5000; nsv_millis() < end;) {
        int c = find_rec(NSV_EV_TCP_CONNECTED, from), e = find_rec(NSV_EV_ERROR, from);
        if (c >= 0)
            return (logv[c].flags & NSV_EVF_TLS) ? 1 : -1;
        if (e >= 0) {
            *err = e;
            return 0;
        }
        wait_rec(s, id, NSV_EV_ERROR, from, 20);
    }
    return -1;
}

static int echo_round_trip(nsv_server *s, uint64_t id, const char *msg)
{
    int from = logn;
    if (nsv_send(s, id, msg, strlen(msg)) != 0)
        return 0;
    char got[256] = {0};
    size_t n = 0;
    for (int64_t end = nsv_millis() + 3000; nsv_millis() < end && n < strlen(msg);) {
        int i = wait_rec(s, id, NSV_EV_TCP_DATA, from, 50);
        if (i < 0)
            continue;
        memcpy(got + n, logv[i].body, logv[i].len < sizeof got - 1 - n ? logv[i].len : sizeof got - 1 - n);
        n += logv[i].len;
        from = i + 1;
    }
    return n == strlen(msg) && memcmp(got, msg, n) == 0;
}

static int plain_listener(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, (struct sockaddr *)&a, sizeof a);
    listen(fd, 8);
    socklen_t al = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &al);
    *port = ntohs(a.sin_port);
    return fd;
}

static int detail_has(nsv_server *s, const char *part) { return strstr(nsv_last_error_detail(s), part) != NULL; }

/* Echo callback of the peer servers (sharded, one worker). */
static void echo_cb(nsv_server *s, const nsv_event *ev, const char *ar, void *ud)
{
    (void)ud;
    if (ev->type == NSV_EV_TCP_DATA && ev->body_len)
        nsv_send(s, ev->conn, ar + ev->body_off, ev->body_len);
}

static nsv_server *echo_peer(const char *cert, int *port)
{
    nsv_server *p = nsv_server_new_sharded(1);
    nsv_set_callback(p, echo_cb, NULL);
    *port = tls_server(p, cert);
    nsv_fd(p); /* starts the worker */
    return p;
}

static void test_round_trip_and_verify(void)
{
    nsv_server *s = nsv_server_new();
    int port = tls_server(s, "good");
    ok(port > 0, "tls:// echo listener on port %d", port);

    uint64_t id = connected(s, port);
    ok(id != 0, "plain connect to the tls:// listener");
    int e = -1;
    is_int(upgrade(s, id, "localhost", NSV_TLS_UPGRADE_VERIFY, &e), 1,
           "VERIFY with the right CA and name: TCP_CONNECTED again, with NSV_EVF_TLS");
    ok(echo_round_trip(s, id, "hello over STARTTLS"), "echo round trip through the upgraded connection");
    is_int(nsv_tls_upgrade(s, id, "localhost", 9, 0), NSV_ESTATE, "a second upgrade: NSV_ESTATE");
    ok(detail_has(s, "already speaks TLS"), "detail says it already speaks TLS (%s)", nsv_last_error_detail(s));
    nsv_close(s, id);
    wait_rec(s, id, NSV_EV_CLOSE, 0, 2000);

    id = connected(s, port);
    is_int(upgrade(s, id, "other.example", NSV_TLS_UPGRADE_VERIFY, &e), 0, "VERIFY, wrong name: ERROR");
    if (e >= 0) {
        is_int(logv[e].code, NSV_ETLS, "the error is NSV_ETLS");
        ok(strstr(logv[e].body, "CN") || strstr(logv[e].body, "name"), "it names the mismatch: %s", logv[e].body);
    }
    ok(wait_rec(s, id, NSV_EV_CLOSE, 0, 2000) >= 0, "then CLOSE");

    /* Empty name with VERIFY: the chain is checked, no name. */
    id = connected(s, port);
    is_int(upgrade(s, id, "", NSV_TLS_UPGRADE_VERIFY, &e), 1, "VERIFY with no name: the chain alone passes");
    ok(echo_round_trip(s, id, "no SNI"), "echo without SNI");
    nsv_close(s, id);
    wait_rec(s, id, NSV_EV_CLOSE, 0, 2000);

    /* Data sent while the handshake runs goes out encrypted after it. */
    id = connected(s, port);
    int from = logn;
    int r = nsv_tls_upgrade(s, id, "localhost", 9, NSV_TLS_UPGRADE_VERIFY);
    is_int(r, NSV_OK, "upgrade started");
    is_int(nsv_tls_upgrade(s, id, "localhost", 9, 0), NSV_ESTATE, "upgrade during the handshake: NSV_ESTATE");
    ok(detail_has(s, "handshake"), "detail: %s", nsv_last_error_detail(s));
    is_int(nsv_send(s, id, "early", 5), NSV_OK, "nsv_send during the handshake is queued");
    int c = wait_rec(s, id, NSV_EV_TCP_CONNECTED, from, 3000);
    ok(c >= 0 && (logv[c].flags & NSV_EVF_TLS), "handshake done");
    int d = wait_rec(s, id, NSV_EV_TCP_DATA, from, 3000);
    ok(d > c && strcmp(logv[d].body, "early") == 0, "the early bytes came back through TLS after it");
    nsv_close(s, id);
    wait_rec(s, id, NSV_EV_CLOSE, 0, 2000);
    nsv_server_free(s);
}

static void test_untrusted(void)
{
    int pport;
    nsv_server *peer = echo_peer("self", &pport);
    nsv_server *s = nsv_server_new();
    set_file(s, NSV_OPT_TLS_CLIENT_CA_FILE, "ca.crt");
    uint64_t id = connected(s, pport);
    int e = -1;
    is_int(upgrade(s, id, "localhost", 0, &e), 1, "no VERIFY, untrusted self-signed certificate: passes");
    ok(echo_round_trip(s, id, "unverified"), "echo through the unverified session");
    nsv_close(s, id);
    wait_rec(s, id, NSV_EV_CLOSE, 0, 2000);

    id = connected(s, pport);
    is_int(upgrade(s, id, "localhost", NSV_TLS_UPGRADE_VERIFY, &e), 0, "VERIFY, untrusted certificate: ERROR");
    if (e >= 0) {
        is_int(logv[e].code, NSV_ETLS, "NSV_ETLS");
        diag("reason: %s", logv[e].body);
    }
    ok(wait_rec(s, id, NSV_EV_CLOSE, 0, 2000) >= 0, "then CLOSE");
    nsv_server_free(s);
    nsv_stop(peer);
    nsv_server_free(peer);
}

static void test_plaintext_peer(void)
{
    int port, lfd = plain_listener(&port);
    nsv_server *s = nsv_server_new();
    uint64_t id = connected(s, port);
    int afd = accept(lfd, NULL, NULL);
    const char ready[] = "220 ready\r\n";
    ssize_t w = write(afd, ready, sizeof ready - 1);
    (void)w;
    usleep(20000); /* the bytes are in our socket before the call */
    int e = -1;
    int r = nsv_tls_upgrade(s, id, "localhost", 9, 0);
    is_int(r, NSV_OK, "upgrade with plain text waiting");
    /* The peer reads the ClientHello and answers garbage. */
    char hello[4096];
    struct pollfd p = {.fd = afd, .events = POLLIN};
    ssize_t hn = poll(&p, 1, 2000) > 0 ? read(afd, hello, sizeof hello) : -1;
    ok(hn > 5 && hello[0] == 0x16, "the peer got a ClientHello (%zd bytes)", hn);
    const char junk[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
    w = write(afd, junk, sizeof junk - 1);
    e = wait_rec(s, id, NSV_EV_ERROR, 0, 3000);
    ok(e >= 0 && logv[e].code == NSV_ETLS, "garbage instead of a ServerHello: ERROR NSV_ETLS (%s)",
       e >= 0 ? logv[e].body : "none");
    int d = find_rec(NSV_EV_TCP_DATA, 0);
    ok(d >= 0 && d < e && strcmp(logv[d].body, ready) == 0, "the plain text was delivered first, as TCP_DATA");
    ok(wait_rec(s, id, NSV_EV_CLOSE, 0, 2000) > e, "then CLOSE");
    close(afd);
    nsv_server_free(s);
    close(lfd);
}

static void test_timeout(void)
{
    int port, lfd = plain_listener(&port); /* the kernel accepts; nobody answers */
    nsv_server *s = nsv_server_new();
    nsv_set_int(s, NSV_OPT_CONNECT_TIMEOUT_MS, 300);
    uint64_t id = connected(s, port);
    usleep(250000); /* the host is busy between polls: the timeout still counts from the call */
    int64_t t0 = nsv_millis();
    is_int(nsv_tls_upgrade(s, id, "localhost", 9, 0), NSV_OK, "upgrade against a peer that never answers");
    int e = wait_rec(s, id, NSV_EV_ERROR, 0, 5000);
    ok(e >= 0 && logv[e].code == NSV_ETIMEDOUT, "ERROR NSV_ETIMEDOUT after the connect timeout (%s)",
       e >= 0 ? logv[e].body : "none");
    ok(nsv_millis() - t0 >= 300, "not before it");
    ok(wait_rec(s, id, NSV_EV_CLOSE, 0, 2000) > e, "then CLOSE");
    nsv_server_free(s);
    close(lfd);
}

static void test_preconditions(void)
{
    int port, lfd = plain_listener(&port);
    nsv_server *s = nsv_server_new();
    int tl = nsv_listen(s, "tcp://127.0.0.1:0", 17);
    int tport = nsv_listener_port(s, tl);
    is_int(nsv_tls_upgrade(NULL, 1, "", 0, 0), NSV_EINVAL, "srv NULL: NSV_EINVAL");
    logn = 0;
    uint64_t id = connect_port(s, port);
    is_int(nsv_tls_upgrade(s, id, "localhost", 9, 0), NSV_ESTATE, "before TCP_CONNECTED: NSV_ESTATE");
    ok(detail_has(s, "still connecting"), "detail: %s", nsv_last_error_detail(s));
    wait_rec(s, id, NSV_EV_TCP_CONNECTED, 0, 3000);
    is_int(nsv_tls_upgrade(s, id, "localhost", 9, 4), NSV_EINVAL, "unknown flag: NSV_EINVAL");
    ok(detail_has(s, "unknown flags 0x4"), "detail: %s", nsv_last_error_detail(s));
    is_int(nsv_tls_upgrade(s, id, NULL, 3, 0), NSV_EINVAL, "NULL name with len 3: NSV_EINVAL");
    is_int(nsv_tls_upgrade(s, id, "bad name", 8, 0), NSV_EINVAL, "a space in the name: NSV_EINVAL");
    ok(detail_has(s, "offset 3"), "detail names the offset: %s", nsv_last_error_detail(s));
    is_int(nsv_tls_upgrade(s, id, "a\0b", 3, 0), NSV_EINVAL, "a NUL in the name: NSV_EINVAL");
    char big[300];
    memset(big, 'a', sizeof big);
    is_int(nsv_tls_upgrade(s, id, big, sizeof big, 0), NSV_EINVAL, "a 300-byte name: NSV_EINVAL");
    is_int(nsv_tls_upgrade(s, 0x12345, "", 0, 0), NSV_ESTALE, "unknown id: NSV_ESTALE");
    is_int(nsv_send(s, id, "abc", 3), NSV_OK, "3 plain bytes queued");
    is_int(nsv_tls_upgrade(s, id, "localhost", 9, 0), NSV_EAGAIN, "upgrade with output queued: NSV_EAGAIN");
    ok(detail_has(s, "3 bytes"), "detail: %s", nsv_last_error_detail(s));

    /* An accepted connection of a tcp:// listener. */
    int cfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)tport)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connect(cfd, (struct sockaddr *)&a, sizeof a);
    uint64_t acc = 0;
    for (int i = 0; i < 100 && !acc; i++) {
        int n = nsv_poll(s, evs, 256, arena, sizeof arena, 20);
        for (int k = 0; k < n; k++)
            if (evs[k].type == NSV_EV_TCP_OPEN)
                acc = evs[k].conn;
    }
    ok(acc != 0, "accepted a tcp:// connection");
    is_int(nsv_tls_upgrade(s, acc, "localhost", 9, 0), NSV_ESTATE, "upgrade of an accepted connection: NSV_ESTATE");
    ok(detail_has(s, "accepted by a listener"), "detail: %s", nsv_last_error_detail(s));

    /* An HTTP connection. */
    int hl = nsv_listen(s, "http://127.0.0.1:0", 18);
    int hport = nsv_listener_port(s, hl);
    int hfd = socket(AF_INET, SOCK_STREAM, 0);
    a.sin_port = htons((uint16_t)hport);
    connect(hfd, (struct sockaddr *)&a, sizeof a);
    const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    ssize_t w = write(hfd, req, sizeof req - 1);
    (void)w;
    uint64_t hc = 0;
    for (int i = 0; i < 100 && !hc; i++) {
        int n = nsv_poll(s, evs, 256, arena, sizeof arena, 20);
        for (int k = 0; k < n; k++)
            if (evs[k].type == NSV_EV_REQUEST)
                hc = evs[k].conn;
    }
    is_int(nsv_tls_upgrade(s, hc, "localhost", 9, 0), NSV_ESTATE, "upgrade of an HTTP connection: NSV_ESTATE");
    close(hfd);
    close(cfd);
    nsv_server_free(s);
    close(lfd);
}

/* The upgrade from the polling thread of a sharded server (not a worker). */
static void test_sharded(void)
{
    int pport;
    nsv_server *peer = echo_peer("good", &pport);
    nsv_server *s = nsv_server_new_sharded(2);
    set_file(s, NSV_OPT_TLS_CLIENT_CA_FILE, "ca.crt");
    int tl = nsv_listen(s, "tcp://127.0.0.1:0", 17);
    int tport = nsv_listener_port(s, tl);
    uint64_t id = connected(s, pport);
    ok(id != 0, "sharded: connected");
    int e = -1;
    is_int(upgrade(s, id, "localhost", NSV_TLS_UPGRADE_VERIFY, &e), 1, "sharded, from the polling thread: TLS");
    ok(echo_round_trip(s, id, "sharded echo"), "sharded: echo round trip");
    nsv_close(s, id);
    wait_rec(s, id, NSV_EV_CLOSE, 0, 2000);

    /* A refusal found only on the worker comes as ERROR, then CLOSE. */
    int cfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)tport)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connect(cfd, (struct sockaddr *)&a, sizeof a);
    uint64_t acc = 0;
    for (int i = 0; i < 100 && !acc; i++) {
        int n = nsv_poll(s, evs, 256, arena, sizeof arena, 20);
        for (int k = 0; k < n; k++)
            if (evs[k].type == NSV_EV_TCP_OPEN)
                acc = evs[k].conn;
    }
    logn = 0;
    is_int(nsv_tls_upgrade(s, acc, "localhost", 9, 0), NSV_OK, "sharded: the call on an accepted connection is queued");
    e = wait_rec(s, acc, NSV_EV_ERROR, 0, 3000);
    ok(e >= 0 && logv[e].code == NSV_ESTATE && strstr(logv[e].body, "accepted by a listener"),
       "then ERROR NSV_ESTATE from the worker (%s)", e >= 0 ? logv[e].body : "none");
    ok(wait_rec(s, acc, NSV_EV_CLOSE, 0, 2000) > e, "and CLOSE");
    close(cfd);
    nsv_stop(s);
    nsv_server_free(s);
    nsv_stop(peer);
    nsv_server_free(peer);
}

int main(void)
{
    if (!nsv_tls_available()) {
        nsv_server *s = nsv_server_new();
        is_int(nsv_tls_upgrade(s, 1, "", 0, 0), NSV_ENOTSUP, "no TLS in this build: NSV_ENOTSUP");
        nsv_server_free(s);
        return done_testing();
    }
    snprintf(dir, sizeof dir, "/tmp/nsv-tlsup-XXXXXX");
    if (!mkdtemp(dir)) {
        ok(0, "mkdtemp");
        return done_testing();
    }
    make_certs();
    test_round_trip_and_verify();
    test_untrusted();
    test_plaintext_peer();
    test_timeout();
    test_preconditions();
    test_sharded();
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    if (system(rm) != 0)
        diag("cannot remove %s", dir);
    return done_testing();
}
