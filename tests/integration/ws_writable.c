/* ws_writable.c - TCP_WRITABLE on WebSockets once the host set water
 * marks: a client that stops reading makes queued output pass the high
 * mark (code 0, before nsv_ws_send would say NSV_EAGAIN); reading again
 * brings it down to the low mark (code 1). Without marks a WebSocket gets
 * no such event (opt-in: older hosts see no new event type). Single loop
 * and sharded. */
#include "tap.h"
#include "nsvnet.h"
#include <fcntl.h>
#include <stdio.h>

static const char handshake[] = "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

/* A raw client that has done the handshake; returns the server's conn id. */
static uint64_t ws_client(nsv_server *s, int port, int *fd)
{
    *fd = client(port);
    sendall(*fd, handshake);
    nsv_event e;
    if (!wait_event(s, NSV_EV_WS_OPEN, &e, 200, 20))
        return 0;
    char buf[512];
    read_all(*fd, buf, sizeof buf, 2000, 50); /* the 101 */
    fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) | O_NONBLOCK);
    return e.conn;
}

/* Send 64 KiB messages (the client reads nothing) until a TCP_WRITABLE
 * with `code` comes for conn, at most `max` sends; the send count, or -1. */
static int until_writable(nsv_server *s, uint64_t conn, int code, int max, int *eagain)
{
    static char msg[65536];
    for (int i = 0; i < max; i++) {
        int r = nsv_ws_send(s, conn, NSV_WS_BINARY, msg, sizeof msg);
        if (r == NSV_EAGAIN)
            (*eagain)++;
        int n = nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, 1);
        for (int k = 0; k < n; k++)
            if (evs[k].type == NSV_EV_TCP_WRITABLE && evs[k].conn == conn && evs[k].code == code)
                return i + 1;
        if (r == NSV_EAGAIN)
            break;
    }
    return -1;
}

static void run(const char *how, nsv_server *s)
{
    int port;
    http_listen(s, &port);
    nsv_route(s, "GET", 3, "/ws", 3, 1, NSV_ROUTE_WEBSOCKET);
    nsv_set_int(s, NSV_OPT_MAX_OUTPUT, 4 << 20);
    int fd;
    uint64_t c = ws_client(s, port, &fd);
    ok(c != 0, "%s: WebSocket open", how);
    is_int(nsv_set_water_marks(s, c, 256 << 10, 64 << 10), NSV_OK, "%s: water marks on a WebSocket", how);
    int eagain = 0;
    int sends = until_writable(s, c, 0, 400, &eagain);
    ok(sends > 0, "%s: TCP_WRITABLE code 0 once the output passed the high mark (%d sends)", how, sends);
    if (!strcmp(how, "single loop"))
        is_int(eagain, 0, "%s: before any NSV_EAGAIN", how);
    int got1 = 0;
    static char sink[1 << 16];
    for (int i = 0; i < 2000 && !got1; i++) {
        while (recv(fd, sink, sizeof sink, 0) > 0) {
        }
        int n = nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, 2);
        for (int k = 0; k < n; k++)
            got1 |= evs[k].type == NSV_EV_TCP_WRITABLE && evs[k].conn == c && evs[k].code == 1;
    }
    ok(got1, "%s: the client reads: TCP_WRITABLE code 1 at the low mark", how);
    close(fd);

    /* No marks set: no TCP_WRITABLE on a WebSocket. */
    uint64_t c2 = ws_client(s, port, &fd);
    eagain = 0;
    int none = until_writable(s, c2, 0, 200, &eagain);
    is_int(none, -1, "%s: without water marks no TCP_WRITABLE for a WebSocket", how);
    close(fd);
    is_int(nsv_set_water_marks(s, c2, 10, 20), NSV_ERANGE, "%s: low above high -> ERANGE", how);
}

int main(void)
{
    nsv_server *s = nsv_server_new();
    run("single loop", s);
    nsv_server_free(s);
    s = nsv_server_new_sharded(2);
    run("sharded", s);
    nsv_server_free(s);
    return done_testing();
}
