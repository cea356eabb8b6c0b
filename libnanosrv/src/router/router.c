/* router.c - trie router: one node per path segment.
 *
 * Path model: everything after the leading '/' is split on '/', so "/" is one
 * empty segment, "/a/" is "a" then "", and "//x" is "" then "x". Empty
 * segments are ordinary literal segments of length 0; a ":param" never
 * matches an empty segment, a final "*" matches any remainder (empty too).
 * Trailing slashes are therefore significant: "/a" and "/a/" differ.
 *
 * Children of a node: literals in an array sorted by (length, bytes) and
 * found by binary search, at most one ":param" child and one "*" child.
 * Parameter names belong to the route, not to the node, so "/u/:id" and
 * "/u/:name/x" can share the param node.
 *
 * Matching tries literal, then param, then wildcard, and backtracks when a
 * branch ends without a route for the request method (so a POST-only
 * literal does not hide a GET param route). At a node the choice is: the
 * method's own route, else GET for HEAD, else ALL.
 *
 * Allocation failure while adding may leave new route-less nodes behind;
 * they never match anything, so the router stays consistent. */
#include "router.h"
#include "../internal.h"

#include <string.h>

/* Deepest pattern accepted, in segments. */
#define NSV__ROUTE_MAX_SEGMENTS 512

enum {
    M_GET, M_HEAD, M_POST, M_PUT, M_DELETE, M_PATCH, M_OPTIONS, M_ALL,
    M_NSLOTS,
    M_OTHER = -1
};

typedef struct pname {
    const char *p;
    uint32_t len;
} pname;

typedef struct route {
    int32_t id; /* -1: empty slot */
    uint32_t flags;
    uint32_t nnames;
    pname *names; /* one block: nnames pname records then the name bytes */
} route;

typedef struct xroute { /* route for a method without a slot */
    route r;
    char *method;
    uint32_t mlen;
} xroute;

typedef struct node {
    struct node **kids; /* literal children, sorted by (seg_len, seg bytes) */
    uint32_t nkids, capkids;
    struct node *param;
    struct node *wild;
    route slots[M_NSLOTS];
    xroute *xr;
    uint32_t nxr, capxr;
    uint32_t seg_len;
    char seg[];
} node;

struct nsv__router {
    nsv__alloc a;
    node *root;
};

static const struct {
    const char *name;
    uint32_t len;
} method_names[M_NSLOTS] = {
    {"GET", 3}, {"HEAD", 4}, {"POST", 4}, {"PUT", 3},
    {"DELETE", 6}, {"PATCH", 5}, {"OPTIONS", 7}, {"ALL", 3},
};

/* Slot index for a method name, M_OTHER when it has none. */
static int method_slot(const char *m, size_t len)
{
    for (int i = 0; i < M_NSLOTS; i++)
        if (method_names[i].len == len && memcmp(method_names[i].name, m, len) == 0)
            return i;
    return M_OTHER;
}

/* RFC 9110 token characters. */
static int is_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return 1;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static node *node_new(const nsv__alloc *a, const char *seg, size_t len)
{
    node *n = nsv__malloc(a, sizeof(node) + len);
    if (!n)
        return NULL;
    memset(n, 0, sizeof(node));
    for (int i = 0; i < M_NSLOTS; i++)
        n->slots[i].id = -1;
    n->seg_len = (uint32_t)len;
    if (len)
        memcpy(n->seg, seg, len);
    return n;
}

static void node_free(const nsv__alloc *a, node *n)
{
    if (!n)
        return;
    for (uint32_t i = 0; i < n->nkids; i++)
        node_free(a, n->kids[i]);
    nsv__free(a, n->kids);
    node_free(a, n->param);
    node_free(a, n->wild);
    for (int i = 0; i < M_NSLOTS; i++)
        nsv__free(a, n->slots[i].names);
    for (uint32_t i = 0; i < n->nxr; i++) {
        nsv__free(a, n->xr[i].r.names);
        nsv__free(a, n->xr[i].method);
    }
    nsv__free(a, n->xr);
    nsv__free(a, n);
}

nsv__router *nsv__router_new(const nsv__alloc *a)
{
    if (!a)
        a = &nsv__default_alloc;
    nsv__router *r = nsv__malloc(a, sizeof *r);
    if (!r)
        return NULL;
    r->a = *a;
    r->root = node_new(a, NULL, 0);
    if (!r->root) {
        nsv__free(a, r);
        return NULL;
    }
    return r;
}

void nsv__router_free(nsv__router *r)
{
    if (!r)
        return;
    nsv__alloc a = r->a;
    node_free(&a, r->root);
    nsv__free(&a, r);
}

static int seg_cmp(const char *s, size_t len, const node *n)
{
    if (len != n->seg_len)
        return len < n->seg_len ? -1 : 1;
    return len ? memcmp(s, n->seg, len) : 0;
}

/* Binary search among literal children; *at receives the insertion point. */
static node *find_kid(const node *n, const char *s, size_t len, uint32_t *at)
{
    uint32_t lo = 0, hi = n->nkids;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = seg_cmp(s, len, n->kids[mid]);
        if (c == 0) {
            if (at)
                *at = mid;
            return n->kids[mid];
        }
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    if (at)
        *at = lo;
    return NULL;
}

static node *add_kid(const nsv__alloc *a, node *n, const char *s, size_t len)
{
    uint32_t at;
    node *k = find_kid(n, s, len, &at);
    if (k)
        return k;
    if (n->nkids == n->capkids) {
        uint32_t cap = n->capkids ? n->capkids * 2 : 4;
        node **kids = nsv__realloc(a, n->kids, cap * sizeof *kids);
        if (!kids)
            return NULL;
        n->kids = kids;
        n->capkids = cap;
    }
    k = node_new(a, s, len);
    if (!k)
        return NULL;
    memmove(n->kids + at + 1, n->kids + at, (n->nkids - at) * sizeof *n->kids);
    n->kids[at] = k;
    n->nkids++;
    return k;
}

/* Length of the segment starting at s (up to '/' or end). */
static size_t seg_len_at(const char *s, size_t len)
{
    const char *e = memchr(s, '/', len);
    return e ? (size_t)(e - s) : len;
}

/* Bytes that cannot occur in a raw request path. */
static int bad_path_byte(unsigned char c)
{
    return c <= 0x20 || c == 0x7f || c == '?' || c == '#';
}

/* Checks the pattern; counts params and their name bytes. */
static int check_pattern(const char *p, size_t plen, uint32_t *nnames, size_t *name_bytes)
{
    if (plen == 0 || p[0] != '/' || plen > UINT32_MAX)
        return NSV_EINVAL;
    for (size_t i = 0; i < plen; i++)
        if (bad_path_byte((unsigned char)p[i]))
            return NSV_EINVAL;
    *nnames = 0;
    *name_bytes = 0;
    size_t i = 1, nseg = 0;
    for (;;) {
        /* Bounds the trie depth, hence recursion in match and free. */
        if (++nseg > NSV__ROUTE_MAX_SEGMENTS)
            return NSV_EINVAL;
        size_t sl = seg_len_at(p + i, plen - i);
        const char *s = p + i;
        if (sl && s[0] == '*') {
            if (sl != 1 || i + sl != plen)
                return NSV_EINVAL; /* "*" must be a whole, final segment */
            (*nnames)++;
            *name_bytes += 1;
        } else if (sl && s[0] == ':') {
            if (sl == 1)
                return NSV_EINVAL; /* unnamed param */
            /* Duplicate names would make lookup by name ambiguous. */
            for (size_t j = 1; j < i; j++) {
                size_t ol = seg_len_at(p + j, plen - j);
                if (ol == sl && memcmp(p + j, s, sl) == 0)
                    return NSV_EINVAL;
                j += ol;
            }
            (*nnames)++;
            *name_bytes += sl - 1;
        }
        i += sl;
        if (i >= plen)
            break;
        i++; /* skip '/' */
    }
    return 0;
}

/* Builds the names block of a route: pname records then the bytes. */
static pname *build_names(const nsv__alloc *a, const char *p, size_t plen, uint32_t n, size_t bytes)
{
    if (n == 0)
        return NULL;
    pname *names = nsv__malloc(a, n * sizeof(pname) + bytes);
    if (!names)
        return NULL;
    char *buf = (char *)(names + n);
    uint32_t k = 0;
    for (size_t i = 1; i <= plen && k < n;) {
        size_t sl = seg_len_at(p + i, plen - i);
        const char *s = p + i;
        if (sl && (s[0] == ':' || s[0] == '*')) {
            size_t nl = s[0] == '*' ? 1 : sl - 1;
            memcpy(buf, s[0] == '*' ? s : s + 1, nl);
            names[k].p = buf;
            names[k].len = (uint32_t)nl;
            buf += nl;
            k++;
        }
        i += sl + 1;
    }
    return names;
}

/* Walks the pattern, creating nodes; returns the terminal node. */
static node *insert_path(const nsv__alloc *a, node *n, const char *p, size_t plen)
{
    size_t i = 1;
    for (;;) {
        size_t sl = seg_len_at(p + i, plen - i);
        const char *s = p + i;
        node **slot = NULL;
        if (sl && s[0] == '*')
            slot = &n->wild;
        else if (sl && s[0] == ':')
            slot = &n->param;
        if (slot) {
            if (!*slot && !(*slot = node_new(a, NULL, 0)))
                return NULL;
            n = *slot;
        } else if (!(n = add_kid(a, n, s, sl))) {
            return NULL;
        }
        i += sl;
        if (i >= plen)
            return n;
        i++;
    }
}

static xroute *find_xroute(const node *n, const char *m, size_t mlen)
{
    for (uint32_t i = 0; i < n->nxr; i++)
        if (n->xr[i].mlen == mlen && memcmp(n->xr[i].method, m, mlen) == 0)
            return &n->xr[i];
    return NULL;
}

/* Reserves a route record for a method without a slot. */
static route *add_xroute(const nsv__alloc *a, node *n, const char *m, size_t mlen)
{
    if (n->nxr == n->capxr) {
        uint32_t cap = n->capxr ? n->capxr * 2 : 2;
        xroute *xr = nsv__realloc(a, n->xr, cap * sizeof *xr);
        if (!xr)
            return NULL;
        n->xr = xr;
        n->capxr = cap;
    }
    char *copy = nsv__malloc(a, mlen);
    if (!copy)
        return NULL;
    memcpy(copy, m, mlen);
    xroute *x = &n->xr[n->nxr++];
    x->method = copy;
    x->mlen = (uint32_t)mlen;
    x->r.id = -1;
    x->r.names = NULL;
    return &x->r;
}

int nsv__router_check(const char *method, size_t mlen, uint32_t flags, const char **why)
{
    const char *w = NULL;
    if (!method || mlen == 0)
        w = "empty method";
    else if (mlen > 64)
        w = "method longer than 64 bytes";
    for (size_t i = 0; !w && i < mlen; i++)
        if (!is_tchar((unsigned char)method[i]))
            w = "method is not an RFC 9110 token";
    for (size_t i = 0; !w && i < mlen; i++)
        if (method[i] >= 'a' && method[i] <= 'z')
            w = "method has lower-case letters (methods are case-sensitive)";
    if (!w && (flags & ~(uint32_t)(NSV_ROUTE_WEBSOCKET | NSV_ROUTE_STREAM_BODY)))
        w = "unknown route flags";
    if (!w && (flags & NSV_ROUTE_WEBSOCKET) && !(mlen == 3 && memcmp(method, "GET", 3) == 0))
        w = "NSV_ROUTE_WEBSOCKET needs method GET (a WebSocket handshake is a GET request)";
    if (why)
        *why = w;
    return w ? NSV_EINVAL : 0;
}

int nsv__router_add(nsv__router *r, const char *method, size_t mlen,
                    const char *pattern, size_t plen, int32_t id, uint32_t flags)
{
    if (!r || !method || !pattern || id < 0 || nsv__router_check(method, mlen, flags, NULL))
        return NSV_EINVAL;
    uint32_t nnames;
    size_t name_bytes;
    int rc = check_pattern(pattern, plen, &nnames, &name_bytes);
    if (rc)
        return rc;

    node *n = insert_path(&r->a, r->root, pattern, plen);
    if (!n)
        return NSV_ENOMEM;
    int slot = method_slot(method, mlen);
    if ((slot != M_OTHER && n->slots[slot].id >= 0) ||
        (slot == M_OTHER && find_xroute(n, method, mlen)))
        return NSV_EEXIST;

    /* Names first: if that fails nothing has been attached yet. */
    pname *names = build_names(&r->a, pattern, plen, nnames, name_bytes);
    if (nnames && !names)
        return NSV_ENOMEM;
    route *rt = slot != M_OTHER ? &n->slots[slot] : add_xroute(&r->a, n, method, mlen);
    if (!rt) {
        nsv__free(&r->a, names);
        return NSV_ENOMEM;
    }
    rt->id = id;
    rt->flags = flags;
    rt->nnames = nnames;
    rt->names = names;
    return 0;
}

/* The request as seen by the matcher. */
typedef struct mreq {
    const char *path;
    size_t plen;
    const char *method;
    size_t mlen;
    int slot;
    nsv__param *params;
    uint32_t max;
} mreq;

static const route *pick_route(const node *n, const mreq *q)
{
    if (q->slot != M_OTHER) {
        if (n->slots[q->slot].id >= 0)
            return &n->slots[q->slot];
        if (q->slot == M_HEAD && n->slots[M_GET].id >= 0)
            return &n->slots[M_GET];
    } else {
        const xroute *x = find_xroute(n, q->method, q->mlen);
        if (x)
            return &x->r;
    }
    return n->slots[M_ALL].id >= 0 ? &n->slots[M_ALL] : NULL;
}

static void set_param(const mreq *q, uint32_t k, size_t off, size_t len)
{
    if (k < q->max) {
        q->params[k].val_off = (uint32_t)off;
        q->params[k].val_len = (uint32_t)len;
    }
}

/* Matches the path from pos (just after a '/') below n; k params so far. */
static const route *match_from(const node *n, const mreq *q, size_t pos, uint32_t k)
{
    size_t sl = seg_len_at(q->path + pos, q->plen - pos);
    size_t next = pos + sl;
    int last = next >= q->plen;
    const route *rt;

    const node *c = find_kid(n, q->path + pos, sl, NULL);
    if (c && (rt = last ? pick_route(c, q) : match_from(c, q, next + 1, k)))
        return rt;
    if (n->param && sl) {
        set_param(q, k, pos, sl);
        if ((rt = last ? pick_route(n->param, q) : match_from(n->param, q, next + 1, k + 1)))
            return rt;
    }
    if (n->wild && (rt = pick_route(n->wild, q))) {
        set_param(q, k, pos, q->plen - pos);
        return rt;
    }
    return NULL;
}

int32_t nsv__router_match(const nsv__router *r, const char *method, size_t mlen,
                          const char *path, size_t plen, nsv__param *params,
                          uint32_t max_params, uint32_t *nparams, uint32_t *flags)
{
    if (nparams)
        *nparams = 0;
    if (!r || !method || !path || plen == 0 || path[0] != '/' || plen > UINT32_MAX)
        return -1;
    mreq q = {path, plen, method, mlen, method_slot(method, mlen),
              params, params ? max_params : 0};
    if (q.slot == M_ALL)
        q.slot = M_OTHER; /* a request method "ALL" is just an unknown method */
    const route *rt = match_from(r->root, &q, 1, 0);
    if (!rt)
        return -1;
    uint32_t n = rt->nnames < q.max ? rt->nnames : q.max;
    for (uint32_t i = 0; i < n; i++) {
        params[i].name = rt->names[i].p;
        params[i].name_len = rt->names[i].len;
    }
    if (nparams)
        *nparams = n;
    if (flags)
        *flags = rt->flags;
    return rt->id;
}
