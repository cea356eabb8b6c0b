/* throttle.c - sharded pull mode: a worker stops reading stream connections
 * (raw TCP, WebSocket, a streamed request body) while its event queue holds
 * more than the host has taken. The host takes events at its own pace;
 * without this a slow host lets a fast peer grow the queue without bound,
 * and the sends the host makes later for that data overflow the output cap
 * on a connection the worker never paused. Other HTTP requests need none of
 * this: one request at a time is in flight, its body bounded by max_body. */
#include "loop.h"
#include <unistd.h>

static size_t limit(const nsv__loop *l)
{
    size_t lim = (size_t)l->srv->max_output / 8;
    return lim < (256u << 10) ? (256u << 10) : lim;
}

/* Host side, after events were taken (evq.c): wake a throttled worker once
 * its queue fell to half the limit. */
void nsv__throttle_release(nsv__loop *l)
{
    if (!atomic_load(&l->throttled) || atomic_load(&l->backlog) > limit(l) / 2)
        return;
    if (atomic_exchange(&l->throttled, 0) == 1)
        nsv__loop_wake(l);
}

static void resume(nsv__loop *l)
{
    for (uint32_t i = 0; i < l->nthrottled; i++) {
        nsv__conn *c = nsv__conn_get(l, l->throttled_ids[i]);
        if (!c || !c->throttled)
            continue;
        c->throttled = 0;
        nsv__read_resume(l, c); /* level-triggered: pending input fires */
    }
    l->nthrottled = 0;
}

/* Worker side, before reading a stream connection: 1 = do not read now
 * (reading is off until the host catches up), 0 = read. */
int nsv__throttle(nsv__loop *l, nsv__conn *c)
{
    if (!l->srv->sharded || l->srv->cb || atomic_load(&l->backlog) <= limit(l))
        return 0;
    if (!c->throttled) {
        if (l->nthrottled == l->throttled_cap) {
            uint32_t cap = l->throttled_cap ? l->throttled_cap * 2 : 64;
            uint64_t *p = nsv__realloc(&l->srv->alloc, l->throttled_ids, cap * sizeof *p);
            if (!p)
                return 0; /* cannot remember it: read rather than stall it */
            l->throttled_ids = p;
            l->throttled_cap = cap;
        }
        l->throttled_ids[l->nthrottled++] = nsv__conn_id(l, c);
        c->throttled = 1;
    }
    c->deadline = l->now + l->srv->idle_timeout_ms; /* waiting on the host is not idleness */
    nsv__conn_set_events(l, c, 0, c->writing);
    atomic_store(&l->throttled, 1);
    /* The host may have drained the queue before it could see the flag:
     * nobody will release it, so resume here, and c reads now. */
    if (atomic_load(&l->backlog) <= limit(l) / 2 && atomic_exchange(&l->throttled, 0)) {
        resume(l);
        return 0;
    }
    return 1;
}

/* Worker side, each iteration: the host released the throttle. */
void nsv__throttle_check(nsv__loop *l)
{
    if (l->nthrottled && !atomic_load(&l->throttled))
        resume(l);
}
