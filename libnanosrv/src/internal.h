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
/* Monotonic microseconds, never 0 (0 means "no stamp" where one is kept). */
int64_t nsv__mono_us(void);
/* IMF-fixdate of Unix time t (0 .. end of 9999) into o[29], locale-free (util/clock.c). */
void nsv__imf_fixdate(int64_t t, char *o);
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

/* Name/value pair parsers (util/form.c): the argument checks and the passes
 * of nsv_form_parse and nsv_cookie_parse (fn names the call, src_name its
 * input). scan walks s[0, len), returns the output bytes and sets *count to
 * the pairs; given pairs, it also stores them and writes their bytes at dst
 * (dst is NULL when there are none). A scan's output never exceeds len, and
 * its pairs never exceed the pieces between sep bytes nor (len + 1) / 2. */
typedef size_t nsv__pairs_scan(const unsigned char *s, size_t len, uint32_t *pairs, char *dst, size_t *count);
int64_t nsv__pairs_parse(const char *fn, const char *src_name, nsv__pairs_scan *scan, unsigned char sep,
                         const char *src, size_t len, uint32_t *pairs, size_t max_pairs, char *dst, size_t cap,
                         uint32_t *npairs);

/* Static files (util/static_path.c, util/mime.c): the URL path below a
 * mount as a relative file path (rules at the definition), and media types
 * by extension (index -1: application/octet-stream). */
int64_t nsv__static_path(const char *path, size_t n, int dotfiles, char *out, size_t cap);
int nsv__mime_index(const char *name, size_t len);
const char *nsv__mime_by_index(int i);

/* Threads of the library (util/thread.c): every signal blocked. */
int nsv__thread_start(pthread_t *t, const pthread_attr_t *at, void *(*fn)(void *), void *arg);

#endif
