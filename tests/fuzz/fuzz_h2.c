/* fuzz_h2.c - stateful target: one HTTP/2 (h2c, prior knowledge) connection
 * through the real server, in memory. A single-loop server with NSV_OPT_HTTP2
 * adopts one end of a socketpair; the target writes the client preface, then
 * the input's bytes (frames: SETTINGS, HEADERS, CONTINUATION, DATA, ...) in
 * pieces while the host answers every stream (plain, streamed, 404) and the
 * server's output is read and discarded. Everything is bounded. Without
 * nghttp2 in the build (NSV_WITH_NGHTTP2 undefined) there is no HTTP/2 to
 * feed and the target does nothing.
 *
 * Input layout: byte 0 = settings, byte 1 = piece size, the rest = bytes the
 * client sends after the preface.
 *   settings bit 0: small limits (head 256, body 64, 4 headers, 3 streams,
 *                   window 1024, HPACK table 256, 4 resets)
 *   settings bit 1: answer odd-length paths with a streamed reply
 *   settings bit 2: answer every POST with 413
 *   settings bit 3: half-close the client's write side after the input
 *   settings bit 4: the client reads nothing until the end
 *   settings bit 5: NSV_OPT_AUTO_404 (only /echo is routed)
 *   piece size: 0 = everything at once, else that many bytes per write. */
#include <stddef.h>
#include <stdint.h>

#ifndef NSV_WITH_NGHTTP2
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)data;
    (void)size;
    return 0;
}
#else
#include "fuzz_conn.h"

#include <string.h>

enum { ROUTE_ECHO = 1 };

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

static void answer(nsv_server *s, const nsv_event *e, unsigned cfg)
{
    const char *a = fuzz_arena;
    if (e->type != NSV_EV_REQUEST)
        return;
    if ((cfg & 4) && e->method_len == 4 && !memcmp(a + e->method_off, "POST", 4)) {
        nsv_reply(s, e->conn, 413, NULL, 0, "too large", 9);
        return;
    }
    if ((cfg & 2) && (e->path_len & 1)) {
        nsv_reply_start(s, e->conn, 200, "Content-Type: text/plain\r\n", 26);
        nsv_send_chunk(s, e->conn, a + e->path_off, e->path_len);
        nsv_send_chunk(s, e->conn, a + e->body_off, e->body_len);
        nsv_reply_end(s, e->conn);
        return;
    }
    nsv_reply(s, e->conn, e->route < 0 ? 404 : 200, "X-Fuzz: 1\r\nConnection: keep-alive\r\n", 35,
              a + e->body_off, e->body_len);
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
    if (nsv_set_int(s, NSV_OPT_HTTP2, NSV_H2_PRIOR | NSV_H2_UPGRADE) != NSV_OK) {
        nsv_server_free(s);
        return 0;
    }
    if (cfg & 1) {
        nsv_set_int(s, NSV_OPT_MAX_HEADER_BYTES, 256);
        nsv_set_int(s, NSV_OPT_MAX_BODY, 64);
        nsv_set_int(s, NSV_OPT_MAX_HEADERS, 4);
        nsv_set_int(s, NSV_OPT_H2_MAX_STREAMS, 3);
        nsv_set_int(s, NSV_OPT_H2_WINDOW, 1024);
        nsv_set_int(s, NSV_OPT_H2_HPACK_TABLE, 256);
        nsv_set_int(s, NSV_OPT_H2_MAX_RESETS, 4);
    }
    if (cfg & 32)
        nsv_set_int(s, NSV_OPT_AUTO_404, 1);
    nsv_route(s, "POST", 4, "/echo", 5, ROUTE_ECHO, 0);
    int cfd = fuzz_adopt(s);
    if (cfd >= 0) {
        /* 24 bytes into an empty socketpair buffer: one write is enough */
        if (send(cfd, preface, sizeof preface - 1, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)(sizeof preface - 1))
            size = 0;
        fuzz_pump(s, cfg, cfd, !(cfg & 16), answer);
        fuzz_feed(s, cfg, cfd, data, size, piece, answer);
    }
    nsv_server_free(s);
    return 0;
}
#endif
