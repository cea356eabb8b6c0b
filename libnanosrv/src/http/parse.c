/* parse.c - strict, zero-copy HTTP/1.1 request-head parser.
 *
 * The parser is stateless: the caller hands it the whole buffer received so
 * far and it re-parses from the start. It never reads past buf + len (no
 * NUL terminator is assumed) and reports an error as soon as the bytes seen
 * so far can no longer start a valid head, so a prefix of an input returns
 * either 0 or the same result as the whole input.
 *
 * Strictness choices beyond the rules in parse.h (request smuggling and
 * desync defences):
 *  - only CRLF ends a line; a lone CR or LF anywhere is -400;
 *  - the request-target may hold visible ASCII and obs-text (>= 0x80) but no
 *    CTL, SP, HTAB or '#'; authority-form (CONNECT host:port) is -400, and
 *    absolute-form accepts only the http and https schemes, without userinfo;
 *  - Host (and an absolute-form authority) may only hold reg-name, IP-literal
 *    and port characters;
 *  - Content-Length is 1*DIGIT, or a list of identical such values;
 *  - Transfer-Encoding must be exactly "chunked" (one header, one coding);
 *    anything else is -501, or -400 together with Content-Length or on
 *    HTTP/1.0;
 *  - Expect other than "100-continue" is -417;
 *  - any number of empty lines before the request-line is skipped and
 *    counted as consumed (the caller's head limit bounds them).
 */
#include "http/parse.h"

#include <limits.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define E400 (-400)
#define E414 (-414)
#define E417 (-417)
#define E431 (-431)
#define E501 (-501)
#define E505 (-505)

#include "http/field.h"

/* ---- scanners --------------------------------------------------------- */

/* First byte in [p, end) that is not of class C_TARGET. */
static inline cptr scan_target(cptr p, cptr end)
{
#ifdef __SSE2__
    const __m128i c20 = _mm_set1_epi8(0x20), del = _mm_set1_epi8(0x7f);
    const __m128i hash = _mm_set1_epi8('#');
    while (end - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
        __m128i bad = _mm_cmpeq_epi8(_mm_max_epu8(x, c20), c20); /* x <= 0x20 */
        bad = _mm_or_si128(bad, _mm_cmpeq_epi8(x, del));
        bad = _mm_or_si128(bad, _mm_cmpeq_epi8(x, hash));
        int m = _mm_movemask_epi8(bad);
        if (m)
            return p + __builtin_ctz((unsigned)m);
        p += 16;
    }
#endif
    while (p < end && (cls[*p] & C_TARGET))
        p++;
    return p;
}


/* ---- header semantics ------------------------------------------------- */

typedef struct hstate {
    int hosts;
    int te_count;
    int te_bad;
    int cl_seen;
} hstate;

/* Content-Length: 1*DIGIT, or a list of equal values ("5, 5"). */
static int on_content_length(nsv__request *req, hstate *st, cptr v, size_t n)
{
    cptr p = v, end = v + n, es;
    size_t el;
    while (next_elem(&p, end, &es, &el)) {
        if (el == 0)
            return E400;
        int64_t x = 0;
        for (size_t i = 0; i < el; i++) {
            unsigned d = (unsigned)es[i] - '0';
            if (d > 9 || x > (INT64_MAX - (int64_t)d) / 10)
                return E400;
            x = x * 10 + (int64_t)d;
        }
        if (st->cl_seen && x != req->content_length)
            return E400;
        st->cl_seen = 1;
        req->content_length = x;
    }
    return 0;
}

static int on_host(nsv__request *req, hstate *st, cptr v, size_t n)
{
    if (++st->hosts > 1)
        return E400;
    if (scan_class(v, v + n, C_HOST) != v + n)
        return E400;
    req->host = (const char *)v;
    req->host_len = n;
    return 0;
}

static void on_connection(nsv__request *req, cptr v, size_t n)
{
    cptr p = v, end = v + n, es;
    size_t el;
    while (next_elem(&p, end, &es, &el)) {
        if (IEQ(es, el, "close"))
            req->flags |= NSV__RF_CONN_CLOSE;
        else if (IEQ(es, el, "keep-alive"))
            req->flags |= NSV__RF_CONN_KEEPALIVE;
        else if (IEQ(es, el, "upgrade"))
            req->flags |= NSV__RF_CONN_UPGRADE;
    }
}

static void on_upgrade(nsv__request *req, cptr v, size_t n)
{
    cptr p = v, end = v + n, es;
    size_t el;
    while (next_elem(&p, end, &es, &el))
        if (IEQ(es, el, "websocket"))
            req->flags |= NSV__RF_UPGRADE_WS;
}

/* Dispatch on length first: most header names match none of these. */
static int on_header(nsv__request *req, hstate *st, const nsv__hdr *h)
{
    cptr name = (cptr)h->name, v = (cptr)h->value;
    size_t n = h->value_len;
    switch (h->name_len) {
    case 4:
        if (IEQ(name, 4, "host"))
            return on_host(req, st, v, n);
        break;
    case 6:
        if (IEQ(name, 6, "expect")) {
            if (!IEQ(v, n, "100-continue"))
                return E417;
            req->flags |= NSV__RF_EXPECT_CONTINUE;
        }
        break;
    case 7:
        if (IEQ(name, 7, "upgrade"))
            on_upgrade(req, v, n);
        break;
    case 10:
        if (IEQ(name, 10, "connection"))
            on_connection(req, v, n);
        break;
    case 14:
        if (IEQ(name, 14, "content-length"))
            return on_content_length(req, st, v, n);
        break;
    case 17:
        /* Only a single, exact "chunked" is decodable; the final verdict
         * waits for the end of the head (CL+TE and HTTP/1.0 are -400). */
        if (IEQ(name, 17, "transfer-encoding")) {
            st->te_count++;
            if (!IEQ(v, n, "chunked"))
                st->te_bad = 1;
        }
        break;
    }
    return 0;
}

/* ---- request line ----------------------------------------------------- */

/* Splits path and query of [p, end) (origin-form tail). */
static void split_query(nsv__request *req, cptr p, cptr end)
{
    cptr q = memchr(p, '?', (size_t)(end - p));
    if (q) {
        req->path_len = (size_t)(q - p);
        req->query = (const char *)q + 1;
        req->query_len = (size_t)(end - q - 1);
    } else {
        req->path_len = (size_t)(end - p);
    }
    req->path = (const char *)p;
}

/* absolute-form: http[s]://authority[/path][?query]. The authority then
 * stands for Host (RFC 9112 section 3.2.2). */
static int parse_absolute(nsv__request *req, cptr t, cptr end, cptr *auth, size_t *auth_len)
{
    cptr p = t;
    if (end - p >= 7 && IEQ(p, 7, "http://"))
        p += 7;
    else if (end - p >= 8 && IEQ(p, 8, "https://"))
        p += 8;
    else
        return E400;
    cptr a = p;
    while (p < end && *p != '/' && *p != '?')
        p++;
    if (p == a || scan_class(a, p, C_HOST) != p)
        return E400; /* empty host, userinfo ('@') or junk */
    *auth = a;
    *auth_len = (size_t)(p - a);
    if (p < end && *p == '/') {
        split_query(req, p, end);
    } else {
        /* No path: "/" is required, and the second slash of "://" is one. */
        split_query(req, p, end);
        req->path = (const char *)a - 1;
        req->path_len = 1;
    }
    req->flags |= NSV__RF_ABSOLUTE_FORM;
    return 0;
}

static int parse_target(nsv__request *req, cptr t, cptr end, cptr *auth, size_t *auth_len)
{
    if (*t == '/') {
        split_query(req, t, end);
        return 0;
    }
    if (*t == '*' && end - t == 1) {
        if (req->method_len != 7 || memcmp(req->method, "OPTIONS", 7) != 0)
            return E400;
        req->path = (const char *)t;
        req->path_len = 1;
        return 0;
    }
    return parse_absolute(req, t, end, auth, auth_len);
}

/* "HTTP/" DIGIT "." DIGIT CRLF; checked as far as bytes are available so
 * garbage is reported before the line is complete. */
static int parse_version(nsv__request *req, cptr *pp, cptr end)
{
    static const char pat[] = "HTTP/0.0\r\n";
    cptr p = *pp;
    size_t avail = (size_t)(end - p);
    if (avail >= 10 && memcmp(p, "HTTP/1.1\r\n", 10) == 0) {
        req->minor_version = 1;
        *pp = p + 10;
        return 1;
    }
    for (size_t i = 0; i < 10 && i < avail; i++) {
        int ok = (i == 5 || i == 7) ? (p[i] >= '0' && p[i] <= '9') : p[i] == (unsigned char)pat[i];
        if (!ok)
            return E400;
    }
    if (avail < 10)
        return 0;
    if (p[5] != '1' || (p[7] != '0' && p[7] != '1'))
        return E505;
    req->minor_version = p[7] - '0';
    *pp = p + 10;
    return 1;
}

static int parse_request_line(nsv__request *req, cptr *pp, cptr end, size_t max_uri,
                              cptr *auth, size_t *auth_len)
{
    cptr p = *pp;
    /* Empty lines before the request-line are tolerated (RFC 9112 2.2). */
    for (;;) {
        if (p == end)
            return 0;
        if (*p != '\r')
            break;
        if (p + 1 == end)
            return 0;
        if (p[1] != '\n')
            return E400;
        p += 2;
    }
    cptr m = scan_class(p, end, C_TCHAR);
    if (m == end)
        return 0;
    if (*m != ' ' || m == p)
        return E400;
    req->method = (const char *)p;
    req->method_len = (size_t)(m - p);

    cptr t = m + 1;
    /* Scan at most max_uri target bytes, so an overlong target is seen
     * before its end arrives. */
    cptr limit = (size_t)(end - t) > max_uri ? t + max_uri : end;
    p = scan_target(t, limit);
    if (p == end)
        return 0;
    if (*p != ' ')
        return (p == limit && (cls[*p] & C_TARGET)) ? E414 : E400;
    if (p == t)
        return E400;
    req->target = (const char *)t;
    req->target_len = (size_t)(p - t);
    int r = parse_target(req, t, p, auth, auth_len);
    if (r < 0)
        return r;
    p++;
    r = parse_version(req, &p, end);
    if (r <= 0)
        return r;
    *pp = p;
    return 1;
}

/* ---- header block ----------------------------------------------------- */

/* One "name: value CRLF" line at *pp. Returns 1, 0 (incomplete) or -400. */
static inline int parse_header_line(cptr *pp, cptr end, nsv__hdr *h)
{
    cptr p = *pp;
    cptr n = scan_class(p, end, C_TCHAR);
    if (n == end)
        return 0;
    /* Rejects empty names, obs-fold (leading SP/HTAB), SP before ':'. */
    if (*n != ':' || n == p)
        return E400;
    h->name = (const char *)p;
    h->name_len = (size_t)(n - p);
    p = n + 1;
    while (p < end && is_ows(*p))
        p++;
    cptr v = p;
    p = scan_value(p, end);
    if (p == end)
        return 0;
    if (*p != '\r')
        return E400;
    if (p + 1 == end)
        return 0;
    if (p[1] != '\n')
        return E400;
    cptr ve = p;
    while (ve > v && is_ows(ve[-1]))
        ve--;
    h->value = (const char *)v;
    h->value_len = (size_t)(ve - v);
    *pp = p + 2;
    return 1;
}

/* Cross-header rules that need the whole head. */
static int finish(nsv__request *req, const hstate *st, cptr auth, size_t auth_len)
{
    if (st->te_count) {
        if (st->cl_seen || req->minor_version == 0)
            return E400;
        if (st->te_count > 1 || st->te_bad)
            return E501;
        req->flags |= NSV__RF_CHUNKED;
    }
    if (req->minor_version == 1 && st->hosts == 0)
        return E400;
    if (auth) {
        req->host = (const char *)auth;
        req->host_len = auth_len;
    }
    return 0;
}

int nsv__http_parse_request(const char *buf, size_t len, nsv__request *req,
                            nsv__hdr *headers, size_t max_headers, size_t max_uri)
{
    cptr p = (cptr)buf, end = p + len, auth = NULL;
    size_t auth_len = 0, n = 0;
    hstate st = { 0, 0, 0, 0 };

    /* Field by field: zeroing the whole struct compiles to `rep stos`,
     * slow to start on every request. */
    req->method = req->target = req->path = req->query = req->host = NULL;
    req->method_len = req->target_len = req->path_len = req->query_len = req->host_len = 0;
    req->minor_version = 0;
    req->headers = headers;
    req->num_headers = 0;
    req->content_length = -1;
    req->flags = 0;

    int r = parse_request_line(req, &p, end, max_uri, &auth, &auth_len);
    if (r <= 0)
        return r;
    for (;;) {
        if (p == end)
            return 0;
        if (*p == '\r') {
            if (p + 1 == end)
                return 0;
            if (p[1] != '\n')
                return E400;
            p += 2;
            break;
        }
        if (n == max_headers)
            return E431;
        r = parse_header_line(&p, end, &headers[n]);
        if (r <= 0)
            return r;
        r = on_header(req, &st, &headers[n]);
        if (r < 0)
            return r;
        req->num_headers = ++n;
    }
    r = finish(req, &st, auth, auth_len);
    if (r < 0)
        return r;
    if (p - (cptr)buf > INT_MAX)
        return E431; /* cannot be reported as consumed bytes */
    return (int)(p - (cptr)buf);
}
