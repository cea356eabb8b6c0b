/* log.c - process-wide log level and sink. */
#include "../internal.h"
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static _Atomic int log_level = NSV_LOG_ERROR;
static nsv_log_fn _Atomic log_fn;
static void *_Atomic log_ud;

/* The log queue (nsv_set_log_queue): a ring of fixed slots, each a level
 * byte, a 2-byte length and the text, taken by a host thread with
 * nsv_log_take. The lock is taken only while the queue is on and a line is
 * logged or taken; an empty queue is seen with one atomic load. */
#define LOGQ_TEXT 511
#define LOGQ_SLOT (3 + LOGQ_TEXT)
#define LOGQ_MAX 65536
static pthread_mutex_t logq_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int logq_on;
static _Atomic int64_t logq_count;   /* records waiting */
static _Atomic uint64_t logq_dropped; /* records lost to a full queue */
static char *logq_buf;               /* cap slots; guarded by logq_lock */
static int logq_cap, logq_head;

int nsv_set_log_queue(int max_records)
{
    if (max_records < 0 || max_records > LOGQ_MAX)
        return nsv__set_detail(NULL, NSV_ERANGE, "nsv_set_log_queue: max_records %d is outside 0..%d",
                               max_records, LOGQ_MAX);
    char *nb = max_records ? malloc((size_t)max_records * LOGQ_SLOT) : NULL;
    if (max_records && !nb)
        return nsv__set_detail(NULL, NSV_ENOMEM, "nsv_set_log_queue: no memory for %d records", max_records);
    pthread_mutex_lock(&logq_lock);
    char *old = logq_buf;
    logq_buf = nb;
    logq_cap = max_records;
    logq_head = 0;
    atomic_store(&logq_count, 0); /* records of the old queue go with it */
    atomic_store(&logq_on, max_records > 0);
    pthread_mutex_unlock(&logq_lock);
    free(old);
    return NSV_OK;
}

int64_t nsv_log_pending(void) { return atomic_load_explicit(&logq_count, memory_order_relaxed); }

uint64_t nsv_log_dropped(void) { return atomic_load(&logq_dropped); }

int64_t nsv_log_take(char *dst, size_t cap)
{
    if (cap && !dst)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_log_take: dst is NULL with cap %zu", cap);
    if (atomic_load_explicit(&logq_count, memory_order_relaxed) == 0)
        return 0;
    size_t at = 0;
    pthread_mutex_lock(&logq_lock);
    while (logq_count > 0) {
        const char *slot = logq_buf + (size_t)logq_head * LOGQ_SLOT;
        size_t n = 3 + ((size_t)(uint8_t)slot[1] | (size_t)(uint8_t)slot[2] << 8);
        if (at + n > cap)
            break;
        memcpy(dst + at, slot, n);
        at += n;
        logq_head = (logq_head + 1) % logq_cap;
        atomic_fetch_sub(&logq_count, 1);
    }
    int64_t left = logq_count;
    pthread_mutex_unlock(&logq_lock);
    if (at == 0 && left > 0)
        return nsv__set_detail(NULL, NSV_ENOBUFS, "nsv_log_take: cap %zu is less than the next record; give "
                               "at least %d bytes", cap, LOGQ_SLOT);
    return (int64_t)at;
}

/* 1 when the line went to the queue (or was dropped by it). */
static int logq_put(int level, const char *msg, size_t n)
{
    if (!atomic_load_explicit(&logq_on, memory_order_relaxed))
        return 0;
    pthread_mutex_lock(&logq_lock);
    if (!logq_buf) { /* turned off meanwhile */
        pthread_mutex_unlock(&logq_lock);
        return 0;
    }
    int64_t k = logq_count;
    if (k >= logq_cap) {
        pthread_mutex_unlock(&logq_lock);
        atomic_fetch_add(&logq_dropped, 1);
        return 1;
    }
    if (n > LOGQ_TEXT)
        n = LOGQ_TEXT;
    char *slot = logq_buf + (size_t)((logq_head + k) % logq_cap) * LOGQ_SLOT;
    slot[0] = (char)level;
    slot[1] = (char)(n & 0xff);
    slot[2] = (char)(n >> 8);
    memcpy(slot + 3, msg, n);
    atomic_fetch_add(&logq_count, 1);
    pthread_mutex_unlock(&logq_lock);
    return 1;
}

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
    if (logq_put(level, buf, (size_t)n))
        return;
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
