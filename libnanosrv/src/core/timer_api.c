/* timer_api.c - host timers (nsv_timer_add, nsv_timer_cancel) and
 * connection wakeups with a payload (nsv_wakeup_conn).
 *
 * Timers belong to loop 0 (loop/timer.c): the single loop, or worker 0 of a
 * sharded server, whose event queue nsv_poll drains with the others. A
 * wakeup travels through the command queue of the loop that owns the
 * connection, so its event lands in that loop's queue behind the events
 * already there: in order with the connection's own events. */
#include "server.h"

#define TIMER_MAX_MS (1LL << 40) /* about 34 years: due times cannot overflow */
#define WAKEUP_MAX 65536

NSV_API int64_t nsv_timer_add(nsv_server *srv, int64_t delay_ms, int64_t repeat_ms, uint64_t tag)
{
    if (!srv)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_timer_add: srv is NULL");
    if (delay_ms < 0 || repeat_ms < 0)
        return nsv__set_detail(srv, NSV_EINVAL, "nsv_timer_add: delay_ms %lld, repeat_ms %lld; neither may be "
                               "negative", (long long)delay_ms, (long long)repeat_ms);
    if (delay_ms > TIMER_MAX_MS || repeat_ms > TIMER_MAX_MS)
        return nsv__set_detail(srv, NSV_ERANGE, "nsv_timer_add: delay_ms %lld, repeat_ms %lld; at most %lld",
                               (long long)delay_ms, (long long)repeat_ms, TIMER_MAX_MS);
    int64_t id = nsv__timer_add(srv->loops[0], delay_ms, repeat_ms, tag);
    if (id < 0)
        return nsv__set_detail(srv, (int)id, "nsv_timer_add: no memory for another timer");
    return id;
}

NSV_API int nsv_timer_cancel(nsv_server *srv, int64_t timer)
{
    if (!srv)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_timer_cancel: srv is NULL");
    if (timer <= 0)
        return nsv__set_detail(srv, NSV_EINVAL, "nsv_timer_cancel: timer id %lld; ids are > 0",
                               (long long)timer);
    int r = nsv__timer_cancel(srv->loops[0], timer);
    if (r)
        return nsv__set_detail(srv, r, "nsv_timer_cancel: no timer %lld (never added, cancelled, or a one-shot "
                               "timer whose event was delivered)", (long long)timer);
    return NSV_OK;
}

/* The connection's slot still holds its generation (any thread: tickets are
 * atomic, and a closed slot's ticket is 0). */
static int conn_open(nsv_server *s, uint64_t id)
{
    uint32_t li = NSV__ID_LOOP(id), slot = NSV__ID_SLOT(id), gen = NSV__ID_GEN(id);
    if (li >= (uint32_t)s->nloops || gen == 0 || gen > NSV__GEN_MAX || slot / NSV__CHUNK >= NSV__MAX_CHUNKS)
        return 0;
    _Atomic uint32_t *tk = atomic_load_explicit(&s->loops[li]->tickets[slot / NSV__CHUNK], memory_order_acquire);
    if (!tk)
        return 0;
    return atomic_load_explicit(&tk[slot % NSV__CHUNK], memory_order_acquire) >> NSV__T_SHIFT == gen;
}

/* On the owning loop. A connection that closed after the call checked it
 * gets no WAKEUP: its CLOSE event already went (or goes) to the host. */
static void wakeup_cmd(nsv__loop *l, const nsv__cmd *k)
{
    nsv__conn *c = nsv__conn_get(l, k->id);
    if (!c)
        return;
    c->seen = 1; /* the host knows the connection: it gets the CLOSE */
    if (nsv__evq_emit(l, c, NSV_EV_WAKEUP, 0, 0, k->b, k->blen) != 0)
        nsv__log(NSV_LOG_ERROR, "nsv_wakeup_conn: no memory for the event of connection %llu",
                 (unsigned long long)k->id);
}

NSV_API int nsv_wakeup_conn(nsv_server *srv, uint64_t conn, const char *data, size_t len)
{
    if (!srv)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_wakeup_conn: srv is NULL");
    if (!data && len)
        return nsv__set_detail(srv, NSV_EINVAL, "nsv_wakeup_conn: data is NULL with len %zu", len);
    if (len > WAKEUP_MAX)
        return nsv__set_detail(srv, NSV_ETOOBIG, "nsv_wakeup_conn: a payload of %zu bytes; at most %d", len,
                               WAKEUP_MAX);
    if (!conn_open(srv, conn))
        return nsv__set_detail(srv, NSV_ESTALE, "nsv_wakeup_conn: connection %llu is not open",
                               (unsigned long long)conn);
    nsv__cmd k = {.fn = wakeup_cmd, .id = conn, .blen = len};
    int r = nsv__cmd_push(srv->loops[NSV__ID_LOOP(conn)], &k, NULL, data);
    if (r)
        return nsv__set_detail(srv, r, "nsv_wakeup_conn: no memory to queue the wakeup");
    return NSV_OK;
}
