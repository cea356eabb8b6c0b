/* reset.c - a peer that closed and then resets (our bytes reached a closed
 * socket) leaves a socket that reads EOF forever and reports EPOLLERR: the
 * connection must close with a CLOSE event, not keep the loop spinning until
 * the idle timeout. Raw TCP and WebSocket (HTTP is in reply.c). */
#include "tap.h"
#define NSVNET_ARENA (1 << 16)
#include "nsvnet.h"
#include <nanosrv.h>
#include <poll.h>
#include <unistd.h>

/* Poll until an event of type (with flag bits, if any) comes; its conn id. */
static uint64_t wait_for(nsv_server *s, uint32_t type, uint32_t flags)
{
    nsv_event e;
    return wait_match(s, type, NULL, flags, &e, 100, 20) ? e.conn : 0;
}

static int tcp_port, http_port;

/* Listeners and routes first: a sharded server takes none once it runs. */
static nsv_server *setup(nsv_server *s)
{
    tcp_port = nsv_listener_port(s, nsv_listen(s, "tcp://127.0.0.1:0", 17));
    http_port = nsv_listener_port(s, nsv_listen(s, "http://127.0.0.1:0", 18));
    nsv_route(s, "GET", 3, "/ws", 3, 1, NSV_ROUTE_WEBSOCKET);
    return s;
}

static void raw_tcp(nsv_server *s, const char *what)
{
    int fd = client(tcp_port);
    uint64_t id = wait_for(s, NSV_EV_TCP_OPEN, 0);
    ok(id != 0, "%s: raw TCP open", what);
    close(fd); /* FIN: the host hears EOF and may still send */
    ok(wait_for(s, NSV_EV_TCP_DATA, NSV_EVF_EOF) == id, "%s: EOF seen", what);
    is_int(nsv_send(s, id, "late", 4), NSV_OK, "%s: the host sends after it", what);
    ok(wait_conn(s, NSV_EV_CLOSE, id, 100, 20), "%s: the peer's reset closes the connection", what);
}

static void websocket(nsv_server *s, const char *what)
{
    int fd = client(http_port);
    static const char up[] = "GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
    ssize_t w = write(fd, up, sizeof up - 1);
    (void)w;
    uint64_t id = wait_for(s, NSV_EV_WS_OPEN, 0);
    ok(id != 0, "%s: WebSocket open", what);
    char buf[512];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    for (int i = 0; i < 50 && poll(&p, 1, 20) == 0; i++)
        nsv_poll(s, evs, 64, arena, sizeof arena, 5);
    ssize_t r = read(fd, buf, sizeof buf); /* the 101 */
    ok(r > 12 && !memcmp(buf, "HTTP/1.1 101", 12), "%s: 101 read", what);
    close(fd);
    ok(wait_conn(s, NSV_EV_CLOSE, id, 100, 20), "%s: a WebSocket that drops without a close frame closes", what);
}

int main(void)
{
    nsv_server *s = setup(nsv_server_new());
    raw_tcp(s, "single loop");
    websocket(s, "single loop");
    nsv_server_free(s);
    s = setup(nsv_server_new_sharded(2));
    raw_tcp(s, "sharded");
    websocket(s, "sharded");
    nsv_server_free(s);
    return done_testing();
}
