/* ws_frame.c - RFC 6455 frame header parser/writer, unmasking, message
 * assembler and close-payload checks. */
#include "tap.h"
#include "ws/frame.h"

#include <stdint.h>

#define PROTO (-1002)

/* Builds a masked client header; returns its length. */
static size_t client_header(uint8_t *out, uint8_t b0, uint64_t len, int ext_bytes)
{
    static const uint8_t key[4] = {0x37, 0xFA, 0x21, 0x3D};
    size_t n = 0;
    out[n++] = b0;
    if (ext_bytes == 0) {
        out[n++] = (uint8_t)(0x80 | len);
    } else if (ext_bytes == 2) {
        out[n++] = 0x80 | 126;
        out[n++] = (uint8_t)(len >> 8);
        out[n++] = (uint8_t)len;
    } else {
        out[n++] = 0x80 | 127;
        for (int i = 7; i >= 0; i--)
            out[n++] = (uint8_t)(len >> (8 * i));
    }
    memcpy(out + n, key, 4);
    return n + 4;
}

/* Parses h at every prefix length: incomplete until the end, then complete. */
static int parse_split(const uint8_t *h, size_t n, nsv__ws_frame *f)
{
    for (size_t i = 0; i < n; i++)
        if (nsv__ws_parse_header(h, i, f) != 0)
            return -1;
    uint8_t big[32];
    memcpy(big, h, n);
    memset(big + n, 0xEE, sizeof big - n); /* payload bytes must not matter */
    int a = nsv__ws_parse_header(h, n, f);
    nsv__ws_frame g;
    int b = nsv__ws_parse_header(big, sizeof big, &g);
    if (a != b || g.len != f->len || memcmp(g.key, f->key, 4))
        return -2;
    return a;
}

static void test_lengths(void)
{
    struct { uint64_t len; int ext; int hlen; } t[] = {
        {0, 0, 6}, {1, 0, 6}, {125, 0, 6},
        {126, 2, 8}, {65535, 2, 8}, {5, 2, 8},          /* 5: non-minimal 16-bit */
        {65536, 8, 14}, {UINT64_C(0x7FFFFFFFFFFFFFFF), 8, 14},
        {1, 8, 14}, {300, 8, 14},                       /* non-minimal 64-bit */
        {UINT64_C(0x0102030405060708), 8, 14},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        uint8_t h[16];
        nsv__ws_frame f;
        size_t n = client_header(h, 0x82, t[i].len, t[i].ext);
        int r = parse_split(h, n, &f);
        ok(r == t[i].hlen && f.len == t[i].len && f.opcode == 2 && f.fin == 1 && f.hlen == r &&
               memcmp(f.key, h + n - 4, 4) == 0,
           "length %llu in %d extra bytes: header %d, split at every byte",
           (unsigned long long)t[i].len, t[i].ext, t[i].hlen);
    }

    uint8_t h[16];
    nsv__ws_frame f;
    client_header(h, 0x82, 0, 8);
    h[2] = 0x80;
    is_int(nsv__ws_parse_header(h, 3, &f), PROTO, "64-bit length with top bit set: -1002 at byte 3");
    is_int(nsv__ws_parse_header(h, 14, &f), PROTO, "... and with the whole header");
    h[2] = 0x7F;
    is_int(nsv__ws_parse_header(h, 14, &f), 14, "top bit clear (0x7F..): accepted");
    is_int(nsv__ws_parse_header(h, 0, &f), 0, "empty buffer: incomplete");
}

/* Rule-by-rule expectation for the first two bytes. */
static int expect_2bytes(uint8_t b0, uint8_t b1)
{
    unsigned op = b0 & 0x0F, len7 = b1 & 0x7F;
    int known = op <= 2 || (op >= 8 && op <= 10);
    int control = op >= 8;
    if ((b0 & 0x70) || !known || (control && !(b0 & 0x80)))
        return PROTO;
    if (!(b1 & 0x80) || (control && len7 > 125))
        return PROTO;
    return 0; /* valid so far */
}

static void test_rules(void)
{
    uint8_t h[16];
    nsv__ws_frame f;
    static const uint8_t rsv[] = {0x40, 0x20, 0x10};
    for (int i = 0; i < 3; i++) {
        h[0] = (uint8_t)(0x81 | rsv[i]);
        is_int(nsv__ws_parse_header(h, 1, &f), PROTO, "RSV%d set: -1002 from the first byte", i + 1);
    }
    for (int op = 0; op < 16; op++) {
        int known = op <= 2 || (op >= 8 && op <= 10);
        size_t n = client_header(h, (uint8_t)(0x80 | op), 0, 0);
        int r = nsv__ws_parse_header(h, n, &f);
        ok(known ? r == 6 && f.opcode == op : r == PROTO, "opcode 0x%X %s", op,
           known ? "accepted" : "reserved: -1002");
    }
    for (int op = 8; op <= 10; op++) {
        client_header(h, (uint8_t)op, 0, 0);
        is_int(nsv__ws_parse_header(h, 1, &f), PROTO, "control 0x%X with FIN=0: -1002", op);
        size_t n = client_header(h, (uint8_t)(0x80 | op), 125, 0);
        is_int(nsv__ws_parse_header(h, n, &f), 6, "control 0x%X with 125 bytes: ok", op);
        client_header(h, (uint8_t)(0x80 | op), 126, 2);
        is_int(nsv__ws_parse_header(h, 2, &f), PROTO, "control 0x%X with 126 bytes: -1002", op);
        client_header(h, (uint8_t)(0x80 | op), 70000, 8);
        is_int(nsv__ws_parse_header(h, 2, &f), PROTO, "control 0x%X with 64-bit length: -1002", op);
        client_header(h, (uint8_t)(0x80 | op), 1, 2); /* 126 encoding of a small length */
        is_int(nsv__ws_parse_header(h, 8, &f), PROTO, "control 0x%X in 16-bit encoding: -1002", op);
    }
    h[0] = 0x81;
    h[1] = 0x05; /* no mask bit */
    is_int(nsv__ws_parse_header(h, 2, &f), PROTO, "unmasked client frame: -1002 at byte 2");
    h[0] = 0x01;
    h[1] = 0x85;
    memset(h + 2, 0, 4);
    ok(nsv__ws_parse_header(h, 6, &f) == 6 && f.fin == 0 && f.opcode == 1, "TEXT with FIN=0 ok");

    /* Exhaustive over the two first bytes: decided per the rules, and a
     * valid start becomes a header once the rest arrives. */
    int good = 1;
    for (int b0 = 0; b0 < 256; b0++)
        for (int b1 = 0; b1 < 256; b1++) {
            uint8_t buf[14] = {(uint8_t)b0, (uint8_t)b1};
            int want = expect_2bytes((uint8_t)b0, (uint8_t)b1);
            int r2 = nsv__ws_parse_header(buf, 2, &f);
            int r14 = nsv__ws_parse_header(buf, 14, &f);
            unsigned len7 = b1 & 0x7F;
            int hlen = len7 == 126 ? 8 : len7 == 127 ? 14 : 6;
            if (want == PROTO)
                good &= r2 == PROTO && r14 == PROTO;
            else
                good &= r2 == (hlen == 2 ? 2 : 0) && r14 == hlen;
            if (!good) {
                diag("b0 %02X b1 %02X: r2 %d r14 %d want %d", b0, b1, r2, r14, want);
                b0 = 256;
                break;
            }
        }
    ok(good, "all 65536 first-two-byte combinations follow the rules");

    /* RSV/opcode errors win even when only one byte is present; a valid
     * first byte alone is incomplete. */
    good = 1;
    for (int b0 = 0; b0 < 256; b0++) {
        uint8_t b = (uint8_t)b0;
        int r = nsv__ws_parse_header(&b, 1, &f);
        good &= r == (expect_2bytes(b, 0x80) == PROTO ? PROTO : 0);
    }
    ok(good, "one-byte inputs: -1002 exactly when byte 0 breaks a rule, else incomplete");
}

static void test_writer(void)
{
    struct { uint64_t len; size_t hlen; } t[] = {
        {0, 2}, {125, 2}, {126, 4}, {65535, 4}, {65536, 10},
        {UINT64_C(0xFFFFFFFF), 10}, {UINT64_C(0x7FFFFFFFFFFFFFFF), 10},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        uint8_t out[NSV__WS_MAX_HEADER], c[NSV__WS_MAX_HEADER];
        size_t n = nsv__ws_write_header(out, 1, NSV__WS_BINARY, t[i].len);
        /* Mask it like a client would, and parse it back. */
        memcpy(c, out, n);
        c[1] |= 0x80;
        memcpy(c + n, "\x01\x02\x03\x04", 4);
        nsv__ws_frame f;
        int r = nsv__ws_parse_header(c, n + 4, &f);
        ok(n == t[i].hlen && !(out[1] & 0x80) && r == (int)n + 4 && f.len == t[i].len &&
               f.opcode == 2 && f.fin == 1,
           "writer: length %llu -> %zu-byte unmasked header, parses back",
           (unsigned long long)t[i].len, t[i].hlen);
    }
    uint8_t out[NSV__WS_MAX_HEADER];
    size_t n = nsv__ws_write_header(out, 1, NSV__WS_TEXT, 5);
    ok(n == 2 && out[0] == 0x81 && out[1] == 0x05, "writer: 'Hello' text frame header is 81 05");
    n = nsv__ws_write_header(out, 0, NSV__WS_TEXT, 3);
    ok(n == 2 && out[0] == 0x01, "writer: FIN=0 clears the top bit");
    n = nsv__ws_write_header(out, 1, NSV__WS_CONT, 256);
    ok(n == 4 && out[0] == 0x80 && out[1] == 126 && out[2] == 1 && out[3] == 0,
       "writer: 256 bytes -> 7E 01 00");
    n = nsv__ws_write_header(out, 1, NSV__WS_BINARY, 65536);
    ok(n == 10 && out[1] == 127 && !memcmp(out + 2, "\0\0\0\0\0\x01\0\0", 8),
       "writer: 65536 -> 7F 00 00 00 00 00 01 00 00");
    n = nsv__ws_write_header(out, 1, NSV__WS_PONG, 0);
    ok(n == 2 && out[0] == 0x8A && out[1] == 0, "writer: empty pong 8A 00");
}

static void unmask_ref(uint8_t *p, size_t n, const uint8_t key[4], size_t off)
{
    for (size_t i = 0; i < n; i++)
        p[i] ^= key[(off + i) % 4];
}

static void test_unmask(void)
{
    static const uint8_t key[4] = {0xA1, 0x5B, 0xC3, 0x0E};
    static uint8_t src[300], a[320], b[320];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (uint8_t)(i * 131 + 7);

    int good = 1;
    for (size_t align = 0; align < 16; align++)
        for (size_t off = 0; off < 8; off++)
            for (size_t n = 0; n <= 300 && good; n += (n < 80 ? 1 : 37)) {
                memcpy(a + align, src, n);
                memcpy(b + align, src, n);
                a[align + n] = b[align + n] = 0x5A; /* guard byte */
                nsv__ws_unmask(a + align, n, key, off);
                unmask_ref(b + align, n, key, off);
                good = !memcmp(a, b, align + n + 1);
                if (!good)
                    diag("align %zu off %zu n %zu", align, off, n);
            }
    ok(good, "unmask = byte-wise reference for every alignment, offset and length 0..300");

    good = 1;
    size_t n = 200;
    memcpy(b, src, n);
    unmask_ref(b, n, key, 0);
    for (size_t i = 0; i <= n && good; i++)
        for (size_t j = i; j <= n && good; j += 3) {
            memcpy(a + 1, src, n); /* odd address on purpose */
            nsv__ws_unmask(a + 1, i, key, 0);
            nsv__ws_unmask(a + 1 + i, j - i, key, i);
            nsv__ws_unmask(a + 1 + j, n - j, key, j);
            good = !memcmp(a + 1, b, n);
        }
    ok(good, "unmask in three pieces with running offsets = unmask whole");

    /* RFC 6455 5.7: masked "Hello". */
    uint8_t hello[] = {0x7f, 0x9f, 0x4d, 0x51, 0x58};
    nsv__ws_unmask(hello, 5, (const uint8_t *)"\x37\xfa\x21\x3d", 0);
    is_mem(hello, 5, "Hello", "RFC 6455 5.7 masked 'Hello' example");
    memcpy(a, src, 64);
    nsv__ws_unmask(a, 64, key, 0);
    nsv__ws_unmask(a, 64, key, 0);
    ok(!memcmp(a, src, 64), "unmasking twice restores the data");
    nsv__ws_unmask(a, 0, key, 3);
    ok(1, "zero-length unmask is a no-op");
}

static nsv__ws_frame frame(int fin, int op, uint64_t len)
{
    nsv__ws_frame f = {0};
    f.fin = (uint8_t)fin;
    f.opcode = (uint8_t)op;
    f.len = len;
    return f;
}

static void test_assembler(void)
{
    nsv__ws_msg m = {0};
    nsv__ws_frame f = frame(1, NSV__WS_TEXT, 5);
    is_int(nsv__ws_msg_frame(&m, &f), NSV__WS_TEXT, "single TEXT frame: opcode 1");
    is_int(nsv__ws_msg_data(&m, (const uint8_t *)"hello", 5), 0, "valid text data");
    is_int(nsv__ws_msg_frame_end(&m), 1, "FIN frame ends the message");
    is_int(m.opcode, 0, "state reset after the message");

    f = frame(0, NSV__WS_BINARY, 3);
    is_int(nsv__ws_msg_frame(&m, &f), NSV__WS_BINARY, "BINARY start, FIN=0");
    is_int(nsv__ws_msg_data(&m, (const uint8_t *)"\xff\xfe\x00", 3), 0, "binary is not validated");
    is_int(nsv__ws_msg_frame_end(&m), 0, "more fragments follow");
    f = frame(1, NSV__WS_PING, 2);
    is_int(nsv__ws_msg_frame(&m, &f), NSV__WS_PING, "PING between fragments is allowed");
    f = frame(0, NSV__WS_CONT, 3);
    is_int(nsv__ws_msg_frame(&m, &f), NSV__WS_BINARY, "continuation reports the message opcode");
    is_int(nsv__ws_msg_frame_end(&m), 0, "still open");
    f = frame(1, NSV__WS_CONT, 4);
    is_int(nsv__ws_msg_frame(&m, &f), NSV__WS_BINARY, "final continuation");
    is_int(m.size, 10, "message size is the sum of fragment lengths");
    is_int(nsv__ws_msg_frame_end(&m), 1, "message complete");

    f = frame(1, NSV__WS_CONT, 1);
    is_int(nsv__ws_msg_frame(&m, &f), PROTO, "continuation without a message: -1002");
    f = frame(0, NSV__WS_CONT, 1);
    is_int(nsv__ws_msg_frame(&m, &f), PROTO, "unfinished continuation without a message: -1002");

    memset(&m, 0, sizeof m);
    f = frame(0, NSV__WS_TEXT, 1);
    nsv__ws_msg_frame(&m, &f);
    nsv__ws_msg_frame_end(&m);
    f = frame(1, NSV__WS_TEXT, 1);
    is_int(nsv__ws_msg_frame(&m, &f), PROTO, "TEXT inside a fragmented message: -1002");
    f = frame(1, NSV__WS_BINARY, 1);
    is_int(nsv__ws_msg_frame(&m, &f), PROTO, "BINARY inside a fragmented message: -1002");

    /* UTF-8 across fragments. */
    memset(&m, 0, sizeof m);
    f = frame(0, NSV__WS_TEXT, 2);
    nsv__ws_msg_frame(&m, &f);
    is_int(nsv__ws_msg_data(&m, (const uint8_t *)"a\xe2", 2), 0, "text fragment ending mid-character");
    is_int(nsv__ws_msg_frame_end(&m), 0, "... is fine between fragments");
    f = frame(1, NSV__WS_CONT, 3);
    nsv__ws_msg_frame(&m, &f);
    is_int(nsv__ws_msg_data(&m, (const uint8_t *)"\x82", 1), 0, "continued in pieces");
    is_int(nsv__ws_msg_data(&m, (const uint8_t *)"\xac!", 2), 0, "... completing U+20AC");
    is_int(nsv__ws_msg_frame_end(&m), 1, "message valid");

    memset(&m, 0, sizeof m);
    f = frame(1, NSV__WS_TEXT, 3);
    nsv__ws_msg_frame(&m, &f);
    is_int(nsv__ws_msg_data(&m, (const uint8_t *)"a\xe2", 2), 0, "final frame, mid-character so far");
    is_int(nsv__ws_msg_frame_end(&m), -1007, "message ending mid-character: -1007");
    is_int(m.opcode, 0, "state reset after the failure too");

    memset(&m, 0, sizeof m);
    f = frame(0, NSV__WS_TEXT, 4);
    nsv__ws_msg_frame(&m, &f);
    is_int(nsv__ws_msg_data(&m, (const uint8_t *)"ok\xed\xa0", 4), -1007,
           "surrogate in a non-final fragment: -1007 at once (fail fast)");

    /* Size limit, checked from headers alone. */
    memset(&m, 0, sizeof m);
    m.max = 10;
    f = frame(1, NSV__WS_TEXT, 10);
    is_int(nsv__ws_msg_frame(&m, &f), NSV__WS_TEXT, "message of exactly max bytes: ok");
    nsv__ws_msg_frame_end(&m);
    f = frame(1, NSV__WS_TEXT, 11);
    is_int(nsv__ws_msg_frame(&m, &f), -1009, "one byte over max: -1009");
    memset(&m, 0, sizeof m);
    m.max = 10;
    f = frame(0, NSV__WS_BINARY, 6);
    nsv__ws_msg_frame(&m, &f);
    nsv__ws_msg_frame_end(&m);
    f = frame(1, NSV__WS_CONT, 5);
    is_int(nsv__ws_msg_frame(&m, &f), -1009, "fragments summing over max: -1009");
    memset(&m, 0, sizeof m);
    m.max = 100;
    f = frame(0, NSV__WS_BINARY, 50);
    nsv__ws_msg_frame(&m, &f);
    nsv__ws_msg_frame_end(&m);
    f = frame(1, NSV__WS_CONT, UINT64_C(0x7FFFFFFFFFFFFFFF));
    is_int(nsv__ws_msg_frame(&m, &f), -1009, "huge fragment length cannot wrap the sum");
    f = frame(1, NSV__WS_PING, 125);
    is_int(nsv__ws_msg_frame(&m, &f), NSV__WS_PING, "control frames do not count toward max");
    memset(&m, 0, sizeof m);
    f = frame(1, NSV__WS_BINARY, UINT64_C(0x7FFFFFFFFFFFFFFF));
    is_int(nsv__ws_msg_frame(&m, &f), NSV__WS_BINARY, "max 0 means unlimited");
}

static int close_ref_valid(unsigned c)
{
    if (c < 1000 || c >= 5000)
        return 0;
    if (c == 1004 || c == 1005 || c == 1006 || c == 1015)
        return 0;
    if (c >= 1016 && c <= 2999)
        return 0;
    return 1;
}

static void test_close(void)
{
    uint16_t code = 0;
    is_int(nsv__ws_check_close(NULL, 0, &code), 0, "empty close payload is valid");
    is_int(code, 1005, "... and reports 1005 (no status)");
    is_int(nsv__ws_check_close((const uint8_t *)"\x03", 1, &code), PROTO, "1-byte close payload: -1002");

    static const unsigned valid[] = {1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011,
                                     1012, 1013, 1014, 3000, 3999, 4000, 4999};
    static const unsigned invalid[] = {0, 1, 999, 1004, 1005, 1006, 1015, 1016, 1100,
                                       2000, 2999, 5000, 65535};
    for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++) {
        uint8_t p[2] = {(uint8_t)(valid[i] >> 8), (uint8_t)valid[i]};
        code = 0;
        ok(nsv__ws_check_close(p, 2, &code) == 0 && code == valid[i], "close code %u valid", valid[i]);
    }
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        uint8_t p[2] = {(uint8_t)(invalid[i] >> 8), (uint8_t)invalid[i]};
        is_int(nsv__ws_check_close(p, 2, &code), PROTO, "close code %u: -1002", invalid[i]);
    }
    int good = 1;
    for (unsigned c = 0; c < 65536; c++) {
        uint8_t p[2] = {(uint8_t)(c >> 8), (uint8_t)c};
        int r = nsv__ws_check_close(p, 2, &code);
        good &= close_ref_valid(c) ? r == 0 && code == c : r == PROTO;
        good &= nsv__ws_close_code_valid(c) == close_ref_valid(c);
    }
    ok(good, "all 65536 codes classified per RFC 6455 7.4");

    is_int(nsv__ws_check_close((const uint8_t *)"\x03\xe8" "bye \xc3\xa9", 8, &code), 0,
           "1000 with a UTF-8 reason: valid");
    is_int(nsv__ws_check_close((const uint8_t *)"\x03\xe8" "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc"
                               "\xce\xb5\xed\xa0\x80\x65\x64\x69\x74\x65\x64", 22, &code), -1007,
           "Autobahn 7.5.1: reason with a surrogate: -1007");
    is_int(nsv__ws_check_close((const uint8_t *)"\x03\xe8" "ab\xe2\x82", 6, &code), -1007,
           "reason truncated mid-character: -1007");
    is_int(nsv__ws_check_close((const uint8_t *)"\x03\xe4" "ok", 4, &code), PROTO,
           "bad code with a valid reason: -1002 (code checked first)");
}

int main(void)
{
    test_lengths();
    test_rules();
    test_writer();
    test_unmask();
    test_assembler();
    test_close();
    return done_testing();
}
