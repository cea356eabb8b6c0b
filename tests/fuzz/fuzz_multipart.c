/* fuzz_multipart.c - libFuzzer target for the streaming multipart parser
 * and nsv_multipart_boundary. The first byte picks the boundary and a
 * seed; the rest is the body. Invariants:
 * - fed whole, byte by byte, or in random pieces with 2-5 records and tiny
 *   arenas, the parser reports the same records (data merged per part) and
 *   the same result and error text;
 * - every PART's headers and DATA's bytes are at their input_off in the
 *   body, and for a body that ended well, the opening boundary, the header
 *   blocks, the data and the delimiters rebuild the body up to END;
 * - the arena and records are never written past the sizes given. */
#include "internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(int cond)
{
    if (!cond)
        abort();
}

static const char *const boundaries[] = {"b", "XyZ", "--", "a b", "----WebKitFormBoundary7MA4YWxkTrZu0gW", "'()+_,-./:=?"};

typedef struct out {
    char *buf;
    size_t len, cap;
    int data_open;
} out;

static void put(out *o, const void *p, size_t n)
{
    if (o->len + n > o->cap) {
        o->cap = (o->len + n) * 2 + 64;
        o->buf = realloc(o->buf, o->cap);
        check(o->buf != NULL);
    }
    if (n)
        memcpy(o->buf + o->len, p, n);
    o->len += n;
}

static void putu(out *o, uint64_t v)
{
    put(o, &v, sizeof v);
}

typedef struct ctx {
    const char *body;
    size_t len;
    const char *b;
    size_t blen;
    out tr;      /* the transcript */
    out rebuilt; /* the body rebuilt from the records */
    uint64_t next_data; /* input_off the next DATA of the part must have */
} ctx;

static void take(ctx *c, const nsv_multipart_event *e, const char *arena, size_t cap)
{
    check(e->type >= NSV_MP_PART && e->type <= NSV_MP_END);
    if (e->type != NSV_MP_DATA && c->tr.data_open) {
        put(&c->tr, "]", 1);
        c->tr.data_open = 0;
    }
    out *r = &c->rebuilt;
    switch (e->type) {
    case NSV_MP_PART:
        check(e->headers_off <= cap && e->headers_len <= cap - e->headers_off);
        check(e->name_off <= cap && e->name_len <= cap - e->name_off);
        check(e->filename_off <= cap && e->filename_len <= cap - e->filename_off);
        check(e->content_type_off <= cap && e->content_type_len <= cap - e->content_type_off);
        check((e->flags & ~7u) == 0);
        check(e->filename_len == 0 || (e->flags & NSV_MPF_FILENAME));
        check(e->input_off + e->headers_len <= c->len);
        check(memcmp(c->body + e->input_off, arena + e->headers_off, e->headers_len) == 0);
        check(e->input_off == r->len);
        put(r, arena + e->headers_off, e->headers_len);
        put(r, "\r\n", 2);
        c->next_data = r->len;
        put(&c->tr, "P", 1);
        putu(&c->tr, e->part);
        putu(&c->tr, e->flags);
        putu(&c->tr, e->nheaders);
        putu(&c->tr, e->input_off);
        putu(&c->tr, e->name_len);
        put(&c->tr, arena + e->name_off, e->name_len);
        putu(&c->tr, e->filename_len);
        put(&c->tr, arena + e->filename_off, e->filename_len);
        putu(&c->tr, e->content_type_len);
        put(&c->tr, arena + e->content_type_off, e->content_type_len);
        break;
    case NSV_MP_DATA:
        check(e->data_len > 0);
        check(e->data_off <= cap && e->data_len <= cap - e->data_off);
        check(e->input_off == c->next_data && e->input_off == r->len);
        check(e->input_off + e->data_len <= c->len);
        check(memcmp(c->body + e->input_off, arena + e->data_off, e->data_len) == 0);
        put(r, arena + e->data_off, e->data_len);
        c->next_data += e->data_len;
        if (!c->tr.data_open) {
            put(&c->tr, "D[", 2);
            c->tr.data_open = 1;
        }
        put(&c->tr, arena + e->data_off, e->data_len);
        break;
    case NSV_MP_PART_END:
        check(e->input_off == r->len);
        put(r, "\r\n--", 4);
        put(r, c->b, c->blen);
        put(&c->tr, "E", 1);
        putu(&c->tr, e->part);
        putu(&c->tr, e->input_off);
        break;
    case NSV_MP_END:
        put(r, "--", 2);
        check(e->input_off == r->len);
        put(&c->tr, "Z", 1);
        putu(&c->tr, e->input_off);
        break;
    }
}

/* mode 0: whole; 1: byte by byte; 2: random pieces and tiny batches */
static void run(ctx *c, int mode, unsigned seed)
{
    c->tr.len = c->rebuilt.len = 0;
    c->tr.data_open = 0;
    nsv_multipart *mp = nsv_multipart_new(c->b, c->blen, 200, 20);
    check(mp != NULL);
    int max = mode == 2 ? 2 + (int)(seed % 4) : 16;
    size_t cap = mode == 2 ? seed % 7 : 4096;
    nsv_multipart_event *evs = malloc(sizeof *evs * (size_t)max);
    char *arena = malloc(cap ? cap : 1);
    check(evs && arena);
    /* "--" boundary CRLF opens; it is rebuilt here once the first PART or END comes */
    int rc = 0, opened = 0;
    size_t pos = 0;
    while (pos < c->len && rc == 0) {
        size_t n = c->len - pos;
        if (mode == 1)
            n = 1;
        else if (mode == 2) {
            seed = seed * 1103515245u + 12345u;
            n = 1 + (seed >> 8) % 23;
            if (n > c->len - pos)
                n = c->len - pos;
        }
        size_t off = 0;
        while (off < n) {
            size_t used = 0;
            int r = nsv_multipart_feed(mp, c->body + pos + off, n - off, evs, max, arena, cap, &used);
            if (r == NSV_ENOBUFS) {
                check(used == 0);
                int64_t need = nsv_multipart_need(mp);
                check(need > (int64_t)cap && need <= 2 * 200 + 80);
                cap = (size_t)need;
                arena = realloc(arena, cap);
                check(arena != NULL);
                continue;
            }
            if (r < 0) {
                check(r == NSV_EPARSE);
                rc = r;
                break;
            }
            check(r <= max && used <= n - off);
            check(r > 0 || used > 0);
            for (int i = 0; i < r; i++) {
                if (!opened && (evs[i].type == NSV_MP_PART || evs[i].type == NSV_MP_END)) {
                    put(&c->rebuilt, "--", 2);
                    put(&c->rebuilt, c->b, c->blen);
                    opened = 1;
                }
                if (evs[i].type == NSV_MP_PART)
                    put(&c->rebuilt, "\r\n", 2);
                take(c, &evs[i], arena, cap);
            }
            off += used;
        }
        pos += n;
    }
    if (rc == 0)
        rc = nsv_multipart_finish(mp);
    if (c->tr.data_open)
        put(&c->tr, "]", 1);
    put(&c->tr, "R", 1);
    putu(&c->tr, (uint64_t)(int64_t)rc);
    if (rc) {
        const char *d = nsv_last_error_detail(NULL);
        put(&c->tr, d, strlen(d));
    } else {
        /* the body up to END is rebuilt exactly */
        check(c->rebuilt.len <= c->len);
        check(memcmp(c->rebuilt.buf, c->body, c->rebuilt.len) == 0);
    }
    nsv_multipart_free(mp);
    free(evs);
    free(arena);
}

/* After an error the records of the failing call are lost, so only the
 * result is compared then. */
static void same(const out *a, const out *b, int error)
{
    if (!error) {
        check(a->len == b->len && memcmp(a->buf, b->buf, a->len) == 0);
        return;
    }
    /* the result word and the detail end both transcripts */
    size_t ta = a->len, tb = b->len;
    const char *da = nsv_last_error_detail(NULL);
    size_t dl = strlen(da) + 9;
    check(ta >= dl && tb >= dl);
    check(memcmp(a->buf + ta - dl, b->buf + tb - dl, dl) == 0);
}

static void fuzz_boundary(const char *s, size_t n)
{
    uint32_t off = 7, len = 7;
    int r = nsv_multipart_boundary(s, n, &off, &len);
    check(r == 0 || r == NSV_ENOTFOUND || r == NSV_EPARSE);
    if (r)
        return;
    check(len >= 1 && len <= 70 && off <= n && len <= n - off);
    nsv_multipart *mp = nsv_multipart_new(s + off, len, 0, 0);
    check(mp != NULL);
    nsv_multipart_free(mp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t n = size - 1;
    char *s = malloc(n ? n : 1);
    check(s != NULL);
    if (n)
        memcpy(s, data + 1, n);
    unsigned sel = data[0];
    if (sel == 0xff) {
        fuzz_boundary(s, n);
        free(s);
        return 0;
    }
    ctx c = {0};
    c.body = s;
    c.len = n;
    c.b = boundaries[sel % (sizeof boundaries / sizeof boundaries[0])];
    c.blen = strlen(c.b);
    out whole = {0};
    run(&c, 0, 0);
    /* success: the transcript ends in 'R' and a zero result */
    int error = !(c.tr.len >= 9 && c.tr.buf[c.tr.len - 9] == 'R' && memcmp(c.tr.buf + c.tr.len - 8, "\0\0\0\0\0\0\0\0", 8) == 0);
    put(&whole, c.tr.buf, c.tr.len);
    run(&c, 1, 0);
    same(&whole, &c.tr, error);
    run(&c, 2, sel * 7919u + 1);
    same(&whole, &c.tr, error);
    free(whole.buf);
    free(c.tr.buf);
    free(c.rebuilt.buf);
    free(s);
    return 0;
}
