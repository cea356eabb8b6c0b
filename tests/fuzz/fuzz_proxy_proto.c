/* fuzz_proxy_proto.c - libFuzzer target for the PROXY protocol parser
 * (util/proxy_proto.c). The first byte picks the versions accepted; the
 * rest is the input, fed whole and then byte by byte as a slow front
 * would send it. Checks that a header's length stays inside the input,
 * that every prefix of a header asks for more, that feeding it in pieces
 * gives the same answer, and that the TLV fields point inside it. */
#include "util/proxy_proto.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(int cond)
{
    if (!cond)
        abort();
}

static void check_str(nsv__pp_str s, const uint8_t *p, size_t h)
{
    if (s.p)
        check(s.p >= p && s.len <= h && (size_t)(s.p - p) <= h - s.len);
    else
        check(s.len == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int accept = (data[0] & 3) ? (data[0] & 3) : 3;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    nsv__pp_result r;
    const char *why = NULL;
    int h = nsv__pp_parse(p, n, accept, &r, &why);
    check(h >= NSV__PP_ERROR);
    check(h != NSV__PP_ERROR || why != NULL);
    if (h > 0) {
        check((size_t)h <= n && h <= NSV__PP_MAX);
        check(r.version == 1 || r.version == 2);
        check(r.version != 1 || h <= NSV__PP_V1_MAX);
        check_str(r.alpn, p, (size_t)h);
        check_str(r.authority, p, (size_t)h);
        check_str(r.unique_id, p, (size_t)h);
        check_str(r.netns, p, (size_t)h);
        check_str(r.ssl_version, p, (size_t)h);
        /* The header alone parses the same; every shorter prefix needs more. */
        nsv__pp_result r2;
        check(nsv__pp_parse(p, (size_t)h, accept, &r2, &why) == h);
        for (size_t k = 0; k < (size_t)h; k++)
            check(nsv__pp_parse(p, k, accept, &r2, &why) == NSV__PP_NEED);
    } else {
        /* A verdict on a prefix never contradicts the whole: "need" on
         * every prefix of an input that needs more, no header in between. */
        for (size_t k = 0; k < n; k++) {
            nsv__pp_result r2;
            int hk = nsv__pp_parse(p, k, accept, &r2, &why);
            if (h == NSV__PP_NEED)
                check(hk == NSV__PP_NEED);
            else
                check(hk <= 0);
        }
    }
    return 0;
}
