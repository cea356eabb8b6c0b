/* fuzz_sse.c - libFuzzer target for nsv_sse_format and nsv_sse_comment.
 *
 * Input: byte 0 holds flags (bit 0 comment instead of event, bit 1 id
 * given, bit 2 data given, bit 3 retry given, bit 4 event name as a NULL
 * pointer, bit 5 a NULL pointer with a length), bytes 1 and 2 pick the
 * lengths of the event name and the id, bytes 3..10 the retry value; the
 * rest is split into name, id and data (or is the comment text).
 *
 * Properties: an input is refused exactly when a reference check of the
 * documented rules refuses it; the sizing call (cap 0), a call with exactly
 * that room (an exact-size heap buffer, so ASan sees any overrun), a call
 * with more room and a call one byte short agree on the size; no call
 * writes past the size it reports, and a call short of room writes
 * nothing. The output is then read back by a parser that follows WHATWG
 * HTML "Parsing an event stream": an event comes back with the same type
 * (default "message"), data (line breaks as LF), last event id and retry,
 * and a comment dispatches nothing, its lines giving back the text. */
#include <nanosrv.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(int cond)
{
    if (!cond)
        abort();
}

/* ---- a WHATWG event-stream parser over bytes ---- */
typedef struct {
    char *p;
    size_t n, cap;
} sbuf;

static void sput(sbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        check(b->p != NULL);
    }
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
}

typedef struct {
    sbuf type, data, last_id;  /* buffers of the spec */
    int64_t retry;             /* -1: never set */
    int events;                /* dispatched */
    sbuf ev_type, ev_data, ev_id; /* the last dispatched event */
    sbuf comments;             /* comment lines' text, each + LF */
} parser;

static int is_digits(const char *v, size_t n)
{
    if (n == 0 || n > 19) /* INT64_MAX has 19 digits */
        return 0;
    for (size_t i = 0; i < n; i++)
        if (v[i] < '0' || v[i] > '9')
            return 0;
    return 1;
}

static void field(parser *ps, const char *name, size_t nl, const char *v, size_t vl)
{
    if (nl == 5 && !memcmp(name, "event", 5)) {
        ps->type.n = 0;
        sput(&ps->type, v, vl);
    } else if (nl == 4 && !memcmp(name, "data", 4)) {
        sput(&ps->data, v, vl);
        sput(&ps->data, "\n", 1);
    } else if (nl == 2 && !memcmp(name, "id", 2)) {
        if (!memchr(v, 0, vl)) {
            ps->last_id.n = 0;
            sput(&ps->last_id, v, vl);
        }
    } else if (nl == 5 && !memcmp(name, "retry", 5)) {
        if (is_digits(v, vl)) {
            uint64_t r = 0;
            for (size_t i = 0; i < vl; i++)
                r = r * 10 + (uint64_t)(v[i] - '0');
            ps->retry = r > INT64_MAX ? INT64_MAX : (int64_t)r;
        }
    }
}

static void dispatch(parser *ps)
{
    if (ps->data.n == 0) {
        ps->type.n = 0;
        return;
    }
    ps->data.n--; /* the last LF */
    ps->events++;
    ps->ev_type.n = ps->ev_data.n = ps->ev_id.n = 0;
    if (ps->type.n)
        sput(&ps->ev_type, ps->type.p, ps->type.n);
    else
        sput(&ps->ev_type, "message", 7);
    sput(&ps->ev_data, ps->data.p, ps->data.n);
    sput(&ps->ev_id, ps->last_id.p, ps->last_id.n);
    ps->type.n = ps->data.n = 0;
}

/* Lines end at CRLF, LF or CR. Returns 0 if the stream does not end with
 * a complete line (the formatter always ends with one). */
static int parse(parser *ps, const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t e = i;
        while (e < n && s[e] != '\n' && s[e] != '\r')
            e++;
        if (e == n)
            return 0;
        const char *line = s + i;
        size_t ll = e - i;
        i = e + ((s[e] == '\r' && e + 1 < n && s[e + 1] == '\n') ? 2 : 1);
        if (ll == 0) {
            dispatch(ps);
            continue;
        }
        if (line[0] == ':') {
            size_t k = ll > 1 && line[1] == ' ' ? 2 : 1;
            sput(&ps->comments, line + k, ll - k);
            sput(&ps->comments, "\n", 1);
            continue;
        }
        const char *colon = memchr(line, ':', ll);
        if (!colon) {
            field(ps, line, ll, "", 0);
            continue;
        }
        size_t nl = (size_t)(colon - line);
        const char *v = colon + 1;
        size_t vl = ll - nl - 1;
        if (vl && *v == ' ')
            v++, vl--;
        field(ps, line, nl, v, vl);
    }
    return 1;
}

static void parser_free(parser *ps)
{
    free(ps->type.p);
    free(ps->data.p);
    free(ps->last_id.p);
    free(ps->ev_type.p);
    free(ps->ev_data.p);
    free(ps->ev_id.p);
    free(ps->comments.p);
}

/* Data with every CRLF and lone CR as LF. */
static size_t normalise(const uint8_t *s, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\r') {
            out[o++] = '\n';
            if (i + 1 < n && s[i + 1] == '\n')
                i++;
        } else {
            out[o++] = (char)s[i];
        }
    }
    return o;
}

static int has_any(const uint8_t *s, size_t n, int nul)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] == '\r' || s[i] == '\n' || (nul && s[i] == 0))
            return 1;
    return 0;
}

/* Runs fn at cap 0, exact, larger and one short; returns the output (heap,
 * exact size) or NULL when refused, with *len its size. */
typedef int64_t (*fmt_fn)(const void *a, char *dst, size_t cap);

static char *run(fmt_fn fn, const void *a, int64_t *len)
{
    int64_t need = fn(a, NULL, 0);
    *len = need;
    if (need < 0)
        return NULL;
    check(need > 0);
    char *exact = malloc((size_t)need);
    check(exact != NULL);
    check(fn(a, exact, (size_t)need) == need);
    size_t big = (size_t)need + 64;
    char *roomy = malloc(big);
    check(roomy != NULL);
    memset(roomy, 0xA5, big);
    check(fn(a, roomy, big) == need);
    check(!memcmp(roomy, exact, (size_t)need));
    for (size_t i = (size_t)need; i < big; i++) /* nothing past the reported size */
        check((unsigned char)roomy[i] == 0xA5);
    memset(roomy, 0xA5, big);
    check(fn(a, roomy, (size_t)need - 1) == need); /* one short: the size, nothing written */
    for (size_t i = 0; i < big; i++)
        check((unsigned char)roomy[i] == 0xA5);
    free(roomy);
    return exact;
}

typedef struct {
    const char *event, *id, *data;
    size_t elen, idlen, dlen;
    int64_t retry;
} ev_args;

static int64_t fmt_event(const void *p, char *dst, size_t cap)
{
    const ev_args *a = p;
    return nsv_sse_format(a->event, a->elen, a->id, a->idlen, a->data, a->dlen, a->retry, dst, cap);
}

static int64_t fmt_comment(const void *p, char *dst, size_t cap)
{
    const ev_args *a = p;
    return nsv_sse_comment(a->data, a->dlen, dst, cap);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 11 || size > 1 << 16)
        return 0;
    unsigned flags = data[0];
    uint64_t r = 0;
    for (int i = 0; i < 8; i++)
        r |= (uint64_t)data[3 + i] << (8 * i);
    const uint8_t *rest = data + 11;
    size_t n = size - 11;
    size_t elen = n ? data[1] % (n + 1) : 0;
    size_t idlen = n - elen ? data[2] % (n - elen + 1) : 0;
    const uint8_t *ev = rest, *id = rest + elen, *dt = rest + elen + idlen;
    size_t dlen = n - elen - idlen;
    char *norm = malloc(dlen + 1);
    check(norm != NULL);
    size_t nlen = normalise(dt, dlen, norm);
    ev_args a = {(const char *)ev, (flags & 2) ? (const char *)id : NULL, (flags & 4) ? (const char *)dt : NULL,
                 elen, (flags & 2) ? idlen : 0, (flags & 4) ? dlen : 0,
                 (flags & 8) ? (int64_t)(r & 0x7FFFFFFFFFFFFFFFull) : -1 - (int64_t)(r & 0xFFFF)};
    if (flags & 16) { /* the name as NULL: only valid with length 0 */
        a.event = NULL;
        a.elen = 0;
    }
    if (flags & 32) { /* a NULL pointer with a length: refused */
        a.data = NULL;
        a.dlen = dlen + 1;
        int64_t got = (flags & 1) ? fmt_comment(&a, NULL, 0) : fmt_event(&a, NULL, 0);
        check(got == NSV_EINVAL);
        free(norm);
        return 0;
    }
    int64_t len;
    parser ps;
    memset(&ps, 0, sizeof ps);
    ps.retry = -1;
    if (flags & 1) {
        char *out = run(fmt_comment, &a, &len);
        check(out != NULL);
        check(parse(&ps, out, (size_t)len));
        check(ps.events == 0 && ps.retry == -1 && ps.last_id.n == 0 && ps.type.n == 0 && ps.data.n == 0);
        /* the text comes back, one LF after each of its lines */
        size_t tl = a.data ? nlen : 0;
        check(ps.comments.n == tl + 1 && (tl == 0 || !memcmp(ps.comments.p, norm, tl)));
        free(out);
        parser_free(&ps);
        free(norm);
        return 0;
    }
    int with_data = a.data != NULL || a.elen > 0;
    int refuse = has_any(ev, a.elen, 0) || (a.id && has_any(id, a.idlen, 1)) ||
                 (!with_data && !a.id && a.retry < 0);
    char *out = run(fmt_event, &a, &len);
    check(refuse ? (out == NULL && len == NSV_EINVAL) : out != NULL);
    if (!out) {
        parser_free(&ps);
        free(norm);
        return 0;
    }
    check(parse(&ps, out, (size_t)len));
    check(ps.comments.n == 0 && ps.type.n == 0 && ps.data.n == 0); /* the block ends dispatched */
    check(ps.retry == (a.retry >= 0 ? a.retry : -1));
    check(ps.last_id.n == a.idlen && (a.idlen == 0 || !memcmp(ps.last_id.p, a.id, a.idlen)));
    if (!with_data) {
        check(ps.events == 0);
    } else {
        check(ps.events == 1);
        if (a.elen)
            check(ps.ev_type.n == a.elen && !memcmp(ps.ev_type.p, a.event, a.elen));
        else
            check(ps.ev_type.n == 7 && !memcmp(ps.ev_type.p, "message", 7));
        size_t want = a.data ? nlen : 0;
        check(ps.ev_data.n == want && (want == 0 || !memcmp(ps.ev_data.p, norm, want)));
        check(ps.ev_id.n == a.idlen && (a.idlen == 0 || !memcmp(ps.ev_id.p, a.id, a.idlen)));
    }
    free(out);
    parser_free(&ps);
    free(norm);
    return 0;
}
