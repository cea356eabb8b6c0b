/* router.c - unit tests for the trie router. */
#include "router/router.h"
#include "tap.h"

#include <stdint.h>
#include <time.h>

#define S(x) x, sizeof(x) - 1

static int add(nsv__router *r, const char *m, const char *p, int32_t id)
{
    return nsv__router_add(r, m, strlen(m), p, strlen(p), id, 0);
}

static nsv__param prm[8];
static uint32_t nprm;

static int32_t match(const nsv__router *r, const char *m, const char *p)
{
    uint32_t fl;
    return nsv__router_match(r, m, strlen(m), p, strlen(p), prm, 8, &nprm, &fl);
}

/* Checks param i of the last match against name=value. */
static void is_param(const char *path, uint32_t i, const char *name, const char *val)
{
    ok(i < nprm, "param %u exists (%s)", i, name);
    if (i >= nprm)
        return;
    is_mem(prm[i].name, prm[i].name_len, name, "param %u name", i);
    is_mem(path + prm[i].val_off, prm[i].val_len, val, "param %u value", i);
}

static void test_literal_param_wild(void)
{
    nsv__router *r = nsv__router_new(&nsv__default_alloc);
    ok(r != NULL, "router created");
    is_int(add(r, "GET", "/", 1), 0, "add /");
    is_int(add(r, "GET", "/users", 2), 0, "add /users");
    is_int(add(r, "GET", "/users/", 3), 0, "add /users/ (strict trailing slash)");
    is_int(add(r, "GET", "/users/:id", 4), 0, "add /users/:id");
    is_int(add(r, "GET", "/users/:id/posts/:post", 5), 0, "add two params");
    is_int(add(r, "GET", "/files/*", 6), 0, "add wildcard");
    is_int(add(r, "GET", "/a//b", 7), 0, "add empty segment");

    is_int(match(r, "GET", "/"), 1, "/");
    is_int(nprm, 0, "no params");
    is_int(match(r, "GET", "/users"), 2, "/users");
    is_int(match(r, "GET", "/users/"), 3, "/users/ differs from /users");
    is_int(match(r, "GET", "/users/42"), 4, "/users/42");
    is_int(nprm, 1, "one param");
    is_param("/users/42", 0, "id", "42");
    const char *p = "/users/7/posts/hello%20x";
    is_int(match(r, "GET", p), 5, "two params");
    is_int(nprm, 2, "two params count");
    is_param(p, 0, "id", "7");
    is_param(p, 1, "post", "hello%20x");
    is_int(match(r, "GET", "/users/7/posts"), -1, "partial path does not match");
    is_int(match(r, "GET", "/users/7/posts/"), -1, "param does not match empty segment");

    p = "/files/a/b/c.txt";
    is_int(match(r, "GET", p), 6, "wildcard deep");
    is_param(p, 0, "*", "a/b/c.txt");
    p = "/files/";
    is_int(match(r, "GET", p), 6, "wildcard empty remainder");
    is_param(p, 0, "*", "");
    is_int(match(r, "GET", "/files"), -1, "wildcard needs the slash");

    is_int(match(r, "GET", "/a//b"), 7, "empty segment literal");
    is_int(match(r, "GET", "/a/b"), -1, "empty segment is significant");
    is_int(match(r, "GET", "//"), -1, "// unmatched");
    is_int(match(r, "GET", ""), -1, "empty path");
    is_int(match(r, "GET", "users"), -1, "path without leading slash");
    is_int(match(r, "GET", "/nope"), -1, "unknown path");
    nsv__router_free(r);
}

static void test_backtracking(void)
{
    nsv__router *r = nsv__router_new(&nsv__default_alloc);
    add(r, "GET", "/users/new/edit", 1);
    add(r, "GET", "/users/:id/view", 2);
    add(r, "GET", "/users/new", 3);
    add(r, "GET", "/users/:id", 4);
    add(r, "GET", "/users/:id/*", 5);
    add(r, "GET", "/x/:a/:b/end", 6);
    add(r, "GET", "/x/lit/:c/other", 7);

    is_int(match(r, "GET", "/users/new/edit"), 1, "literal path");
    const char *p = "/users/new/view";
    is_int(match(r, "GET", p), 2, "backtrack from literal to param");
    is_param(p, 0, "id", "new");
    is_int(match(r, "GET", "/users/new"), 3, "literal beats param");
    is_int(match(r, "GET", "/users/old"), 4, "param when no literal");
    p = "/users/new/zzz/q";
    is_int(match(r, "GET", p), 5, "backtrack into wildcard");
    is_param(p, 0, "id", "new");
    is_param(p, 1, "*", "zzz/q");
    p = "/x/lit/mid/end";
    is_int(match(r, "GET", p), 6, "backtrack two levels");
    is_param(p, 0, "a", "lit");
    is_param(p, 1, "b", "mid");
    p = "/x/lit/mid/other";
    is_int(match(r, "GET", p), 7, "literal branch with param");
    is_int(nprm, 1, "one param on literal branch");
    is_param(p, 0, "c", "mid");
    nsv__router_free(r);
}

static void test_methods(void)
{
    nsv__router *r = nsv__router_new(NULL);
    is_int(add(r, "GET", "/m", 1), 0, "GET /m");
    is_int(add(r, "POST", "/m", 2), 0, "POST /m");
    is_int(add(r, "ALL", "/m", 3), 0, "ALL /m");
    is_int(add(r, "PURGE", "/m", 4), 0, "custom method");
    is_int(add(r, "GET", "/g", 5), 0, "GET /g");
    is_int(add(r, "HEAD", "/h", 6), 0, "HEAD /h");
    is_int(add(r, "GET", "/h", 7), 0, "GET /h");
    is_int(add(r, "ALL", "/all", 8), 0, "ALL /all");
    is_int(add(r, "POST", "/bt/literal", 9), 0, "POST literal");
    is_int(add(r, "GET", "/bt/:p", 10), 0, "GET param");

    is_int(match(r, "GET", "/m"), 1, "GET beats ALL");
    is_int(match(r, "POST", "/m"), 2, "POST beats ALL");
    is_int(match(r, "PURGE", "/m"), 4, "custom method beats ALL");
    is_int(match(r, "DELETE", "/m"), 3, "ALL catches DELETE");
    is_int(match(r, "HEAD", "/m"), 1, "HEAD served by GET before ALL");
    is_int(match(r, "HEAD", "/g"), 5, "HEAD via GET");
    is_int(match(r, "HEAD", "/h"), 6, "HEAD route beats GET");
    is_int(match(r, "PUT", "/g"), -1, "method mismatch");
    is_int(match(r, "get", "/g"), -1, "methods are case-sensitive");
    is_int(match(r, "BREW", "/all"), 8, "ALL catches unknown methods");
    is_int(match(r, "ALL", "/g"), -1, "request method ALL is not a wildcard");
    is_int(match(r, "GET", "/bt/literal"), 10, "method mismatch backtracks to param");
    is_int(match(r, "POST", "/bt/literal"), 9, "POST literal");
    nsv__router_free(r);
}

static void test_errors(void)
{
    nsv__router *r = nsv__router_new(NULL);
    is_int(add(r, "GET", "/a/:id", 1), 0, "add");
    is_int(add(r, "GET", "/a/:other", 2), NSV_EEXIST, "same shape is a duplicate");
    is_int(add(r, "GET", "/a/:id", 3), NSV_EEXIST, "exact duplicate");
    is_int(add(r, "POST", "/a/:id", 4), 0, "other method is fine");
    is_int(add(r, "ALL", "/a/:id", 5), 0, "ALL is fine");
    is_int(add(r, "ALL", "/a/:id", 6), NSV_EEXIST, "ALL duplicate");
    is_int(add(r, "PURGE", "/a/:id", 7), 0, "custom method");
    is_int(add(r, "PURGE", "/a/:id", 8), NSV_EEXIST, "custom duplicate");

    is_int(add(r, "GET", "", 1), NSV_EINVAL, "empty pattern");
    is_int(add(r, "GET", "a/b", 1), NSV_EINVAL, "no leading slash");
    is_int(add(r, "GET", "/a/*/b", 1), NSV_EINVAL, "* not last");
    is_int(add(r, "GET", "/a/*x", 1), NSV_EINVAL, "*x");
    is_int(add(r, "GET", "/a/:", 1), NSV_EINVAL, "unnamed param");
    is_int(add(r, "GET", "/a/:x/:x", 1), NSV_EINVAL, "duplicate param name");
    is_int(add(r, "GET", "/a b", 1), NSV_EINVAL, "space in pattern");
    is_int(add(r, "GET", "/a?b", 1), NSV_EINVAL, "? in pattern");
    is_int(add(r, "", "/x", 1), NSV_EINVAL, "empty method");
    is_int(add(r, "G T", "/x", 1), NSV_EINVAL, "bad method");
    is_int(add(r, "GET", "/x", -1), NSV_EINVAL, "negative id");
    is_int(nsv__router_add(r, NULL, 0, "/x", 2, 1, 0), NSV_EINVAL, "NULL method");
    is_int(nsv__router_add(r, "GET", 3, NULL, 0, 1, 0), NSV_EINVAL, "NULL pattern");
    is_int(add(r, "GET", "/a:b/c*", 9), 0, "':' and '*' inside a literal are literal");
    is_int(match(r, "GET", "/a:b/c*"), 9, "matches literally");

    char deep[4096];
    size_t n = 0;
    for (int i = 0; i < 600; i++) {
        deep[n++] = '/';
        deep[n++] = 'd';
    }
    deep[n] = 0;
    is_int(add(r, "GET", deep, 1), NSV_EINVAL, "too many segments");
    deep[2 * 500] = 0;
    is_int(add(r, "GET", deep, 10), 0, "500 segments accepted");
    is_int(match(r, "GET", deep), 10, "500 segments matched");
    nsv__router_free(r);
}

static void test_params_limit(void)
{
    nsv__router *r = nsv__router_new(NULL);
    add(r, "GET", "/:a/:b/:c/*", 1);
    nsv__param two[2];
    uint32_t n = 99, fl = 0;
    const char *p = "/1/2/3/rest";
    is_int(nsv__router_match(r, S("GET"), p, strlen(p), two, 2, &n, &fl), 1, "match with 2 slots");
    is_int(n, 2, "nparams capped at max");
    is_mem(p + two[1].val_off, two[1].val_len, "2", "second value");
    is_int(nsv__router_match(r, S("GET"), p, strlen(p), NULL, 0, &n, NULL), 1, "match without params");
    is_int(n, 0, "no params reported");
    nsv__router_free(r);

    r = nsv__router_new(NULL);
    nsv__router_add(r, S("GET"), S("/ws"), 3, NSV_ROUTE_WEBSOCKET);
    fl = 0;
    is_int(nsv__router_match(r, S("GET"), S("/ws"), NULL, 0, &n, &fl), 3, "ws route");
    is_int(fl, NSV_ROUTE_WEBSOCKET, "flags returned");
    nsv__router_free(r);
}

/* Allocator failing after `budget` allocations, counting live blocks. */
typedef struct failer {
    long budget;
    long live;
} failer;

static void *fail_alloc(void *ud, void *p, size_t n)
{
    failer *f = ud;
    if (n == 0) {
        if (p)
            f->live--;
        free(p);
        return NULL;
    }
    if (f->budget-- <= 0)
        return NULL;
    void *q = realloc(p, n);
    if (q && !p)
        f->live++;
    return q;
}

static void test_oom(void)
{
    static const char *pats[] = {"/a/b/c", "/a/:x/d", "/a/*", "/q/:y/:z", "/a/b/c/:w"};
    int all_ok = 1, leak = 0;
    for (long budget = 0; budget < 60; budget++) {
        failer f = {budget, 0};
        nsv__alloc a = {fail_alloc, &f};
        nsv__router *r = nsv__router_new(&a);
        if (!r) {
            leak |= f.live != 0;
            continue;
        }
        int added[5] = {0};
        for (int i = 0; i < 5; i++) {
            int rc = nsv__router_add(r, i & 1 ? "PURGE" : "GET", i & 1 ? 5 : 3,
                                     pats[i], strlen(pats[i]), i, 0);
            if (rc != 0 && rc != NSV_ENOMEM)
                all_ok = 0;
            added[i] = rc == 0;
        }
        /* Routes added before or after a failure still work. */
        for (int i = 0; i < 5; i++) {
            if (!added[i])
                continue;
            int32_t got = nsv__router_match(r, i & 1 ? "PURGE" : "GET", i & 1 ? 5 : 3,
                                            pats[i], strlen(pats[i]), prm, 8, &nprm, NULL);
            if (got != i)
                all_ok = 0;
        }
        nsv__router_free(r);
        leak |= f.live != 0;
    }
    ok(all_ok, "allocation failures give NSV_ENOMEM and keep the router usable");
    ok(!leak, "no leaks after allocation failures");
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Average ns per lookup of `path`. */
static double time_lookup(const nsv__router *r, const char *path, int iters)
{
    size_t len = strlen(path);
    volatile int32_t sink = 0;
    double t0 = now_ns();
    for (int i = 0; i < iters; i++)
        sink += nsv__router_match(r, "GET", 3, path, len, prm, 8, &nprm, NULL);
    (void)sink;
    return (now_ns() - t0) / iters;
}

static void test_many_routes(void)
{
    enum { N = 10000 };
    nsv__router *big = nsv__router_new(NULL);
    char buf[64];
    int add_ok = 1;
    for (int i = 0; i < N; i++) {
        snprintf(buf, sizeof buf, "/api/r%d/:id", i);
        add_ok &= add(big, "GET", buf, i) == 0;
    }
    ok(add_ok, "%d routes under one parent added", N);
    int match_ok = 1;
    for (int i = 0; i < N; i++) {
        snprintf(buf, sizeof buf, "/api/r%d/x%d", i, i);
        if (match(big, "GET", buf) != i || nprm != 1 || prm[0].val_len != strlen(buf) - prm[0].val_off)
            match_ok = 0;
    }
    ok(match_ok, "all %d routes matched with their param", N);
    is_int(match(big, "GET", "/api/r10000/x"), -1, "absent route");

    nsv__router *small = nsv__router_new(NULL);
    for (int i = 0; i < 5; i++) {
        snprintf(buf, sizeof buf, "/api/r%d/:id", i);
        add(small, "GET", buf, i);
    }
    double t_small = time_lookup(small, "/api/r3/abc", 200000);
    double t_big = time_lookup(big, "/api/r7777/abc", 200000);
    diag("lookup: %.1f ns with 5 routes, %.1f ns with %d routes", t_small, t_big, N);
    nsv__router_free(small);
    nsv__router_free(big);
}

int main(void)
{
    test_literal_param_wild();
    test_backtracking();
    test_methods();
    test_errors();
    test_params_limit();
    test_oom();
    test_many_routes();
    return done_testing();
}
