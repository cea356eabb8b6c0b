/* fuzz_url.c - libFuzzer target for URL parsing, percent-encoding and
 * base64. The first byte picks the function; the rest is its input.
 * Checks offsets stay inside the input and that codecs round-trip. */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(int cond)
{
    if (!cond)
        abort();
}

static void check_range(uint32_t off, uint32_t len, size_t size)
{
    check(off <= size && len <= size - off);
}

static void fuzz_parse(const char *s, size_t n)
{
    nsv_url u;
    int rc = nsv_url_parse(s, n, &u);
    check(rc == 0 || rc == NSV_EURL);
    if (rc)
        return;
    check_range(u.scheme_off, u.scheme_len, n);
    check_range(u.host_off, u.host_len, n);
    check_range(u.path_off, u.path_len, n);
    check_range(u.query_off, u.query_len, n);
    check(u.host_len > 0 && u.port >= 0 && u.port <= 65535);
    check(u.is_tls == 0 || u.is_tls == 1);
    check(u.path_len == 0 || s[u.path_off] == '/');
}

/* Output buffer of exactly `need` bytes, as the sizing call said. */
static char *sized(int64_t need)
{
    check(need >= 0);
    char *p = malloc(need ? (size_t)need : 1);
    check(p != NULL);
    return p;
}

static void fuzz_percent(const char *s, size_t n)
{
    int64_t e = nsv_url_encode(s, n, NULL, 0);
    char *enc = sized(e);
    check(nsv_url_encode(s, n, enc, (size_t)e) == e);
    char *dec = sized((int64_t)n);
    check(nsv_url_decode(enc, (size_t)e, dec, n, 1) == (int64_t)n);
    check(n == 0 || memcmp(dec, s, n) == 0);
    free(enc);
    free(dec);

    for (int form = 0; form < 2; form++) {
        int64_t d = nsv_url_decode(s, n, NULL, 0, form);
        if (d < 0) {
            check(d == NSV_EPARSE);
            continue;
        }
        check((size_t)d <= n);
        char *out = sized(d);
        check(nsv_url_decode(s, n, out, (size_t)d, form) == d);
        free(out);
    }
}

static void fuzz_base64(const char *s, size_t n)
{
    int64_t e = nsv_base64_encode(s, n, NULL, 0);
    char *enc = sized(e);
    check(nsv_base64_encode(s, n, enc, (size_t)e) == e);
    char *dec = sized((int64_t)n);
    check(nsv_base64_decode(enc, (size_t)e, dec, n) == (int64_t)n);
    check(n == 0 || memcmp(dec, s, n) == 0);
    free(enc);
    free(dec);

    /* Accepted input is canonical: re-encoding gives it back (plus any
     * padding it left out). */
    int64_t d = nsv_base64_decode(s, n, NULL, 0);
    if (d < 0) {
        check(d == NSV_EPARSE);
        return;
    }
    char *raw = sized(d);
    check(nsv_base64_decode(s, n, raw, (size_t)d) == d);
    int64_t e2 = nsv_base64_encode(raw, (size_t)d, NULL, 0);
    char *again = sized(e2);
    nsv_base64_encode(raw, (size_t)d, again, (size_t)e2);
    check((size_t)e2 >= n && memcmp(again, s, n) == 0);
    for (int64_t i = (int64_t)n; i < e2; i++)
        check(again[i] == '=');
    free(raw);
    free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t n = size - 1;
    /* Exact-size copy so reads past the input are caught. */
    char *s = malloc(n ? n : 1);
    check(s != NULL);
    if (n)
        memcpy(s, data + 1, n);
    switch (data[0] % 3) {
    case 0: fuzz_parse(s, n); break;
    case 1: fuzz_percent(s, n); break;
    default: fuzz_base64(s, n); break;
    }
    free(s);
    return 0;
}
