/* evq.c - the per-loop queue of serialized events that nsv_poll copies out.
 * Entry: [uint32 size][uint32 data_len][nsv_event][data], padded to 8. */
#include "loop.h"
#include <string.h>

#define HDR 8

/* NSV_M_EVENTS_QUEUED follows q->count: stored, not added to, by whichever
 * thread changes the count (the worker queueing, the host taking), always
 * under qlock when two threads share the queue, so the value is never torn
 * and never behind the count for long. */
static void count_gauge(nsv__loop *l)
{
    atomic_store_explicit(&l->metrics[NSV_M_EVENTS_QUEUED], l->events.count, memory_order_relaxed);
}

static size_t entry_size(size_t data_len)
{
    return (HDR + sizeof(nsv_event) + data_len + 7) & ~(size_t)7;
}

/* Reserve an entry; fills *ev (zeroed) and returns the data area. The entry
 * becomes visible with nsv__evq_commit. NULL on allocation failure. */
/* Sharded pull mode shares the queue with the polling thread. */
static int locked(nsv__loop *l) { return l->srv->sharded && !l->srv->cb; }

char *nsv__evq_push(nsv__loop *l, nsv_event **ev, size_t data_len)
{
    nsv__evq *q = &l->events;
    size_t need = entry_size(data_len);
    if (locked(l))
        pthread_mutex_lock(&l->qlock);
    if (q->rd && q->rd == q->len)
        q->rd = q->len = 0;
    if (q->cap - q->len < need) {
        if (q->rd) { /* compact first: consumed entries are dead */
            memmove(q->p, q->p + q->rd, q->len - q->rd);
            q->len -= q->rd;
            q->rd = 0;
        }
        if (q->cap - q->len < need) {
            size_t cap = q->cap ? q->cap : 64 * 1024;
            while (cap - q->len < need)
                cap *= 2;
            char *p = nsv__realloc(&l->srv->alloc, q->p, cap);
            if (!p) {
                if (locked(l))
                    pthread_mutex_unlock(&l->qlock);
                return NULL;
            }
            q->p = p;
            q->cap = cap;
        }
    }
    char *e = q->p + q->len;
    uint32_t sz = (uint32_t)need, dl = (uint32_t)data_len;
    memcpy(e, &sz, 4);
    memcpy(e + 4, &dl, 4);
    *ev = (nsv_event *)(e + HDR);
    memset(*ev, 0, sizeof(nsv_event));
    (*ev)->route = -1;
    return e + HDR + sizeof(nsv_event);
}

/* Publish the entry reserved last. In callback mode it is handed to the
 * callback at once and dropped. */
void nsv__evq_commit(nsv__loop *l)
{
    nsv__evq *q = &l->events;
    char *e = q->p + q->len;
    uint32_t sz;
    memcpy(&sz, e, 4);
    nsv_server *s = l->srv;
    if (s->cb) {
        s->cb(s, (nsv_event *)(e + HDR), e + HDR + sizeof(nsv_event), s->cb_ud);
        return;
    }
    q->len += sz;
    q->count++;
    count_gauge(l);
    if (locked(l)) {
        atomic_store(&l->backlog, q->len - q->rd);
        l->pushed = 1;
        if (l->qwaiters)
            pthread_cond_signal(&l->qcond);
        pthread_mutex_unlock(&l->qlock);
    }
}

/* A connection event with an optional body; the peer address rides along. */
int nsv__evq_emit(nsv__loop *l, nsv__conn *c, uint32_t type, int32_t code, uint32_t flags,
                  const char *body, size_t blen)
{
    nsv_event *ev;
    size_t plen = c ? c->peer_len : 0;
    char *d = nsv__evq_push(l, &ev, blen + plen);
    if (!d)
        return NSV_ENOMEM;
    ev->type = type;
    ev->code = code;
    ev->flags = flags;
    if (blen)
        memcpy(d, body, blen);
    ev->body_len = (uint32_t)blen;
    if (c) {
        ev->conn = nsv__conn_id(l, c);
        ev->tag = c->tag;
        ev->route = c->route;
        ev->listener = c->listener;
        ev->peer_port = c->peer_port;
        memcpy(d + blen, c->peer, plen);
        ev->peer_off = (uint32_t)blen;
        ev->peer_len = (uint32_t)plen;
    }
    nsv__evq_commit(l);
    return 0;
}

int nsv__evq_emit_simple(nsv__loop *l, nsv__conn *c, uint32_t type, int32_t code,
                         const char *body, size_t blen)
{
    return nsv__evq_emit(l, c, type, code, 0, body, blen);
}

/* Copy queued events into the host's storage. Returns the count, or
 * NSV_ENOBUFS if the first event does not fit into the whole arena. */
int nsv__evq_copy_out(nsv__loop *l, nsv_event *evs, int max, char *arena, size_t cap,
                      size_t *aoff)
{
    nsv__evq *q = &l->events;
    int n = 0;
    while (n < max && q->rd < q->len) {
        char *e = q->p + q->rd;
        uint32_t sz, dl;
        memcpy(&sz, e, 4);
        memcpy(&dl, e + 4, 4);
        if (cap - *aoff < dl) {
            if (n == 0 && *aoff == 0) {
                count_gauge(l); /* (cancelled timers may have left) */
                return NSV_ENOBUFS;
            }
            break;
        }
        if (((const nsv_event *)(e + HDR))->type == NSV_EV_TIMER &&
            !nsv__timer_deliver(l, (int64_t)((const nsv_event *)(e + HDR))->conn)) {
            q->rd += sz; /* cancelled while it waited: dropped */
            q->count--;
            continue;
        }
        uint32_t base = (uint32_t)*aoff;
        memcpy(arena + base, e + HDR + sizeof(nsv_event), dl);
        nsv_event *ev = &evs[n];
        memcpy(ev, e + HDR, sizeof(nsv_event));
        ev->method_off += base;
        ev->path_off += base;
        ev->query_off += base;
        ev->headers_off += base;
        ev->params_off += base;
        ev->body_off += base;
        ev->peer_off += base;
        *aoff += (dl + 7) & ~(size_t)7;
        if (*aoff > cap)
            *aoff = cap;
        q->rd += sz;
        q->count--;
        n++;
    }
    if (q->rd == q->len)
        q->rd = q->len = 0;
    count_gauge(l);
    atomic_store(&l->backlog, q->len - q->rd);
    if (n > 0)
        nsv__throttle_release(l);
    return n;
}

int64_t nsv__evq_need(nsv__loop *l)
{
    nsv__evq *q = &l->events;
    if (q->rd >= q->len)
        return 0;
    uint32_t dl;
    memcpy(&dl, q->p + q->rd + 4, 4);
    return dl;
}
