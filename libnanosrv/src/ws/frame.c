/* frame.c - RFC 6455 framing primitives (see frame.h). */
#include "frame.h"
#include "utf8.h"

#include <string.h>

#define ERR_PROTO (-NSV__WS_PROTOCOL_ERROR)
#define ERR_DATA (-NSV__WS_INVALID_DATA)
#define ERR_BIG (-NSV__WS_TOO_BIG)

/* Opcodes 0-2 and 8-10 are defined; the rest are reserved. */
static int opcode_known(unsigned op) { return op <= 0x2 || (op >= 0x8 && op <= 0xA); }

/* Checks what byte 0 alone decides: RSV bits, opcode, FIN on control.
 * rsv1_ok: permessage-deflate is on, so RSV1 may mark the first frame of a
 * data message (TEXT or BINARY; never a continuation or control frame). */
static int check_byte0(uint8_t b0, int rsv1_ok)
{
    unsigned op = b0 & 0x0F;
    if ((b0 & 0x30) || !opcode_known(op))
        return ERR_PROTO;
    if ((b0 & 0x40) && !(rsv1_ok && (op == NSV__WS_TEXT || op == NSV__WS_BINARY)))
        return ERR_PROTO;
    if (nsv__ws_is_control((int)op) && !(b0 & 0x80))
        return ERR_PROTO; /* control frames must not be fragmented */
    return 0;
}

/* masked: what the peer must do (1: frames from a client, 0: from a server). */
static int parse_header(const uint8_t *buf, size_t len, nsv__ws_frame *f, int masked, int rsv1_ok)
{
    if (len < 1)
        return 0;
    if (check_byte0(buf[0], rsv1_ok) < 0)
        return ERR_PROTO;
    if (len < 2)
        return 0;

    unsigned op = buf[0] & 0x0F, len7 = buf[1] & 0x7F;
    if (!(buf[1] & 0x80) != !masked)
        return ERR_PROTO; /* clients mask every frame, servers none (5.1) */
    if (nsv__ws_is_control((int)op) && len7 > NSV__WS_MAX_CONTROL)
        return ERR_PROTO; /* also rules out 126/127 extended lengths */

    size_t ext = len7 == 126 ? 2 : len7 == 127 ? 8 : 0;
    if (ext == 8 && len >= 3 && (buf[2] & 0x80))
        return ERR_PROTO; /* the top bit of a 64-bit length must be 0 */
    size_t hlen = 2 + ext + (masked ? 4 : 0);
    if (len < hlen)
        return 0;

    uint64_t plen = len7;
    if (ext) {
        plen = 0;
        for (size_t i = 0; i < ext; i++)
            plen = (plen << 8) | buf[2 + i];
    }
    f->len = plen;
    if (masked)
        memcpy(f->key, buf + 2 + ext, 4);
    else
        memset(f->key, 0, 4);
    f->opcode = (uint8_t)op;
    f->fin = (uint8_t)(buf[0] >> 7);
    f->rsv1 = (uint8_t)((buf[0] >> 6) & 1);
    f->hlen = (uint8_t)hlen;
    return (int)hlen;
}

int nsv__ws_parse_header(const uint8_t *buf, size_t len, nsv__ws_frame *f)
{
    return parse_header(buf, len, f, 1, 0);
}

int nsv__ws_parse_header_rsv1(const uint8_t *buf, size_t len, nsv__ws_frame *f)
{
    return parse_header(buf, len, f, 1, 1);
}

int nsv__ws_parse_server_header(const uint8_t *buf, size_t len, nsv__ws_frame *f)
{
    return parse_header(buf, len, f, 0, 0);
}

/* Unmasking. The key byte for payload position i is key[i % 4]. Once p is
 * 8-aligned, an 8-byte pattern of key bytes starting at the right phase is
 * XORed a word at a time; memcpy keeps it free of aliasing/alignment UB and
 * compiles to plain (often vector) loads and stores. */
static uint64_t key_word(const uint8_t key[4], size_t phase)
{
    uint8_t b[8];
    for (size_t i = 0; i < 8; i++)
        b[i] = key[(phase + i) & 3];
    uint64_t w;
    memcpy(&w, b, 8);
    return w;
}

void nsv__ws_unmask(uint8_t *p, size_t n, const uint8_t key[4], size_t offset)
{
    size_t i = 0;
    size_t head = (size_t)(-(uintptr_t)p & 7);
    if (head > n)
        head = n;
    for (; i < head; i++)
        p[i] ^= key[(offset + i) & 3];
    if (n - i >= 8) {
        uint64_t w = key_word(key, offset + i);
        for (; n - i >= 32; i += 32) {
            uint64_t a[4];
            memcpy(a, p + i, 32);
            a[0] ^= w;
            a[1] ^= w;
            a[2] ^= w;
            a[3] ^= w;
            memcpy(p + i, a, 32);
        }
        for (; n - i >= 8; i += 8) {
            uint64_t a;
            memcpy(&a, p + i, 8);
            a ^= w;
            memcpy(p + i, &a, 8);
        }
    }
    for (; i < n; i++)
        p[i] ^= key[(offset + i) & 3];
}

size_t nsv__ws_write_header(uint8_t out[NSV__WS_MAX_HEADER], int fin, int opcode, uint64_t len)
{
    out[0] = (uint8_t)((fin ? 0x80 : 0) | (opcode & (NSV__WS_RSV1 | 0x0F)));
    if (len <= 125) {
        out[1] = (uint8_t)len;
        return 2;
    }
    if (len <= 0xFFFF) {
        out[1] = 126;
        out[2] = (uint8_t)(len >> 8);
        out[3] = (uint8_t)len;
        return 4;
    }
    out[1] = 127;
    for (int i = 0; i < 8; i++)
        out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
    return 10;
}

size_t nsv__ws_write_masked_header(uint8_t out[NSV__WS_MAX_HEADER], int fin, int opcode, uint64_t len,
                                   const uint8_t key[4])
{
    size_t h = nsv__ws_write_header(out, fin, opcode, len);
    out[1] |= 0x80;
    memcpy(out + h, key, 4);
    return h + 4;
}

int nsv__ws_msg_frame(nsv__ws_msg *m, const nsv__ws_frame *f)
{
    if (nsv__ws_is_control(f->opcode))
        return f->opcode; /* may interleave fragments; no message state */
    if (f->opcode == NSV__WS_CONT) {
        if (!m->opcode)
            return ERR_PROTO; /* nothing to continue */
    } else {
        if (m->opcode)
            return ERR_PROTO; /* previous message not finished */
        m->opcode = f->opcode;
        m->size = 0;
        m->utf8 = NSV__UTF8_ACCEPT;
    }
    /* Compared by subtraction so a huge f->len cannot wrap the sum. */
    if (m->max && (f->len > m->max || m->size > m->max - f->len))
        return ERR_BIG;
    m->size += f->len;
    m->fin = f->fin;
    return m->opcode;
}

int nsv__ws_msg_data(nsv__ws_msg *m, const uint8_t *p, size_t n)
{
    if (m->opcode != NSV__WS_TEXT)
        return 0;
    m->utf8 = nsv__utf8_feed(m->utf8, p, n);
    return m->utf8 == NSV__UTF8_REJECT ? ERR_DATA : 0;
}

int nsv__ws_msg_frame_end(nsv__ws_msg *m)
{
    if (!m->fin)
        return 0;
    int bad = m->opcode == NSV__WS_TEXT && m->utf8 != NSV__UTF8_ACCEPT;
    m->opcode = 0;
    m->fin = 0;
    m->utf8 = NSV__UTF8_ACCEPT;
    return bad ? ERR_DATA : 1;
}

int nsv__ws_close_code_valid(unsigned code)
{
    if (code >= 3000 && code <= 4999)
        return 1; /* libraries (3xxx) and applications (4xxx) */
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014);
}

int nsv__ws_check_close(const uint8_t *p, size_t n, uint16_t *code)
{
    if (n == 0) {
        *code = NSV__WS_NO_STATUS;
        return 0;
    }
    if (n == 1)
        return ERR_PROTO; /* half a status code */
    uint16_t c = (uint16_t)(p[0] << 8 | p[1]);
    if (!nsv__ws_close_code_valid(c))
        return ERR_PROTO;
    if (!nsv__utf8_valid(p + 2, n - 2))
        return ERR_DATA;
    *code = c;
    return 0;
}
