/* ceiling.c - the single-core ceiling: a minimal epoll HTTP server that
 * answers every complete request head with a canned 200 keep-alive response.
 * No parsing beyond counting "\r\n\r\n", one read -> one write, so every
 * server in the benchmark can be expressed as a fraction of this number.
 * The canned bytes are what echo-server answers to wrk's `GET /` (with a
 * fixed Date), so a ratio compares the work done, not the bytes sent.
 * Usage: ceiling [--port N]   (prints "listening on PORT" once ready) */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static const char RESP[] =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 51\r\n"
    "Date: Mon, 30 Nov 2026 00:00:00 GMT\r\n\r\n"
    "{\"method\":\"GET\",\"path\":\"/\",\"query\":\"\",\"body_len\":0}";
#define RESP_LEN (sizeof RESP - 1)
/* Sent instead when the request asked to close, so the close-per-request
 * case really pays for a new connection each time. Only wrk's exact header
 * spelling is recognised: this is a ceiling, not a parser. */
static const char RESP_CLOSE[] =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 51\r\n"
    "Date: Mon, 30 Nov 2026 00:00:00 GMT\r\nConnection: close\r\n\r\n"
    "{\"method\":\"GET\",\"path\":\"/\",\"query\":\"\",\"body_len\":0}";
#define RBUF 65536
#define MAX_BATCH 256 /* responses written by one write() */

/* Per-connection state: how far into "\r\n\r\n" the previous read ended
 * (a terminator may straddle two reads) and any unsent output. */
struct conn {
    int fd;
    int match;
    int want_out; /* EPOLLOUT currently registered */
    size_t pend_off, pend_len;
    char *pend;
};

static char rbuf[RBUF];
static char wbuf[MAX_BATCH * RESP_LEN];

static int count_heads(struct conn *c, const char *p, size_t n)
{
    static const char term[] = "\r\n\r\n";
    int heads = 0, m = c->match;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == term[m]) {
            if (++m == 4) { heads++; m = 0; }
        } else {
            m = p[i] == '\r' ? 1 : 0;
        }
    }
    c->match = m;
    return heads;
}

static void conn_close(int ep, struct conn *c)
{
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c->pend);
    free(c);
}

/* Writes what is pending; returns -1 on error, 0 when drained, 1 when the
 * socket is full (caller waits for EPOLLOUT). */
static int flush_pending(struct conn *c)
{
    while (c->pend_off < c->pend_len) {
        ssize_t w = write(c->fd, c->pend + c->pend_off, c->pend_len - c->pend_off);
        if (w < 0)
            return errno == EAGAIN ? 1 : -1;
        c->pend_off += (size_t)w;
    }
    c->pend_off = c->pend_len = 0;
    return 0;
}

static int queue_out(struct conn *c, const char *p, size_t n)
{
    char *np = realloc(c->pend, c->pend_len + n);
    if (!np)
        return -1;
    memcpy(np + c->pend_len, p, n);
    c->pend = np;
    c->pend_len += n;
    return 0;
}

/* Answers `heads` requests: straight write() when nothing is queued, else
 * append behind the queue to keep responses in order. */
static int respond(struct conn *c, int heads)
{
    while (heads > 0) {
        int k = heads > MAX_BATCH ? MAX_BATCH : heads;
        size_t len = (size_t)k * RESP_LEN, off = 0;
        heads -= k;
        if (c->pend_len == 0) {
            ssize_t w = write(c->fd, wbuf, len);
            if (w < 0 && errno != EAGAIN)
                return -1;
            off = w > 0 ? (size_t)w : 0;
        }
        if (off < len && queue_out(c, wbuf + off, len - off) < 0)
            return -1;
    }
    return 0;
}

/* Only touches epoll when the interest set changes: one syscall saved per
 * request in the common case. */
static void watch_out(int ep, struct conn *c, int on)
{
    if (c->want_out == on)
        return;
    c->want_out = on;
    struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void on_readable(int ep, struct conn *c)
{
    for (;;) {
        ssize_t n = read(c->fd, rbuf, sizeof rbuf);
        if (n == 0 || (n < 0 && errno != EAGAIN)) {
            conn_close(ep, c);
            return;
        }
        if (n < 0)
            break;
        int heads = count_heads(c, rbuf, (size_t)n);
        if (heads && memmem(rbuf, (size_t)n, "Connection: close", 17)) {
            if (write(c->fd, RESP_CLOSE, sizeof RESP_CLOSE - 1) < 0) { /* closing anyway */ }
            conn_close(ep, c);
            return;
        }
        if (respond(c, heads) < 0) {
            conn_close(ep, c);
            return;
        }
        if ((size_t)n < sizeof rbuf)
            break; /* drained; skip the extra EAGAIN read */
    }
    watch_out(ep, c, c->pend_len > 0);
}

int main(int argc, char **argv)
{
    int port = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--port") && i + 1 < argc)
            port = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--port N]\n", argv[0]);
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    for (size_t i = 0; i < MAX_BATCH; i++)
        memcpy(wbuf + i * RESP_LEN, RESP, RESP_LEN);

    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) || listen(lfd, 4096) ||
        getsockname(lfd, (struct sockaddr *)&sa, &sl)) {
        perror("listen");
        return 1;
    }
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    printf("listening on %d\n", ntohs(sa.sin_port));
    fflush(stdout);

    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if (!c) { /* listener: accept everything queued */
                int fd;
                while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    c = calloc(1, sizeof *c);
                    if (!c) { close(fd); continue; }
                    c->fd = fd;
                    struct epoll_event cev = {.events = EPOLLIN, .data.ptr = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev);
                }
                continue;
            }
            if (evs[i].events & EPOLLOUT) {
                int r = flush_pending(c);
                if (r < 0) { conn_close(ep, c); continue; }
                if (r == 0)
                    watch_out(ep, c, 0);
            }
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                on_readable(ep, c);
        }
    }
}
