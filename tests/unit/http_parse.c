/* http_parse.c - request-head parser: a corpus of valid and malformed heads
 * with expected outcomes, every prefix of each input (placed against a
 * PROT_NONE guard page so any over-read faults), and limit handling. */
#include "http/parse.h"
#include "tap.h"

#include <limits.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#define FULL INT_MAX /* expect the whole input consumed */
#define MAXH 16
#define MAXURI 256

typedef struct tcase {
    const char *name;
    const char *in;
    int want;          /* FULL, consumed byte count, 0 or -status */
    const char *method;
    const char *path;
    const char *query; /* NULL: no query expected */
    const char *host;  /* NULL: no host expected */
    const char *cl;    /* NULL: content_length -1 expected */
    unsigned flags;
    int nh;            /* expected num_headers */
    int minor;         /* expected minor version, 1 unless set to 10 (-> 0) */
    const char *last;  /* expected value of the last header, if set */
    size_t max_headers, max_uri; /* 0: MAXH / MAXURI */
} tcase;

#define BAD(n, i, w) { .name = (n), .in = (i), .want = (w) }
#define H11 " HTTP/1.1\r\nHost: h\r\n"

static const tcase cases[] = {
    /* ---- valid ---- */
    { "simple GET", "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", FULL, "GET", "/", NULL,
      "example.com", .nh = 1 },
    { "path and query", "GET /a/b?x=1&y=2" H11 "\r\n", FULL, "GET", "/a/b", "x=1&y=2", "h",
      .nh = 1 },
    { "empty query", "GET /p?" H11 "\r\n", FULL, "GET", "/p", "", "h", .nh = 1 },
    { "query with slash and ?", "GET /p?a=/b?c" H11 "\r\n", FULL, "GET", "/p", "a=/b?c", "h",
      .nh = 1 },
    { "HTTP/1.0 without Host", "GET /x HTTP/1.0\r\n\r\n", FULL, "GET", "/x", NULL, NULL,
      .nh = 0, .minor = 10 },
    { "HTTP/1.0 with Host", "GET / HTTP/1.0\r\nHost: a\r\n\r\n", FULL, "GET", "/", NULL, "a",
      .nh = 1, .minor = 10 },
    { "browser-like",
      "GET /index.html?lang=en HTTP/1.1\r\n"
      "Host: www.example.org\r\n"
      "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0\r\n"
      "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n"
      "Accept-Language: en-US,en;q=0.5\r\n"
      "Accept-Encoding: gzip, deflate, br\r\n"
      "Connection: keep-alive\r\n"
      "Upgrade-Insecure-Requests: 1\r\n\r\n",
      FULL, "GET", "/index.html", "lang=en", "www.example.org", .flags = NSV__RF_CONN_KEEPALIVE,
      .nh = 7, .last = "1" },
    { "POST with body after head", "POST /f HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello",
      sizeof("POST /f HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n") - 1, "POST", "/f", NULL, "h", "5", .nh = 2 },
    { "CL list of equal values", "POST /" H11 "Content-Length: 5, 5\r\n\r\n", FULL, "POST", "/",
      NULL, "h", "5", .nh = 2 },
    { "CL duplicate identical", "POST /" H11 "Content-Length: 7\r\ncontent-length: 7\r\n\r\n",
      FULL, "POST", "/", NULL, "h", "7", .nh = 3 },
    { "CL zero", "POST /" H11 "Content-Length: 0\r\n\r\n", FULL, "POST", "/", NULL, "h", "0",
      .nh = 2 },
    { "CL leading zeros", "PUT /" H11 "Content-Length: 007\r\n\r\n", FULL, "PUT", "/", NULL, "h",
      "7", .nh = 2 },
    { "CL INT64_MAX", "PUT /" H11 "Content-Length: 9223372036854775807\r\n\r\n", FULL, "PUT", "/",
      NULL, "h", "9223372036854775807", .nh = 2 },
    { "TE chunked", "POST /" H11 "Transfer-Encoding: chunked\r\n\r\n", FULL, "POST", "/", NULL,
      "h", .flags = NSV__RF_CHUNKED, .nh = 2 },
    { "TE chunked mixed case", "POST /" H11 "transfer-encoding: ChUnKeD \r\n\r\n", FULL, "POST",
      "/", NULL, "h", .flags = NSV__RF_CHUNKED, .nh = 2 },
    { "Connection close", "GET /" H11 "Connection: close\r\n\r\n", FULL, "GET", "/", NULL, "h",
      .flags = NSV__RF_CONN_CLOSE, .nh = 2 },
    { "websocket upgrade",
      "GET /ws" H11 "Connection: Keep-Alive, Upgrade\r\nUpgrade: websocket\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
      FULL, "GET", "/ws", NULL, "h",
      .flags = NSV__RF_CONN_KEEPALIVE | NSV__RF_CONN_UPGRADE | NSV__RF_UPGRADE_WS, .nh = 5,
      .last = "13" },
    { "Upgrade token list", "GET /" H11 "Upgrade: h2c, WebSocket\r\nConnection: x,,upgrade\r\n\r\n",
      FULL, "GET", "/", NULL, "h", .flags = NSV__RF_UPGRADE_WS | NSV__RF_CONN_UPGRADE, .nh = 3 },
    { "Connection unknown tokens", "GET /" H11 "Connection: closed, keepalive\r\n\r\n", FULL,
      "GET", "/", NULL, "h", .nh = 2 },
    { "Expect 100-continue", "PUT /" H11 "Expect: 100-Continue\r\nContent-Length: 1\r\n\r\n",
      FULL, "PUT", "/", NULL, "h", "1", .flags = NSV__RF_EXPECT_CONTINUE, .nh = 3 },
    { "leading CRLF skipped", "\r\nGET /" H11 "\r\n", FULL, "GET", "/", NULL, "h", .nh = 1 },
    { "two leading CRLFs", "\r\n\r\nGET /" H11 "\r\n", FULL, "GET", "/", NULL, "h", .nh = 1 },
    { "absolute-form", "GET http://example.com:8080/p?q=1 HTTP/1.1\r\nHost: other\r\n\r\n", FULL,
      "GET", "/p", "q=1", "example.com:8080", .flags = NSV__RF_ABSOLUTE_FORM, .nh = 1 },
    { "absolute-form no path", "GET http://example.com HTTP/1.1\r\nHost: x\r\n\r\n", FULL, "GET",
      "/", NULL, "example.com", .flags = NSV__RF_ABSOLUTE_FORM, .nh = 1 },
    { "absolute-form query no path", "GET http://e.com?x HTTP/1.1\r\nHost: x\r\n\r\n", FULL,
      "GET", "/", "x", "e.com", .flags = NSV__RF_ABSOLUTE_FORM, .nh = 1 },
    { "absolute-form https uppercase", "GET HTTPS://E.COM/ HTTP/1.0\r\n\r\n", FULL, "GET", "/",
      NULL, "E.COM", .flags = NSV__RF_ABSOLUTE_FORM, .nh = 0, .minor = 10 },
    { "OPTIONS *", "OPTIONS *" H11 "\r\n", FULL, "OPTIONS", "*", NULL, "h", .nh = 1 },
    { "value OWS trimmed", "GET /" H11 "X-A: \t a b \t \r\n\r\n", FULL, "GET", "/", NULL, "h",
      .nh = 2, .last = "a b" },
    { "empty value", "GET /" H11 "X-Empty:\r\n\r\n", FULL, "GET", "/", NULL, "h", .nh = 2,
      .last = "" },
    { "only OWS value", "GET /" H11 "X-Empty:  \t \r\n\r\n", FULL, "GET", "/", NULL, "h", .nh = 2,
      .last = "" },
    { "HTAB inside value", "GET /" H11 "X: a\tb\r\n\r\n", FULL, "GET", "/", NULL, "h", .nh = 2,
      .last = "a\tb" },
    { "obs-text in value", "GET /" H11 "X: caf\xc3\xa9\r\n\r\n", FULL, "GET", "/", NULL, "h",
      .nh = 2, .last = "caf\xc3\xa9" },
    { "obs-text in target", "GET /caf\xc3\xa9" H11 "\r\n", FULL, "GET", "/caf\xc3\xa9", NULL, "h",
      .nh = 1 },
    BAD("asterisk for M-SEARCH", "M-SEARCH *" H11 "\r\n", -400),
    { "token method", "PURGE /x" H11 "\r\n", FULL, "PURGE", "/x", NULL, "h", .nh = 1 },
    { "Host IPv6", "GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", FULL, "GET", "/", NULL,
      "[::1]:8080", .nh = 1 },
    { "Host empty", "GET / HTTP/1.1\r\nHost:\r\n\r\n", FULL, "GET", "/", NULL, "", .nh = 1 },
    { "long value (SIMD path)",
      "GET /" H11 "Cookie: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\tbbbbbbbbbbbbbbbbbbbbbbbb\r\n\r\n",
      FULL, "GET", "/", NULL, "h", .nh = 2,
      .last = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\tbbbbbbbbbbbbbbbbbbbbbbbb" },
    { "pipelined: first only", "GET /1" H11 "\r\nGET /2" H11 "\r\n", sizeof("GET /1" H11 "\r\n") - 1, "GET", "/1", NULL, "h",
      .nh = 1 },
    { "exactly max_headers", "GET /" H11 "A: 1\r\nB: 2\r\n\r\n", FULL, "GET", "/", NULL, "h",
      .nh = 3, .max_headers = 3 },
    { "target exactly max_uri", "GET /123456789" H11 "\r\n", FULL, "GET", "/123456789", NULL, "h",
      .nh = 1, .max_uri = 10 },

    /* ---- incomplete ---- */
    BAD("incomplete: no blank line", "GET / HTTP/1.1\r\nHost: a\r\n", 0),
    BAD("incomplete: half CRLF", "GET / HTTP/1.1\r\nHost: a\r\n\r", 0),
    BAD("incomplete: CRLF only", "\r\n", 0),
    BAD("incomplete: empty", "", 0),
    { "incomplete: target at max_uri", "GET /123456789", 0, .max_uri = 10 },

    /* ---- framing / smuggling ---- */
    BAD("CL + TE", "POST /" H11 "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", -400),
    BAD("TE + CL", "POST /" H11 "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", -400),
    BAD("CL differing duplicates", "POST /" H11 "Content-Length: 5\r\nContent-Length: 6\r\n\r\n", -400),
    BAD("CL differing list", "POST /" H11 "Content-Length: 5, 6\r\n\r\n", -400),
    BAD("CL list vs header", "POST /" H11 "Content-Length: 5, 5\r\nContent-Length: 6\r\n\r\n", -400),
    BAD("CL non-digit", "POST /" H11 "Content-Length: abc\r\n\r\n", -400),
    BAD("CL negative", "POST /" H11 "Content-Length: -1\r\n\r\n", -400),
    BAD("CL plus sign", "POST /" H11 "Content-Length: +5\r\n\r\n", -400),
    BAD("CL empty", "POST /" H11 "Content-Length:\r\n\r\n", -400),
    BAD("CL trailing comma", "POST /" H11 "Content-Length: 5,\r\n\r\n", -400),
    BAD("CL inner space", "POST /" H11 "Content-Length: 1 0\r\n\r\n", -400),
    BAD("CL hex", "POST /" H11 "Content-Length: 0x10\r\n\r\n", -400),
    BAD("CL overflow", "POST /" H11 "Content-Length: 9223372036854775808\r\n\r\n", -400),
    BAD("CL huge overflow", "POST /" H11 "Content-Length: 99999999999999999999999\r\n\r\n", -400),
    BAD("TE gzip", "POST /" H11 "Transfer-Encoding: gzip\r\n\r\n", -501),
    BAD("TE gzip, chunked", "POST /" H11 "Transfer-Encoding: gzip, chunked\r\n\r\n", -501),
    BAD("TE chunked, gzip", "POST /" H11 "Transfer-Encoding: chunked, gzip\r\n\r\n", -501),
    BAD("TE identity", "POST /" H11 "Transfer-Encoding: identity\r\n\r\n", -501),
    BAD("TE chunked twice", "POST /" H11 "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", -501),
    BAD("TE chunked with junk", "POST /" H11 "Transfer-Encoding: xchunked\r\n\r\n", -501),
    BAD("TE on HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", -400),
    BAD("bare LF ends request line", "GET / HTTP/1.1\nHost: h\r\n\r\n", -400),
    BAD("bare LF ends header", "GET /" H11 "X: 1\n\r\n", -400),
    BAD("bare LF ends head", "GET /" H11 "\n", -400),
    BAD("bare LF before request line", "\nGET /" H11 "\r\n", -400),
    BAD("bare CR before request line", "\r GET /" H11 "\r\n", -400),
    BAD("bare CR in value", "GET /" H11 "X: a\rb\r\n\r\n", -400),
    BAD("bare CR ends header", "GET /" H11 "X: a\r\r\n\r\n", -400),
    BAD("bare CR in request line", "GET /\r HTTP/1.1\r\nHost: h\r\n\r\n", -400),
    BAD("CR CR at end", "GET /" H11 "\r\r", -400),
    BAD("obs-fold", "GET /" H11 "X: a\r\n b\r\n\r\n", -400),
    BAD("obs-fold with HTAB", "GET /" H11 "X: a\r\n\tb\r\n\r\n", -400),
    BAD("SP before first header", "GET / HTTP/1.1\r\n Host: h\r\n\r\n", -400),
    BAD("space before colon", "GET / HTTP/1.1\r\nHost : h\r\n\r\n", -400),
    BAD("tab before colon", "GET /" H11 "X\t: 1\r\n\r\n", -400),
    BAD("empty header name", "GET /" H11 ": v\r\n\r\n", -400),
    BAD("bad char in header name", "GET /" H11 "X@Y: 1\r\n\r\n", -400),
    BAD("non-ASCII header name", "GET /" H11 "X\xc3\xa9: 1\r\n\r\n", -400),
    BAD("header without colon", "GET /" H11 "Foo\r\n\r\n", -400),
    BAD("NUL in value", "GET /" H11 "X: a\0b\r\n\r\n", -400),
    BAD("DEL in value", "GET /" H11 "X: a\x7f\r\n\r\n", -400),
    BAD("ESC in value", "GET /" H11 "X: \x1b[0m\r\n\r\n", -400),
    BAD("CTL in target", "GET /a\x01" "b" H11 "\r\n", -400),
    BAD("HTAB in target", "GET /a\tb" H11 "\r\n", -400),
    BAD("DEL in target", "GET /a\x7f" H11 "\r\n", -400),
    BAD("fragment in target", "GET /a#frag" H11 "\r\n", -400),
    BAD("bad char in method", "G(T /" H11 "\r\n", -400),
    BAD("empty method", " / HTTP/1.1\r\nHost: h\r\n\r\n", -400),
    BAD("double space after method", "GET  /" H11 "\r\n", -400),
    BAD("double space before version", "GET /  HTTP/1.1\r\nHost: h\r\n\r\n", -400),
    BAD("HTAB separator", "GET\t/" H11 "\r\n", -400),
    BAD("trailing space after version", "GET / HTTP/1.1 \r\nHost: h\r\n\r\n", -400),
    BAD("missing target", "GET HTTP/1.1\r\nHost: h\r\n\r\n", -400),
    BAD("missing version", "GET /\r\nHost: h\r\n\r\n", -400),

    /* ---- Host ---- */
    BAD("HTTP/1.1 without Host", "GET / HTTP/1.1\r\nX: 1\r\n\r\n", -400),
    BAD("two Hosts", "GET /" H11 "Host: h\r\n\r\n", -400),
    BAD("two Hosts on HTTP/1.0", "GET / HTTP/1.0\r\nHost: a\r\nhost: a\r\n\r\n", -400),
    BAD("absolute-form without Host", "GET http://e.com/ HTTP/1.1\r\n\r\n", -400),
    BAD("Host with space", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", -400),
    BAD("Host with slash", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", -400),
    BAD("Host with userinfo", "GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", -400),

    /* ---- version ---- */
    BAD("HTTP/2.0", "GET / HTTP/2.0\r\nHost: h\r\n\r\n", -505),
    BAD("HTTP/0.9", "GET / HTTP/0.9\r\n\r\n", -505),
    BAD("HTTP/1.2", "GET / HTTP/1.2\r\n\r\n", -505),
    BAD("HTTP/1.1x", "GET / HTTP/1.1x\r\n\r\n", -400),
    BAD("HTTP/1.10", "GET / HTTP/1.10\r\n\r\n", -400),
    BAD("HTTP/11", "GET / HTTP/11\r\n\r\n", -400),
    BAD("lowercase http", "GET / http/1.1\r\nHost: h\r\n\r\n", -400),
    BAD("HTTX", "GET / HTTX/1.1\r\nHost: h\r\n\r\n", -400),
    BAD("HTTP/1", "GET / HTTP/1\r\nHost: h\r\n\r\n", -400),

    /* ---- target forms ---- */
    BAD("asterisk for GET", "GET *" H11 "\r\n", -400),
    BAD("asterisk plus path", "OPTIONS */x" H11 "\r\n", -400),
    BAD("authority-form", "CONNECT example.com:443" H11 "\r\n", -400),
    BAD("relative target", "GET a/b" H11 "\r\n", -400),
    BAD("absolute-form ftp", "GET ftp://e.com/" H11 "\r\n", -400),
    BAD("absolute-form userinfo", "GET http://u:p@e.com/" H11 "\r\n", -400),
    BAD("absolute-form empty host", "GET http:///p" H11 "\r\n", -400),
    BAD("absolute-form bad host char", "GET http://e\"x/" H11 "\r\n", -400),

    /* ---- limits ---- */
    { "target over max_uri", "GET /1234567890" H11 "\r\n", -414, .max_uri = 10 },
    { "target over max_uri, incomplete", "GET /1234567890", -414, .max_uri = 10 },
    { "too many headers", "GET /" H11 "A: 1\r\nB: 2\r\nC: 3\r\n\r\n", -431, .max_headers = 3 },
    { "too many headers, incomplete", "GET /" H11 "A: 1\r\nB: 2\r\nC", -431, .max_headers = 3 },
    { "zero max_headers", "GET / HTTP/1.0\r\nA: 1\r\n\r\n", -431, .max_headers = SIZE_MAX },

    /* ---- Expect ---- */
    BAD("Expect other", "PUT /" H11 "Expect: 200-ok\r\n\r\n", -417),
    BAD("Expect empty", "PUT /" H11 "Expect:\r\n\r\n", -417),
};

static size_t case_len(const tcase *c)
{
    /* Two cases embed NUL bytes; their length runs to the final CRLFCRLF. */
    if (strcmp(c->name, "NUL in value") == 0)
        return sizeof("GET /" H11 "X: a\0b\r\n\r\n") - 1;
    return strlen(c->in);
}

static size_t max_headers_of(const tcase *c)
{
    if (c->max_headers == SIZE_MAX)
        return 0;
    return c->max_headers ? c->max_headers : MAXH;
}

static int within(const char *p, size_t n, const char *buf, size_t len)
{
    return p >= buf && p + n <= buf + len;
}

/* Invariants every successful parse must keep, whatever the input. */
static int sane(const nsv__request *r, const char *buf, int got)
{
    size_t len = (size_t)got;
    if (!within(r->method, r->method_len, buf, len) || !within(r->target, r->target_len, buf, len) ||
        !within(r->path, r->path_len, buf, len))
        return 0;
    if (r->query && !within(r->query, r->query_len, buf, len))
        return 0;
    if (r->host && !within(r->host, r->host_len, buf, len))
        return 0;
    for (size_t i = 0; i < r->num_headers; i++)
        if (!within(r->headers[i].name, r->headers[i].name_len, buf, len) ||
            !within(r->headers[i].value, r->headers[i].value_len, buf, len))
            return 0;
    return got >= 4 && memcmp(buf + got - 4, "\r\n\r\n", 4) == 0;
}

static int eq_opt(const char *got, size_t glen, const char *want)
{
    if (!want)
        return got == NULL;
    return got && glen == strlen(want) && memcmp(got, want, glen) == 0;
}

static void check_fields(const tcase *c, const nsv__request *r, const char *buf, int got)
{
    ok(sane(r, buf, got), "%s: pointers inside the head", c->name);
    is_mem(r->method, r->method_len, c->method, "%s: method", c->name);
    is_mem(r->path, r->path_len, c->path, "%s: path", c->name);
    ok(eq_opt(r->query, r->query_len, c->query), "%s: query", c->name);
    ok(eq_opt(r->host, r->host_len, c->host), "%s: host", c->name);
    is_int(r->content_length, c->cl ? strtoll(c->cl, NULL, 10) : -1, "%s: content_length",
           c->name);
    is_int(r->flags, c->flags, "%s: flags", c->name);
    is_int(r->num_headers, c->nh, "%s: num_headers", c->name);
    is_int(r->minor_version, c->minor == 10 ? 0 : 1, "%s: minor_version", c->name);
    if (c->last && r->num_headers > 0) {
        const nsv__hdr *h = &r->headers[r->num_headers - 1];
        is_mem(h->value, h->value_len, c->last, "%s: last header value", c->name);
    }
}

/* A page followed by a PROT_NONE page: inputs end exactly at the boundary. */
static char *guard_end;

static void setup_guard(void)
{
    long pg = sysconf(_SC_PAGESIZE);
    char *m = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || mprotect(m + pg, (size_t)pg, PROT_NONE) != 0) {
        printf("Bail out! cannot set up guard page\n");
        exit(1);
    }
    guard_end = m + pg;
}

static int parse_at_guard(const char *in, size_t n, nsv__request *r, nsv__hdr *h, size_t maxh,
                          size_t maxuri, const char **placed)
{
    char *p = guard_end - n;
    memcpy(p, in, n);
    *placed = p;
    return nsv__http_parse_request(p, n, r, h, maxh, maxuri);
}

static void run_case(const tcase *c)
{
    size_t n = case_len(c), maxh = max_headers_of(c);
    size_t maxuri = c->max_uri ? c->max_uri : MAXURI;
    /* Exactly max_headers slots so a write past them trips ASan. */
    nsv__hdr *h = malloc(sizeof *h * (maxh ? maxh : 1));
    nsv__request r;
    const char *placed;
    int want = c->want == FULL ? (int)n : c->want;

    int got = parse_at_guard(c->in, n, &r, h, maxh, maxuri, &placed);
    is_int(got, want, "%s: result", c->name);
    if (got > 0 && got == want && c->method)
        check_fields(c, &r, placed, got);

    /* Every prefix: 0 before a complete head, else the same verdict. */
    int bad = -1;
    for (size_t k = 0; k < n && bad < 0; k++) {
        int pr = parse_at_guard(c->in, k, &r, h, maxh, maxuri, &placed);
        int expect_pr = (want > 0 && k < (size_t)want) ? 0 : want;
        if (pr != expect_pr && !(want < 0 && pr == 0))
            bad = (int)k;
    }
    ok(bad < 0, "%s: every prefix consistent%s", c->name, bad < 0 ? "" : " (failed)");
    if (bad >= 0)
        diag("prefix of length %d", bad);
    free(h);
}

static void test_limits(void)
{
    nsv__hdr h[4];
    nsv__request r;
    char big[600];
    memset(big, 'a', sizeof big);
    memcpy(big, "GET /", 5);
    /* -414 as soon as max_uri + 1 target bytes arrived without a space. */
    is_int(nsv__http_parse_request(big, 4 + 100, &r, h, 4, 100), 0, "target of max_uri: wait");
    is_int(nsv__http_parse_request(big, 4 + 101, &r, h, 4, 100), -414, "target over max_uri: early 414");
    is_int(nsv__http_parse_request(big, sizeof big, &r, h, 4, 100), -414, "long target: 414");
    /* Zero max_uri: nothing fits. */
    is_int(nsv__http_parse_request("GET / HTTP/1.0\r\n\r\n", 18, &r, h, 4, 0), -414, "max_uri 0");
    /* Slots untouched beyond max_headers. */
    const char *req = "GET / HTTP/1.1\r\nHost: a\r\nB: 1\r\n\r\n";
    h[2].name = "sentinel";
    is_int(nsv__http_parse_request(req, strlen(req), &r, h, 2, 100), (int)strlen(req), "two slots suffice");
    ok(h[2].name && strcmp(h[2].name, "sentinel") == 0, "slot past max_headers untouched");
    ok(r.headers == h, "headers array recorded");
}

int main(void)
{
    setup_guard();
    size_t nvalid = 0, ninvalid = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_case(&cases[i]);
        if (cases[i].want > 0)
            nvalid++;
        else
            ninvalid++;
    }
    diag("corpus: %zu valid, %zu incomplete or malformed", nvalid, ninvalid);
    test_limits();
    return done_testing();
}
