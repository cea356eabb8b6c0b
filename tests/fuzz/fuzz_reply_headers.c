/* fuzz_reply_headers.c - libFuzzer target for the check of a host's reply
 * header block (http/response.c), the last gate before bytes go on the
 * wire. The first two bytes pick a status and whether the reply streams;
 * the rest is the block. An accepted block must be whole "Name: value\r\n"
 * lines with token names and no control byte but HTAB in values, at most
 * one Content-Length that is a decimal number, and framing that
 * nsv__reply_check allows. */
#include "core/server.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(int cond)
{
    if (!cond)
        abort();
}

static int tchar(unsigned char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* Re-check an accepted block the slow way. */
static void verify(const unsigned char *h, size_t n, const nsv__hscan *hs)
{
    size_t i = 0;
    int cls = 0;
    while (i < n) {
        size_t start = i;
        while (i < n && tchar(h[i]))
            i++;
        check(i > start && i < n && h[i] == ':');
        int is_cl = i - start == 14 && !strncasecmp((const char *)h + start, "content-length", 14);
        size_t v = ++i;
        while (i < n && h[i] != '\r') {
            check(h[i] == '\t' || (h[i] >= 0x20 && h[i] != 0x7f));
            i++;
        }
        check(i + 1 < n && h[i + 1] == '\n');
        if (is_cl) {
            cls++;
            uint64_t x = 0;
            int digits = 0;
            for (size_t k = v; k < i; k++)
                if (h[k] >= '0' && h[k] <= '9')
                    x = x * 10 + (uint64_t)(h[k] - '0'), digits++;
                else
                    check(h[k] == ' ' || h[k] == '\t');
            check(digits > 0 && digits <= 19 && x == hs->cl);
        }
        i += 2;
    }
    check(cls <= 1 && (cls == 1) == !!(hs->seen & 1));
    if (hs->te_len)
        check(hs->te_off + hs->te_len <= n && !strncasecmp((const char *)h + hs->te_off, "transfer-encoding:", 18));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int status = 100 + data[0] * 4;
    int stream = data[1] & 1;
    const unsigned char *h = data + 2;
    size_t n = size - 2;
    nsv__hscan hs;
    int r = nsv__headers_scan(NULL, (const char *)h, n, &hs);
    check(r == 0 || r == NSV_EINVAL);
    check(nsv_last_error_detail(NULL) != NULL);
    if (r)
        return 0;
    verify(h, n, &hs);
    r = nsv__reply_check(NULL, status, &hs, stream);
    check(r == 0 || r == NSV_EINVAL);
    if (r == 0) {
        check(status >= 200 && status <= 999);
        check(!(hs.seen & 16) || stream); /* Transfer-Encoding only when streaming */
    }
    return 0;
}
