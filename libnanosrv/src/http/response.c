/* response.c - formats replies into the connection's output buffer. */
#include "http.h"
#include "answer.h"
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Standard phrases: RFC 9110's wording where it renamed one (413, 414, 416),
 * else that of Python's http.HTTPStatus, which servers written in Python
 * send (418 included); nsv_set_reason overrides any. */
static const char *reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 102: return "Processing";
    case 103: return "Early Hints";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 203: return "Non-Authoritative Information";
    case 204: return "No Content";
    case 205: return "Reset Content";
    case 206: return "Partial Content";
    case 207: return "Multi-Status";
    case 208: return "Already Reported";
    case 226: return "IM Used";
    case 300: return "Multiple Choices";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 305: return "Use Proxy";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 402: return "Payment Required";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 407: return "Proxy Authentication Required";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 418: return "I'm a Teapot";
    case 421: return "Misdirected Request";
    case 422: return "Unprocessable Entity";
    case 423: return "Locked";
    case 424: return "Failed Dependency";
    case 425: return "Too Early";
    case 426: return "Upgrade Required";
    case 428: return "Precondition Required";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 451: return "Unavailable For Legal Reasons";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    case 506: return "Variant Also Negotiates";
    case 507: return "Insufficient Storage";
    case 508: return "Loop Detected";
    case 510: return "Not Extended";
    case 511: return "Network Authentication Required";
    }
    return "Unknown";
}

/* The Date line changes once a second: re-check the wall clock only when
 * the loop's cached monotonic time passes the next second boundary. */
void nsv__update_date(nsv__loop *l)
{
    if (l->now < l->http->date_until)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    l->http->date_until = l->now + (1000 - ts.tv_nsec / 1000000);
    time_t t = ts.tv_sec;
    if (t == l->http->date_sec)
        return;
    l->http->date_sec = t;
    memcpy(l->http->date, "Date: ", 6); /* "Date: " + IMF-fixdate + CRLF: the 37 bytes replies copy */
    nsv__imf_fixdate((int64_t)t, l->http->date + 6);
    memcpy(l->http->date + 35, "\r\n", 3);
}

static char *put_u64(char *p, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

enum { HAS_CL = 1, HAS_DATE = 2, HAS_CONN = 4, CONN_CLOSE = 8, HAS_TE = 16, TE_CHUNKED = 32,
       /* for gzip */
       HAS_CT = 64, HAS_CE = 128, HAS_CRANGE = 256, HAS_VARY = 512, VARY_AE = 1024, ETAG_STRONG = 2048 };

static int name_is(const char *line, size_t nlen, const char *name, size_t len)
{
    return nlen == len && nsv__strncaseeq(line, name, len);
}

/* Bytes a header may hold. Names: RFC 9110 tokens. Values: visible ASCII,
 * SP, HTAB and obs-text; never CR, LF, NUL or another control character,
 * which would split the response or be cut short by a peer. */
static const unsigned char tchar[256] = {
    ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1, ['*'] = 1, ['+'] = 1,
    ['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1, ['`'] = 1, ['|'] = 1, ['~'] = 1,
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1,
    ['8'] = 1, ['9'] = 1,
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1,
    ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1,
    ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1,
    ['Y'] = 1, ['Z'] = 1,
    ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1,
    ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1,
    ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1,
    ['y'] = 1, ['z'] = 1,
};

static int value_byte_ok(unsigned char ch) { return ch >= 0x20 ? ch != 0x7f : ch == '\t'; }

static const char *ctl_name(unsigned char ch)
{
    switch (ch) {
    case 0: return "NUL";
    case '\r': return "CR";
    case '\n': return "LF";
    case 0x7f: return "DEL";
    }
    return "a control character";
}

/* The value without the optional whitespace around it. */
static void trim_ows(const char **v, size_t *n)
{
    while (*n && ((*v)[0] == ' ' || (*v)[0] == '\t'))
        (*v)++, (*n)--;
    while (*n && ((*v)[*n - 1] == ' ' || (*v)[*n - 1] == '\t'))
        (*n)--;
}

/* A Vary value that already covers Accept-Encoding ("*" covers all). */
static int vary_covers_ae(const char *v, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && v[e] != ',')
            e++;
        const char *t = v + i;
        size_t tl = e - i;
        trim_ows(&t, &tl);
        if ((tl == 1 && *t == '*') || (tl == 15 && nsv__strncaseeq(t, "accept-encoding", 15)))
            return 1;
        i = e + 1;
    }
    return 0;
}

/* Validate the host's header block and note what it says about framing.
 * Every line must be "Name: value\r\n": a token name, a value without
 * control characters (no response splitting), at most one Content-Length
 * holding a decimal number. On failure the detail says which byte broke
 * which rule. */
int nsv__headers_scan(nsv_server *s, const char *h, size_t n, nsv__hscan *out)
{
    size_t i = 0;
    out->seen = 0;
    out->cl = 0;
    out->te_off = out->te_len = 0;
    while (i < n) {
        size_t start = i;
        while (i < n && tchar[(unsigned char)h[i]])
            i++;
        if (i == n || h[i] != ':') {
            if (i == start && i + 1 < n && h[i] == '\r' && h[i + 1] == '\n')
                return nsv__set_detail(s, NSV_EINVAL, "headers: empty line at byte %zu (the library ends the head itself)", i);
            if (i == n || h[i] == '\r' || h[i] == '\n')
                return nsv__set_detail(s, NSV_EINVAL, "headers: line at byte %zu has no ':' after the name", start);
            unsigned char ch = (unsigned char)h[i];
            if (i == start)
                return nsv__set_detail(s, NSV_EINVAL, "headers: line at byte %zu has an empty name", start);
            if (ch >= 0x20 && ch < 0x7f)
                return nsv__set_detail(s, NSV_EINVAL, "headers: name \"%.*s\" contains '%c' at byte %zu; names are tokens",
                                       (int)(i - start), h + start, ch, i);
            return nsv__set_detail(s, NSV_EINVAL, "headers: name \"%.*s\" contains byte 0x%02x at byte %zu; names are tokens",
                                   (int)(i - start), h + start, ch, i);
        }
        if (i == start)
            return nsv__set_detail(s, NSV_EINVAL, "headers: line at byte %zu has an empty name", start);
        const char *nm = h + start;
        size_t nlen = i - start;
        size_t vstart = ++i;
        while (i < n && value_byte_ok((unsigned char)h[i]))
            i++;
        if (i == n)
            return nsv__set_detail(s, NSV_EINVAL, "headers: header \"%.*s\" does not end with CRLF", (int)nlen, nm);
        if (h[i] == '\r' && (i + 1 == n || h[i + 1] != '\n'))
            return nsv__set_detail(s, NSV_EINVAL, "headers: value of \"%.*s\" contains a bare CR at byte %zu",
                                   (int)nlen, nm, i);
        if (h[i] != '\r')
            return nsv__set_detail(s, NSV_EINVAL, "headers: value of \"%.*s\" contains %s (0x%02x) at byte %zu",
                                   (int)nlen, nm, ctl_name((unsigned char)h[i]), (unsigned char)h[i], i);
        const char *v = h + vstart;
        size_t vlen = i - vstart;
        i += 2;
        if (nlen < 4 || nlen > 17)
            continue; /* none of the names below */
        if (name_is(nm, nlen, "content-length", 14)) {
            if (out->seen & HAS_CL)
                return nsv__set_detail(s, NSV_EINVAL, "headers: Content-Length appears twice");
            trim_ows(&v, &vlen);
            uint64_t cl = 0;
            size_t k = 0;
            for (; k < vlen && k < 19 && v[k] >= '0' && v[k] <= '9'; k++)
                cl = cl * 10 + (uint64_t)(v[k] - '0');
            if (vlen == 0 || k != vlen)
                return nsv__set_detail(s, NSV_EINVAL, "headers: Content-Length \"%.*s\" is not a decimal number",
                                       (int)(vlen > 40 ? 40 : vlen), v);
            out->seen |= HAS_CL;
            out->cl = cl;
            out->cl_off = (uint32_t)start;
            out->cl_len = (uint32_t)(i - start);
        } else if (name_is(nm, nlen, "date", 4)) {
            out->seen |= HAS_DATE;
        } else if (name_is(nm, nlen, "content-type", 12)) {
            trim_ows(&v, &vlen);
            out->seen |= HAS_CT;
            out->ct_off = (uint32_t)(v - h);
            out->ct_len = (uint32_t)vlen;
        } else if (name_is(nm, nlen, "content-encoding", 16)) {
            out->seen |= HAS_CE;
        } else if (name_is(nm, nlen, "content-range", 13)) {
            out->seen |= HAS_CRANGE;
        } else if (name_is(nm, nlen, "vary", 4)) {
            trim_ows(&v, &vlen);
            out->seen |= HAS_VARY | (vary_covers_ae(v, vlen) ? VARY_AE : 0);
            out->vary_end = (uint32_t)(v + vlen - h);
        } else if (name_is(nm, nlen, "etag", 4)) {
            trim_ows(&v, &vlen);
            out->seen &= ~(unsigned)ETAG_STRONG;
            if (vlen >= 2 && v[0] == '"') { /* a weak one starts W/ and stays as it is */
                out->seen |= ETAG_STRONG;
                out->etag_off = (uint32_t)(v - h);
            }
        } else if (name_is(nm, nlen, "transfer-encoding", 17)) {
            if (out->seen & HAS_TE)
                return nsv__set_detail(s, NSV_EINVAL, "headers: Transfer-Encoding appears twice");
            out->seen |= HAS_TE;
            out->te_off = (uint32_t)start;
            out->te_len = (uint32_t)(i - start);
            trim_ows(&v, &vlen);
            if (vlen == 7 && nsv__strncaseeq(v, "chunked", 7))
                out->seen |= TE_CHUNKED;
        } else if (name_is(nm, nlen, "connection", 10)) {
            out->seen |= HAS_CONN;
            for (size_t k = 0; k + 5 <= vlen; k++)
                if (nsv__strncaseeq(v + k, "close", 5))
                    out->seen |= CONN_CLOSE;
        }
    }
    return 0;
}

/* Framing rules of a reply that need no request: 1xx only through their own
 * paths, Transfer-Encoding only on streamed replies and only "chunked", no
 * Content-Length beside it or on a 204. The rules that need the request
 * (a Content-Length that must match the body unless HEAD or 304) are in
 * nsv__reply. */
int nsv__reply_check(nsv_server *s, int status, const nsv__hscan *hs, int stream)
{
    const char *call = stream ? "nsv_reply_start" : "nsv_reply";
    if (status >= 100 && status < 200)
        return nsv__set_detail(s, NSV_EINVAL, "%s: status %d is an interim (1xx) response, not a final one%s",
                               call, status, status == 101 ? "; upgrade with nsv_ws_upgrade" : "");
    if (status < 200 || status > 999)
        return nsv__set_detail(s, NSV_EINVAL, "%s: status %d is outside 200..999", call, status);
    if ((hs->seen & HAS_CL) && status == 204)
        return nsv__set_detail(s, NSV_EINVAL, "%s: a 204 response carries no Content-Length", call);
    if (!(hs->seen & HAS_TE))
        return 0;
    if (!stream)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_reply: Transfer-Encoding in a complete reply (the library "
                                              "frames it with Content-Length); stream with nsv_reply_start");
    if (!(hs->seen & TE_CHUNKED))
        return nsv__set_detail(s, NSV_EINVAL, "nsv_reply_start: Transfer-Encoding other than \"chunked\"; "
                                              "the library only frames streamed bodies as chunked");
    if (hs->seen & HAS_CL)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_reply_start: both Content-Length and Transfer-Encoding");
    if (status == 204 || status == 304)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_reply_start: a %d response has no body to frame", status);
    return 0;
}

/* The header block of a reply, validated, through a one-entry cache: hosts
 * tend to send the same block again and again. */
static const nsv__hscan no_headers;

/* *out points at the scan: the cache's (nothing copied) or *tmp. */
static int headers_of(nsv__loop *l, const char *hdrs, size_t hlen, nsv__hscan *tmp, const nsv__hscan **out)
{
    if (hlen == 0) {
        *out = &no_headers;
        return 0;
    }
    if (hlen == l->http->reply_hdrs_len && !memcmp(hdrs, l->http->reply_hdrs, hlen)) {
        *out = &l->http->reply_hdrs_scan; /* the same block as the last reply: already checked */
        return 0;
    }
    *out = tmp;
    int r = nsv__headers_scan(l->srv, hdrs, hlen, tmp);
    if (r == 0 && hlen <= sizeof l->http->reply_hdrs) {
        memcpy(l->http->reply_hdrs, hdrs, hlen);
        l->http->reply_hdrs_len = (uint32_t)hlen;
        l->http->reply_hdrs_scan = *tmp;
    }
    return r;
}

static void request_done(nsv__loop *l, nsv__conn *c)
{
    nsv__answer_done(l, c);
    c->served = 1;
    /* c->unwritable stays: a host told 0 hears 1 once the rest drains
     * (after_flush), even after the stream ended. */
    c->held = 0; /* answered: the next pipelined request may hold it again */
    c->bstream = 0;   /* the rest of a streamed body is not delivered (the connection closes) */
    c->continue_wait = 0;
    nsv__ticket(l, c, NSV__T_IDLE);
    if (c->keepalive && !atomic_load(&l->srv->draining)) {
        c->state = NSV__C_READ;
        c->deadline = l->now + l->srv->idle_timeout_ms;
    } else {
        c->state = NSV__C_NONE;
        c->closing = 1;
    }
    nsv__conn_mark_dirty(l, c);
}

/* A change to the host's block: del bytes at off give way to ins. */
typedef struct hedit {
    uint32_t off, del;
    const char *ins;
    uint32_t ilen;
} hedit;

/* Copy the host's block with its edits (at most a few, at distinct offsets). */
static char *put_block(char *p, const char *hdrs, size_t hlen, hedit *e, int ne)
{
    for (int i = 1; i < ne; i++) /* insertion sort by offset */
        for (int k = i; k > 0 && e[k].off < e[k - 1].off; k--) {
            hedit t = e[k];
            e[k] = e[k - 1];
            e[k - 1] = t;
        }
    size_t at = 0;
    for (int i = 0; i < ne; i++) {
        memcpy(p, hdrs + at, e[i].off - at);
        p += e[i].off - at;
        memcpy(p, e[i].ins, e[i].ilen);
        p += e[i].ilen;
        at = e[i].off + e[i].del;
    }
    memcpy(p, hdrs + at, hlen - at);
    return p + (hlen - at);
}

/* What gzip does to a reply: nothing (GZ_NONE), add Vary to an answer of a
 * compressible type sent as it is (GZ_VARY), or compress (GZ_ON). */
enum { GZ_NONE, GZ_VARY, GZ_ON };
#define GZ_HDR_ROOM 80 /* ", Accept-Encoding" or a Vary line, "W/", Content-Encoding */

static int gzip_plan(nsv__loop *l, nsv__conn *c, int status, const char *hdrs, const nsv__hscan *hs,
                     size_t blen, int stream, int fixed)
{
    nsv_server *s = l->srv;
    if (!(hs->seen & HAS_CT) || (hs->seen & HAS_CE) || !nsv__gzip_type_ok(s, hdrs + hs->ct_off, hs->ct_len))
        return GZ_NONE;
    /* HEAD is answered as it is (as nginx does): compressing a body only to
     * count it costs what the GET costs; the Vary tells caches the GET may
     * differ. Ranges count bytes of the identity body: never compressed. */
    if (!c->gzip_ok || c->head || status == 204 || status == 304 || status == 206 || (hs->seen & HAS_CRANGE))
        return GZ_VARY;
    if (stream)
        return fixed ? GZ_VARY : GZ_ON;
    return blen >= (uint64_t)s->gzip_min_size ? GZ_ON : GZ_VARY;
}

int nsv__reason_set(nsv__loop *l, nsv__conn *c, const char *reason, size_t len)
{
    if (c->proto != &nsv__proto_http || c->state != NSV__C_PENDING)
        return NSV_ESTATE; /* conn_call says what the connection is not */
    const nsv__alloc *a = &l->srv->alloc;
    if (len == 0) {
        nsv__free(a, c->reason);
        c->reason = NULL;
        return NSV_OK;
    }
    /* Kept until the status line is written (or the connection closes);
     * rare, so the connection carries only a pointer. */
    char *p = c->reason ? c->reason : nsv__malloc(a, 1 + NSV__REASON_MAX);
    if (!p)
        return nsv__set_detail(l->srv, NSV_ENOMEM, "nsv_set_reason: no memory for the reason phrase");
    p[0] = (char)(uint8_t)len;
    memcpy(p + 1, reason, len);
    c->reason = p;
    return NSV_OK;
}

int nsv__reply(nsv__loop *l, nsv__conn *c, int status, const char *hdrs, size_t hlen,
               const char *body, size_t blen, int mode)
{
    int stream = mode == NSV__REPLY_STREAM;
    nsv_server *s = l->srv;
    if (c->state != NSV__C_PENDING)
        return c->state == NSV__C_STREAM
                   ? nsv__set_detail(s, NSV_ESTATE, "%s: a streamed reply is in progress on connection 0x%llx",
                                     stream ? "nsv_reply_start" : "nsv_reply", (unsigned long long)nsv__conn_id(l, c))
                   : nsv__set_detail(s, NSV_ESTATE, "%s: connection 0x%llx has no request waiting for a reply",
                                     stream ? "nsv_reply_start" : "nsv_reply", (unsigned long long)nsv__conn_id(l, c));
    nsv__hscan hs_tmp;
    const nsv__hscan *hs;
    if (headers_of(l, hdrs, hlen, &hs_tmp, &hs) != 0)
        return NSV_EINVAL;
    int r = nsv__reply_check(s, status, hs, stream);
    if (r)
        return r;
    int no_body = status == 204 || status == 304;
    /* A Content-Length must say what goes on the wire, except where HTTP
     * lets it describe a body that is not sent (HEAD, 304). */
    if (mode == NSV__REPLY_FULL && (hs->seen & HAS_CL) && hs->cl != blen && !c->head && status != 304)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_reply: Content-Length is %llu but the body is %zu bytes",
                               (unsigned long long)hs->cl, blen);
    if (c->out.len - c->out.off > nsv__out_limit(l))
        return nsv__set_detail(s, NSV_EAGAIN, "nsv_reply: %u bytes already wait to be sent, over the output cap",
                               c->out.len - c->out.off);
    int keepalive = c->keepalive;
    if (hs->seen & CONN_CLOSE || atomic_load(&s->draining) || (c->bstream && !stream))
        keepalive = 0; /* (a body still arriving is not read to its end: the connection ends) */
    int fixed = stream && (hs->seen & HAS_CL) && !c->head && !no_body;
    if (stream && c->http10 && !fixed)
        keepalive = 0; /* no chunked coding in HTTP/1.0: the close ends the body */
    size_t send_body = (c->head || no_body || stream) ? 0 : blen;
    /* Files (static/) are never compressed on the fly: precompressed NAME.gz serves that. */
    int gz = s->gzip_min_size > 0 && mode != NSV__REPLY_FILE ? gzip_plan(l, c, status, hdrs, hs, blen, stream, fixed)
                                                             : GZ_NONE;
    const char *rs;
    size_t rlen;
    if (c->reason) { /* nsv_set_reason */
        rs = c->reason + 1;
        rlen = (uint8_t)c->reason[0];
    } else {
        rs = reason(status);
        rlen = strlen(rs);
    }
    size_t hroom = 16 + rlen + hlen + 40 + 40 + 40 + 30 + (gz ? GZ_HDR_ROOM : 0);
    r = nsv__buf_reserve(l, &c->out, hroom + send_body);
    if (r)
        return r == NSV_ETOOBIG ? nsv__set_detail(s, r, "%s: %zu bytes do not fit the output buffer",
                                                  stream ? "nsv_reply_start" : "nsv_reply", hlen + send_body)
                                : r;
    /* Compressed where the head will not reach (hroom bounds it), then moved
     * up behind it; kept only when smaller than the body. */
    size_t zlen = 0;
    if (gz == GZ_ON && !stream) {
        zlen = nsv__gzip_complete(l, body, blen, c->out.p + c->out.len + hroom, blen - 1);
        if (!zlen)
            gz = GZ_VARY;
    } else if (gz == GZ_ON && nsv__gzip_stream_start(l, c) != NSV_OK) {
        gz = GZ_VARY; /* no memory for the stream: sent as it is */
    }
    hedit ed[4];
    int ne = 0;
    unsigned seen = hs->seen;
    if (stream && c->http10 && (seen & HAS_TE)) /* not chunked: the host's chunked line would lie */
        ed[ne++] = (hedit){hs->te_off, hs->te_len, "", 0};
    if (gz) {
        if (gz == GZ_ON && !stream && (seen & HAS_CL)) { /* replaced by the compressed length */
            ed[ne++] = (hedit){hs->cl_off, hs->cl_len, "", 0};
            seen &= ~(unsigned)HAS_CL;
        }
        if ((seen & (HAS_VARY | VARY_AE)) == HAS_VARY)
            ed[ne++] = (hedit){hs->vary_end, 0, ", Accept-Encoding", 17};
        if (gz == GZ_ON && (seen & ETAG_STRONG)) /* other bytes than the entity's (nginx does the same) */
            ed[ne++] = (hedit){hs->etag_off, 0, "W/", 2};
    }
    c->keepalive = (uint8_t)keepalive;
    nsv__update_date(l);
    char *p = c->out.p + c->out.len;
    const char *line = p;
    memcpy(p, "HTTP/1.1 ", 9);
    p = put_u64(p + 9, (uint64_t)status);
    *p++ = ' ';
    memcpy(p, rs, rlen);
    p += rlen;
    *p++ = '\r';
    *p++ = '\n';
    if (c->reason) { /* used: the next request starts with the standard phrases */
        nsv__free(&l->srv->alloc, c->reason);
        c->reason = NULL;
    }
    if (ne) {
        p = put_block(p, hdrs, hlen, ed, ne);
    } else if (hlen) {
        memcpy(p, hdrs, hlen);
        p += hlen;
    }
    if (gz) {
        if (!(seen & HAS_VARY)) {
            memcpy(p, "Vary: Accept-Encoding\r\n", 23);
            p += 23;
        }
        if (gz == GZ_ON) {
            memcpy(p, "Content-Encoding: gzip\r\n", 24);
            p += 24;
        }
    }
    if (stream) {
        if (!(seen & (HAS_TE | HAS_CL)) && !c->http10 && !no_body) {
            memcpy(p, "Transfer-Encoding: chunked\r\n", 28);
            p += 28;
        }
    } else if (!(seen & HAS_CL) && !no_body) {
        memcpy(p, "Content-Length: ", 16);
        p = put_u64(p + 16, zlen ? zlen : blen);
        *p++ = '\r';
        *p++ = '\n';
    }
    if (!(hs->seen & HAS_DATE)) {
        memcpy(p, l->http->date, 37);
        p += 37;
    }
    if (!(hs->seen & HAS_CONN)) {
        if (!c->keepalive) {
            memcpy(p, "Connection: close\r\n", 19);
            p += 19;
        } else if (c->http10) {
            memcpy(p, "Connection: keep-alive\r\n", 24);
            p += 24;
        }
    }
    *p++ = '\r';
    *p++ = '\n';
    if (zlen) {
        memmove(p, c->out.p + c->out.len + hroom, zlen);
        p += zlen;
    } else if (send_body) {
        memcpy(p, body, send_body);
        p += send_body;
    }
    c->out.len = (uint32_t)(p - c->out.p);
    c->resp_started = 1;
    nsv__answer_status(l, c, status);
    /* a file's bytes (NSV__REPLY_FILE) follow at once, described by the block */
    nsv__answer_bytes(l, c, 0, (uint64_t)(p - line) + (mode == NSV__REPLY_FILE && !c->head && !no_body ? hs->cl : 0));
    if (stream) {
        c->state = NSV__C_STREAM;
        c->no_body = (uint8_t)no_body;
        c->fixed_len = (uint8_t)fixed;
        c->stream_left = hs->cl;
        c->high_water = (uint32_t)s->tcp_high_water;
        c->low_water = (uint32_t)s->tcp_low_water;
        nsv__ticket(l, c, NSV__T_STREAM);
        nsv__conn_mark_dirty(l, c);
    } else {
        request_done(l, c);
    }
    return NSV_OK;
}

int nsv__send_chunk(nsv__loop *l, nsv__conn *c, const char *data, size_t len)
{
    nsv_server *s = l->srv;
    if (c->state != NSV__C_STREAM)
        return nsv__set_detail(s, NSV_ESTATE, "nsv_send_chunk: connection 0x%llx has no streamed reply in progress",
                               (unsigned long long)nsv__conn_id(l, c));
    if (len && !data)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_send_chunk: data is NULL with len %zu", len);
    if (len == 0 || c->head)
        return NSV_OK;
    if (c->no_body)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_send_chunk: the response status allows no body (204, 304)");
    if (c->fixed_len && len > c->stream_left)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_send_chunk: %zu bytes would pass the declared Content-Length "
                                              "(%llu bytes left)", len, (unsigned long long)c->stream_left);
    if (c->out.len - c->out.off > 0 && c->out.len - c->out.off + len > nsv__out_limit(l))
        return nsv__set_detail(s, NSV_EAGAIN, "nsv_send_chunk: %u bytes wait to be sent; %zu more would pass the "
                                              "output cap", c->out.len - c->out.off, len);
    if (c->gz) { /* the cap above counted the bytes before compression: at least as many */
        uint32_t before = c->out.len - c->out.off;
        int r = nsv__gzip_stream_put(l, c, data, len, 0);
        nsv__answer_bytes(l, c, 0, (uint32_t)(c->out.len - c->out.off - before));
        if (r)
            return r == NSV_ETOOBIG ? nsv__set_detail(s, r, "nsv_send_chunk: %zu bytes do not fit the output buffer", len)
                                    : nsv__set_detail(s, r, "nsv_send_chunk: compressing %zu bytes failed", len);
        nsv__conn_mark_dirty(l, c);
        nsv__out_queued(l, c);
        return NSV_OK;
    }
    int framed = !c->http10 && !c->fixed_len;
    int r = nsv__buf_reserve(l, &c->out, len + 24);
    if (r)
        return r == NSV_ETOOBIG ? nsv__set_detail(s, r, "nsv_send_chunk: %zu bytes do not fit the output buffer", len) : r;
    char *p = c->out.p + c->out.len;
    if (framed) {
        static const char hex[] = "0123456789abcdef";
        char tmp[20];
        int n = 0;
        size_t v = len;
        do {
            tmp[n++] = hex[v & 15];
            v >>= 4;
        } while (v);
        while (n)
            *p++ = tmp[--n];
        *p++ = '\r';
        *p++ = '\n';
    }
    memcpy(p, data, len);
    p += len;
    if (framed) {
        *p++ = '\r';
        *p++ = '\n';
    }
    if (c->fixed_len)
        c->stream_left -= len;
    nsv__answer_bytes(l, c, 0, (uint64_t)(p - (c->out.p + c->out.len)));
    c->out.len = (uint32_t)(p - c->out.p);
    nsv__conn_mark_dirty(l, c);
    nsv__out_queued(l, c); /* pace the stream */
    return NSV_OK;
}

int nsv__reply_end(nsv__loop *l, nsv__conn *c)
{
    if (c->state != NSV__C_STREAM)
        return nsv__set_detail(l->srv, NSV_ESTATE, "nsv_reply_end: connection 0x%llx has no streamed reply in progress",
                               (unsigned long long)nsv__conn_id(l, c));
    if (c->fixed_len && c->stream_left) {
        /* The client waits for bytes that will not come: close, so it sees
         * a short body instead of reading the next response as its rest. */
        uint64_t left = c->stream_left;
        c->keepalive = 0;
        request_done(l, c);
        return nsv__set_detail(l->srv, NSV_EINVAL, "nsv_reply_end: %llu bytes short of the declared Content-Length; "
                                                   "the connection is closed", (unsigned long long)left);
    }
    if (c->gz) { /* the end of the gzip member, then the end of the body */
        uint32_t before = c->out.len - c->out.off;
        int r = nsv__gzip_stream_put(l, c, NULL, 0, 1);
        nsv__answer_bytes(l, c, 0, (uint32_t)(c->out.len - c->out.off - before));
        nsv__gzip_stream_free(l, c);
        if (r) {
            c->keepalive = 0;
            request_done(l, c);
            return nsv__set_detail(l->srv, r, "nsv_reply_end: the end of the gzip stream does not fit the output "
                                              "buffer; the connection is closed");
        }
    }
    if (!c->http10 && !c->head && !c->fixed_len && !c->no_body) {
        int r = nsv__buf_append(l, &c->out, "0\r\n\r\n", 5);
        if (r)
            return r;
        nsv__answer_bytes(l, c, 0, 5);
    }
    if (c->bstream)
        c->keepalive = 0; /* the request body is not over: the connection ends */
    request_done(l, c);
    return NSV_OK;
}

/* Answer a protocol error and close (after the response is sent). */
int nsv__error_reply(nsv__loop *l, nsv__conn *c, int status)
{
    const char *rs = reason(status);
    char buf[256];
    nsv__update_date(l);
    int n = snprintf(buf, sizeof buf,
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                     "%.37s%sConnection: close\r\n\r\n%s\n",
                     status, rs, strlen(rs) + 1, l->http->date,
                     status == 426 ? "Sec-WebSocket-Version: 13\r\nUpgrade: websocket\r\n" : "", rs);
    c->keepalive = 0;
    c->state = NSV__C_NONE;
    c->closing = 1;
    c->resp_started = 1;
    c->deadline = l->now + l->srv->idle_timeout_ms;
    if (c->out.len - c->out.off == 0)
        nsv__buf_release(l, &c->out);
    if (nsv__buf_append(l, &c->out, buf, (size_t)n) != 0) {
        nsv__conn_close(l, c);
        return NSV_ENOMEM;
    }
    nsv__answer_status(l, c, status); /* counted once queued */
    nsv__answer_bytes(l, c, 0, (uint64_t)n);
    nsv__answer_done(l, c);
    nsv__conn_mark_dirty(l, c);
    return NSV_OK;
}
