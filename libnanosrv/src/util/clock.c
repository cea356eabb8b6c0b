/* clock.c - monotonic milliseconds and small string helpers. */
#include "../internal.h"
#include <time.h>

int64_t nsv_millis(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int nsv__strncaseeq(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (nsv__lower((unsigned char)a[i]) != nsv__lower((unsigned char)b[i]))
            return 0;
    return 1;
}
