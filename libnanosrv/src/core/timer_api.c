/* timer_api.c - placeholder entry points for host timers and connection
 * wakeups; the implementation replaces this file. */
#include "server.h"

NSV_API int64_t nsv_timer_add(nsv_server *srv, int64_t delay_ms, int64_t repeat_ms, uint64_t tag)
{
    (void)srv, (void)delay_ms, (void)repeat_ms, (void)tag;
    return NSV_ENOTSUP;
}

NSV_API int nsv_timer_cancel(nsv_server *srv, int64_t timer)
{
    (void)srv, (void)timer;
    return NSV_ENOTSUP;
}

NSV_API int nsv_wakeup_conn(nsv_server *srv, uint64_t conn, const char *data, size_t len)
{
    (void)srv, (void)conn, (void)data, (void)len;
    return NSV_ENOTSUP;
}
