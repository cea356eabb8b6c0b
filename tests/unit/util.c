/* util.c - unit tests for base64, percent-encoding, URL parsing and JSON. */
#include "internal.h"
#include "tap.h"

#include <locale.h>
#include <math.h>

#define S(x) x, sizeof(x) - 1

static char out[4096];

/* ---- base64 ---- */

static void b64_vector(const char *plain, const char *enc)
{
    int64_t n = nsv_base64_encode(plain, strlen(plain), out, sizeof out);
    is_mem(out, n < 0 ? 0 : n, enc, "encode \"%s\"", plain);
    n = nsv_base64_decode(enc, strlen(enc), out, sizeof out);
    is_mem(out, n < 0 ? 0 : n, plain, "decode \"%s\"", enc);
}

static void test_base64(void)
{
    /* RFC 4648 section 10. */
    b64_vector("", "");
    b64_vector("f", "Zg==");
    b64_vector("fo", "Zm8=");
    b64_vector("foo", "Zm9v");
    b64_vector("foob", "Zm9vYg==");
    b64_vector("fooba", "Zm9vYmE=");
    b64_vector("foobar", "Zm9vYmFy");

    is_int(nsv_base64_decode(S("Zm9vYg"), out, sizeof out), 4, "padding optional (2 digits)");
    is_int(nsv_base64_decode(S("Zm9vYmE"), out, sizeof out), 5, "padding optional (3 digits)");
    is_int(nsv_base64_decode(S("Zm9v YmFy"), out, sizeof out), NSV_EPARSE, "space rejected");
    is_int(nsv_base64_decode(S("Zm9v\nYmFy"), out, sizeof out), NSV_EPARSE, "newline rejected");
    is_int(nsv_base64_decode(S("Zm9vY"), out, sizeof out), NSV_EPARSE, "one dangling digit");
    is_int(nsv_base64_decode(S("Zm9vYg="), out, sizeof out), NSV_EPARSE, "partial padding");
    is_int(nsv_base64_decode(S("Zm9vYg==="), out, sizeof out), NSV_EPARSE, "too much padding");
    is_int(nsv_base64_decode(S("Zg==Zg=="), out, sizeof out), NSV_EPARSE, "padding in the middle");
    is_int(nsv_base64_decode(S("Zh=="), out, sizeof out), NSV_EPARSE, "non-zero pad bits");
    is_int(nsv_base64_decode(S("Zm9-"), out, sizeof out), NSV_EPARSE, "url-safe alphabet rejected");
    is_int(nsv_base64_decode(S("===="), out, sizeof out), NSV_EPARSE, "only padding");

    const unsigned char bin[] = {0, 0xff, 0xfe, 0x80, 0x7f, 0x10};
    int64_t n = nsv_base64_encode((const char *)bin, sizeof bin, out, sizeof out);
    is_mem(out, n, "AP/+gH8Q", "binary encode");
    char back[16];
    ok(nsv_base64_decode(out, (size_t)n, back, sizeof back) == 6 && memcmp(back, bin, 6) == 0,
       "binary round trip");

    /* Small cap: the needed length comes back and nothing is written. */
    memset(out, '#', 16);
    is_int(nsv_base64_encode(S("foobar"), out, 7), 8, "encode needs 8");
    ok(out[0] == '#' && out[7] == '#', "encode wrote nothing with a small cap");
    is_int(nsv_base64_encode(S("foobar"), NULL, 0), 8, "sizing call");
    memset(out, '#', 16);
    is_int(nsv_base64_decode(S("Zm9vYmFy"), out, 5), 6, "decode needs 6");
    ok(out[0] == '#', "decode wrote nothing with a small cap");
    is_int(nsv_base64_decode(S("Zm9vYmFy"), out, 6), 6, "exact cap");
    ok(out[6] == '#', "nothing beyond cap");
    is_int(nsv_base64_decode(S("!!!!"), NULL, 0), NSV_EPARSE, "bad input reported when sizing");
    is_int(nsv_base64_encode(NULL, 3, out, 4), NSV_EINVAL, "NULL source");
    is_int(nsv_base64_encode("a", 1, NULL, 4), NSV_EINVAL, "NULL dst with cap");
}

/* ---- percent-encoding ---- */

static void test_url_codec(void)
{
    int64_t n = nsv_url_encode(S("a b/c?d=é~-._"), out, sizeof out);
    is_mem(out, n, "a%20b%2Fc%3Fd%3D%C3%A9~-._", "encode");
    is_int(nsv_url_encode(S("AZaz09"), out, sizeof out), 6, "unreserved kept");
    memset(out, '#', 8);
    is_int(nsv_url_encode(S("  "), out, 5), 6, "encode small cap");
    ok(out[0] == '#', "nothing written");
    is_int(nsv_url_encode(NULL, 0, NULL, 0), 0, "empty");

    n = nsv_url_decode(S("a%20b%2fc%3F+x"), out, sizeof out, 0);
    is_mem(out, n, "a b/c?+x", "decode keeps '+'");
    n = nsv_url_decode(S("a%20b+x+"), out, sizeof out, 1);
    is_mem(out, n, "a b x ", "form decode turns '+' into ' '");
    n = nsv_url_decode(S("%2B"), out, sizeof out, 1);
    is_mem(out, n, "+", "form decode of %%2B");
    n = nsv_url_decode(S("%00x"), out, sizeof out, 0);
    ok(n == 2 && out[0] == 0 && out[1] == 'x', "%%00 gives a NUL byte");
    is_int(nsv_url_decode(S("%"), out, sizeof out, 0), NSV_EPARSE, "lone %%");
    is_int(nsv_url_decode(S("ab%4"), out, sizeof out, 0), NSV_EPARSE, "truncated escape");
    is_int(nsv_url_decode(S("%zz"), out, sizeof out, 0), NSV_EPARSE, "non-hex escape");
    is_int(nsv_url_decode(S("%4g"), out, sizeof out, 0), NSV_EPARSE, "half-hex escape");
    memset(out, '#', 8);
    is_int(nsv_url_decode(S("ok%zz"), out, sizeof out, 0), NSV_EPARSE, "bad escape late");
    ok(out[0] == '#', "bad input writes nothing");
    is_int(nsv_url_decode(S("abc%20"), out, 3, 0), 4, "decode small cap returns need");
    ok(out[0] == '#', "small cap writes nothing");

    static const char all[] = "\x01 !\"#$%&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~\x7f\x80\xff";
    char enc[512], dec[128];
    int64_t e = nsv_url_encode(all, sizeof all - 1, enc, sizeof enc);
    int64_t d = nsv_url_decode(enc, (size_t)e, dec, sizeof dec, 1);
    ok(d == (int64_t)sizeof all - 1 && memcmp(dec, all, sizeof all - 1) == 0,
       "encode/decode round trip (form mode too)");
}

/* ---- URL parsing ---- */

typedef struct url_case {
    const char *url;
    int rc;
    const char *host, *path, *query;
    int port, tls;
} url_case;

static void test_url_parse(void)
{
    static const url_case cases[] = {
        {"http://example.com", 0, "example.com", "", "", 80, 0},
        {"http://example.com/", 0, "example.com", "/", "", 80, 0},
        {"https://example.com:8443/a/b?x=1&y=2#frag", 0, "example.com", "/a/b", "x=1&y=2", 8443, 1},
        {"ws://127.0.0.1:9000/chat", 0, "127.0.0.1", "/chat", "", 9000, 0},
        {"wss://h/s", 0, "h", "/s", "", 443, 1},
        {"tcp://0.0.0.0:7000", 0, "0.0.0.0", "", "", 7000, 0},
        {"tls://host:993", 0, "host", "", "", 993, 1},
        {"HTTP://Example.COM:0", 0, "Example.COM", "", "", 0, 0},
        {"http://[::1]:8080/x", 0, "::1", "/x", "", 8080, 0},
        {"http://[::1]", 0, "::1", "", "", 80, 0},
        {"https://[2001:db8::1]/", 0, "2001:db8::1", "/", "", 443, 1},
        {"http://[::ffff:1.2.3.4]:1", 0, "::ffff:1.2.3.4", "", "", 1, 0},
        {"http://user:pass@host:81/p", 0, "host", "/p", "", 81, 0},
        {"http://a@b@host/", 0, "host", "/", "", 80, 0},
        {"http://host?q", 0, "host", "", "q", 80, 0},
        {"http://host#f", 0, "host", "", "", 80, 0},
        {"http://host/p?#f", 0, "host", "/p", "", 80, 0},
        {"http://host/p?a?b#c?d", 0, "host", "/p", "a?b", 80, 0},
        {"http://host:65535", 0, "host", "", "", 65535, 0},
        {"http://host:00080", 0, "host", "", "", 80, 0},
        {"http://localhost:1/a%20b", 0, "localhost", "/a%20b", "", 1, 0},

        {"http://host:65536", NSV_EURL, 0, 0, 0, 0, 0},
        {"http://host:99999", NSV_EURL, 0, 0, 0, 0, 0},
        {"http://host:123456", NSV_EURL, 0, 0, 0, 0, 0},
        {"http://host:-1", NSV_EURL, 0, 0, 0, 0, 0},
        {"http://host:8a", NSV_EURL, 0, 0, 0, 0, 0},
        {"http://host:", NSV_EURL, 0, 0, 0, 0, 0},
        {"http://host:+80", NSV_EURL, 0, 0, 0, 0, 0},
        {"http://", NSV_EURL, 0, 0, 0, 0, 0},
        {"http:///path", NSV_EURL, 0, 0, 0, 0, 0},
        {"http://:80", NSV_EURL, 0, 0, 0, 0, 0},
        {"http://user@", NSV_EURL, 0, 0, 0, 0, 0},
        {"http://[::1", NSV_EURL, 0, 0, 0, 0, 0},
        {"http://[]:80", NSV_EURL, 0, 0, 0, 0, 0},
        {"http://[::1]x", NSV_EURL, 0, 0, 0, 0, 0},
        {"http://[zz::1]", NSV_EURL, 0, 0, 0, 0, 0},
        {"http://[1.2.3.4]", NSV_EURL, 0, 0, 0, 0, 0},
        {"http://ho st", NSV_EURL, 0, 0, 0, 0, 0},
        {"http://host/a b", NSV_EURL, 0, 0, 0, 0, 0},
        {"http://h:1:2", NSV_EURL, 0, 0, 0, 0, 0},
        {"ftp://host", NSV_EURL, 0, 0, 0, 0, 0},
        {"host:80", NSV_EURL, 0, 0, 0, 0, 0},
        {"http:/host", NSV_EURL, 0, 0, 0, 0, 0},
        {"tcp://host", NSV_EURL, 0, 0, 0, 0, 0},
        {"tls://host/", NSV_EURL, 0, 0, 0, 0, 0},
        {"", NSV_EURL, 0, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < NSV__ARRAY_LEN(cases); i++) {
        const url_case *c = &cases[i];
        nsv_url u;
        int rc = nsv_url_parse(c->url, strlen(c->url), &u);
        if (c->rc) {
            is_int(rc, c->rc, "'%s' rejected", c->url);
            continue;
        }
        int good = rc == 0 && u.port == c->port && u.is_tls == c->tls &&
                   u.host_len == strlen(c->host) && memcmp(c->url + u.host_off, c->host, u.host_len) == 0 &&
                   u.path_len == strlen(c->path) && memcmp(c->url + u.path_off, c->path, u.path_len) == 0 &&
                   u.query_len == strlen(c->query) && memcmp(c->url + u.query_off, c->query, u.query_len) == 0;
        if (!ok(good, "'%s' parsed", c->url) && rc == 0)
            diag("got rc %d host '%.*s' path '%.*s' query '%.*s' port %d tls %d", rc,
                 (int)u.host_len, c->url + u.host_off, (int)u.path_len, c->url + u.path_off,
                 (int)u.query_len, c->url + u.query_off, u.port, u.is_tls);
    }
    nsv_url u;
    const char *s = "wss://h:1/x";
    is_int(nsv_url_parse(s, strlen(s), &u), 0, "scheme offsets");
    is_mem(s + u.scheme_off, u.scheme_len, "wss", "scheme text");
    is_int(nsv_url_parse(s, strlen(s), NULL), NSV_EINVAL, "NULL out");
    is_int(nsv_url_parse(NULL, 0, &u), NSV_EINVAL, "NULL url");
    is_int(nsv_url_parse("http://a:80/\0", 13, &u), NSV_EURL, "embedded NUL");
}

/* ---- JSON ---- */

#define JSTR(doc, path) jstr(doc, path)
static int64_t jstr(const char *doc, const char *path)
{
    return nsv_json_string(doc, strlen(doc), path, strlen(path), out, sizeof out);
}

static void test_json_paths(void)
{
    const char *doc = " { \"a\": {\"b\": \"deep\", \"n\": [10, {\"x\": \"in array\"}, [\"q\"]]},"
                      " \"s\": \"top\", \"e\": [], \"o\": {}, \"t\": true, \"f\": false, \"z\": null,"
                      " \"a.b\": \"dotted\", \"dup\": 1, \"dup\": 2 } ";
    int64_t n = JSTR(doc, "$.a.b");
    is_mem(out, n, "deep", "$.a.b");
    n = JSTR(doc, "$.s");
    is_mem(out, n, "top", "$.s");
    n = JSTR(doc, "$.a.n[1].x");
    is_mem(out, n, "in array", "$.a.n[1].x");
    n = JSTR(doc, "$.a.n[2][0]");
    is_mem(out, n, "q", "$.a.n[2][0]");
    is_int(JSTR(doc, "$.a.n[3]"), NSV_ENOTFOUND, "index past end");
    is_int(JSTR(doc, "$.e[0]"), NSV_ENOTFOUND, "empty array");
    is_int(JSTR(doc, "$.o.k"), NSV_ENOTFOUND, "empty object");
    is_int(JSTR(doc, "$.missing"), NSV_ENOTFOUND, "missing key");
    is_int(JSTR(doc, "$.a.b.c"), NSV_ENOTFOUND, "path through a string");
    is_int(JSTR(doc, "$.a[0]"), NSV_ENOTFOUND, "index into object");
    is_int(JSTR(doc, "$.a.n.x"), NSV_ENOTFOUND, "key into array");
    is_int(JSTR(doc, "$.t"), NSV_ENOTFOUND, "bool is not a string");
    is_int(JSTR(doc, "$.a.b.c"), NSV_ENOTFOUND, "string has no members");
    is_int(JSTR(doc, "$"), NSV_ENOTFOUND, "root is an object");
    is_int(JSTR(doc, "$.a.b"), 4, "length returned");
    int64_t d;
    is_int(nsv_json_integer(doc, strlen(doc), S("$.dup"), &d), 0, "duplicate key");
    is_int(d, 2, "last duplicate wins");
    is_int(nsv_json_integer(doc, strlen(doc), S("$.a.n[0]"), &d), 0, "$.a.n[0]");
    is_int(d, 10, "array element value");

    n = nsv_json_string(S("\"root\""), S("$"), out, sizeof out);
    is_mem(out, n, "root", "root scalar string");
    n = nsv_json_string(S("[\"x\",\"y\"]"), S("$[1]"), out, sizeof out);
    is_mem(out, n, "y", "$[1]");
    n = nsv_json_string(S("{\"k\\u0065y\":\"escaped key\"}"), S("$.key"), out, sizeof out);
    is_mem(out, n, "escaped key", "key compared unescaped");
    n = nsv_json_string(S("{\"\xc3\xa9\":\"utf8 key\"}"), S("$.\xc3\xa9"), out, sizeof out);
    is_mem(out, n, "utf8 key", "UTF-8 key");

    is_int(JSTR(doc, ""), NSV_EINVAL, "empty path");
    is_int(JSTR(doc, "a"), NSV_EINVAL, "path without $");
    is_int(JSTR(doc, "$."), NSV_EINVAL, "empty key");
    is_int(JSTR(doc, "$.a..b"), NSV_EINVAL, "empty middle key");
    is_int(JSTR(doc, "$[]"), NSV_EINVAL, "empty index");
    is_int(JSTR(doc, "$[1"), NSV_EINVAL, "unclosed index");
    is_int(JSTR(doc, "$[-1]"), NSV_EINVAL, "negative index");
    is_int(JSTR(doc, "$a"), NSV_EINVAL, "missing dot");
    is_int(JSTR(doc, "$[0]x"), NSV_EINVAL, "junk after index");
    is_int(JSTR("[1]", "$[99999999999999999999999]"), NSV_ENOTFOUND, "huge index");
}

static void test_json_strings(void)
{
    int64_t n = nsv_json_string(S("\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\""), S("$"), out, sizeof out);
    is_mem(out, n, "a\"b\\c/d\b\f\n\r\t", "simple escapes");
    n = nsv_json_string(S("\"\\u0041\\u00e9\\u20AC\""), S("$"), out, sizeof out);
    is_mem(out, n, "A\xc3\xa9\xe2\x82\xac", "\\u escapes to UTF-8");
    n = nsv_json_string(S("\"\\ud83d\\ude00!\""), S("$"), out, sizeof out);
    is_mem(out, n, "\xf0\x9f\x98\x80!", "surrogate pair");
    n = nsv_json_string(S("\"\\uDBFF\\uDFFF\""), S("$"), out, sizeof out);
    is_mem(out, n, "\xf4\x8f\xbf\xbf", "highest code point");
    n = nsv_json_string(S("\"x\\u0000y\""), S("$"), out, sizeof out);
    ok(n == 3 && out[1] == 0, "\\u0000 gives a NUL byte");
    n = nsv_json_string(S("\"\xf0\x9f\x98\x80 raw\""), S("$"), out, sizeof out);
    is_mem(out, n, "\xf0\x9f\x98\x80 raw", "raw UTF-8 kept");
    n = nsv_json_string(S("\"\""), S("$"), NULL, 0);
    is_int(n, 0, "empty string, no buffer");

    is_int(nsv_json_string(S("\"\\ud83d\""), S("$"), out, sizeof out), NSV_EPARSE, "lone high surrogate");
    is_int(nsv_json_string(S("\"\\ude00\""), S("$"), out, sizeof out), NSV_EPARSE, "lone low surrogate");
    is_int(nsv_json_string(S("\"\\ud83dx\""), S("$"), out, sizeof out), NSV_EPARSE, "high + text");
    is_int(nsv_json_string(S("\"\\ud83d\\u0041\""), S("$"), out, sizeof out), NSV_EPARSE, "high + non-low");
    is_int(nsv_json_string(S("\"\\ud83d\\ud83d\""), S("$"), out, sizeof out), NSV_EPARSE, "high + high");
    is_int(nsv_json_string(S("\"\\u12\""), S("$"), out, sizeof out), NSV_EPARSE, "short \\u");
    is_int(nsv_json_string(S("\"\\u12g4\""), S("$"), out, sizeof out), NSV_EPARSE, "non-hex \\u");
    is_int(nsv_json_string(S("\"\\x\""), S("$"), out, sizeof out), NSV_EPARSE, "unknown escape");
    is_int(nsv_json_string(S("\"\\'\""), S("$"), out, sizeof out), NSV_EPARSE, "\\' is not JSON");
    is_int(nsv_json_string(S("\"a\tb\""), S("$"), out, sizeof out), NSV_EPARSE, "raw control char");
    is_int(nsv_json_string(S("\"abc"), S("$"), out, sizeof out), NSV_EPARSE, "unterminated");
    is_int(nsv_json_string(S("\"abc\\"), S("$"), out, sizeof out), NSV_EPARSE, "backslash at end");
    is_int(nsv_json_string(S("\"\xc3\""), S("$"), out, sizeof out), NSV_EPARSE, "truncated UTF-8");
    is_int(nsv_json_string(S("\"\xc0\xaf\""), S("$"), out, sizeof out), NSV_EPARSE, "overlong UTF-8");
    is_int(nsv_json_string(S("\"\xed\xa0\x80\""), S("$"), out, sizeof out), NSV_EPARSE, "UTF-8 surrogate");
    is_int(nsv_json_string(S("\"\xf4\x90\x80\x80\""), S("$"), out, sizeof out), NSV_EPARSE, "above U+10FFFF");
    is_int(nsv_json_string(S("\"\xff\""), S("$"), out, sizeof out), NSV_EPARSE, "0xff byte");

    /* Small cap: needed length back, nothing written. */
    memset(out, '#', 16);
    is_int(nsv_json_string(S("{\"k\":\"\\u00e9t\\u00e9\"}"), S("$.k"), out, 4), 5, "needs 5 bytes");
    ok(out[0] == '#', "nothing written with a small cap");
    is_int(nsv_json_string(S("{\"k\":\"\\u00e9t\\u00e9\"}"), S("$.k"), out, 5), 5, "exact cap");
    ok(out[5] == '#', "nothing beyond cap");
}

static void test_json_numbers(void)
{
    static const struct {
        const char *doc;
        double want;
    } good[] = {
        {"0", 0}, {"-0", 0}, {"1", 1}, {"-12.5", -12.5}, {"1e3", 1000}, {"1E+3", 1000},
        {"2.5e-3", 0.0025}, {"123456789012345678901234567890", 1.2345678901234568e29},
        {"0.1", 0.1}, {"1e-400", 0},
    };
    for (size_t i = 0; i < NSV__ARRAY_LEN(good); i++) {
        double v = -1;
        int rc = nsv_json_number(good[i].doc, strlen(good[i].doc), S("$"), &v);
        ok(rc == 0 && v == good[i].want, "number %s", good[i].doc);
    }
    static const char *bad[] = {"01", "-", "+1", "1.", ".5", "1e", "1e+", "--1", "0x10",
                                "1.e5", "NaN", "Infinity", "-Infinity", "1 2", "- 1", "00"};
    for (size_t i = 0; i < NSV__ARRAY_LEN(bad); i++) {
        double v;
        is_int(nsv_json_number(bad[i], strlen(bad[i]), S("$"), &v), NSV_EPARSE, "bad number '%s'", bad[i]);
    }
    double v;
    is_int(nsv_json_number(S("1e400"), S("$"), &v), NSV_ERANGE, "overflow to infinity");
    is_int(nsv_json_number(S("\"1\""), S("$"), &v), NSV_ENOTFOUND, "string is not a number");
    is_int(nsv_json_number(S("{\"a\":[1,2.5]}"), S("$.a[1]"), &v), 0, "nested number");
    ok(v == 2.5, "nested number value");

    char longnum[400];
    memset(longnum, '1', sizeof longnum - 1);
    longnum[sizeof longnum - 1] = 0;
    longnum[1] = '.';
    ok(nsv_json_number(longnum, strlen(longnum), S("$"), &v) == 0 && fabs(v - 1.1111111111111112) < 1e-15,
       "long number");

    /* A comma locale must not change the result. */
    const char *loc = setlocale(LC_NUMERIC, "de_DE.UTF-8");
    if (!loc)
        loc = setlocale(LC_NUMERIC, "fr_FR.UTF-8");
    ok(nsv_json_number(S("3.75"), S("$"), &v) == 0 && v == 3.75, "decimal point independent of locale (%s)",
       loc ? loc : "no comma locale installed");
    setlocale(LC_NUMERIC, "C");
}

static void test_json_integers(void)
{
    static const struct {
        const char *doc;
        int rc;
        int64_t want;
    } cases[] = {
        {"0", 0, 0}, {"-0", 0, 0}, {"42", 0, 42}, {"-42", 0, -42}, {"1.0", 0, 1},
        {"1.50e1", 0, 15}, {"1e3", 0, 1000}, {"10e-1", 0, 1}, {"1200e-2", 0, 12},
        {"0.0e99999999999999999999", 0, 0}, {"0.00", 0, 0},
        {"9223372036854775807", 0, INT64_MAX}, {"-9223372036854775808", 0, INT64_MIN},
        {"9.223372036854775807e18", 0, INT64_MAX}, {"1e18", 0, 1000000000000000000LL},
        {"1.5", NSV_ERANGE, 0}, {"0.1", NSV_ERANGE, 0}, {"1e-1", NSV_ERANGE, 0},
        {"9223372036854775808", NSV_ERANGE, 0}, {"-9223372036854775809", NSV_ERANGE, 0},
        {"1e19", NSV_ERANGE, 0}, {"18446744073709551616", NSV_ERANGE, 0},
        {"99999999999999999999", NSV_ERANGE, 0}, {"1e99999999999999999999", NSV_ERANGE, 0},
        {"1e-99999999999999999999", NSV_ERANGE, 0}, {"true", NSV_ENOTFOUND, 0},
        {"1.", NSV_EPARSE, 0},
    };
    for (size_t i = 0; i < NSV__ARRAY_LEN(cases); i++) {
        int64_t v = 12345;
        int rc = nsv_json_integer(cases[i].doc, strlen(cases[i].doc), S("$"), &v);
        if (!ok(rc == cases[i].rc && (rc != 0 || v == cases[i].want), "integer %s", cases[i].doc))
            diag("got rc %d value %lld", rc, (long long)v);
    }
}

static void test_json_misc(void)
{
    int b = -1;
    is_int(nsv_json_boolean(S("{\"t\":true,\"f\":false}"), S("$.t"), &b), 0, "true");
    is_int(b, 1, "true value");
    is_int(nsv_json_boolean(S("{\"t\":true,\"f\":false}"), S("$.f"), &b), 0, "false");
    is_int(b, 0, "false value");
    is_int(nsv_json_boolean(S("[null]"), S("$[0]"), &b), NSV_ENOTFOUND, "null is not a boolean");
    is_int(nsv_json_boolean(S("[1]"), S("$[0]"), &b), NSV_ENOTFOUND, "1 is not a boolean");
    is_int(nsv_json_boolean(S("tru"), S("$"), &b), NSV_EPARSE, "truncated literal");
    is_int(nsv_json_boolean(S("True"), S("$"), &b), NSV_EPARSE, "capitalised literal");
    is_int(nsv_json_boolean(S("true"), S("$"), NULL), NSV_EINVAL, "NULL out");

    static const char *bad[] = {
        "", "   ", "{", "}", "[", "[1,]", "[,1]", "{\"a\"}", "{\"a\":}", "{\"a\":1,}",
        "{a:1}", "{'a':1}", "[1 2]", "{\"a\":1 \"b\":2}", "[1]]", "{} {}", "nul",
        "[1,2", "{\"a\":1", "/* c */ 1", "\xef\xbb\xbf{}", "[\"a\"\x00]", "\x0b 1",
    };
    for (size_t i = 0; i < NSV__ARRAY_LEN(bad); i++) {
        int64_t v;
        size_t len = i == 21 ? 6 : strlen(bad[i]);
        is_int(nsv_json_integer(bad[i], len, S("$"), &v), NSV_EPARSE, "invalid JSON #%zu", i);
    }
    /* A bad document is reported even when the path lies before the error. */
    int64_t v;
    size_t n;
    is_int(nsv_json_integer(S("{\"a\":1,\"b\":[}"), S("$.a"), &v), NSV_EPARSE, "error after the target");
    is_int(nsv_json_integer(S(" \t\r\n[ 7 ] \n"), S("$[0]"), &v), 0, "whitespace everywhere");
    is_int(v, 7, "value with whitespace");
    is_int(nsv_json_integer(NULL, 0, S("$"), &v), NSV_EPARSE, "NULL empty document");
    is_int(nsv_json_integer("1", 1, NULL, 0, &v), NSV_EINVAL, "NULL path");

    /* Depth: 128 nested containers are fine, 129 are not. */
    char deep[600], path[600] = "$";
    for (int depth = 128; depth <= 129; depth++) {
        n = 0;
        memset(deep, '[', (size_t)depth);
        n = (size_t)depth;
        deep[n++] = '5';
        memset(deep + n, ']', (size_t)depth);
        n += (size_t)depth;
        path[1] = 0;
        for (int i = 0; i < depth; i++)
            strcat(path, "[0]");
        v = 0;
        int rc = nsv_json_integer(deep, n, path, strlen(path), &v);
        if (depth == 128)
            ok(rc == 0 && v == 5, "depth 128 accepted");
        else
            is_int(rc, NSV_EPARSE, "depth 129 rejected");
    }

    char objs[2000];
    n = 0;
    for (int i = 0; i < 129; i++)
        n += (size_t)sprintf(objs + n, "{\"k\":");
    n += (size_t)sprintf(objs + n, "1");
    for (int i = 0; i < 129; i++)
        objs[n++] = '}';
    is_int(nsv_json_integer(objs, n, S("$.k"), &v), NSV_EPARSE, "129 nested objects rejected");
    n = 0;
    for (int i = 0; i < 128; i++)
        n += (size_t)sprintf(objs + n, "{\"k\":");
    n += (size_t)sprintf(objs + n, "1");
    for (int i = 0; i < 128; i++)
        objs[n++] = '}';
    is_int(nsv_json_integer(objs, n, S("$.k.k.k"), &v), NSV_ENOTFOUND, "128 nested objects accepted");

    /* Very deep input must fail cleanly, not overflow the stack. */
    static char flood[1 << 20];
    memset(flood, '[', sizeof flood);
    is_int(nsv_json_integer(flood, sizeof flood, S("$"), &v), NSV_EPARSE, "1 MiB of '[' rejected");
}

/* HTTP dates written by hand match strftime's in the C locale, across the
 * calendar (leap years, century rules, month and year ends). */
static void test_imf_fixdate(void)
{
    int bad = 0, n = 0;
    int64_t samples[] = {0, 68169600, 784111777, 951782400, 951868799, 1709208000, 1735689599,
                         4107542400LL, 253402300799LL};
    for (size_t i = 0; i < sizeof samples / sizeof samples[0] + 4000; i++) {
        int64_t t = i < sizeof samples / sizeof samples[0] ? samples[i]
                                                          : (int64_t)(i * 63241117ULL % 253402300800ULL);
        char got[30] = {0}, want[64];
        nsv__imf_fixdate(t, got);
        time_t tt = (time_t)t;
        struct tm tm;
        gmtime_r(&tt, &tm);
        strftime(want, sizeof want, "%a, %d %b %Y %H:%M:%S GMT", &tm);
        n++;
        if (strcmp(got, want) != 0 && bad++ < 3)
            diag("t=%lld: got '%s', want '%s'", (long long)t, got, want);
    }
    is_int(bad, 0, "%d IMF-fixdates match strftime in the C locale", n);
    char d[30] = {0};
    nsv__imf_fixdate(784111777, d);
    ok(!strcmp(d, "Sun, 06 Nov 1994 08:49:37 GMT"), "the RFC 9110 example date");
}

int main(void)
{
    test_base64();
    test_url_codec();
    test_url_parse();
    test_json_paths();
    test_json_strings();
    test_json_numbers();
    test_json_integers();
    test_json_misc();
    test_imf_fixdate();
    return done_testing();
}
