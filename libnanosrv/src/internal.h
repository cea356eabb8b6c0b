/* internal.h - private declarations shared across layers. Never installed. */
#ifndef NSV_INTERNAL_H
#define NSV_INTERNAL_H

#include "../include/nanosrv.h"
#include <stdint.h>
#include <stddef.h>
#include <pthread.h>

#define NSV__LIKELY(x) __builtin_expect(!!(x), 1)
#define NSV__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define NSV__ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Per-server allocator (realloc semantics; size 0 frees). */
typedef struct nsv__alloc {
    nsv_alloc_fn fn;
    void *ud;
} nsv__alloc;

void *nsv__malloc(const nsv__alloc *a, size_t n);
void *nsv__calloc(const nsv__alloc *a, size_t n);
void *nsv__realloc(const nsv__alloc *a, void *p, size_t n);
void nsv__free(const nsv__alloc *a, void *p);
extern const nsv__alloc nsv__default_alloc;

/* Error details (core/detail.c): set the calling thread's detail for server
 * s (NULL: the server-less slot) and return err. */
int nsv__set_detail(nsv_server *s, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Logging (util/log.c). */
void nsv__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ASCII helpers. */
static inline int nsv__lower(int c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }
int nsv__strncaseeq(const char *a, const char *b, size_t n);
/* Value of a hex digit (either case), or -1. */
static inline int nsv__hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (unsigned char)nsv__lower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}
/* RFC 9110 token character: letters, digits and !#$%&'*+-.^_`|~ (one bit
 * per ASCII byte: 0-63 in the first word, 64-127 in the second). */
static inline int nsv__is_tchar(unsigned char c)
{
    static const uint64_t tchar[2] = {UINT64_C(0x03ff6cfa00000000), UINT64_C(0x57ffffffc7fffffe)};
    return c < 128 && (tchar[c >> 6] >> (c & 63) & 1);
}

/* Threads of the library (util/thread.c): every signal blocked. */
int nsv__thread_start(pthread_t *t, const pthread_attr_t *at, void *(*fn)(void *), void *arg);

#endif
