/* fuzz_resp_parse.c - libFuzzer target for the HTTP client's protocol core.
 *
 * The input is what a server sent on one connection. A client is simulated
 * over it: heads are parsed from a growing buffer, 1xx heads skipped,
 * bodies read as nsv__resp_body_kind frames them (chunked through
 * nsv__chunked_decode), and the next response read while the connection is
 * reusable. Bytes arrive in pieces: all at once, byte by byte, in fixed and
 * in input-derived random steps; the run aborts unless every feeding gives
 * the same trace (statuses, head lengths, framings, body bytes, the end and
 * the reason), and unless every head keeps the parser's contract (fields
 * inside the head, names tokens, values field-content, flags consistent).
 *
 * The same input also drives the request writer: cut into a method, a
 * target, a host and a header block, anything the writer accepts must be
 * read back by the server's request parser as the same request with the
 * same framing - the writer can never put two framings on the wire. */
#include "http/parse.h"
#include "http/req_write.h"
#include "http/resp_parse.h"
#include "nanosrv.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)          \
    do {                  \
        if (!(c))         \
            abort();      \
    } while (0)

#define MAXH 32
#define MAXR 8 /* heads per connection, 1xx included */

enum { END_EOF, END_HEAD_CUT, END_BODY_CUT, END_ERROR, END_CHUNK_ERROR, END_UPGRADE, END_CLOSE,
       END_NO_REUSE, END_LIMIT };

typedef struct trace {
    int n;
    int status[MAXR], head_len[MAXR], kind[MAXR];
    int end, err;
    const char *why;
    size_t why_at; /* absolute offset in the input */
    size_t pos;    /* input bytes the client used */
    size_t out_len;
} trace;

static int is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int is_value(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static void check_in(const char *p, size_t n, const char *buf, int got)
{
    CHECK(p >= buf && p + n <= buf + got);
}

/* The contract of a successful parse of buf[0..got). */
static void check_head(const nsv__response *r, const char *buf, int got, size_t maxh)
{
    CHECK(got >= 4 && memcmp(buf + got - 4, "\r\n\r\n", 4) == 0);
    CHECK(memcmp(buf, "HTTP/1.", 7) == 0);
    CHECK(r->status >= 100 && r->status <= 999);
    CHECK(r->minor_version == (buf[7] != '0'));
    check_in(r->reason, r->reason_len, buf, got);
    for (size_t i = 0; i < r->reason_len; i++)
        CHECK(is_value((unsigned char)r->reason[i]));
    CHECK(r->num_headers <= maxh);
    CHECK(r->why == NULL);
    CHECK((r->flags & ~255u) == 0);
    CHECK(r->content_length >= -1);
    unsigned f = r->flags;
    CHECK(!((f & NSV__RESP_CHUNKED) && (f & NSV__RESP_TE_OTHER)));
    if (f & (NSV__RESP_CHUNKED | NSV__RESP_TE_OTHER))
        CHECK(r->content_length == -1 && r->minor_version == 1);
    if (f & NSV__RESP_CL_TE)
        CHECK(f & (NSV__RESP_CHUNKED | NSV__RESP_TE_OTHER));
    if (f & NSV__RESP_KEEP_ALIVE)
        CHECK(!(f & (NSV__RESP_CL_TE | NSV__RESP_TE_OTHER | NSV__RESP_CONN_CLOSE)) &&
              (r->minor_version == 1 || (f & NSV__RESP_CONN_KEEPALIVE)));
    if (r->ws_accept)
        check_in(r->ws_accept, r->ws_accept_len, buf, got);
    for (size_t i = 0; i < r->num_headers; i++) {
        const nsv__hdr *h = &r->headers[i];
        check_in(h->name, h->name_len, buf, got);
        check_in(h->value, h->value_len, buf, got);
        CHECK(h->name_len > 0);
        for (size_t j = 0; j < h->name_len; j++)
            CHECK(is_tchar((unsigned char)h->name[j]));
        for (size_t j = 0; j < h->value_len; j++)
            CHECK(is_value((unsigned char)h->value[j]));
        if (h->value_len) {
            CHECK(h->value[0] != ' ' && h->value[0] != '\t');
            CHECK(h->value[h->value_len - 1] != ' ' && h->value[h->value_len - 1] != '\t');
        }
    }
}

/* How bytes arrive: at most `step` a time (0: all), or PRNG-chosen cuts. */
typedef struct feeder {
    size_t avail, size, step;
    uint32_t seed;
    int random;
} feeder;

static int deliver(feeder *f)
{
    if (f->avail == f->size)
        return 0;
    size_t piece = f->size - f->avail;
    if (f->random) {
        f->seed = f->seed * 1103515245u + 12345u;
        size_t cut = (f->seed >> 16) % 97 + 1;
        piece = piece < cut ? piece : cut;
    } else if (f->step && piece > f->step) {
        piece = f->step;
    }
    f->avail += piece;
    return 1;
}

static void simulate(const char *buf, size_t size, const char *method, feeder *f, trace *t, char *out)
{
    nsv__hdr h[MAXH];
    nsv__response r;
    memset(t, 0, sizeof *t);
    deliver(f);
    for (;;) {
        if (t->n == MAXR) {
            t->end = END_LIMIT;
            break;
        }
        int got;
        for (;;) {
            got = nsv__parse_response(buf + t->pos, f->avail - t->pos, &r, h, MAXH);
            if (got != 0 || !deliver(f))
                break;
        }
        if (got == 0) {
            t->end = t->pos == size ? END_EOF : END_HEAD_CUT;
            break;
        }
        if (got < 0) {
            CHECK(got == NSV_EPARSE || got == NSV_ETOOBIG);
            CHECK(r.why != NULL && r.why_at < f->avail - t->pos);
            t->end = END_ERROR;
            t->err = got;
            t->why = r.why;
            t->why_at = t->pos + r.why_at;
            break;
        }
        CHECK((size_t)got <= f->avail - t->pos);
        check_head(&r, buf + t->pos, got, MAXH);
        int kind = nsv__resp_body_kind(&r, method, strlen(method));
        CHECK(kind >= NSV__BODY_NONE && kind <= NSV__BODY_UPGRADE);
        if (kind == NSV__BODY_LENGTH)
            CHECK(r.content_length >= 0);
        t->status[t->n] = r.status;
        t->head_len[t->n] = got;
        t->kind[t->n] = kind;
        t->n++;
        t->pos += (size_t)got;
        if (kind == NSV__BODY_INTERIM)
            continue;
        if (kind == NSV__BODY_UPGRADE) {
            t->end = END_UPGRADE;
            break;
        }
        if (kind == NSV__BODY_LENGTH) {
            uint64_t left = (uint64_t)r.content_length;
            while (left) {
                if (t->pos == f->avail && !deliver(f))
                    break;
                size_t take = f->avail - t->pos;
                if (take > left)
                    take = (size_t)left;
                memcpy(out + t->out_len, buf + t->pos, take);
                t->out_len += take;
                t->pos += take;
                left -= take;
            }
            if (left) {
                t->end = END_BODY_CUT;
                break;
            }
        } else if (kind == NSV__BODY_CHUNKED) {
            nsv__chunked d;
            memset(&d, 0, sizeof d);
            int cr = 0;
            for (;;) {
                if (t->pos == f->avail && !deliver(f))
                    break;
                size_t c = (size_t)-1, p = (size_t)-1, piece = f->avail - t->pos;
                cr = nsv__chunked_decode(&d, out + t->out_len, buf + t->pos, piece, &c, &p);
                CHECK(c <= piece && p <= c);
                t->pos += c;
                t->out_len += p;
                if (cr != 0)
                    break;
                CHECK(c == piece);
            }
            if (cr < 0) {
                t->end = END_CHUNK_ERROR;
                break;
            }
            if (cr == 0) {
                t->end = END_BODY_CUT;
                break;
            }
        } else if (kind == NSV__BODY_CLOSE) {
            while (deliver(f))
                ;
            memcpy(out + t->out_len, buf + t->pos, size - t->pos);
            t->out_len += size - t->pos;
            t->pos = size;
            t->end = END_CLOSE;
            break;
        }
        if (!nsv__resp_reusable(&r, kind)) {
            t->end = END_NO_REUSE;
            break;
        }
    }
    CHECK(t->pos <= size && t->out_len <= t->pos);
}

static int same(const trace *a, const char *oa, const trace *b, const char *ob)
{
    if (a->n != b->n || a->end != b->end || a->err != b->err || a->why != b->why ||
        a->why_at != b->why_at || a->pos != b->pos || a->out_len != b->out_len)
        return 0;
    for (int i = 0; i < a->n; i++)
        if (a->status[i] != b->status[i] || a->head_len[i] != b->head_len[i] || a->kind[i] != b->kind[i])
            return 0;
    return memcmp(oa, ob, a->out_len) == 0;
}

/* A tighter header limit may only turn a head into NSV_ETOOBIG. */
static void check_limits(const char *buf, size_t size)
{
    nsv__hdr big[MAXH], small[2];
    nsv__response rb, rs;
    int gb = nsv__parse_response(buf, size, &rb, big, MAXH);
    int gs = nsv__parse_response(buf, size, &rs, small, 2);
    if (gb > 0 && rb.num_headers <= 2)
        CHECK(gs == gb && rs.flags == rb.flags && rs.content_length == rb.content_length);
    else if (gb > 0)
        CHECK(gs == NSV_ETOOBIG);
    if (gs > 0)
        CHECK(gb == gs);
    if (gb == NSV_EPARSE && gs == NSV_EPARSE)
        CHECK(rs.why == rb.why && rs.why_at == rb.why_at);
}

/* ---- request writer ------------------------------------------------------ */

static void check_writer(const char *buf, size_t size, uint32_t hash)
{
    if (size < 3)
        return;
    /* Cut points from the input itself, so the fuzzer steers them. */
    size_t a = (unsigned char)buf[0] % 16, b = a + (unsigned char)buf[1] % 64,
           c = b + (unsigned char)buf[2] % 64;
    const char *rest = buf + 3;
    size_t n = size - 3;
    if (c > n)
        return;
    static const int64_t lens[] = { 0, 1, 5, -1, 1000, INT64_MAX, -2 };
    int64_t body_len = lens[hash % 7];
    unsigned flags = (hash >> 8) & 3;
    static char out[1 << 17];
    const char *why = NULL;
    int w = nsv__write_request(out, sizeof out, rest, a, rest + a, b - a, rest + b, c - b, rest + c, n - c,
                               body_len, flags, &why);
    CHECK(w > 0 || w == NSV_EINVAL || w == NSV_ETOOBIG);
    if (w <= 0) {
        CHECK(why != NULL);
        return;
    }
    int need = nsv__write_request(NULL, 0, rest, a, rest + a, b - a, rest + b, c - b, rest + c, n - c,
                                  body_len, flags, NULL);
    CHECK(need == w);
    if ((size_t)w > sizeof out)
        return;
    nsv__hdr h[64];
    nsv__request q;
    int p = nsv__http_parse_request(out, (size_t)w, &q, h, 64, sizeof out);
    if (a == 7 && memcmp(rest, "CONNECT", 7) == 0) {
        CHECK(p == -400); /* authority-form: the server refuses it */
        return;
    }
    /* Expect other than 100-continue and too many lines are the server's
     * own limits, not framing. */
    if (p == -417 || p == -431)
        return;
    CHECK(p == w);
    CHECK(q.method_len == a && memcmp(q.method, rest, a) == 0);
    CHECK(q.target_len == b - a && memcmp(q.target, rest + a, b - a) == 0);
    CHECK(q.host != NULL);
    CHECK(!!(q.flags & NSV__RF_CHUNKED) == (body_len == NSV__BODY_CHUNKED_LEN));
    if (body_len > 0)
        CHECK(q.content_length == body_len);
    else if (body_len == NSV__BODY_CHUNKED_LEN)
        CHECK(q.content_length == -1);
    else
        CHECK(q.content_length == 0 || q.content_length == -1);
    CHECK(!!(q.flags & NSV__RF_CONN_CLOSE) == !!(flags & NSV__WR_CLOSE));
    CHECK(!!(q.flags & NSV__RF_CONN_UPGRADE) == !!(flags & NSV__WR_UPGRADE));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    uint32_t hash = 2166136261u;
    for (size_t i = 0; i < size; i++)
        hash = (hash ^ data[i]) * 16777619u;
    char *o1 = malloc(size + 1), *o2 = malloc(size + 1);
    static const char *const methods[] = { "GET", "HEAD", "CONNECT" };
    for (size_t m = 0; m < 3; m++) {
        trace one, other;
        feeder f = { 0, size, 0, hash, 0 };
        simulate(buf, size, methods[m], &f, &one, o1);
        const size_t steps[] = { 1, 7, 0 };
        for (size_t i = 0; i < 3; i++) {
            if (steps[i] == 1 && size > 512)
                continue; /* byte by byte re-parses the head each time: slow on big inputs */
            feeder g = { 0, size, steps[i], hash, steps[i] == 0 };
            simulate(buf, size, methods[m], &g, &other, o2);
            CHECK(same(&one, o1, &other, o2));
        }
    }
    check_limits(buf, size);
    check_writer(buf, size, hash);
    free(o1);
    free(o2);
    return 0;
}
