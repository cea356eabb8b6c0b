/* json.c - read one value out of a JSON document (RFC 8259) by path.
 *
 * The whole document is validated in one pass by a small recursive scanner
 * that never allocates; it remembers where the value named by the path
 * starts, and the getters then decode just that value. So a bad document
 * is NSV_EPARSE whatever the path, and a duplicate key resolves to its last
 * occurrence (as JavaScript's JSON.parse does).
 *
 * Path syntax: "$" is the root, ".key" selects a member (the key runs to the
 * next '.' or '[', without escapes, and is compared with the unescaped JSON
 * key), "[n]" selects an array element. A malformed path is NSV_EINVAL. */
#include "../internal.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 128
#define OFF_PATH ((size_t)-1) /* path cursor of a value not on the path */

typedef struct jscan {
    const unsigned char *s;
    size_t n, i;
    const char *path;
    size_t plen;
    size_t found; /* start of the selected value, OFF_PATH if none */
} jscan;

/* ---- path ---- */

/* Key of the ".key" step at pp: *k, *klen; returns the next cursor. */
static size_t path_key(const char *p, size_t plen, size_t pp, const char **k, size_t *klen)
{
    size_t e = pp + 1;
    while (e < plen && p[e] != '.' && p[e] != '[')
        e++;
    *k = p + pp + 1;
    *klen = e - pp - 1;
    return e;
}

/* Index of the "[n]" step at pp (saturated); returns the next cursor. */
static size_t path_index(const char *p, size_t plen, size_t pp, uint64_t *idx)
{
    size_t e = pp + 1;
    uint64_t v = 0;
    for (; e < plen && p[e] != ']'; e++)
        v = v > UINT64_MAX / 20 ? UINT64_MAX : v * 10 + (uint64_t)(p[e] - '0');
    *idx = v;
    return e + 1;
}

static int path_valid(const char *p, size_t plen)
{
    if (plen == 0 || p[0] != '$')
        return 0;
    size_t pp = 1;
    while (pp < plen) {
        if (p[pp] == '.') {
            const char *k;
            size_t klen;
            pp = path_key(p, plen, pp, &k, &klen);
            if (klen == 0)
                return 0;
        } else if (p[pp] == '[') {
            size_t e = pp + 1;
            while (e < plen && p[e] >= '0' && p[e] <= '9')
                e++;
            if (e == pp + 1 || e >= plen || p[e] != ']')
                return 0;
            pp = e + 1;
        } else {
            return 0;
        }
    }
    return 1;
}

/* ---- strings ---- */

static int hex4(const unsigned char *s, size_t n, size_t i, uint32_t *out)
{
    uint32_t v = 0;
    if (i + 4 > n)
        return -1;
    for (size_t k = i; k < i + 4; k++) {
        unsigned char c = s[k];
        int d = c >= '0' && c <= '9' ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v << 4 | (uint32_t)d;
    }
    *out = v;
    return 0;
}

static int utf8_put(uint32_t cp, unsigned char *o)
{
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xc0 | cp >> 6);
        o[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xe0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (unsigned char)(0xf0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Length of the well-formed UTF-8 sequence at s[i] (lead byte >= 0x80),
 * or 0: no overlongs, no encoded surrogates, nothing above U+10FFFF. */
static int utf8_len(const unsigned char *s, size_t n, size_t i)
{
    unsigned char c = s[i];
    int len;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4;
    else
        return 0;
    if (c == 0xe0)
        lo = 0xa0;
    else if (c == 0xed)
        hi = 0x9f;
    else if (c == 0xf0)
        lo = 0x90;
    else if (c == 0xf4)
        hi = 0x8f;
    if (i + (size_t)len > n || s[i + 1] < lo || s[i + 1] > hi)
        return 0;
    for (int k = 2; k < len; k++)
        if ((s[i + k] & 0xc0) != 0x80)
            return 0;
    return len;
}

/* \uXXXX at s[*i] (just after the backslash and 'u' were seen at *i - 2),
 * joining a surrogate pair; a lone or mismatched surrogate is an error. */
static int str_uescape(const unsigned char *s, size_t n, size_t *i, unsigned char out[4])
{
    uint32_t cp, lo;
    if (hex4(s, n, *i, &cp) < 0)
        return NSV_EPARSE;
    *i += 4;
    if (cp >= 0xdc00 && cp <= 0xdfff)
        return NSV_EPARSE;
    if (cp >= 0xd800 && cp <= 0xdbff) {
        if (*i + 2 > n || s[*i] != '\\' || s[*i + 1] != 'u' || hex4(s, n, *i + 2, &lo) < 0 ||
            lo < 0xdc00 || lo > 0xdfff)
            return NSV_EPARSE;
        *i += 6;
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    }
    return utf8_put(cp, out);
}

/* Decodes one unit of a string body at *i into out: returns its byte
 * count (1..4), 0 after consuming the closing quote, or NSV_EPARSE. */
static int str_unit(const unsigned char *s, size_t n, size_t *i, unsigned char out[4])
{
    if (*i >= n)
        return NSV_EPARSE;
    unsigned char c = s[*i];
    if (c == '"') {
        (*i)++;
        return 0;
    }
    if (c < 0x20)
        return NSV_EPARSE;
    if (c >= 0x80) {
        int len = utf8_len(s, n, *i);
        if (!len)
            return NSV_EPARSE;
        memcpy(out, s + *i, (size_t)len);
        *i += (size_t)len;
        return len;
    }
    (*i)++;
    if (c != '\\') {
        out[0] = c;
        return 1;
    }
    if (*i >= n)
        return NSV_EPARSE;
    c = s[(*i)++];
    switch (c) {
    case '"': case '\\': case '/': out[0] = c; return 1;
    case 'b': out[0] = '\b'; return 1;
    case 'f': out[0] = '\f'; return 1;
    case 'n': out[0] = '\n'; return 1;
    case 'r': out[0] = '\r'; return 1;
    case 't': out[0] = '\t'; return 1;
    case 'u': return str_uescape(s, n, i, out);
    default: return NSV_EPARSE;
    }
}

/* Skips a string body at *i (after the opening quote); returns its
 * unescaped length or NSV_EPARSE. */
static int64_t str_skip(const unsigned char *s, size_t n, size_t *i)
{
    unsigned char u[4];
    int64_t total = 0;
    int r;
    while ((r = str_unit(s, n, i, u)) > 0)
        total += r;
    return r < 0 ? r : total;
}

/* Compares the (valid) string body at i with key; 1 when equal. */
static int str_equals(const unsigned char *s, size_t n, size_t i, const char *key, size_t klen)
{
    unsigned char u[4];
    size_t at = 0;
    int r;
    while ((r = str_unit(s, n, &i, u)) > 0) {
        if (at + (size_t)r > klen || memcmp(key + at, u, (size_t)r) != 0)
            return 0;
        at += (size_t)r;
    }
    return r == 0 && at == klen;
}

/* ---- scanner ---- */

static void skip_ws(jscan *j)
{
    while (j->i < j->n && (j->s[j->i] == ' ' || j->s[j->i] == '\t' ||
                           j->s[j->i] == '\n' || j->s[j->i] == '\r'))
        j->i++;
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* Number grammar: -? (0 | [1-9][0-9]*) (.[0-9]+)? ([eE][+-]?[0-9]+)? */
static int scan_number(const unsigned char *s, size_t n, size_t *i)
{
    size_t k = *i;
    if (k < n && s[k] == '-')
        k++;
    if (k >= n || !is_digit(s[k]))
        return NSV_EPARSE;
    if (s[k++] != '0')
        while (k < n && is_digit(s[k]))
            k++;
    if (k < n && s[k] == '.') {
        if (++k >= n || !is_digit(s[k]))
            return NSV_EPARSE;
        while (k < n && is_digit(s[k]))
            k++;
    }
    if (k < n && (s[k] == 'e' || s[k] == 'E')) {
        k++;
        if (k < n && (s[k] == '+' || s[k] == '-'))
            k++;
        if (k >= n || !is_digit(s[k]))
            return NSV_EPARSE;
        while (k < n && is_digit(s[k]))
            k++;
    }
    *i = k;
    return 0;
}

static int scan_literal(jscan *j, const char *lit, size_t len)
{
    if (j->n - j->i < len || memcmp(j->s + j->i, lit, len) != 0)
        return NSV_EPARSE;
    j->i += len;
    return 0;
}

static int scan_value(jscan *j, size_t pp, int depth);

static int scan_object(jscan *j, size_t pp, int depth)
{
    const char *key = NULL;
    size_t klen = 0, child_pp = OFF_PATH;
    if (pp != OFF_PATH && j->path[pp] == '.')
        child_pp = path_key(j->path, j->plen, pp, &key, &klen);
    j->i++; /* '{' */
    skip_ws(j);
    if (j->i < j->n && j->s[j->i] == '}') {
        j->i++;
        return 0;
    }
    for (;;) {
        if (j->i >= j->n || j->s[j->i] != '"')
            return NSV_EPARSE;
        size_t kstart = ++j->i;
        if (str_skip(j->s, j->n, &j->i) < 0)
            return NSV_EPARSE;
        int hit = key && str_equals(j->s, j->n, kstart, key, klen);
        skip_ws(j);
        if (j->i >= j->n || j->s[j->i++] != ':')
            return NSV_EPARSE;
        if (scan_value(j, hit ? child_pp : OFF_PATH, depth) < 0)
            return NSV_EPARSE;
        skip_ws(j);
        if (j->i >= j->n)
            return NSV_EPARSE;
        unsigned char c = j->s[j->i++];
        if (c == '}')
            return 0;
        if (c != ',')
            return NSV_EPARSE;
        skip_ws(j);
    }
}

static int scan_array(jscan *j, size_t pp, int depth)
{
    uint64_t want = 0, idx = 0;
    size_t child_pp = OFF_PATH;
    if (pp != OFF_PATH && j->path[pp] == '[')
        child_pp = path_index(j->path, j->plen, pp, &want);
    j->i++; /* '[' */
    skip_ws(j);
    if (j->i < j->n && j->s[j->i] == ']') {
        j->i++;
        return 0;
    }
    for (;; idx++) {
        if (scan_value(j, idx == want ? child_pp : OFF_PATH, depth) < 0)
            return NSV_EPARSE;
        skip_ws(j);
        if (j->i >= j->n)
            return NSV_EPARSE;
        unsigned char c = j->s[j->i++];
        if (c == ']')
            return 0;
        if (c != ',')
            return NSV_EPARSE;
    }
}

/* Scans one value; pp is the path cursor for it (OFF_PATH: not on path),
 * depth the number of enclosing containers. */
static int scan_value(jscan *j, size_t pp, int depth)
{
    skip_ws(j);
    if (j->i >= j->n)
        return NSV_EPARSE;
    if (pp == j->plen) {
        j->found = j->i;
        pp = OFF_PATH;
    }
    switch (j->s[j->i]) {
    case '{':
    case '[':
        if (depth >= JSON_MAX_DEPTH)
            return NSV_EPARSE;
        return j->s[j->i] == '{' ? scan_object(j, pp, depth + 1) : scan_array(j, pp, depth + 1);
    case '"':
        j->i++;
        return str_skip(j->s, j->n, &j->i) < 0 ? NSV_EPARSE : 0;
    case 't':
        return scan_literal(j, "true", 4);
    case 'f':
        return scan_literal(j, "false", 5);
    case 'n':
        return scan_literal(j, "null", 4);
    default:
        return scan_number(j->s, j->n, &j->i);
    }
}

/* Paths in details: at most 100 bytes of them. */
#define PATH_ARG(p, n) (int)((n) > 100 ? 100 : (n)), (p)

static const char *kind_of(unsigned char c)
{
    switch (c) {
    case '{': return "an object";
    case '[': return "an array";
    case '"': return "a string";
    case 't': case 'f': return "a boolean";
    case 'n': return "null";
    }
    return "a number";
}

/* Validates json and locates path. Returns 0 with *at set, or an error
 * (detail set; fn names the public call). */
static int json_find(const char *fn, const char *json, size_t len, const char *path, size_t plen,
                     size_t *at)
{
    if (!json && len)
        return nsv__set_detail(NULL, NSV_EINVAL, "%s: json is NULL with len %zu", fn, len);
    if (!path)
        return nsv__set_detail(NULL, NSV_EINVAL, "%s: path is NULL", fn);
    if (!path_valid(path, plen))
        return nsv__set_detail(NULL, NSV_EINVAL, "%s: path '%.*s' is not \"$\" followed by .key and [n] "
                               "steps", fn, PATH_ARG(path, plen));
    jscan j = {(const unsigned char *)json, len, 0, path, plen, OFF_PATH};
    if (scan_value(&j, 1, 0) < 0)
        return nsv__set_detail(NULL, NSV_EPARSE, "%s: malformed JSON near byte %zu of %zu", fn,
                               j.i < len ? j.i : len, len);
    skip_ws(&j);
    if (j.i != j.n)
        return nsv__set_detail(NULL, NSV_EPARSE, "%s: malformed JSON: text after the value at byte %zu",
                               fn, j.i);
    if (j.found == OFF_PATH)
        return nsv__set_detail(NULL, NSV_ENOTFOUND, "%s: no value at path '%.*s'", fn, PATH_ARG(path, plen));
    *at = j.found;
    return 0;
}

/* The value at path is of another type than the getter reads. */
static int wrong_type(const char *fn, const char *path, size_t plen, unsigned char c, const char *want)
{
    return nsv__set_detail(NULL, NSV_ENOTFOUND, "%s: the value at path '%.*s' is %s, not %s", fn,
                           PATH_ARG(path, plen), kind_of(c), want);
}

/* ---- getters ---- */

int64_t nsv_json_string(const char *json, size_t len, const char *path, size_t plen, char *dst, size_t cap)
{
    size_t at;
    if (!dst && cap)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_json_string: dst is NULL with cap %zu", cap);
    int rc = json_find("nsv_json_string", json, len, path, plen, &at);
    if (rc < 0)
        return rc;
    const unsigned char *s = (const unsigned char *)json;
    if (s[at] != '"')
        return wrong_type("nsv_json_string", path, plen, s[at], "a string");
    size_t i = at + 1;
    int64_t need = str_skip(s, len, &i);
    if (need < 0 || (uint64_t)need > cap)
        return need;
    unsigned char u[4];
    int r;
    char *o = dst;
    for (i = at + 1; (r = str_unit(s, len, &i, u)) > 0; o += r)
        memcpy(o, u, (size_t)r);
    return need;
}

/* strtod on a copy of s[0..n) using '.' whatever the C locale says. */
static int parse_double(const char *s, size_t n, double *out)
{
    char small[128];
    char *buf = n < sizeof small ? small : malloc(n + 1);
    if (!buf)
        return nsv__set_detail(NULL, NSV_ENOMEM, "nsv_json_number: no memory for a %zu-digit number", n);
    memcpy(buf, s, n);
    buf[n] = 0;
    char dp = localeconv()->decimal_point[0];
    char *dot = memchr(buf, '.', n);
    if (dot && dp && dp != '.')
        *dot = dp;
    errno = 0;
    double v = strtod(buf, NULL);
    if (buf != small)
        free(buf);
    if (isinf(v))
        return nsv__set_detail(NULL, NSV_ERANGE, "nsv_json_number: %.*s does not fit a double",
                               (int)(n > 40 ? 40 : n), s);
    *out = v;
    return 0;
}

/* The number at path: its text is json[*at, *end). */
static int find_number(const char *fn, const char *json, size_t len, const char *path, size_t plen,
                       size_t *at, size_t *end)
{
    int rc = json_find(fn, json, len, path, plen, at);
    if (rc < 0)
        return rc;
    const unsigned char *s = (const unsigned char *)json;
    if (s[*at] != '-' && !is_digit(s[*at]))
        return wrong_type(fn, path, plen, s[*at], "a number");
    *end = *at;
    scan_number(s, len, end);
    return 0;
}

int nsv_json_number(const char *json, size_t len, const char *path, size_t plen, double *out)
{
    size_t at, e;
    if (!out)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_json_number: out is NULL");
    int rc = find_number("nsv_json_number", json, len, path, plen, &at, &e);
    return rc < 0 ? rc : parse_double(json + at, e - at, out);
}

/* Digits of int part [a, b) and fraction [c, d) seen as one string. */
typedef struct digits {
    const unsigned char *s;
    size_t a, b, c, d;
} digits;

static int digit_at(const digits *g, size_t k)
{
    size_t il = g->b - g->a;
    return (k < il ? g->s[g->a + k] : g->s[g->c + k - il]) - '0';
}

/* Exact integer conversion: the number is significand * 10^exp after
 * trailing zeros move into the exponent; a negative exponent left over
 * means a fraction. */
static int number_to_int64(const unsigned char *s, size_t at, size_t end, int64_t *out)
{
    int neg = s[at] == '-';
    digits g = {s, at + neg, at + neg, 0, 0};
    while (g.b < end && is_digit(s[g.b]))
        g.b++;
    g.c = g.d = g.b;
    if (g.b < end && s[g.b] == '.') {
        g.c = g.d = g.b + 1;
        while (g.d < end && is_digit(s[g.d]))
            g.d++;
    }
    int64_t exp = 0;
    size_t k = g.d;
    if (k < end && (s[k] == 'e' || s[k] == 'E')) {
        int eneg = s[++k] == '-';
        if (s[k] == '+' || s[k] == '-')
            k++;
        for (; k < end; k++)
            exp = exp > 1000000000000LL ? exp : exp * 10 + (s[k] - '0');
        exp = eneg ? -exp : exp;
    }
    size_t total = (g.b - g.a) + (g.d - g.c), lead = 0, last = total;
    while (lead < total && digit_at(&g, lead) == 0)
        lead++;
    if (lead == total) {
        *out = 0;
        return 0;
    }
    while (digit_at(&g, last - 1) == 0)
        last--;
    /* Value = digits[lead, last) * 10^e10. */
    int64_t e10 = exp - (int64_t)(g.d - g.c) + (int64_t)(total - last);
    int64_t sig = (int64_t)(last - lead);
    if (e10 < 0)
        return NSV_ERANGE;
    if (sig + e10 > 19)
        return NSV_ERANGE;
    uint64_t v = 0;
    for (size_t i = lead; i < last; i++)
        v = v * 10 + (uint64_t)digit_at(&g, i);
    for (int64_t i = 0; i < e10; i++)
        v *= 10;
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    /* 19 digits fit in uint64 (< 1.9e19) but may exceed the int64 range. */
    if (v > limit)
        return NSV_ERANGE;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

int nsv_json_integer(const char *json, size_t len, const char *path, size_t plen, int64_t *out)
{
    size_t at, e;
    if (!out)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_json_integer: out is NULL");
    int rc = find_number("nsv_json_integer", json, len, path, plen, &at, &e);
    if (rc < 0)
        return rc;
    rc = number_to_int64((const unsigned char *)json, at, e, out);
    if (rc < 0)
        return nsv__set_detail(NULL, rc, "nsv_json_integer: %.*s at path '%.*s' is not an integer in "
                               "-9223372036854775808..9223372036854775807", (int)(e - at > 40 ? 40 : e - at),
                               json + at, PATH_ARG(path, plen));
    return rc;
}

int nsv_json_boolean(const char *json, size_t len, const char *path, size_t plen, int *out)
{
    size_t at;
    if (!out)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_json_boolean: out is NULL");
    int rc = json_find("nsv_json_boolean", json, len, path, plen, &at);
    if (rc < 0)
        return rc;
    if (json[at] != 't' && json[at] != 'f')
        return wrong_type("nsv_json_boolean", path, plen, (unsigned char)json[at], "a boolean");
    *out = json[at] == 't';
    return 0;
}
