/* fuzz_ws_server_frame.c - reads the input as a server's byte stream of
 * frames, as the WebSocket client (nsv_ws_connect) reads it, and checks:
 *  - nsv__ws_parse_server_header returns 0 for every proper prefix of a
 *    header (or the same -1002 as soon as it is decided), never reads past
 *    len, and refuses every masked frame;
 *  - parsed fields re-encode (unmasked writer) to a header that parses back
 *    to the same fields, and the same fields with a client mask
 *    (nsv__ws_write_masked_header) are refused here and read by the
 *    server-side parser with the key;
 *  - the message assembler's verdicts match a direct recomputation
 *    (fragmentation rules, size limit, UTF-8 of whole text messages);
 *  - nsv__ws_check_close agrees with the RFC 6455 7.4 rules. */
#include "ws/frame.h"
#include "ws/utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MSG 4096

static void check_header(const uint8_t *p, size_t n, int r, const nsv__ws_frame *f)
{
    nsv__ws_frame g;
    size_t lim = r > 0 ? (size_t)r : n < NSV__WS_MAX_HEADER ? n : NSV__WS_MAX_HEADER;
    int seen_err = 0;
    for (size_t i = 0; i < lim; i++) {
        int ri = nsv__ws_parse_server_header(p, i, &g);
        if (r > 0 && ri != 0)
            abort(); /* a valid header's prefix is just incomplete */
        if (ri < 0) {
            if (ri != r)
                abort();
            seen_err = 1;
        } else if (seen_err) {
            abort(); /* once decided, longer input cannot undo an error */
        }
    }
    if (r < 0 && r != -1002)
        abort();
    if (n >= 2 && (p[1] & 0x80) && r != -1002)
        abort(); /* a masked frame from a server is a protocol error */
    if (r <= 0)
        return;
    if (f->key[0] | f->key[1] | f->key[2] | f->key[3])
        abort();
    uint8_t out[NSV__WS_MAX_HEADER];
    size_t w = nsv__ws_write_header(out, f->fin, f->opcode, f->len);
    if (w > (size_t)r) /* minimal encoding is never longer */
        abort();
    int r2 = nsv__ws_parse_server_header(out, w, &g);
    if (r2 != (int)w || g.len != f->len || g.opcode != f->opcode || g.fin != f->fin)
        abort();
    static const uint8_t key[4] = {0xA5, 0x01, 0x7E, 0xFF};
    size_t mw = nsv__ws_write_masked_header(out, f->fin, f->opcode, f->len, key);
    if (mw != w + 4 || nsv__ws_parse_server_header(out, mw, &g) != -1002)
        abort();
    if (nsv__ws_parse_header(out, mw, &g) != (int)mw || g.len != f->len || g.opcode != f->opcode ||
        g.fin != f->fin || memcmp(g.key, key, 4))
        abort();
}

static int close_ok(unsigned c)
{
    if (c < 1000 || c >= 5000 || c == 1004 || c == 1005 || c == 1006 || c == 1015)
        return 0;
    return !(c >= 1016 && c <= 2999);
}

static void check_close_payload(const uint8_t *p, size_t n)
{
    uint16_t code = 0;
    int r = nsv__ws_check_close(p, n, &code);
    int want;
    if (n == 0)
        want = 0;
    else if (n == 1 || !close_ok((unsigned)(p[0] << 8 | p[1])))
        want = -1002;
    else
        want = nsv__utf8_valid(p + 2, n - 2) ? 0 : -1007;
    if (r != want || (r == 0 && code != (n ? (p[0] << 8 | p[1]) : 1005)))
        abort();
}

static uint8_t msg_buf[MAX_MSG];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);

    nsv__ws_msg m = {0};
    m.max = MAX_MSG;
    int open_op = 0;   /* model: opcode of the open message */
    size_t msg_len = 0;
    uint64_t announced = 0;

    for (size_t pos = 0; pos < size;) {
        nsv__ws_frame f;
        int r = nsv__ws_parse_server_header(buf + pos, size - pos, &f);
        check_header(buf + pos, size - pos, r, &f);
        if (r <= 0)
            break;
        pos += (size_t)r;
        size_t avail = size - pos;
        size_t n = f.len < avail ? (size_t)f.len : avail;
        uint8_t *pl = buf + pos; /* server frames come unmasked: the bytes are the payload */
        pos += n;

        /* Model of the fragmentation rules and size limit. */
        int ctl = nsv__ws_is_control(f.opcode);
        int want;
        if (ctl)
            want = f.opcode;
        else if (f.opcode == NSV__WS_CONT ? !open_op : open_op)
            want = -1002;
        else if ((f.opcode == NSV__WS_CONT ? announced : 0) + f.len > MAX_MSG)
            want = -1009;
        else
            want = f.opcode == NSV__WS_CONT ? open_op : f.opcode;
        int got = nsv__ws_msg_frame(&m, &f);
        if (got != want)
            abort();
        if (got < 0)
            break;
        if (ctl) {
            if (f.opcode == NSV__WS_CLOSE)
                check_close_payload(pl, n);
            continue;
        }
        if (f.opcode != NSV__WS_CONT) {
            open_op = f.opcode;
            announced = 0;
            msg_len = 0;
        }
        announced += f.len;

        /* Data in two pieces; fail-fast UTF-8 must match the model. */
        size_t half = n / 2;
        int d1 = nsv__ws_msg_data(&m, pl, half);
        int d2 = d1 ? d1 : nsv__ws_msg_data(&m, pl + half, n - half);
        memcpy(msg_buf + msg_len, pl, n); /* n <= MAX_MSG - msg_len by the limit */
        msg_len += n;
        if (open_op == NSV__WS_TEXT) {
            int rej = nsv__utf8_feed(NSV__UTF8_ACCEPT, msg_buf, msg_len) == NSV__UTF8_REJECT;
            if ((d2 == -1007) != rej)
                abort();
        } else if (d2 != 0) {
            abort();
        }
        if (d2)
            break;
        if (n < f.len)
            break; /* payload truncated by the end of input */
        int e = nsv__ws_msg_frame_end(&m);
        if (!f.fin) {
            if (e != 0)
                abort();
            continue;
        }
        int valid = open_op != NSV__WS_TEXT || nsv__utf8_valid(msg_buf, msg_len);
        if (e != (valid ? 1 : -1007))
            abort();
        open_op = 0;
        if (e < 0)
            break;
    }
    free(buf);
    return 0;
}
