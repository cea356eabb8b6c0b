/* io.h - where a connection's bytes meet its socket, so TLS can sit in
 * between (the other writes to a socket: nsv__conn_send_direct, which skips
 * TLS connections, and the 503 of a connection refused before it had a
 * record). Same contract as recv/send: > 0 bytes, 0 EOF (recv), -1
 * with errno (EAGAIN when the call would block). */
#ifndef NSV_LOOP_IO_H
#define NSV_LOOP_IO_H

#include "loop.h"
#include "../tls/tls.h"
#include <sys/socket.h>

static inline ssize_t nsv__io_recv(nsv__loop *l, nsv__conn *c, char *buf, size_t n)
{
#ifdef NSV_WITH_MBEDTLS
    if (c->tls)
        return nsv__tls_recv(l, c, buf, n);
#endif
    (void)l;
    return recv(c->fd, buf, n, 0);
}

static inline ssize_t nsv__io_send(nsv__loop *l, nsv__conn *c, const char *buf, size_t n)
{
#ifdef NSV_WITH_MBEDTLS
    if (c->tls)
        return nsv__tls_send(l, c, buf, n);
#endif
    (void)l;
    return send(c->fd, buf, n, MSG_NOSIGNAL);
}

#endif
