/* cookie.c - the Cookie request header into name/value pairs
 * (nsv_cookie_parse) and a validated Set-Cookie header value
 * (nsv_set_cookie).
 *
 * Parsing is lenient, as browsers send the header (RFC 6265 section 5.4):
 * pairs separated by ';', spaces and tabs around names and values dropped,
 * the first '=' splits, a value wrapped in double quotes loses them, no
 * percent-decoding, pieces without '=' skipped. Building is strict (RFC 6265
 * section 4.1 grammar): anything a browser would reject or misread is
 * refused with NSV_EINVAL and a detail. */
#include "../internal.h"

#include <string.h>

static int is_ows(unsigned char c) { return c == ' ' || c == '\t'; }

/* Trims spaces and tabs from both ends of s[*a..*b). */
static void trim(const unsigned char *s, size_t *a, size_t *b)
{
    while (*a < *b && is_ows(s[*a]))
        (*a)++;
    while (*b > *a && is_ows(s[*b - 1]))
        (*b)--;
}

/* Copies n bytes to dst + off. The sum is formed only when there is
 * something to copy: with every name and value empty the sizing pass left
 * dst NULL, and NULL + 0 is undefined in C. */
static void copy(char *dst, size_t off, const unsigned char *src, size_t n)
{
    if (n)
        memcpy(dst + off, src, n);
}

/* Walks every pair (nsv__pairs_scan). */
static size_t scan(const unsigned char *s, size_t len, uint32_t *pairs, char *dst, size_t *count)
{
    size_t i = 0, need = 0, np = 0;
    while (i < len) {
        const unsigned char *semi = memchr(s + i, ';', len - i);
        size_t end = semi ? (size_t)(semi - s) : len;
        const unsigned char *eq = memchr(s + i, '=', end - i);
        if (eq) {
            size_t na = i, nb = (size_t)(eq - s), va = nb + 1, vb = end;
            trim(s, &na, &nb);
            trim(s, &va, &vb);
            if (vb - va >= 2 && s[va] == '"' && s[vb - 1] == '"') {
                va++;
                vb--;
            }
            if (pairs) {
                copy(dst, need, s + na, nb - na);
                copy(dst, need + (nb - na), s + va, vb - va);
                pairs[4 * np] = (uint32_t)need;
                pairs[4 * np + 1] = (uint32_t)(nb - na);
                pairs[4 * np + 2] = (uint32_t)(need + (nb - na));
                pairs[4 * np + 3] = (uint32_t)(vb - va);
            }
            need += (nb - na) + (vb - va);
            np++;
        }
        i = end + 1;
    }
    *count = np;
    return need;
}

int64_t nsv_cookie_parse(const char *hdr, size_t len, uint32_t *pairs, size_t max_pairs, char *dst, size_t cap,
                         uint32_t *npairs)
{
    return nsv__pairs_parse("nsv_cookie_parse", "hdr", scan, ';', hdr, len, pairs, max_pairs, dst, cap, npairs);
}

/* ---- Set-Cookie ---- */

/* RFC 6265 cookie-octet: %x21 / %x23-2B / %x2D-3A / %x3C-5B / %x5D-7E. */
static int is_cookie_octet(unsigned char c)
{
    return c >= 0x21 && c <= 0x7e && c != '"' && c != ',' && c != ';' && c != '\\';
}

/* Latest second with a four-digit year: 9999-12-31T23:59:59Z. */
#define MAX_EXPIRES INT64_C(253402300799)

/* Decimal digits of v >= 0 into o (NULL: count only). */
static size_t put_u64(uint64_t v, char *o)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (o)
        for (size_t i = 0; i < n; i++)
            o[i] = tmp[n - 1 - i];
    return n;
}

/* Output in pieces: counts always, copies while it fits (decided up front). */
typedef struct out {
    char *p;
    size_t n;
} out;

static void put(out *o, const char *s, size_t n)
{
    if (o->p && n)
        memcpy(o->p + o->n, s, n);
    o->n += n;
}

#define PUT_LIT(o, lit) put((o), (lit), sizeof(lit) - 1)

static int bad(const char *what, size_t i, unsigned char c, const char *why)
{
    return nsv__set_detail(NULL, NSV_EINVAL, "nsv_set_cookie: %s byte %zu (0x%02x) %s", what, i, c, why);
}

static int check_args(const char *name, size_t nlen, const char *value, size_t vlen, const char *path, size_t plen,
                      const char *domain, size_t dlen, int64_t expires, uint32_t flags, const char *dst,
                      size_t cap)
{
    if ((!name && nlen) || (!value && vlen) || (!path && plen) || (!domain && dlen) || (!dst && cap))
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_set_cookie: %s is NULL with a non-zero length",
                               !name && nlen ? "name" : !value && vlen ? "value" : !path && plen ? "path"
                               : !domain && dlen ? "domain" : "dst");
    if (nlen > (size_t)INT64_MAX / 4 || vlen > (size_t)INT64_MAX / 4 || plen > (size_t)INT64_MAX / 4 ||
        dlen > (size_t)INT64_MAX / 4)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_set_cookie: a length is over INT64_MAX / 4");
    if (!nlen)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_set_cookie: the name is empty");
    const unsigned char *s = (const unsigned char *)name;
    for (size_t i = 0; i < nlen; i++)
        if (!nsv__is_tchar(s[i]))
            return bad("name", i, s[i], "is not a token character (RFC 6265 cookie-name)");
    s = (const unsigned char *)value;
    size_t va = 0, vb = vlen;
    if (vlen >= 2 && s[0] == '"' && s[vlen - 1] == '"') {
        va = 1;
        vb = vlen - 1;
    }
    for (size_t i = va; i < vb; i++)
        if (!is_cookie_octet(s[i]))
            return bad("value", i, s[i],
                       "is not a cookie-octet (control, space, '\"' except wrapping, ',', ';', '\\' and "
                       "non-ASCII bytes are refused; encode the value, e.g. base64url or percent-encoding)");
    s = (const unsigned char *)path;
    for (size_t i = 0; i < plen; i++)
        if (s[i] < 0x20 || s[i] >= 0x7f || s[i] == ';')
            return bad("path", i, s[i], "is a control byte, ';' or not ASCII");
    s = (const unsigned char *)domain;
    for (size_t i = 0; i < dlen; i++)
        if (s[i] <= 0x20 || s[i] >= 0x7f || s[i] == ';' || s[i] == ',')
            return bad("domain", i, s[i], "is a control byte, space, ';', ',' or not ASCII");
    if (expires > MAX_EXPIRES)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_set_cookie: expires %lld is after year 9999",
                               (long long)expires);
    const uint32_t all = NSV_COOKIE_SECURE | NSV_COOKIE_HTTPONLY | NSV_COOKIE_SAMESITE_LAX |
                         NSV_COOKIE_SAMESITE_STRICT | NSV_COOKIE_SAMESITE_NONE | NSV_COOKIE_PARTITIONED;
    if (flags & ~all)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_set_cookie: unknown flag bits 0x%x", flags & ~all);
    uint32_t ss = flags & (NSV_COOKIE_SAMESITE_LAX | NSV_COOKIE_SAMESITE_STRICT | NSV_COOKIE_SAMESITE_NONE);
    if (ss & (ss - 1))
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_set_cookie: more than one SameSite flag (0x%x)", ss);
    int secure = (flags & NSV_COOKIE_SECURE) != 0;
    if ((flags & NSV_COOKIE_SAMESITE_NONE) && !secure)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_set_cookie: SameSite=None needs NSV_COOKIE_SECURE "
                               "(browsers reject it otherwise)");
    if ((flags & NSV_COOKIE_PARTITIONED) && !secure)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_set_cookie: Partitioned needs NSV_COOKIE_SECURE "
                               "(browsers reject it otherwise)");
    /* Name prefixes (RFC 6265bis 4.1.3, matched case-insensitively). */
    if (nlen >= 9 && nsv__strncaseeq(name, "__Secure-", 9) && !secure)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_set_cookie: a __Secure- cookie needs "
                               "NSV_COOKIE_SECURE (browsers reject it otherwise)");
    if (nlen >= 7 && nsv__strncaseeq(name, "__Host-", 7) &&
        (!secure || dlen || plen != 1 || path[0] != '/'))
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_set_cookie: a __Host- cookie needs NSV_COOKIE_SECURE, "
                               "Path \"/\" and no Domain (browsers reject it otherwise)");
    return 0;
}

static size_t build(out *o, const char *name, size_t nlen, const char *value, size_t vlen, const char *path,
                    size_t plen, const char *domain, size_t dlen, int64_t max_age, int64_t expires, uint32_t flags)
{
    put(o, name, nlen);
    PUT_LIT(o, "=");
    put(o, value, vlen);
    if (plen) {
        PUT_LIT(o, "; Path=");
        put(o, path, plen);
    }
    if (max_age >= 0) {
        PUT_LIT(o, "; Max-Age=");
        o->n += put_u64((uint64_t)max_age, o->p ? o->p + o->n : NULL);
    }
    if (expires >= 0) {
        PUT_LIT(o, "; Expires=");
        if (o->p)
            nsv__imf_fixdate(expires, o->p + o->n);
        o->n += 29;
    }
    if (dlen) {
        PUT_LIT(o, "; Domain=");
        put(o, domain, dlen);
    }
    if (flags & NSV_COOKIE_SECURE)
        PUT_LIT(o, "; Secure");
    if (flags & NSV_COOKIE_HTTPONLY)
        PUT_LIT(o, "; HttpOnly");
    if (flags & NSV_COOKIE_SAMESITE_LAX)
        PUT_LIT(o, "; SameSite=Lax");
    if (flags & NSV_COOKIE_SAMESITE_STRICT)
        PUT_LIT(o, "; SameSite=Strict");
    if (flags & NSV_COOKIE_SAMESITE_NONE)
        PUT_LIT(o, "; SameSite=None");
    if (flags & NSV_COOKIE_PARTITIONED)
        PUT_LIT(o, "; Partitioned");
    return o->n;
}

int64_t nsv_set_cookie(const char *name, size_t nlen, const char *value, size_t vlen, const char *path, size_t plen,
                       const char *domain, size_t dlen, int64_t max_age, int64_t expires, uint32_t flags, char *dst,
                       size_t cap)
{
    int rc = check_args(name, nlen, value, vlen, path, plen, domain, dlen, expires, flags, dst, cap);
    if (rc)
        return rc;
    out o = {NULL, 0};
    size_t need = build(&o, name, nlen, value, vlen, path, plen, domain, dlen, max_age, expires, flags);
    if (need <= cap) {
        out w = {dst, 0};
        build(&w, name, nlen, value, vlen, path, plen, domain, dlen, max_age, expires, flags);
    }
    return (int64_t)need;
}
