/* detail.c - the text behind nsv_last_error_detail: per server and per
 * calling thread.
 *
 * Each thread keeps a small table of details, one per server it touched
 * (least recently used entry reused), plus one slot for calls that have no
 * server (utilities, NULL server). A server is known by its address and by
 * a serial drawn at creation, so a new server at a freed server's address
 * never sees the old text. Nothing here allocates. */
#include "../loop/loop.h" /* the server record (its detail serial) */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define SLOTS 16
#define TEXT 256

typedef struct slot {
    const nsv_server *srv;
    uint64_t serial; /* 0 = empty */
    uint64_t used;   /* LRU clock */
    uint64_t seq;    /* value of `seq` when the text was written */
    char text[TEXT];
} slot;

static _Thread_local slot slots[SLOTS];
static _Thread_local slot none;   /* calls without a server */
static _Thread_local uint64_t seq; /* details written by this thread */
static _Thread_local uint64_t clock_;
static atomic_uint_least64_t next_serial;

uint64_t nsv__detail_serial(void) { return atomic_fetch_add(&next_serial, 1) + 1; }

/* The slot of s on this thread; with create, the least recently used one
 * is taken over when s has none. NULL s is the server-less slot. */
static slot *find(const nsv_server *s, uint64_t serial, int create)
{
    if (!s)
        return &none;
    slot *lru = &slots[0];
    for (int i = 0; i < SLOTS; i++) {
        slot *e = &slots[i];
        if (e->serial == serial && e->srv == s) {
            e->used = ++clock_;
            return e;
        }
        if (e->used < lru->used)
            lru = e;
    }
    if (!create)
        return NULL;
    lru->srv = s;
    lru->serial = serial;
    lru->used = ++clock_;
    lru->seq = 0;
    lru->text[0] = 0;
    return lru;
}

static void vset(const nsv_server *s, uint64_t serial, int err, const char *fmt, va_list ap)
{
    slot *e = find(s, serial, 1);
    vsnprintf(e->text, sizeof e->text, fmt, ap);
    e->seq = ++seq;
    nsv__log(NSV_LOG_DEBUG, "%s: %s", nsv_errname(err), e->text);
}

int nsv__set_detail(nsv_server *s, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(s, s ? s->detail_serial : 0, err, fmt, ap);
    va_end(ap);
    return err;
}

/* Fixed text, no printf and no logging: safe in a signal handler. */
int nsv__set_detail_text(nsv_server *s, int err, const char *text)
{
    slot *e = find(s, s ? s->detail_serial : 0, 1);
    size_t i = 0;
    for (; text[i] && i < TEXT - 1; i++)
        e->text[i] = text[i];
    e->text[i] = 0;
    e->seq = ++seq;
    return err;
}

uint64_t nsv__detail_mark(void) { return seq; }

int nsv__detail_since(nsv_server *s, uint64_t mark)
{
    const slot *e = find(s, s ? s->detail_serial : 0, 0);
    return e && e->seq > mark;
}

int nsv__set_detail_since(nsv_server *s, uint64_t mark, int err, const char *fmt, ...)
{
    if (nsv__detail_since(s, mark))
        return err;
    va_list ap;
    va_start(ap, fmt);
    vset(s, s ? s->detail_serial : 0, err, fmt, ap);
    va_end(ap);
    return err;
}

const char *nsv_last_error_detail(nsv_server *s)
{
    const slot *e = find(s, s ? s->detail_serial : 0, 0);
    return e ? e->text : "";
}
