/* gzip.c - gzip of replies: request and media-type checks (always built),
 * deflate over zlib when the build has it (NSV_WITH_ZLIB).
 *
 * Complete replies share one deflate stream per loop, reset for each reply
 * (deflateReset keeps its window and hash memory, so nothing is allocated per
 * request). A streamed reply needs its own stream for its whole life: it is
 * allocated when the stream starts compressed and freed at its end or when
 * the connection goes. */
#include "gzip.h"
#include "http.h"
#include <string.h>
#ifdef NSV_WITH_ZLIB
#include <zlib.h>
#endif

static const char DEFAULT_TYPES[] = "text/html,text/css,text/plain,text/javascript,application/javascript,"
                                    "application/json,application/xml,image/svg+xml";
#define TYPES_MAX 4096

static int is_tchar(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static int is_ows(char ch) { return ch == ' ' || ch == '\t'; }

int nsv__gzip_set_types(nsv_server *s, const char *v, size_t len)
{
    if (len > TYPES_MAX)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_set_str(gzip_types): %zu bytes; at most %d", len, TYPES_MAX);
    char *list = NULL;
    if (len) {
        list = nsv__malloc(&s->alloc, len + 1);
        if (!list)
            return nsv__set_detail(s, NSV_ENOMEM, "nsv_set_str(gzip_types): no memory");
        size_t o = 0;
        for (size_t i = 0; i <= len;) {
            size_t e = i;
            while (e < len && v[e] != ',')
                e++;
            size_t a = i, b = e;
            while (a < b && is_ows(v[a]))
                a++;
            const char *semi = memchr(v + a, ';', b - a); /* parameters do not take part */
            if (semi)
                b = (size_t)(semi - v);
            while (b > a && is_ows(v[b - 1]))
                b--;
            if (b > a) {
                size_t k = a;
                while (k < b && is_tchar((unsigned char)v[k]))
                    k++;
                size_t slash = k;
                if (k < b && v[k] == '/')
                    for (k++; k < b && is_tchar((unsigned char)v[k]);)
                        k++;
                if (slash == a || slash == b || v[slash] != '/' || k != b) {
                    nsv__free(&s->alloc, list);
                    return nsv__set_detail(s, NSV_EINVAL, "nsv_set_str(gzip_types): \"%.*s\" is not a media "
                                           "type (type/subtype, or type/ for all of a type)",
                                           (int)(b - a > 80 ? 80 : b - a), v + a);
                }
                if (o)
                    list[o++] = ',';
                for (k = a; k < b; k++)
                    list[o++] = (char)(v[k] >= 'A' && v[k] <= 'Z' ? v[k] + 32 : v[k]);
            }
            i = e + 1;
        }
        list[o] = 0;
    }
    nsv__free(&s->alloc, s->gzip_types);
    s->gzip_types = list;
    return NSV_OK;
}

void nsv__gzip_server_free(nsv_server *s)
{
    nsv__free(&s->alloc, s->gzip_types);
    s->gzip_types = NULL;
}

int nsv__gzip_type_ok(const nsv_server *s, const char *ct, size_t len)
{
    while (len && is_ows(*ct))
        ct++, len--;
    size_t m = 0;
    while (m < len && ct[m] != ';' && !is_ows(ct[m]))
        m++;
    const char *e = s->gzip_types ? s->gzip_types : DEFAULT_TYPES;
    while (*e) {
        const char *end = strchr(e, ',');
        size_t el = end ? (size_t)(end - e) : strlen(e);
        if (e[el - 1] == '/' ? (m > el && nsv__strncaseeq(ct, e, el)) : (m == el && nsv__strncaseeq(ct, e, el)))
            return 1;
        e += el + (end != NULL);
    }
    return 0;
}

/* RFC 9110 12.4.2 qvalue as thousandths, or -1 when malformed. */
static int qvalue(const char *v, size_t n)
{
    if (n == 0 || (v[0] != '0' && v[0] != '1'))
        return -1;
    int q = (v[0] - '0') * 1000;
    if (n == 1)
        return q;
    if (v[1] != '.' || n > 5)
        return -1;
    int scale = 100;
    for (size_t i = 2; i < n; i++, scale /= 10) {
        if (v[i] < '0' || v[i] > '9' || (q && v[i] != '0'))
            return -1;
        q += (v[i] - '0') * scale;
    }
    return q;
}

/* One Accept-Encoding value: update the weights of gzip and "*". */
static void accept_list(const char *v, size_t n, int *gz, int *star)
{
    size_t i = 0;
    while (i < n) {
        size_t e = i;
        while (e < n && v[e] != ',')
            e++;
        size_t a = i;
        while (a < e && is_ows(v[a]))
            a++;
        size_t t = a;
        while (t < e && is_tchar((unsigned char)v[t]))
            t++;
        int w = 1000;
        for (size_t p = t; p < e && w >= 0;) { /* parameters: only the weight counts */
            while (p < e && is_ows(v[p]))
                p++;
            if (p == e)
                break;
            if (v[p] != ';') {
                w = -1;
                break;
            }
            p++;
            while (p < e && is_ows(v[p]))
                p++;
            size_t pe = p;
            while (pe < e && v[pe] != ';')
                pe++;
            size_t vend = pe;
            while (vend > p && is_ows(v[vend - 1]))
                vend--;
            if (vend - p >= 2 && (v[p] == 'q' || v[p] == 'Q') && v[p + 1] == '=')
                w = qvalue(v + p + 2, vend - p - 2);
            p = pe;
        }
        size_t tl = t - a;
        if (w >= 0) {
            if ((tl == 4 && nsv__strncaseeq(v + a, "gzip", 4)) || (tl == 6 && nsv__strncaseeq(v + a, "x-gzip", 6)))
                *gz = w > *gz ? w : *gz;
            else if (tl == 1 && v[a] == '*')
                *star = w > *star ? w : *star;
        }
        i = e + 1;
    }
}

int nsv__gzip_accepts(const nsv__hdr *hdrs, size_t n)
{
    int gz = -1, star = -1; /* -1: not named */
    for (size_t i = 0; i < n; i++)
        if (hdrs[i].name_len == 15 && nsv__strncaseeq(hdrs[i].name, "accept-encoding", 15))
            accept_list(hdrs[i].value, hdrs[i].value_len, &gz, &star);
    return gz >= 0 ? gz > 0 : star > 0;
}

#ifdef NSV_WITH_ZLIB

int nsv__gzip_available(void) { return 1; }

/* zlib's allocations go through the server's allocator. */
static voidpf z_alloc(voidpf opaque, uInt items, uInt size)
{
    return nsv__malloc((const nsv__alloc *)opaque, (size_t)items * size);
}

static void z_free(voidpf opaque, voidpf p) { nsv__free((const nsv__alloc *)opaque, p); }

/* windowBits 15 + 16: a gzip wrapper (RFC 1952) around raw deflate. */
static int z_init(nsv_server *s, z_stream *z, int level, int wbits, int memlevel)
{
    memset(z, 0, sizeof *z);
    z->zalloc = z_alloc;
    z->zfree = z_free;
    z->opaque = &s->alloc;
    return deflateInit2(z, level, Z_DEFLATED, wbits + 16, memlevel, Z_DEFAULT_STRATEGY) == Z_OK;
}

typedef struct gz_loop {
    z_stream z;
    int level;
} gz_loop;

size_t nsv__gzip_complete(nsv__loop *l, const char *in, size_t n, char *out, size_t cap)
{
    nsv_server *s = l->srv;
    if (n > 0xFFFFFFFFu || cap == 0)
        return 0;
    gz_loop *g = l->http->gz;
    if (g && g->level != (int)s->gzip_level) { /* the level changed (a running plain server) */
        deflateEnd(&g->z);
        nsv__free(&s->alloc, g);
        l->http->gz = g = NULL;
    }
    if (!g) {
        g = nsv__malloc(&s->alloc, sizeof *g);
        if (!g)
            return 0;
        if (!z_init(s, &g->z, (int)s->gzip_level, 15, 8)) {
            nsv__free(&s->alloc, g);
            return 0;
        }
        g->level = (int)s->gzip_level;
        l->http->gz = g;
    } else if (deflateReset(&g->z) != Z_OK) {
        return 0;
    }
    g->z.next_in = (Bytef *)(uintptr_t)in;
    g->z.avail_in = (uInt)n;
    g->z.next_out = (Bytef *)out;
    g->z.avail_out = (uInt)(cap > 0xFFFFFFFFu ? 0xFFFFFFFFu : cap);
    /* Z_FINISH with too little room stops with Z_OK or Z_BUF_ERROR: the
     * compressed body would not be smaller, so it is not sent. */
    if (deflate(&g->z, Z_FINISH) != Z_STREAM_END)
        return 0;
    return (size_t)g->z.total_out;
}

void nsv__gzip_loop_free(nsv__loop *l)
{
    gz_loop *g = l && l->http ? l->http->gz : NULL;
    if (!g)
        return;
    deflateEnd(&g->z);
    nsv__free(&l->srv->alloc, g);
    l->http->gz = NULL;
}

/* A stream's window and hash are smaller than the loop's (14 and 7: about
 * 128 KiB of zlib state instead of 256 KiB): a server may hold many event
 * streams open, and their chunks are small. */
int nsv__gzip_stream_start(nsv__loop *l, nsv__conn *c)
{
    nsv_server *s = l->srv;
    z_stream *z = nsv__malloc(&s->alloc, sizeof *z);
    if (!z)
        return NSV_ENOMEM;
    if (!z_init(s, z, (int)s->gzip_level, 14, 7)) {
        nsv__free(&s->alloc, z);
        return NSV_ENOMEM;
    }
    c->gz = z;
    return NSV_OK;
}

void nsv__gzip_stream_free(nsv__loop *l, nsv__conn *c)
{
    if (!c->gz)
        return;
    deflateEnd(c->gz);
    nsv__free(&l->srv->alloc, c->gz);
    c->gz = NULL;
}

static char *put_hex(char *p, size_t v)
{
    static const char hex[] = "0123456789abcdef";
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = hex[v & 15];
        v >>= 4;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

int nsv__gzip_stream_put(nsv__loop *l, nsv__conn *c, const char *data, size_t len, int finish)
{
    z_stream *z = c->gz;
    int framed = !c->http10;
    z->next_in = (Bytef *)(uintptr_t)data;
    z->avail_in = (uInt)len;
    /* deflateBound covers a whole member from its start; the flush at the end
     * of every call leaves at most a few bits behind, so the bound plus a
     * little is enough for one pass. The loop only guards that reasoning. */
    size_t room = (size_t)deflateBound(z, (uLong)len) + 32;
    for (int pass = 0; pass < 64; pass++) {
        int r = nsv__buf_reserve(l, &c->out, room + 24);
        if (r)
            return r;
        char *base = c->out.p + c->out.len;
        char *dst = base + (framed ? 20 : 0);
        z->next_out = (Bytef *)dst;
        z->avail_out = (uInt)room;
        int zr = deflate(z, finish ? Z_FINISH : Z_SYNC_FLUSH);
        if (zr == Z_STREAM_ERROR)
            return NSV_EINVAL;
        size_t got = room - z->avail_out;
        if (got) {
            char *p = base;
            if (framed) {
                p = put_hex(p, got);
                *p++ = '\r';
                *p++ = '\n';
                memmove(p, dst, got);
            }
            p += got;
            if (framed) {
                *p++ = '\r';
                *p++ = '\n';
            }
            c->out.len = (uint32_t)(p - c->out.p);
        }
        if (finish ? zr == Z_STREAM_END : (z->avail_in == 0 && z->avail_out != 0))
            return NSV_OK;
    }
    return NSV_EINVAL;
}

#else /* no zlib: the option cannot be turned on, so none of this runs */

int nsv__gzip_available(void) { return 0; }

size_t nsv__gzip_complete(nsv__loop *l, const char *in, size_t n, char *out, size_t cap)
{
    (void)l, (void)in, (void)n, (void)out, (void)cap;
    return 0;
}

void nsv__gzip_loop_free(nsv__loop *l) { (void)l; }

int nsv__gzip_stream_start(nsv__loop *l, nsv__conn *c)
{
    (void)l, (void)c;
    return NSV_ENOTSUP;
}

int nsv__gzip_stream_put(nsv__loop *l, nsv__conn *c, const char *data, size_t len, int finish)
{
    (void)l, (void)c, (void)data, (void)len, (void)finish;
    return NSV_ENOTSUP;
}

void nsv__gzip_stream_free(nsv__loop *l, nsv__conn *c) { (void)l, (void)c; }

#endif
