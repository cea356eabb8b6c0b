/* fuzz_utf8.c - incremental UTF-8 validator invariants:
 *  - feeding in pieces (any split points) gives the one-shot state;
 *  - byte-at-a-time feeding rejects at exactly the first byte after which no
 *    valid completion exists, per an independent range-based reference;
 *  - the result does not depend on the buffer's alignment (ASCII fast path). */
#include "ws/utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { R_ACC, R_MID, R_REJ };

static int seq_len(uint8_t b)
{
    return b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
}

/* Can s[0..have) still complete to a valid need-byte sequence? The reachable
 * code points form an interval; it must meet [min(need), U+10FFFF] outside
 * the surrogates. */
static int viable(const uint8_t *s, int have, int need)
{
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    static const uint32_t lead_bits[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
    uint32_t lo = s[0] & lead_bits[need], hi = lo;
    for (int i = 1; i < need; i++) {
        lo = lo << 6 | (i < have ? (s[i] & 0x3Fu) : 0);
        hi = hi << 6 | (i < have ? (s[i] & 0x3Fu) : 0x3F);
    }
    if (hi < min_cp[need] || lo > 0x10FFFF)
        return 0;
    lo = lo < min_cp[need] ? min_cp[need] : lo;
    hi = hi > 0x10FFFF ? 0x10FFFF : hi;
    return !(lo >= 0xD800 && hi <= 0xDFFF);
}

static int ref_check(const uint8_t *s, size_t n, size_t *bad)
{
    *bad = n;
    for (size_t i = 0; i < n;) {
        int need = seq_len(s[i]);
        if (!need) {
            *bad = i;
            return R_REJ;
        }
        int have = 1;
        for (;;) {
            if (!viable(s + i, have, need)) {
                *bad = i + (size_t)have - 1;
                return R_REJ;
            }
            if (have == need || i + (size_t)have == n)
                break;
            if ((s[i + have] & 0xC0) != 0x80) {
                *bad = i + (size_t)have;
                return R_REJ;
            }
            have++;
        }
        if (have < need)
            return R_MID;
        i += (size_t)need;
    }
    return R_ACC;
}

static int classify(uint32_t st)
{
    return st == NSV__UTF8_ACCEPT ? R_ACC : st == NSV__UTF8_REJECT ? R_REJ : R_MID;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t whole = nsv__utf8_feed(NSV__UTF8_ACCEPT, data, size);

    size_t bad;
    int ref = ref_check(data, size, &bad);
    if (classify(whole) != ref)
        abort();

    /* Byte at a time: REJECT appears exactly at the reference's index. */
    uint32_t st = NSV__UTF8_ACCEPT;
    for (size_t i = 0; i < size; i++) {
        st = nsv__utf8_feed(st, data + i, 1);
        if ((st == NSV__UTF8_REJECT) != (i >= bad))
            abort();
    }
    if (st != whole)
        abort();

    /* Two-piece splits: every point for short inputs, a spread otherwise. */
    size_t step = size <= 256 ? 1 : size / 61 + 1;
    for (size_t cut = 0; cut <= size; cut += step) {
        uint32_t s2 = nsv__utf8_feed(nsv__utf8_feed(NSV__UTF8_ACCEPT, data, cut), data + cut, size - cut);
        if (s2 != whole)
            abort();
    }

    /* Uneven pieces whose sizes come from the data itself. */
    st = NSV__UTF8_ACCEPT;
    for (size_t i = 0; i < size;) {
        size_t k = 1 + data[i] % 23;
        if (k > size - i)
            k = size - i;
        st = nsv__utf8_feed(st, data + i, k);
        i += k;
    }
    if (st != whole)
        abort();

    /* Alignment must not matter. */
    uint8_t *copy = malloc(size + 8);
    if (copy) {
        for (size_t a = 1; a < 8; a += 3) {
            memcpy(copy + a, data, size);
            if (nsv__utf8_feed(NSV__UTF8_ACCEPT, copy + a, size) != whole)
                abort();
        }
        free(copy);
    }
    return 0;
}
