/* buf.c - connection buffers. One-block buffers come from a per-loop pool so
 * steady-state traffic allocates nothing; larger ones use the allocator. */
#include "loop.h"
#include <string.h>

static char *pool_get(nsv__loop *l)
{
    if (l->npool > 0)
        return l->pool[--l->npool];
    return nsv__malloc(&l->srv->alloc, NSV__BLOCK);
}

static void pool_put(nsv__loop *l, char *p)
{
    if (l->npool < NSV__POOL_MAX)
        l->pool[l->npool++] = p;
    else
        nsv__free(&l->srv->alloc, p);
}

#define BIG_KEEP (1024 * 1024) /* larger buffers go back to the allocator */

/* Capacity for a buffer of capacity cap (0: none yet) that must hold need
 * bytes: cap (at least one block) doubled until need fits, computed in 64
 * bits and saturated at NSV__BUF_MAX, so a stored capacity never wraps.
 * NSV_ETOOBIG when need is past NSV__BUF_MAX. */
int64_t nsv__buf_grow_cap(uint32_t cap, uint64_t need)
{
    if (need > NSV__BUF_MAX)
        return NSV_ETOOBIG;
    uint64_t c = cap >= NSV__BLOCK ? cap : NSV__BLOCK;
    while (c < need)
        c *= 2;
    return (int64_t)(c > NSV__BUF_MAX ? NSV__BUF_MAX : c);
}

void nsv__buf_release(nsv__loop *l, nsv__buf *b)
{
    if (b->p) {
        if (b->cap == NSV__BLOCK)
            pool_put(l, b->p);
        else if (b->cap > NSV__BLOCK && b->cap <= BIG_KEEP && l->nbig_bufs < (int)NSV__ARRAY_LEN(l->big_bufs))
            l->big_bufs[l->nbig_bufs++] = (nsv__buf){b->p, 0, b->cap, 0};
        else
            nsv__free(&l->srv->alloc, b->p);
    }
    b->p = NULL;
    b->len = b->cap = b->off = 0;
}

/* Make room for `extra` more bytes after len; drops the consumed prefix. */
int nsv__buf_reserve(nsv__loop *l, nsv__buf *b, size_t extra)
{
    if (b->off && b->off == b->len) {
        b->off = b->len = 0;
    }
    if ((size_t)b->cap - b->len >= extra)
        return 0;
    if (b->off) {
        memmove(b->p, b->p + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
        if ((size_t)b->cap - b->len >= extra)
            return 0;
    }
    if (extra > NSV__BUF_MAX)
        return NSV_ETOOBIG;
    uint64_t need = (uint64_t)b->len + extra;
    int64_t grown = nsv__buf_grow_cap(b->cap, need);
    if (grown < 0)
        return (int)grown;
    if (!b->p && need <= NSV__BLOCK) {
        b->p = pool_get(l);
        if (!b->p)
            return NSV_ENOMEM;
        b->cap = NSV__BLOCK;
        return 0;
    }
    size_t cap = (size_t)grown;
    /* A kept large buffer that is big enough: swap it in, no allocation. */
    for (int i = 0; i < l->nbig_bufs; i++) {
        if (l->big_bufs[i].cap < need || l->big_bufs[i].cap <= b->cap)
            continue;
        char *p = l->big_bufs[i].p;
        uint32_t bcap = l->big_bufs[i].cap;
        l->big_bufs[i] = l->big_bufs[--l->nbig_bufs];
        if (b->len)
            memcpy(p, b->p, b->len);
        nsv__buf old = *b;
        b->p = p;
        b->cap = bcap;
        old.len = old.off = 0;
        if (old.p)
            nsv__buf_release(l, &old);
        return 0;
    }
    char *p;
    if (b->cap == NSV__BLOCK) {
        p = nsv__malloc(&l->srv->alloc, cap);
        if (!p)
            return NSV_ENOMEM;
        memcpy(p, b->p, b->len);
        pool_put(l, b->p);
    } else {
        p = nsv__realloc(&l->srv->alloc, b->p, cap);
        if (!p)
            return NSV_ENOMEM;
    }
    b->p = p;
    b->cap = (uint32_t)cap;
    return 0;
}

int nsv__buf_append(nsv__loop *l, nsv__buf *b, const void *p, size_t n)
{
    if (!n) /* (an empty buffer has no memory: nothing to point into) */
        return 0;
    int r = nsv__buf_reserve(l, b, n);
    if (r)
        return r;
    memcpy(b->p + b->len, p, n);
    b->len += (uint32_t)n;
    return 0;
}
