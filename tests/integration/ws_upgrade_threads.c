/* ws_upgrade_threads.c - nsv_ws_upgrade answers the same on a single loop
 * and on a sharded server called from a thread that is not a worker: an
 * invalid handshake is answered with 400 or 426 and the call returns
 * NSV_EPARSE; a valid one gets 101 and NSV_OK. */
#include "tap.h"
#define NSVNET_ARENA (1 << 16)
#include "nsvnet.h"
#include <nanosrv.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const REQ_NO_KEY =
    "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Version: 13\r\n\r\n";
static const char *const REQ_BAD_VERSION =
    "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n";
static const char *const REQ_VALID =
    "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

/* One handshake: send req, call nsv_ws_upgrade from this (the polling)
 * thread, check the return and the status line on the wire. */
static void one(nsv_server *s, int port, const char *kind, const char *what, const char *req,
                int want_rc, const char *want_status, const char *want_header)
{
    int fd = client(port);
    ok(fd >= 0, "%s, %s: connected", kind, what);
    if (fd < 0)
        return;
    ssize_t w = write(fd, req, strlen(req));
    (void)w;
    nsv_event ev;
    int got = wait_event(s, NSV_EV_REQUEST, &ev, 300, 10);
    ok(got && (ev.flags & NSV_EVF_UPGRADE), "%s, %s: request with NSV_EVF_UPGRADE", kind, what);
    if (!got) {
        close(fd);
        return;
    }
    is_int(nsv_ws_upgrade(s, ev.conn, NULL, 0), want_rc, "%s, %s: nsv_ws_upgrade -> %s", kind, what,
           nsv_errname(want_rc));
    if (want_rc == NSV_OK) {
        is_int(nsv_ws_send(s, ev.conn, NSV_WS_TEXT, "hi", 2), NSV_OK, "%s, %s: ws_send after it", kind, what);
        is_int(nsv_reply(s, ev.conn, 200, NULL, 0, NULL, 0), NSV_ESTATE, "%s, %s: reply after it -> ESTATE", kind, what);
    } else {
        /* The request was answered (and the connection closes once that is
         * sent, which a worker may have done already: then NSV_ESTALE). */
        int r = nsv_reply(s, ev.conn, 200, NULL, 0, NULL, 0);
        ok(r == NSV_ESTATE || r == NSV_ESTALE, "%s, %s: no second answer (%s)", kind, what, nsv_errname(r));
        r = nsv_ws_upgrade(s, ev.conn, NULL, 0);
        ok(r == NSV_ESTATE || r == NSV_ESTALE, "%s, %s: no second upgrade (%s)", kind, what, nsv_errname(r));
        r = nsv_ws_send(s, ev.conn, NSV_WS_TEXT, "hi", 2);
        ok(r == NSV_ESTATE || r == NSV_ESTALE, "%s, %s: no WebSocket (%s)", kind, what, nsv_errname(r));
    }
    char buf[4096];
    read_polling(s, fd, buf, sizeof buf, 300, 5, "\r\n\r\n");
    ok(strncmp(buf, want_status, strlen(want_status)) == 0, "%s, %s: answered '%s'", kind, what, want_status);
    if (want_header)
        ok(strstr(buf, want_header) != NULL, "%s, %s: answer has '%s'", kind, what, want_header);
    close(fd);
}

static void run(nsv_server *s, const char *kind)
{
    ok(s != NULL, "%s: server", kind);
    int lid = nsv_listen(s, "http://127.0.0.1:0", 18);
    int port = nsv_listener_port(s, lid);
    ok(port > 0, "%s: listening", kind);
    one(s, port, kind, "missing Sec-WebSocket-Key", REQ_NO_KEY, NSV_EPARSE, "HTTP/1.1 400", NULL);
    one(s, port, kind, "Sec-WebSocket-Version 8", REQ_BAD_VERSION, NSV_EPARSE, "HTTP/1.1 426",
        "Sec-WebSocket-Version: 13");
    one(s, port, kind, "valid handshake", REQ_VALID, NSV_OK, "HTTP/1.1 101", "Sec-WebSocket-Accept: ");
    /* the same connection ids, many times: the ticket keeps its generation */
    for (int i = 0; i < 3; i++)
        one(s, port, kind, "missing key again", REQ_NO_KEY, NSV_EPARSE, "HTTP/1.1 400", NULL);
    nsv_server_free(s);
}

int main(void)
{
    run(nsv_server_new(), "single loop");
    run(nsv_server_new_sharded(2), "sharded, from the host thread");
    return done_testing();
}
