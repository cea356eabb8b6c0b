/* clock.c - monotonic milliseconds, HTTP dates and small string helpers. */
#include "../internal.h"
#include <string.h>
#include <time.h>

int64_t nsv_millis(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t nsv__mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    return us > 0 ? us : 1;
}

int nsv__strncaseeq(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (nsv__lower((unsigned char)a[i]) != nsv__lower((unsigned char)b[i]))
            return 0;
    return 1;
}

static const char *const wdays[] = {"Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"};
static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* IMF-fixdate (RFC 9110 5.6.7) of t, Unix seconds from 0 to the end of
 * year 9999, into o[29]: "Sun, 06 Nov 1994 08:49:37 GMT". Written by hand:
 * strftime's day and month names follow the host's LC_TIME. */
void nsv__imf_fixdate(int64_t t, char *o)
{
    int64_t days = t / 86400, secs = t % 86400;
    /* Civil date from days since 1970-01-01 (H. Hinnant's algorithm). */
    int64_t z = days + 719468, era = z / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;
    int64_t y = yoe + era * 400 + (m <= 2);
    const char *wd = wdays[days % 7], *mo = months[m - 1];
    int hh = (int)(secs / 3600), mi = (int)(secs / 60 % 60), ss = (int)(secs % 60);
    memcpy(o, wd, 3);
    o[3] = ',';
    o[4] = ' ';
    o[5] = (char)('0' + d / 10);
    o[6] = (char)('0' + d % 10);
    o[7] = ' ';
    memcpy(o + 8, mo, 3);
    o[11] = ' ';
    o[12] = (char)('0' + y / 1000);
    o[13] = (char)('0' + y / 100 % 10);
    o[14] = (char)('0' + y / 10 % 10);
    o[15] = (char)('0' + y % 10);
    o[16] = ' ';
    o[17] = (char)('0' + hh / 10);
    o[18] = (char)('0' + hh % 10);
    o[19] = ':';
    o[20] = (char)('0' + mi / 10);
    o[21] = (char)('0' + mi % 10);
    o[22] = ':';
    o[23] = (char)('0' + ss / 10);
    o[24] = (char)('0' + ss % 10);
    memcpy(o + 25, " GMT", 4);
}
