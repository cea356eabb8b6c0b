/* router.h - trie router: method + path -> route id, with params. */
#ifndef NSV_ROUTER_H
#define NSV_ROUTER_H

#include "../internal.h"

typedef struct nsv__router nsv__router;

typedef struct nsv__param {
    const char *name;  /* points into router storage, valid while router lives */
    uint32_t name_len;
    uint32_t val_off;  /* offset of the value within the matched path */
    uint32_t val_len;
} nsv__param;

nsv__router *nsv__router_new(const nsv__alloc *a);
void nsv__router_free(nsv__router *r);

/* Add a route. method: "GET", ..., or "ALL". pattern must start with '/'.
 * Segments: literal, ":name", or a final "*". Returns 0, NSV_EINVAL (bad
 * pattern/method, id < 0), NSV_EEXIST (same method+pattern), NSV_ENOMEM. */
int nsv__router_add(nsv__router *r, const char *method, size_t mlen,
                    const char *pattern, size_t plen, int32_t id, uint32_t flags);

/* Match. path is the raw path (no query). Literal segments beat params, params
 * beat "*", with backtracking. A GET route answers HEAD. "ALL" matches any
 * method, but a method-specific route at the same node wins.
 * Fills params (up to max_params; *nparams set) and *flags of the route.
 * Returns the route id, or -1 when nothing matches. Cost grows with the
 * number of path segments, not with the number of routes. */
int32_t nsv__router_match(const nsv__router *r, const char *method, size_t mlen,
                          const char *path, size_t plen, nsv__param *params,
                          uint32_t max_params, uint32_t *nparams, uint32_t *flags);

#endif
