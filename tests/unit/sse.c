/* sse.c - unit tests for nsv_sse_format and nsv_sse_comment: fields, data
 * split on LF, CRLF and lone CR, empty data, id-only and retry-only blocks,
 * refused injections, sizing calls. */
#include "internal.h"
#include "tap.h"

#define S(x) x, sizeof(x) - 1

/* Formats with a sizing call first, then into a buffer of exactly that
 * size (guard byte after it), and compares with want. */
static void fmt(const char *ev, size_t el, const char *id, size_t il, const char *d, size_t dl, int64_t retry,
                const char *want, const char *what)
{
    char buf[512];
    int64_t need = nsv_sse_format(ev, el, id, il, d, dl, retry, NULL, 0);
    int good = need == (int64_t)strlen(want);
    if (good) {
        memset(buf, '#', sizeof buf);
        good = nsv_sse_format(ev, el, id, il, d, dl, retry, buf, (size_t)need) == need && buf[need] == '#';
        /* one byte short: nothing written, same answer */
        char small[512];
        memset(small, '#', sizeof small);
        good = good && nsv_sse_format(ev, el, id, il, d, dl, retry, small, (size_t)need - 1) == need &&
               small[0] == '#';
        /* a roomy buffer (written without a sizing pass): the same bytes */
        static char roomy[65536];
        memset(roomy, '#', sizeof roomy);
        good = good && nsv_sse_format(ev, el, id, il, d, dl, retry, roomy, sizeof roomy) == need &&
               roomy[need] == '#' && memcmp(roomy, want, (size_t)need) == 0;
    }
    if (!good) {
        ok(0, "%s", what);
        diag("need %lld, want %zu", (long long)need, strlen(want));
        return;
    }
    is_mem(buf, (size_t)need, want, "%s", what);
}

static void refused(int64_t r, const char *in_detail, const char *what)
{
    const char *d = nsv_last_error_detail(NULL);
    if (!ok(r == NSV_EINVAL && strstr(d, in_detail), "%s", what))
        diag("got %lld, detail: %s", (long long)r, d);
}

int main(void)
{
    fmt(NULL, 0, NULL, 0, S("hello"), -1, "data: hello\n\n", "plain data");
    fmt(S("tick"), S("42"), S("x"), 3000, "event: tick\nid: 42\nretry: 3000\ndata: x\n\n", "all fields");
    fmt(NULL, 0, NULL, 0, S("a\nb\r\nc\rd"), -1, "data: a\ndata: b\ndata: c\ndata: d\n\n", "LF, CRLF and CR split");
    fmt(NULL, 0, NULL, 0, S("a\r\r\nb"), -1, "data: a\ndata: \ndata: b\n\n", "CR then CRLF: an empty line between");
    fmt(NULL, 0, NULL, 0, S("a\n"), -1, "data: a\ndata: \n\n", "a trailing LF gives a last empty line");
    fmt(NULL, 0, NULL, 0, S("\n"), -1, "data: \ndata: \n\n", "data of one LF");
    fmt(NULL, 0, NULL, 0, S("a\r"), -1, "data: a\ndata: \n\n", "a trailing CR gives a last empty line");
    fmt(NULL, 0, NULL, 0, S("  x"), -1, "data:   x\n\n", "leading spaces kept (one space after the colon)");
    fmt(NULL, 0, NULL, 0, "", 0, -1, "data: \n\n", "empty data (non-NULL): one empty data line, dispatched");
    fmt(S("ping"), NULL, 0, NULL, 0, -1, "event: ping\ndata: \n\n", "a named event without data still gets a data line");
    fmt(NULL, 0, S("7"), NULL, 0, -1, "id: 7\n\n", "id only: no data line (not dispatched)");
    fmt(NULL, 0, "", 0, NULL, 0, -1, "id: \n\n", "an empty id resets the last event id");
    fmt(NULL, 0, NULL, 0, NULL, 0, 0, "retry: 0\n\n", "retry 0");
    fmt(NULL, 0, NULL, 0, NULL, 0, INT64_MAX, "retry: 9223372036854775807\n\n", "retry INT64_MAX");
    {
        char buf[32];
        int64_t n = nsv_sse_format(NULL, 0, NULL, 0, "a\0b", 3, -1, buf, sizeof buf);
        ok(n == 11 && memcmp(buf, "data: a\0b\n\n", 11) == 0, "NUL in data is copied");
    }
    fmt(S("ev:t x"), S("i d"), S("d"), -1, "event: ev:t x\nid: i d\ndata: d\n\n", "colons and spaces in name and id");

    refused(nsv_sse_format(S("a\nb"), NULL, 0, S("x"), -1, NULL, 0), "event name byte 1 is LF",
            "LF in the event name is refused");
    refused(nsv_sse_format(S("a\r"), NULL, 0, S("x"), -1, NULL, 0), "event name byte 1 is CR",
            "CR in the event name is refused");
    refused(nsv_sse_format(NULL, 0, S("1\r\ndata: evil"), S("x"), -1, NULL, 0), "id byte 1 is CR",
            "CRLF in the id is refused");
    refused(nsv_sse_format(NULL, 0, S("1\n"), S("x"), -1, NULL, 0), "id byte 1 is LF", "LF in the id is refused");
    refused(nsv_sse_format(NULL, 0, S("1\0002"), S("x"), -1, NULL, 0), "id byte 1 is NUL", "NUL in the id is refused");
    refused(nsv_sse_format(NULL, 0, NULL, 0, NULL, 0, -1, NULL, 0), "nothing to send", "nothing to send is refused");
    refused(nsv_sse_format(NULL, 3, NULL, 0, S("x"), -1, NULL, 0), "event is NULL", "NULL event with a length");
    refused(nsv_sse_format(NULL, 0, NULL, 2, S("x"), -1, NULL, 0), "id is NULL", "NULL id with a length");
    refused(nsv_sse_format(NULL, 0, NULL, 0, NULL, 5, -1, NULL, 0), "data is NULL", "NULL data with a length");
    refused(nsv_sse_format(NULL, 0, NULL, 0, S("x"), -1, NULL, 10), "dst is NULL", "NULL dst with a cap");
    {
        char buf[8] = "#######";
        nsv_sse_format(S("a\nb"), NULL, 0, S("x"), -1, buf, sizeof buf);
        ok(buf[0] == '#', "a refused event writes nothing");
    }
    is_int(nsv_sse_format(NULL, 0, NULL, 0, "x", (size_t)INT64_MAX, -1, NULL, 0), NSV_ETOOBIG,
           "a huge length is NSV_ETOOBIG, not an overflow");

    /* comments */
    {
        char buf[64];
        int64_t n = nsv_sse_comment(S("keepalive"), NULL, 0);
        is_int(n, 13, "comment sizing call");
        is_int(nsv_sse_comment(S("keepalive"), buf, sizeof buf), 13, "comment");
        is_mem(buf, 13, ": keepalive\n\n", "comment bytes");
        n = nsv_sse_comment(NULL, 0, buf, sizeof buf);
        is_mem(buf, (size_t)n, ": \n\n", "empty comment");
        n = nsv_sse_comment(S("a\r\nb\rc\nd"), buf, sizeof buf);
        is_mem(buf, (size_t)n, ": a\n: b\n: c\n: d\n\n", "comment lines split like data");
        memset(buf, '#', sizeof buf);
        is_int(nsv_sse_comment(S("keepalive"), buf, 12), 13, "comment one byte short: the size");
        ok(buf[0] == '#', "and nothing written");
        is_int(nsv_sse_comment(NULL, 3, NULL, 0), NSV_EINVAL, "NULL text with a length");
    }

    /* a large event: sizing matches the written length */
    {
        size_t dl = 100000;
        char *d = malloc(dl);
        for (size_t i = 0; i < dl; i++)
            d[i] = (i % 100 == 99) ? '\n' : 'a';
        int64_t need = nsv_sse_format(S("big"), NULL, 0, d, dl, -1, NULL, 0);
        /* 1000 lines of 99 bytes, the last one empty after the trailing LF */
        is_int(need, 11 + 1000 * (6 + 99 + 1) + 7 + 1, "large event size");
        char *out = malloc((size_t)need);
        ok(nsv_sse_format(S("big"), NULL, 0, d, dl, -1, out, (size_t)need) == need &&
               memcmp(out + need - 9, "\ndata: \n\n", 9) == 0,
           "large event written");
        free(out);
        free(d);
    }
    /* comments: a roomy buffer and an exact one give the same bytes */
    {
        static const char text[] = "a\r\nb\rc\n\n";
        static const char want[] = ": a\n: b\n: c\n: \n: \n\n";
        char exact[sizeof want], roomy[256];
        memset(roomy, '#', sizeof roomy);
        is_int(nsv_sse_comment(S(text), exact, sizeof want - 1), (int64_t)sizeof want - 1, "comment, exact");
        is_int(nsv_sse_comment(S(text), roomy, sizeof roomy), (int64_t)sizeof want - 1, "comment, roomy");
        ok(memcmp(exact, want, sizeof want - 1) == 0 && memcmp(roomy, want, sizeof want - 1) == 0 &&
               roomy[sizeof want - 1] == '#', "comment bytes");
    }
    return done_testing();
}
