/* static_path.c - the URL path below a static mount as a relative file
 * path: pure, no file system access, so it can be fuzzed on its own. */
#include "../internal.h"

/* Strict UTF-8 (RFC 3629): no overlong forms (the %c0%ae dot), no
 * surrogates, nothing past U+10FFFF. */
static int utf8_ok(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF)
            k = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
            k = 2;
            if (c == 0xE0)
                lo = 0xA0;
            else if (c == 0xED)
                hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            k = 3;
            if (c == 0xF0)
                lo = 0x90;
            else if (c == 0xF4)
                hi = 0x8F;
        } else
            return 0;
        if (n - i <= k)
            return 0;
        if (s[i + 1] < lo || s[i + 1] > hi)
            return 0;
        for (size_t j = 2; j <= k; j++)
            if (s[i + j] < 0x80 || s[i + j] > 0xBF)
                return 0;
        i += k + 1;
    }
    return 1;
}

/* Percent-escapes are decoded once. Refused (NSV_EINVAL): a bad escape, an
 * encoded '/' (%2f), a backslash raw or encoded, NUL and other control
 * bytes, DEL, a ".." segment (raw or encoded), invalid or overlong UTF-8,
 * and unless dotfiles a segment starting with '.'. Empty segments (doubled
 * slashes) and "." segments are dropped. The result has no leading or
 * trailing '/', no empty segment and no "..": it cannot leave the directory
 * it is resolved in, except through a symlink (the caller's part). Returns
 * its length (0: the directory itself), or NSV_ETOOBIG when cap is short. */
int64_t nsv__static_path(const char *path, size_t n, int dotfiles, char *out, size_t cap)
{
    const unsigned char *p = (const unsigned char *)path;
    size_t o = 0;   /* kept output, without a trailing '/' */
    size_t seg = 0; /* where the current segment's bytes start in out */
    size_t w = 0;   /* write position of the current segment */
    for (size_t i = 0;; i++) {
        if (i == n || p[i] == '/') {
            size_t len = w - seg;
            int keep = len > 0;
            if (len == 1 && out[seg] == '.')
                keep = 0;
            else if (len == 2 && out[seg] == '.' && out[seg + 1] == '.')
                return NSV_EINVAL;
            else if (len && out[seg] == '.' && !dotfiles)
                return NSV_EINVAL;
            if (keep) {
                if (!utf8_ok((const unsigned char *)out + seg, len))
                    return NSV_EINVAL;
                o = w;
            }
            if (i == n)
                break;
            seg = w = o ? o + 1 : 0; /* the next segment, after a '/' if one is kept */
            if (o && o >= cap)
                return NSV_ETOOBIG;
            if (o)
                out[o] = '/';
            continue;
        }
        unsigned char c = p[i];
        if (c == '%') {
            if (n - i < 3)
                return NSV_EINVAL;
            int a = nsv__hexval(p[i + 1]), b = nsv__hexval(p[i + 2]);
            if (a < 0 || b < 0)
                return NSV_EINVAL;
            c = (unsigned char)(a << 4 | b);
            if (c == '/')
                return NSV_EINVAL; /* an encoded slash would name another file than it shows */
            i += 2;
        }
        if (c < 0x20 || c == 0x7f || c == '\\')
            return NSV_EINVAL;
        if (w >= cap)
            return NSV_ETOOBIG;
        out[w++] = (char)c;
    }
    return (int64_t)o;
}
