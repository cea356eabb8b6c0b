/* proxy_headers.h - header rewriting of build/http-proxy (examples/http_proxy.c):
 * which lines cross the proxy and which it adds. Pure functions over an
 * event's header block ("Name: value\r\n" lines, names as sent) and a
 * growable output buffer; docs/PROXY.md states the rules.
 *
 * Hop-by-hop lines are dropped in both directions (RFC 9110 7.6.1):
 * Connection and every name it lists, Keep-Alive, Proxy-Connection, TE,
 * Trailer, Transfer-Encoding, Upgrade, Proxy-Authorization and
 * Proxy-Authenticate. Content-Length is dropped too: the library frames each
 * side itself (the request from the body the server parsed, the response
 * from the body the client read), so a length can never disagree with the
 * bytes that follow it. */
#ifndef EXAMPLES_PROXY_HEADERS_H
#define EXAMPLES_PROXY_HEADERS_H

#include <nanosrv.h>
#include <stdlib.h>
#include <string.h>

typedef struct pbuf {
    char *p;
    size_t len, cap;
} pbuf;

static int pb_add(pbuf *b, const char *s, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}
#define pb_lit(b, s) pb_add((b), (s), sizeof(s) - 1)

/* Case-insensitive equality with a lower-case literal. */
static int ph_ieq(const char *s, size_t n, const char *lit)
{
    size_t ln = strlen(lit);
    if (n != ln)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c + 32);
        if (c != lit[i])
            return 0;
    }
    return 1;
}

static int ph_iprefix(const char *s, size_t n, const char *lit)
{
    size_t ln = strlen(lit);
    return n >= ln && ph_ieq(s, ln, lit);
}

/* One header line of a block: name and value (value without OWS). */
typedef struct ph_line {
    const char *name, *value;
    size_t nlen, vlen;
} ph_line;

/* Next line of blk[*pos..end); 0 at the end. */
static int ph_next(const char *blk, size_t end, size_t *pos, ph_line *ln)
{
    size_t i = *pos;
    if (i >= end)
        return 0;
    const char *eol = memchr(blk + i, '\n', end - i);
    size_t stop = eol ? (size_t)(eol - blk) : end; /* at the LF */
    size_t next = eol ? stop + 1 : end;
    if (stop > i && blk[stop - 1] == '\r')
        stop--;
    const char *colon = memchr(blk + i, ':', stop - i);
    if (!colon) { /* never in a parsed block; skip it */
        *pos = next;
        return ph_next(blk, end, pos, ln);
    }
    ln->name = blk + i;
    ln->nlen = (size_t)(colon - (blk + i));
    size_t v = (size_t)(colon - blk) + 1;
    while (v < stop && (blk[v] == ' ' || blk[v] == '\t'))
        v++;
    size_t ve = stop;
    while (ve > v && (blk[ve - 1] == ' ' || blk[ve - 1] == '\t'))
        ve--;
    ln->value = blk + v;
    ln->vlen = ve - v;
    *pos = next;
    return 1;
}

/* The fixed hop-by-hop names, plus the ones the library frames itself. */
static int ph_hop(const char *n, size_t len)
{
    static const char *const names[] = {"connection", "keep-alive", "proxy-connection", "te", "trailer",
                                        "transfer-encoding", "upgrade", "proxy-authorization",
                                        "proxy-authenticate", "content-length"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (ph_ieq(n, len, names[i]))
            return 1;
    return 0;
}

/* Is name one of the comma-separated tokens of the Connection values in
 * conn (all Connection lines joined by ',')? */
static int ph_listed(const char *n, size_t len, const char *conn, size_t clen)
{
    size_t i = 0;
    while (i < clen) {
        while (i < clen && (conn[i] == ' ' || conn[i] == '\t' || conn[i] == ','))
            i++;
        size_t s = i;
        while (i < clen && conn[i] != ',')
            i++;
        size_t e = i;
        while (e > s && (conn[e - 1] == ' ' || conn[e - 1] == '\t'))
            e--;
        if (e > s && e - s == len) {
            size_t k = 0;
            for (; k < len; k++) {
                char a = conn[s + k], b = n[k];
                if (a >= 'A' && a <= 'Z')
                    a = (char)(a + 32);
                if (b >= 'A' && b <= 'Z')
                    b = (char)(b + 32);
                if (a != b)
                    break;
            }
            if (k == len)
                return 1;
        }
    }
    return 0;
}

/* All Connection values of a block joined by ',' into a small buffer
 * (names beyond it are still dropped if they are fixed hop-by-hop ones;
 * 1 KiB of listed names is plenty for any real client). */
static size_t ph_connection(const char *blk, size_t off, size_t len, char *out, size_t cap)
{
    size_t pos = off, k = 0;
    ph_line ln;
    while (ph_next(blk, off + len, &pos, &ln)) {
        if (!ph_ieq(ln.name, ln.nlen, "connection"))
            continue;
        if (k + ln.vlen + 1 > cap)
            break;
        memcpy(out + k, ln.value, ln.vlen);
        k += ln.vlen;
        out[k++] = ',';
    }
    return k;
}

/* What the request side adds (docs/PROXY.md). */
typedef struct ph_fwd {
    const char *peer; /* client address text */
    size_t peer_len;
    const char *proto; /* "http" or "https": the scheme the client used */
    int ws;            /* a WebSocket handshake: Sec-WebSocket-* are the library's */
} ph_fwd;

static int ph_add_quoted(pbuf *b, const char *s, size_t n)
{
    int r = pb_lit(b, "\"");
    for (size_t i = 0; i < n && !r; i++) {
        if (s[i] == '"' || s[i] == '\\')
            r = pb_lit(b, "\\");
        if (!r)
            r = pb_add(b, s + i, 1);
    }
    return r ? r : pb_lit(b, "\"");
}

/* The upstream request's header block: the client's end-to-end lines in
 * their order, Expect dropped (the server side answers 100-continue
 * itself), X-Forwarded-For with the client's address appended to what came,
 * X-Forwarded-Proto, X-Forwarded-Host (the client's Host) and an element
 * appended to Forwarded. *host / *hlen get the client's Host value (NULL
 * when it sent none). Returns 0 or -1 (no memory). */
static int ph_request(pbuf *b, const nsv_event *ev, const char *a, const ph_fwd *f, const char **host,
                      size_t *hlen)
{
    char conn[1024];
    size_t clen = ph_connection(a, ev->headers_off, ev->headers_len, conn, sizeof conn);
    size_t pos = ev->headers_off, end = (size_t)ev->headers_off + ev->headers_len;
    ph_line ln;
    pbuf xff = {0}, fwd = {0};
    int r = 0;
    *host = NULL;
    *hlen = 0;
    while (!r && ph_next(a, end, &pos, &ln)) {
        if (ph_ieq(ln.name, ln.nlen, "host")) {
            *host = ln.value;
            *hlen = ln.vlen;
            continue;
        }
        if (ph_hop(ln.name, ln.nlen) || ph_listed(ln.name, ln.nlen, conn, clen) ||
            ph_ieq(ln.name, ln.nlen, "expect") || ph_ieq(ln.name, ln.nlen, "x-forwarded-proto") ||
            ph_ieq(ln.name, ln.nlen, "x-forwarded-host"))
            continue;
        if (f->ws && ph_iprefix(ln.name, ln.nlen, "sec-websocket-"))
            continue;
        if (ph_ieq(ln.name, ln.nlen, "x-forwarded-for") || ph_ieq(ln.name, ln.nlen, "forwarded")) {
            pbuf *t = ln.name[0] == 'f' || ln.name[0] == 'F' ? &fwd : &xff;
            if (ln.vlen)
                r = (t->len ? pb_lit(t, ", ") : 0) || pb_add(t, ln.value, ln.vlen);
            continue;
        }
        r = pb_add(b, ln.name, ln.nlen) || pb_lit(b, ": ") || pb_add(b, ln.value, ln.vlen) || pb_lit(b, "\r\n");
    }
    int v6 = memchr(f->peer, ':', f->peer_len) != NULL;
    r = r || pb_lit(b, "X-Forwarded-For: ") || (xff.len && (pb_add(b, xff.p, xff.len) || pb_lit(b, ", "))) ||
        pb_add(b, f->peer, f->peer_len) || pb_lit(b, "\r\nX-Forwarded-Proto: ") ||
        pb_add(b, f->proto, strlen(f->proto)) || pb_lit(b, "\r\n");
    if (!r && *host)
        r = pb_lit(b, "X-Forwarded-Host: ") || pb_add(b, *host, *hlen) || pb_lit(b, "\r\n");
    /* Forwarded (RFC 7239): for= an IPv6 address is quoted and bracketed. */
    r = r || pb_lit(b, "Forwarded: ") || (fwd.len && (pb_add(b, fwd.p, fwd.len) || pb_lit(b, ", "))) ||
        pb_lit(b, "for=") ||
        (v6 ? pb_lit(b, "\"[") || pb_add(b, f->peer, f->peer_len) || pb_lit(b, "]\"")
            : pb_add(b, f->peer, f->peer_len)) ||
        pb_lit(b, ";proto=") || pb_add(b, f->proto, strlen(f->proto));
    if (!r && *host)
        r = pb_lit(b, ";host=") || ph_add_quoted(b, *host, *hlen);
    r = r || pb_lit(b, "\r\n");
    free(xff.p);
    free(fwd.p);
    return r ? -1 : 0;
}

/* The downstream response's header block: the upstream's end-to-end lines;
 * *cl gets its Content-Length (-1 when none). */
static int ph_response(pbuf *b, const nsv_event *ev, const char *a, int64_t *cl)
{
    char conn[1024];
    size_t clen = ph_connection(a, ev->headers_off, ev->headers_len, conn, sizeof conn);
    size_t pos = ev->headers_off, end = (size_t)ev->headers_off + ev->headers_len;
    ph_line ln;
    int r = 0, te = 0;
    *cl = -1;
    while (!r && ph_next(a, end, &pos, &ln)) {
        if (ph_ieq(ln.name, ln.nlen, "transfer-encoding"))
            te = 1; /* it beats a Content-Length (the client read it so) */
        if (ph_ieq(ln.name, ln.nlen, "content-length")) {
            int64_t v = 0;
            for (size_t i = 0; i < ln.vlen && ln.value[i] >= '0' && ln.value[i] <= '9' && v < (1LL << 60); i++)
                v = v * 10 + (ln.value[i] - '0');
            *cl = v;
            continue;
        }
        if (ph_hop(ln.name, ln.nlen) || ph_listed(ln.name, ln.nlen, conn, clen))
            continue;
        r = pb_add(b, ln.name, ln.nlen) || pb_lit(b, ": ") || pb_add(b, ln.value, ln.vlen) || pb_lit(b, "\r\n");
    }
    if (te)
        *cl = -1;
    return r ? -1 : 0;
}

#endif
