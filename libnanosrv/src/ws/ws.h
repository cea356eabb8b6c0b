/* ws.h - the WebSocket layer: upgrades of HTTP requests and the frames of
 * upgraded connections (ws_conn.c), over frame.c, utf8.c, handshake.c. */
#ifndef NSV_WS_H
#define NSV_WS_H

#include "../loop/loop.h"
#include "../http/parse.h"

void nsv__ws_check_request(nsv__conn *c, const nsv__request *r);
int nsv__ws_accept(nsv__loop *l, nsv__conn *c, const char *extra, size_t elen);
/* 1 if upgrading c (a valid handshake, nsv__ws_check_request) without host
 * header lines agrees to permessage-deflate: WS_OPEN's NSV_EVF_DEFLATE. */
/* NSV__OP_CONTINUE reached a WebSocket: the host polled again (sharded
 * pull mode); a failure waiting for its turn goes on (ws_conn.c fail_soon). */
void nsv__ws_turn(nsv__loop *l, nsv__conn *c);
int nsv__ws_deflate_agreed(const nsv_server *s, const nsv__conn *c);
int nsv__ws_send(nsv__loop *l, nsv__conn *c, int opcode, const char *data, size_t len);
int nsv__ws_close(nsv__loop *l, nsv__conn *c, int code, const char *reason, size_t len);
int nsv__ws_broadcast_loop(nsv__loop *l, int32_t route, int opcode, const char *data, size_t len);
/* The client side (nsv_ws_connect): its connection becomes a WebSocket once
 * the server's 101 was checked. 0 or NSV_ENOMEM. */
int nsv__ws_client_open(nsv__loop *l, nsv__conn *c);

#endif
