/* ws_load.c - WebSocket echo load generator. Each of N connections sends one
 * binary message, waits for the whole echo, and sends the next, so the
 * message rate is bounded by the server, not by queueing in socket buffers.
 * Usage: ws_load --port N [--host 127.0.0.1] [--path /ws] [--conns 50]
 *                [--size 64] [--duration 5]
 * Prints one JSON line: msgs, msgs_per_s, p50_us, p99_us, errors. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HIST_US 200000 /* 1 us buckets up to 200 ms, then one overflow bucket */

enum { HANDSHAKE, OPEN, DEAD };

struct conn {
    int fd, state;
    size_t sent;            /* bytes of the current frame already written */
    uint8_t hdr[14];        /* header of the frame being received */
    size_t hdr_have, hdr_need;
    uint64_t payload_left, got; /* payload bytes still due / received for this message */
    char head[1024];        /* handshake response, until "\r\n\r\n" */
    size_t head_len;
    double t_sent;
};

static uint8_t *frame;
static size_t frame_len, msg_size;
static uint32_t hist[HIST_US + 1];
static uint64_t msgs, errors;
static int counting;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A client frame must be masked; a zero mask keeps the payload unchanged,
 * while the server still runs its unmasking code. */
static void build_frame(size_t n)
{
    size_t h = n < 126 ? 2 : n < 65536 ? 4 : 10;
    frame_len = h + 4 + n;
    frame = calloc(1, frame_len);
    frame[0] = 0x82; /* FIN + binary */
    if (n < 126) {
        frame[1] = 0x80 | (uint8_t)n;
    } else if (n < 65536) {
        frame[1] = 0x80 | 126;
        frame[2] = (uint8_t)(n >> 8);
        frame[3] = (uint8_t)n;
    } else {
        frame[1] = 0x80 | 127;
        for (int i = 0; i < 8; i++)
            frame[2 + i] = (uint8_t)(n >> (56 - 8 * i));
    }
    memset(frame + h + 4, 'x', n);
}

static void fail(int ep, struct conn *c)
{
    if (c->state != DEAD) {
        errors++;
        epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->state = DEAD;
    }
}

static void set_out(int ep, struct conn *c, int on)
{
    struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void send_frame(int ep, struct conn *c)
{
    if (c->sent == 0)
        c->t_sent = now();
    while (c->sent < frame_len) {
        ssize_t w = write(c->fd, frame + c->sent, frame_len - c->sent);
        if (w < 0) {
            if (errno == EAGAIN) {
                set_out(ep, c, 1);
                return;
            }
            fail(ep, c);
            return;
        }
        c->sent += (size_t)w;
    }
}

static void message_done(int ep, struct conn *c)
{
    if (counting) {
        uint64_t us = (uint64_t)((now() - c->t_sent) * 1e6);
        hist[us < HIST_US ? us : HIST_US]++;
        msgs++;
    }
    if (c->got != msg_size) {
        fail(ep, c);
        return;
    }
    c->got = 0;
    c->sent = 0;
    send_frame(ep, c);
}

/* Streams received bytes through a small frame parser: header, then payload. */
static void on_frame_bytes(int ep, struct conn *c, const uint8_t *p, size_t n)
{
    while (n > 0 && c->state == OPEN) {
        if (c->hdr_have < c->hdr_need) {
            c->hdr[c->hdr_have++] = *p++;
            n--;
            if (c->hdr_have == 2) {
                uint8_t l = c->hdr[1] & 0x7f;
                c->hdr_need = 2 + (l == 126 ? 2 : l == 127 ? 8 : 0) + (c->hdr[1] & 0x80 ? 4 : 0);
            }
            if (c->hdr_have < c->hdr_need)
                continue;
            uint8_t l = c->hdr[1] & 0x7f;
            uint64_t len = l;
            if (l == 126)
                len = (uint64_t)c->hdr[2] << 8 | c->hdr[3];
            else if (l == 127)
                for (int i = 0; i < 8; i++)
                    len = len << 8 | c->hdr[2 + i];
            if ((c->hdr[0] & 0x0f) == 0x8) { /* close from the server */
                fail(ep, c);
                return;
            }
            c->payload_left = len;
        }
        size_t take = n < c->payload_left ? n : (size_t)c->payload_left;
        int data = (c->hdr[0] & 0x0f) < 0x8; /* ignore ping/pong payloads */
        if (data)
            c->got += take;
        c->payload_left -= take;
        p += take;
        n -= take;
        if (c->payload_left == 0) {
            int fin = c->hdr[0] & 0x80;
            c->hdr_have = 0;
            c->hdr_need = 2;
            if (data && fin)
                message_done(ep, c);
        }
    }
}

static void on_readable(int ep, struct conn *c)
{
    static uint8_t buf[1 << 17];
    for (;;) {
        ssize_t n = read(c->fd, buf, sizeof buf);
        if (n == 0 || (n < 0 && errno != EAGAIN)) {
            fail(ep, c);
            return;
        }
        if (n < 0)
            return;
        const uint8_t *p = buf;
        size_t len = (size_t)n;
        if (c->state == HANDSHAKE) { /* collect the 101 response head */
            size_t i = 0;
            while (i < len && c->head_len < sizeof c->head - 1) {
                c->head[c->head_len++] = (char)p[i++];
                c->head[c->head_len] = 0;
                if (c->head_len >= 4 && !memcmp(c->head + c->head_len - 4, "\r\n\r\n", 4))
                    break;
            }
            if (c->head_len < 4 || memcmp(c->head + c->head_len - 4, "\r\n\r\n", 4)) {
                if (c->head_len >= sizeof c->head - 1)
                    fail(ep, c);
                continue;
            }
            if (strncmp(c->head, "HTTP/1.1 101", 12)) {
                fail(ep, c);
                return;
            }
            c->state = OPEN;
            c->hdr_need = 2;
            p += i;
            len -= i;
            send_frame(ep, c);
        }
        on_frame_bytes(ep, c, p, len);
        if ((size_t)n < sizeof buf || c->state == DEAD)
            return;
    }
}

static uint64_t percentile(double q)
{
    uint64_t want = (uint64_t)(q * (double)msgs), seen = 0;
    if (msgs == 0)
        return 0;
    for (uint64_t i = 0; i <= HIST_US; i++) {
        seen += hist[i];
        if (seen > want)
            return i;
    }
    return HIST_US;
}

int main(int argc, char **argv)
{
    const char *host = "127.0.0.1", *path = "/ws";
    int port = 0, nconns = 50;
    double duration = 5;
    msg_size = 64;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--host")) host = argv[i + 1];
        else if (!strcmp(argv[i], "--path")) path = argv[i + 1];
        else if (!strcmp(argv[i], "--conns")) nconns = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--size")) msg_size = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--duration")) duration = atof(argv[i + 1]);
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (port <= 0 || nconns <= 0) {
        fprintf(stderr, "usage: %s --port N [--conns C] [--size BYTES] [--duration S]\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    build_frame(msg_size);

    char req[512];
    int reqlen = snprintf(req, sizeof req,
                          "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\n"
                          "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                          "Sec-WebSocket-Version: 13\r\n\r\n", path, host, port);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &sa.sin_addr);
    int ep = epoll_create1(0), one = 1;
    struct conn *conns = calloc((size_t)nconns, sizeof *conns);
    for (int i = 0; i < nconns; i++) {
        struct conn *c = &conns[i];
        c->fd = socket(AF_INET, SOCK_STREAM, 0);
        /* Blocking connect and handshake write keep setup simple; the
         * measured phase is non-blocking. */
        if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof sa) ||
            write(c->fd, req, (size_t)reqlen) != reqlen) {
            errors++;
            if (c->fd >= 0)
                close(c->fd);
            c->state = DEAD;
            continue;
        }
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    }

    /* Warm up for a tenth of the run (handshakes, first messages), then count. */
    double t0 = now(), warm = duration * 0.1, start = 0, end = t0 + warm + duration;
    struct epoll_event evs[256];
    for (;;) {
        double t = now();
        if (!counting && t >= t0 + warm) {
            counting = 1;
            start = t;
        }
        if (t >= end)
            break;
        int n = epoll_wait(ep, evs, 256, 10);
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if (c->state == DEAD)
                continue;
            if (evs[i].events & EPOLLOUT) {
                send_frame(ep, c);
                if (c->state != DEAD && c->sent == frame_len)
                    set_out(ep, c, 0);
            }
            if (c->state != DEAD && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                on_readable(ep, c);
        }
    }
    double secs = now() - start;
    int stuck = 0;
    for (int i = 0; i < nconns; i++)
        stuck += conns[i].state == HANDSHAKE; /* never upgraded: count as errors */
    printf("{\"msgs\":%llu,\"secs\":%.3f,\"msgs_per_s\":%.1f,\"p50_us\":%llu,\"p99_us\":%llu,"
           "\"errors\":%llu}\n",
           (unsigned long long)msgs, secs, msgs / secs, (unsigned long long)percentile(0.5),
           (unsigned long long)percentile(0.99), (unsigned long long)(errors + (uint64_t)stuck));
    return 0;
}
