/* sse.c - server-sent events (WHATWG HTML, "Server-sent events"): one
 * event block (nsv_sse_format) or a comment block (nsv_sse_comment) in the
 * text/event-stream format.
 *
 * A block is fields, one per line, then an empty line that dispatches it:
 *   event: NAME\n   id: ID\n   retry: MS\n   data: LINE\n ...   \n
 * A parser strips one space after the colon, so "data: " + line gives the
 * line back exactly, leading spaces included. Data is split on LF, CRLF
 * and lone CR (every line terminator a parser knows) into data lines, which
 * the client joins with LF; a trailing terminator gives a last empty line,
 * so "a\n" comes back as "a\n". Event names and ids are single fields: CR
 * or LF in them would start a new field (injection) and is refused, as is
 * NUL in an id (the parser ignores such an id field). */
#include "../internal.h"

#include <string.h>

/* Bytes of s split into lines (at least one), each written as prefix
 * (plen bytes), the line and "\n". With dst set, writes them. */
static size_t lines_len(const char *s, size_t len, size_t plen, const char *prefix, char *dst)
{
    size_t out = 0, i = 0, start = 0;
    for (;;) {
        int end = i == len;
        size_t term = 0;
        if (!end) {
            if (s[i] == '\n')
                term = 1;
            else if (s[i] == '\r')
                term = (i + 1 < len && s[i + 1] == '\n') ? 2 : 1;
        }
        if (end || term) {
            size_t ll = i - start;
            if (dst) {
                memcpy(dst + out, prefix, plen);
                if (ll)
                    memcpy(dst + out + plen, s + start, ll);
                dst[out + plen + ll] = '\n';
            }
            out += plen + ll + 1;
            if (end)
                return out;
            i += term;
            start = i;
            continue;
        }
        i++;
    }
}

/* Decimal digits of v >= 0 into buf (no NUL); returns the count. */
static size_t put_dec(int64_t v, char *buf)
{
    char tmp[20];
    size_t n = 0;
    uint64_t u = (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    for (size_t i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    return n;
}

/* The largest input length accepted: every byte may become a line of at
 * most 7 bytes, and the sum must stay an int64_t and a size_t. */
#define SSE_MAX_IN (((uint64_t)SIZE_MAX < (uint64_t)INT64_MAX ? SIZE_MAX : (size_t)INT64_MAX) / 16)

/* At most the bytes lines_len gives for len bytes: every byte a line
 * terminator, each making a line of prefix and LF. Under it, dst is known
 * to be large enough and lines are written in one pass, without sizing. */
static size_t lines_most(size_t len, size_t plen) { return (len + 1) * (plen + 1); }

static int bad_byte(nsv_server *s, const char *fn, const char *what, size_t at, unsigned char c, const char *why)
{
    return nsv__set_detail(s, NSV_EINVAL, "%s: %s byte %zu is %s (0x%02x); %s", fn, what, at,
                           c == '\r' ? "CR" : c == '\n' ? "LF" : "NUL", c, why);
}

int64_t nsv__sse_format(nsv_server *s, const char *fn, const char *event, size_t elen, const char *id, size_t idlen,
                        const char *data, size_t dlen, int64_t retry_ms, char *dst, size_t cap)
{
    if (!event && elen)
        return nsv__set_detail(s, NSV_EINVAL, "%s: event is NULL with elen %zu", fn, elen);
    if (!id && idlen)
        return nsv__set_detail(s, NSV_EINVAL, "%s: id is NULL with idlen %zu", fn, idlen);
    if (!data && dlen)
        return nsv__set_detail(s, NSV_EINVAL, "%s: data is NULL with dlen %zu", fn, dlen);
    if (!dst && cap)
        return nsv__set_detail(s, NSV_EINVAL, "%s: dst is NULL with cap %zu", fn, cap);
    if (elen > SSE_MAX_IN || idlen > SSE_MAX_IN || dlen > SSE_MAX_IN)
        return nsv__set_detail(s, NSV_ETOOBIG, "%s: a length is over INT64_MAX / 16", fn);
    for (size_t i = 0; i < elen; i++)
        if (event[i] == '\r' || event[i] == '\n')
            return bad_byte(s, fn, "event name", i, (unsigned char)event[i],
                            "a line break would start a new field");
    for (size_t i = 0; i < idlen; i++)
        if (id[i] == '\r' || id[i] == '\n' || id[i] == 0)
            return bad_byte(s, fn, "id", i, (unsigned char)id[i],
                            id[i] ? "a line break would start a new field" : "clients ignore an id holding NUL");
    int with_data = data != NULL || elen > 0;
    if (!with_data && !id && retry_ms < 0)
        return nsv__set_detail(s, NSV_EINVAL, "%s: nothing to send (no event name, id, retry or data; "
                               "nsv_sse_comment makes keepalives)", fn);
    char rbuf[20];
    size_t rlen = retry_ms >= 0 ? put_dec(retry_ms, rbuf) : 0;
    size_t fixed = 1 + (elen ? 7 + elen + 1 : 0) + (id ? 4 + idlen + 1 : 0) + (retry_ms >= 0 ? 7 + rlen + 1 : 0);
    if (fixed + (with_data ? lines_most(dlen, 6) : 0) > cap) {
        size_t need = fixed + (with_data ? lines_len(data ? data : "", dlen, 6, "data: ", NULL) : 0);
        if (need > cap)
            return (int64_t)need;
    }
    size_t at = 0;
    if (elen) {
        memcpy(dst, "event: ", 7);
        memcpy(dst + 7, event, elen);
        dst[7 + elen] = '\n';
        at = 7 + elen + 1;
    }
    if (id) {
        memcpy(dst + at, "id: ", 4);
        if (idlen)
            memcpy(dst + at + 4, id, idlen);
        dst[at + 4 + idlen] = '\n';
        at += 4 + idlen + 1;
    }
    if (retry_ms >= 0) {
        memcpy(dst + at, "retry: ", 7);
        memcpy(dst + at + 7, rbuf, rlen);
        dst[at + 7 + rlen] = '\n';
        at += 7 + rlen + 1;
    }
    if (with_data)
        at += lines_len(data ? data : "", dlen, 6, "data: ", dst + at);
    dst[at] = '\n';
    return (int64_t)at + 1;
}

int64_t nsv_sse_format(const char *event, size_t elen, const char *id, size_t idlen, const char *data, size_t dlen,
                       int64_t retry_ms, char *dst, size_t cap)
{
    return nsv__sse_format(NULL, "nsv_sse_format", event, elen, id, idlen, data, dlen, retry_ms, dst, cap);
}

int64_t nsv_sse_comment(const char *text, size_t len, char *dst, size_t cap)
{
    if (!text && len)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_sse_comment: text is NULL with len %zu", len);
    if (!dst && cap)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_sse_comment: dst is NULL with cap %zu", cap);
    if (len > SSE_MAX_IN)
        return nsv__set_detail(NULL, NSV_ETOOBIG, "nsv_sse_comment: len %zu is over INT64_MAX / 16", len);
    if (lines_most(len, 2) + 1 > cap) {
        size_t need = lines_len(text ? text : "", len, 2, ": ", NULL) + 1;
        if (need > cap)
            return (int64_t)need;
    }
    size_t at = lines_len(text ? text : "", len, 2, ": ", dst);
    dst[at] = '\n';
    return (int64_t)at + 1;
}
