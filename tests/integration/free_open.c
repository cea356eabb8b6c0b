/* free_open.c - nsv_server_free with every kind of connection still open
 * (a WebSocket, a request waiting for its reply, a streamed reply, raw TCP
 * both ways) frees all of it: LeakSanitizer checks the ASan build. */
#include "tap.h"
#define NSVNET_ARENA (1 << 16)
#include "nsvnet.h"
#include <nanosrv.h>
#include <unistd.h>

static int count_type(nsv_server *s, uint32_t type, int want)
{
    int got = 0;
    for (int t = 0; t < 100 && got < want; t++) {
        int n = nsv_poll(s, evs, 64, arena, sizeof arena, 20);
        for (int i = 0; i < n; i++) {
            if (evs[i].type != type)
                continue;
            got++;
            if (type == NSV_EV_REQUEST && evs[i].path_len == 7) /* "/stream" */
                nsv_reply_start(s, evs[i].conn, 200, NULL, 0), nsv_send_chunk(s, evs[i].conn, "x", 1);
        }
    }
    return got;
}

static void run(nsv_server *s, const char *what)
{
    int h = nsv_listen(s, "http://127.0.0.1:0", 18);
    int t = nsv_listen(s, "tcp://127.0.0.1:0", 17);
    ok(nsv_route(s, "GET", 3, "/ws", 3, 1, NSV_ROUTE_WEBSOCKET) == 0, "%s: routes", what);
    int hp = nsv_listener_port(s, h), tp = nsv_listener_port(s, t);
    int fds[4];
    fds[0] = client(hp);
    sends(fds[0], "GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n");
    ok(count_type(s, NSV_EV_WS_OPEN, 1) == 1, "%s: a WebSocket is open", what);
    fds[1] = client(hp);
    sends(fds[1], "GET /pending HTTP/1.1\r\nHost: t\r\n\r\n");
    fds[2] = client(hp);
    sends(fds[2], "GET /stream HTTP/1.1\r\nHost: t\r\n\r\n");
    ok(count_type(s, NSV_EV_REQUEST, 2) == 2, "%s: a request waits, a reply streams", what);
    fds[3] = client(tp);
    ok(count_type(s, NSV_EV_TCP_OPEN, 1) == 1, "%s: raw TCP in", what);
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", tp);
    ok(nsv_connect(s, url, strlen(url)) > 0, "%s: raw TCP out", what);
    ok(count_type(s, NSV_EV_TCP_CONNECTED, 1) == 1, "%s: connected", what);
    nsv_server_free(s);
    ok(1, "%s: freed with all of them open", what);
    for (int i = 0; i < 4; i++)
        close(fds[i]);
}

int main(void)
{
    run(nsv_server_new(), "single loop");
    run(nsv_server_new_sharded(2), "sharded");
    return done_testing();
}
