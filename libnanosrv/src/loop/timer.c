/* timer.c - host timers of a loop: a binary min-heap of records ordered by
 * due time (then id), an id -> record hash for cancels, and TIMER events
 * pushed into the loop's event queue when they are due.
 *
 * Any thread may add or cancel (the record table is guarded by tlock); the
 * loop fires them. Records live in one growable array with a free list, so
 * firing allocates nothing and a cancel returns the record at once.
 *
 * When a timer is finished: a one-shot timer's record stays until its event
 * is handed to the host (nsv__timer_deliver, from the event queue's copy-out;
 * or just before the callback in callback mode), so a cancel that returns
 * NSV_OK before that drops the queued event. A repeating timer has at most
 * one event waiting at a time (pending): a host that polls slowly gets one
 * event, not a burst, and a queue that cannot grow without bound. Missed
 * periods are skipped on the original phase, so repeats do not drift.
 *
 * Lock order: the event queue lock (sharded pull mode) may be held when
 * tlock is taken (copy-out); tlock is never held while pushing an event. */
#include "loop.h"
#include <string.h>

#define NONE UINT32_MAX
#define BATCH 64 /* timers taken out of the heap per lock hold */

struct nsv__timer {
    int64_t id;      /* 0: a free record */
    int64_t due;     /* ms (nsv_millis) */
    int64_t repeat;  /* ms; 0: one-shot */
    uint64_t tag;
    uint32_t heap;   /* position in the heap; NONE when out of it (fired one-shot, free) */
    uint32_t next_free;
    uint8_t pending; /* an event of it waits in the queue (pull mode) */
};

static int less(const nsv__timers *t, uint32_t a, uint32_t b)
{
    const struct nsv__timer *x = &t->rec[a], *y = &t->rec[b];
    return x->due < y->due || (x->due == y->due && x->id < y->id);
}

static void heap_set(nsv__timers *t, uint32_t pos, uint32_t r)
{
    t->heap[pos] = r;
    t->rec[r].heap = pos;
}

static void sift_up(nsv__timers *t, uint32_t pos)
{
    uint32_t r = t->heap[pos];
    while (pos > 0) {
        uint32_t parent = (pos - 1) / 2;
        if (!less(t, r, t->heap[parent]))
            break;
        heap_set(t, pos, t->heap[parent]);
        pos = parent;
    }
    heap_set(t, pos, r);
}

static void sift_down(nsv__timers *t, uint32_t pos)
{
    uint32_t r = t->heap[pos];
    for (;;) {
        uint32_t kid = 2 * pos + 1;
        if (kid >= t->nheap)
            break;
        if (kid + 1 < t->nheap && less(t, t->heap[kid + 1], t->heap[kid]))
            kid++;
        if (!less(t, t->heap[kid], r))
            break;
        heap_set(t, pos, t->heap[kid]);
        pos = kid;
    }
    heap_set(t, pos, r);
}

static void heap_remove(nsv__timers *t, uint32_t r)
{
    uint32_t pos = t->rec[r].heap;
    if (pos == NONE)
        return;
    t->rec[r].heap = NONE;
    uint32_t last = t->heap[--t->nheap];
    if (pos == t->nheap)
        return;
    heap_set(t, pos, last);
    sift_up(t, pos);
    sift_down(t, t->rec[last].heap);
}

/* The loop reads the earliest due time without the lock (poll timeout). */
static void publish_next(nsv__timers *t)
{
    int64_t next = t->nheap ? t->rec[t->heap[0]].due : INT64_MAX;
    atomic_store_explicit(&t->next_due, next, memory_order_release);
}

/* id -> record: open addressing, linear probing, backward-shift deletion. */
static uint32_t hash_slot(const nsv__timers *t, int64_t id)
{
    uint64_t h = (uint64_t)id * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32) & (t->hcap - 1);
}

static uint32_t find(const nsv__timers *t, int64_t id)
{
    if (!t->hcap)
        return NONE;
    for (uint32_t i = hash_slot(t, id);; i = (i + 1) & (t->hcap - 1)) {
        uint32_t r = t->hash[i];
        if (r == NONE)
            return NONE;
        if (t->rec[r].id == id)
            return r;
    }
}

static void hash_put(nsv__timers *t, uint32_t r)
{
    uint32_t i = hash_slot(t, t->rec[r].id);
    while (t->hash[i] != NONE)
        i = (i + 1) & (t->hcap - 1);
    t->hash[i] = r;
}

static void hash_del(nsv__timers *t, int64_t id)
{
    uint32_t m = t->hcap - 1, i = hash_slot(t, id);
    while (t->rec[t->hash[i]].id != id)
        i = (i + 1) & m;
    /* Move later members of the run back into the hole when their home
     * slot does not lie between the hole and them. */
    for (uint32_t j = (i + 1) & m; t->hash[j] != NONE; j = (j + 1) & m) {
        uint32_t home = hash_slot(t, t->rec[t->hash[j]].id);
        if (((j - home) & m) >= ((j - i) & m)) {
            t->hash[i] = t->hash[j];
            i = j;
        }
    }
    t->hash[i] = NONE;
}

static void release(nsv__timers *t, uint32_t r)
{
    heap_remove(t, r);
    hash_del(t, t->rec[r].id);
    t->rec[r].id = 0;
    t->rec[r].next_free = t->free;
    t->free = r;
    t->nlive--;
}

/* Room for one more record: the record array and heap double, the hash
 * stays at most half full. */
static int grow(nsv_server *s, nsv__timers *t)
{
    if (t->free != NONE && (t->nlive + 1) * 2 <= t->hcap)
        return 0;
    if (t->free == NONE) {
        uint32_t cap = t->cap ? t->cap * 2 : 16;
        if (cap > (1u << 28))
            return NSV_ENOMEM;
        struct nsv__timer *rec = nsv__realloc(&s->alloc, t->rec, cap * sizeof *rec);
        if (!rec)
            return NSV_ENOMEM;
        t->rec = rec;
        uint32_t *heap = nsv__realloc(&s->alloc, t->heap, cap * sizeof *heap);
        if (!heap)
            return NSV_ENOMEM;
        t->heap = heap;
        for (uint32_t i = cap; i-- > t->cap;) {
            memset(&rec[i], 0, sizeof rec[i]);
            rec[i].heap = NONE;
            rec[i].next_free = t->free;
            t->free = i;
        }
        t->cap = cap;
    }
    if ((t->nlive + 1) * 2 > t->hcap) {
        uint32_t hcap = t->hcap ? t->hcap * 2 : 32;
        uint32_t *h = nsv__malloc(&s->alloc, hcap * sizeof *h);
        if (!h)
            return NSV_ENOMEM;
        uint32_t *old = t->hash, ocap = t->hcap;
        memset(h, 0xFF, hcap * sizeof *h);
        t->hash = h;
        t->hcap = hcap;
        for (uint32_t i = 0; i < ocap; i++)
            if (old[i] != NONE)
                hash_put(t, old[i]);
        nsv__free(&s->alloc, old);
    }
    return 0;
}

void nsv__timers_init(nsv__timers *t)
{
    memset(t, 0, sizeof *t);
    t->free = NONE;
    pthread_mutex_init(&t->lock, NULL);
    atomic_init(&t->next_due, INT64_MAX);
    t->ready = 1;
}

void nsv__timers_free(nsv_server *s, nsv__timers *t)
{
    if (!t->ready)
        return;
    nsv__free(&s->alloc, t->rec);
    nsv__free(&s->alloc, t->heap);
    nsv__free(&s->alloc, t->hash);
    pthread_mutex_destroy(&t->lock);
    t->ready = 0;
}

int64_t nsv__timer_add(nsv__loop *l, int64_t delay_ms, int64_t repeat_ms, uint64_t tag)
{
    nsv__timers *t = &l->timers;
    pthread_mutex_lock(&t->lock);
    int r = grow(l->srv, t);
    if (r) {
        pthread_mutex_unlock(&t->lock);
        return r;
    }
    uint32_t i = t->free;
    struct nsv__timer *x = &t->rec[i];
    t->free = x->next_free;
    x->id = ++t->last_id;
    x->due = nsv_millis() + delay_ms;
    x->repeat = repeat_ms;
    x->tag = tag;
    x->pending = 0;
    t->nlive++;
    hash_put(t, i);
    heap_set(t, t->nheap++, i);
    sift_up(t, t->nheap - 1);
    int first = t->heap[0] == i;
    int64_t id = x->id;
    if (first)
        publish_next(t);
    pthread_mutex_unlock(&t->lock);
    if (first)
        nsv__loop_wake(l); /* its poll may be sleeping past the new due time */
    return id;
}

int nsv__timer_cancel(nsv__loop *l, int64_t id)
{
    nsv__timers *t = &l->timers;
    pthread_mutex_lock(&t->lock);
    uint32_t r = find(t, id);
    if (r != NONE) {
        release(t, r);
        publish_next(t);
    }
    pthread_mutex_unlock(&t->lock);
    return r == NONE ? NSV_ENOTFOUND : NSV_OK;
}

/* The next due time for the poll timeout: ms from now (0 if due), -1 none. */
int64_t nsv__timers_wait(nsv__loop *l)
{
    int64_t due = atomic_load_explicit(&l->timers.next_due, memory_order_acquire);
    if (due == INT64_MAX)
        return -1;
    return due > l->now ? due - l->now : 0;
}

/* Whether a queued TIMER event still goes to the host, and the end of its
 * wait: a cancelled timer's event is dropped; a one-shot timer is finished. */
int nsv__timer_deliver(nsv__loop *l, int64_t id)
{
    nsv__timers *t = &l->timers;
    pthread_mutex_lock(&t->lock);
    uint32_t r = find(t, id);
    if (r != NONE) {
        t->rec[r].pending = 0;
        if (!t->rec[r].repeat)
            release(t, r);
    }
    pthread_mutex_unlock(&t->lock);
    return r != NONE;
}

static void emit(nsv__loop *l, int64_t id, uint64_t tag)
{
    nsv_event *ev;
    if (!nsv__evq_push(l, &ev, 0)) {
        /* No memory for the event: a repeating timer fires again at its next
         * period; a one-shot timer goes back into the heap to retry. */
        nsv__timers *t = &l->timers;
        pthread_mutex_lock(&t->lock);
        uint32_t r = find(t, id);
        if (r != NONE) {
            t->rec[r].pending = 0;
            if (t->rec[r].heap == NONE) {
                t->rec[r].due = l->now + NSV__SWEEP_MS;
                heap_set(t, t->nheap++, r);
                sift_up(t, t->nheap - 1);
                publish_next(t);
            }
        }
        pthread_mutex_unlock(&t->lock);
        return;
    }
    ev->type = NSV_EV_TIMER;
    ev->conn = (uint64_t)id;
    ev->tag = tag;
    nsv__evq_commit(l);
}

/* Fire what is due at l->now: out of the heap under the lock, events after
 * it. In callback mode each timer is checked again just before its callback
 * (an earlier callback of the batch may have cancelled it). */
void nsv__timers_fire(nsv__loop *l)
{
    nsv__timers *t = &l->timers;
    int cb = l->srv->cb != NULL;
    for (int rounds = 0; rounds < 1024 && nsv__timers_wait(l) == 0; rounds++) {
        int64_t ids[BATCH];
        uint64_t tags[BATCH];
        int n = 0;
        pthread_mutex_lock(&t->lock);
        while (n < BATCH && t->nheap && t->rec[t->heap[0]].due <= l->now) {
            uint32_t r = t->heap[0];
            struct nsv__timer *x = &t->rec[r];
            if (x->repeat) {
                /* the next period after now, on the original phase */
                x->due += ((l->now - x->due) / x->repeat + 1) * x->repeat;
                sift_down(t, 0);
            } else {
                heap_remove(t, r);
            }
            if (x->pending)
                continue; /* its last event waits still: no second one */
            x->pending = !cb;
            ids[n] = x->id;
            tags[n++] = x->tag;
        }
        publish_next(t);
        pthread_mutex_unlock(&t->lock);
        for (int i = 0; i < n; i++) {
            if (cb && !nsv__timer_deliver(l, ids[i]))
                continue;
            emit(l, ids[i], tags[i]);
        }
        if (n < BATCH)
            break;
    }
}
