/* tcp_load.c - raw TCP echo load generator. Each of N connections writes one
 * message, reads the whole echo back, and repeats, so the rate is bounded by
 * the server. Usage: tcp_load --port N [--conns 1] [--size 64] [--duration 5]
 * Prints one JSON line: msgs, msgs_per_s, mbytes_per_s, p50_us, p99_us, errors. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HIST_US 200000

struct conn {
    int fd;
    size_t sent, got;
    double t0;
};

static uint32_t hist[HIST_US + 1];

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double pct(uint64_t total, double p)
{
    uint64_t want = (uint64_t)(total * p), acc = 0;
    for (int i = 0; i <= HIST_US; i++)
        if ((acc += hist[i]) > want)
            return i;
    return HIST_US;
}

int main(int argc, char **argv)
{
    int port = 0, nconns = 1;
    size_t size = 64;
    double duration = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--conns")) nconns = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--size")) size = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--duration")) duration = atof(argv[i + 1]);
    }
    if (!port || nconns < 1 || size < 1) {
        fprintf(stderr, "usage: %s --port N [--conns C] [--size BYTES] [--duration S]\n", argv[0]);
        return 2;
    }
    char *msg = malloc(size), *buf = malloc(1 << 20);
    memset(msg, 'm', size);
    struct conn *cs = calloc((size_t)nconns, sizeof *cs);
    int ep = epoll_create1(0);
    uint64_t msgs = 0, errors = 0;
    double start = now(), end = start + duration;
    for (int i = 0; i < nconns; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
            errors++;
            close(fd);
            cs[i].fd = -1;
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        cs[i].fd = fd;
        cs[i].t0 = now();
        ssize_t w = send(fd, msg, size, MSG_DONTWAIT | MSG_NOSIGNAL);
        cs[i].sent = w > 0 ? (size_t)w : 0;
        struct epoll_event ev = {.events = EPOLLIN | (cs[i].sent < size ? EPOLLOUT : 0), .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    }
    struct epoll_event evs[256];
    while (now() < end) {
        int n = epoll_wait(ep, evs, 256, 100);
        for (int k = 0; k < n; k++) {
            struct conn *c = &cs[evs[k].data.u32];
            if (c->fd < 0)
                continue;
            if ((evs[k].events & EPOLLOUT) && c->sent < size) {
                ssize_t w = send(c->fd, msg + c->sent, size - c->sent, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (w > 0)
                    c->sent += (size_t)w;
            }
            if (evs[k].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
                ssize_t r = recv(c->fd, buf, 1 << 20, MSG_DONTWAIT);
                if (r <= 0 && !(r < 0 && errno == EAGAIN)) {
                    errors++;
                    close(c->fd);
                    c->fd = -1;
                    continue;
                }
                if (r > 0)
                    c->got += (size_t)r;
            }
            if (c->got >= size) { /* one round trip done: next message */
                double us = (now() - c->t0) * 1e6;
                hist[us < HIST_US ? (int)us : HIST_US]++;
                msgs++;
                c->got -= size;
                c->t0 = now();
                ssize_t w = send(c->fd, msg, size, MSG_DONTWAIT | MSG_NOSIGNAL);
                c->sent = w > 0 ? (size_t)w : 0;
            }
            struct epoll_event ev = {.events = EPOLLIN | (c->sent < size ? EPOLLOUT : 0), .data.u32 = evs[k].data.u32};
            epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
        }
    }
    double secs = now() - start;
    printf("{\"msgs\":%llu,\"secs\":%.3f,\"msgs_per_s\":%.1f,\"mbytes_per_s\":%.2f,\"p50_us\":%.0f,\"p99_us\":%.0f,\"errors\":%llu}\n",
           (unsigned long long)msgs, secs, msgs / secs, msgs * (double)size * 2 / secs / 1e6, pct(msgs, 0.5),
           pct(msgs, 0.99), (unsigned long long)errors);
    return 0;
}
