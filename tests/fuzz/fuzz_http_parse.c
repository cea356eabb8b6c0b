/* fuzz_http_parse.c - libFuzzer target for the request-head parser.
 * Besides memory safety it checks the parser's contract and aborts when it
 * breaks: results only from the documented set, every pointer inside the
 * consumed head, header names and values well-formed, and prefix
 * consistency (a prefix yields 0 or the same verdict as the whole input). */
#include "http/parse.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)          \
    do {                  \
        if (!(c))         \
            abort();      \
    } while (0)

static int is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static void check_in(const char *p, size_t n, const char *buf, int got)
{
    CHECK(p >= buf && p + n <= buf + got);
}

static void check_ok(const nsv__request *r, const char *buf, int got, size_t maxh, size_t maxuri)
{
    CHECK(got >= 4 && memcmp(buf + got - 4, "\r\n\r\n", 4) == 0);
    check_in(r->method, r->method_len, buf, got);
    CHECK(r->method_len > 0);
    for (size_t i = 0; i < r->method_len; i++)
        CHECK(is_tchar((unsigned char)r->method[i]));
    check_in(r->target, r->target_len, buf, got);
    CHECK(r->target_len > 0 && r->target_len <= maxuri);
    check_in(r->path, r->path_len, buf, got);
    CHECK(r->path_len > 0);
    CHECK(r->path[0] == '/' || (r->path[0] == '*' && r->path_len == 1));
    if (r->query)
        check_in(r->query, r->query_len, buf, got);
    else
        CHECK(r->query_len == 0);
    CHECK(r->minor_version == 0 || r->minor_version == 1);
    CHECK(r->num_headers <= maxh);
    CHECK(r->content_length >= -1);
    CHECK((r->flags & ~127u) == 0);
    if (r->flags & NSV__RF_CHUNKED)
        CHECK(r->content_length == -1 && r->minor_version == 1);
    if (r->minor_version == 1)
        CHECK(r->host != NULL);
    if (r->host)
        check_in(r->host, r->host_len, buf, got);
    for (size_t i = 0; i < r->num_headers; i++) {
        const nsv__hdr *h = &r->headers[i];
        check_in(h->name, h->name_len, buf, got);
        check_in(h->value, h->value_len, buf, got);
        CHECK(h->name_len > 0);
        for (size_t j = 0; j < h->name_len; j++)
            CHECK(is_tchar((unsigned char)h->name[j]));
        for (size_t j = 0; j < h->value_len; j++) {
            unsigned char c = (unsigned char)h->value[j];
            CHECK(c == '\t' || (c >= 0x20 && c != 0x7f));
        }
        if (h->value_len) {
            CHECK(h->value[0] != ' ' && h->value[0] != '\t');
            CHECK(h->value[h->value_len - 1] != ' ' && h->value[h->value_len - 1] != '\t');
        }
    }
}

static int valid_result(int r)
{
    return r >= 0 || r == -400 || r == -414 || r == -417 || r == -431 || r == -501 || r == -505;
}

/* Parses with the given limits, checks the result and prefix consistency
 * at `split`; returns the result and, on success, a copy of the request. */
static int run(const char *buf, size_t size, size_t maxh, size_t maxuri, size_t split,
               nsv__request *out)
{
    nsv__hdr *h = malloc(sizeof *h * (maxh ? maxh : 1)), *h2 = malloc(sizeof *h2 * (maxh ? maxh : 1));
    nsv__request r, r2;
    int got = nsv__http_parse_request(buf, size, &r, h, maxh, maxuri);
    CHECK(valid_result(got));
    CHECK(got <= (int)size || size > (size_t)INT32_MAX);
    if (got > 0)
        check_ok(&r, buf, got, maxh, maxuri);

    /* Prefix consistency at one cut point. */
    int pre = nsv__http_parse_request(buf, split, &r2, h2, maxh, maxuri);
    if (got > 0 && split < (size_t)got)
        CHECK(pre == 0);
    else if (got > 0)
        CHECK(pre == got && r2.num_headers == r.num_headers && r2.flags == r.flags &&
              r2.content_length == r.content_length && r2.path == r.path);
    else
        CHECK(pre == 0 || pre == got);
    free(h);
    free(h2);
    *out = r;
    out->headers = NULL; /* freed above */
    return got;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    uint32_t hash = 2166136261u;
    for (size_t i = 0; i < size; i++)
        hash = (hash ^ data[i]) * 16777619u;
    size_t split = size ? hash % (size + 1) : 0;
    nsv__request big, small, none;
    int rb = run(buf, size, 64, 8192, split, &big);
    int rs = run(buf, size, 3, 16, size ? size - 1 : 0, &small);
    int rn = run(buf, size, 0, 8192, split, &none);
    /* Tighter limits may only turn a result into -414 / -431. */
    if (rb > 0 && big.num_headers <= 3 && big.target_len <= 16)
        CHECK(rs == rb && small.flags == big.flags && small.content_length == big.content_length);
    else if (rb > 0)
        CHECK(rs == -414 || rs == -431);
    if (rb > 0 && big.num_headers == 0)
        CHECK(rn == rb);
    if (rs > 0)
        CHECK(rb == rs);
    return 0;
}
