/* ws.h - the WebSocket layer: upgrades of HTTP requests and the frames of
 * upgraded connections (ws_conn.c), over frame.c, utf8.c, handshake.c. */
#ifndef NSV_WS_H
#define NSV_WS_H

#include "../loop/loop.h"
#include "../http/parse.h"

void nsv__ws_check_request(nsv__conn *c, const nsv__request *r);
int nsv__ws_accept(nsv__loop *l, nsv__conn *c, const char *extra, size_t elen);
int nsv__ws_send(nsv__loop *l, nsv__conn *c, int opcode, const char *data, size_t len);
int nsv__ws_close(nsv__loop *l, nsv__conn *c, int code, const char *reason, size_t len);
int nsv__ws_broadcast_loop(nsv__loop *l, int32_t route, int opcode, const char *data, size_t len);
/* The client side (nsv_ws_connect): its connection becomes a WebSocket once
 * the server's 101 was checked. 0 or NSV_ENOMEM. */
int nsv__ws_client_open(nsv__loop *l, nsv__conn *c);

#endif
