/* fuzz_json.c - libFuzzer target for the JSON path getters.
 *
 * Input: the first byte picks a path from a table, or (0xf0 and above) says
 * the path is the bytes up to the first '\n'; the rest is the document.
 * Besides memory errors it checks that the getters agree with each other
 * and that nsv_json_string never writes past cap. */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const paths[] = {
    "$", "$[0]", "$[1]", "$.a", "$.a.b", "$.a[0]", "$.a[1].b", "$[0][0]", "$.k",
    "$.a.b.c", "$[0].a", "$.\xc3\xa9", "$.a[2]", "$[2][1][0]", "$.key.x[0]", "$..",
};

static void check(int cond)
{
    if (!cond)
        abort();
}

/* Calls nsv_json_string with exact and short buffers; returns its result. */
static int64_t check_string(const char *doc, size_t len, const char *path, size_t plen)
{
    int64_t need = nsv_json_string(doc, len, path, plen, NULL, 0);
    if (need < 0)
        return need;
    size_t n = (size_t)need;
    unsigned char *buf = malloc(n + 1);
    check(buf != NULL);
    memset(buf, 0xa5, n + 1);
    if (n > 0) {
        /* One byte short: the length comes back, nothing is written. */
        check(nsv_json_string(doc, len, path, plen, (char *)buf, n - 1) == need);
        for (size_t i = 0; i <= n; i++)
            check(buf[i] == 0xa5);
    }
    check(nsv_json_string(doc, len, path, plen, (char *)buf, n) == need);
    check(buf[n] == 0xa5);
    free(buf);
    return need;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *path;
    size_t plen;
    const char *doc = (const char *)data + 1;
    size_t len = size - 1;
    if (data[0] >= 0xf0) {
        const char *nl = memchr(doc, '\n', len);
        if (!nl)
            return 0;
        path = doc;
        plen = (size_t)(nl - doc);
        len -= plen + 1;
        doc = nl + 1;
    } else {
        path = paths[data[0] % (sizeof paths / sizeof paths[0])];
        plen = strlen(path);
    }
    /* Exact-size copy so reads past the document are caught. */
    char *copy = malloc(len ? len : 1);
    check(copy != NULL);
    if (len)
        memcpy(copy, doc, len);

    int64_t s = check_string(copy, len, path, plen);
    double d;
    int64_t i;
    int b;
    int rn = nsv_json_number(copy, len, path, plen, &d);
    int ri = nsv_json_integer(copy, len, path, plen, &i);
    int rb = nsv_json_boolean(copy, len, path, plen, &b);

    /* Validation and path errors do not depend on the getter. */
    if (s == NSV_EPARSE || s == NSV_EINVAL)
        check(rn == s && ri == s && rb == s);
    /* At most one type matches. */
    check((s >= 0) + (rn == 0 || rn == NSV_ERANGE) + (rb == 0) <= 1);
    check(rb != 0 || b == 0 || b == 1);
    /* An integer is also a number, and an exact one up to 2^53. */
    if (ri == 0) {
        check(rn == 0);
        if (i >= -(INT64_C(1) << 53) && i <= (INT64_C(1) << 53))
            check(d == (double)i);
    }
    if (ri == NSV_ERANGE)
        check(rn == 0 || rn == NSV_ERANGE);
    free(copy);
    return 0;
}
