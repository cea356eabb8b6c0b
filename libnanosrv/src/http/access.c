/* access.c - access records: captured per connection slot by the worker,
 * queued per worker (a mutex each: uncontended but for the taker), taken
 * oldest first by nsv_access_take. See access.h. */
#include "access.h"
#include "answer.h"
#include "../loop/edge.h"
#include <stddef.h>
#include <string.h>
#include <time.h>

/* What a record needs of the request on a slot, kept from its head to its
 * answer; the strings follow (method, target, user agent, referer). Grown,
 * never shrunk, and reused by the slot's later connections. */
typedef struct acc_slot {
    uint8_t active;
    int32_t status;
    int64_t start_us, time_ms;
    uint64_t bytes_in, bytes_out;
    uint32_t flags;
    uint32_t mlen, tlen, ulen, rlen;
    uint32_t cap;
    char s[];
} acc_slot;

struct nsv__access_q {
    pthread_mutex_t lock;   /* guards buf, rd, len, cap and count */
    char *buf;              /* entries: uint64 seq (µs queued), then the record */
    size_t rd, len, cap;
    uint32_t count;
    /* the worker's only */
    acc_slot **slots;
    uint32_t nslots;
};

#define REC_ALIGN(n) (((n) + 7) & ~(size_t)7)

static nsv__access_q *queue(nsv__loop *l)
{
    nsv__access_q *q = l->access;
    if (q)
        return q;
    q = nsv__calloc(&l->srv->alloc, sizeof *q);
    if (!q)
        return NULL;
    pthread_mutex_init(&q->lock, NULL);
    __atomic_store_n(&l->access, q, __ATOMIC_RELEASE); /* the taker may look from another thread */
    return q;
}

static acc_slot *slot_of(nsv__loop *l, const nsv__conn *c, size_t need)
{
    nsv__access_q *q = queue(l);
    if (!q)
        return NULL;
    const nsv__alloc *a = &l->srv->alloc;
    if (c->slot >= q->nslots) {
        uint32_t n = q->nslots ? q->nslots : 64;
        while (n <= c->slot)
            n *= 2;
        acc_slot **v = nsv__realloc(a, q->slots, n * sizeof *v);
        if (!v)
            return NULL;
        memset(v + q->nslots, 0, (n - q->nslots) * sizeof *v);
        q->slots = v;
        q->nslots = n;
    }
    acc_slot *e = q->slots[c->slot];
    if (!e || e->cap < need) {
        size_t cap = need < 256 ? 256 : need;
        acc_slot *g = nsv__realloc(a, e, sizeof *e + cap);
        if (!g)
            return NULL;
        if (!e)
            g->active = 0;
        g->cap = (uint32_t)cap;
        q->slots[c->slot] = e = g;
    }
    return e;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void start(nsv__loop *l, nsv__conn *c, acc_slot *e, int64_t now_us)
{
    e->active = 1;
    e->status = 0;
    e->start_us = now_us ? now_us : nsv__mono_us();
    e->time_ms = wall_ms();
    e->bytes_in = e->bytes_out = 0;
    e->mlen = e->tlen = e->ulen = e->rlen = 0;
    e->flags = (c->http10 ? NSV_EVF_HTTP10 : 0) | (c->head ? NSV_EVF_HEAD : 0) | (c->h2s ? NSV_EVF_HTTP2 : 0) |
               (nsv__conn_info_flags(c) & (NSV_EVF_TLS | NSV_EVF_PROXY));
    (void)l;
}

static const nsv__hdr *header(const nsv__request *r, const char *name, size_t n)
{
    for (size_t i = 0; i < r->num_headers; i++)
        if (r->headers[i].name_len == n && nsv__strncaseeq(r->headers[i].name, name, n))
            return &r->headers[i];
    return NULL;
}

static uint32_t cap_len(size_t n, size_t max) { return (uint32_t)(n < max ? n : max); }

void nsv__access_head(nsv__loop *l, nsv__conn *c, const nsv__request *r, int64_t now_us)
{
    const nsv__hdr *ua = header(r, "user-agent", 10), *ref = header(r, "referer", 7);
    uint32_t ml = cap_len(r->method_len, NSV__ACCESS_METHOD_MAX);
    size_t tfull = r->path_len + (r->query ? 1 + r->query_len : 0);
    uint32_t tl = cap_len(tfull, NSV__ACCESS_TARGET_MAX);
    uint32_t ul = ua ? cap_len(ua->value_len, NSV__ACCESS_UA_MAX) : 0;
    uint32_t rl = ref ? cap_len(ref->value_len, NSV__ACCESS_REFERER_MAX) : 0;
    acc_slot *e = slot_of(l, c, (size_t)ml + tl + ul + rl);
    if (!e)
        return; /* no memory: this request goes without a record */
    start(l, c, e, now_us);
    e->bytes_in = c->head_len;
    char *p = e->s;
    memcpy(p, r->method, ml);
    p += ml;
    /* path and query as sent: one run of the request line unless the
     * parser gave an absolute-form target's path apart */
    size_t pl = r->path_len < tl ? r->path_len : tl;
    memcpy(p, r->path, pl);
    if (tl > pl) {
        p[pl] = '?';
        memcpy(p + pl + 1, r->query, tl - pl - 1);
    }
    p += tl;
    if (ul)
        memcpy(p, ua->value, ul);
    p += ul;
    if (rl)
        memcpy(p, ref->value, rl);
    e->mlen = ml, e->tlen = tl, e->ulen = ul, e->rlen = rl;
}

static acc_slot *active(nsv__loop *l, const nsv__conn *c)
{
    nsv__access_q *q = l->access;
    acc_slot *e = q && c->slot < q->nslots ? q->slots[c->slot] : NULL;
    return e && e->active ? e : NULL;
}

void nsv__access_status(nsv__loop *l, nsv__conn *c, int status, int64_t now_us)
{
    acc_slot *e = active(l, c);
    if (!e) { /* refused before its head was complete: a record without strings */
        e = slot_of(l, c, 0);
        if (!e)
            return;
        start(l, c, e, now_us);
    }
    e->status = status;
}

void nsv__access_bytes(nsv__loop *l, nsv__conn *c, uint64_t in, uint64_t out)
{
    acc_slot *e = active(l, c);
    if (e) {
        e->bytes_in += in;
        e->bytes_out += out;
    }
}

/* Room for need more bytes at the end of the queue: compacted, else grown. */
static int room(nsv_server *s, nsv__access_q *q, size_t need)
{
    if (q->len + need <= q->cap)
        return 1;
    if (q->rd) {
        memmove(q->buf, q->buf + q->rd, q->len - q->rd);
        q->len -= q->rd;
        q->rd = 0;
        if (q->len + need <= q->cap)
            return 1;
    }
    size_t cap = q->cap ? q->cap * 2 : 16384;
    while (cap < q->len + need)
        cap *= 2;
    char *b = nsv__realloc(&s->alloc, q->buf, cap);
    if (!b)
        return 0;
    q->buf = b;
    q->cap = cap;
    return 1;
}

static void emit(nsv__loop *l, nsv__conn *c, acc_slot *e, int64_t now_us)
{
    e->active = 0;
    nsv__access_q *q = l->access;
    if (!now_us)
        now_us = nsv__mono_us();
    size_t strs = (size_t)e->mlen + e->tlen + c->peer_len + e->ulen + e->rlen;
    size_t size = REC_ALIGN(sizeof(nsv_access_record) + strs);
    pthread_mutex_lock(&q->lock);
    /* Bounded in bytes too: a record's size is the client's to choose (up
     * to ~5.8 KB), so the count alone would let a slow taker's queue grow to
     * gigabytes. 512 bytes a record is several times a typical one; at
     * least 384 KiB, room for 64 of the largest. */
    size_t bytes_cap = (size_t)l->srv->access_log * 512;
    if (bytes_cap < (384 << 10))
        bytes_cap = 384 << 10;
    if (q->count >= (uint64_t)l->srv->access_log || q->len - q->rd + 8 + size > bytes_cap ||
        !room(l->srv, q, 8 + size)) {
        pthread_mutex_unlock(&q->lock);
        NSV__COUNT(l, NSV_M_ACCESS_DROPPED);
        return;
    }
    char *p = q->buf + q->len;
    uint64_t seq = (uint64_t)now_us;
    memcpy(p, &seq, 8);
    nsv_access_record *rec = (nsv_access_record *)(void *)(p + 8);
    int64_t d = now_us - e->start_us;
    *rec = (nsv_access_record){
        .size = (uint32_t)size,
        .status = e->status,
        .conn = nsv__conn_id(l, c),
        .time_ms = e->time_ms,
        .bytes_out = e->bytes_out,
        .bytes_in = e->bytes_in,
        .duration_us = d < 0 ? 0 : d > UINT32_MAX ? UINT32_MAX : (uint32_t)d,
        .listener = c->listener,
        .peer_port = c->peer_port,
        .flags = e->flags,
        .method_len = e->mlen,
        .target_len = e->tlen,
        .peer_len = c->peer_len,
        .ua_len = e->ulen,
        .referer_len = e->rlen,
    };
    char *s = (char *)(rec + 1);
    size_t mt = (size_t)e->mlen + e->tlen;
    memcpy(s, e->s, mt);
    memcpy(s + mt, c->peer, c->peer_len);
    memcpy(s + mt + c->peer_len, e->s + mt, (size_t)e->ulen + e->rlen);
    memset(s + strs, 0, size - sizeof *rec - strs);
    q->len += 8 + size;
    q->count++;
    pthread_mutex_unlock(&q->lock);
}

void nsv__access_done(nsv__loop *l, nsv__conn *c, int64_t now_us)
{
    acc_slot *e = active(l, c);
    if (e)
        emit(l, c, e, now_us);
}

void nsv__access_closed(nsv__loop *l, nsv__conn *c)
{
    acc_slot *e = active(l, c);
    if (e)
        emit(l, c, e, 0);
}

void nsv__access_loop_free(nsv__loop *l)
{
    nsv__access_q *q = l ? l->access : NULL;
    if (!q)
        return;
    const nsv__alloc *a = &l->srv->alloc;
    for (uint32_t i = 0; i < q->nslots; i++)
        nsv__free(a, q->slots[i]);
    nsv__free(a, q->slots);
    nsv__free(a, q->buf);
    pthread_mutex_destroy(&q->lock);
    nsv__free(a, q);
    l->access = NULL;
}

int64_t nsv__access_take(nsv_server *s, char *dst, size_t cap)
{
    nsv__access_q *qs[NSV__MAX_LOOPS];
    int n = 0;
    for (int i = 0; i < s->nloops; i++) {
        nsv__access_q *q = __atomic_load_n(&s->loops[i]->access, __ATOMIC_ACQUIRE);
        if (q) {
            pthread_mutex_lock(&q->lock); /* always in worker order: takers never deadlock */
            qs[n++] = q;
        }
    }
    size_t off = 0;
    uint32_t too_big = 0; /* said after the unlock: a detail may reach the host's log sink */
    for (;;) {
        nsv__access_q *best = NULL;
        uint64_t bseq = 0;
        for (int i = 0; i < n; i++) {
            nsv__access_q *q = qs[i];
            if (q->rd == q->len)
                continue;
            uint64_t seq;
            memcpy(&seq, q->buf + q->rd, 8);
            if (!best || seq < bseq)
                best = q, bseq = seq;
        }
        if (!best)
            break;
        const nsv_access_record *rec = (const void *)(best->buf + best->rd + 8);
        if (rec->size > cap - off) {
            if (off == 0)
                too_big = rec->size;
            break;
        }
        memcpy(dst + off, rec, rec->size);
        off += rec->size;
        best->rd += 8 + rec->size;
        best->count--;
        if (best->rd == best->len)
            best->rd = best->len = 0;
    }
    for (int i = n; i-- > 0;)
        pthread_mutex_unlock(&qs[i]->lock);
    if (too_big)
        return nsv__set_detail(s, NSV_ENOBUFS, "nsv_access_take: the next record is %u bytes, cap is %zu",
                               too_big, cap);
    return (int64_t)off;
}
