/* form.c - application/x-www-form-urlencoded bodies and query strings into
 * decoded key/value pairs (nsv_form_parse).
 *
 * The decoding is the WHATWG URL standard's urlencoded parser, which is
 * also what Python's urllib.parse.parse_qsl(keep_blank_values=True) and
 * Node's URLSearchParams do: '&' separates (empty pieces skipped), the first
 * '=' splits name from value (none: empty value), '+' is a space, %XX is
 * the byte XX, and a '%' not followed by two hex digits stays as it is.
 * Bytes are not checked or changed as UTF-8.
 *
 * One scan routine serves both the sizing pass and the writing pass
 * (nsv__pairs_parse, shared with cookie.c, decides which are needed). */
#include "../internal.h"

#include <string.h>

/* 1 for the bytes that end a plain run: '&', '=', '+', '%'. */
static const unsigned char special[256] = {['&'] = 1, ['='] = 1, ['+'] = 1, ['%'] = 1};

/* Decodes s[i..) up to the first stop byte ('&', or also '=' when eq) into
 * o (when o is not NULL). Returns the decoded length; *end is where the
 * scan stopped. */
static size_t decode_part(const unsigned char *s, size_t i, size_t len, int eq, char *o, size_t *end)
{
    size_t n = 0;
    while (i < len) {
        /* Plain run. */
        size_t j = i;
        while (j < len && !special[s[j]])
            j++;
        if (j > i) {
            if (o)
                memcpy(o + n, s + i, j - i);
            n += j - i;
            i = j;
            if (i == len)
                break;
        }
        unsigned char c = s[i];
        if (c == '&' || (c == '=' && eq))
            break;
        if (c == '%' && len - i >= 3) {
            int h = nsv__hexval(s[i + 1]), l = nsv__hexval(s[i + 2]);
            if (h >= 0 && l >= 0) {
                if (o)
                    o[n] = (char)(h << 4 | l);
                n++;
                i += 3;
                continue;
            }
        }
        if (o)
            o[n] = c == '+' ? ' ' : (char)c;
        n++;
        i++;
    }
    *end = i;
    return n;
}

/* Walks every pair (nsv__pairs_scan). */
static size_t scan(const unsigned char *s, size_t len, uint32_t *pairs, char *dst, size_t *count)
{
    size_t i = 0, need = 0, np = 0;
    while (i < len) {
        if (s[i] == '&') {
            i++;
            continue;
        }
        size_t end;
        size_t koff = need;
        size_t klen = decode_part(s, i, len, 1, dst ? dst + need : NULL, &end);
        need += klen;
        size_t voff = need, vlen = 0;
        i = end;
        if (i < len && s[i] == '=') {
            vlen = decode_part(s, i + 1, len, 0, dst ? dst + need : NULL, &end);
            need += vlen;
            i = end;
        }
        if (pairs) {
            pairs[4 * np] = (uint32_t)koff;
            pairs[4 * np + 1] = (uint32_t)klen;
            pairs[4 * np + 2] = (uint32_t)voff;
            pairs[4 * np + 3] = (uint32_t)vlen;
        }
        np++;
        /* i is at '&' or at the end. */
    }
    *count = np;
    return need;
}

int64_t nsv__pairs_parse(const char *fn, const char *src_name, nsv__pairs_scan *scan_fn, unsigned char sep,
                         const char *src, size_t len, uint32_t *pairs, size_t max_pairs, char *dst, size_t cap,
                         uint32_t *npairs)
{
    if (!src && len)
        return nsv__set_detail(NULL, NSV_EINVAL, "%s: %s is NULL with len %zu", fn, src_name, len);
    if (!pairs && max_pairs)
        return nsv__set_detail(NULL, NSV_EINVAL, "%s: pairs is NULL with max_pairs %zu", fn, max_pairs);
    if (!dst && cap)
        return nsv__set_detail(NULL, NSV_EINVAL, "%s: dst is NULL with cap %zu", fn, cap);
    if (!npairs)
        return nsv__set_detail(NULL, NSV_EINVAL, "%s: npairs is NULL", fn);
    if (len > UINT32_MAX)
        return nsv__set_detail(NULL, NSV_ETOOBIG, "%s: len %zu is over 4 GiB - 1, the most 32-bit offsets "
                               "can describe", fn, len);
    const unsigned char *s = (const unsigned char *)src;
    size_t np, need;
    /* The output never outnumbers the input and the pairs never outnumber
     * the separators plus one: when both bounds fit, one writing pass is
     * enough. */
    int one_pass = cap >= len && max_pairs > len / 2;
    if (!one_pass && cap >= len && max_pairs) {
        size_t seps = 0;
        for (const unsigned char *p = s, *e = s + len; (p = memchr(p, sep, (size_t)(e - p))) != NULL; p++)
            seps++;
        one_pass = max_pairs > seps;
    }
    if (one_pass) {
        need = scan_fn(s, len, pairs, len ? dst : NULL, &np);
    } else {
        need = scan_fn(s, len, NULL, NULL, &np);
        if (np && np <= max_pairs && need <= cap)
            scan_fn(s, len, pairs, need ? dst : NULL, &np);
    }
    *npairs = (uint32_t)np;
    return (int64_t)need;
}

int64_t nsv_form_parse(const char *src, size_t len, uint32_t *pairs, size_t max_pairs, char *dst, size_t cap,
                       uint32_t *npairs)
{
    return nsv__pairs_parse("nsv_form_parse", "src", scan, '&', src, len, pairs, max_pairs, dst, cap, npairs);
}
