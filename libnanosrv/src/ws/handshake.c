/* handshake.c - SHA-1 and the Sec-WebSocket-Accept / -Key helpers. */
#include "handshake.h"
#include "../internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

static const char WS_GUID[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

static uint32_t rol(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

static uint32_t load_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void store_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* One 64-byte block. The message schedule lives in a rolling 16-word window
 * instead of 80 words: less stack, same result. */
static void sha1_block(uint32_t h[5], const uint8_t *blk)
{
    uint32_t w[16];
    for (int i = 0; i < 16; i++)
        w[i] = load_be32(blk + 4 * i);

    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; i++) {
        if (i >= 16)
            w[i & 15] = rol(w[(i + 13) & 15] ^ w[(i + 8) & 15] ^ w[(i + 2) & 15] ^ w[i & 15], 1);
        uint32_t f, k;
        if (i < 20) {
            f = (b & c) | (~b & d);
            k = 0x5A827999;
        } else if (i < 40) {
            f = b ^ c ^ d;
            k = 0x6ED9EBA1;
        } else if (i < 60) {
            f = (b & c) | (b & d) | (c & d);
            k = 0x8F1BBCDC;
        } else {
            f = b ^ c ^ d;
            k = 0xCA62C1D6;
        }
        uint32_t t = rol(a, 5) + f + e + k + w[i & 15];
        e = d;
        d = c;
        c = rol(b, 30);
        b = a;
        a = t;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
}

void nsv__sha1_init(nsv__sha1_ctx *c)
{
    static const uint32_t iv[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    memcpy(c->h, iv, sizeof iv);
    c->bytes = 0;
}

void nsv__sha1_update(nsv__sha1_ctx *c, const void *data, size_t n)
{
    const uint8_t *p = data;
    size_t used = (size_t)(c->bytes & 63);
    c->bytes += n;
    if (used) {
        size_t take = 64 - used < n ? 64 - used : n;
        memcpy(c->buf + used, p, take);
        p += take;
        n -= take;
        if (used + take < 64)
            return;
        sha1_block(c->h, c->buf);
    }
    for (; n >= 64; p += 64, n -= 64)
        sha1_block(c->h, p);
    if (n)
        memcpy(c->buf, p, n);
}

void nsv__sha1_final(nsv__sha1_ctx *c, uint8_t out[20])
{
    uint64_t bits = c->bytes * 8;
    size_t used = (size_t)(c->bytes & 63);
    c->buf[used++] = 0x80;
    if (used > 56) {
        memset(c->buf + used, 0, 64 - used);
        sha1_block(c->h, c->buf);
        used = 0;
    }
    memset(c->buf + used, 0, 56 - used);
    store_be32(c->buf + 56, (uint32_t)(bits >> 32));
    store_be32(c->buf + 60, (uint32_t)bits);
    sha1_block(c->h, c->buf);
    for (int i = 0; i < 5; i++)
        store_be32(out + 4 * i, c->h[i]);
}

void nsv__sha1(const void *data, size_t n, uint8_t out[20])
{
    nsv__sha1_ctx c;
    nsv__sha1_init(&c);
    nsv__sha1_update(&c, data, n);
    nsv__sha1_final(&c, out);
}

/* A valid key is the base64 of exactly 16 bytes, padded: 22 chars + "==".
 * nsv_base64_decode rejects stray bits in the last character. */
int nsv__ws_check_key(const char *key, size_t len)
{
    char raw[18];
    if (!key || len != 24 || key[22] != '=' || key[23] != '=')
        return NSV_EINVAL;
    return nsv_base64_decode(key, len, raw, sizeof raw) == 16 ? 0 : NSV_EINVAL;
}

int nsv__ws_accept_key(const char *key, size_t key_len, char out[NSV__WS_ACCEPT_LEN])
{
    if (nsv__ws_check_key(key, key_len) != 0)
        return NSV_EINVAL;
    nsv__sha1_ctx c;
    uint8_t d[20];
    nsv__sha1_init(&c);
    nsv__sha1_update(&c, key, key_len);
    nsv__sha1_update(&c, WS_GUID, sizeof WS_GUID - 1);
    nsv__sha1_final(&c, d);
    return nsv_base64_encode((const char *)d, sizeof d, out, NSV__WS_ACCEPT_LEN) == NSV__WS_ACCEPT_LEN ? 0 : NSV_EINVAL;
}

/* The kernel's CSPRNG; /dev/urandom where getrandom is missing (old kernels). */
int nsv__ws_random(void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n) {
        ssize_t k = getrandom(p, n, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno == ENOSYS) {
            int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
            if (fd < 0)
                return NSV_ESYS;
            while (n) {
                k = read(fd, p, n);
                if (k < 0 && errno == EINTR)
                    continue;
                if (k <= 0) {
                    close(fd);
                    return NSV_ESYS;
                }
                p += k;
                n -= (size_t)k;
            }
            close(fd);
            return 0;
        }
        if (k <= 0)
            return NSV_ESYS;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

int nsv__ws_client_key(char out[24])
{
    uint8_t raw[16];
    if (nsv__ws_random(raw, sizeof raw) != 0)
        return NSV_ESYS;
    return nsv_base64_encode((const char *)raw, sizeof raw, out, 24) == 24 ? 0 : NSV_EINVAL;
}
