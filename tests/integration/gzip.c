/* gzip.c - gzip of replies through the C API, for the sanitizer builds:
 * complete and streamed replies inflated back with zlib, a level changed on
 * a running server, a client leaving in the middle of a compressed stream,
 * a server freed with one open, a sharded server answered from the polling
 * thread. Built without zlib, the option answers NSV_ENOTSUP. (The rules a
 * client sees are in test_gzip.py.) */
#include "tap.h"
#include "nsvnet.h"
#include <stdlib.h>
#ifdef NSV_WITH_ZLIB
#include <zlib.h>
#endif

static char text[8192];

#ifdef NSV_WITH_ZLIB
static const char CT[] = "Content-Type: text/plain\r\n";
static char got[1 << 20];

/* The body after the head, de-chunked when chunked is set; its length. */
static size_t body_of(char *resp, size_t n, int chunked, char *out, size_t cap)
{
    char *b = memmem(resp, n, "\r\n\r\n", 4);
    if (!b)
        return 0;
    b += 4;
    size_t left = n - (size_t)(b - resp);
    if (!chunked) {
        memcpy(out, b, left < cap ? left : cap);
        return left;
    }
    size_t o = 0;
    for (int i = 0; i < 100000 && left; i++) {
        char *end;
        unsigned long sz = strtoul(b, &end, 16);
        if (end == b || left < (size_t)(end - b) + 2 || sz == 0)
            break;
        size_t skip = (size_t)(end - b) + 2;
        if (left < skip + sz + 2 || o + sz > cap)
            break;
        memcpy(out + o, b + skip, sz);
        o += sz;
        b += skip + sz + 2;
        left -= skip + sz + 2;
    }
    return o;
}

/* gunzip in[0..n) into out; the length, or -1 if it is not one whole member. */
static long gunzip(const char *in, size_t n, char *out, size_t cap)
{
    z_stream z = {0};
    if (inflateInit2(&z, 31) != Z_OK)
        return -1;
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)n;
    z.next_out = (Bytef *)out;
    z.avail_out = (uInt)cap;
    int r = inflate(&z, Z_FINISH);
    long len = r == Z_STREAM_END ? (long)z.total_out : -1;
    inflateEnd(&z);
    return len;
}

static int request(nsv_server *s, int port, const char *ae, nsv_event *ev, int *fd)
{
    char req[256];
    snprintf(req, sizeof req, "GET /t HTTP/1.1\r\nHost: x\r\n%s\r\n", ae);
    *fd = client(port);
    sendall(*fd, req);
    return wait_event(s, NSV_EV_REQUEST, ev, 200, 20);
}

static void complete(nsv_server *s, int port, int sharded, const char *label)
{
    nsv_event ev;
    int fd;
    static char raw[65536], plain[65536];
    ok(request(s, port, "Accept-Encoding: gzip\r\n", &ev, &fd), "%s: request", label);
    is_int(nsv_reply(s, ev.conn, 200, CT, sizeof CT - 1, text, sizeof text), 0, "%s: nsv_reply", label);
    int n = sharded ? read_all(fd, raw, sizeof raw, 2000, 100) : read_polling(s, fd, raw, sizeof raw, 100, 20, NULL);
    close(fd);
    ok(strstr(raw, "Content-Encoding: gzip\r\n") != NULL, "%s: compressed", label);
    size_t bl = body_of(raw, (size_t)n, 0, got, sizeof got);
    ok(bl > 0 && bl < sizeof text, "%s: smaller (%zu bytes)", label, bl);
    long pl = gunzip(got, bl, plain, sizeof plain);
    ok(pl == (long)sizeof text && !memcmp(plain, text, sizeof text), "%s: inflates to the body", label);
}

static void streamed(nsv_server *s, int port, int sharded, const char *label)
{
    nsv_event ev;
    int fd;
    static char raw[65536], plain[65536];
    ok(request(s, port, "Accept-Encoding: gzip\r\n", &ev, &fd), "%s: stream request", label);
    is_int(nsv_reply_start(s, ev.conn, 200, CT, sizeof CT - 1), 0, "%s: nsv_reply_start", label);
    for (int i = 0; i < 3; i++)
        nsv_send_chunk(s, ev.conn, text, sizeof text);
    is_int(nsv_reply_end(s, ev.conn), 0, "%s: nsv_reply_end", label);
    int n = sharded ? read_all(fd, raw, sizeof raw, 2000, 100)
                    : read_polling(s, fd, raw, sizeof raw, 100, 20, "\r\n0\r\n\r\n");
    close(fd);
    ok(strstr(raw, "Content-Encoding: gzip\r\n") && strstr(raw, "Transfer-Encoding: chunked\r\n"),
       "%s: compressed and chunked", label);
    size_t bl = body_of(raw, (size_t)n, 1, got, sizeof got);
    long pl = gunzip(got, bl, plain, sizeof plain);
    ok(pl == 3 * (long)sizeof text && !memcmp(plain, text, sizeof text) &&
       !memcmp(plain + 2 * sizeof text, text, sizeof text), "%s: the stream inflates to the three chunks", label);
}

/* The client goes while a compressed stream is open: the stream is freed
 * with the connection (ASan would see a leak otherwise). */
static void abandoned(nsv_server *s, int port)
{
    nsv_event ev;
    int fd;
    ok(request(s, port, "Accept-Encoding: gzip\r\n", &ev, &fd), "abandon: request");
    is_int(nsv_reply_start(s, ev.conn, 200, CT, sizeof CT - 1), 0, "abandon: stream started");
    nsv_send_chunk(s, ev.conn, text, sizeof text);
    close(fd);
    int closed = 0;
    for (int i = 0; i < 200 && !closed; i++) {
        nsv_send_chunk(s, ev.conn, text, 100);
        int k = nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, 10);
        for (int j = 0; j < k; j++)
            closed |= evs[j].type == NSV_EV_CLOSE && evs[j].conn == ev.conn;
    }
    ok(closed, "abandon: CLOSE after the client left mid-stream");
}
#endif

int main(void)
{
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = "the quick brown fox jumps over the lazy dog\n"[i % 44];
    nsv_server *s = nsv_server_new();
#ifndef NSV_WITH_ZLIB
    is_int(nsv_set_int(s, NSV_OPT_GZIP_MIN_SIZE, 100), NSV_ENOTSUP, "without zlib: NSV_ENOTSUP");
    ok(strstr(nsv_last_error_detail(s), "zlib") != NULL, "with a detail: %s", nsv_last_error_detail(s));
    is_int(nsv_set_int(s, NSV_OPT_GZIP_MIN_SIZE, 0), 0, "without zlib: off stays possible");
    nsv_server_free(s);
#else
    is_int(nsv_set_int(s, NSV_OPT_GZIP_MIN_SIZE, 100), 0, "gzip on");
    int port;
    http_listen(s, &port);
    complete(s, port, 0, "plain");
    streamed(s, port, 0, "plain");
    is_int(nsv_set_int(s, NSV_OPT_GZIP_LEVEL, 1), 0, "level 1 on a running server");
    complete(s, port, 0, "plain, level 1");
    abandoned(s, port);
    /* freed with a compressed stream open */
    nsv_event ev;
    int fd;
    ok(request(s, port, "Accept-Encoding: gzip\r\n", &ev, &fd), "free: request");
    is_int(nsv_reply_start(s, ev.conn, 200, CT, sizeof CT - 1), 0, "free: stream started");
    nsv_send_chunk(s, ev.conn, text, sizeof text);
    nsv_server_free(s);
    close(fd);

    s = nsv_server_new_sharded(2);
    is_int(nsv_set_int(s, NSV_OPT_GZIP_MIN_SIZE, 100), 0, "sharded: gzip on");
    http_listen(s, &port);
    for (int i = 0; i < 4; i++) { /* connections land on both workers */
        complete(s, port, 1, "sharded");
        streamed(s, port, 1, "sharded");
    }
    is_int(nsv_set_int(s, NSV_OPT_GZIP_LEVEL, 1), NSV_ESTATE, "sharded: options frozen once running");
    nsv_server_free(s);
#endif
    return done_testing();
}
