/* sse.c - server-sent event streams over a streamed reply: nsv_sse_start
 * (nsv_reply_start with the event-stream headers) and nsv_sse_send (one
 * event formatted by util/sse.c, sent as one nsv_send_chunk). Everything
 * else (pacing, the output cap, other threads of a sharded server, the end
 * with nsv_reply_end) is that of the streamed reply. */
#include "server.h"

#include <string.h>

/* Events up to this size are formatted on the stack; larger ones take one
 * allocation through the server's allocator for the call. */
#define SSE_STACK 4096

static const char CT[] = "Content-Type: text/event-stream\r\n";
static const char CC[] = "Cache-Control: no-cache\r\n";
static const char XA[] = "X-Accel-Buffering: no\r\n";

static int name_is(const char *line, size_t nlen, const char *name)
{
    return nlen == strlen(name) && nsv__strncaseeq(line, name, nlen);
}

/* A Content-Type value that EventSource accepts: the media type
 * text/event-stream (any case), parameters allowed. */
static int is_event_stream(const char *v, size_t len)
{
    while (len && (*v == ' ' || *v == '\t'))
        v++, len--;
    static const char mt[] = "text/event-stream";
    size_t ml = sizeof mt - 1;
    if (len < ml || !nsv__strncaseeq(v, mt, ml))
        return 0;
    return len == ml || v[ml] == ';' || v[ml] == ' ' || v[ml] == '\t';
}

int nsv_sse_start(nsv_server *s, uint64_t conn, const char *headers, size_t hlen)
{
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_sse_start: srv is NULL");
    if (hlen && !headers)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_sse_start: headers is NULL with hlen %zu", hlen);
    if (hlen && (hlen < 2 || headers[hlen - 2] != '\r' || headers[hlen - 1] != '\n'))
        return nsv__set_detail(s, NSV_EINVAL, "nsv_sse_start: the header block does not end with CRLF");
    int has_ct = 0, has_cc = 0, has_xa = 0;
    for (size_t i = 0; i < hlen;) {
        const char *line = headers + i;
        const char *eol = memchr(line, '\n', hlen - i);
        size_t ll = (size_t)(eol - line) + 1; /* the block ends with CRLF, so eol exists */
        const char *colon = memchr(line, ':', ll);
        if (colon) {
            size_t nlen = (size_t)(colon - line);
            const char *v = colon + 1;
            size_t vlen = (size_t)(eol - v);
            if (vlen && v[vlen - 1] == '\r')
                vlen--;
            if (name_is(line, nlen, "content-type")) {
                if (!is_event_stream(v, vlen))
                    return nsv__set_detail(s, NSV_EINVAL, "nsv_sse_start: Content-Type '%.*s' is not "
                                           "text/event-stream (EventSource fails on any other type)",
                                           (int)(vlen > 200 ? 200 : vlen), v);
                has_ct = 1;
            } else if (name_is(line, nlen, "content-length")) {
                return nsv__set_detail(s, NSV_EINVAL, "nsv_sse_start: Content-Length given; an event stream "
                                       "has no length");
            } else if (name_is(line, nlen, "cache-control")) {
                has_cc = 1;
            } else if (name_is(line, nlen, "x-accel-buffering")) {
                has_xa = 1;
            }
        }
        i += ll;
    }
    size_t add = (has_ct ? 0 : sizeof CT - 1) + (has_cc ? 0 : sizeof CC - 1) + (has_xa ? 0 : sizeof XA - 1);
    char stack[1024];
    char *buf = stack;
    if (hlen + add > sizeof stack) {
        buf = nsv__malloc(&s->alloc, hlen + add);
        if (!buf)
            return nsv__set_detail(s, NSV_ENOMEM, "nsv_sse_start: no memory for a header block of %zu bytes",
                                   hlen + add);
    }
    size_t at = 0;
    if (!has_ct)
        memcpy(buf + at, CT, sizeof CT - 1), at += sizeof CT - 1;
    if (!has_cc)
        memcpy(buf + at, CC, sizeof CC - 1), at += sizeof CC - 1;
    if (!has_xa)
        memcpy(buf + at, XA, sizeof XA - 1), at += sizeof XA - 1;
    if (hlen)
        memcpy(buf + at, headers, hlen);
    int r = nsv_reply_start(s, conn, 200, buf, hlen + add);
    if (buf != stack)
        nsv__free(&s->alloc, buf);
    return r;
}

int nsv_sse_send(nsv_server *s, uint64_t conn, const char *event, size_t elen, const char *id, size_t idlen,
                 const char *data, size_t dlen, int64_t retry_ms)
{
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_sse_send: srv is NULL");
    char stack[SSE_STACK];
    int64_t n = nsv__sse_format(s, "nsv_sse_send", event, elen, id, idlen, data, dlen, retry_ms, stack,
                                sizeof stack);
    if (n < 0)
        return (int)n;
    if ((uint64_t)n <= sizeof stack)
        return nsv_send_chunk(s, conn, stack, (size_t)n);
    /* n fits a size_t: util/sse.c bounds the inputs so that it does */
    char *buf = nsv__malloc(&s->alloc, (size_t)n);
    if (!buf)
        return nsv__set_detail(s, NSV_ENOMEM, "nsv_sse_send: no memory for an event of %lld bytes", (long long)n);
    nsv__sse_format(s, "nsv_sse_send", event, elen, id, idlen, data, dlen, retry_ms, buf, (size_t)n);
    int r = nsv_send_chunk(s, conn, buf, (size_t)n);
    nsv__free(&s->alloc, buf);
    return r;
}
