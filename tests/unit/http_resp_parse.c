/* http_resp_parse.c - response-head parser and body framing: a table of
 * valid and malformed heads with expected facts or reasons, each parsed
 * whole and at every prefix (byte by byte, as a client re-parsing a growing
 * buffer does) against a PROT_NONE guard page; 1xx sequences; the framing
 * of every method/status/header combination; limits. */
#include "http/resp_parse.h"
#include "nanosrv.h"
#include "tap.h"

#include <limits.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#define FULL INT_MAX /* expect the whole input consumed */
#define MAXH 16

typedef struct rcase {
    const char *name;
    const char *in;
    size_t len;        /* 0: strlen(in) */
    int want;          /* FULL, consumed bytes, 0, NSV_EPARSE or NSV_ETOOBIG */
    int status;
    int minor;         /* 1 unless 10 (-> 0) */
    const char *reason;
    const char *cl;    /* NULL: content_length -1 */
    unsigned flags;
    int nh;
    const char *last;  /* value of the last header, if set */
    const char *accept;/* Sec-WebSocket-Accept, if set */
    const char *why;   /* expected reason on error */
    size_t why_at;     /* expected offset on error (checked when why is set) */
    size_t max_headers;/* 0: MAXH; SIZE_MAX: 0 */
} rcase;

#define KA NSV__RESP_KEEP_ALIVE
#define OK200 "HTTP/1.1 200 OK\r\n"
#define ERR(n, i, w, at) { .name = (n), .in = (i), .want = NSV_EPARSE, .why = (w), .why_at = (at) }

static const rcase cases[] = {
    /* ---- valid ---- */
    { "minimal 200", OK200 "\r\n", .want = FULL, .status = 200, .reason = "OK", .flags = KA },
    { "content-length", OK200 "Content-Length: 5\r\n\r\nhello", .want = 38, .status = 200,
      .reason = "OK", .cl = "5", .flags = KA, .nh = 1, .last = "5" },
    { "HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", .want = FULL, .status = 200,
      .minor = 10, .reason = "OK", .cl = "0", .nh = 1 },
    { "HTTP/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\n\r\n", .want = FULL,
      .status = 200, .minor = 10, .reason = "OK", .flags = NSV__RESP_CONN_KEEPALIVE | KA, .nh = 1 },
    { "HTTP/1.0 keep-alive, close", "HTTP/1.0 200 OK\r\nConnection: keep-alive, close\r\n\r\n",
      .want = FULL, .status = 200, .minor = 10, .reason = "OK",
      .flags = NSV__RESP_CONN_KEEPALIVE | NSV__RESP_CONN_CLOSE, .nh = 1 },
    { "HTTP/1.2 read as 1.1", "HTTP/1.2 200 OK\r\n\r\n", .want = FULL, .status = 200,
      .reason = "OK", .flags = KA },
    { "Connection close", OK200 "Connection: close\r\n\r\n", .want = FULL, .status = 200,
      .reason = "OK", .flags = NSV__RESP_CONN_CLOSE, .nh = 1 },
    { "Connection token list", OK200 "Connection: foo, , CLOSE\r\n\r\n", .want = FULL,
      .status = 200, .reason = "OK", .flags = NSV__RESP_CONN_CLOSE, .nh = 1 },
    { "Connection near-miss tokens", OK200 "Connection: closed, keepalive\r\n\r\n", .want = FULL,
      .status = 200, .reason = "OK", .flags = KA, .nh = 1 },
    { "empty reason with SP", "HTTP/1.1 204 \r\n\r\n", .want = FULL, .status = 204, .reason = "",
      .flags = KA },
    { "empty reason without SP", "HTTP/1.1 204\r\n\r\n", .want = FULL, .status = 204,
      .reason = "", .flags = KA },
    { "reason with spaces and obs-text", "HTTP/1.1 404 Not  Found \xc3\xa9\t!\r\n\r\n",
      .want = FULL, .status = 404, .reason = "Not  Found \xc3\xa9\t!", .flags = KA },
    { "reason starting with SP", "HTTP/1.1 200  OK\r\n\r\n", .want = FULL, .status = 200,
      .reason = " OK", .flags = KA },
    { "status 100", "HTTP/1.1 100 Continue\r\n\r\n", .want = FULL, .status = 100,
      .reason = "Continue", .flags = KA },
    { "status 999 kept", "HTTP/1.1 999 Custom\r\n\r\n", .want = FULL, .status = 999,
      .reason = "Custom", .flags = KA },
    { "status 600", "HTTP/1.1 600 x\r\n\r\n", .want = FULL, .status = 600, .reason = "x",
      .flags = KA },
    { "chunked", OK200 "Transfer-Encoding: chunked\r\n\r\n", .want = FULL, .status = 200,
      .reason = "OK", .flags = NSV__RESP_CHUNKED | KA, .nh = 1 },
    { "chunked mixed case", OK200 "transfer-encoding: ChUnKeD\r\n\r\n", .want = FULL,
      .status = 200, .reason = "OK", .flags = NSV__RESP_CHUNKED | KA, .nh = 1 },
    { "gzip, chunked", OK200 "Transfer-Encoding: gzip, chunked\r\n\r\n", .want = FULL,
      .status = 200, .reason = "OK", .flags = NSV__RESP_CHUNKED | KA, .nh = 1 },
    { "TE over two lines", OK200 "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n",
      .want = FULL, .status = 200, .reason = "OK", .flags = NSV__RESP_CHUNKED | KA, .nh = 2 },
    { "TE empty elements ignored", OK200 "Transfer-Encoding: , chunked ,\r\n\r\n", .want = FULL,
      .status = 200, .reason = "OK", .flags = NSV__RESP_CHUNKED | KA, .nh = 1 },
    { "TE gzip: until close", OK200 "Transfer-Encoding: gzip\r\n\r\n", .want = FULL,
      .status = 200, .reason = "OK", .flags = NSV__RESP_TE_OTHER, .nh = 1 },
    { "TE coding with parameter", OK200 "Transfer-Encoding: x-foo ; q=\"1\"\r\n\r\n",
      .want = FULL, .status = 200, .reason = "OK", .flags = NSV__RESP_TE_OTHER, .nh = 1 },
    { "TE identity: until close", OK200 "Transfer-Encoding: identity\r\n\r\n", .want = FULL,
      .status = 200, .reason = "OK", .flags = NSV__RESP_TE_OTHER, .nh = 1 },
    { "CL + TE: TE wins, no reuse", OK200 "Content-Length: 10\r\nTransfer-Encoding: chunked\r\n\r\n",
      .want = FULL, .status = 200, .reason = "OK", .flags = NSV__RESP_CHUNKED | NSV__RESP_CL_TE,
      .nh = 2 },
    { "TE + CL: TE wins, no reuse", OK200 "Transfer-Encoding: chunked\r\nContent-Length: 10\r\n\r\n",
      .want = FULL, .status = 200, .reason = "OK", .flags = NSV__RESP_CHUNKED | NSV__RESP_CL_TE,
      .nh = 2 },
    { "CL list of equal values", OK200 "Content-Length: 7, 7\r\n\r\n", .want = FULL,
      .status = 200, .reason = "OK", .cl = "7", .flags = KA, .nh = 1 },
    { "CL identical repeats", OK200 "Content-Length: 7\r\ncontent-length: 007\r\n\r\n",
      .want = FULL, .status = 200, .reason = "OK", .cl = "7", .flags = KA, .nh = 2 },
    { "CL INT64_MAX", OK200 "Content-Length: 9223372036854775807\r\n\r\n", .want = FULL,
      .status = 200, .reason = "OK", .cl = "9223372036854775807", .flags = KA, .nh = 1 },
    { "websocket 101",
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo= \r\n\r\n",
      .want = FULL, .status = 101, .reason = "Switching Protocols",
      .flags = NSV__RESP_UPGRADE_WS | NSV__RESP_CONN_UPGRADE | KA, .nh = 3,
      .accept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" },
    { "Upgrade list", "HTTP/1.1 101 x\r\nUpgrade: h2c, WebSocket\r\n\r\n", .want = FULL,
      .status = 101, .reason = "x", .flags = NSV__RESP_UPGRADE_WS | KA, .nh = 1 },
    { "values trimmed", OK200 "X-A: \t a b \t \r\nX-B:\r\n\r\n", .want = FULL, .status = 200,
      .reason = "OK", .flags = KA, .nh = 2, .last = "" },
    { "long value (SIMD path)",
      OK200 "Set-Cookie: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\tbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb; Path=/\r\n\r\n",
      .want = FULL, .status = 200, .reason = "OK", .flags = KA, .nh = 1,
      .last = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\tbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb; Path=/" },
    { "obs-text in value", OK200 "X: caf\xc3\xa9\r\n\r\n", .want = FULL, .status = 200,
      .reason = "OK", .flags = KA, .nh = 1, .last = "caf\xc3\xa9" },
    { "body and next response after head", OK200 "\r\nHTTP/1.1 200 OK\r\n\r\n", .want = 19,
      .status = 200, .reason = "OK", .flags = KA },
    { "exactly max_headers", OK200 "A: 1\r\nB: 2\r\n\r\n", .want = FULL, .status = 200,
      .reason = "OK", .flags = KA, .nh = 2, .last = "2", .max_headers = 2 },
    { "nginx-like",
      "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Tue, 01 Dec 2026 21:00:00 GMT\r\n"
      "Content-Type: text/html\r\nContent-Length: 615\r\nLast-Modified: Mon, 30 Nov 2026 10:00:00 GMT\r\n"
      "Connection: keep-alive\r\nETag: \"5f2b-267\"\r\nAccept-Ranges: bytes\r\n\r\n",
      .want = FULL, .status = 200, .reason = "OK", .cl = "615",
      .flags = NSV__RESP_CONN_KEEPALIVE | KA, .nh = 8, .last = "bytes" },

    /* ---- incomplete ---- */
    { "incomplete: empty", "", .want = 0 },
    { "incomplete: status line", "HTTP/1.1 20", .want = 0 },
    { "incomplete: reason", "HTTP/1.1 200 O", .want = 0 },
    { "incomplete: no blank line", OK200 "A: 1\r\n", .want = 0 },
    { "incomplete: half CRLF", OK200 "\r", .want = 0 },

    /* ---- status line ---- */
    ERR("leading CRLF", "\r\nHTTP/1.1 200 OK\r\n\r\n", "status line: does not start with \"HTTP/\"", 0),
    ERR("leading space", " HTTP/1.1 200 OK\r\n\r\n", "status line: does not start with \"HTTP/\"", 0),
    ERR("lowercase http", "http/1.1 200 OK\r\n\r\n", "status line: does not start with \"HTTP/\"", 0),
    ERR("HTTP/2.0", "HTTP/2.0 200 OK\r\n\r\n", "status line: HTTP major version is not 1", 5),
    ERR("HTTP/0.9", "HTTP/0.9 200 OK\r\n\r\n", "status line: HTTP major version is not 1", 5),
    ERR("HTTP/1", "HTTP/1 200 OK\r\n\r\n", "status line: HTTP version is not DIGIT.DIGIT", 6),
    ERR("HTTP/1.x", "HTTP/1.x 200 OK\r\n\r\n", "status line: HTTP version is not DIGIT.DIGIT", 7),
    ERR("HTTP/1.10", "HTTP/1.10 200 OK\r\n\r\n", "status line: no single SP after the HTTP version", 8),
    ERR("two SP after version", "HTTP/1.1  200 OK\r\n\r\n", "status line: status code is not 3 digits", 9),
    ERR("HTAB after version", "HTTP/1.1\t200 OK\r\n\r\n", "status line: no single SP after the HTTP version", 8),
    ERR("two-digit status", "HTTP/1.1 20 OK\r\n\r\n", "status line: status code is not 3 digits", 11),
    ERR("four-digit status", "HTTP/1.1 2000 OK\r\n\r\n", "status line: status code is not 3 digits", 12),
    ERR("status 099", "HTTP/1.1 099 x\r\n\r\n", "status line: status code below 100", 9),
    ERR("status with sign", "HTTP/1.1 +20 OK\r\n\r\n", "status line: status code is not 3 digits", 9),
    ERR("status then HTAB", "HTTP/1.1 200\tOK\r\n\r\n", "status line: status code is not 3 digits", 12),
    ERR("bare LF ends status line", "HTTP/1.1 200 OK\nA: 1\r\n\r\n", "status line: ends with a bare LF", 15),
    ERR("bare LF after status", "HTTP/1.1 200\n\r\n", "status line: ends with a bare LF", 12),
    ERR("bare CR in status line", "HTTP/1.1 200 OK\rA: 1\r\n\r\n", "status line: CR not followed by LF", 16),
    ERR("NUL in reason", "HTTP/1.1 200 O\0K\r\n\r\n", "status line: control character in the reason phrase", 14),
    ERR("DEL in reason", "HTTP/1.1 200 O\x7fK\r\n\r\n", "status line: control character in the reason phrase", 14),
    ERR("request line", "GET / HTTP/1.1\r\n\r\n", "status line: does not start with \"HTTP/\"", 0),

    /* ---- header syntax ---- */
    ERR("obs-fold", OK200 "X: a\r\n b\r\n\r\n", "header: line starts with whitespace (obs-fold)", 23),
    ERR("obs-fold HTAB", OK200 "X: a\r\n\tb\r\n\r\n", "header: line starts with whitespace (obs-fold)", 23),
    ERR("space before colon", OK200 "Content-Length : 5\r\n\r\n", "header: whitespace between name and colon", 31),
    ERR("tab before colon", OK200 "X\t: 1\r\n\r\n", "header: whitespace between name and colon", 18),
    ERR("empty name", OK200 ": v\r\n\r\n", "header: empty name", 17),
    ERR("no colon", OK200 "Foo\r\n\r\n", "header: line without a colon", 20),
    ERR("bad name byte", OK200 "X@Y: 1\r\n\r\n", "header: name byte is not a token character", 18),
    ERR("non-ASCII name", OK200 "X\xc3\xa9: 1\r\n\r\n", "header: name byte is not a token character", 18),
    ERR("bare LF ends header", OK200 "X: 1\n\r\n", "header: bare LF in a value or ending a line", 21),
    ERR("bare LF in value", OK200 "X: a\nb\r\n\r\n", "header: bare LF in a value or ending a line", 21),
    ERR("bare CR in value", OK200 "X: a\rb\r\n\r\n", "header: bare CR in a value", 21),
    ERR("bare CR ends head", OK200 "\rX", "header: bare CR", 17),
    ERR("bare LF ends head", OK200 "\n", "header: line without a colon", 17),
    ERR("NUL in value", OK200 "X: a\0b\r\n\r\n", "header: NUL or control character in a value", 21),
    ERR("ESC in value", OK200 "X: \x1b[0m\r\n\r\n", "header: NUL or control character in a value", 20),
    ERR("DEL in value", OK200 "X: \x7f\r\n\r\n", "header: NUL or control character in a value", 20),

    /* ---- framing ---- */
    ERR("CL differing repeats", OK200 "Content-Length: 5\r\nContent-Length: 6\r\n\r\n",
        "Content-Length: differing values", 52),
    ERR("CL differing list", OK200 "Content-Length: 5, 6\r\n\r\n", "Content-Length: differing values", 36),
    ERR("CL non-digit", OK200 "Content-Length: 5a\r\n\r\n", "Content-Length: not a decimal number", 34),
    ERR("CL negative", OK200 "Content-Length: -1\r\n\r\n", "Content-Length: not a decimal number", 33),
    ERR("CL empty", OK200 "Content-Length:\r\n\r\n", "Content-Length: empty value or list element", 32),
    ERR("CL trailing comma", OK200 "Content-Length: 5,\r\n\r\n", "Content-Length: empty value or list element", 35),
    ERR("CL inner space", OK200 "Content-Length: 1 0\r\n\r\n", "Content-Length: not a decimal number", 34),
    ERR("CL overflow", OK200 "Content-Length: 9223372036854775808\r\n\r\n", "Content-Length: larger than 2^63-1", 51),
    ERR("CL invalid beside TE", OK200 "Transfer-Encoding: chunked\r\nContent-Length: x\r\n\r\n",
        "Content-Length: not a decimal number", 61),
    ERR("TE on HTTP/1.0", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        "Transfer-Encoding in an HTTP/1.0 response", 36),
    ERR("TE on HTTP/1.0 with CL", "HTTP/1.0 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        "Transfer-Encoding in an HTTP/1.0 response", 55),
    ERR("chunked, gzip", OK200 "Transfer-Encoding: chunked, gzip\r\n\r\n",
        "Transfer-Encoding: chunked is not the final coding", 45),
    ERR("chunked twice", OK200 "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        "Transfer-Encoding: chunked is not the final coding", 64),
    ERR("chunked with parameter", OK200 "Transfer-Encoding: chunked;x=1\r\n\r\n",
        "Transfer-Encoding: chunked takes no parameters", 43),
    ERR("TE junk after coding", OK200 "Transfer-Encoding: chunked x\r\n\r\n",
        "Transfer-Encoding: junk after a coding", 43),
    ERR("TE not a token", OK200 "Transfer-Encoding: \"chunked\"\r\n\r\n",
        "Transfer-Encoding: coding is not a token", 36),
    ERR("TE empty", OK200 "Transfer-Encoding:\r\n\r\n", "Transfer-Encoding: no coding", 37),
    ERR("TE only commas", OK200 "Transfer-Encoding: , ,\r\n\r\n", "Transfer-Encoding: no coding", 41),
    ERR("two accept keys", "HTTP/1.1 101 x\r\nSec-WebSocket-Accept: a\r\nSec-WebSocket-Accept: a\r\n\r\n",
        "Sec-WebSocket-Accept appears twice", 41),

    /* ---- limits ---- */
    { "too many headers", OK200 "A: 1\r\nB: 2\r\nC: 3\r\n\r\n", .want = NSV_ETOOBIG,
      .why = "header: more header lines than the limit", .why_at = 29, .max_headers = 2 },
    { "too many headers, incomplete", OK200 "A: 1\r\nB: 2\r\nC", .want = NSV_ETOOBIG,
      .why = "header: more header lines than the limit", .why_at = 29, .max_headers = 2 },
    { "zero max_headers", OK200 "A: 1\r\n\r\n", .want = NSV_ETOOBIG,
      .why = "header: more header lines than the limit", .why_at = 17, .max_headers = SIZE_MAX },
    { "zero max_headers, no headers", OK200 "\r\n", .want = FULL, .status = 200, .reason = "OK",
      .flags = KA, .max_headers = SIZE_MAX },
};

static size_t case_len(const rcase *c)
{
    if (c->len)
        return c->len;
    /* Inputs with an embedded NUL: up to the final CRLFCRLF. */
    if (strstr(c->name, "NUL in"))
        return strlen(c->in) + 1 + strlen(c->in + strlen(c->in) + 1);
    return strlen(c->in);
}

static size_t max_headers_of(const rcase *c)
{
    if (c->max_headers == SIZE_MAX)
        return 0;
    return c->max_headers ? c->max_headers : MAXH;
}

static int within(const char *p, size_t n, const char *buf, size_t len)
{
    return p >= buf && p + n <= buf + len;
}

/* Invariants of any successful parse. */
static int sane(const nsv__response *r, const char *buf, int got)
{
    size_t len = (size_t)got;
    if (!within(r->reason, r->reason_len, buf, len))
        return 0;
    if (r->ws_accept && !within(r->ws_accept, r->ws_accept_len, buf, len))
        return 0;
    for (size_t i = 0; i < r->num_headers; i++)
        if (!within(r->headers[i].name, r->headers[i].name_len, buf, len) ||
            !within(r->headers[i].value, r->headers[i].value_len, buf, len))
            return 0;
    return got >= 4 && memcmp(buf + got - 4, "\r\n\r\n", 4) == 0;
}

static void check_fields(const rcase *c, const nsv__response *r, const char *buf, int got)
{
    ok(sane(r, buf, got), "%s: pointers inside the head", c->name);
    is_int(r->status, c->status, "%s: status", c->name);
    is_int(r->minor_version, c->minor == 10 ? 0 : 1, "%s: minor_version", c->name);
    is_mem(r->reason, r->reason_len, c->reason, "%s: reason", c->name);
    is_int(r->content_length, c->cl ? strtoll(c->cl, NULL, 10) : -1, "%s: content_length", c->name);
    is_int(r->flags, c->flags, "%s: flags", c->name);
    is_int(r->num_headers, c->nh, "%s: num_headers", c->name);
    if (c->last && r->num_headers > 0) {
        const nsv__hdr *h = &r->headers[r->num_headers - 1];
        is_mem(h->value, h->value_len, c->last, "%s: last header value", c->name);
    }
    if (c->accept)
        ok(r->ws_accept && r->ws_accept_len == strlen(c->accept) &&
               memcmp(r->ws_accept, c->accept, r->ws_accept_len) == 0,
           "%s: Sec-WebSocket-Accept", c->name);
    else
        ok(r->ws_accept == NULL, "%s: no Sec-WebSocket-Accept", c->name);
}

static char *guard_end; /* a page followed by a PROT_NONE page */

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

static int parse_at_guard(const char *in, size_t n, nsv__response *r, nsv__hdr *h, size_t maxh,
                          const char **placed)
{
    char *p = guard_end - n;
    memcpy(p, in, n);
    *placed = p;
    return nsv__parse_response(p, n, r, h, maxh);
}

static void run_case(const rcase *c)
{
    size_t n = case_len(c), maxh = max_headers_of(c);
    nsv__hdr *h = malloc(sizeof *h * (maxh ? maxh : 1)); /* exactly maxh: ASan sees overruns */
    nsv__response r;
    const char *placed;
    int want = c->want == FULL ? (int)n : c->want;

    int got = parse_at_guard(c->in, n, &r, h, maxh, &placed);
    is_int(got, want, "%s: result", c->name);
    if (got > 0 && got == want)
        check_fields(c, &r, placed, got);
    if (c->why) {
        ok(r.why && strcmp(r.why, c->why) == 0, "%s: reason", c->name);
        if (r.why && strcmp(r.why, c->why) != 0)
            diag("got reason \"%s\"", r.why);
        is_int(r.why_at, c->why_at, "%s: offset of the bad byte", c->name);
    }
    const char *why = r.why;
    size_t at = r.why_at;

    /* Byte by byte: every prefix gives 0 before the head is whole, else the
     * same verdict and the same reason. */
    int bad = -1;
    for (size_t k = 0; k < n && bad < 0; k++) {
        int pr = parse_at_guard(c->in, k, &r, h, maxh, &placed);
        int expect = (want > 0 && k < (size_t)want) ? 0 : want;
        if (pr == 0 && (want <= 0 || k < (size_t)want))
            continue;
        if (pr != expect || (pr < 0 && (r.why != why || r.why_at != at)))
            bad = (int)k;
    }
    ok(bad < 0, "%s: every prefix consistent", c->name);
    if (bad >= 0)
        diag("prefix of length %d", bad);
    free(h);
}

/* ---- body framing ------------------------------------------------------ */

static const char *methods[] = { "GET", "HEAD", "POST", "CONNECT", "OPTIONS", "head", "connect" };
static const int statuses[] = { 100, 101, 102, 103, 150, 199, 200, 201, 204, 205, 206, 299,
                                300, 301, 304, 400, 404, 500, 599, 600, 999 };
static const struct framing {
    const char *hdrs;
    int tail; /* kind when the method and status allow a body */
    int reuse;
} framings[] = {
    { "", NSV__BODY_CLOSE, 1 },
    { "Content-Length: 5\r\n", NSV__BODY_LENGTH, 1 },
    { "Content-Length: 0\r\n", NSV__BODY_LENGTH, 1 },
    { "Transfer-Encoding: chunked\r\n", NSV__BODY_CHUNKED, 1 },
    { "Transfer-Encoding: gzip\r\n", NSV__BODY_CLOSE, 0 },
    { "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", NSV__BODY_CHUNKED, 0 },
    { "Connection: close\r\nContent-Length: 5\r\n", NSV__BODY_LENGTH, 0 },
};

/* RFC 9112 section 6.3, in its own order. */
static int expected_kind(const char *m, int status, int tail)
{
    if (status == 101)
        return NSV__BODY_UPGRADE;
    if (status / 100 == 1)
        return NSV__BODY_INTERIM;
    if (strcmp(m, "CONNECT") == 0 && status / 100 == 2)
        return NSV__BODY_UPGRADE;
    if (strcmp(m, "HEAD") == 0 || status == 204 || status == 304)
        return NSV__BODY_NONE;
    return tail;
}

static void test_framing(void)
{
    char in[256];
    nsv__hdr h[4];
    nsv__response r;
    size_t bad = 0, total = 0;
    for (size_t f = 0; f < sizeof framings / sizeof framings[0]; f++)
        for (size_t s = 0; s < sizeof statuses / sizeof statuses[0]; s++)
            for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++) {
                int n = snprintf(in, sizeof in, "HTTP/1.1 %d X\r\n%s\r\n", statuses[s], framings[f].hdrs);
                total++;
                int got = nsv__parse_response(in, (size_t)n, &r, h, 4);
                int kind = nsv__resp_body_kind(&r, methods[m], strlen(methods[m]));
                int want = expected_kind(methods[m], statuses[s], framings[f].tail);
                int wreuse = framings[f].reuse && (want == NSV__BODY_NONE || want == NSV__BODY_LENGTH ||
                                                   want == NSV__BODY_CHUNKED);
                if (got != n || kind != want || nsv__resp_reusable(&r, kind) != wreuse) {
                    if (!bad++)
                        diag("%s / %d / %s: kind %d want %d", methods[m], statuses[s],
                             framings[f].hdrs, kind, want);
                }
            }
    ok(!bad, "framing: %zu method/status/header combinations as RFC 9112 6.3", total);

    /* Spot checks spelled out. */
    static const struct {
        const char *in, *method;
        int kind, reuse;
    } spot[] = {
        { "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", "HEAD", NSV__BODY_NONE, 1 },
        { "HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n", "GET", NSV__BODY_NONE, 1 },
        { "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n", "GET", NSV__BODY_NONE, 1 },
        { "HTTP/1.1 200 Connection established\r\n\r\n", "CONNECT", NSV__BODY_UPGRADE, 0 },
        { "HTTP/1.1 407 Auth\r\nContent-Length: 2\r\n\r\n", "CONNECT", NSV__BODY_LENGTH, 1 },
        { "HTTP/1.0 200 OK\r\n\r\n", "GET", NSV__BODY_CLOSE, 0 },
        { "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n", "GET", NSV__BODY_LENGTH, 1 },
        { "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", "GET", NSV__BODY_LENGTH, 0 },
        { "HTTP/1.1 200 OK\r\n\r\n", "GET", NSV__BODY_CLOSE, 0 },
        { "HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n", "GET", NSV__BODY_INTERIM, 0 },
        { "HTTP/1.1 101 Switching Protocols\r\n\r\n", "GET", NSV__BODY_UPGRADE, 0 },
    };
    for (size_t i = 0; i < sizeof spot / sizeof spot[0]; i++) {
        int got = nsv__parse_response(spot[i].in, strlen(spot[i].in), &r, h, 4);
        int kind = nsv__resp_body_kind(&r, spot[i].method, strlen(spot[i].method));
        ok(got > 0 && kind == spot[i].kind && nsv__resp_reusable(&r, kind) == spot[i].reuse,
           "framing: %.*s to %s", (int)(strchr(spot[i].in, '\r') - spot[i].in), spot[i].in,
           spot[i].method);
    }
}

/* ---- 1xx sequences ------------------------------------------------------ */

/* What a client does: skip interim heads, stop at a final one. Returns the
 * offset of the final head's body and fills statuses. */
static int walk(const char *in, size_t n, const char *method, int *st, int *nst, int *kind)
{
    nsv__hdr h[8];
    nsv__response r;
    size_t off = 0;
    *nst = 0;
    for (int i = 0; i < 8; i++) {
        int got = nsv__parse_response(in + off, n - off, &r, h, 8);
        if (got <= 0)
            return got;
        st[(*nst)++] = r.status;
        off += (size_t)got;
        *kind = nsv__resp_body_kind(&r, method, strlen(method));
        if (*kind != NSV__BODY_INTERIM)
            return (int)off;
    }
    return -1;
}

static void test_interim(void)
{
    const char *seq = "HTTP/1.1 100 Continue\r\n\r\n"
                      "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
                      "HTTP/1.1 102 Processing\r\nContent-Length: 99\r\n\r\n"
                      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    int st[8], nst, kind = -1;
    size_t n = strlen(seq);
    int off = walk(seq, n, "POST", st, &nst, &kind);
    ok(off > 0 && nst == 4 && st[0] == 100 && st[1] == 103 && st[2] == 102 && st[3] == 200,
       "1xx: 100, 103, 102 skipped before the 200");
    ok(kind == NSV__BODY_LENGTH && off > 0 && memcmp(seq + off, "ok", 2) == 0 && (size_t)off + 2 == n,
       "1xx: the 200's body follows its head (1xx Content-Length ignored)");
    /* Cut anywhere: the same walk, or incomplete. */
    size_t bad = 0;
    for (size_t k = 0; k < n; k++) {
        int st2[8], n2, kind2;
        int o2 = walk(seq, k, "POST", st2, &n2, &kind2);
        if (o2 != 0 && !(o2 == off && (size_t)off <= k))
            bad++;
    }
    ok(!bad, "1xx: every cut of the sequence incomplete or the same");

    const char *up = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 101 Switching Protocols\r\n"
                     "Upgrade: websocket\r\nConnection: upgrade\r\n\r\n\x81\x02hi";
    off = walk(up, strlen(up), "GET", st, &nst, &kind);
    ok(nst == 2 && st[1] == 101 && kind == NSV__BODY_UPGRADE && memcmp(up + off, "\x81\x02", 2) == 0,
       "1xx: 101 ends HTTP; the WebSocket bytes follow");

    const char *badseq = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\nX: 1\r\n\r\n";
    off = walk(badseq, strlen(badseq), "GET", st, &nst, &kind);
    ok(off == NSV_EPARSE && nst == 1, "1xx: a bad head after a 100 is an error");
}

/* ---- limits and contract ---------------------------------------------- */

static void test_limits(void)
{
    nsv__hdr h[4];
    nsv__response r;
    const char *in = "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\n\r\n";
    h[2].name = "sentinel";
    is_int(nsv__parse_response(in, strlen(in), &r, h, 2), (int)strlen(in), "two slots suffice");
    ok(h[2].name && strcmp(h[2].name, "sentinel") == 0, "slot past max_headers untouched");
    ok(r.headers == h, "headers array recorded");
    ok(r.why == NULL, "no reason on success");

    /* A big head (the caller's size limit is what stops it): many headers. */
    static char big[1 << 16];
    size_t n = (size_t)sprintf(big, "HTTP/1.1 200 OK\r\n");
    for (int i = 0; i < 1000; i++)
        n += (size_t)sprintf(big + n, "Set-Cookie: c%d=%0*d\r\n", i, 20, i);
    memcpy(big + n, "\r\n", 2);
    n += 2;
    static nsv__hdr many[1000];
    is_int(nsv__parse_response(big, n, &r, many, 1000), (int)n, "1000 headers with 1000 slots");
    is_int(nsv__parse_response(big, n, &r, many, 999), NSV_ETOOBIG, "1000 headers with 999 slots");

    /* The result does not depend on what the struct held before. */
    memset(&r, 0x5a, sizeof r);
    is_int(nsv__parse_response("HTTP/1.1 200 OK\r\n\r\n", 19, &r, h, 4), 19, "dirty struct: parsed");
    ok(r.ws_accept == NULL && r.content_length == -1 && r.flags == KA && r.why == NULL,
       "dirty struct: every field set");
}

int main(void)
{
    setup_guard();
    size_t nvalid = 0, nother = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_case(&cases[i]);
        if (cases[i].want > 0)
            nvalid++;
        else
            nother++;
    }
    diag("table: %zu valid, %zu incomplete or malformed", nvalid, nother);
    test_framing();
    test_interim();
    test_limits();
    return done_testing();
}
