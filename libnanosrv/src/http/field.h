/* field.h - what the request parser (parse.c) and the response parser
 * (resp_parse.c) share: byte classes built at compile time, the scanners
 * over them, and the helpers for header values (case-insensitive compare,
 * comma-separated lists). Static inline: each parser keeps its own copy of
 * the 256-byte table. */
#ifndef NSV_HTTP_FIELD_H
#define NSV_HTTP_FIELD_H
#include <stddef.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* ---- character classes, built at compile time ---------------------------- */

enum { C_TCHAR = 1, C_VALUE = 2, C_TARGET = 4, C_HOST = 8 };

#define IS_ALNUM(c) (((c) >= '0' && (c) <= '9') || ((c) >= 'A' && (c) <= 'Z') || \
                     ((c) >= 'a' && (c) <= 'z'))
#define IS_TCHAR(c) (IS_ALNUM(c) || (c) == '!' || (c) == '#' || (c) == '$' || (c) == '%' ||  \
                     (c) == '&' || (c) == '\'' || (c) == '*' || (c) == '+' || (c) == '-' ||  \
                     (c) == '.' || (c) == '^' || (c) == '_' || (c) == '`' || (c) == '|' ||   \
                     (c) == '~')
/* field-content: VCHAR, obs-text, SP and HTAB - no other CTL. */
#define IS_VALUE(c) ((c) == '\t' || ((c) >= 0x20 && (c) != 0x7f))
#define IS_TARGET(c) ((c) > 0x20 && (c) != 0x7f && (c) != '#')
/* unreserved / sub-delims / pct-encoded, plus ':' '[' ']' for port and IPv6. */
#define IS_HOST(c) (IS_ALNUM(c) || (c) == '-' || (c) == '.' || (c) == '_' || (c) == '~' ||   \
                    (c) == '!' || (c) == '$' || (c) == '&' || (c) == '\'' || (c) == '(' ||   \
                    (c) == ')' || (c) == '*' || (c) == '+' || (c) == ',' || (c) == ';' ||    \
                    (c) == '=' || (c) == '%' || (c) == ':' || (c) == '[' || (c) == ']')
#define CLS(c) ((IS_TCHAR(c) ? C_TCHAR : 0) | (IS_VALUE(c) ? C_VALUE : 0) | \
                (IS_TARGET(c) ? C_TARGET : 0) | (IS_HOST(c) ? C_HOST : 0))
#define R4(b) CLS(b), CLS((b) + 1), CLS((b) + 2), CLS((b) + 3)
#define R16(b) R4(b), R4((b) + 4), R4((b) + 8), R4((b) + 12)
#define R64(b) R16(b), R16((b) + 16), R16((b) + 32), R16((b) + 48)

static const unsigned char cls[256] = { R64(0), R64(64), R64(128), R64(192) };

typedef const unsigned char *cptr;

/* First byte in [p, end) that is not of class C_VALUE. Values (User-Agent,
 * Cookie, Accept) dominate a head, so they get 16-byte steps. */
static inline cptr scan_value(cptr p, cptr end)
{
#ifdef __SSE2__
    const __m128i c1f = _mm_set1_epi8(0x1f), del = _mm_set1_epi8(0x7f);
    while (end - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
        __m128i ctl = _mm_cmpeq_epi8(_mm_max_epu8(x, c1f), c1f); /* x <= 0x1f */
        int m = _mm_movemask_epi8(_mm_or_si128(ctl, _mm_cmpeq_epi8(x, del)));
        if (m == 0) {
            p += 16;
            continue;
        }
        p += __builtin_ctz((unsigned)m);
        if (*p != '\t')
            return p;
        p++;
    }
#endif
    while (p < end && (cls[*p] & C_VALUE))
        p++;
    return p;
}

static inline cptr scan_class(cptr p, cptr end, unsigned char c)
{
    while (p < end && (cls[*p] & c))
        p++;
    return p;
}

static inline int is_ows(unsigned char c)
{
    return c == ' ' || c == '\t';
}

/* Case-insensitive compare with a lowercase literal. Inputs are already
 * restricted to token or field-content bytes, for which (c | 0x20) can only
 * equal a lowercase letter, digit or '-' when c really is that character
 * (or its uppercase form). */
static inline int ieq(cptr s, size_t n, const char *lit, size_t litn)
{
    if (n != litn)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((s[i] | 0x20) != (unsigned char)lit[i])
            return 0;
    return 1;
}
#define IEQ(s, n, lit) ieq((s), (n), lit, sizeof(lit) - 1)

/* Iterates the elements of a comma-separated list, OWS-trimmed; empty
 * elements are returned as such (length 0). *pp becomes NULL after the
 * last element. Returns 0 when exhausted. */
static inline int next_elem(cptr *pp, cptr end, cptr *es, size_t *el)
{
    cptr p = *pp;
    if (!p)
        return 0;
    while (p < end && is_ows(*p))
        p++;
    cptr s = p;
    while (p < end && *p != ',')
        p++;
    cptr e = p;
    while (e > s && is_ows(e[-1]))
        e--;
    *es = s;
    *el = (size_t)(e - s);
    *pp = p < end ? p + 1 : NULL;
    return 1;
}

#endif
