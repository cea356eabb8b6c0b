/* base64.c - RFC 4648 base64 (standard alphabet, '=' padding). */
#include "../internal.h"

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Value of a base64 digit, -1 for anything else. */
static int b64_val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* NULL buffers with a length: the detail names the argument. */
static int64_t null_arg(const char *fn, const char *src, size_t len, const char *dst, size_t cap)
{
    if (!src && len)
        return nsv__set_detail(NULL, NSV_EINVAL, "%s: src is NULL with len %zu", fn, len);
    if (!dst && cap)
        return nsv__set_detail(NULL, NSV_EINVAL, "%s: dst is NULL with cap %zu", fn, cap);
    return 0;
}

int64_t nsv_base64_encode(const char *src, size_t len, char *dst, size_t cap)
{
    if ((!src && len) || (!dst && cap))
        return null_arg("nsv_base64_encode", src, len, dst, cap);
    if (len > (size_t)INT64_MAX / 4 * 3 - 3)
        return nsv__set_detail(NULL, NSV_ERANGE, "nsv_base64_encode: len %zu is too large to encode", len);
    size_t need = (len + 2) / 3 * 4;
    if (need > cap)
        return (int64_t)need;
    const unsigned char *s = (const unsigned char *)src;
    char *o = dst;
    size_t i = 0;
    for (; i + 3 <= len; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        *o++ = b64_alphabet[v >> 18];
        *o++ = b64_alphabet[(v >> 12) & 63];
        *o++ = b64_alphabet[(v >> 6) & 63];
        *o++ = b64_alphabet[v & 63];
    }
    if (i < len) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < len ? (uint32_t)s[i + 1] << 8 : 0);
        *o++ = b64_alphabet[v >> 18];
        *o++ = b64_alphabet[(v >> 12) & 63];
        *o++ = i + 1 < len ? b64_alphabet[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    return (int64_t)need;
}

/* Validates src; returns the number of digits (padding excluded) or
 * NSV_EPARSE. Padding is optional but, when present, must complete the last
 * quantum; the unused low bits of the last digit must be zero so that every
 * byte string has exactly one accepted encoding. */
static int64_t b64_check(const unsigned char *s, size_t len)
{
    size_t pad = 0;
    while (pad < 2 && pad < len && s[len - 1 - pad] == '=')
        pad++;
    size_t n = len - pad;
    for (size_t i = 0; i < n; i++)
        if (b64_val(s[i]) < 0)
            return nsv__set_detail(NULL, NSV_EPARSE, "nsv_base64_decode: byte %zu (0x%02x) is not a "
                                   "base64 digit (A-Z a-z 0-9 + /, then '=' padding)", i, s[i]);
    if (pad && len % 4 != 0)
        return nsv__set_detail(NULL, NSV_EPARSE, "nsv_base64_decode: '=' padding, but the length %zu "
                               "is not a multiple of 4", len);
    if (n % 4 == 1)
        return nsv__set_detail(NULL, NSV_EPARSE, "nsv_base64_decode: %zu digits leave one digit over, "
                               "which encodes no byte", n);
    if ((n % 4 == 2 && (b64_val(s[n - 1]) & 15)) || (n % 4 == 3 && (b64_val(s[n - 1]) & 3)))
        return nsv__set_detail(NULL, NSV_EPARSE, "nsv_base64_decode: the last digit '%c' at byte %zu "
                               "has unused bits set (not a canonical encoding)", s[n - 1], n - 1);
    return (int64_t)n;
}

int64_t nsv_base64_decode(const char *src, size_t len, char *dst, size_t cap)
{
    if ((!src && len) || (!dst && cap))
        return null_arg("nsv_base64_decode", src, len, dst, cap);
    const unsigned char *s = (const unsigned char *)src;
    int64_t digits = b64_check(s, len);
    if (digits < 0)
        return digits;
    size_t n = (size_t)digits;
    size_t need = n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0);
    if (need > cap)
        return (int64_t)need;
    unsigned char *o = (unsigned char *)dst;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        acc = (acc << 6 | (uint32_t)b64_val(s[i])) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            *o++ = (unsigned char)(acc >> bits);
        }
    }
    return (int64_t)need;
}
