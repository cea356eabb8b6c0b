/* form_cookie.c - unit tests for nsv_form_parse, nsv_cookie_parse and
 * nsv_set_cookie. */
#include "internal.h"
#include "tap.h"

#define S(x) x, sizeof(x) - 1

typedef struct {
    const char *k;
    size_t kl;
    const char *v;
    size_t vl;
} kv;

typedef struct {
    const char *in;
    size_t len;
    int n;
    kv p[4];
} row;

typedef int64_t (*parse_fn)(const char *, size_t, uint32_t *, size_t, char *, size_t, uint32_t *);

/* Parses r->in with fn (sizing call, then exact buffers) and compares. */
static void check_row(parse_fn fn, const char *what, const row *r)
{
    uint32_t np = 99, pairs[4 * 8];
    char dst[256];
    int64_t need = fn(r->in, r->len, NULL, 0, NULL, 0, &np);
    size_t want_need = 0;
    for (int i = 0; i < r->n; i++)
        want_need += r->p[i].kl + r->p[i].vl;
    int good = need == (int64_t)want_need && np == (uint32_t)r->n;
    if (good && np) {
        memset(dst, '#', sizeof dst);
        good = fn(r->in, r->len, pairs, np, dst, (size_t)need, &np) == need && np == (uint32_t)r->n;
        size_t at = 0;
        for (int i = 0; good && i < r->n; i++) {
            const kv *e = &r->p[i];
            good = pairs[4 * i] == at && pairs[4 * i + 1] == e->kl && pairs[4 * i + 2] == at + e->kl &&
                   pairs[4 * i + 3] == e->vl && memcmp(dst + at, e->k, e->kl) == 0 &&
                   memcmp(dst + at + e->kl, e->v, e->vl) == 0;
            at += e->kl + e->vl;
        }
        good = good && dst[need] == '#';
    }
    if (!ok(good, "%s \"%.*s\"", what, (int)r->len, r->in)) {
        diag("need %lld, npairs %u", (long long)need, np);
        for (uint32_t i = 0; i < np && i < 8 && need <= (int64_t)sizeof dst; i++)
            diag("  [%u] '%.*s' = '%.*s'", i, (int)pairs[4 * i + 1], dst + pairs[4 * i], (int)pairs[4 * i + 3],
                 dst + pairs[4 * i + 2]);
    }
}

/* ---- forms ---- */

static const row form_rows[] = {
/* Generated from Python 3.11.7 urllib.parse.parse_qsl(q, keep_blank_values=True);
 * every row but "?a=1" also matches Node 20's [...new URLSearchParams(q)]
 * (its constructor drops a leading '?'; the urlencoded parser does not). */
    {S("a=1&b=2"), 2, {{S("a"), S("1")}, {S("b"), S("2")}}},
    {S("a=1&a=2&a=3"), 3, {{S("a"), S("1")}, {S("a"), S("2")}, {S("a"), S("3")}}},
    {S("&&a=1&&b=2&"), 2, {{S("a"), S("1")}, {S("b"), S("2")}}},
    {S("a"), 1, {{S("a"), S("")}}},
    {S("a="), 1, {{S("a"), S("")}}},
    {S("=a"), 1, {{S(""), S("a")}}},
    {S("="), 1, {{S(""), S("")}}},
    {S("=="), 1, {{S(""), S("=")}}},
    {S("a==b"), 1, {{S("a"), S("=b")}}},
    {S("a=b=c"), 1, {{S("a"), S("b=c")}}},
    {S("+a+=+b+"), 1, {{S(" a "), S(" b ")}}},
    {S("a%20b=c%2Bd"), 1, {{S("a b"), S("c+d")}}},
    {S("%41%42=%61%62"), 1, {{S("AB"), S("ab")}}},
    {S("%4a=%4A"), 1, {{S("J"), S("J")}}},
    {S("%=%"), 1, {{S("%"), S("%")}}},
    {S("%%=%%%"), 1, {{S("%%"), S("%%%")}}},
    {S("%2=%g1"), 1, {{S("%2"), S("%g1")}}},
    {S("%%41"), 1, {{S("%A"), S("")}}},
    {S("a%2"), 1, {{S("a%2"), S("")}}},
    {S("a=%zz"), 1, {{S("a"), S("%zz")}}},
    {S("%E2%82%AC=%C3%A9"), 1, {{S("\342\202\254"), S("\303\251")}}},
    {S("%26=%3D"), 1, {{S("&"), S("=")}}},
    {S("a=1;b=2"), 1, {{S("a"), S("1;b=2")}}},
    {S("a b=c d"), 1, {{S("a b"), S("c d")}}},
    {S("?a=1"), 1, {{S("?a"), S("1")}}},
    {S("a=1#x"), 1, {{S("a"), S("1#x")}}},
    {S("a&b&c"), 3, {{S("a"), S("")}, {S("b"), S("")}, {S("c"), S("")}}},
    {S("&"), 0, {{0}}},
    {S("&&"), 0, {{0}}},
    {S("a=%00b"), 1, {{S("a"), S("\000b")}}},
    {S("k=%2B%2b+"), 1, {{S("k"), S("++ ")}}},
    {S("x=%"), 1, {{S("x"), S("%")}}},
    {S("x=%4"), 1, {{S("x"), S("%4")}}},
    {S("x=%%34%"), 1, {{S("x"), S("%4%")}}},

    /* Beyond the cross-checked table: bytes pass through unchanged (Python
     * and Node would turn invalid UTF-8 into U+FFFD). */
    {S("a=%FF%fe"), 1, {{S("a"), S("\377\376")}}},
    {S("\377=\000"), 1, {{S("\377"), S("\000")}}},
    {S("%00=%00%00"), 1, {{S("\000"), S("\000\000")}}},
    {S("a\000b=c"), 1, {{S("a\000b"), S("c")}}},
    {S("%0"), 1, {{S("%0"), S("")}}},
    {S("%"), 1, {{S("%"), S("")}}},
    {S("%+1=%1+"), 1, {{S("% 1"), S("%1 ")}}},
    {S("a=%2&b"), 2, {{S("a"), S("%2")}, {S("b"), S("")}}},
    {S("a=%&b=%2"), 2, {{S("a"), S("%")}, {S("b"), S("%2")}}},
    {S("%3d=%26"), 1, {{S("="), S("&")}}},
    {S("\r\n=\t"), 1, {{S("\r\n"), S("\t")}}},
    {S(""), 0, {{0}}},
};

static void test_form_table(void)
{
    for (size_t i = 0; i < NSV__ARRAY_LEN(form_rows); i++)
        check_row(nsv_form_parse, "form", &form_rows[i]);
}

static void test_form_buffers(void)
{
    uint32_t pairs[4 * 4], np = 0;
    char dst[32];
    const char q[] = "a=1&bb=22&ccc=333";
    /* Sizing call. */
    is_int(nsv_form_parse(S(q), NULL, 0, NULL, 0, &np), 12, "form sizing: 12 bytes");
    is_int(np, 3, "form sizing: 3 pairs");
    /* dst one short: nothing written. */
    memset(dst, '#', sizeof dst);
    memset(pairs, 0xab, sizeof pairs);
    is_int(nsv_form_parse(S(q), pairs, 4, dst, 11, &np), 12, "form: short dst still sizes");
    ok(dst[0] == '#' && pairs[0] == 0xabababab, "form: short dst, nothing written");
    /* pairs one short: nothing written, also when dst is large. */
    is_int(nsv_form_parse(S(q), pairs, 2, dst, sizeof dst, &np), 12, "form: short pairs still sizes");
    ok(np == 3 && dst[0] == '#' && pairs[0] == 0xabababab, "form: short pairs, nothing written");
    /* Exact. */
    is_int(nsv_form_parse(S(q), pairs, 3, dst, 12, &np), 12, "form: exact buffers");
    ok(np == 3 && memcmp(dst, "a1bb22ccc333", 12) == 0 && dst[12] == '#', "form: exact output, nothing past it");
    ok(pairs[8] == 6 && pairs[9] == 3 && pairs[10] == 9 && pairs[11] == 3, "form: third pair offsets");
    /* Roomy buffers (single pass) give the same. */
    memset(dst, '#', sizeof dst);
    is_int(nsv_form_parse(S(q), pairs, 4, dst, sizeof dst, &np), 12, "form: roomy buffers");
    ok(np == 3 && memcmp(dst, "a1bb22ccc333", 12) == 0 && dst[12] == '#', "form: roomy output");
    /* Many '&': upper bound on pairs fits, dst roomy. */
    is_int(nsv_form_parse(S("&&&&&&&&&&a=b"), pairs, 1, dst, sizeof dst, &np), 2, "form: '&' run, one pair");
    ok(np == 1 && pairs[0] == 0 && pairs[1] == 1 && pairs[3] == 1 && memcmp(dst, "ab", 2) == 0,
       "form: '&' run output");
    /* Empty pairs: need 0 but pairs still written when they fit. */
    is_int(nsv_form_parse(S("=&="), pairs, 4, NULL, 0, &np), 0, "form: empty names and values need 0 bytes");
    ok(np == 2 && pairs[0] == 0 && pairs[1] == 0 && pairs[4] == 0 && pairs[7] == 0, "form: two empty pairs");
    /* Arguments. */
    is_int(nsv_form_parse(NULL, 0, NULL, 0, NULL, 0, &np), 0, "form: NULL empty input");
    is_int(np, 0, "form: no pairs");
    is_int(nsv_form_parse(NULL, 1, pairs, 1, dst, 1, &np), NSV_EINVAL, "form: NULL src with len");
    ok(strstr(nsv_last_error_detail(NULL), "src") != NULL, "form: detail names src");
    is_int(nsv_form_parse(S("a"), NULL, 1, dst, 1, &np), NSV_EINVAL, "form: NULL pairs with max_pairs");
    ok(strstr(nsv_last_error_detail(NULL), "pairs") != NULL, "form: detail names pairs");
    is_int(nsv_form_parse(S("a"), pairs, 1, NULL, 1, &np), NSV_EINVAL, "form: NULL dst with cap");
    is_int(nsv_form_parse(S("a"), pairs, 1, dst, 1, NULL), NSV_EINVAL, "form: NULL npairs");
    ok(strstr(nsv_last_error_detail(NULL), "npairs") != NULL, "form: detail names npairs");
    if (sizeof(size_t) > 4)
        is_int(nsv_form_parse("", (size_t)UINT32_MAX + 1, NULL, 0, NULL, 0, &np), NSV_ETOOBIG,
               "form: 4 GiB input refused before reading");
    else
        ok(1, "form: 4 GiB input (64-bit only)");
}

/* A large body: 10000 pairs, decoded sizes add up. */
static void test_form_large(void)
{
    size_t cap = 10000 * 16;
    char *body = malloc(cap), *dst = malloc(cap);
    uint32_t *pairs = malloc(10000 * 16), np = 0;
    size_t n = 0;
    for (int i = 0; i < 10000; i++)
        n += (size_t)sprintf(body + n, "%sk%d=v%%20%d", i ? "&" : "", i, i);
    int64_t need = nsv_form_parse(body, n, NULL, 0, NULL, 0, &np);
    ok(np == 10000 && need > 0, "form large: 10000 pairs");
    ok(nsv_form_parse(body, n, pairs, 10000, dst, (size_t)need, &np) == need, "form large: parsed");
    char want[32];
    int wl = sprintf(want, "v %d", 9999);
    ok(pairs[4 * 9999 + 3] == (uint32_t)wl && memcmp(dst + pairs[4 * 9999 + 2], want, (size_t)wl) == 0,
       "form large: last value");
    free(body);
    free(dst);
    free(pairs);
}

/* ---- cookies ---- */

static const row cookie_rows[] = {
    {S("a=1; b=2"), 2, {{S("a"), S("1")}, {S("b"), S("2")}}},
    {S("a=1;b=2"), 2, {{S("a"), S("1")}, {S("b"), S("2")}}},
    {S(" a = 1 ;\tb\t=\t2\t"), 2, {{S("a"), S("1")}, {S("b"), S("2")}}},
    /* Pieces without '=' are skipped (Python drops the whole header). */
    {S("a=1; b; c=3"), 2, {{S("a"), S("1")}, {S("c"), S("3")}}},
    {S("flag"), 0, {{0}}},
    /* Repeated names kept in order (Python keeps the last, Node the first). */
    {S("a=1; a=2"), 2, {{S("a"), S("1")}, {S("a"), S("2")}}},
    {S("=x; b=2"), 2, {{S(""), S("x")}, {S("b"), S("2")}}},
    {S("a="), 1, {{S("a"), S("")}}},
    {S("a=b=c"), 1, {{S("a"), S("b=c")}}},
    /* No percent-decoding. */
    {S("a=x%20y+z"), 1, {{S("a"), S("x%20y+z")}}},
    /* Quotes: a wrapping pair is stripped, anything else kept. */
    {S("a=\"x y\"; b=2"), 2, {{S("a"), S("x y")}, {S("b"), S("2")}}},
    {S("a=\"\""), 1, {{S("a"), S("")}}},
    {S("a=\""), 1, {{S("a"), S("\"")}}},
    {S("a=\"q"), 1, {{S("a"), S("\"q")}}},
    {S("a=q\""), 1, {{S("a"), S("q\"")}}},
    {S("a=\"\"x\"\""), 1, {{S("a"), S("\"x\"")}}},
    {S("a= \"v\" "), 1, {{S("a"), S("v")}}},
    {S("a=\" v \""), 1, {{S("a"), S(" v ")}}},
    /* ',' does not separate (RFC 2965 style is not supported). */
    {S("a=1, b=2"), 1, {{S("a"), S("1, b=2")}}},
    {S("a={\"j\":1}; b=2"), 2, {{S("a"), S("{\"j\":1}")}, {S("b"), S("2")}}},
    {S(";;; ;"), 0, {{0}}},
    {S(""), 0, {{0}}},
    {S("a b=c d"), 1, {{S("a b"), S("c d")}}},
    {S("a=\000; \377=\001"), 2, {{S("a"), S("\000")}, {S("\377"), S("\001")}}},
    {S("a=1;"), 1, {{S("a"), S("1")}}},
    {S("sid=abc; __Host-id=1; theme=dark"), 3,
     {{S("sid"), S("abc")}, {S("__Host-id"), S("1")}, {S("theme"), S("dark")}}},
    {S("  =  "), 1, {{S(""), S("")}}},
    /* Only spaces and tabs are trimmed. */
    {S("\ra=1\n"), 1, {{S("\ra"), S("1\n")}}},
};

static void test_cookie_table(void)
{
    for (size_t i = 0; i < NSV__ARRAY_LEN(cookie_rows); i++)
        check_row(nsv_cookie_parse, "cookie", &cookie_rows[i]);
}

static void test_cookie_buffers(void)
{
    uint32_t pairs[4 * 4], np = 0;
    char dst[32];
    const char h[] = "a=1; bb=\"22\"; ccc=333";
    is_int(nsv_cookie_parse(S(h), NULL, 0, NULL, 0, &np), 12, "cookie sizing: 12 bytes");
    is_int(np, 3, "cookie sizing: 3 pairs");
    memset(dst, '#', sizeof dst);
    memset(pairs, 0xab, sizeof pairs);
    is_int(nsv_cookie_parse(S(h), pairs, 4, dst, 11, &np), 12, "cookie: short dst still sizes");
    ok(dst[0] == '#' && pairs[0] == 0xabababab, "cookie: short dst, nothing written");
    is_int(nsv_cookie_parse(S(h), pairs, 2, dst, sizeof dst, &np), 12, "cookie: short pairs still sizes");
    ok(np == 3 && dst[0] == '#' && pairs[0] == 0xabababab, "cookie: short pairs, nothing written");
    is_int(nsv_cookie_parse(S(h), pairs, 3, dst, 12, &np), 12, "cookie: exact buffers");
    ok(memcmp(dst, "a1bb22ccc333", 12) == 0 && dst[12] == '#', "cookie: exact output");
    is_int(nsv_cookie_parse(NULL, 1, pairs, 1, dst, 1, &np), NSV_EINVAL, "cookie: NULL hdr with len");
    ok(strstr(nsv_last_error_detail(NULL), "hdr") != NULL, "cookie: detail names hdr");
    is_int(nsv_cookie_parse(S("a=1"), NULL, 1, dst, 1, &np), NSV_EINVAL, "cookie: NULL pairs with max_pairs");
    is_int(nsv_cookie_parse(S("a=1"), pairs, 1, NULL, 1, &np), NSV_EINVAL, "cookie: NULL dst with cap");
    is_int(nsv_cookie_parse(S("a=1"), pairs, 1, dst, 1, NULL), NSV_EINVAL, "cookie: NULL npairs");
    is_int(nsv_cookie_parse(NULL, 0, NULL, 0, NULL, 0, &np), 0, "cookie: empty");
    /* Pairs whose names and values are all empty need no dst at all. */
    memset(pairs, 0xab, sizeof pairs);
    is_int(nsv_cookie_parse(S("=; ="), pairs, 2, NULL, 0, &np), 0, "cookie: empty pairs with a NULL dst");
    ok(np == 2 && pairs[0] == 0 && pairs[1] == 0 && pairs[6] == 0 && pairs[7] == 0,
       "cookie: empty pairs written without dst");
}

/* ---- Set-Cookie ---- */

static char out[512];

/* Builds with the sizing call first, then exactly sized. */
static void sc_ok(const char *name, const char *value, const char *path, const char *domain, int64_t max_age,
                  int64_t expires, uint32_t flags, const char *want)
{
    size_t nl = strlen(name), vl = strlen(value), pl = path ? strlen(path) : 0, dl = domain ? strlen(domain) : 0;
    int64_t need = nsv_set_cookie(name, nl, value, vl, path, pl, domain, dl, max_age, expires, flags, NULL, 0);
    memset(out, '#', sizeof out);
    int64_t got = need > 0 && need < (int64_t)sizeof out
                      ? nsv_set_cookie(name, nl, value, vl, path, pl, domain, dl, max_age, expires, flags, out,
                                       (size_t)need)
                      : need;
    if (got != need) {
        ok(0, "set-cookie %s: sizing %lld, writing %lld", want, (long long)need, (long long)got);
        return;
    }
    if (got < 0)
        diag("detail: %s", nsv_last_error_detail(NULL));
    is_mem(out, got < 0 ? 0 : got, want, "set-cookie %s", want);
    ok(got < 0 || out[got] == '#', "nothing written past the value");
}

/* Refused with NSV_EINVAL and a detail containing `says`. */
static void sc_bad(const char *name, size_t nl, const char *value, size_t vl, const char *path, const char *domain,
                   int64_t expires, uint32_t flags, const char *says, const char *what)
{
    size_t pl = path ? strlen(path) : 0, dl = domain ? strlen(domain) : 0;
    memset(out, '#', sizeof out);
    int64_t rc = nsv_set_cookie(name, nl, value, vl, path, pl, domain, dl, -1, expires, flags, out, sizeof out);
    const char *d = nsv_last_error_detail(NULL);
    if (!ok(rc == NSV_EINVAL && strstr(d, says) && out[0] == '#', "set-cookie refuses %s", what))
        diag("rc %lld, detail '%s'", (long long)rc, d);
}

static void test_set_cookie(void)
{
    sc_ok("sid", "abc", NULL, NULL, -1, -1, 0, "sid=abc");
    sc_ok("sid", "abc", "/", "example.com", 3600, 1767225600,
          NSV_COOKIE_SECURE | NSV_COOKIE_HTTPONLY | NSV_COOKIE_SAMESITE_LAX,
          "sid=abc; Path=/; Max-Age=3600; Expires=Thu, 01 Jan 2026 00:00:00 GMT; Domain=example.com; Secure; "
          "HttpOnly; SameSite=Lax");
    sc_ok("a", "", NULL, NULL, 0, 0, 0, "a=; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:00 GMT");
    sc_ok("a", "\"quoted\"", NULL, NULL, -1, -1, 0, "a=\"quoted\"");
    sc_ok("a", "\"\"", NULL, NULL, -1, -1, 0, "a=\"\"");
    sc_ok("a", "v", NULL, NULL, INT64_MAX, -1, 0, "a=v; Max-Age=9223372036854775807");
    sc_ok("a", "v", NULL, NULL, -1, -1, NSV_COOKIE_SAMESITE_STRICT, "a=v; SameSite=Strict");
    sc_ok("a", "v", NULL, NULL, -1, -1, NSV_COOKIE_SECURE | NSV_COOKIE_SAMESITE_NONE | NSV_COOKIE_PARTITIONED,
          "a=v; Secure; SameSite=None; Partitioned");
    sc_ok("a", "v", NULL, NULL, -1, -1, NSV_COOKIE_HTTPONLY, "a=v; HttpOnly");
    sc_ok("a", "v", "/a path/x", ".Example.COM", -1, -1, 0, "a=v; Path=/a path/x; Domain=.Example.COM");
    sc_ok("__Host-id", "1", "/", NULL, -1, -1, NSV_COOKIE_SECURE, "__Host-id=1; Path=/; Secure");
    sc_ok("__Secure-id", "1", "/x", "example.com", -1, -1, NSV_COOKIE_SECURE,
          "__Secure-id=1; Path=/x; Domain=example.com; Secure");
    sc_ok("__Hos-id", "1", NULL, NULL, -1, -1, 0, "__Hos-id=1");
    /* Every token character in a name, every cookie-octet in a value. */
    sc_ok("!#$%&'*+-.^_`|~09AZaz", "!#$%&'()*+-./09:<=>?@AZ[]^_`az{|}~", NULL, NULL, -1, -1, 0,
          "!#$%&'*+-.^_`|~09AZaz=!#$%&'()*+-./09:<=>?@AZ[]^_`az{|}~");

    /* Expires: IMF-fixdate (expected values from Python's
     * email.utils.formatdate(t, usegmt=True)). */
    static const struct {
        int64_t t;
        const char *date;
    } dates[] = {
        {0, "Thu, 01 Jan 1970 00:00:00 GMT"},
        {1767225600, "Thu, 01 Jan 2026 00:00:00 GMT"},
        {951782400, "Tue, 29 Feb 2000 00:00:00 GMT"},
        {951868799, "Tue, 29 Feb 2000 23:59:59 GMT"},
        {4107542400, "Mon, 01 Mar 2100 00:00:00 GMT"},
        {253402300799, "Fri, 31 Dec 9999 23:59:59 GMT"},
        {1234567890, "Fri, 13 Feb 2009 23:31:30 GMT"},
        {86399, "Thu, 01 Jan 1970 23:59:59 GMT"},
        {2147483647, "Tue, 19 Jan 2038 03:14:07 GMT"},
        {2147483648, "Tue, 19 Jan 2038 03:14:08 GMT"},
    };
    for (size_t i = 0; i < NSV__ARRAY_LEN(dates); i++) {
        char want[64];
        snprintf(want, sizeof want, "a=b; Expires=%s", dates[i].date);
        sc_ok("a", "b", NULL, NULL, -1, dates[i].t, 0, want);
    }

    /* Encoder convention. */
    is_int(nsv_set_cookie(S("a"), S("b"), NULL, 0, NULL, 0, -1, -1, 0, NULL, 0), 3, "set-cookie sizing");
    memset(out, '#', 8);
    is_int(nsv_set_cookie(S("a"), S("b"), NULL, 0, NULL, 0, -1, -1, 0, out, 2), 3, "set-cookie short cap");
    ok(out[0] == '#', "set-cookie short cap writes nothing");

    /* Refusals. */
    sc_bad("", 0, S("v"), NULL, NULL, -1, 0, "empty", "an empty name");
    sc_bad(S("a b"), S("v"), NULL, NULL, -1, 0, "name byte 1 (0x20)", "a space in the name");
    sc_bad(S("a=b"), S("v"), NULL, NULL, -1, 0, "name byte 1", "'=' in the name");
    sc_bad(S("a;"), S("v"), NULL, NULL, -1, 0, "name", "';' in the name");
    sc_bad(S("a\""), S("v"), NULL, NULL, -1, 0, "name", "'\"' in the name");
    sc_bad(S("(a)"), S("v"), NULL, NULL, -1, 0, "name", "'(' in the name");
    sc_bad(S("a\000"), S("v"), NULL, NULL, -1, 0, "name byte 1 (0x00)", "NUL in the name");
    sc_bad(S("\303\251"), S("v"), NULL, NULL, -1, 0, "name byte 0 (0xc3)", "non-ASCII name");
    sc_bad(S("a"), S("x y"), NULL, NULL, -1, 0, "value byte 1 (0x20)", "a space in the value");
    sc_bad(S("a"), S("x;y"), NULL, NULL, -1, 0, "value byte 1 (0x3b)", "';' in the value");
    sc_bad(S("a"), S("x,y"), NULL, NULL, -1, 0, "value", "',' in the value");
    sc_bad(S("a"), S("x\\y"), NULL, NULL, -1, 0, "value", "'\\' in the value");
    sc_bad(S("a"), S("x\"y"), NULL, NULL, -1, 0, "value", "an inner '\"'");
    sc_bad(S("a"), S("\""), NULL, NULL, -1, 0, "value byte 0", "a lone '\"'");
    sc_bad(S("a"), S("\"x"), NULL, NULL, -1, 0, "value byte 0", "an unclosed '\"'");
    sc_bad(S("a"), S("\"a\"b\""), NULL, NULL, -1, 0, "value byte 2", "a '\"' inside quotes");
    sc_bad(S("a"), S("\" \""), NULL, NULL, -1, 0, "value byte 1", "a space inside quotes");
    sc_bad(S("a"), S("x\000"), NULL, NULL, -1, 0, "value byte 1 (0x00)", "NUL in the value");
    sc_bad(S("a"), S("x\r\nSet-Cookie: evil=1"), NULL, NULL, -1, 0, "value byte 1 (0x0d)", "CRLF in the value");
    sc_bad(S("a"), S("x\177"), NULL, NULL, -1, 0, "value byte 1 (0x7f)", "DEL in the value");
    sc_bad(S("a"), S("\303\251"), NULL, NULL, -1, 0, "value byte 0 (0xc3)", "non-ASCII value");
    sc_bad(S("a"), S("v"), "/x;y", NULL, -1, 0, "path byte 2 (0x3b)", "';' in the path");
    sc_bad(S("a"), S("v"), "/x\ny", NULL, -1, 0, "path byte 2 (0x0a)", "LF in the path");
    sc_bad(S("a"), S("v"), "/\303\251", NULL, -1, 0, "path byte 1", "non-ASCII path");
    sc_bad(S("a"), S("v"), NULL, "ex;ample.com", -1, 0, "domain byte 2", "';' in the domain");
    sc_bad(S("a"), S("v"), NULL, "ex ample.com", -1, 0, "domain byte 2 (0x20)", "space in the domain");
    sc_bad(S("a"), S("v"), NULL, "a.com,b.com", -1, 0, "domain byte 5", "',' in the domain");
    sc_bad(S("a"), S("v"), NULL, "a\tb", -1, 0, "domain byte 1", "tab in the domain");
    sc_bad(S("a"), S("v"), NULL, NULL, 253402300800, 0, "year 9999", "expires past year 9999");
    sc_bad(S("a"), S("v"), NULL, NULL, INT64_MAX, 0, "year 9999", "expires INT64_MAX");
    sc_bad(S("a"), S("v"), NULL, NULL, -1, 64, "unknown flag bits 0x40", "flag 64");
    sc_bad(S("a"), S("v"), NULL, NULL, -1, 0x80000000u, "unknown flag bits", "flag bit 31");
    sc_bad(S("a"), S("v"), NULL, NULL, -1, NSV_COOKIE_SAMESITE_LAX | NSV_COOKIE_SAMESITE_STRICT, "more than one",
           "Lax and Strict");
    sc_bad(S("a"), S("v"), NULL, NULL, -1,
           NSV_COOKIE_SECURE | NSV_COOKIE_SAMESITE_STRICT | NSV_COOKIE_SAMESITE_NONE, "more than one",
           "Strict and None");
    sc_bad(S("a"), S("v"), NULL, NULL, -1, NSV_COOKIE_SAMESITE_NONE, "SameSite=None", "None without Secure");
    sc_bad(S("a"), S("v"), NULL, NULL, -1, NSV_COOKIE_PARTITIONED, "Partitioned",
           "Partitioned without Secure");
    sc_bad(S("__Secure-a"), S("v"), NULL, NULL, -1, 0, "__Secure-", "__Secure- without Secure");
    sc_bad(S("__secure-a"), S("v"), NULL, NULL, -1, 0, "__Secure-", "__secure- (any case) without Secure");
    sc_bad(S("__Host-a"), S("v"), "/", NULL, -1, 0, "__Host-", "__Host- without Secure");
    sc_bad(S("__Host-a"), S("v"), NULL, NULL, -1, NSV_COOKIE_SECURE, "__Host-", "__Host- without a path");
    sc_bad(S("__Host-a"), S("v"), "/x", NULL, -1, NSV_COOKIE_SECURE, "__Host-", "__Host- with path /x");
    sc_bad(S("__HOST-a"), S("v"), "/", "example.com", -1, NSV_COOKIE_SECURE, "__Host-",
           "__HOST- with a domain");
    sc_bad(NULL, 1, S("v"), NULL, NULL, -1, 0, "name is NULL", "a NULL name");
    sc_bad(S("a"), NULL, 1, NULL, NULL, -1, 0, "value is NULL", "a NULL value");
    is_int(nsv_set_cookie(S("a"), S("b"), NULL, 1, NULL, 0, -1, -1, 0, out, sizeof out), NSV_EINVAL,
           "set-cookie: NULL path with a length");
    is_int(nsv_set_cookie(S("a"), S("b"), NULL, 0, NULL, 1, -1, -1, 0, out, sizeof out), NSV_EINVAL,
           "set-cookie: NULL domain with a length");
    is_int(nsv_set_cookie(S("a"), S("b"), NULL, 0, NULL, 0, -1, -1, 0, NULL, 4), NSV_EINVAL,
           "set-cookie: NULL dst with cap");
    /* A negative max_age or expires is absent, whatever its value. */
    sc_ok("a", "v", NULL, NULL, INT64_MIN, INT64_MIN, 0, "a=v");
    /* Values built here parse back. */
    int64_t n = nsv_set_cookie(S("k"), S("\"v\""), S("/"), NULL, 0, 5, -1, NSV_COOKIE_HTTPONLY, out, sizeof out);
    uint32_t pairs[4 * 4], np = 0;
    char dst[64];
    ok(n > 0 && nsv_cookie_parse(out, (size_t)n, pairs, 4, dst, sizeof dst, &np) >= 0 && np == 3 &&
           pairs[1] == 1 && dst[0] == 'k' && pairs[3] == 1 && dst[pairs[2]] == 'v',
       "set-cookie output parses back to k=v (plus Path and Max-Age)");
}

int main(void)
{
    test_form_table();
    test_form_buffers();
    test_form_large();
    test_cookie_table();
    test_cookie_buffers();
    test_set_cookie();
    return done_testing();
}
