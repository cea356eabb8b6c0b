/* tap.h - tiny TAP producer for C tests: ok(), is_int(), is_mem(), diag(), done_testing(). */
#ifndef NSV_TAP_H
#define NSV_TAP_H
#include <stdio.h>
#include <string.h>
#include <stdarg.h>
#include <stdlib.h>

static int tap_n, tap_fail;

static int tap_ok(int cond, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    tap_n++;
    if (!cond)
        tap_fail++;
    char name[512];
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    printf("%sok %d - %s\n", cond ? "" : "not ", tap_n, name);
    if (!cond) {
        printf("#   failed at %s:%d\n", file, line);
        /* stderr too: prove shows it without -v, so a failure in CI says what failed */
        fprintf(stderr, "not ok %d - %s\n#   failed at %s:%d\n", tap_n, name, file, line);
    }
    fflush(stdout);
    return cond;
}

/* A failed check's details, on stdout (TAP) and stderr (see tap_ok). */
static inline void tap_fail_diag(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("#   %s\n", msg);
    fprintf(stderr, "#   %s\n", msg);
}

#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define is_int(got, want, ...)                                                             \
    do {                                                                                   \
        long long g_ = (long long)(got), w_ = (long long)(want);                           \
        if (!tap_ok(g_ == w_, __FILE__, __LINE__, __VA_ARGS__))                            \
            tap_fail_diag("got %lld, want %lld", g_, w_);                                   \
    } while (0)
#define is_mem(got, glen, want, ...)                                                       \
    do {                                                                                   \
        size_t gl_ = (size_t)(glen), wl_ = strlen(want);                                   \
        int c_ = gl_ == wl_ && memcmp((got), (want), wl_) == 0;                            \
        if (!tap_ok(c_, __FILE__, __LINE__, __VA_ARGS__))                                  \
            tap_fail_diag("got '%.*s', want '%s'", (int)gl_, (const char *)(got), (want));  \
    } while (0)
#define diag(...) (printf("# "), printf(__VA_ARGS__), printf("\n"))

static inline int done_testing(void)
{
    printf("1..%d\n", tap_n);
    return tap_fail ? 1 : 0;
}
#endif
