/* shard.h - sharded servers: worker threads, each running a loop; calls
 * from other threads forwarded to the owning worker (core layer). */
#ifndef NSV_SHARD_H
#define NSV_SHARD_H

#include "../loop/loop.h"

int nsv__shard_start(nsv_server *s, int workers);
int nsv__shard_started(nsv_server *s);
int nsv__setup_begin(nsv_server *s, const char *call, const char *what);
void nsv__setup_end(nsv_server *s);
void nsv__shard_stop(nsv_server *s);
nsv__loop *nsv__shard_current(nsv_server *s);
int nsv__shard_forward(nsv_server *s, const nsv__cmd *k);
int nsv__shard_broadcast(nsv_server *s, int32_t route, int opcode, const char *data, size_t len);
int64_t nsv__shard_connect(nsv_server *s, const char *url, size_t len);
int nsv__shard_poll(nsv_server *s, nsv_event *evs, int max, char *arena, size_t cap, int timeout_ms);
int64_t nsv__shard_need(nsv_server *s);
int nsv__shard_fd(nsv_server *s);
int nsv__shard_run(nsv_server *s);
int nsv__shard_drain_wait(nsv_server *s);

#endif
