/* shard.c - sharded servers (N worker loops). */
#include "server.h"

int nsv__shard_start(nsv_server *s, int workers) { (void)s; (void)workers; return NSV_ENOTSUP; }
void nsv__shard_stop(nsv_server *s) { (void)s; }
nsv__loop *nsv__shard_current(nsv_server *s) { (void)s; return NULL; }
int nsv__shard_forward(nsv_server *s, uint32_t op, uint64_t id, int status, const char *h, size_t hlen,
                       const char *b, size_t blen, uint64_t arg)
{
    return NSV_ENOTSUP;
}
int nsv__shard_poll(nsv_server *s, nsv_event *e, int m, char *a, size_t c, int t) { return NSV_ENOTSUP; }
int64_t nsv__shard_need(nsv_server *s) { return 0; }
int nsv__shard_fd(nsv_server *s) { return NSV_ENOTSUP; }
int nsv__shard_run(nsv_server *s) { return NSV_ENOTSUP; }
int nsv__shard_drain_wait(nsv_server *s) { return NSV_ENOTSUP; }
