/* fuzz_ws_inflate.c - permessage-deflate (ws/deflate.c) on hostile input:
 *  - byte 0 picks the window, context takeover and a message size limit;
 *    the rest, cut at 0xff 0xfe pairs into messages and each message in two
 *    pieces, is inflated as the payloads of compressed messages: results
 *    are 0, -1007 or -1009, never more bytes than the limit, and after an
 *    error the connection would end (the fuzzer stops feeding it);
 *  - the same bytes as a Sec-WebSocket-Extensions value: negotiation never
 *    reads past them, and an accepted offer's answer is well formed and
 *    negotiates to itself;
 *  - the bytes as a message: deflated then inflated by a second stream with
 *    the agreed windows, they come back unchanged. */
#include "ws/deflate.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct out {
    uint8_t *p;
    size_t len, cap;
} out;

static int sink(void *ctx, const uint8_t *p, size_t n)
{
    out *o = ctx;
    if (o->len + n > o->cap)
        return -1011; /* only the round trip collects, into room enough */
    memcpy(o->p + o->len, p, n);
    o->len += n;
    return 0;
}

static int count(void *ctx, const uint8_t *p, size_t n)
{
    (void)p;
    *(size_t *)ctx += n;
    return 0;
}

static void negotiate(const uint8_t *d, size_t n)
{
    char *v = malloc(n ? n : 1); /* exact size: ASan sees any read past it */
    memcpy(v, d, n);
    nsv__pmd_cfg cfg;
    if (nsv__pmd_negotiate(v, n, 8 + (n % 8), &cfg)) {
        char a[NSV__PMD_ANSWER_MAX];
        size_t k = nsv__pmd_answer(&cfg, a);
        if (k > sizeof a || k < 28 || memcmp(a + k - 2, "\r\n", 2) != 0)
            abort();
        nsv__pmd_cfg again;
        if (!nsv__pmd_negotiate(a + 26, k - 28, 15, &again))
            abort(); /* our answer is an acceptable offer */
        nsv__pmd_cfg un;
        nsv__pmd_unpack(nsv__pmd_pack(&cfg), &un);
        if (memcmp(&un, &cfg, sizeof cfg) != 0)
            abort();
    }
    free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    negotiate(data, size);
    if (!nsv__pmd_available())
        return 0;
    uint8_t c0 = data[0];
    nsv__pmd_cfg cfg = {.on = 1, .client_bits = (uint8_t)(8 + (c0 & 7)), .server_bits = (uint8_t)(9 + (c0 >> 5) % 7),
                        .client_nct = (c0 >> 3) & 1, .server_nct = (c0 >> 4) & 1};
    uint64_t limit = (c0 & 0x40) ? 1000 : 1 << 20;
    const uint8_t *p = data + 1;
    size_t n = size - 1;

    nsv__pmd *in = nsv__pmd_new(&nsv__default_alloc, &cfg);
    if (!in)
        return 0;
    size_t i = 0;
    while (i <= n) {
        size_t e = i;
        while (e + 1 < n && !(p[e] == 0xff && p[e + 1] == 0xfe))
            e++;
        if (e + 1 >= n)
            e = n;
        size_t half = (e - i) / 2, got = 0;
        int r = nsv__pmd_inflate(in, p + i, half, 0, limit, count, &got);
        if (r == 0)
            r = nsv__pmd_inflate(in, p + i + half, e - i - half, 1, limit, count, &got);
        if (r != 0 && r != -1007 && r != -1009)
            abort();
        if (got > limit + 16384)
            abort(); /* counted as it comes out: at most one chunk past */
        if (r == 0 && got > limit)
            abort();
        if (r != 0)
            break; /* the connection fails here */
        i = e + 2;
    }
    nsv__pmd_free(in);

    /* round trip, twice so context takeover is exercised */
    nsv__pmd_cfg rc = cfg;
    rc.client_bits = rc.server_bits; /* the sender's window is what the receiver allows */
    rc.client_nct = rc.server_nct;   /* and both reset, or neither */
    nsv__pmd *tx = nsv__pmd_new(&nsv__default_alloc, &rc);
    nsv__pmd *rx = nsv__pmd_new(&nsv__default_alloc, &rc);
    size_t cap = nsv__pmd_bound(n);
    uint8_t *z = malloc(cap ? cap : 1);
    out o = {malloc(n ? n : 1), 0, n};
    for (int k = 0; tx && rx && z && o.p && k < 2; k++) {
        long zl = nsv__pmd_deflate(tx, p, n, z, cap);
        if (zl < 0)
            abort(); /* the bound holds */
        o.len = 0;
        if (nsv__pmd_inflate(rx, z, (size_t)zl, 1, 0, sink, &o) != 0 || o.len != n || memcmp(o.p, p, n) != 0)
            abort();
    }
    free(z);
    free(o.p);
    nsv__pmd_free(tx);
    nsv__pmd_free(rx);
    return 0;
}
