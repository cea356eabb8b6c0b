/* proxy_map.h - 64-bit id -> pointer table of build/http-proxy: both ids of
 * an exchange (the client's connection, the upstream request or WebSocket)
 * lead to it. Open addressing with linear probing, grown at half load;
 * ids are never 0. One table per thread: on a sharded server every event
 * of an exchange comes to the worker that owns the client's connection
 * (requests and connections started there run there). */
#ifndef EXAMPLES_PROXY_MAP_H
#define EXAMPLES_PROXY_MAP_H

#include <stdint.h>
#include <stdlib.h>

typedef struct pmap {
    uint64_t *k;
    void **v;
    size_t cap, used;
} pmap;

static size_t pm_slot(const pmap *m, uint64_t id)
{
    size_t i = (size_t)((id * 0x9E3779B97F4A7C15ULL) >> 32) & (m->cap - 1);
    while (m->k[i] && m->k[i] != id)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static void *pm_get(const pmap *m, uint64_t id)
{
    if (!m->cap || !id)
        return NULL;
    size_t i = pm_slot(m, id);
    return m->k[i] ? m->v[i] : NULL;
}

static int pm_put(pmap *m, uint64_t id, void *v);

static int pm_grow(pmap *m)
{
    pmap n = {0};
    n.cap = m->cap ? m->cap * 2 : 1024;
    n.k = calloc(n.cap, sizeof *n.k);
    n.v = calloc(n.cap, sizeof *n.v);
    if (!n.k || !n.v) {
        free(n.k);
        free(n.v);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->k[i])
            pm_put(&n, m->k[i], m->v[i]);
    free(m->k);
    free(m->v);
    *m = n;
    return 0;
}

static int pm_put(pmap *m, uint64_t id, void *v)
{
    if ((m->used + 1) * 2 > m->cap && pm_grow(m))
        return -1;
    size_t i = pm_slot(m, id);
    if (!m->k[i])
        m->used++;
    m->k[i] = id;
    m->v[i] = v;
    return 0;
}

static void pm_del(pmap *m, uint64_t id)
{
    if (!m->cap || !id)
        return;
    size_t i = pm_slot(m, id);
    if (!m->k[i])
        return;
    m->k[i] = 0;
    m->used--;
    /* re-insert the rest of the cluster so lookups still find them */
    for (size_t j = (i + 1) & (m->cap - 1); m->k[j]; j = (j + 1) & (m->cap - 1)) {
        uint64_t k = m->k[j];
        void *v = m->v[j];
        m->k[j] = 0;
        m->used--;
        pm_put(m, k, v);
    }
}

#endif
