/* access_log.c - nsv_access_take: the records the workers queued
 * (http/access.c), moved out whole, oldest first. */
#include "server.h"
#include "../http/access.h"

int64_t nsv_access_take(nsv_server *s, char *dst, size_t cap)
{
    if (!s)
        return NSV_EINVAL;
    if (cap && !dst)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_access_take: dst is NULL with cap %zu", cap);
    return nsv__access_take(s, dst, cap);
}
