/* nsvnet.h - loopback helpers for the C integration tests: a blocking
 * client connection, sends, bounded reads (plain, or polling the server
 * meanwhile), bounded waits for an event, an HTTP listener on an ephemeral
 * port.
 *
 * The event waits and polling reads poll into the file's `evs` and `arena`,
 * defined here: NSVNET_EVS events (default 64) and NSVNET_ARENA bytes
 * (default 1 MiB); define either before including to change it, or
 * NSVNET_NO_BUFFERS for a file with buffers of its own (and without those
 * helpers). */
#ifndef NSV_NSVNET_H
#define NSV_NSVNET_H
#include <nanosrv.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define NSVNET_FN static __attribute__((unused))

#ifndef NSVNET_NO_BUFFERS
#ifndef NSVNET_EVS
#define NSVNET_EVS 64
#endif
#ifndef NSVNET_ARENA
#define NSVNET_ARENA (1 << 20)
#endif

__attribute__((unused)) static nsv_event evs[NSVNET_EVS];
__attribute__((unused)) static char arena[NSVNET_ARENA];
#endif

/* A blocking TCP connection to 127.0.0.1:port, -1 if it is refused. */
NSVNET_FN int client(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One write of the string (whatever part of it the socket takes). */
NSVNET_FN void sends(int fd, const char *s)
{
    ssize_t w = write(fd, s, strlen(s));
    (void)w;
}

/* All n bytes, no SIGPIPE; stops quietly at the first failed send. */
NSVNET_FN void sendn(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        c += w;
        n -= (size_t)w;
    }
}

/* The whole string, as sendn. */
NSVNET_FN void sendall(int fd, const char *s) { sendn(fd, s, strlen(s)); }

/* Listens s on http://127.0.0.1:0; the port in *port, the listener id
 * returned. */
NSVNET_FN int http_listen(nsv_server *s, int *port)
{
    int lid = nsv_listen(s, "http://127.0.0.1:0", 18);
    *port = nsv_listener_port(s, lid);
    return lid;
}

/* Reads what fd has into buf (NUL-terminated, at most cap - 1 bytes): waits
 * up to first_ms for the first bytes, then up to then_ms for each more,
 * until EOF or a full buffer. Returns the length. */
NSVNET_FN int read_all(int fd, char *buf, size_t cap, int first_ms, int then_ms)
{
    size_t n = 0;
    int ms = first_ms;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (n < cap - 1 && poll(&p, 1, ms) > 0) {
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        ms = then_ms;
    }
    buf[n] = 0;
    return (int)n;
}

/* Up to `rounds` rounds of: step(ctx, ms) (if step is set), then a wait of
 * up to ms for fd and one read. Stops at EOF, a full buffer (cap - 1 bytes)
 * or, if stop is set, once buf holds it. buf is NUL-terminated; returns the
 * length. */
NSVNET_FN int read_stepping(int fd, char *buf, size_t cap, int rounds, int ms, const char *stop,
                            void (*step)(void *ctx, int ms), void *ctx)
{
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < rounds && n < cap - 1; i++) {
        if (step)
            step(ctx, ms);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, ms) > 0) {
            ssize_t r = read(fd, buf + n, cap - 1 - n);
            if (r <= 0)
                break;
            n += (size_t)r;
            buf[n] = 0;
            if (stop && strstr(buf, stop))
                break;
        }
    }
    buf[n] = 0;
    return (int)n;
}

#ifndef NSVNET_NO_BUFFERS
NSVNET_FN void nsvnet_poll_step(void *s, int ms) { nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, ms); }

/* read_stepping with one nsv_poll of s (events dropped) as the step: a
 * single loop sends only while it is polled. */
NSVNET_FN int read_polling(nsv_server *s, int fd, char *buf, size_t cap, int rounds, int ms,
                           const char *stop)
{
    return read_stepping(fd, buf, cap, rounds, ms, stop, s ? nsvnet_poll_step : NULL, s);
}

/* Polls s up to `tries` times, each waiting up to ms, until an event of
 * `type` comes that has all the `flags` bits and, if conn is set, is of
 * connection *conn; copies it to *out (if set) and returns 1, else 0. The
 * other events polled are dropped. */
NSVNET_FN int wait_match(nsv_server *s, uint32_t type, const uint64_t *conn, uint32_t flags,
                         nsv_event *out, int tries, int ms)
{
    for (int t = 0; t < tries; t++) {
        int n = nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, ms);
        for (int i = 0; i < n; i++)
            if (evs[i].type == type && (evs[i].flags & flags) == flags &&
                (!conn || evs[i].conn == *conn)) {
                if (out)
                    *out = evs[i];
                return 1;
            }
    }
    return 0;
}

/* wait_match for an event of `type` of any connection. */
NSVNET_FN int wait_event(nsv_server *s, uint32_t type, nsv_event *out, int tries, int ms)
{
    return wait_match(s, type, NULL, 0, out, tries, ms);
}

/* wait_match for an event of `type` of connection conn. */
NSVNET_FN int wait_conn(nsv_server *s, uint32_t type, uint64_t conn, int tries, int ms)
{
    return wait_match(s, type, &conn, 0, NULL, tries, ms);
}
#endif /* NSVNET_NO_BUFFERS */

#endif
