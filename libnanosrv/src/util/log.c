/* log.c - process-wide log level and sink. */
#include "../internal.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

static _Atomic int log_level = NSV_LOG_ERROR;
static nsv_log_fn _Atomic log_fn;
static void *_Atomic log_ud;

int nsv_log_level(void) { return atomic_load(&log_level); }

int nsv_set_log_level(int level)
{
    if (level < NSV_LOG_NONE || level > NSV_LOG_VERBOSE)
        return nsv__set_detail(NULL, NSV_ERANGE, "nsv_set_log_level: level %d is outside NONE(0)..VERBOSE(4)",
                               level);
    atomic_store(&log_level, level);
    return NSV_OK;
}

int nsv_set_log_callback(nsv_log_fn fn, void *ud)
{
    atomic_store(&log_ud, ud);
    atomic_store(&log_fn, fn);
    return NSV_OK;
}

void nsv__log(int level, const char *fmt, ...)
{
    if (level > atomic_load(&log_level) || level <= NSV_LOG_NONE)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof buf)
        n = sizeof buf - 1;
    nsv_log_fn fn = atomic_load(&log_fn);
    if (fn) {
        fn(level, buf, (size_t)n, atomic_load(&log_ud));
        return;
    }
    static const char *names[] = {"", "error", "info", "debug", "verbose"};
    char line[600];
    int m = snprintf(line, sizeof line, "nanosrv %s: %.*s\n", names[level], n, buf);
    if (m > 0) {
        ssize_t w = write(2, line, (size_t)m < sizeof line ? (size_t)m : sizeof line - 1);
        (void)w;
    }
}
