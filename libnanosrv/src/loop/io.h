/* io.h - where a connection's bytes meet its socket, so TLS can sit in
 * between (the other writes to a socket: nsv__conn_send_direct, which skips
 * TLS connections, sendfile in loop.c, and the 503 of a connection refused
 * before it had a record). Same contract as recv/send: > 0 bytes, 0 EOF
 * (recv), -1 with errno (EAGAIN when the call would block).
 *
 * NSV_M_BYTES_IN / NSV_M_BYTES_OUT count here, so a TLS connection counts
 * its plain text (records, handshakes and alerts are not counted). */
#ifndef NSV_LOOP_IO_H
#define NSV_LOOP_IO_H

#include "loop.h"
#include "metrics.h"
#include "../tls/tls.h"
#include <sys/socket.h>

static inline ssize_t nsv__io_recv(nsv__loop *l, nsv__conn *c, char *buf, size_t n)
{
    ssize_t r;
#ifdef NSV_WITH_MBEDTLS
    if (c->tls)
        r = nsv__tls_recv(l, c, buf, n);
    else
#endif
        r = recv(c->fd, buf, n, 0);
    if (r > 0)
        nsv__metric_add(l, NSV_M_BYTES_IN, (uint64_t)r);
    return r;
}

static inline ssize_t nsv__io_send(nsv__loop *l, nsv__conn *c, const char *buf, size_t n)
{
    ssize_t r;
    if (c->h2s) /* an HTTP/2 stream: its session frames the bytes */
        return l->srv->h2_hooks->send(l, c, buf, n);
#ifdef NSV_WITH_MBEDTLS
    if (c->tls)
        r = nsv__tls_send(l, c, buf, n);
    else
#endif
        r = send(c->fd, buf, n, MSG_NOSIGNAL);
    if (r > 0)
        nsv__metric_add(l, NSV_M_BYTES_OUT, (uint64_t)r);
    return r;
}

#endif
