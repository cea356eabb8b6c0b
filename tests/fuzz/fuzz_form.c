/* fuzz_form.c - libFuzzer target for nsv_form_parse. The input is the
 * form body. Checks the result against a byte-at-a-time reference of the
 * WHATWG urlencoded parser, that the sizing call agrees with the writing
 * calls (the one-pass and the two-pass paths), that the pairs lie end to
 * end in dst, and that too small buffers are left untouched. */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(int cond)
{
    if (!cond)
        abort();
}

static int hexv(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Reference: percent-decode s[0..n) with '+' as space into o. */
static size_t ref_decode(const unsigned char *s, size_t n, char *o)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '+') {
            o[k++] = ' ';
        } else if (s[i] == '%' && i + 2 < n && hexv(s[i + 1]) >= 0 && hexv(s[i + 2]) >= 0) {
            o[k++] = (char)(hexv(s[i + 1]) * 16 + hexv(s[i + 2]));
            i += 2;
        } else {
            o[k++] = (char)s[i];
        }
    }
    return k;
}

/* Reference parser: same layout as nsv_form_parse, buffers large enough. */
static size_t ref_parse(const unsigned char *s, size_t n, uint32_t *pairs, char *dst, size_t *np)
{
    size_t need = 0, count = 0, i = 0;
    while (i <= n) {
        size_t j = i;
        while (j < n && s[j] != '&')
            j++;
        if (j > i) {
            const unsigned char *eq = memchr(s + i, '=', j - i);
            size_t kend = eq ? (size_t)(eq - s) : j;
            size_t kl = ref_decode(s + i, kend - i, dst + need);
            pairs[4 * count] = (uint32_t)need;
            pairs[4 * count + 1] = (uint32_t)kl;
            need += kl;
            size_t vl = eq ? ref_decode(s + kend + 1, j - kend - 1, dst + need) : 0;
            pairs[4 * count + 2] = (uint32_t)need;
            pairs[4 * count + 3] = (uint32_t)vl;
            need += vl;
            count++;
        }
        i = j + 1;
    }
    *np = count;
    return need;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Exact-size copy so reads past the input are caught. */
    char *s = malloc(size ? size : 1);
    check(s != NULL);
    if (size)
        memcpy(s, data, size);

    uint32_t np = 0xdeadbeef;
    int64_t need = nsv_form_parse(s, size, NULL, 0, NULL, 0, &np);
    check(need >= 0 && (size_t)need <= size);
    check(np <= size / 2 + 1);

    size_t maxp = size / 2 + 1;
    uint32_t *rp = malloc(maxp * 16);
    char *rd = malloc(size + 1);
    check(rp && rd);
    size_t rnp;
    size_t rneed = ref_parse((const unsigned char *)s, size, rp, rd, &rnp);
    check((size_t)need == rneed && np == rnp);

    /* Exact buffers (two passes) and roomy ones (one pass). */
    for (int roomy = 0; roomy < 2; roomy++) {
        size_t pc = roomy ? maxp : np, dc = roomy ? size : (size_t)need;
        uint32_t *pairs = malloc(pc ? pc * 16 : 1);
        char *dst = malloc(dc ? dc : 1);
        check(pairs && dst);
        uint32_t np2 = 0;
        check(nsv_form_parse(s, size, pairs, pc, dst, dc, &np2) == need && np2 == np);
        size_t at = 0;
        for (uint32_t i = 0; i < np; i++) {
            check(pairs[4 * i] == at);
            check(pairs[4 * i + 2] == at + pairs[4 * i + 1]);
            at = pairs[4 * i + 2] + pairs[4 * i + 3];
            check(pairs[4 * i + 1] == rp[4 * i + 1] && pairs[4 * i + 3] == rp[4 * i + 3]);
        }
        check(at == (size_t)need);
        check(need == 0 || memcmp(dst, rd, (size_t)need) == 0);
        free(pairs);
        free(dst);
    }

    /* One short of either buffer: nothing is written. */
    if (np && np <= 16 && (size_t)need < 64) {
        char canary[64];
        uint32_t pc[64];
        uint32_t np3 = 0;
        memset(canary, '#', sizeof canary);
        memset(pc, 0xab, sizeof pc);
        if (need) {
            check(nsv_form_parse(s, size, pc, 16, canary, (size_t)need - 1, &np3) == need && np3 == np);
            for (size_t i = 0; i < sizeof canary; i++)
                check(canary[i] == '#');
            for (size_t i = 0; i < 64; i++)
                check(pc[i] == 0xabababab);
        }
        check(nsv_form_parse(s, size, pc, np - 1, canary, sizeof canary, &np3) == need && np3 == np);
        for (size_t i = 0; i < sizeof canary; i++)
            check(canary[i] == '#');
        for (size_t i = 0; i < 64; i++)
            check(pc[i] == 0xabababab);
    }
    free(rp);
    free(rd);
    free(s);
    return 0;
}
