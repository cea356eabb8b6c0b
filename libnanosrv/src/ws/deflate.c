/* deflate.c - permessage-deflate (see deflate.h): negotiation, and the
 * per-message streams over zlib when the build has it. */
#include "deflate.h"
#include <string.h>
#ifdef NSV_WITH_ZLIB
#include <zlib.h>
#endif

/* ---- negotiation (RFC 7692 5, 7.1) ---- */

static int is_tchar(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static void skip_ows(const char *v, size_t n, size_t *i)
{
    while (*i < n && (v[*i] == ' ' || v[*i] == '\t'))
        (*i)++;
}

/* A token at *i: its length (0 if none). */
static size_t token(const char *v, size_t n, size_t *i)
{
    size_t s = *i;
    while (*i < n && is_tchar((unsigned char)v[*i]))
        (*i)++;
    return *i - s;
}

static int eq(const char *a, size_t n, const char *lit)
{
    size_t k = strlen(lit);
    if (n != k)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = a[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c + 32);
        if (c != lit[i])
            return 0;
    }
    return 1;
}

/* "8".."15" with no leading zero (RFC 7692 7.1.2.1): the number, else 0. */
static int bits_value(const char *p, size_t n)
{
    if (n == 1 && p[0] >= '8' && p[0] <= '9')
        return p[0] - '0';
    if (n == 2 && p[0] == '1' && p[1] >= '0' && p[1] <= '5')
        return 10 + p[1] - '0';
    return 0;
}

/* A parameter value: a token or a quoted string (whose unescaped content
 * must itself be a token, RFC 6455 9.1), copied to val. Returns its length,
 * or -1 for a syntax error. */
static long param_value(const char *v, size_t n, size_t *i, char *val, size_t cap)
{
    if (*i < n && v[*i] == '"') {
        size_t k = 0;
        (*i)++;
        while (*i < n && v[*i] != '"') {
            if (v[*i] == '\\' && ++*i >= n)
                return -1;
            if (k < cap)
                val[k] = v[*i];
            k++;
            (*i)++;
        }
        if (*i >= n)
            return -1; /* unterminated */
        (*i)++;
        for (size_t j = 0; j < k && j < cap; j++)
            if (!is_tchar((unsigned char)val[j]))
                return -1;
        return k ? (long)k : -1;
    }
    size_t s = *i, k = token(v, n, i);
    if (!k)
        return -1;
    memcpy(val, v + s, k < cap ? k : cap);
    return (long)k;
}

int nsv__pmd_negotiate(const char *v, size_t n, int max_bits, nsv__pmd_cfg *cfg)
{
    size_t i = 0;
    for (;;) {
        skip_ows(v, n, &i);
        while (i < n && v[i] == ',') { /* empty list elements (RFC 7230 7) */
            i++;
            skip_ows(v, n, &i);
        }
        if (i >= n)
            return 0;
        size_t ns = i, nl = token(v, n, &i);
        if (!nl)
            return 0;
        int ours = eq(v + ns, nl, "permessage-deflate");
        int good = ours;
        int seen_snct = 0, seen_cnct = 0, smwb = 0, cmwb = 0, has_smwb = 0, has_cmwb = 0;
        for (;;) {
            skip_ows(v, n, &i);
            if (i >= n || v[i] == ',')
                break;
            if (v[i] != ';')
                return 0;
            i++;
            skip_ows(v, n, &i);
            size_t ps = i, pl = token(v, n, &i);
            if (!pl)
                return 0;
            skip_ows(v, n, &i);
            char val[8];
            long vl = -2; /* -2: no value */
            if (i < n && v[i] == '=') {
                i++;
                skip_ows(v, n, &i);
                vl = param_value(v, n, &i, val, sizeof val);
                if (vl < 0)
                    return 0;
            }
            if (!ours)
                continue;
            const char *pn = v + ps;
            if (eq(pn, pl, "server_no_context_takeover")) {
                good &= !seen_snct++ && vl == -2;
            } else if (eq(pn, pl, "client_no_context_takeover")) {
                good &= !seen_cnct++ && vl == -2;
            } else if (eq(pn, pl, "server_max_window_bits")) {
                smwb = vl > 0 && (size_t)vl <= sizeof val ? bits_value(val, (size_t)vl) : 0;
                good &= !has_smwb++ && smwb != 0;
            } else if (eq(pn, pl, "client_max_window_bits")) {
                cmwb = vl == -2 ? 15 : (size_t)vl <= sizeof val ? bits_value(val, (size_t)vl) : 0;
                good &= !has_cmwb++ && cmwb != 0;
            } else {
                good = 0; /* unknown parameter */
            }
        }
        if (!good)
            continue;
        nsv__pmd_cfg r = {0};
        r.on = 1;
        r.server_nct = (uint8_t)seen_snct;
        r.client_nct = (uint8_t)seen_cnct;
        r.smwb = (uint8_t)has_smwb;
        int sb = has_smwb && smwb < max_bits ? smwb : max_bits;
        r.server_bits = (uint8_t)sb;
        r.cmwb = (uint8_t)has_cmwb;
        int cb = 15;
        if (has_cmwb) {
            cb = cmwb < max_bits ? cmwb : max_bits;
            if (cb == 8 && cmwb != 8)
                cb = 9; /* our choice: one a zlib client can compress with */
        }
        r.client_bits = (uint8_t)cb;
        *cfg = r;
        return 1;
    }
}

size_t nsv__pmd_answer(const nsv__pmd_cfg *cfg, char *out)
{
    char *p = out;
    static const char head[] = "Sec-WebSocket-Extensions: permessage-deflate";
    memcpy(p, head, sizeof head - 1);
    p += sizeof head - 1;
    if (cfg->server_nct) {
        memcpy(p, "; server_no_context_takeover", 28);
        p += 28;
    }
    if (cfg->client_nct) {
        memcpy(p, "; client_no_context_takeover", 28);
        p += 28;
    }
    if (cfg->smwb) {
        memcpy(p, "; server_max_window_bits=", 25);
        p += 25;
        if (cfg->server_bits >= 10)
            *p++ = '1';
        *p++ = (char)('0' + cfg->server_bits % 10);
    }
    if (cfg->cmwb) {
        memcpy(p, "; client_max_window_bits=", 25);
        p += 25;
        if (cfg->client_bits >= 10)
            *p++ = '1';
        *p++ = (char)('0' + cfg->client_bits % 10);
    }
    memcpy(p, "\r\n", 2);
    p += 2;
    return (size_t)(p - out);
}

uint16_t nsv__pmd_pack(const nsv__pmd_cfg *c)
{
    if (!c->on)
        return 0;
    return (uint16_t)(1 | c->server_nct << 1 | c->client_nct << 2 | c->smwb << 3 | c->cmwb << 4 |
                      (c->server_bits & 15) << 5 | (c->client_bits & 15) << 9);
}

void nsv__pmd_unpack(uint16_t v, nsv__pmd_cfg *c)
{
    c->on = v & 1;
    c->server_nct = (v >> 1) & 1;
    c->client_nct = (v >> 2) & 1;
    c->smwb = (v >> 3) & 1;
    c->cmwb = (v >> 4) & 1;
    c->server_bits = (v >> 5) & 15;
    c->client_bits = (v >> 9) & 15;
}

size_t nsv__pmd_bound(size_t n)
{
    /* Stored blocks cost 5 bytes per 64 KiB at worst; the sync flush and
     * the bits of the last block a few more. n / 8 leaves ample room. */
    return n + n / 8 + 64;
}

/* ---- streams ---- */

#ifdef NSV_WITH_ZLIB

struct nsv__pmd {
    const nsv__alloc *a;
    nsv__pmd_cfg cfg;
    z_stream *def, *inf;
    uint64_t got;       /* inflated bytes of the current message */
};

int nsv__pmd_available(void) { return 1; }

static voidpf z_alloc(voidpf opaque, uInt items, uInt size)
{
    return nsv__malloc((const nsv__alloc *)opaque, (size_t)items * size);
}

static void z_free(voidpf opaque, voidpf p) { nsv__free((const nsv__alloc *)opaque, p); }

nsv__pmd *nsv__pmd_new(const nsv__alloc *a, const nsv__pmd_cfg *cfg)
{
    nsv__pmd *p = nsv__calloc(a, sizeof *p);
    if (p) {
        p->a = a;
        p->cfg = *cfg;
    }
    return p;
}

void nsv__pmd_free(nsv__pmd *p)
{
    if (!p)
        return;
    if (p->def) {
        deflateEnd(p->def);
        nsv__free(p->a, p->def);
    }
    if (p->inf) {
        inflateEnd(p->inf);
        nsv__free(p->a, p->inf);
    }
    nsv__free(p->a, p);
}

int nsv__pmd_can_send(const nsv__pmd *p) { return p && p->cfg.server_bits >= 9; }

static z_stream *new_stream(nsv__pmd *p)
{
    z_stream *z = nsv__calloc(p->a, sizeof *z);
    if (z) {
        z->zalloc = z_alloc;
        z->zfree = z_free;
        z->opaque = (voidpf)p->a;
    }
    return z;
}

/* One inflate call into out: what comes out goes to the sink, counted
 * against limit (0 none); a stream the sender finished (a final block)
 * starts over, as what follows begins a new one. Returns 0 or the close
 * code (or the sink's answer); *made gets the bytes made, *zr zlib's. */
static int inflate_once(nsv__pmd *p, uint8_t *out, size_t cap, uint64_t limit, nsv__pmd_sink sink, void *ctx,
                        size_t *made, int *zr)
{
    z_stream *z = p->inf;
    z->next_out = out;
    z->avail_out = (uInt)cap;
    int r = inflate(z, Z_SYNC_FLUSH);
    size_t k = cap - z->avail_out;
    *made = k;
    *zr = r;
    if (r == Z_NEED_DICT || r == Z_DATA_ERROR || r == Z_STREAM_ERROR)
        return -1007;
    if (r == Z_MEM_ERROR)
        return -1011;
    p->got += k;
    if (limit && p->got > limit)
        return -1009;
    if (k) {
        int s = sink(ctx, out, k);
        if (s)
            return s;
    }
    if (r == Z_STREAM_END && inflateReset(z) != Z_OK)
        return -1007;
    return 0;
}

int nsv__pmd_inflate(nsv__pmd *p, const uint8_t *in, size_t n, int last, uint64_t limit,
                     nsv__pmd_sink sink, void *ctx)
{
    static const uint8_t tail[4] = {0, 0, 0xff, 0xff};
    if (!p->inf) {
        z_stream *z = new_stream(p);
        int wb = p->cfg.client_bits < 9 ? 9 : p->cfg.client_bits;
        if (!z || inflateInit2(z, -wb) != Z_OK) {
            nsv__free(p->a, z);
            return -1011;
        }
        p->inf = z;
    }
    z_stream *z = p->inf;
    uint8_t out[16384];
    for (int part = 0; part < (last ? 2 : 1); part++) {
        z->next_in = (Bytef *)(part ? tail : in);
        z->avail_in = (uInt)(part ? sizeof tail : n);
        size_t k;
        int r;
        while (z->avail_in) {
            int e = inflate_once(p, out, sizeof out, limit, sink, ctx, &k, &r);
            if (e)
                return e;
            if (r == Z_BUF_ERROR && !k)
                break; /* no progress possible: input held back for more */
        }
        /* Output may remain inside zlib after the input ran out: drain. */
        do {
            int e = inflate_once(p, out, sizeof out, limit, sink, ctx, &k, &r);
            if (e)
                return e;
        } while (k);
    }
    if (last) {
        p->got = 0;
        if (p->cfg.client_nct && inflateReset(z) != Z_OK)
            return -1011;
    }
    return 0;
}

long nsv__pmd_deflate(nsv__pmd *p, const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    if (n == 0 && cap >= 1) {
        /* An empty message is one 00 byte (RFC 7692 7.2.3.6): with the
         * tail, an empty stored block, whatever the stream's state. zlib
         * makes nothing of a second flush with no input. */
        out[0] = 0;
        return 1;
    }
    if (!p->def) {
        z_stream *z = new_stream(p);
        int wb = p->cfg.server_bits;
        /* memLevel tracks the window: 8 (zlib's default) at 15 bits, so
         * the hash costs no more than the window. */
        if (!z || deflateInit2(z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -wb, wb - 7, Z_DEFAULT_STRATEGY) != Z_OK) {
            nsv__free(p->a, z);
            return -1;
        }
        p->def = z;
    }
    z_stream *z = p->def;
    z->next_in = (Bytef *)in;
    z->avail_in = (uInt)n;
    z->next_out = out;
    z->avail_out = (uInt)cap;
    int r = deflate(z, Z_SYNC_FLUSH);
    size_t k = cap - z->avail_out;
    if ((r != Z_OK && r != Z_BUF_ERROR) || z->avail_in || !z->avail_out || k < 4 ||
        memcmp(out + k - 4, "\0\0\xff\xff", 4) != 0) {
        deflateReset(z);
        return -1;
    }
    if (p->cfg.server_nct)
        deflateReset(z);
    return (long)(k - 4);
}

#else /* no zlib: never negotiated (NSV_OPT_WS_DEFLATE 1 is refused) */

struct nsv__pmd {
    int unused;
};

int nsv__pmd_available(void) { return 0; }
nsv__pmd *nsv__pmd_new(const nsv__alloc *a, const nsv__pmd_cfg *cfg)
{
    (void)a;
    (void)cfg;
    return NULL;
}
void nsv__pmd_free(nsv__pmd *p) { (void)p; }
int nsv__pmd_can_send(const nsv__pmd *p)
{
    (void)p;
    return 0;
}
int nsv__pmd_inflate(nsv__pmd *p, const uint8_t *in, size_t n, int last, uint64_t limit,
                     nsv__pmd_sink sink, void *ctx)
{
    (void)p, (void)in, (void)n, (void)last, (void)limit, (void)sink, (void)ctx;
    return -1011;
}
long nsv__pmd_deflate(nsv__pmd *p, const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    (void)p, (void)in, (void)n, (void)out, (void)cap;
    return -1;
}

#endif
