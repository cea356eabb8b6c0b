/* tcp.h - raw TCP streams (tcp.c): accepted and outbound connections. */
#ifndef NSV_TCP_H
#define NSV_TCP_H

#include "../loop/loop.h"

/* Operations of nsv__tcp_op (and their codes among the connection calls). */
enum { NSV__OP_TCP_SEND = 20, NSV__OP_TCP_SHUTDOWN, NSV__OP_TCP_ABORT, NSV__OP_TCP_PAUSE, NSV__OP_TCP_WATER,
       NSV__OP_TLS_UPGRADE };

int nsv__tcp_send(nsv__loop *l, nsv__conn *c, const char *data, size_t len);
int nsv__tcp_op(nsv__loop *l, nsv__conn *c, int op, int64_t a, int64_t b);
int64_t nsv__tcp_connect_here(nsv__loop *l, const char *url, size_t len);
int64_t nsv__tcp_connect_as(nsv__loop *l, const char *url, size_t len, int32_t origin, uint64_t tag);
/* A connect for protocol then (above raw TCP), whose state hs rides in
 * nsv__conn.hs: once TCP is up then->on_open runs (then does its own TLS for
 * tls://, whose host is in tls_host); if the connect fails first, ERROR and
 * CLOSE go to the host as for nsv_connect and then->on_close runs. */
int64_t nsv__tcp_connect_then(nsv__loop *l, const char *url, size_t len, const nsv__proto *then, void *hs);
/* nsv_tls_upgrade on the owning loop (arguments already checked). */
int nsv__tcp_tls_upgrade(nsv__loop *l, nsv__conn *c, const char *name, size_t len, uint32_t flags);

#endif
