/* resp_parse.c - strict, zero-copy HTTP/1.1 response-head parser and the
 * body framing rules a client applies to it (contract in resp_parse.h).
 *
 * Like the request parser (parse.c) it is stateless, reads nothing past
 * buf + len and reports an error as soon as the bytes seen so far can no
 * longer start a valid head, so a client may re-parse a growing buffer and
 * gets the same verdict (and the same reason) whatever the read sizes. A
 * client is the last line against response splitting and desync on a
 * pooled connection, hence the strictness: a head either has one meaning
 * or is refused.
 */
#include "http/resp_parse.h"

#include <limits.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "internal.h"

#include "http/field.h"

/* ---- errors ------------------------------------------------------------ */

typedef struct pstate {
    nsv__response *resp;
    cptr buf;
    int cl_seen;
    int te_seen;     /* Transfer-Encoding lines */
    int te_codings;  /* non-empty codings across them */
    int te_chunked;  /* chunked seen (it must stay the last) */
} pstate;

static int fail(pstate *st, int code, const char *why, cptr at)
{
    st->resp->why = why;
    st->resp->why_at = (size_t)(at - st->buf);
    return code;
}
#define BAD(why, at) fail(st, NSV_EPARSE, (why), (at))

/* ---- status line ------------------------------------------------------- */

/* "HTTP/1." DIGIT SP 3DIGIT [SP reason] CRLF, checked as far as bytes are
 * there so that garbage is refused before the line ends. */
static int parse_status_line(pstate *st, cptr *pp, cptr end)
{
    static const char pat[] = "HTTP/";
    nsv__response *r = st->resp;
    cptr p = *pp;
    size_t avail = (size_t)(end - p);
    for (size_t i = 0; i < 5 && i < avail; i++)
        if (p[i] != (unsigned char)pat[i])
            return BAD("status line: does not start with \"HTTP/\"", p + i);
    if (avail < 6)
        return 0;
    if (p[5] < '0' || p[5] > '9')
        return BAD("status line: HTTP version is not DIGIT.DIGIT", p + 5);
    if (p[5] != '1')
        return BAD("status line: HTTP major version is not 1", p + 5);
    if (avail < 7)
        return 0;
    if (p[6] != '.')
        return BAD("status line: HTTP version is not DIGIT.DIGIT", p + 6);
    if (avail < 8)
        return 0;
    if (p[7] < '0' || p[7] > '9')
        return BAD("status line: HTTP version is not DIGIT.DIGIT", p + 7);
    r->minor_version = p[7] == '0' ? 0 : 1;
    if (avail < 9)
        return 0;
    if (p[8] != ' ')
        return BAD("status line: no single SP after the HTTP version", p + 8);
    int status = 0;
    for (size_t i = 9; i < 12; i++) {
        if (avail <= i)
            return 0;
        if (p[i] < '0' || p[i] > '9')
            return BAD("status line: status code is not 3 digits", p + i);
        status = status * 10 + (p[i] - '0');
    }
    if (status < 100)
        return BAD("status line: status code below 100", p + 9);
    r->status = status;
    if (avail < 13)
        return 0;
    p += 12;
    if (*p == ' ') {
        cptr s = ++p;
        p = scan_value(p, end);
        if (p == end)
            return 0;
        if (*p == '\n')
            return BAD("status line: ends with a bare LF", p);
        if (*p != '\r')
            return BAD("status line: control character in the reason phrase", p);
        r->reason = (const char *)s;
        r->reason_len = (size_t)(p - s);
    } else if (*p == '\r') {
        r->reason = (const char *)p; /* no SP, empty reason: see resp_parse.h */
        r->reason_len = 0;
    } else if (*p == '\n') {
        return BAD("status line: ends with a bare LF", p);
    } else {
        return BAD("status line: status code is not 3 digits", p);
    }
    if (p + 1 == end)
        return 0;
    if (p[1] != '\n')
        return BAD("status line: CR not followed by LF", p + 1);
    *pp = p + 2;
    return 1;
}

/* ---- header semantics -------------------------------------------------- */

static int on_content_length(pstate *st, cptr v, size_t n)
{
    nsv__response *r = st->resp;
    cptr p = v, end = v + n, es;
    size_t el;
    while (next_elem(&p, end, &es, &el)) {
        if (el == 0)
            return BAD("Content-Length: empty value or list element", es);
        int64_t x = 0;
        for (size_t i = 0; i < el; i++) {
            unsigned d = (unsigned)es[i] - '0';
            if (d > 9)
                return BAD("Content-Length: not a decimal number", es + i);
            if (x > (INT64_MAX - (int64_t)d) / 10)
                return BAD("Content-Length: larger than 2^63-1", es + i);
            x = x * 10 + (int64_t)d;
        }
        if (st->cl_seen && x != r->content_length)
            return BAD("Content-Length: differing values", es);
        st->cl_seen = 1;
        r->content_length = x;
    }
    return 0;
}

/* One list of transfer codings: token *( OWS ";" OWS param ), chunked
 * without parameters, last and once. Parameters are only checked to hold
 * field-content (they belong to codings this client does not decode). */
static int on_transfer_encoding(pstate *st, cptr v, size_t n)
{
    if (st->resp->minor_version == 0)
        return BAD("Transfer-Encoding in an HTTP/1.0 response", v);
    st->te_seen++;
    cptr p = v, end = v + n, es;
    size_t el;
    while (next_elem(&p, end, &es, &el)) {
        if (el == 0)
            continue; /* RFC 9110 5.6.1: empty list elements are ignored */
        cptr t = scan_class(es, es + el, C_TCHAR);
        if (t == es)
            return BAD("Transfer-Encoding: coding is not a token", es);
        if (t < es + el) {
            cptr q = t;
            while (q < es + el && is_ows(*q))
                q++;
            if (q == es + el || *q != ';')
                return BAD("Transfer-Encoding: junk after a coding", t);
        }
        if (st->te_chunked)
            return BAD("Transfer-Encoding: chunked is not the final coding", es);
        if (IEQ(es, (size_t)(t - es), "chunked")) {
            if (t != es + el)
                return BAD("Transfer-Encoding: chunked takes no parameters", t);
            st->te_chunked = 1;
        }
        st->te_codings++;
    }
    return 0;
}

static void on_connection(nsv__response *r, cptr v, size_t n)
{
    cptr p = v, end = v + n, es;
    size_t el;
    while (next_elem(&p, end, &es, &el)) {
        if (IEQ(es, el, "close"))
            r->flags |= NSV__RESP_CONN_CLOSE;
        else if (IEQ(es, el, "keep-alive"))
            r->flags |= NSV__RESP_CONN_KEEPALIVE;
        else if (IEQ(es, el, "upgrade"))
            r->flags |= NSV__RESP_CONN_UPGRADE;
    }
}

static void on_upgrade(nsv__response *r, cptr v, size_t n)
{
    cptr p = v, end = v + n, es;
    size_t el;
    while (next_elem(&p, end, &es, &el))
        if (IEQ(es, el, "websocket"))
            r->flags |= NSV__RESP_UPGRADE_WS;
}

/* Dispatch on length first: most header names match none of these. */
static int on_header(pstate *st, const nsv__hdr *h)
{
    nsv__response *r = st->resp;
    cptr name = (cptr)h->name, v = (cptr)h->value;
    size_t n = h->value_len;
    switch (h->name_len) {
    case 7:
        if (IEQ(name, 7, "upgrade"))
            on_upgrade(r, v, n);
        break;
    case 10:
        if (IEQ(name, 10, "connection"))
            on_connection(r, v, n);
        break;
    case 14:
        if (IEQ(name, 14, "content-length"))
            return on_content_length(st, v, n);
        break;
    case 17:
        if (IEQ(name, 17, "transfer-encoding"))
            return on_transfer_encoding(st, v, n);
        break;
    case 20:
        if (IEQ(name, 20, "sec-websocket-accept")) {
            if (r->ws_accept)
                return BAD("Sec-WebSocket-Accept appears twice", name);
            r->ws_accept = (const char *)v;
            r->ws_accept_len = n;
        }
        break;
    }
    return 0;
}

/* ---- header block ------------------------------------------------------ */

/* One "name: value CRLF" line at *pp. Returns 1, 0 (incomplete) or an error. */
static inline int parse_header_line(pstate *st, cptr *pp, cptr end, nsv__hdr *h)
{
    cptr p = *pp;
    cptr n = scan_class(p, end, C_TCHAR);
    if (n == end)
        return 0;
    if (*n != ':') {
        if (n == p && is_ows(*n))
            return BAD("header: line starts with whitespace (obs-fold)", n);
        if (is_ows(*n))
            return BAD("header: whitespace between name and colon", n);
        if (*n == '\r' || *n == '\n')
            return BAD("header: line without a colon", n);
        return BAD("header: name byte is not a token character", n);
    }
    if (n == p)
        return BAD("header: empty name", n);
    h->name = (const char *)p;
    h->name_len = (size_t)(n - p);
    p = n + 1;
    while (p < end && is_ows(*p))
        p++;
    cptr v = p;
    p = scan_value(p, end);
    if (p == end)
        return 0;
    if (*p == '\n')
        return BAD("header: bare LF in a value or ending a line", p);
    if (*p != '\r')
        return BAD("header: NUL or control character in a value", p);
    if (p + 1 == end)
        return 0;
    if (p[1] != '\n')
        return BAD("header: bare CR in a value", p);
    cptr ve = p;
    while (ve > v && is_ows(ve[-1]))
        ve--;
    h->value = (const char *)v;
    h->value_len = (size_t)(ve - v);
    *pp = p + 2;
    return 1;
}

/* Cross-header rules that need the whole head. */
static int finish(pstate *st, cptr at)
{
    nsv__response *r = st->resp;
    if (st->te_seen) {
        if (st->te_codings == 0)
            return BAD("Transfer-Encoding: no coding", at);
        r->flags |= st->te_chunked ? NSV__RESP_CHUNKED : NSV__RESP_TE_OTHER;
        if (st->cl_seen)
            r->flags |= NSV__RESP_CL_TE; /* RFC 9112 6.3 item 3: TE overrides CL */
        r->content_length = -1;
    }
    unsigned f = r->flags;
    int keep = r->minor_version ? !(f & NSV__RESP_CONN_CLOSE)
                                : (f & NSV__RESP_CONN_KEEPALIVE) && !(f & NSV__RESP_CONN_CLOSE);
    if (keep && !(f & (NSV__RESP_CL_TE | NSV__RESP_TE_OTHER)))
        r->flags |= NSV__RESP_KEEP_ALIVE;
    return 0;
}

int nsv__parse_response(const char *buf, size_t len, nsv__response *resp, nsv__hdr *headers,
                        size_t max_headers)
{
    cptr p = (cptr)buf, end = p + len;
    size_t n = 0;
    pstate st = { resp, (cptr)buf, 0, 0, 0, 0 };

    resp->status = 0;
    resp->minor_version = 0;
    resp->reason = NULL;
    resp->reason_len = 0;
    resp->headers = headers;
    resp->num_headers = 0;
    resp->content_length = -1;
    resp->ws_accept = NULL;
    resp->ws_accept_len = 0;
    resp->flags = 0;
    resp->why = NULL;
    resp->why_at = 0;

    int r = parse_status_line(&st, &p, end);
    if (r <= 0)
        return r;
    for (;;) {
        if (p == end)
            return 0;
        if (*p == '\r') {
            if (p + 1 == end)
                return 0;
            if (p[1] != '\n')
                return fail(&st, NSV_EPARSE, "header: bare CR", p);
            p += 2;
            break;
        }
        if (n == max_headers)
            return fail(&st, NSV_ETOOBIG, "header: more header lines than the limit", p);
        r = parse_header_line(&st, &p, end, &headers[n]);
        if (r <= 0)
            return r;
        r = on_header(&st, &headers[n]);
        if (r < 0)
            return r;
        resp->num_headers = ++n;
    }
    r = finish(&st, p - 2);
    if (r < 0)
        return r;
    if (p - (cptr)buf > INT_MAX)
        return fail(&st, NSV_ETOOBIG, "head: longer than INT_MAX bytes", (cptr)buf + INT_MAX);
    return (int)(p - (cptr)buf);
}

/* ---- body framing (RFC 9112 section 6.3) ------------------------------- */

int nsv__resp_body_kind(const nsv__response *resp, const char *method, size_t method_len)
{
    int s = resp->status;
    if (s == 101)
        return NSV__BODY_UPGRADE;
    if (s < 200)
        return NSV__BODY_INTERIM;
    if (s < 300 && method_len == 7 && memcmp(method, "CONNECT", 7) == 0)
        return NSV__BODY_UPGRADE;
    if ((method_len == 4 && memcmp(method, "HEAD", 4) == 0) || s == 204 || s == 304)
        return NSV__BODY_NONE;
    if (resp->flags & NSV__RESP_CHUNKED)
        return NSV__BODY_CHUNKED;
    if (resp->flags & NSV__RESP_TE_OTHER)
        return NSV__BODY_CLOSE;
    if (resp->content_length >= 0)
        return NSV__BODY_LENGTH;
    return NSV__BODY_CLOSE;
}
