/* multipart.c - streaming multipart/form-data parser (RFC 7578 over the
 * RFC 2046 syntax) and the boundary parameter of a Content-Type value.
 *
 * The body is read as
 *   "--" boundary CRLF headers CRLF data ( CRLF "--" boundary CRLF headers
 *   CRLF data )* CRLF "--" boundary "--" epilogue
 * with no preamble and no transport padding after a boundary. Data bytes
 * go out as soon as they cannot be the start of a delimiter: what is held
 * back is always a prefix of "\r\n--" boundary plus at most one more byte,
 * so it is rebuilt from the boundary and needs no buffer. A header block is
 * buffered (up to max_header_bytes) until its empty line. The state is one
 * allocation made by nsv_multipart_new; feeding never allocates. */
#include "../internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MP_HEADER_DEFAULT 16384u
#define MP_HEADER_LIMIT (1u << 20)
#define MP_BOUNDARY_MAX 70

_Static_assert(sizeof(nsv_multipart_event) == 64, "nsv_multipart_event is 64 bytes");
_Static_assert(offsetof(nsv_multipart_event, data_len) == 60, "nsv_multipart_event layout");

enum { ST_START, ST_HEADERS, ST_BODY, ST_EPILOGUE, ST_ERROR };

/* What the header lines of the current block said so far (each line is
 * checked and noted once, when its LF arrives). */
typedef struct heads {
    uint32_t n;                  /* header lines */
    uint32_t has_cd, has_ct;
    uint32_t cd, cdlen, ct, ctlen; /* values (hbuf offsets), trimmed */
} heads;

struct nsv_multipart {
    uint32_t state;
    uint32_t dlen;       /* delimiter length: 4 + boundary length */
    uint32_t m;          /* delimiter bytes matched and held back (dlen + 1 with sfx) */
    uint32_t max_header; /* header block limit, final CRLF included */
    uint32_t max_parts;  /* 0 = no limit */
    uint32_t parts;      /* parts begun */
    uint32_t hlen;       /* header bytes buffered */
    uint32_t line;       /* hbuf offset of the current header line */
    uint64_t pos;        /* stream offset of the next input byte */
    uint64_t block_pos;  /* stream offset of the current header block */
    uint64_t data_pos;   /* stream offset of the next data byte */
    int64_t need;        /* arena bytes the blocked record needs */
    heads hd;            /* the header lines of the block in hbuf */
    char sfx;            /* byte after a full delimiter match: '\r' or '-' */
    char delim[4 + MP_BOUNDARY_MAX + 1]; /* "\r\n--" boundary */
    char err[200];       /* sticky error text */
    char hbuf[];         /* max_header bytes */
};

/* ---- characters ---- */

static int is_bchar(unsigned char c)
{
    /* RFC 2046 bchars: digits, letters, '()+_,-./:=? and space */
    static const char extra[] = "'()+_,-./:=? ";
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && memchr(extra, c, sizeof extra - 1));
}

/* Checks a boundary: 1-70 bchars, not ending in a space. NULL when good,
 * else why not (and the byte at *at). */
static const char *bad_boundary(const char *b, size_t n, size_t *at)
{
    *at = 0;
    if (n == 0)
        return "the boundary is empty";
    if (n > MP_BOUNDARY_MAX)
        return "the boundary is longer than 70 characters";
    for (size_t i = 0; i < n; i++)
        if (!is_bchar((unsigned char)b[i])) {
            *at = i;
            return "the boundary has a character outside the RFC 2046 set (letters, digits, '()+_,-./:=? and space)";
        }
    if (b[n - 1] == ' ') {
        *at = n - 1;
        return "the boundary ends in a space";
    }
    return NULL;
}

/* ---- header parameters: ; name=value, value a token or quoted-string ---- */

typedef struct param {
    size_t name, nlen; /* offsets into the value */
    size_t val, vlen;  /* the token, or the inside of the quotes */
    int quoted;
} param;

static size_t skip_ows(const char *v, size_t n, size_t i)
{
    while (i < n && (v[i] == ' ' || v[i] == '\t'))
        i++;
    return i;
}

/* The next "; name=value" of v at *i. 1: one found, 0: the end, -1: bad
 * (*why says what, *i where). */
static int next_param(const char *v, size_t n, size_t *i, param *p, const char **why)
{
    size_t j = skip_ows(v, n, *i);
    if (j == n) {
        *i = j;
        return 0;
    }
    if (v[j] != ';') {
        *i = j;
        *why = "expected ';' before a parameter";
        return -1;
    }
    j = skip_ows(v, n, j + 1);
    p->name = j;
    while (j < n && nsv__is_tchar((unsigned char)v[j]))
        j++;
    p->nlen = j - p->name;
    if (p->nlen == 0) {
        *i = j;
        *why = j == n ? "empty parameter after ';'" : "a parameter name must be a token";
        return -1;
    }
    if (j == n || v[j] != '=') {
        *i = j;
        *why = "a parameter name must be followed by '=' (no spaces)";
        return -1;
    }
    j++;
    if (j < n && v[j] == '"') {
        p->quoted = 1;
        p->val = ++j;
        while (j < n && v[j] != '"') {
            if (v[j] == '\\' && j + 1 < n)
                j++;
            j++;
        }
        if (j >= n) {
            *i = p->val - 1;
            *why = "unterminated quoted string";
            return -1;
        }
        p->vlen = j - p->val;
        j++;
    } else {
        p->quoted = 0;
        p->val = j;
        while (j < n && nsv__is_tchar((unsigned char)v[j]))
            j++;
        p->vlen = j - p->val;
        if (p->vlen == 0) {
            *i = j;
            *why = "a parameter value must be a token or a quoted string";
            return -1;
        }
    }
    *i = j;
    return 1;
}

static int name_is(const char *v, const param *p, const char *want)
{
    size_t n = strlen(want);
    return p->nlen == n && nsv__strncaseeq(v + p->name, want, n);
}

int nsv_multipart_boundary(const char *ct, size_t len, uint32_t *off, uint32_t *blen)
{
    if (!ct && len)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_multipart_boundary: content_type is NULL with len %zu", len);
    if (!off || !blen)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_multipart_boundary: off or blen is NULL");
    *off = *blen = 0;
    if (len > UINT32_MAX)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_multipart_boundary: len %zu is over 4294967295", len);
    size_t i = skip_ows(ct, len, 0), t = i;
    while (i < len && (nsv__is_tchar((unsigned char)ct[i]) || ct[i] == '/'))
        i++;
    static const char mt[] = "multipart/form-data";
    if (i - t != sizeof mt - 1 || !nsv__strncaseeq(ct + t, mt, sizeof mt - 1))
        return nsv__set_detail(NULL, NSV_ENOTFOUND, "nsv_multipart_boundary: media type '%.*s' is not "
                               "multipart/form-data", (int)(i - t > 64 ? 64 : i - t), ct + t);
    int found = 0;
    param p;
    const char *why = NULL;
    int r;
    while ((r = next_param(ct, len, &i, &p, &why)) > 0) {
        if (!name_is(ct, &p, "boundary"))
            continue;
        if (found)
            return nsv__set_detail(NULL, NSV_EPARSE, "nsv_multipart_boundary: two boundary parameters "
                                   "(byte %zu)", p.name);
        found = 1;
        size_t at;
        const char *bad = bad_boundary(ct + p.val, p.vlen, &at);
        if (bad)
            return nsv__set_detail(NULL, NSV_EPARSE, "nsv_multipart_boundary: %s (byte %zu)", bad, p.val + at);
        *off = (uint32_t)p.val;
        *blen = (uint32_t)p.vlen;
    }
    if (r < 0) {
        *off = *blen = 0;
        return nsv__set_detail(NULL, NSV_EPARSE, "nsv_multipart_boundary: %s (byte %zu)", why, i);
    }
    if (!found)
        return nsv__set_detail(NULL, NSV_EPARSE, "nsv_multipart_boundary: multipart/form-data without a "
                               "boundary parameter");
    return 0;
}

/* ---- the parser ---- */

nsv_multipart *nsv_multipart_new(const char *boundary, size_t blen, uint32_t max_header_bytes, uint32_t max_parts)
{
    if (!boundary) {
        nsv__set_detail(NULL, NSV_EINVAL, "nsv_multipart_new: boundary is NULL");
        return NULL;
    }
    size_t at;
    const char *bad = bad_boundary(boundary, blen, &at);
    if (bad) {
        nsv__set_detail(NULL, NSV_EINVAL, "nsv_multipart_new: %s (byte %zu)", bad, at);
        return NULL;
    }
    if (max_header_bytes == 0)
        max_header_bytes = MP_HEADER_DEFAULT;
    if (max_header_bytes > MP_HEADER_LIMIT) {
        nsv__set_detail(NULL, NSV_EINVAL, "nsv_multipart_new: max_header_bytes %u is over %u",
                        max_header_bytes, MP_HEADER_LIMIT);
        return NULL;
    }
    nsv_multipart *mp = nsv__calloc(&nsv__default_alloc, sizeof *mp + max_header_bytes);
    if (!mp) {
        nsv__set_detail(NULL, NSV_ENOMEM, "nsv_multipart_new: out of memory");
        return NULL;
    }
    memcpy(mp->delim, "\r\n--", 4);
    memcpy(mp->delim + 4, boundary, blen);
    mp->dlen = (uint32_t)blen + 4;
    mp->m = 2; /* the body starts with "--" boundary: no CRLF before it */
    mp->max_header = max_header_bytes;
    mp->max_parts = max_parts;
    mp->state = ST_START;
    return mp;
}

void nsv_multipart_free(nsv_multipart *mp)
{
    if (mp)
        nsv__free(&nsv__default_alloc, mp);
}

int64_t nsv_multipart_need(const nsv_multipart *mp)
{
    return mp ? mp->need : 0;
}

size_t nsv_multipart_event_size(void)
{
    return sizeof(nsv_multipart_event);
}

/* One feed call's output. */
typedef struct batch {
    nsv_multipart_event *evs;
    int max, n;
    char *arena;
    size_t cap, used;
} batch;

/* Records the error (sticky) and returns NSV_EPARSE. */
__attribute__((format(printf, 3, 4))) static int fail(nsv_multipart *mp, uint64_t at, const char *fmt, ...)
{
    char text[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    snprintf(mp->err, sizeof mp->err, "multipart: byte %llu: %s", (unsigned long long)at, text);
    mp->state = ST_ERROR;
    return nsv__set_detail(NULL, NSV_EPARSE, "%s", mp->err);
}

static nsv_multipart_event *new_event(nsv_multipart *mp, batch *b, uint32_t type, uint64_t at)
{
    nsv_multipart_event *e = &b->evs[b->n++];
    memset(e, 0, sizeof *e);
    e->type = type;
    e->part = mp->parts ? mp->parts - 1 : 0;
    e->input_off = at;
    return e;
}

/* Arena bytes a DATA piece can take now (0: none, and mp->need says why). */
static size_t data_room(nsv_multipart *mp, batch *b, size_t want)
{
    int extend = b->n > 0 && b->evs[b->n - 1].type == NSV_MP_DATA;
    if (!extend && b->n >= b->max)
        return 0;
    size_t room = b->cap - b->used;
    if (room == 0 && b->n == 0)
        mp->need = (int64_t)want;
    return room;
}

/* Appends k data bytes (k <= data_room). */
static void emit_data(nsv_multipart *mp, batch *b, const char *p, size_t k)
{
    nsv_multipart_event *e;
    if (b->n > 0 && b->evs[b->n - 1].type == NSV_MP_DATA) {
        e = &b->evs[b->n - 1];
    } else {
        e = new_event(mp, b, NSV_MP_DATA, mp->data_pos);
        e->data_off = (uint32_t)b->used;
    }
    memcpy(b->arena + b->used, p, k);
    b->used += k;
    e->data_len += (uint32_t)k;
    mp->data_pos += k;
}

/* Held-back bytes turned out to be data: the first k bytes of the
 * delimiter, then '-' when dash. All or nothing: 0 when they do not fit. */
static int release(nsv_multipart *mp, batch *b, uint32_t k, int dash)
{
    size_t n = k + (dash ? 1 : 0);
    if (n == 0)
        return 1;
    if (data_room(mp, b, n) < n) {
        if (b->n == 0)
            mp->need = (int64_t)n;
        return 0;
    }
    emit_data(mp, b, mp->delim, k);
    if (dash)
        emit_data(mp, b, "-", 1);
    return 1;
}

static void start_headers(nsv_multipart *mp)
{
    mp->state = ST_HEADERS;
    mp->hlen = mp->line = 0;
    memset(&mp->hd, 0, sizeof mp->hd);
    mp->block_pos = mp->pos + 1;
    mp->m = 0;
}

/* One byte c at mp->pos against the delimiter, in START, BODY or EPILOGUE.
 * 1: consumed, 0: blocked (batch full), < 0: error. */
static int delim_byte(nsv_multipart *mp, batch *b, unsigned char c)
{
    for (;;) {
        uint32_t m = mp->m;
        if (m < mp->dlen) {
            if (c == (unsigned char)mp->delim[m]) {
                mp->m++;
                if (mp->state == ST_EPILOGUE && mp->m == mp->dlen)
                    return fail(mp, mp->pos + 1 - mp->dlen, "a boundary after the final boundary");
                return 1;
            }
            if (mp->state == ST_START)
                return fail(mp, mp->pos, "no opening boundary: the body must start with \"--\" and the boundary");
            if (mp->state == ST_EPILOGUE) {
                mp->m = c == '\r';
                return 1;
            }
            if (m == 0) {
                if (data_room(mp, b, 1) == 0)
                    return 0;
                emit_data(mp, b, (const char *)&c, 1);
                return 1;
            }
            if (!release(mp, b, m, 0))
                return 0;
            mp->m = 0;
            continue;
        }
        if (m == mp->dlen) {
            if (c == '\r' || c == '-') {
                mp->sfx = (char)c;
                mp->m++;
                return 1;
            }
            if (mp->state == ST_START)
                return fail(mp, mp->pos, "the opening boundary is not followed by CRLF");
            if (!release(mp, b, m, 0))
                return 0;
            mp->m = 0;
            continue;
        }
        /* m == dlen + 1: the delimiter and sfx matched */
        if (mp->sfx == '\r' && c == '\n') {
            if (mp->state == ST_BODY) {
                if (b->n >= b->max)
                    return 0;
                new_event(mp, b, NSV_MP_PART_END, mp->data_pos);
            }
            if (mp->max_parts && mp->parts >= mp->max_parts)
                return fail(mp, mp->pos + 1, "more than max_parts (%u) parts", mp->max_parts);
            mp->parts++;
            start_headers(mp);
            return 1;
        }
        if (mp->sfx == '-' && c == '-') {
            int body = mp->state == ST_BODY;
            if (b->n + body + 1 > b->max)
                return 0;
            if (body)
                new_event(mp, b, NSV_MP_PART_END, mp->data_pos);
            new_event(mp, b, NSV_MP_END, mp->pos + 1);
            mp->state = ST_EPILOGUE;
            mp->m = 0;
            return 1;
        }
        if (mp->state == ST_START)
            return fail(mp, mp->pos, "the opening boundary is not followed by CRLF");
        /* a lookalike: "\r\n--boundary" and something else */
        if (mp->sfx == '\r') {
            if (!release(mp, b, mp->dlen, 0))
                return 0;
            mp->m = 1; /* the '\r' may start the real delimiter */
        } else {
            if (!release(mp, b, mp->dlen, 1))
                return 0;
            mp->m = 0;
        }
    }
}

/* ---- header blocks ---- */

/* The Content-Disposition parameters of a complete block. */
typedef struct block {
    int has_name, has_fn, has_fnx;
    param name, fn, fnx;         /* offsets relative to cd */
    size_t name_out, fn_out;     /* decoded lengths */
} block;

/* Length of a quoted-string's inside once \" and \\ are unescaped (other
 * backslashes stay, as browsers send Windows paths); writes when dst. */
static size_t unquote(const char *s, size_t n, char *dst)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\' && i + 1 < n && (s[i + 1] == '"' || s[i + 1] == '\\'))
            i++;
        if (dst)
            dst[o] = s[i];
        o++;
    }
    return o;
}

/* RFC 8187 ext-value: charset "'" [language] "'" value-chars, charset
 * UTF-8 or ISO-8859-1 (converted to UTF-8). Returns the decoded length or
 * -1 with *why and *at (offset in s); writes when dst. */
static int64_t ext_decode(const char *s, size_t n, char *dst, const char **why, size_t *at)
{
    const char *q1 = memchr(s, '\'', n);
    const char *q2 = q1 ? memchr(q1 + 1, '\'', n - (size_t)(q1 + 1 - s)) : NULL;
    if (!q2) {
        *at = 0;
        *why = "filename* is not charset'language'value";
        return -1;
    }
    size_t cl = (size_t)(q1 - s);
    int latin1;
    if (cl == 5 && nsv__strncaseeq(s, "UTF-8", 5))
        latin1 = 0;
    else if (cl == 10 && nsv__strncaseeq(s, "ISO-8859-1", 10))
        latin1 = 1;
    else {
        *at = 0;
        *why = "filename* charset is not UTF-8 or ISO-8859-1";
        return -1;
    }
    size_t o = 0;
    for (size_t i = (size_t)(q2 + 1 - s); i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '%') {
            int h = i + 2 < n ? nsv__hexval((unsigned char)s[i + 1]) : -1, l = h >= 0 ? nsv__hexval((unsigned char)s[i + 2]) : -1;
            if (l < 0) {
                *at = i;
                *why = "filename* has a '%' not followed by two hex digits";
                return -1;
            }
            c = (unsigned char)(h << 4 | l);
            i += 2;
        } else if (!(nsv__is_tchar(c) && c != '*' && c != '\'' && c != '%')) {
            *at = i;
            *why = "filename* has a byte that must be percent-encoded";
            return -1;
        }
        if (latin1 && c >= 0x80) {
            if (dst) {
                dst[o] = (char)(0xC0 | c >> 6);
                dst[o + 1] = (char)(0x80 | (c & 0x3F));
            }
            o += 2;
        } else {
            if (dst)
                dst[o] = (char)c;
            o++;
        }
    }
    return (int64_t)o;
}

/* A complete header line hbuf[ls, le) (CRLF excluded), noted in mp->hd. */
static int header_line(nsv_multipart *mp, size_t ls, size_t le)
{
    heads *hd = &mp->hd;
    const char *h = mp->hbuf;
    uint64_t base = mp->block_pos;
    if (h[ls] == ' ' || h[ls] == '\t')
        return fail(mp, base + ls, "header line starts with whitespace (obsolete line folding) in part %u",
                    mp->parts - 1);
    size_t c = ls;
    while (c < le && h[c] != ':') {
        if (!nsv__is_tchar((unsigned char)h[c]))
            return fail(mp, base + c, "header name has byte 0x%02x; names are tokens (part %u)",
                        (unsigned char)h[c], mp->parts - 1);
        c++;
    }
    if (c == le)
        return fail(mp, base + ls, "header line without ':' in part %u", mp->parts - 1);
    if (c == ls)
        return fail(mp, base + ls, "empty header name in part %u", mp->parts - 1);
    for (size_t i = c + 1; i < le; i++) {
        unsigned char x = (unsigned char)h[i];
        if ((x < 0x20 && x != '\t') || x == 0x7f)
            return fail(mp, base + i, "header value has control byte 0x%02x (part %u)", x, mp->parts - 1);
    }
    size_t v = skip_ows(h, le, c + 1), ve = le;
    while (ve > v && (h[ve - 1] == ' ' || h[ve - 1] == '\t'))
        ve--;
    hd->n++;
    size_t nl = c - ls;
    if (nl == 19 && nsv__strncaseeq(h + ls, "Content-Disposition", 19)) {
        if (hd->has_cd)
            return fail(mp, base + ls, "two Content-Disposition headers in part %u", mp->parts - 1);
        hd->has_cd = 1;
        hd->cd = (uint32_t)v;
        hd->cdlen = (uint32_t)(ve - v);
    } else if (nl == 12 && nsv__strncaseeq(h + ls, "Content-Type", 12)) {
        if (hd->has_ct)
            return fail(mp, base + ls, "two Content-Type headers in part %u", mp->parts - 1);
        hd->has_ct = 1;
        hd->ct = (uint32_t)v;
        hd->ctlen = (uint32_t)(ve - v);
    }
    return 0;
}

/* Parses the Content-Disposition of the complete block in hbuf (its lines
 * were checked as they came). */
static int parse_block(nsv_multipart *mp, block *bl)
{
    memset(bl, 0, sizeof *bl);
    const heads *hd = &mp->hd;
    uint64_t base = mp->block_pos;
    unsigned part = mp->parts - 1;
    if (!hd->has_cd)
        return fail(mp, base, "part %u has no Content-Disposition header", part);
    const char *v = mp->hbuf + hd->cd;
    size_t n = hd->cdlen, i = 0;
    while (i < n && nsv__is_tchar((unsigned char)v[i]))
        i++;
    if (i != 9 || !nsv__strncaseeq(v, "form-data", 9))
        return fail(mp, base + hd->cd, "Content-Disposition of part %u is '%.*s', not form-data", part,
                    (int)(i > 32 ? 32 : i), v);
    param p;
    const char *why = NULL;
    int r;
    while ((r = next_param(v, n, &i, &p, &why)) > 0) {
        param *slot = NULL;
        int *has = NULL;
        if (name_is(v, &p, "name"))
            slot = &bl->name, has = &bl->has_name;
        else if (name_is(v, &p, "filename"))
            slot = &bl->fn, has = &bl->has_fn;
        else if (name_is(v, &p, "filename*"))
            slot = &bl->fnx, has = &bl->has_fnx;
        else
            continue;
        if (*has)
            return fail(mp, base + hd->cd + p.name, "Content-Disposition of part %u has two '%.*s' parameters",
                        part, (int)p.nlen, v + p.name);
        *has = 1;
        *slot = p;
    }
    if (r < 0)
        return fail(mp, base + hd->cd + i, "Content-Disposition of part %u: %s", part, why);
    if (!bl->has_name)
        return fail(mp, base + hd->cd, "Content-Disposition of part %u has no name parameter", part);
    bl->name_out = bl->name.quoted ? unquote(v + bl->name.val, bl->name.vlen, NULL) : bl->name.vlen;
    if (bl->has_fnx) {
        if (bl->fnx.quoted)
            return fail(mp, base + hd->cd + bl->fnx.val - 1, "filename* of part %u is quoted; an "
                        "ext-value is charset'language'value", part);
        size_t at = 0;
        int64_t d = ext_decode(v + bl->fnx.val, bl->fnx.vlen, NULL, &why, &at);
        if (d < 0)
            return fail(mp, base + hd->cd + bl->fnx.val + at, "%s (part %u)", why, part);
        bl->fn_out = (size_t)d;
    } else if (bl->has_fn) {
        bl->fn_out = bl->fn.quoted ? unquote(v + bl->fn.val, bl->fn.vlen, NULL) : bl->fn.vlen;
    }
    return 0;
}

/* The empty line ending the block is at hbuf[end, end + 1] ("\r", its LF
 * not yet consumed). 1: PART emitted, 0: blocked, < 0: error. */
static int finish_block(nsv_multipart *mp, batch *b, size_t end)
{
    if (b->n >= b->max)
        return 0;
    block bl;
    if (parse_block(mp, &bl) < 0)
        return NSV_EPARSE;
    size_t need = end + bl.name_out + bl.fn_out;
    if (b->cap - b->used < need) {
        if (b->n == 0)
            mp->need = (int64_t)need;
        return 0;
    }
    const heads *hd = &mp->hd;
    const char *cd = mp->hbuf + hd->cd;
    nsv_multipart_event *e = new_event(mp, b, NSV_MP_PART, mp->block_pos);
    char *a = b->arena + b->used;
    uint32_t base = (uint32_t)b->used;
    memcpy(a, mp->hbuf, end);
    e->headers_off = base;
    e->headers_len = (uint32_t)end;
    e->nheaders = hd->n;
    e->name_off = base + (uint32_t)end;
    if (bl.name.quoted)
        unquote(cd + bl.name.val, bl.name.vlen, a + end);
    else
        memcpy(a + end, cd + bl.name.val, bl.name.vlen);
    e->name_len = (uint32_t)bl.name_out;
    e->filename_off = e->name_off + e->name_len;
    if (bl.has_fnx) {
        const char *why;
        size_t at;
        ext_decode(cd + bl.fnx.val, bl.fnx.vlen, a + end + bl.name_out, &why, &at);
        e->flags |= NSV_MPF_FILENAME | NSV_MPF_FILENAME_EXT;
    } else if (bl.has_fn) {
        if (bl.fn.quoted)
            unquote(cd + bl.fn.val, bl.fn.vlen, a + end + bl.name_out);
        else
            memcpy(a + end + bl.name_out, cd + bl.fn.val, bl.fn.vlen);
        e->flags |= NSV_MPF_FILENAME;
    }
    e->filename_len = (uint32_t)bl.fn_out;
    if (hd->has_ct) {
        e->flags |= NSV_MPF_CONTENT_TYPE;
        e->content_type_off = base + hd->ct;
        e->content_type_len = hd->ctlen;
    } else {
        e->content_type_off = e->filename_off + e->filename_len;
    }
    b->used += need;
    mp->state = ST_BODY;
    mp->m = 0;
    mp->data_pos = mp->pos + 1;
    return 1;
}

/* Header bytes at p[0, n): returns bytes consumed (0: blocked) or < 0. */
static int64_t header_bytes(nsv_multipart *mp, batch *b, const char *p, size_t n)
{
    const char *lf = memchr(p, '\n', n);
    size_t take = lf ? (size_t)(lf - p) : n;
    if (take == 0) { /* p[0] is the LF ending a line */
        size_t ls = mp->line, hl = mp->hlen;
        if (hl == ls || mp->hbuf[hl - 1] != '\r')
            return fail(mp, mp->pos, "header line ends in LF without CR (part %u)", mp->parts - 1);
        for (size_t i = ls; i + 1 < hl; i++)
            if (mp->hbuf[i] == '\r')
                return fail(mp, mp->block_pos + i, "CR not followed by LF in the headers of part %u",
                            mp->parts - 1);
        if (hl + 1 > mp->max_header)
            return fail(mp, mp->block_pos + mp->max_header, "header block of part %u is over max_header_bytes "
                        "(%u)", mp->parts - 1, mp->max_header);
        if (hl - ls == 1) { /* the empty line */
            int r = finish_block(mp, b, ls);
            return r <= 0 ? r : 1;
        }
        mp->hbuf[mp->hlen++] = '\n';
        if (header_line(mp, ls, hl - 1) < 0)
            return NSV_EPARSE;
        mp->line = mp->hlen;
        return 1;
    }
    if (mp->hlen + take > mp->max_header)
        return fail(mp, mp->block_pos + mp->max_header, "header block of part %u is over max_header_bytes (%u)",
                    mp->parts - 1, mp->max_header);
    memcpy(mp->hbuf + mp->hlen, p, take);
    mp->hlen += (uint32_t)take;
    return (int64_t)take;
}

int nsv_multipart_feed(nsv_multipart *mp, const char *data, size_t len, nsv_multipart_event *evs, int max_events,
                       char *arena, size_t arena_cap, size_t *consumed)
{
    if (consumed)
        *consumed = 0;
    if (!mp || !consumed)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_multipart_feed: %s is NULL", mp ? "consumed" : "mp");
    if (!data && len)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_multipart_feed: data is NULL with len %zu", len);
    if (!evs || max_events < 2)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_multipart_feed: room for at least 2 records needed "
                               "(max_events %d)", evs ? max_events : 0);
    if (!arena && arena_cap)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_multipart_feed: arena is NULL with arena_cap %zu",
                               arena_cap);
    if (mp->state == ST_ERROR)
        return nsv__set_detail(NULL, NSV_EPARSE, "%s", mp->err);
    batch b = {evs, max_events, 0, arena, arena_cap > UINT32_MAX ? UINT32_MAX : arena_cap, 0};
    mp->need = 0;
    size_t i = 0;
    while (i < len) {
        const char *p = data + i;
        size_t n = len - i;
        int64_t k;
        if (mp->state == ST_HEADERS) {
            k = header_bytes(mp, &b, p, n);
        } else if (mp->m == 0 && (mp->state == ST_BODY || mp->state == ST_EPILOGUE) && *p != '\r') {
            const char *cr = memchr(p, '\r', n);
            k = cr ? cr - p : (int64_t)n;
            if (mp->state == ST_BODY) {
                size_t room = data_room(mp, &b, 1);
                if ((size_t)k > room)
                    k = (int64_t)room;
                if (k)
                    emit_data(mp, &b, p, (size_t)k);
            }
        } else {
            k = delim_byte(mp, &b, (unsigned char)*p);
        }
        if (k < 0) {
            *consumed = i;
            return (int)k;
        }
        if (k == 0)
            break;
        i += (size_t)k;
        mp->pos += (uint64_t)k;
    }
    *consumed = i;
    if (b.n == 0 && i == 0 && len > 0 && mp->need > 0)
        return nsv__set_detail(NULL, NSV_ENOBUFS, "nsv_multipart_feed: the next record needs %lld arena bytes; "
                               "arena_cap is %zu", (long long)mp->need, arena_cap);
    mp->need = 0;
    return b.n;
}

int nsv_multipart_finish(nsv_multipart *mp)
{
    if (!mp)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_multipart_finish: mp is NULL");
    if (mp->state == ST_ERROR)
        return nsv__set_detail(NULL, NSV_EPARSE, "%s", mp->err);
    if (mp->state == ST_EPILOGUE)
        return 0;
    char w[64];
    if (mp->state == ST_START)
        snprintf(w, sizeof w, "before the opening boundary ended");
    else
        snprintf(w, sizeof w, "in the %s of part %u", mp->state == ST_HEADERS ? "headers" : "data",
                 mp->parts - 1);
    return fail(mp, mp->pos, "missing final boundary (the input ended %s)", w);
}
