/* url.c - percent-encoding and a small URL splitter for listen/connect
 * addresses: scheme://[userinfo@]host[:port][/path][?query][#fragment]. */
#include "../internal.h"

#include <string.h>

static int is_unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
}

/* NULL buffers with a length: the detail names the argument. */
static int64_t null_arg(const char *fn, const char *src, size_t len, const char *dst, size_t cap)
{
    if (!src && len)
        return nsv__set_detail(NULL, NSV_EINVAL, "%s: src is NULL with len %zu", fn, len);
    if (!dst && cap)
        return nsv__set_detail(NULL, NSV_EINVAL, "%s: dst is NULL with cap %zu", fn, cap);
    return 0;
}

int64_t nsv_url_encode(const char *src, size_t len, char *dst, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    if ((!src && len) || (!dst && cap))
        return null_arg("nsv_url_encode", src, len, dst, cap);
    if (len > (size_t)INT64_MAX / 3)
        return nsv__set_detail(NULL, NSV_ERANGE, "nsv_url_encode: len %zu is too large to encode", len);
    const unsigned char *s = (const unsigned char *)src;
    size_t need = 0;
    for (size_t i = 0; i < len; i++)
        need += is_unreserved(s[i]) ? 1 : 3;
    if (need > cap)
        return (int64_t)need;
    char *o = dst;
    for (size_t i = 0; i < len; i++) {
        if (is_unreserved(s[i])) {
            *o++ = (char)s[i];
        } else {
            *o++ = '%';
            *o++ = hex[s[i] >> 4];
            *o++ = hex[s[i] & 15];
        }
    }
    return (int64_t)need;
}

int64_t nsv_url_decode(const char *src, size_t len, char *dst, size_t cap, int form)
{
    if ((!src && len) || (!dst && cap))
        return null_arg("nsv_url_decode", src, len, dst, cap);
    const unsigned char *s = (const unsigned char *)src;
    /* First pass validates every escape, so bad input never writes. */
    size_t need = 0;
    for (size_t i = 0; i < len; i++, need++) {
        if (s[i] != '%')
            continue;
        if (i + 2 >= len || nsv__hexval(s[i + 1]) < 0 || nsv__hexval(s[i + 2]) < 0)
            return nsv__set_detail(NULL, NSV_EPARSE, "nsv_url_decode: '%%' at byte %zu is not followed "
                                   "by two hex digits", i);
        i += 2;
    }
    if (need > cap)
        return (int64_t)need;
    char *o = dst;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '%') {
            *o++ = (char)(nsv__hexval(s[i + 1]) << 4 | nsv__hexval(s[i + 2]));
            i += 2;
        } else {
            *o++ = form && s[i] == '+' ? ' ' : (char)s[i];
        }
    }
    return (int64_t)need;
}

static const struct {
    const char *name;
    uint32_t len;
    int32_t port; /* default port, 0 = must be explicit */
    int32_t tls;
} url_schemes[] = {
    {"http", 4, 80, 0}, {"https", 5, 443, 1}, {"ws", 2, 80, 0},
    {"wss", 3, 443, 1}, {"tcp", 3, 0, 0},     {"tls", 3, 0, 1},
};

/* Characters accepted in a registered name or IPv4 host. */
static int is_host_char(unsigned char c)
{
    return is_unreserved(c) || c == '%';
}

/* Parses "[v6]" or a name at s[0..n); sets host offsets relative to s.
 * base is the offset of s in the URL, for the detail. */
static int parse_host(const char *s, size_t n, size_t base, size_t *off, size_t *hlen, size_t *used)
{
    if (n && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (!close)
            return nsv__set_detail(NULL, NSV_EURL, "nsv_url_parse: IPv6 host at byte %zu has no closing ']'",
                                   base);
        size_t l = (size_t)(close - s) - 1;
        int colons = 0;
        for (size_t i = 1; i <= l; i++) {
            if (s[i] == ':')
                colons++;
            else if (s[i] != '.' && nsv__hexval((unsigned char)s[i]) < 0)
                return nsv__set_detail(NULL, NSV_EURL, "nsv_url_parse: IPv6 host has '%c' at byte %zu; "
                                       "only hex digits, ':' and '.' belong there", s[i], base + i);
        }
        if (colons < 2)
            return nsv__set_detail(NULL, NSV_EURL, "nsv_url_parse: IPv6 host '%.*s' has fewer than two ':'",
                                   (int)l, s + 1);
        *off = 1;
        *hlen = l;
        *used = l + 2;
        return 0;
    }
    size_t i = 0;
    while (i < n && s[i] != ':') {
        if (!is_host_char((unsigned char)s[i]))
            return nsv__set_detail(NULL, NSV_EURL, "nsv_url_parse: host has '%c' at byte %zu; a host is "
                                   "letters, digits, '-', '.', '_', '~' or an [IPv6] literal", s[i], base + i);
        i++;
    }
    if (i == 0)
        return nsv__set_detail(NULL, NSV_EURL, "nsv_url_parse: the host is empty (byte %zu)", base);
    *off = 0;
    *hlen = i;
    *used = i;
    return 0;
}

/* Port digits: 1..5 of them, value at most 65535. */
static int parse_port(const char *s, size_t n)
{
    int32_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return nsv__set_detail(NULL, NSV_EURL, "nsv_url_parse: port '%.*s' is not a number",
                                   (int)(n > 32 ? 32 : n), s);
        if (i < 5)
            v = v * 10 + (s[i] - '0');
    }
    if (n == 0)
        return nsv__set_detail(NULL, NSV_EURL, "nsv_url_parse: ':' without a port after it");
    if (n > 5 || v > 65535)
        return nsv__set_detail(NULL, NSV_EURL, "nsv_url_parse: port %.*s is outside 0-65535",
                               (int)(n > 32 ? 32 : n), s);
    return v;
}

/* An absent path leaves path_len 0 (at the end of the authority): the
 * caller reads an empty path as "/". The query excludes '?'; an absent query
 * has length 0. The fragment is dropped. */
int nsv_url_parse(const char *url, size_t len, nsv_url *out)
{
    if (!url)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_url_parse: url is NULL");
    if (!out)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_url_parse: out is NULL");
    memset(out, 0, sizeof *out);
    if (len > UINT32_MAX)
        return nsv__set_detail(NULL, NSV_EURL, "nsv_url_parse: len %zu is over 4294967295", len);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)url[i] <= 0x20 || url[i] == 0x7f)
            return nsv__set_detail(NULL, NSV_EURL, "nsv_url_parse: byte %zu is 0x%02x; spaces and control "
                                   "characters do not belong in a URL", i, (unsigned char)url[i]);

    const char *sep = len >= 3 ? memmem(url, len, "://", 3) : NULL;
    if (!sep)
        return nsv__set_detail(NULL, NSV_EURL, "nsv_url_parse: '%.*s' has no \"://\" after a scheme",
                               (int)(len > 64 ? 64 : len), url);
    size_t slen = (size_t)(sep - url);
    int sc = -1;
    for (size_t i = 0; i < NSV__ARRAY_LEN(url_schemes); i++)
        if (url_schemes[i].len == slen && nsv__strncaseeq(url, url_schemes[i].name, slen))
            sc = (int)i;
    if (sc < 0)
        return nsv__set_detail(NULL, NSV_EURL, "nsv_url_parse: scheme '%.*s' is not http, https, ws, wss, "
                               "tcp or tls", (int)(slen > 32 ? 32 : slen), url);

    size_t a = slen + 3, e = a; /* authority [a, e) */
    while (e < len && url[e] != '/' && url[e] != '?' && url[e] != '#')
        e++;
    for (size_t i = e; i > a; i--)
        if (url[i - 1] == '@') { /* userinfo ends at the last '@' */
            a = i;
            break;
        }

    size_t hoff = 0, hlen = 0, used = 0;
    if (parse_host(url + a, e - a, a, &hoff, &hlen, &used) < 0)
        return NSV_EURL;
    int32_t port = url_schemes[sc].port;
    size_t p = a + used;
    if (p < e) {
        if (url[p] != ':')
            return nsv__set_detail(NULL, NSV_EURL, "nsv_url_parse: '%c' at byte %zu after the host; "
                                   "expected ':' and a port", url[p], p);
        if ((port = parse_port(url + p + 1, e - p - 1)) < 0)
            return NSV_EURL;
    } else if (port == 0) {
        return nsv__set_detail(NULL, NSV_EURL, "nsv_url_parse: %s:// needs a port (0 for an ephemeral one)",
                               url_schemes[sc].name); /* tcp:// and tls:// name their port */
    }

    size_t q = e;
    while (q < len && url[q] != '?' && url[q] != '#')
        q++;
    size_t f = q;
    while (f < len && url[f] != '#')
        f++;

    out->scheme_off = 0;
    out->scheme_len = (uint32_t)slen;
    out->host_off = (uint32_t)(a + hoff);
    out->host_len = (uint32_t)hlen;
    out->path_off = (uint32_t)e;
    out->path_len = (uint32_t)(q - e);
    out->query_off = (uint32_t)(q < f ? q + 1 : q);
    out->query_len = (uint32_t)(q < f ? f - q - 1 : 0);
    out->port = port;
    out->is_tls = url_schemes[sc].tls;
    return 0;
}
