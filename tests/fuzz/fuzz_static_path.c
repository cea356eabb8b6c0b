/* fuzz_static_path.c - libFuzzer target for the static-file path
 * normaliser (util/static_path.c). The first byte's low bit turns dot files
 * on; the rest is a URL path below a mount. Property of every accepted
 * result: relative (no leading '/'), no trailing '/', no empty, "." or ".."
 * segment, no NUL, backslash or control byte, strict UTF-8, and no dot file
 * unless allowed; never longer than the input; a refusal is NSV_EINVAL. */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(int cond)
{
    if (!cond)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    int dotfiles = data[0] & 1;
    const char *p = (const char *)data + 1;
    size_t n = size - 1;
    char *out = malloc(n + 1);
    int64_t r = nsv__static_path(p, n, dotfiles, out, n);
    check(r == NSV_EINVAL || (r >= 0 && (size_t)r <= n));
    if (r > 0) {
        size_t len = (size_t)r;
        check(out[0] != '/' && out[len - 1] != '/');
        size_t seg = 0;
        for (size_t i = 0; i <= len; i++) {
            if (i == len || out[i] == '/') {
                size_t sl = i - seg;
                check(sl > 0);
                check(!(sl == 1 && out[seg] == '.'));
                check(!(sl == 2 && out[seg] == '.' && out[seg + 1] == '.'));
                check(dotfiles || out[seg] != '.');
                seg = i + 1;
                continue;
            }
            unsigned char c = (unsigned char)out[i];
            check(c >= 0x20 && c != 0x7f && c != '\\');
        }
        /* strict UTF-8: no C0/C1 lead bytes or bytes past F4 */
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)out[i];
            check(c != 0xC0 && c != 0xC1 && c < 0xF5);
        }
    }
    /* A smaller output buffer never overflows: refusal or a fitting result. */
    if (n > 2) {
        char *small = malloc(n / 2);
        int64_t r2 = nsv__static_path(p, n, dotfiles, small, n / 2);
        check(r2 == NSV_EINVAL || r2 == NSV_ETOOBIG || (r2 >= 0 && r2 == r && (size_t)r2 <= n / 2));
        free(small);
    }
    free(out);
    return 0;
}
