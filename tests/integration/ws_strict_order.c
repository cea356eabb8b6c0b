/* ws_strict_order.c - a legal message and a protocol violation in the same
 * read: the host gets the message and one turn to answer it, and its answer
 * reaches the wire before the close frame (1002 for a reserved opcode, 1007
 * for bad UTF-8). Single loop (nsv_poll), sharded with callbacks on the
 * workers, and sharded in pull mode (nsv_poll from this thread: there the
 * host's turn is its next poll, not the worker's next iteration, which
 * comes at once). */
#include "tap.h"
#include "nsvnet.h"
#include <stdatomic.h>
#include <stdio.h>

static const char handshake[] = "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

/* A masked client frame (key 0: the payload goes as is). */
static size_t frame(uint8_t *out, int b0, const char *p, size_t n)
{
    out[0] = (uint8_t)b0;
    out[1] = (uint8_t)(0x80 | n);
    memset(out + 2, 0, 4);
    memcpy(out + 6, p, n);
    return 6 + n;
}

/* Sharded push mode: the callback answers on the worker thread. */
static atomic_int cb_open, cb_echoed, cb_sent;
static void on_event(nsv_server *s, const nsv_event *ev, const char *a, void *ud)
{
    (void)ud;
    if (ev->type == NSV_EV_WS_OPEN)
        atomic_store(&cb_open, 1);
    if (ev->type == NSV_EV_WS_MESSAGE && ev->body_len == 5) {
        atomic_store(&cb_sent, nsv_ws_send(s, ev->conn, NSV_WS_TEXT, a + ev->body_off, 5));
        atomic_store(&cb_echoed, 1);
    }
}

static void run(const char *how, nsv_server *s, int bad_b0, const char *bad, size_t blen, int want_code)
{
    int port;
    http_listen(s, &port);
    nsv_route(s, "GET", 3, "/ws", 3, 1, NSV_ROUTE_WEBSOCKET);
    int push = strncmp(how, "sharded,", 8) == 0;
    atomic_store(&cb_open, 0);
    atomic_store(&cb_echoed, 0);
    atomic_store(&cb_sent, -1);
    if (push)
        nsv_set_callback(s, on_event, NULL);
    int fd = client(port);
    sendall(fd, handshake);
    nsv_event e;
    if (push) {
        nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, 0); /* starts the workers */
        for (int i = 0; i < 200 && !atomic_load(&cb_open); i++)
            usleep(10000);
        ok(atomic_load(&cb_open), "%s: WebSocket open", how);
    } else {
        ok(wait_event(s, NSV_EV_WS_OPEN, &e, 200, 20), "%s: WebSocket open", how);
    }
    char buf[4096];
    read_all(fd, buf, sizeof buf, 2000, 50); /* the 101 */
    uint8_t w[64];
    size_t n = frame(w, 0x81, "hello", 5);
    n += frame(w + n, bad_b0, bad, blen);
    sendn(fd, w, n); /* one write: both frames in one read */
    int echoed = 0, sent = -1;
    for (int i = 0; push && i < 200 && !echoed; i++) {
        usleep(10000);
        echoed = atomic_load(&cb_echoed);
        sent = atomic_load(&cb_sent);
    }
    for (int i = 0; !push && i < 200 && !echoed; i++) {
        int k = nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, 10);
        for (int j = 0; j < k; j++)
            if (evs[j].type == NSV_EV_WS_MESSAGE && evs[j].body_len == 5) {
                sent = nsv_ws_send(s, evs[j].conn, NSV_WS_TEXT, arena + evs[j].body_off, 5);
                echoed = 1;
            }
    }
    ok(echoed, "%s: the legal message came to the host", how);
    is_int(sent, NSV_OK, "%s: the host may answer it", how);
    int got = read_polling(push ? NULL : s, fd, buf, sizeof buf, 100, 10, NULL);
    uint8_t want[11] = {0x81, 5, 'h', 'e', 'l', 'l', 'o', 0x88, 2, (uint8_t)(want_code >> 8),
                        (uint8_t)want_code};
    is_int(got, 11, "%s: echo and close frame, nothing else", how);
    ok(got == 11 && memcmp(buf, want, 11) == 0, "%s: the echo goes out before the close %d", how, want_code);
    if (got >= 8 && (got != 11 || memcmp(buf, want, 11) != 0))
        diag("first frame opcode byte 0x%02x, second at 7: 0x%02x", (uint8_t)buf[0], (uint8_t)buf[7]);
    close(fd);
}

int main(void)
{
    for (int sh = 0; sh < 3; sh++) {
        const char *how = sh == 2 ? "sharded pull" : sh ? "sharded" : "single loop";
        char h[64];
        nsv_server *s = sh ? nsv_server_new_sharded(2) : nsv_server_new();
        snprintf(h, sizeof h, "%s, reserved opcode", how);
        run(h, s, 0x83, "x", 1, 1002);
        nsv_server_free(s);
        s = sh ? nsv_server_new_sharded(2) : nsv_server_new();
        snprintf(h, sizeof h, "%s, bad UTF-8", how);
        run(h, s, 0x81, "\xff\xfe", 2, 1007);
        nsv_server_free(s);
    }
    return done_testing();
}
