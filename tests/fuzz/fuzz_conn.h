/* fuzz_conn.h - the harness the stateful targets share (fuzz_server.c,
 * fuzz_h2.c): one connection adopted by a single-loop server from a
 * socketpair, the input written on the client end in pieces while the
 * target's pump answers what the server hands out, then the ending
 * (optional half-close, the output drained, close). Everything is bounded. */
#ifndef NSV_FUZZ_CONN_H
#define NSV_FUZZ_CONN_H

#include "core/server.h"

#include <errno.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

/* The target's answer to one event the server handed out. */
typedef void (*fuzz_answer_fn)(nsv_server *s, const nsv_event *e, unsigned cfg);

static char fuzz_sink[1 << 16];
static nsv_event fuzz_evs[64];
static char fuzz_arena[1 << 18]; /* event data: answers read from it */

static void drain_client(int fd)
{
    for (int i = 0; i < 64; i++)
        if (recv(fd, fuzz_sink, sizeof fuzz_sink, MSG_DONTWAIT) <= 0)
            return;
}

/* Runs the loop without blocking and answers what came out (reading the
 * client end when read_out). < 0 stops the input. */
static int fuzz_pump(nsv_server *s, unsigned cfg, int cfd, int read_out, fuzz_answer_fn answer)
{
    int total = 0;
    for (int round = 0; round < 16; round++) {
        int n = nsv_poll(s, fuzz_evs, 64, fuzz_arena, sizeof fuzz_arena, 0);
        if (n < 0)
            return -1; /* NSV_ENOBUFS cannot happen with these limits; stop the input */
        for (int i = 0; i < n; i++)
            answer(s, &fuzz_evs[i], cfg);
        if (read_out)
            drain_client(cfd);
        total += n;
        if (n == 0 && round > 0)
            break;
    }
    return total;
}

/* An HTTP listener (for the connection's listener index) and one adopted
 * connection: the client end, or -1 (the caller frees the server). */
static int fuzz_adopt(nsv_server *s)
{
    int sv[2];
    if (nsv_listen(s, "http://127.0.0.1:0", 18) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        return -1;
    struct sockaddr_storage ss = {.ss_family = AF_UNIX};
    atomic_fetch_add(&s->nconns, 1); /* as on_accept does before adopting */
    nsv__loop_adopt(s->loops[0], sv[0], 0, &ss);
    return sv[1];
}

/* Writes data[0..size) in pieces of piece bytes, pumping after each;
 * cfg bit 3 half-closes after the input, bit 4 reads nothing until the end.
 * Closes cfd. */
static void fuzz_feed(nsv_server *s, unsigned cfg, int cfd, const uint8_t *data, size_t size, size_t piece,
                      fuzz_answer_fn answer)
{
    int read_out = !(cfg & 16);
    size_t off = 0;
    for (int step = 0; off < size && step < 4096; step++) {
        size_t n = size - off < piece ? size - off : piece;
        ssize_t w = send(cfd, data + off, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0)
            off += (size_t)w;
        else if (w < 0 && errno != EAGAIN && errno != EINTR)
            break; /* the server closed the connection */
        if (fuzz_pump(s, cfg, cfd, read_out, answer) < 0)
            break;
        if (w < 0 && !read_out)
            drain_client(cfd); /* full both ways: give up not reading */
    }
    if (cfg & 8)
        shutdown(cfd, SHUT_WR);
    for (int i = 0; i < 8; i++) {
        drain_client(cfd);
        fuzz_pump(s, cfg, cfd, 1, answer);
    }
    close(cfd);
    fuzz_pump(s, cfg, -1, 0, answer);
}

#endif
