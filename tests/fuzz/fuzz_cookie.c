/* fuzz_cookie.c - libFuzzer target for nsv_cookie_parse and
 * nsv_set_cookie. The first byte picks the function.
 *
 * Parsing: the result is compared with a straightforward reference (split
 * on ';', skip pieces without '=', trim spaces and tabs, strip a pair of
 * wrapping quotes), the sizing call must agree with the writing call and
 * too small buffers stay untouched.
 *
 * Building: the next bytes are flags, Max-Age and Expires selectors and
 * the lengths of name, value and path; the rest is split into them and the
 * domain. Acceptance is compared with a reference validator; an accepted
 * cookie is printable ASCII without CTLs, sized exactly, and parses back
 * (nsv_cookie_parse) to its name and value. */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(int cond)
{
    if (!cond)
        abort();
}

static int ows(unsigned char c) { return c == ' ' || c == '\t'; }

static size_t ref_parse(const unsigned char *s, size_t n, uint32_t *pairs, char *dst, size_t *np)
{
    size_t need = 0, count = 0, i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && s[j] != ';')
            j++;
        size_t e = i;
        while (e < j && s[e] != '=')
            e++;
        if (e < j) {
            size_t na = i, nb = e, va = e + 1, vb = j;
            while (na < nb && ows(s[na]))
                na++;
            while (nb > na && ows(s[nb - 1]))
                nb--;
            while (va < vb && ows(s[va]))
                va++;
            while (vb > va && ows(s[vb - 1]))
                vb--;
            if (vb - va >= 2 && s[va] == '"' && s[vb - 1] == '"')
                va++, vb--;
            pairs[4 * count] = (uint32_t)need;
            pairs[4 * count + 1] = (uint32_t)(nb - na);
            memcpy(dst + need, s + na, nb - na);
            need += nb - na;
            pairs[4 * count + 2] = (uint32_t)need;
            pairs[4 * count + 3] = (uint32_t)(vb - va);
            memcpy(dst + need, s + va, vb - va);
            need += vb - va;
            count++;
        }
        i = j + 1;
    }
    *np = count;
    return need;
}

static void fuzz_parse(const char *s, size_t n)
{
    uint32_t np = 0;
    int64_t need = nsv_cookie_parse(s, n, NULL, 0, NULL, 0, &np);
    check(need >= 0 && (size_t)need <= n && np <= n / 2 + 1);
    uint32_t *rp = malloc((n / 2 + 1) * 16);
    char *rd = malloc(n + 1);
    check(rp && rd);
    size_t rnp;
    check((size_t)need == ref_parse((const unsigned char *)s, n, rp, rd, &rnp) && rnp == np);

    uint32_t *pairs = malloc(np ? np * 16 : 1);
    char *dst = malloc(need ? (size_t)need : 1);
    check(pairs && dst);
    uint32_t np2 = 0;
    check(nsv_cookie_parse(s, n, pairs, np, dst, (size_t)need, &np2) == need && np2 == np);
    check(np == 0 || memcmp(pairs, rp, np * 16) == 0);
    check(need == 0 || memcmp(dst, rd, (size_t)need) == 0);
    for (uint32_t i = 0; i < np; i++) {
        const char *k = dst + pairs[4 * i];
        uint32_t kl = pairs[4 * i + 1];
        check(memchr(k, ';', kl) == NULL && memchr(k, '=', kl) == NULL);
        check(kl == 0 || (!ows((unsigned char)k[0]) && !ows((unsigned char)k[kl - 1])));
        check(memchr(dst + pairs[4 * i + 2], ';', pairs[4 * i + 3]) == NULL);
    }

    /* One short of either buffer: nothing is written. */
    if (np && np <= 16 && (size_t)need < 64) {
        char canary[64];
        uint32_t pc[64];
        uint32_t np3 = 0;
        memset(canary, '#', sizeof canary);
        memset(pc, 0xab, sizeof pc);
        if (need)
            check(nsv_cookie_parse(s, n, pc, 16, canary, (size_t)need - 1, &np3) == need && np3 == np);
        check(nsv_cookie_parse(s, n, pc, np - 1, canary, sizeof canary, &np3) == need && np3 == np);
        for (size_t i = 0; i < sizeof canary; i++)
            check(canary[i] == '#');
        for (size_t i = 0; i < 64; i++)
            check(pc[i] == 0xabababab);
    }
    free(pairs);
    free(dst);
    free(rp);
    free(rd);
}

static int tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int octet(unsigned char c)
{
    return c == 0x21 || (c >= 0x23 && c <= 0x2b) || (c >= 0x2d && c <= 0x3a) || (c >= 0x3c && c <= 0x5b) ||
           (c >= 0x5d && c <= 0x7e);
}

static int prefix(const char *s, size_t n, const char *p)
{
    size_t l = strlen(p);
    if (n < l)
        return 0;
    for (size_t i = 0; i < l; i++)
        if ((s[i] | 0x20) != (p[i] | 0x20) && s[i] != p[i])
            return 0;
    return 1;
}

static int ref_valid(const char *name, size_t nl, const char *v, size_t vl, const char *p, size_t pl,
                     const char *d, size_t dl, int64_t expires, uint32_t flags)
{
    if (!nl)
        return 0;
    for (size_t i = 0; i < nl; i++)
        if (!tchar((unsigned char)name[i]))
            return 0;
    size_t a = 0, b = vl;
    if (vl >= 2 && v[0] == '"' && v[vl - 1] == '"')
        a = 1, b = vl - 1;
    for (size_t i = a; i < b; i++)
        if (!octet((unsigned char)v[i]))
            return 0;
    for (size_t i = 0; i < pl; i++)
        if ((unsigned char)p[i] < 0x20 || (unsigned char)p[i] > 0x7e || p[i] == ';')
            return 0;
    for (size_t i = 0; i < dl; i++)
        if ((unsigned char)d[i] <= 0x20 || (unsigned char)d[i] > 0x7e || d[i] == ';' || d[i] == ',')
            return 0;
    if (expires > INT64_C(253402300799))
        return 0;
    if (flags & ~63u)
        return 0;
    int ss = !!(flags & 4) + !!(flags & 8) + !!(flags & 16);
    int sec = flags & 1;
    if (ss > 1 || ((flags & 16) && !sec) || ((flags & 32) && !sec))
        return 0;
    if (prefix(name, nl, "__secure-") && !sec)
        return 0;
    if (prefix(name, nl, "__host-") && (!sec || dl || pl != 1 || p[0] != '/'))
        return 0;
    return 1;
}

static int64_t pick_time(uint8_t sel, const uint8_t *raw)
{
    int64_t v;
    memcpy(&v, raw, 8);
    switch (sel % 6) {
    case 0: return -1;
    case 1: return 0;
    case 2: return sel;
    case 3: return INT64_C(253402300799) - (sel & 1) + (sel & 2 ? 1 : 0);
    case 4: return v;
    default: return (v < 0 ? -(v + 1) : v) % INT64_C(253402300800);
    }
}

static void fuzz_build(const uint8_t *d, size_t n)
{
    if (n < 21)
        return;
    uint32_t flags = d[0] & 0x80 ? d[0] : d[0] & 63;
    int64_t max_age = pick_time(d[1], d + 5);
    int64_t expires = pick_time(d[2], d + 13);
    size_t rest = n - 21;
    const uint8_t *p = d + 21;
    size_t nl = d[3] % (rest + 1);
    size_t vl = d[4] % (rest - nl + 1);
    size_t pl = d[20] % (rest - nl - vl + 1);
    size_t dl = rest - nl - vl - pl;
    /* Exact-size copies so reads past each field are caught. */
    char *f[4];
    size_t fl[4] = {nl, vl, pl, dl};
    for (int i = 0, at = 0; i < 4; at += (int)fl[i], i++) {
        f[i] = malloc(fl[i] ? fl[i] : 1);
        check(f[i] != NULL);
        memcpy(f[i], p + at, fl[i]);
    }
    int64_t need = nsv_set_cookie(f[0], nl, f[1], vl, f[2], pl, f[3], dl, max_age, expires, flags, NULL, 0);
    int valid = ref_valid(f[0], nl, f[1], vl, f[2], pl, f[3], dl, expires, flags);
    if (!valid) {
        check(need == NSV_EINVAL);
    } else {
        check(need > 0);
        char *out = malloc((size_t)need);
        check(out != NULL);
        if (need > 1) {
            memset(out, '#', (size_t)need);
            check(nsv_set_cookie(f[0], nl, f[1], vl, f[2], pl, f[3], dl, max_age, expires, flags, out,
                                 (size_t)need - 1) == need);
            for (int64_t i = 0; i < need; i++)
                check(out[i] == '#');
        }
        check(nsv_set_cookie(f[0], nl, f[1], vl, f[2], pl, f[3], dl, max_age, expires, flags, out,
                             (size_t)need) == need);
        for (int64_t i = 0; i < need; i++)
            check((unsigned char)out[i] >= 0x20 && (unsigned char)out[i] < 0x7f);
        /* The first pair parses back to name and value. */
        uint32_t pairs[4 * 16], np = 0;
        char back[4096];
        int64_t bn = nsv_cookie_parse(out, (size_t)need, pairs, 16, back, sizeof back, &np);
        check(bn >= 0 && np >= 1);
        if ((size_t)bn <= sizeof back && np <= 16) {
            size_t a = 0, b = vl;
            if (vl >= 2 && f[1][0] == '"' && f[1][vl - 1] == '"')
                a = 1, b = vl - 1;
            check(pairs[1] == nl && memcmp(back + pairs[0], f[0], nl) == 0);
            check(pairs[3] == b - a && memcmp(back + pairs[2], f[1] + a, b - a) == 0);
        }
        free(out);
    }
    for (int i = 0; i < 4; i++)
        free(f[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1) {
        fuzz_build(data + 1, size - 1);
        return 0;
    }
    size_t n = size - 1;
    char *s = malloc(n ? n : 1);
    check(s != NULL);
    if (n)
        memcpy(s, data + 1, n);
    fuzz_parse(s, n);
    free(s);
    return 0;
}
