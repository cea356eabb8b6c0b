/* http_client.h - the HTTP/1.1 client (http_client.c): what the loop and the
 * outbound connect path (net/tcp.c, tls/tls.c) tell it about the
 * connections it owns (nsv__conn.httpc), through nsv__conn_hooks. */
#ifndef NSV_HTTP_CLIENT_H
#define NSV_HTTP_CLIENT_H

#include "../loop/loop.h"

extern const nsv__proto nsv__proto_httpc;

/* The connect (and TLS handshake) of a client connection finished. */
void nsv__httpc_connected(nsv__loop *l, nsv__conn *c);
/* A client connection failed before it was up: fail its request with code. */
void nsv__httpc_conn_error(nsv__loop *l, nsv__conn *c, int code, const char *msg, size_t n);
/* nsv__conn_close of a client connection, before its slot is freed; then,
 * with the slot free, nsv__httpc_after_close starts what waited for it. */
void nsv__httpc_closed(nsv__loop *l, nsv__conn *c);
void nsv__httpc_after_close(nsv__loop *l, int32_t origin);
/* The drain ended (or the loop stops): fail requests still waiting. */
void nsv__httpc_stop(nsv__loop *l);
void nsv__httpc_loop_free(nsv__loop *l);
/* The above as the table the server installs in nsv_server.httpc_hooks. */
extern const nsv__conn_hooks nsv__httpc_hooks;

#endif
