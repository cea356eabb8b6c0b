/* ws_deflate.c - permessage-deflate (RFC 7692) over hand-made frames on a
 * loopback socket, single loop: the negotiation matrix (accepted, declined,
 * the first acceptable of several offers, the window limit), RSV1 rules,
 * compressed echo both ways, context takeover on and off, the minimum size,
 * a decompression bomb (1009 before the message ends), corrupt data and bad
 * UTF-8 after inflating (1007). The host echoes every message. */
#include "tap.h"
#include "nsvnet.h"
#include <stdio.h>
#include <stdlib.h>

#ifndef NSV_WITH_ZLIB
int main(void)
{
    (void)tap_ok;
    printf("1..0 # SKIP built without zlib\n");
    return 0;
}
#else
#include <zlib.h>

#define is_str(got, want, ...) is_mem((got), strlen(got), (want), __VA_ARGS__)

static nsv_server *srv;
static int port;
static char resp[4096]; /* the last handshake's answer */
static uint32_t open_flags;

/* Echo every message back; remember WS_OPEN's flags. */
static void step(int ms)
{
    int n = nsv_poll(srv, evs, NSVNET_EVS, arena, sizeof arena, ms);
    for (int i = 0; i < n; i++) {
        if (evs[i].type == NSV_EV_WS_OPEN)
            open_flags = evs[i].flags;
        if (evs[i].type == NSV_EV_WS_MESSAGE)
            nsv_ws_send(srv, evs[i].conn, evs[i].code, arena + evs[i].body_off, evs[i].body_len);
    }
}

static void start(int deflate, int wbits, int64_t max_message)
{
    srv = nsv_server_new();
    if (deflate)
        nsv_set_int(srv, NSV_OPT_WS_DEFLATE, 1);
    nsv_set_int(srv, NSV_OPT_WS_DEFLATE_WINDOW_BITS, wbits);
    if (max_message)
        nsv_set_int(srv, NSV_OPT_WS_MAX_MESSAGE, max_message);
    http_listen(srv, &port);
    nsv_route(srv, "GET", 3, "/ws", 3, 1, NSV_ROUTE_WEBSOCKET);
}

/* Connect and upgrade offering ext (NULL: no header); the answer in resp. */
static int upgrade(const char *ext)
{
    char req[1024];
    snprintf(req, sizeof req,
             "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n%s%s%s\r\n",
             ext ? "Sec-WebSocket-Extensions: " : "", ext ? ext : "", ext ? "\r\n" : "");
    int fd = client(port);
    open_flags = 0;
    sendall(fd, req);
    size_t n = 0;
    resp[0] = 0;
    for (int i = 0; i < 400 && n < sizeof resp - 1 && !strstr(resp, "\r\n\r\n");) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 0) > 0) { /* byte by byte: frames behind it stay in the socket */
            if (read(fd, resp + n, 1) != 1)
                break;
            resp[++n] = 0;
        } else {
            step(5);
            i++;
        }
    }
    step(0);
    return fd;
}

/* The answer's extension line, "" if none. */
static const char *ext_line(void)
{
    static char line[256];
    const char *p = strstr(resp, "Sec-WebSocket-Extensions: ");
    line[0] = 0;
    if (p) {
        p += 26;
        size_t k = strcspn(p, "\r");
        snprintf(line, sizeof line, "%.*s", (int)k, p);
    }
    return line;
}

/* A masked client frame; key 0 so the payload goes as is. */
static void send_frame(int fd, int b0, const void *p, size_t n)
{
    uint8_t *w = malloc(n + 14);
    size_t h = 2;
    w[0] = (uint8_t)b0;
    if (n <= 125) {
        w[1] = (uint8_t)(0x80 | n);
    } else if (n <= 0xffff) {
        w[1] = 0x80 | 126;
        w[2] = (uint8_t)(n >> 8);
        w[3] = (uint8_t)n;
        h = 4;
    } else {
        w[1] = 0x80 | 127;
        for (int i = 0; i < 8; i++)
            w[2 + i] = (uint8_t)((uint64_t)n >> (56 - 8 * i));
        h = 10;
    }
    memset(w + h, 0, 4);
    memcpy(w + h + 4, p, n);
    sendn(fd, w, h + 4 + n);
    free(w);
}

/* One server frame: its first byte, payload into out (cap), length; -1 if
 * none came (EOF or 2 s). Polls the server meanwhile. */
static uint8_t rbuf[1 << 20];
static size_t rlen;
static long get_frame(int fd, int *b0, uint8_t *out, size_t cap)
{
    for (int i = 0; i < 400; i++) {
        if (rlen >= 2) {
            size_t h = 2, n = rbuf[1] & 0x7f;
            if (n == 126 && rlen >= 4)
                n = (size_t)rbuf[2] << 8 | rbuf[3], h = 4;
            else if (n == 127 && rlen >= 10) {
                n = 0;
                for (int k = 0; k < 8; k++)
                    n = n << 8 | rbuf[2 + k];
                h = 10;
            }
            if ((rbuf[1] & 0x7f) < 126 || h > 2) {
                if (rlen >= h + n) {
                    *b0 = rbuf[0];
                    memcpy(out, rbuf + h, n < cap ? n : cap);
                    memmove(rbuf, rbuf + h + n, rlen - h - n);
                    rlen -= h + n;
                    return (long)n;
                }
            }
        }
        step(2);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 3) > 0) {
            ssize_t r = read(fd, rbuf + rlen, sizeof rbuf - rlen);
            if (r <= 0)
                return -1;
            rlen += (size_t)r;
        }
    }
    return -1;
}

/* A close frame's code from the server, or -1. */
static int close_code(int fd)
{
    uint8_t p[128];
    int b0;
    for (int i = 0; i < 4; i++) {
        long n = get_frame(fd, &b0, p, sizeof p);
        if (n < 0)
            return -1;
        if ((b0 & 0x0f) == 8)
            return n >= 2 ? p[0] << 8 | p[1] : 1005;
    }
    return -1;
}

static void finish(int fd)
{
    close(fd);
    rlen = 0;
    nsv_server_free(srv);
}

/* Client-side streams (context kept unless reset). */
static z_stream cz, sz; /* our deflater, our inflater of the server's data */
static void zinit(int wbits)
{
    memset(&cz, 0, sizeof cz);
    memset(&sz, 0, sizeof sz);
    deflateInit2(&cz, 6, Z_DEFLATED, -wbits, 8, Z_DEFAULT_STRATEGY);
    inflateInit2(&sz, -15);
}
static void zend(void)
{
    deflateEnd(&cz);
    inflateEnd(&sz);
}

/* Compress p into out with a sync flush, tail removed. */
static size_t zmsg(const void *p, size_t n, uint8_t *out, size_t cap)
{
    cz.next_in = (Bytef *)p;
    cz.avail_in = (uInt)n;
    cz.next_out = out;
    cz.avail_out = (uInt)cap;
    deflate(&cz, Z_SYNC_FLUSH);
    return cap - cz.avail_out - 4;
}

/* Inflate a server message (tail added). */
static size_t unz(const uint8_t *p, size_t n, uint8_t *out, size_t cap)
{
    static const uint8_t tail[4] = {0, 0, 0xff, 0xff};
    sz.next_out = out;
    sz.avail_out = (uInt)cap;
    sz.next_in = (Bytef *)p;
    sz.avail_in = (uInt)n;
    inflate(&sz, Z_SYNC_FLUSH);
    sz.next_in = (Bytef *)tail;
    sz.avail_in = 4;
    inflate(&sz, Z_SYNC_FLUSH);
    return cap - sz.avail_out;
}

static void negotiation(void)
{
    static const struct {
        const char *offer, *answer;
    } m[] = {
        {"permessage-deflate", "permessage-deflate"},
        {"permessage-deflate; client_max_window_bits", "permessage-deflate; client_max_window_bits=15"},
        {"permessage-deflate; server_max_window_bits=10; client_no_context_takeover",
         "permessage-deflate; client_no_context_takeover; server_max_window_bits=10"},
        {"permessage-deflate;server_no_context_takeover", "permessage-deflate; server_no_context_takeover"},
        {"permessage-deflate; client_max_window_bits=\"10\"", "permessage-deflate; client_max_window_bits=10"},
        {"PerMessage-Deflate", "permessage-deflate"},
        {"permessage-deflate; server_max_window_bits=16", ""},
        {"permessage-deflate; server_max_window_bits=7", ""},
        {"permessage-deflate; server_max_window_bits=08", ""},
        {"permessage-deflate; server_max_window_bits", ""},
        {"permessage-deflate; client_max_window_bits=1a", ""},
        {"permessage-deflate; server_no_context_takeover=1", ""},
        {"permessage-deflate; server_no_context_takeover; server_no_context_takeover", ""},
        {"permessage-deflate; client_max_window_bits; client_max_window_bits=9", ""},
        {"permessage-deflate; foo", ""},
        {"permessage-deflate; foo=\"bar", ""},
        {"permessage-deflate; server_max_window_bits=9x, permessage-deflate; server_no_context_takeover",
         "permessage-deflate; server_no_context_takeover"},
        {"x-webkit-deflate-frame; no_context_takeover, permessage-deflate", "permessage-deflate"},
        {"permessage-deflate; server_max_window_bits=8", "permessage-deflate; server_max_window_bits=8"},
        {"permessage-deflate; client_max_window_bits=8", "permessage-deflate; client_max_window_bits=8"},
    };
    start(1, 15, 0);
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        int fd = upgrade(m[i].offer);
        ok(strstr(resp, " 101 ") != NULL, "offer '%s': the upgrade succeeds", m[i].offer);
        is_str(ext_line(), m[i].answer, "offer '%s': answered '%s'", m[i].offer, m[i].answer);
        if (*m[i].answer)
            ok(open_flags & NSV_EVF_DEFLATE, "offer '%s': WS_OPEN flagged NSV_EVF_DEFLATE", m[i].offer);
        else
            ok(!(open_flags & NSV_EVF_DEFLATE), "offer '%s': WS_OPEN not flagged", m[i].offer);
        close(fd);
        step(0);
    }
    nsv_server_free(srv);

    start(1, 10, 0);
    int fd = upgrade("permessage-deflate; client_max_window_bits; server_max_window_bits=12");
    is_str(ext_line(), "permessage-deflate; server_max_window_bits=10; client_max_window_bits=10",
           "window option 10: both windows limited to 10");
    close(fd);
    fd = upgrade("permessage-deflate");
    is_str(ext_line(), "permessage-deflate", "window option 10, no window offered: none answered");
    close(fd);
    nsv_server_free(srv);

    start(1, 8, 0);
    fd = upgrade("permessage-deflate; client_max_window_bits");
    is_str(ext_line(), "permessage-deflate; client_max_window_bits=9",
           "window option 8: the client's window chosen is 9 (zlib cannot compress with 8)");
    close(fd);
    nsv_server_free(srv);

    start(0, 15, 0);
    fd = upgrade("permessage-deflate");
    is_str(ext_line(), "", "option off: the offer is declined");
    finish(fd);
}

/* Echo of a compressed text message: decoded by the host, sent back
 * compressed; short messages both ways plain. */
static void echo(void)
{
    start(1, 15, 0);
    int fd = upgrade("permessage-deflate");
    zinit(15);
    char msg[3000];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = "abcdefgh "[i % 9];
    uint8_t z[8192], back[8192], plain[8192];
    size_t zn = zmsg(msg, sizeof msg, z, sizeof z);
    send_frame(fd, 0xC1, z, zn);
    int b0 = 0;
    long n = get_frame(fd, &b0, back, sizeof back);
    ok(n > 0 && (b0 & 0x40) && (b0 & 0x0f) == 1, "echo comes compressed (RSV1, text)");
    ok(n > 0 && n < 300, "and small: %ld bytes for 3000", n);
    size_t pn = n > 0 ? unz(back, (size_t)n, plain, sizeof plain) : 0;
    ok(pn == sizeof msg && memcmp(plain, msg, pn) == 0, "and inflates to the message");

    /* fragmented: RSV1 on the first frame only */
    zn = zmsg(msg, sizeof msg, z, sizeof z);
    send_frame(fd, 0x41, z, 10);
    send_frame(fd, 0x80, z + 10, zn - 10);
    n = get_frame(fd, &b0, back, sizeof back);
    pn = n > 0 ? unz(back, (size_t)n, plain, sizeof plain) : 0;
    ok(pn == sizeof msg && memcmp(plain, msg, pn) == 0, "a fragmented compressed message is reassembled");
    ok(n > 0 && n < 40, "context takeover: the second copy costs %ld bytes", n);

    /* below the minimum size: plain both ways; a plain message still reads */
    send_frame(fd, 0x81, "short", 5);
    n = get_frame(fd, &b0, back, sizeof back);
    ok(n == 5 && !(b0 & 0x40) && memcmp(back, "short", 5) == 0, "a 5-byte message goes back plain");
    zn = zmsg("tiny", 4, z, sizeof z);
    send_frame(fd, 0xC2, z, zn);
    n = get_frame(fd, &b0, back, sizeof back);
    ok(n == 4 && b0 == 0x82 && memcmp(back, "tiny", 4) == 0, "a compressed 4-byte binary message read");
    /* an empty compressed message */
    send_frame(fd, 0xC1, "\x00", 1);
    n = get_frame(fd, &b0, back, sizeof back);
    is_int(n, 0, "an empty compressed message (one 00 byte) read as empty");
    zend();
    finish(fd);
}

/* server_no_context_takeover: each message compressed alone, so the same
 * message costs the same every time; with takeover the second is cheaper. */
static void takeover(void)
{
    for (int nct = 0; nct < 2; nct++) {
        start(1, 15, 0);
        int fd = upgrade(nct ? "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
                             : "permessage-deflate");
        char msg[2000];
        for (size_t i = 0; i < sizeof msg; i++)
            msg[i] = (char)('a' + (i * 7 % 26));
        long len[2] = {0, 0};
        uint8_t back[8192];
        for (int k = 0; k < 2; k++) {
            zinit(15); /* a fresh client stream each time: works with or without takeover */
            uint8_t z[8192];
            size_t zn = zmsg(msg, sizeof msg, z, sizeof z);
            send_frame(fd, 0xC2, z, zn);
            int b0 = 0;
            len[k] = get_frame(fd, &b0, back, sizeof back);
            zend();
        }
        if (nct)
            ok(len[0] > 0 && len[0] == len[1], "no context takeover: both echoes %ld and %ld bytes", len[0],
               len[1]);
        else
            ok(len[0] > 0 && len[1] > 0 && len[1] < len[0] / 2, "context takeover: echoes %ld then %ld bytes",
               len[0], len[1]);
        finish(fd);
    }
    /* server_max_window_bits=8 agreed: the server sends plain */
    start(1, 15, 0);
    int fd = upgrade("permessage-deflate; server_max_window_bits=8");
    char msg[500];
    memset(msg, 'q', sizeof msg);
    zinit(15);
    uint8_t z[2048], back[2048];
    size_t zn = zmsg(msg, sizeof msg, z, sizeof z);
    send_frame(fd, 0xC1, z, zn);
    int b0 = 0;
    long n = get_frame(fd, &b0, back, sizeof back);
    ok(n == 500 && b0 == 0x81, "server window 8: the echo goes plain (%ld bytes, 0x%02x)", n, b0);
    zend();
    finish(fd);
}

/* Violations, each on a connection of its own: the close code. */
static void violation(const char *what, const char *offer, int b0, const void *p, size_t n, int want)
{
    int fd = upgrade(offer);
    send_frame(fd, b0, p, n);
    is_int(close_code(fd), want, "%s: close %d", what, want);
    close(fd);
    rlen = 0;
    step(0);
}

static void rules(void)
{
    start(1, 15, 65536);
    zinit(15);
    uint8_t z[4096];
    size_t zn = zmsg("hello", 5, z, sizeof z);
    violation("RSV1 without the extension", NULL, 0xC1, z, zn, 1002);
    violation("RSV1 on a ping", "permessage-deflate", 0xC9, "x", 1, 1002);
    violation("RSV2 with the extension", "permessage-deflate", 0xA1, "x", 1, 1002);
    violation("RSV3 with the extension", "permessage-deflate", 0x91, "x", 1, 1002);
    violation("corrupt deflate data", "permessage-deflate", 0xC2, "\xff\xff\xff\xff", 4, 1007);
    zend();
    zinit(15);
    zn = zmsg("\xff\xfe\xfd", 3, z, sizeof z);
    violation("invalid UTF-8 after inflating", "permessage-deflate", 0xC1, z, zn, 1007);
    zend();

    /* RSV1 on a continuation frame */
    int fd = upgrade("permessage-deflate");
    send_frame(fd, 0x01, "ab", 2);
    send_frame(fd, 0xC0, "cd", 2);
    is_int(close_code(fd), 1002, "RSV1 on a continuation: close 1002");
    close(fd);
    rlen = 0;

    /* A bomb: 4 MiB of zeros in a few KiB, limit 64 KiB, sent as the first
     * fragment of a message that never ends: the server answers 1009 before
     * the message is complete, so it did not wait to inflate it all. */
    fd = upgrade("permessage-deflate");
    zinit(15);
    size_t big = 4 << 20;
    char *zero = calloc(1, big);
    uint8_t *bz = malloc(big);
    zn = zmsg(zero, big, bz, big);
    ok(zn < 8192, "the bomb is %zu compressed bytes", zn);
    send_frame(fd, 0x42, bz, zn);
    is_int(close_code(fd), 1009, "a decompression bomb: close 1009 before its end");
    free(zero);
    free(bz);
    zend();
    close(fd);
    rlen = 0;

    /* just under the limit it passes */
    fd = upgrade("permessage-deflate");
    zinit(15);
    zero = calloc(1, 65536);
    zn = zmsg(zero, 65536, z, sizeof z);
    send_frame(fd, 0xC2, z, zn);
    int b0;
    uint8_t *back = malloc(65536);
    long n = get_frame(fd, &b0, back, 65536);
    ok(n > 0 && (b0 & 0x40), "a message of exactly the limit (64 KiB inflated) is echoed");
    free(back);
    free(zero);
    zend();
    finish(fd);
}

int main(void)
{
    negotiation();
    echo();
    takeover();
    rules();
    return done_testing();
}
#endif
