/* buf.c - unit tests for connection buffers: the capacity arithmetic at its
 * boundaries (2^31, 2^32 - 1, the maximum), and the per-loop caches, which
 * never keep a zero-capacity or an over-1-MiB buffer. Multi-GiB buffers come
 * from an allocator hook that maps address space without touching it, so
 * nothing here makes memory resident. */
#include "core/server.h"
#include "tap.h"

#include <malloc.h>
#include <stdint.h>
#include <sys/mman.h>

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

static void test_grow_cap(void)
{
    is_int(NSV__BUF_MAX, 4 * GiB - 64 * KiB, "maximum is 4 GiB - 64 KiB");
    ok(NSV__BUF_MAX < UINT32_MAX, "maximum fits the uint32 capacity field");

    is_int(nsv__buf_grow_cap(0, 1), 16 * KiB, "first capacity is one block");
    is_int(nsv__buf_grow_cap(0, 16 * KiB), 16 * KiB, "one block exactly");
    is_int(nsv__buf_grow_cap(0, 16 * KiB + 1), 32 * KiB, "one byte past a block doubles");
    is_int(nsv__buf_grow_cap(16 * KiB, 16 * KiB + 1), 32 * KiB, "doubling from 16 KiB");
    is_int(nsv__buf_grow_cap(16 * KiB, 100 * KiB), 128 * KiB, "16 KiB -> 128 KiB");
    is_int(nsv__buf_grow_cap(16 * KiB, MiB), MiB, "16 KiB -> 1 MiB exactly");
    is_int(nsv__buf_grow_cap(16 * KiB, MiB + 1), 2 * MiB, "one byte past 1 MiB");
    is_int(nsv__buf_grow_cap(64 * KiB, 64 * KiB), 64 * KiB, "enough already: unchanged");

    is_int(nsv__buf_grow_cap(16 * KiB, 2 * GiB), 2 * GiB, "doubling reaches 2^31");
    is_int(nsv__buf_grow_cap(GiB, GiB + 1), 2 * GiB, "2^30 -> 2^31");
    /* The old code doubled 2^31 to 2^32 and stored 0 in the uint32 field. */
    is_int(nsv__buf_grow_cap(2 * GiB, 2 * GiB + 1), NSV__BUF_MAX, "2^31 + 1 saturates at the maximum, not 0");
    is_int(nsv__buf_grow_cap(16 * KiB, 2 * GiB + 1), NSV__BUF_MAX, "from 16 KiB past 2^31: the maximum");
    is_int(nsv__buf_grow_cap(16 * KiB, 3 * GiB), NSV__BUF_MAX, "3 GiB: the maximum");
    is_int(nsv__buf_grow_cap(3 * GiB, 3 * GiB + 1), NSV__BUF_MAX, "odd capacity past 2^31 saturates");
    is_int(nsv__buf_grow_cap(0, NSV__BUF_MAX), NSV__BUF_MAX, "the maximum itself fits");
    is_int(nsv__buf_grow_cap(NSV__BUF_MAX, NSV__BUF_MAX), NSV__BUF_MAX, "full maximum stays");
    is_int(nsv__buf_grow_cap(0, (uint64_t)NSV__BUF_MAX + 1), NSV_ETOOBIG, "maximum + 1: NSV_ETOOBIG");
    is_int(nsv__buf_grow_cap(NSV__BUF_MAX, (uint64_t)NSV__BUF_MAX + 1), NSV_ETOOBIG,
           "growing a full maximum: NSV_ETOOBIG");
    is_int(nsv__buf_grow_cap(2 * GiB, 4 * GiB - 1), NSV_ETOOBIG, "2^32 - 1: NSV_ETOOBIG");
    is_int(nsv__buf_grow_cap(0, 4 * GiB), NSV_ETOOBIG, "2^32: NSV_ETOOBIG");
    is_int(nsv__buf_grow_cap(0, 5 * GiB), NSV_ETOOBIG, "5 GiB: NSV_ETOOBIG");
    is_int(nsv__buf_grow_cap(0, UINT64_MAX), NSV_ETOOBIG, "UINT64_MAX: NSV_ETOOBIG");

    /* Every answer holds need, fits the field and is never 0. */
    int bad = 0;
    uint32_t caps[] = {0, 1, 16 * 1024, 65536, 1u << 20, 1u << 30, 1u << 31, 3u << 30, NSV__BUF_MAX};
    for (size_t i = 0; i < sizeof caps / sizeof *caps; i++) {
        for (uint64_t need = 1; need <= 8 * GiB; need = need * 3 + 7) {
            for (int d = -1; d <= 1; d++) {
                uint64_t n = need + (uint64_t)(int64_t)d;
                int64_t c = nsv__buf_grow_cap(caps[i], n);
                if (n > NSV__BUF_MAX ? c != NSV_ETOOBIG
                                     : (c <= 0 || (uint64_t)c < n || (uint64_t)c > NSV__BUF_MAX ||
                                        ((uint64_t)c < caps[i] && caps[i] <= NSV__BUF_MAX))) {
                    if (bad++ < 5)
                        diag("cap %u need %llu -> %lld", caps[i], (unsigned long long)n, (long long)c);
                }
            }
        }
    }
    is_int(bad, 0, "grow_cap: result >= need, <= maximum, never 0, across a sweep");
}

/* Every buffer kept by the big cache is a real one of at most 1 MiB. */
static int cache_sane(const nsv__loop *l)
{
    for (int i = 0; i < l->nbig_bufs; i++)
        if (!l->big_bufs[i].p || l->big_bufs[i].cap == 0 || l->big_bufs[i].cap <= NSV__BLOCK || l->big_bufs[i].cap > MiB)
            return 0;
    return l->nbig_bufs >= 0 && l->nbig_bufs <= (int)NSV__ARRAY_LEN(l->big_bufs);
}

static void test_loop_caches(void)
{
    nsv_server *s = nsv_server_new();
    ok(s != NULL, "server");
    nsv__loop *l = s->loops[0];
    nsv__buf b = {0};

    is_int(nsv__buf_reserve(l, &b, 100), 0, "reserve 100");
    is_int(b.cap, NSV__BLOCK, "one pooled block");
    int pool0 = l->npool;
    nsv__buf_release(l, &b);
    is_int(l->npool, pool0 + 1, "block back to the pool");
    ok(b.p == NULL && b.cap == 0 && b.len == 0, "released buffer is empty");

    /* Growth keeps the content. */
    char data[3000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (char)(i * 7);
    int okc = 1;
    for (int i = 0; i < 100; i++) {
        if (nsv__buf_append(l, &b, data, sizeof data) != 0)
            okc = 0;
    }
    is_int(b.len, 300000, "appended 300000 bytes");
    is_int(b.cap, 512 * KiB, "capacity doubled to 512 KiB");
    for (int i = 0; i < 100 && okc; i++)
        okc = memcmp(b.p + (size_t)i * sizeof data, data, sizeof data) == 0;
    ok(okc, "content kept across growth");
    int nbig0 = l->nbig_bufs;
    nsv__buf_release(l, &b);
    is_int(l->nbig_bufs, nbig0 + 1, "512 KiB buffer kept in the big cache");
    ok(cache_sane(l), "cache sane");

    /* A kept buffer is swapped in for a later growth. */
    is_int(nsv__buf_reserve(l, &b, 200 * KiB), 0, "reserve 200 KiB");
    is_int(b.cap, 512 * KiB, "got the kept 512 KiB buffer");
    is_int(l->nbig_bufs, nbig0, "taken out of the cache");
    nsv__buf_release(l, &b);

    is_int(nsv__buf_reserve(l, &b, MiB), 0, "reserve 1 MiB");
    is_int(b.cap, MiB, "1 MiB");
    nbig0 = l->nbig_bufs;
    nsv__buf_release(l, &b);
    is_int(l->nbig_bufs, nbig0 + 1, "1 MiB kept (the bound)");

    is_int(nsv__buf_reserve(l, &b, MiB + 1), 0, "reserve 1 MiB + 1");
    is_int(b.cap, 2 * MiB, "2 MiB");
    nbig0 = l->nbig_bufs;
    nsv__buf_release(l, &b);
    is_int(l->nbig_bufs, nbig0, "2 MiB not kept");
    ok(cache_sane(l), "cache sane");

    /* The cache holds at most four. */
    nsv__buf many[8] = {{0}};
    for (int i = 0; i < 8; i++)
        nsv__buf_reserve(l, &many[i], 256 * KiB);
    for (int i = 0; i < 8; i++)
        nsv__buf_release(l, &many[i]);
    is_int(l->nbig_bufs, 4, "big cache bounded at 4 buffers");
    ok(cache_sane(l), "cache sane after many releases");

    /* Refusals leave the buffer as it was. */
    nsv__buf_append(l, &b, "abc", 3);
    uint32_t cap = b.cap;
    is_int(nsv__buf_reserve(l, &b, SIZE_MAX), NSV_ETOOBIG, "reserve SIZE_MAX: NSV_ETOOBIG");
    is_int(nsv__buf_reserve(l, &b, (size_t)NSV__BUF_MAX + 1), NSV_ETOOBIG, "reserve maximum + 1: NSV_ETOOBIG");
    is_int(nsv__buf_reserve(l, &b, NSV__BUF_MAX - 2), NSV_ETOOBIG, "len + extra past the maximum: NSV_ETOOBIG");
    is_int(b.cap, cap, "capacity unchanged");
    is_mem(b.p, b.len, "abc", "content unchanged");
    nsv__buf_release(l, &b);
    ok(cache_sane(l), "cache sane");
    nsv_server_free(s);
}

/* ---- multi-GiB buffers: address space only ---- */

#define BIG_AT (64 * MiB) /* allocations from here on are mappings */
typedef struct region {
    void *p;
    size_t n;
} region;
static region regions[8];
static size_t mapped;      /* bytes mapped now */
static size_t mapped_peak; /* largest mapping */
static int map_failed;

static region *find_region(void *p)
{
    for (size_t i = 0; p && i < sizeof regions / sizeof *regions; i++)
        if (regions[i].p == p)
            return &regions[i];
    return NULL;
}

static void *map_alloc(void *ud, void *p, size_t n)
{
    (void)ud;
    region *r = find_region(p);
    if (n == 0) {
        if (r) {
            munmap(r->p, r->n);
            mapped -= r->n;
            r->p = NULL;
        } else {
            free(p);
        }
        return NULL;
    }
    if (!r && n < BIG_AT)
        return realloc(p, n);
    if (r) {
        void *q = mremap(r->p, r->n, n, MREMAP_MAYMOVE);
        if (q == MAP_FAILED) {
            map_failed = 1;
            return NULL;
        }
        mapped = mapped - r->n + n;
        r->p = q;
        r->n = n;
    } else {
        for (size_t i = 0; i < sizeof regions / sizeof *regions && !r; i++)
            if (!regions[i].p)
                r = &regions[i];
        void *q = r ? mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                    : MAP_FAILED;
        if (q == MAP_FAILED) {
            map_failed = 1;
            return NULL;
        }
        if (p) {
            memcpy(q, p, malloc_usable_size(p) < n ? malloc_usable_size(p) : n);
            free(p);
        }
        r->p = q;
        r->n = n;
        mapped += n;
    }
    if (n > mapped_peak)
        mapped_peak = n;
    return r->p;
}

static void test_huge(void)
{
    nsv_server *s = nsv_server_new_ex(-1, map_alloc, NULL);
    ok(s != NULL, "server with a mapping allocator");
    nsv__loop *l = s->loops[0];
    nsv__buf b = {0};

    int r = nsv__buf_reserve(l, &b, 2 * GiB);
    if (r == NSV_ENOMEM && map_failed) {
        diag("cannot map 4 GiB of address space here; multi-GiB cases skipped");
        nsv_server_free(s);
        return;
    }
    is_int(r, 0, "reserve 2^31");
    is_int(b.cap, 2 * GiB, "capacity 2^31");
    b.len = (uint32_t)(2 * GiB); /* as if filled (the pages stay untouched) */
    is_int(nsv__buf_reserve(l, &b, 1), 0, "one more byte past 2^31");
    is_int(b.cap, NSV__BUF_MAX, "capacity is the maximum, not a wrapped 0");
    is_int(mapped, NSV__BUF_MAX, "the allocator holds exactly that");
    is_int(nsv__buf_reserve(l, &b, NSV__BUF_MAX - 2 * GiB), 0, "fill up to the maximum");
    b.len = NSV__BUF_MAX;
    is_int(nsv__buf_reserve(l, &b, 1), NSV_ETOOBIG, "one byte past the maximum: NSV_ETOOBIG");
    is_int(b.cap, NSV__BUF_MAX, "capacity unchanged");
    int nbig = l->nbig_bufs;
    nsv__buf_release(l, &b);
    is_int(l->nbig_bufs, nbig, "a 4 GiB buffer is not kept in the big cache");
    is_int(mapped, 0, "and goes back to the allocator");

    /* A 3 GiB reply from scratch, twice: nothing stays. */
    for (int round = 0; round < 2; round++) {
        is_int(nsv__buf_reserve(l, &b, 3 * GiB), 0, "reserve 3 GiB (round %d)", round);
        is_int(b.cap, NSV__BUF_MAX, "capacity the maximum (round %d)", round);
        b.len = (uint32_t)(3 * GiB);
        nsv__buf_release(l, &b);
        is_int(mapped, 0, "3 GiB returned to the allocator (round %d)", round);
        ok(cache_sane(l), "cache sane (round %d)", round);
    }
    is_int(nsv__buf_reserve(l, &b, (size_t)4 * GiB - 1), NSV_ETOOBIG, "reserve 2^32 - 1: NSV_ETOOBIG");
    ok(b.p == NULL && b.cap == 0, "nothing allocated");
    nsv_server_free(s);
    is_int(mapped, 0, "no mapping left after the server is freed");
}

int main(void)
{
    test_grow_cap();
    test_loop_caches();
    test_huge();
    return done_testing();
}
