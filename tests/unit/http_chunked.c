/* http_chunked.c - chunked body decoder: valid bodies, extensions, trailers
 * and every error, each fed in one piece, in place, byte by byte and split
 * at every offset; all feedings must agree. */
#include "http/parse.h"
#include "tap.h"

#include <stdint.h>

#define ALL ((size_t)-1) /* whole input consumed */

typedef struct ccase {
    const char *name;
    const char *in;
    int want;           /* 1, 0 or -400 */
    const char *out;    /* expected output (checked unless want < 0) */
    size_t consumed;    /* expected consumed (ALL: strlen(in)) */
} ccase;

static const ccase cases[] = {
    { "one chunk", "5\r\nhello\r\n0\r\n\r\n", 1, "hello", ALL },
    { "two chunks", "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", 1, "abcde", ALL },
    { "upper hex", "A\r\n0123456789\r\n0\r\n\r\n", 1, "0123456789", ALL },
    { "lower hex", "a\r\n0123456789\r\n0\r\n\r\n", 1, "0123456789", ALL },
    { "leading zeros", "0005\r\nhello\r\n000\r\n\r\n", 1, "hello", ALL },
    { "15 hex digits", "000000000000005\r\nhello\r\n0\r\n\r\n", 1, "hello", ALL },
    { "empty body", "0\r\n\r\n", 1, "", ALL },
    { "extensions", "5;name=value\r\nhello\r\n0;last\r\n\r\n", 1, "hello", ALL },
    { "quoted extension", "5;a=\"b c\";d\r\nhello\r\n0\r\n\r\n", 1, "hello", ALL },
    { "BWS before extension", "5 \t;x=1\r\nhello\r\n0\r\n\r\n", 1, "hello", ALL },
    { "trailers", "0\r\nX-Checksum: abc\r\nY:z\r\n\r\n", 1, "", ALL },
    { "trailer empty value", "1\r\nq\r\n0\r\nX:\r\n\r\n", 1, "q", ALL },
    { "CRLF inside data", "4\r\n\r\n\r\n\r\n0\r\n\r\n", 1, "\r\n\r\n", ALL },
    { "stops after last chunk", "2\r\nab\r\n0\r\n\r\nGET / HTTP/1.1\r\n", 1, "ab", 12 },
    { "incomplete data", "5\r\nhel", 0, "hel", ALL },
    { "incomplete size", "5", 0, "", ALL },
    { "incomplete after data", "5\r\nhello\r", 0, "hello", ALL },
    { "incomplete last chunk", "0\r\n", 0, "", ALL },
    { "incomplete trailer", "0\r\nX: y", 0, "", ALL },
    { "incomplete final CR", "0\r\n\r", 0, "", ALL },
    { "bad hex", "g\r\n", -400, NULL, 0 },
    { "empty size line", "\r\n", -400, NULL, 0 },
    { "16 hex digits", "0000000000000001\r\nx\r\n0\r\n\r\n", -400, NULL, 0 },
    { "size overflow", "ffffffffffffffff\r\n", -400, NULL, 0 },
    { "sign", "+5\r\nhello\r\n0\r\n\r\n", -400, NULL, 0 },
    { "0x prefix", "0x5\r\nhello\r\n0\r\n\r\n", -400, NULL, 0 },
    { "leading space", " 5\r\nhello\r\n0\r\n\r\n", -400, NULL, 0 },
    { "space without extension", "5 \r\nhello\r\n0\r\n\r\n", -400, NULL, 0 },
    { "bare LF after size", "5\nhello\r\n0\r\n\r\n", -400, NULL, 0 },
    { "bare CR after size", "5\rhello\r\n0\r\n\r\n", -400, NULL, 0 },
    { "missing CRLF after data", "5\r\nhelloX\r\n0\r\n\r\n", -400, NULL, 0 },
    { "LF only after data", "5\r\nhello\n0\r\n\r\n", -400, NULL, 0 },
    { "CR only after data", "5\r\nhello\r0\r\n\r\n", -400, NULL, 0 },
    { "bare LF in extension", "5;a\nb\r\nhello\r\n0\r\n\r\n", -400, NULL, 0 },
    { "CTL in extension", "5;a\x01\r\nhello\r\n0\r\n\r\n", -400, NULL, 0 },
    { "trailer obs-fold", "0\r\nX: a\r\n b\r\n\r\n", -400, NULL, 0 },
    { "trailer without colon", "0\r\nX\r\n\r\n", -400, NULL, 0 },
    { "trailer empty name", "0\r\n: a\r\n\r\n", -400, NULL, 0 },
    { "trailer space before colon", "0\r\nX : a\r\n\r\n", -400, NULL, 0 },
    { "trailer bare LF", "0\r\nX: a\n\r\n", -400, NULL, 0 },
    { "trailer bare CR", "0\r\nX: a\rb\r\n\r\n", -400, NULL, 0 },
    { "trailer CTL", "0\r\nX: \x7f\r\n\r\n", -400, NULL, 0 },
    { "final bare LF", "0\r\n\n", -400, NULL, 0 },
    { "final CR then junk", "0\r\n\rX", -400, NULL, 0 },
};

typedef struct result {
    int ret;
    size_t consumed, produced;
    char out[8192];
} result;

/* Feeds in[0..n) in pieces: cut at `split` (0: none), or byte by byte when
 * bytewise; decodes in place when inplace. Stops at the first nonzero
 * return, as a server would. */
static void feed(const char *in, size_t n, size_t split, int bytewise, int inplace, result *res)
{
    static char buf[1 << 16];
    nsv__chunked d = { 0, 0, 0 };
    size_t pos = 0, out = 0;
    int r = 0;
    memcpy(buf, in, n);
    memset(res->out, 0, sizeof res->out);
    while (pos < n) {
        size_t piece = n - pos;
        if (bytewise)
            piece = 1;
        else if (split && pos < split)
            piece = split - pos;
        size_t c = 0, p = 0;
        char *dst = inplace ? buf + out : res->out + out;
        r = nsv__chunked_decode(&d, dst, buf + pos, piece, &c, &p);
        if (inplace)
            memcpy(res->out + out, dst, p);
        out += p;
        pos += c;
        if (r != 0)
            break;
        if (c != piece) {
            r = -1; /* 0 must mean all input was used */
            break;
        }
    }
    res->ret = r;
    res->consumed = pos;
    res->produced = out;
}

static int same(const result *a, const result *b)
{
    if (a->ret != b->ret)
        return 0;
    if (a->ret < 0)
        return 1;
    return a->consumed == b->consumed && a->produced == b->produced &&
           memcmp(a->out, b->out, a->produced) == 0;
}

static void run_case(const ccase *c)
{
    static result one, other;
    size_t n = strlen(c->in);
    feed(c->in, n, 0, 0, 0, &one);
    is_int(one.ret, c->want, "%s: result", c->name);
    if (c->want >= 0) {
        is_int(one.consumed, c->consumed == ALL ? n : c->consumed, "%s: consumed", c->name);
        is_mem(one.out, one.produced, c->out, "%s: output", c->name);
    }
    feed(c->in, n, 0, 0, 1, &other);
    ok(same(&one, &other), "%s: in place", c->name);
    feed(c->in, n, 0, 1, 0, &other);
    ok(same(&one, &other), "%s: byte by byte", c->name);
    feed(c->in, n, 0, 1, 1, &other);
    ok(same(&one, &other), "%s: byte by byte in place", c->name);
    size_t bad = 0;
    for (size_t k = 1; k < n && !bad; k++) {
        feed(c->in, n, k, 0, k & 1, &other);
        if (!same(&one, &other))
            bad = k;
    }
    ok(!bad, "%s: split at every offset", c->name);
    if (bad)
        diag("split at %zu", bad);
}

static void test_long_lines(void)
{
    static char in[10000];
    nsv__chunked d = { 0, 0, 0 };
    size_t c, p;
    char out[16];

    /* Size line with a 4000-byte extension is fine, 5000 is not. */
    strcpy(in, "1;");
    memset(in + 2, 'e', 4000);
    strcpy(in + 4002, "\r\nx\r\n0\r\n\r\n");
    is_int(nsv__chunked_decode(&d, out, in, strlen(in), &c, &p), 1, "4000-byte extension accepted");
    memset(&d, 0, sizeof d);
    memset(in + 2, 'e', 5000);
    strcpy(in + 5002, "\r\nx\r\n0\r\n\r\n");
    is_int(nsv__chunked_decode(&d, out, in, strlen(in), &c, &p), -400, "5000-byte extension rejected");
    ok(c <= 4100, "overlong extension stopped early (%zu bytes)", c);

    /* Same for trailers, also when fed byte by byte. */
    memset(&d, 0, sizeof d);
    strcpy(in, "0\r\nX-Long: ");
    memset(in + 11, 'v', 5000);
    strcpy(in + 5011, "\r\n\r\n");
    int r = 0;
    size_t i;
    for (i = 0; i < strlen(in) && r == 0; i++)
        r = nsv__chunked_decode(&d, out, in + i, 1, &c, &p);
    is_int(r, -400, "5000-byte trailer rejected byte by byte");
    ok(i <= 4200, "overlong trailer stopped early (%zu bytes)", i);
    memset(&d, 0, sizeof d);
    in[3 + 4000] = '\r';
    strcpy(in + 4004, "\n\r\n");
    is_int(nsv__chunked_decode(&d, out, in, strlen(in), &c, &p), 1, "4000-byte trailer accepted");
}

static void test_sticky_states(void)
{
    nsv__chunked d = { 0, 0, 0 };
    size_t c = 99, p = 99;
    char out[16];
    is_int(nsv__chunked_decode(&d, out, "0\r\n\r\n", 5, &c, &p), 1, "done");
    is_int(nsv__chunked_decode(&d, out, "5\r\n", 3, &c, &p), 1, "done is sticky");
    ok(c == 0 && p == 0, "nothing consumed after done");
    memset(&d, 0, sizeof d);
    is_int(nsv__chunked_decode(&d, out, "z", 1, &c, &p), -400, "error");
    is_int(nsv__chunked_decode(&d, out, "0\r\n\r\n", 5, &c, &p), -400, "error is sticky");
    memset(&d, 0, sizeof d);
    is_int(nsv__chunked_decode(&d, out, "", 0, &c, &p), 0, "empty input");
    ok(c == 0 && p == 0, "empty input: nothing consumed");
}

/* A large body streamed in odd-sized pieces, decoded in place. */
static void test_large_body(void)
{
    static char buf[1 << 20], want[1 << 20];
    size_t n = 0, wn = 0;
    unsigned seed = 12345;
    for (int i = 0; i < 300; i++) {
        seed = seed * 1103515245u + 12345u;
        size_t sz = (seed >> 16) % 3000 + 1;
        n += (size_t)sprintf(buf + n, "%zx;i=%d\r\n", sz, i);
        for (size_t j = 0; j < sz; j++)
            want[wn++] = buf[n++] = (char)('a' + (j + (size_t)i) % 26);
        memcpy(buf + n, "\r\n", 2);
        n += 2;
    }
    memcpy(buf + n, "0\r\nT: 1\r\n\r\n", 11);
    n += 11;
    nsv__chunked d = { 0, 0, 0 };
    size_t pos = 0, out = 0, c, p;
    int r = 0;
    while (r == 0 && pos < n) {
        size_t piece = n - pos < 1777 ? n - pos : 1777;
        r = nsv__chunked_decode(&d, buf + out, buf + pos, piece, &c, &p);
        pos += c;
        out += p;
    }
    is_int(r, 1, "large body: complete");
    is_int(pos, n, "large body: all consumed");
    ok(out == wn && memcmp(buf, want, wn) == 0, "large body: output intact (%zu bytes)", out);
}

/* Trailers are capped: at most 100 lines and 16 KiB of names and values in
 * all, line ends not counted (an endless trailer section would otherwise
 * keep a connection busy for ever). total: the name and value bytes. */
static void trailer_case(const char *name, int lines, size_t total, int want)
{
    static char in[40000];
    static result one, other;
    size_t n = 0;
    n += (size_t)sprintf(in + n, "0\r\n");
    size_t left = total;
    for (int i = 0; i < lines; i++) {
        /* "X:" + value + CRLF; the last line takes what is left of total */
        size_t share = i == lines - 1 ? left : total / (size_t)lines;
        size_t vlen = share - 2;
        memcpy(in + n, "X:", 2);
        memset(in + n + 2, 'v', vlen);
        memcpy(in + n + 2 + vlen, "\r\n", 2);
        n += share + 2;
        left -= share;
    }
    memcpy(in + n, "\r\n", 2);
    n += 2;
    feed(in, n, 0, 0, 0, &one);
    is_int(one.ret, want, "%s", name);
    feed(in, n, 0, 1, 0, &other);
    is_int(other.ret, want, "%s: byte by byte", name);
}

static void test_trailer_caps(void)
{
    trailer_case("100 trailer lines accepted", 100, 100 * 8, 1);
    trailer_case("101 trailer lines -> 400", 101, 101 * 8, -400);
    trailer_case("16384 trailer bytes accepted", 8, 16384, 1);
    trailer_case("16385 trailer bytes -> 400", 8, 16385, -400);
}

int main(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);
    test_trailer_caps();
    test_long_lines();
    test_sticky_states();
    test_large_body();
    return done_testing();
}
