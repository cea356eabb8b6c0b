/* tcp.h - raw TCP streams (tcp.c): accepted and outbound connections. */
#ifndef NSV_TCP_H
#define NSV_TCP_H

#include "../loop/loop.h"

/* Operations of nsv__tcp_op (and their codes among the connection calls). */
enum { NSV__OP_TCP_SEND = 20, NSV__OP_TCP_SHUTDOWN, NSV__OP_TCP_ABORT, NSV__OP_TCP_PAUSE, NSV__OP_TCP_WATER };

int nsv__tcp_send(nsv__loop *l, nsv__conn *c, const char *data, size_t len);
int nsv__tcp_op(nsv__loop *l, nsv__conn *c, int op, int64_t a, int64_t b);
int64_t nsv__tcp_connect_here(nsv__loop *l, const char *url, size_t len);

#endif
