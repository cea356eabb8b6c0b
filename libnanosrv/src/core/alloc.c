/* alloc.c - per-server allocator hooks (realloc semantics). */
#include "../internal.h"
#include <stdlib.h>
#include <string.h>

static void *libc_alloc(void *ud, void *p, size_t n)
{
    (void)ud;
    if (n == 0) {
        free(p);
        return NULL;
    }
    return realloc(p, n);
}

const nsv__alloc nsv__default_alloc = {libc_alloc, NULL};

void *nsv__malloc(const nsv__alloc *a, size_t n) { return a->fn(a->ud, NULL, n ? n : 1); }

void *nsv__calloc(const nsv__alloc *a, size_t n)
{
    void *p = nsv__malloc(a, n);
    if (p)
        memset(p, 0, n);
    return p;
}

void *nsv__realloc(const nsv__alloc *a, void *p, size_t n) { return a->fn(a->ud, p, n ? n : 1); }

void nsv__free(const nsv__alloc *a, void *p)
{
    if (p)
        a->fn(a->ud, p, 0);
}
