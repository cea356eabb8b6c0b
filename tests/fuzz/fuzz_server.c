/* fuzz_server.c - stateful target: one whole connection through the real
 * server, in memory. A single-loop server adopts one end of a socketpair;
 * the input is written on the other end in pieces while the host side
 * answers every request (plain, streamed, WebSocket upgrade) and echoes
 * WebSocket messages. Output is read and discarded. Everything is bounded.
 *
 * Input layout: byte 0 = settings, byte 1 = piece size, the rest = bytes the
 * client sends.
 *   settings bit 0: small limits (head 256, body 64, 4 headers, URI 64,
 *                   WebSocket message 64)
 *   settings bit 1: NSV_OPT_AUTO_404 (only /echo and /ws are routed)
 *   settings bit 2: answer odd-length paths with a streamed reply
 *   settings bit 3: half-close the client's write side after the input
 *   settings bit 4: the client reads nothing until the end
 *   settings bit 5: answer WebSocket messages with a close handshake
 *   settings bit 6: NSV_OPT_WS_CONTROL_EVENTS
 *   piece size: 0 = everything at once, else that many bytes per write. */
#include "fuzz_conn.h"

#include <string.h>

enum { ROUTE_ECHO = 1, ROUTE_WS = 2, ROUTE_UP = 3 };


static void answer(nsv_server *s, const nsv_event *e, unsigned cfg)
{
    const char *a = fuzz_arena;
    switch (e->type) {
    case NSV_EV_REQUEST:
        if (e->flags & NSV_EVF_UPGRADE && e->route == ROUTE_UP) {
            if (nsv_ws_upgrade(s, e->conn, NULL, 0) == NSV_OK)
                return;
            nsv_reply(s, e->conn, 400, NULL, 0, NULL, 0); /* ESTATE if already answered */
            return;
        }
        if ((cfg & 4) && (e->path_len & 1)) {
            nsv_reply_start(s, e->conn, 200, "Content-Type: text/plain\r\n", 26);
            nsv_send_chunk(s, e->conn, a + e->path_off, e->path_len);
            nsv_send_chunk(s, e->conn, a + e->body_off, e->body_len);
            nsv_reply_end(s, e->conn);
            return;
        }
        nsv_reply(s, e->conn, e->route < 0 ? 404 : 200, "X-Fuzz: 1\r\n", 11, a + e->body_off,
                  e->body_len);
        return;
    case NSV_EV_WS_MESSAGE:
        if (cfg & 32)
            nsv_ws_close(s, e->conn, 1000, "bye", 3);
        else
            nsv_ws_send(s, e->conn, e->code, a + e->body_off, e->body_len);
        return;
    case NSV_EV_WS_PING:
        nsv_ws_send(s, e->conn, NSV_WS_PONG, a + e->body_off, e->body_len > 125 ? 125 : e->body_len);
        return;
    default:
        return;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size > 1 << 16)
        return 0;
    unsigned cfg = data[0];
    size_t piece = data[1] ? data[1] : size;
    data += 2;
    size -= 2;

    nsv_server *s = nsv_server_new_ex(-1, NULL, NULL);
    if (!s)
        return 0;
    if (cfg & 1) {
        nsv_set_int(s, NSV_OPT_MAX_HEADER_BYTES, 256);
        nsv_set_int(s, NSV_OPT_MAX_BODY, 64);
        nsv_set_int(s, NSV_OPT_MAX_HEADERS, 4);
        nsv_set_int(s, NSV_OPT_MAX_URI, 64);
        nsv_set_int(s, NSV_OPT_WS_MAX_MESSAGE, 64);
    }
    if (cfg & 2)
        nsv_set_int(s, NSV_OPT_AUTO_404, 1);
    if (cfg & 64)
        nsv_set_int(s, NSV_OPT_WS_CONTROL_EVENTS, 1);
    nsv_route(s, "POST", 4, "/echo", 5, ROUTE_ECHO, 0);
    nsv_route(s, "GET", 3, "/ws", 3, ROUTE_WS, NSV_ROUTE_WEBSOCKET);
    nsv_route(s, "GET", 3, "/up", 3, ROUTE_UP, 0);
    int cfd = fuzz_adopt(s);
    if (cfd >= 0)
        fuzz_feed(s, cfg, cfd, data, size, piece, answer);
    nsv_server_free(s);
    return 0;
}
