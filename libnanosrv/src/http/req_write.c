/* req_write.c - request-head writer of the HTTP/1.1 client (contract in
 * req_write.h). Everything is checked before a byte is written, and the
 * length is known before writing, so a too-small buffer costs one pass and
 * never leaves half a head behind. */
#include "http/req_write.h"

#include <limits.h>
#include <string.h>

#include "internal.h"

/* Byte classes, built at compile time: every request's block is
 * checked byte by byte, so a table lookup per byte. */
enum { W_TCHAR = 1, W_VALUE = 2, W_PATH = 4, W_REG = 8, W_HEX = 16 };

#define IS_ALNUM(c) (((c) >= '0' && (c) <= '9') || ((c) >= 'A' && (c) <= 'Z') || \
                     ((c) >= 'a' && (c) <= 'z'))
#define IS_TCHAR(c) (IS_ALNUM(c) || (c) == '!' || (c) == '#' || (c) == '$' || (c) == '%' ||  \
                     (c) == '&' || (c) == '\'' || (c) == '*' || (c) == '+' || (c) == '-' ||  \
                     (c) == '.' || (c) == '^' || (c) == '_' || (c) == '`' || (c) == '|' ||   \
                     (c) == '~')
/* field-content: VCHAR, obs-text, SP and HTAB. */
#define IS_VALUE(c) ((c) == '\t' || ((c) >= 0x20 && (c) != 0x7f))
/* path and query: visible ASCII but '#' (the request parser's rule, less
 * obs-text, which a client percent-encodes). */
#define IS_PATH(c) ((c) > 0x20 && (c) < 0x7f && (c) != '#')
/* reg-name but '%': unreserved and sub-delims (RFC 3986 3.2.2). */
#define IS_REG(c) (IS_ALNUM(c) || (c) == '-' || (c) == '.' || (c) == '_' || (c) == '~' ||   \
                   (c) == '!' || (c) == '$' || (c) == '&' || (c) == '\'' || (c) == '(' ||   \
                   (c) == ')' || (c) == '*' || (c) == '+' || (c) == ',' || (c) == ';' ||    \
                   (c) == '=')
#define IS_HEX(c) (((c) >= '0' && (c) <= '9') || ((c) >= 'A' && (c) <= 'F') || \
                   ((c) >= 'a' && (c) <= 'f'))
#define CLS(c) ((IS_TCHAR(c) ? W_TCHAR : 0) | (IS_VALUE(c) ? W_VALUE : 0) | \
                (IS_PATH(c) ? W_PATH : 0) | (IS_REG(c) ? W_REG : 0) | (IS_HEX(c) ? W_HEX : 0))
#define R4(b) CLS(b), CLS((b) + 1), CLS((b) + 2), CLS((b) + 3)
#define R16(b) R4(b), R4((b) + 4), R4((b) + 8), R4((b) + 12)
#define R64(b) R16(b), R16((b) + 16), R16((b) + 32), R16((b) + 48)

static const unsigned char cls[256] = { R64(0), R64(64), R64(128), R64(192) };

static int is_tchar(unsigned char c) { return cls[c] & W_TCHAR; }
static int is_hex(unsigned char c) { return cls[c] & W_HEX; }
static int is_regname(unsigned char c) { return cls[c] & W_REG; }

/* Case-insensitive compare with a lowercase literal (token bytes only). */
static int ieq_n(const char *s, size_t n, const char *lit, size_t ln)
{
    if (n != ln)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((s[i] | 0x20) != lit[i])
            return 0;
    return 1;
}
#define ieq(s, n, lit) ieq_n((s), (n), lit, sizeof(lit) - 1)

static int set_why(const char **why, const char *text)
{
    if (why)
        *why = text;
    return NSV_EINVAL;
}

/* An authority: [IPv6] or reg-name/IPv4, then ":port". is_target picks the
 * argument the reasons name. */
static int check_authority(const char *a, size_t n, int need_port, int is_target, const char **why)
{
#define AUTH_BAD(t, h) set_why(why, is_target ? "target: " t : "host: " h)
    size_t i = 0;
    if (n == 0)
        return AUTH_BAD("empty authority", "empty");
    if (memchr(a, '@', n))
        return AUTH_BAD("userinfo ('@') in the authority", "userinfo ('@') is not sent in Host");
    if (a[0] == '[') {
        int colon = 0;
        for (i = 1; i < n && a[i] != ']'; i++) {
            if (a[i] == ':')
                colon = 1;
            else if (!is_hex((unsigned char)a[i]) && a[i] != '.')
                return AUTH_BAD("IPv6 literal holds a byte other than hex digits, ':' and '.'",
                                "IPv6 literal holds a byte other than hex digits, ':' and '.'");
        }
        if (i == n)
            return AUTH_BAD("IPv6 literal without ']'", "IPv6 literal without ']'");
        if (!colon)
            return AUTH_BAD("IPv6 literal without ':'", "IPv6 literal without ':'");
        i++;
    } else {
        for (; i < n && a[i] != ':'; i++) {
            unsigned char c = (unsigned char)a[i];
            if (c == '%') {
                if (i + 2 >= n || !is_hex((unsigned char)a[i + 1]) || !is_hex((unsigned char)a[i + 2]))
                    return AUTH_BAD("'%' in the host is not followed by two hex digits",
                                    "'%' is not followed by two hex digits");
                i += 2;
            } else if (!is_regname(c)) {
                return AUTH_BAD("authority holds a byte that is not allowed in a host name",
                                "byte not allowed in a host name (unreserved, sub-delims, %HH, [IPv6])");
            }
        }
        if (i == 0)
            return AUTH_BAD("empty host before the port", "empty host before the port");
    }
    if (i == n) {
        if (need_port)
            return AUTH_BAD("CONNECT takes host:port", "CONNECT takes host:port");
        return 0;
    }
    if (a[i] != ':')
        return AUTH_BAD("junk after the IPv6 literal", "junk after the IPv6 literal");
    size_t ps = ++i;
    unsigned port = 0;
    for (; i < n; i++) {
        if (a[i] < '0' || a[i] > '9')
            return AUTH_BAD("port is not a decimal number", "port is not a decimal number");
        if (i - ps >= 5)
            return AUTH_BAD("port is above 65535", "port is above 65535");
        port = port * 10 + (unsigned)(a[i] - '0');
    }
    if (i == ps)
        return AUTH_BAD("empty port after ':'", "empty port after ':'");
    if (port == 0 || port > 65535)
        return AUTH_BAD("port is outside 1..65535", "port is outside 1..65535");
    return 0;
#undef AUTH_BAD
}

/* Path and query bytes (W_PATH). */
static int check_path(const char *p, size_t n, const char **why)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (cls[c] & W_PATH)
            continue;
        if (c == ' ')
            return set_why(why, "target: contains a space (percent-encode it as %20)");
        if (c == '#')
            return set_why(why, "target: contains '#' (a fragment is not sent)");
        if (c >= 0x80)
            return set_why(why, "target: byte above 0x7e (percent-encode it)");
        return set_why(why, "target: contains a control character");
    }
    return 0;
}

/* The target's form; auth and alen receive the authority of absolute-form
 * and CONNECT targets. */
static int check_target(const char *m, size_t ml, const char *t, size_t tl, const char **auth,
                        size_t *alen, const char **why)
{
    *auth = NULL;
    *alen = 0;
    if (tl == 0)
        return set_why(why, "target: empty");
    if (ml == 7 && memcmp(m, "CONNECT", 7) == 0) {
        *auth = t;
        *alen = tl;
        return check_authority(t, tl, 1, 1, why);
    }
    if (t[0] == '/')
        return check_path(t, tl, why);
    if (t[0] == '*' && tl == 1) {
        if (ml != 7 || memcmp(m, "OPTIONS", 7) != 0)
            return set_why(why, "target: '*' is only for OPTIONS");
        return 0;
    }
    size_t s = 0;
    if (tl >= 7 && ieq(t, 7, "http://"))
        s = 7;
    else if (tl >= 8 && ieq(t, 8, "https://"))
        s = 8;
    else
        return set_why(why, "target: not origin-form (\"/...\"), absolute-form (\"http://...\"), "
                            "\"*\" or CONNECT's host:port");
    size_t e = s;
    while (e < tl && t[e] != '/' && t[e] != '?')
        e++;
    int r = check_authority(t + s, e - s, 0, 1, why);
    if (r)
        return r;
    *auth = t + s;
    *alen = e - s;
    return check_path(t + e, tl - e, why);
}

/* The caller's block: whole lines, valid bytes, none of the writer's
 * headers. *upgrade says whether an Upgrade line is there. */
static int check_headers(const char *h, size_t n, int *upgrade, const char **why)
{
    size_t i = 0;
    *upgrade = 0;
    while (i < n) {
        size_t s = i;
        while (i < n && is_tchar((unsigned char)h[i]))
            i++;
        if (i == n)
            return set_why(why, "headers: last line has no ':' and no CRLF");
        if (h[i] != ':') {
            if (i == s && h[i] == '\r')
                return set_why(why, "headers: empty line (the writer ends the head itself)");
            if (i == s && (h[i] == ' ' || h[i] == '\t'))
                return set_why(why, "headers: line starts with whitespace (obs-fold)");
            if (h[i] == ' ' || h[i] == '\t')
                return set_why(why, "headers: whitespace between name and ':'");
            if (h[i] == '\r' || h[i] == '\n')
                return set_why(why, "headers: line without ':'");
            return set_why(why, "headers: name holds a byte that is not a token character");
        }
        if (i == s)
            return set_why(why, "headers: empty name");
        const char *name = h + s;
        size_t nl = i - s;
        for (i++; i < n && (cls[(unsigned char)h[i]] & W_VALUE); i++)
            ;
        if (i == n)
            return set_why(why, "headers: last line does not end with CRLF");
        if (h[i] == '\n')
            return set_why(why, "headers: bare LF in a value");
        if (h[i] != '\r')
            return set_why(why, h[i] ? "headers: control character in a value"
                                     : "headers: NUL in a value");
        if (i + 1 == n || h[i + 1] != '\n')
            return set_why(why, "headers: bare CR in a value");
        i += 2;
        switch (nl) { /* by length first: most names match none */
        case 2:
            if (ieq(name, nl, "te"))
                return set_why(why, "headers: TE needs \"Connection: TE\", and Connection is the writer's");
            break;
        case 4:
            if (ieq(name, nl, "host"))
                return set_why(why, "headers: Host is written from the host argument");
            break;
        case 7:
            if (ieq(name, nl, "upgrade"))
                *upgrade = 1;
            break;
        case 10:
            if (ieq(name, nl, "connection"))
                return set_why(why, "headers: Connection is written from the flags (close, upgrade)");
            break;
        case 14:
            if (ieq(name, nl, "content-length"))
                return set_why(why, "headers: Content-Length is written from body_len");
            break;
        case 17:
            if (ieq(name, nl, "transfer-encoding"))
                return set_why(why, "headers: Transfer-Encoding is written from body_len");
            break;
        }
    }
    return 0;
}

static size_t put_dec(char *dst, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        dst[i] = tmp[n - 1 - i];
    return n;
}

static size_t dec_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 10)
        v /= 10, n++;
    return n;
}

#define is_method(m, ml, lit) ((ml) == sizeof(lit) - 1 && memcmp((m), lit, sizeof(lit) - 1) == 0)

int nsv__write_request(char *dst, size_t cap, const char *method, size_t method_len,
                       const char *target, size_t target_len, const char *host, size_t host_len,
                       const char *headers, size_t headers_len, int64_t body_len, unsigned flags,
                       const char **why)
{
    if (method_len == 0)
        return set_why(why, "method: empty");
    for (size_t i = 0; i < method_len; i++)
        if (!is_tchar((unsigned char)method[i]))
            return set_why(why, "method: holds a byte that is not a token character");
    const char *auth;
    size_t alen;
    int r = check_target(method, method_len, target, target_len, &auth, &alen, why);
    if (r)
        return r;
    if (host_len == 0) {
        if (!auth)
            return set_why(why, "host: empty (an origin-form or \"*\" target needs one)");
        host = auth;
        host_len = alen;
    } else {
        if ((r = check_authority(host, host_len, 0, 0, why)) != 0)
            return r;
        if (auth) {
            int same = alen == host_len;
            for (size_t i = 0; same && i < alen; i++)
                same = (auth[i] | 0x20) == (host[i] | 0x20);
            if (!same)
                return set_why(why, "host: differs from the target's authority");
        }
    }
    if (flags & ~(unsigned)(NSV__WR_CLOSE | NSV__WR_UPGRADE))
        return set_why(why, "flags: unknown bit");
    int upgrade;
    if ((r = check_headers(headers, headers_len, &upgrade, why)) != 0)
        return r;
    if (upgrade && !(flags & NSV__WR_UPGRADE))
        return set_why(why, "headers: Upgrade needs the upgrade flag (which writes Connection: upgrade)");
    if (!upgrade && (flags & NSV__WR_UPGRADE))
        return set_why(why, "flags: upgrade without an Upgrade header in headers");
    if (body_len < NSV__BODY_CHUNKED_LEN)
        return set_why(why, "body_len: below -1");
    if (body_len != 0 && is_method(method, method_len, "TRACE"))
        return set_why(why, "body_len: a TRACE request carries no body");
    if (body_len != 0 && is_method(method, method_len, "CONNECT"))
        return set_why(why, "body_len: a CONNECT request carries no body");

    static const char conn_hdr[][32] = {
        "", "Connection: close\r\n", "Connection: upgrade\r\n", "Connection: upgrade, close\r\n",
    };
    const char *conn = conn_hdr[flags & 3];
    int send_cl = body_len > 0 || (body_len == 0 && (is_method(method, method_len, "POST") ||
                                                     is_method(method, method_len, "PUT") ||
                                                     is_method(method, method_len, "PATCH")));
    /* Each term is bounded by its size_t argument; the sum is checked in
     * steps so it cannot wrap. */
    size_t parts[] = { method_len, target_len, host_len, headers_len };
    size_t need = 1 + 11 + 6 + 2 + strlen(conn) + 2;
    if (send_cl)
        need += 16 + dec_len((uint64_t)body_len) + 2;
    else if (body_len == NSV__BODY_CHUNKED_LEN)
        need += 28;
    for (size_t i = 0; i < 4; i++) {
        if (parts[i] > (size_t)INT_MAX || need + parts[i] > (size_t)INT_MAX) {
            if (why)
                *why = "request head: longer than INT_MAX bytes";
            return NSV_ETOOBIG;
        }
        need += parts[i];
    }
    if (need > cap)
        return (int)need;

    char *p = dst;
    memcpy(p, method, method_len), p += method_len;
    *p++ = ' ';
    memcpy(p, target, target_len), p += target_len;
    memcpy(p, " HTTP/1.1\r\nHost: ", 17), p += 17;
    memcpy(p, host, host_len), p += host_len;
    *p++ = '\r', *p++ = '\n';
    if (headers_len)
        memcpy(p, headers, headers_len), p += headers_len;
    if (send_cl) {
        memcpy(p, "Content-Length: ", 16), p += 16;
        p += put_dec(p, (uint64_t)body_len);
        *p++ = '\r', *p++ = '\n';
    } else if (body_len == NSV__BODY_CHUNKED_LEN) {
        memcpy(p, "Transfer-Encoding: chunked\r\n", 28), p += 28;
    }
    size_t cl = strlen(conn);
    memcpy(p, conn, cl), p += cl;
    *p++ = '\r', *p++ = '\n';
    return (int)(p - dst);
}

size_t nsv__write_chunk_size(char dst[NSV__CHUNK_SIZE_MAX], uint64_t n)
{
    static const char hex[] = "0123456789abcdef";
    char tmp[16];
    size_t k = 0;
    do {
        tmp[k++] = hex[n & 15];
        n >>= 4;
    } while (n);
    for (size_t i = 0; i < k; i++)
        dst[i] = tmp[k - 1 - i];
    dst[k] = '\r';
    dst[k + 1] = '\n';
    return k + 2;
}
