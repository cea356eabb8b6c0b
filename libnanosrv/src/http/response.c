/* response.c - formats replies into the connection's output buffer. */
#include "../core/server.h"
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 426: return "Upgrade Required";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    }
    return "Unknown";
}

/* The Date line changes once a second: re-check the wall clock only when
 * the loop's cached monotonic time passes the next second boundary. */
void nsv__update_date(nsv__loop *l)
{
    if (l->now < l->date_until)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    l->date_until = l->now + (1000 - ts.tv_nsec / 1000000);
    time_t t = ts.tv_sec;
    if (t == l->date_sec)
        return;
    l->date_sec = t;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(l->date, sizeof l->date, "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
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

enum { HAS_CL = 1, HAS_DATE = 2, HAS_CONN = 4, CONN_CLOSE = 8, HAS_TE = 16 };

static int name_is(const char *line, size_t nlen, const char *name, size_t len)
{
    return nlen == len && nsv__strncaseeq(line, name, len);
}

/* Validate the host's header block and note which headers it set. Every
 * line must be "Name: value\r\n" without bare CR/LF (no response splitting). */
int nsv__scan_headers(const char *h, size_t n, unsigned *seen)
{
    size_t i = 0;
    *seen = 0;
    while (i < n) {
        size_t start = i, colon = 0;
        while (i < n && h[i] != '\r' && h[i] != '\n') {
            if (h[i] == ':' && !colon)
                colon = i;
            i++;
        }
        if (i + 1 >= n || h[i] != '\r' || h[i + 1] != '\n' || colon <= start)
            return NSV_EINVAL;
        for (size_t k = start; k < colon; k++)
            if ((unsigned char)h[k] <= ' ' || h[k] == 0x7f)
                return NSV_EINVAL;
        const char *v = h + colon + 1;
        size_t vlen = i - colon - 1;
        size_t nlen = colon - start;
        const char *nm = h + start;
        if (name_is(nm, nlen, "content-length", 14))
            *seen |= HAS_CL;
        else if (name_is(nm, nlen, "date", 4))
            *seen |= HAS_DATE;
        else if (name_is(nm, nlen, "transfer-encoding", 17))
            *seen |= HAS_TE;
        else if (name_is(nm, nlen, "connection", 10)) {
            *seen |= HAS_CONN;
            for (size_t k = 0; k + 5 <= vlen; k++)
                if (nsv__strncaseeq(v + k, "close", 5))
                    *seen |= CONN_CLOSE;
        }
        i += 2;
    }
    return 0;
}

static void request_done(nsv__loop *l, nsv__conn *c)
{
    c->served = 1;
    c->unwritable = 0;
    nsv__ticket(l, c, NSV__T_IDLE);
    if (c->keepalive && !atomic_load(&l->srv->draining)) {
        c->state = NSV__C_READ;
        c->deadline = l->now + l->srv->idle_timeout_ms;
    } else {
        c->state = NSV__C_CLOSING;
    }
    nsv__conn_mark_dirty(l, c);
}

int nsv__reply(nsv__loop *l, nsv__conn *c, int status, const char *hdrs, size_t hlen,
               const char *body, size_t blen, int stream)
{
    if (c->state != NSV__C_PENDING)
        return NSV_ESTATE;
    if (status < 100 || status > 999 || (hlen && !hdrs) || (blen && !body))
        return NSV_EINVAL;
    unsigned seen = 0;
    if (hlen == l->hc_len && hlen && !memcmp(hdrs, l->hc, hlen)) {
        seen = l->hc_seen; /* the same block as the last reply: already checked */
    } else if (hlen) {
        if (nsv__scan_headers(hdrs, hlen, &seen) != 0)
            return NSV_EINVAL;
        if (hlen <= sizeof l->hc) {
            memcpy(l->hc, hdrs, hlen);
            l->hc_len = (uint32_t)hlen;
            l->hc_seen = seen;
        }
    }
    if (c->out.len - c->out.off > nsv__out_limit(l))
        return NSV_EAGAIN;
    if (seen & CONN_CLOSE || atomic_load(&l->srv->draining))
        c->keepalive = 0;
    if (stream && c->http10)
        c->keepalive = 0; /* no chunked coding in HTTP/1.0: the close ends the body */
    int no_body = status < 200 || status == 204 || status == 304;
    size_t send_body = (c->head || no_body || stream) ? 0 : blen;
    const char *rs = reason(status);
    size_t rlen = strlen(rs);
    int r = nsv__buf_reserve(l, &c->out, 16 + rlen + hlen + 40 + 40 + 40 + 30 + send_body);
    if (r)
        return r;
    nsv__update_date(l);
    char *p = c->out.p + c->out.len;
    memcpy(p, "HTTP/1.1 ", 9);
    p = put_u64(p + 9, (uint64_t)status);
    *p++ = ' ';
    memcpy(p, rs, rlen);
    p += rlen;
    *p++ = '\r';
    *p++ = '\n';
    if (hlen) {
        memcpy(p, hdrs, hlen);
        p += hlen;
    }
    if (stream) {
        if (!(seen & HAS_TE) && !c->http10 && !no_body) {
            memcpy(p, "Transfer-Encoding: chunked\r\n", 28);
            p += 28;
        }
    } else if (!(seen & HAS_CL) && !no_body) {
        memcpy(p, "Content-Length: ", 16);
        p = put_u64(p + 16, blen);
        *p++ = '\r';
        *p++ = '\n';
    }
    if (!(seen & HAS_DATE)) {
        memcpy(p, l->date, 37);
        p += 37;
    }
    if (!(seen & HAS_CONN)) {
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
    if (send_body) {
        memcpy(p, body, send_body);
        p += send_body;
    }
    c->out.len = (uint32_t)(p - c->out.p);
    c->resp_started = 1;
    if (stream) {
        c->state = NSV__C_STREAM;
        c->high_water = (uint32_t)l->srv->tcp_high_water;
        c->low_water = (uint32_t)l->srv->tcp_low_water;
        nsv__ticket(l, c, NSV__T_STREAM);
        nsv__conn_mark_dirty(l, c);
    } else {
        request_done(l, c);
    }
    return NSV_OK;
}

int nsv__send_chunk(nsv__loop *l, nsv__conn *c, const char *data, size_t len)
{
    if (c->state != NSV__C_STREAM)
        return NSV_ESTATE;
    if (len && !data)
        return NSV_EINVAL;
    if (len == 0 || c->head)
        return NSV_OK;
    if (c->out.len - c->out.off > 0 && c->out.len - c->out.off + len > nsv__out_limit(l))
        return NSV_EAGAIN;
    int r = nsv__buf_reserve(l, &c->out, len + 24);
    if (r)
        return r;
    char *p = c->out.p + c->out.len;
    if (!c->http10) {
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
    if (!c->http10) {
        *p++ = '\r';
        *p++ = '\n';
    }
    c->out.len = (uint32_t)(p - c->out.p);
    nsv__conn_mark_dirty(l, c);
    nsv__out_queued(l, c); /* pace the stream */
    return NSV_OK;
}

int nsv__reply_end(nsv__loop *l, nsv__conn *c)
{
    if (c->state != NSV__C_STREAM)
        return NSV_ESTATE;
    if (!c->http10 && !c->head) {
        int r = nsv__buf_append(l, &c->out, "0\r\n\r\n", 5);
        if (r)
            return r;
    }
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
                     status, rs, strlen(rs) + 1, l->date,
                     status == 426 ? "Sec-WebSocket-Version: 13\r\nUpgrade: websocket\r\n" : "", rs);
    c->keepalive = 0;
    c->state = NSV__C_CLOSING;
    c->resp_started = 1;
    c->deadline = l->now + l->srv->idle_timeout_ms;
    if (c->out.len - c->out.off == 0)
        nsv__buf_release(l, &c->out);
    if (nsv__buf_append(l, &c->out, buf, (size_t)n) != 0) {
        nsv__conn_close(l, c);
        return NSV_ENOMEM;
    }
    nsv__conn_mark_dirty(l, c);
    return NSV_OK;
}
