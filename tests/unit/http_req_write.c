/* http_req_write.c - request-head writer: valid requests byte-exact (and
 * accepted as meant by the server's own request parser), every rejection
 * with its reason, the needed-size contract, and chunk size lines. */
#include "http/req_write.h"
#include "http/parse.h"
#include "nanosrv.h"
#include "tap.h"

#include <limits.h>
#include <stdint.h>

#define S(x) (x), (sizeof(x) - 1)

typedef struct wcase {
    const char *name;
    const char *method, *target, *host, *headers;
    int64_t body_len;
    unsigned flags;
    const char *want; /* the exact head, or NULL for a rejection */
    const char *why;  /* the reason of a rejection */
} wcase;

#define UPG "Upgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
#define REJ(n, m, t, h, hd, bl, f, w) { n, m, t, h, hd, bl, f, NULL, w }

static const wcase cases[] = {
    /* ---- valid ---- */
    { "simple GET", "GET", "/", "example.com", "", 0, 0, "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", NULL },
    { "POST with body", "POST", "/submit?x=1&y=%20", "api.example.com:8443", "Content-Type: application/json\r\n", 13, 0,
      "POST /submit?x=1&y=%20 HTTP/1.1\r\nHost: api.example.com:8443\r\nContent-Type: application/json\r\n"
      "Content-Length: 13\r\n\r\n", NULL },
    { "POST empty body", "POST", "/", "h", "", 0, 0, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", NULL },
    { "PUT empty body", "PUT", "/", "h", "", 0, 0, "PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", NULL },
    { "PATCH empty body", "PATCH", "/", "h", "", 0, 0, "PATCH / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", NULL },
    { "DELETE without body", "DELETE", "/x", "h", "", 0, 0, "DELETE /x HTTP/1.1\r\nHost: h\r\n\r\n", NULL },
    { "GET with body", "GET", "/", "h", "", 5, 0, "GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n", NULL },
    { "huge Content-Length", "PUT", "/", "h", "", INT64_MAX, 0,
      "PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 9223372036854775807\r\n\r\n", NULL },
    { "chunked", "POST", "/up", "h", "X-A: 1\r\n", NSV__BODY_CHUNKED_LEN, 0,
      "POST /up HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nTransfer-Encoding: chunked\r\n\r\n", NULL },
    { "close", "GET", "/", "h", "", 0, NSV__WR_CLOSE, "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", NULL },
    { "websocket", "GET", "/ws", "h:80", UPG, 0, NSV__WR_UPGRADE,
      "GET /ws HTTP/1.1\r\nHost: h:80\r\n" UPG "Connection: upgrade\r\n\r\n", NULL },
    { "upgrade and close", "GET", "/ws", "h", UPG, 0, NSV__WR_UPGRADE | NSV__WR_CLOSE,
      "GET /ws HTTP/1.1\r\nHost: h\r\n" UPG "Connection: upgrade, close\r\n\r\n", NULL },
    { "absolute-form, host from target", "GET", "http://Example.com:8080/p?q", "", "", 0, 0,
      "GET http://Example.com:8080/p?q HTTP/1.1\r\nHost: Example.com:8080\r\n\r\n", NULL },
    { "absolute-form, same host", "GET", "HTTPS://e.com", "E.COM", "", 0, 0,
      "GET HTTPS://e.com HTTP/1.1\r\nHost: E.COM\r\n\r\n", NULL },
    { "absolute-form query only", "GET", "http://e.com?x=1", "", "", 0, 0,
      "GET http://e.com?x=1 HTTP/1.1\r\nHost: e.com\r\n\r\n", NULL },
    { "OPTIONS *", "OPTIONS", "*", "h", "", 0, 0, "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", NULL },
    { "CONNECT", "CONNECT", "example.com:443", "", "", 0, 0,
      "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", NULL },
    { "IPv6 host", "GET", "/", "[::1]:8080", "", 0, 0, "GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", NULL },
    { "IPv4 host", "GET", "/", "127.0.0.1:65535", "", 0, 0, "GET / HTTP/1.1\r\nHost: 127.0.0.1:65535\r\n\r\n", NULL },
    { "pct-encoded host", "GET", "/", "ex%41mple", "", 0, 0, "GET / HTTP/1.1\r\nHost: ex%41mple\r\n\r\n", NULL },
    { "token method", "PURGE", "/a", "h", "", 0, 0, "PURGE /a HTTP/1.1\r\nHost: h\r\n\r\n", NULL },
    { "header values", "GET", "/", "h", "X-Empty:\r\nX-Tab: a\tb\r\nX-Utf8: caf\xc3\xa9\r\nExpect: 100-continue\r\n", 0, 0,
      "GET / HTTP/1.1\r\nHost: h\r\nX-Empty:\r\nX-Tab: a\tb\r\nX-Utf8: caf\xc3\xa9\r\nExpect: 100-continue\r\n\r\n", NULL },

    /* ---- method ---- */
    REJ("empty method", "", "/", "h", "", 0, 0, "method: empty"),
    REJ("method with space", "GE T", "/", "h", "", 0, 0, "method: holds a byte that is not a token character"),
    REJ("method with CRLF", "GET\r\n", "/", "h", "", 0, 0, "method: holds a byte that is not a token character"),
    REJ("method with '('", "G(T", "/", "h", "", 0, 0, "method: holds a byte that is not a token character"),
    /* ---- target ---- */
    REJ("empty target", "GET", "", "h", "", 0, 0, "target: empty"),
    REJ("target with space", "GET", "/a b", "h", "", 0, 0, "target: contains a space (percent-encode it as %20)"),
    REJ("target with CRLF", "GET", "/a\r\nX: y", "h", "", 0, 0, "target: contains a control character"),
    REJ("target with HTAB", "GET", "/a\tb", "h", "", 0, 0, "target: contains a control character"),
    REJ("target with DEL", "GET", "/a\x7f", "h", "", 0, 0, "target: contains a control character"),
    REJ("target with fragment", "GET", "/a#b", "h", "", 0, 0, "target: contains '#' (a fragment is not sent)"),
    REJ("target non-ASCII", "GET", "/caf\xc3\xa9", "h", "", 0, 0, "target: byte above 0x7e (percent-encode it)"),
    REJ("relative target", "GET", "a/b", "h", "", 0, 0,
        "target: not origin-form (\"/...\"), absolute-form (\"http://...\"), \"*\" or CONNECT's host:port"),
    REJ("ftp target", "GET", "ftp://e.com/", "h", "", 0, 0,
        "target: not origin-form (\"/...\"), absolute-form (\"http://...\"), \"*\" or CONNECT's host:port"),
    REJ("asterisk for GET", "GET", "*", "h", "", 0, 0, "target: '*' is only for OPTIONS"),
    REJ("absolute-form userinfo", "GET", "http://u:p@e.com/", "", "", 0, 0, "target: userinfo ('@') in the authority"),
    REJ("absolute-form empty host", "GET", "http:///p", "", "", 0, 0, "target: empty authority"),
    REJ("absolute-form bad path", "GET", "http://e.com/a b", "", "", 0, 0,
        "target: contains a space (percent-encode it as %20)"),
    REJ("absolute-form host differs", "GET", "http://e.com/", "f.com", "", 0, 0,
        "host: differs from the target's authority"),
    REJ("CONNECT without port", "CONNECT", "e.com", "", "", 0, 0, "target: CONNECT takes host:port"),
    REJ("CONNECT origin-form", "CONNECT", "/", "", "", 0, 0,
        "target: authority holds a byte that is not allowed in a host name"),
    REJ("CONNECT with body", "CONNECT", "e.com:443", "", "", 4, 0, "body_len: a CONNECT request carries no body"),
    /* ---- host ---- */
    REJ("no host", "GET", "/", "", "", 0, 0, "host: empty (an origin-form or \"*\" target needs one)"),
    REJ("host with CRLF", "GET", "/", "h\r\nX: y", "", 0, 0,
        "host: byte not allowed in a host name (unreserved, sub-delims, %HH, [IPv6])"),
    REJ("host with space", "GET", "/", "a b", "", 0, 0,
        "host: byte not allowed in a host name (unreserved, sub-delims, %HH, [IPv6])"),
    REJ("host with slash", "GET", "/", "a/b", "", 0, 0,
        "host: byte not allowed in a host name (unreserved, sub-delims, %HH, [IPv6])"),
    REJ("host with userinfo", "GET", "/", "u@a", "", 0, 0, "host: userinfo ('@') is not sent in Host"),
    REJ("host bad %", "GET", "/", "a%4", "", 0, 0, "host: '%' is not followed by two hex digits"),
    REJ("host empty before port", "GET", "/", ":80", "", 0, 0, "host: empty host before the port"),
    REJ("host empty port", "GET", "/", "a:", "", 0, 0, "host: empty port after ':'"),
    REJ("host port letters", "GET", "/", "a:8x", "", 0, 0, "host: port is not a decimal number"),
    REJ("host port 0", "GET", "/", "a:0", "", 0, 0, "host: port is outside 1..65535"),
    REJ("host port 65536", "GET", "/", "a:65536", "", 0, 0, "host: port is outside 1..65535"),
    REJ("host port 6 digits", "GET", "/", "a:000080", "", 0, 0, "host: port is above 65535"),
    REJ("host IPv6 unclosed", "GET", "/", "[::1", "", 0, 0, "host: IPv6 literal without ']'"),
    REJ("host IPv6 no colon", "GET", "/", "[12]", "", 0, 0, "host: IPv6 literal without ':'"),
    REJ("host IPv6 bad byte", "GET", "/", "[::g]", "", 0, 0,
        "host: IPv6 literal holds a byte other than hex digits, ':' and '.'"),
    REJ("host IPv6 junk", "GET", "/", "[::1]x", "", 0, 0, "host: junk after the IPv6 literal"),
    /* ---- headers ---- */
    REJ("header without CRLF", "GET", "/", "h", "X: 1", 0, 0, "headers: last line does not end with CRLF"),
    REJ("header name only", "GET", "/", "h", "X", 0, 0, "headers: last line has no ':' and no CRLF"),
    REJ("header bare LF", "GET", "/", "h", "X: 1\n", 0, 0, "headers: bare LF in a value"),
    REJ("header bare CR", "GET", "/", "h", "X: 1\rY: 2\r\n", 0, 0, "headers: bare CR in a value"),
    REJ("header smuggled line", "GET", "/", "h", "X: 1\r\n\r\nGET /evil HTTP/1.1\r\n", 0, 0,
        "headers: empty line (the writer ends the head itself)"),
    REJ("header empty line", "GET", "/", "h", "\r\n", 0, 0, "headers: empty line (the writer ends the head itself)"),
    REJ("header obs-fold", "GET", "/", "h", "X: 1\r\n 2\r\n", 0, 0, "headers: line starts with whitespace (obs-fold)"),
    REJ("header space before colon", "GET", "/", "h", "X : 1\r\n", 0, 0, "headers: whitespace between name and ':'"),
    REJ("header no colon", "GET", "/", "h", "X\r\n", 0, 0, "headers: line without ':'"),
    REJ("header empty name", "GET", "/", "h", ": 1\r\n", 0, 0, "headers: empty name"),
    REJ("header bad name", "GET", "/", "h", "X(Y: 1\r\n", 0, 0, "headers: name holds a byte that is not a token character"),
    REJ("header control byte", "GET", "/", "h", "X: a\x01\r\n", 0, 0, "headers: control character in a value"),
    REJ("header DEL", "GET", "/", "h", "X: a\x7f\r\n", 0, 0, "headers: control character in a value"),
    REJ("header Host", "GET", "/", "h", "host: evil\r\n", 0, 0, "headers: Host is written from the host argument"),
    REJ("header Content-Length", "POST", "/", "h", "Content-Length: 5\r\n", 5, 0,
        "headers: Content-Length is written from body_len"),
    REJ("header Transfer-Encoding", "POST", "/", "h", "Transfer-Encoding: chunked\r\n", 5, 0,
        "headers: Transfer-Encoding is written from body_len"),
    REJ("header Connection", "GET", "/", "h", "CONNECTION: keep-alive\r\n", 0, 0,
        "headers: Connection is written from the flags (close, upgrade)"),
    REJ("header TE", "GET", "/", "h", "TE: trailers\r\n", 0, 0,
        "headers: TE needs \"Connection: TE\", and Connection is the writer's"),
    REJ("Upgrade without flag", "GET", "/", "h", UPG, 0, 0,
        "headers: Upgrade needs the upgrade flag (which writes Connection: upgrade)"),
    REJ("flag without Upgrade", "GET", "/", "h", "", 0, NSV__WR_UPGRADE, "flags: upgrade without an Upgrade header in headers"),
    REJ("unknown flag", "GET", "/", "h", "", 0, 8, "flags: unknown bit"),
    /* ---- body ---- */
    REJ("body_len -2", "POST", "/", "h", "", -2, 0, "body_len: below -1"),
    REJ("TRACE with body", "TRACE", "/", "h", "", 1, 0, "body_len: a TRACE request carries no body"),
    REJ("TRACE chunked", "TRACE", "/", "h", "", NSV__BODY_CHUNKED_LEN, 0, "body_len: a TRACE request carries no body"),
};

/* The server's parser reads the head as meant. */
static void round_trip(const wcase *c, const char *out, int n)
{
    nsv__hdr h[16];
    nsv__request q;
    int r = nsv__http_parse_request(out, (size_t)n, &q, h, 16, 8192);
    if (strcmp(c->method, "CONNECT") == 0) {
        is_int(r, -400, "%s: our server refuses CONNECT (authority-form)", c->name);
        return;
    }
    int okay = r == n && q.method_len == strlen(c->method) && memcmp(q.method, c->method, q.method_len) == 0 &&
               q.target_len == strlen(c->target) && memcmp(q.target, c->target, q.target_len) == 0 &&
               q.content_length == (c->body_len > 0 || strstr(c->want, "Content-Length: 0") ? c->body_len : -1) &&
               !!(q.flags & NSV__RF_CHUNKED) == (c->body_len == NSV__BODY_CHUNKED_LEN) &&
               !!(q.flags & NSV__RF_CONN_CLOSE) == !!(c->flags & NSV__WR_CLOSE) &&
               !!(q.flags & NSV__RF_CONN_UPGRADE) == !!(c->flags & NSV__WR_UPGRADE) && q.host != NULL;
    ok(okay, "%s: the request parser reads it back", c->name);
    if (!okay)
        diag("parse %d of %d, content_length %lld", r, n, (long long)q.content_length);
}

static void run_case(const wcase *c)
{
    static char out[4096];
    const char *why = "unset";
    int r = nsv__write_request(out, sizeof out, c->method, strlen(c->method), c->target, strlen(c->target),
                               c->host, strlen(c->host), c->headers, strlen(c->headers), c->body_len, c->flags,
                               &why);
    if (c->want) {
        is_int(r, (int)strlen(c->want), "%s: length", c->name);
        if (r > 0) {
            is_mem(out, (size_t)r, c->want, "%s: bytes", c->name);
            round_trip(c, out, r);
        } else {
            diag("reason: %s", why);
        }
        return;
    }
    is_int(r, NSV_EINVAL, "%s: rejected", c->name);
    ok(strcmp(why, c->why) == 0, "%s: reason", c->name);
    if (strcmp(why, c->why) != 0)
        diag("got \"%s\"", why);
    /* The reason does not depend on the buffer. */
    const char *why2 = "unset";
    int r2 = nsv__write_request(NULL, 0, c->method, strlen(c->method), c->target, strlen(c->target), c->host,
                                strlen(c->host), c->headers, strlen(c->headers), c->body_len, c->flags, &why2);
    ok(r2 == r && why2 == why, "%s: same verdict without a buffer", c->name);
}

static void test_sizes(void)
{
    static const char want[] = "POST /a HTTP/1.1\r\nHost: h\r\nX: 1\r\nContent-Length: 3\r\n\r\n";
    const int n = (int)sizeof want - 1;
    char buf[128];
    is_int(nsv__write_request(NULL, 0, S("POST"), S("/a"), S("h"), S("X: 1\r\n"), 3, 0, NULL), n,
           "size: cap 0 and NULL dst give the length");
    memset(buf, '#', sizeof buf);
    is_int(nsv__write_request(buf, (size_t)n - 1, S("POST"), S("/a"), S("h"), S("X: 1\r\n"), 3, 0, NULL), n,
           "size: one byte short gives the length");
    int untouched = 1;
    for (size_t i = 0; i < sizeof buf; i++)
        untouched &= buf[i] == '#';
    ok(untouched, "size: one byte short writes nothing");
    is_int(nsv__write_request(buf, (size_t)n, S("POST"), S("/a"), S("h"), S("X: 1\r\n"), 3, 0, NULL), n,
           "size: exact fit written");
    ok(memcmp(buf, want, (size_t)n) == 0 && buf[n] == '#', "size: exact fit, nothing past the head");
    is_int(nsv__write_request(buf, (size_t)n - 1, S("GET"), S("/a b"), S("h"), S(""), 0, 0, NULL), NSV_EINVAL,
           "size: validation comes before sizing");
    const char *why = NULL;
    is_int(nsv__write_request(buf, sizeof buf, S("GET"), S("/"), S("h"), S("X: a\0b\r\n"), 0, 0, &why), NSV_EINVAL,
           "NUL in a header value rejected");
    ok(why && strcmp(why, "headers: NUL in a value") == 0, "NUL in a header value: reason");
    is_int(nsv__write_request(buf, sizeof buf, S("GET"), S("/a\0"), S("h"), S(""), 0, 0, &why), NSV_EINVAL,
           "NUL in the target rejected");
    is_int(nsv__write_request(buf, sizeof buf, S("GET"), S("/"), S("h\0"), S(""), 0, 0, &why), NSV_EINVAL,
           "NUL in the host rejected");
    static char hdr[1 << 20];
    memset(hdr, 'a', sizeof hdr);
    memcpy(hdr, "X: ", 3);
    memcpy(hdr + sizeof hdr - 2, "\r\n", 2);
    int big = nsv__write_request(NULL, 0, S("GET"), S("/"), S("h"), hdr, sizeof hdr, 0, 0, &why);
    is_int(big, 3 + 1 + 1 + 17 + 1 + 2 + (int)sizeof hdr + 2, "size: a 1 MiB header block counted");
}

static void test_chunk_size(void)
{
    char b[NSV__CHUNK_SIZE_MAX];
    size_t n = nsv__write_chunk_size(b, 1);
    is_mem(b, n, "1\r\n", "chunk size 1");
    n = nsv__write_chunk_size(b, 0xabc);
    is_mem(b, n, "abc\r\n", "chunk size 0xabc");
    n = nsv__write_chunk_size(b, UINT64_MAX);
    is_mem(b, n, "ffffffffffffffff\r\n", "chunk size 2^64-1 fills the bound");

    /* Chunks written with it decode to the data. */
    static char wire[1 << 16], data[1 << 15], out[1 << 15];
    size_t w = 0, d = 0;
    unsigned seed = 7;
    for (int i = 0; i < 40; i++) {
        seed = seed * 1103515245u + 12345u;
        size_t len = (seed >> 16) % 700 + 1;
        w += nsv__write_chunk_size(wire + w, len);
        for (size_t j = 0; j < len; j++)
            wire[w++] = data[d++] = (char)('a' + (i + j) % 26);
        wire[w++] = '\r', wire[w++] = '\n';
    }
    memcpy(wire + w, "0\r\n\r\n", 5);
    w += 5;
    nsv__chunked dec = { 0, 0, 0 };
    size_t c, p;
    int r = nsv__chunked_decode(&dec, out, wire, w, &c, &p);
    ok(r == 1 && c == w && p == d && memcmp(out, data, d) == 0, "chunks decode to the data (%zu bytes)", d);
}

int main(void)
{
    size_t nvalid = 0, nrej = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_case(&cases[i]);
        if (cases[i].want)
            nvalid++;
        else
            nrej++;
    }
    diag("table: %zu valid, %zu rejected", nvalid, nrej);
    test_sizes();
    test_chunk_size();
    return done_testing();
}
