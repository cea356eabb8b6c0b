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
/* Start an outbound connection or request: here(loop, args) runs on the
 * only loop, on the calling worker's, or (from another thread) on a worker
 * taken in turn while the caller waits. When the server is stopping or
 * draining it gets loop 0 from any thread, so it must check that first and
 * answer NSV_ESTOPPED before it touches the loop. Returns
 * here's id or error, its detail kept for the calling thread. */
int64_t nsv__on_some_loop(nsv_server *s, const char *call, int64_t (*here)(nsv__loop *l, const void *args),
                          const void *args);
int nsv__shard_call(nsv_server *s, void (*fn)(nsv__loop *l, void *arg), void *arg);
int nsv__shard_poll(nsv_server *s, nsv_event *evs, int max, char *arena, size_t cap, int timeout_ms);
int64_t nsv__shard_need(nsv_server *s);
int nsv__shard_fd(nsv_server *s);
int nsv__shard_run(nsv_server *s);
int nsv__shard_drain_wait(nsv_server *s);

#endif
