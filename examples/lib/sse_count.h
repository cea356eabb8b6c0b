/* sse_count.h - echo-server's GET /sse?n=N: a server-sent event stream of N
 * events whose data are "0" ... "N-1", then the end of the reply. N is 0 ..
 * SSE_COUNT_MAX; a missing or malformed n gets 400.
 *
 * Events are sent until the stream is done or nsv_sse_send answers
 * NSV_EAGAIN (NSV_OPT_MAX_OUTPUT is queued); the stream then waits for the
 * TCP_WRITABLE event with code 1 (output drained to the low water mark) and
 * goes on from the next event, so a slow reader neither loses events nor
 * blocks the server, and the queue stays under the cap. A client that
 * leaves ends it (HANGUP, CLOSE). */
#ifndef EXAMPLES_SSE_COUNT_H
#define EXAMPLES_SSE_COUNT_H

#include <nanosrv.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SSE_COUNT_MAX 10000000 /* ten million events: about 150 MB of stream */
#define SSE_SLOTS 4096

typedef struct sse_count {
    uint64_t conn;
    uint64_t next, n;
} sse_count;

static sse_count *sse_streams[SSE_SLOTS];
static pthread_mutex_t sse_lock = PTHREAD_MUTEX_INITIALIZER; /* handlers may run on workers */
/* Streams parked in the table: every CLOSE asks, and with none parked (the
 * usual case: an HTTP/2 stream ends with each request) no slot is probed. */
static _Atomic int sse_parked;

static sse_count **sse_slot(uint64_t conn, int for_new)
{
    for (uint64_t i = 0; i < SSE_SLOTS; i++) {
        sse_count **c = &sse_streams[(conn * 0x9E3779B97F4A7C15ull + i) % SSE_SLOTS];
        if (*c ? (*c)->conn == conn : for_new)
            return c;
    }
    return NULL;
}

/* Takes the stream of conn out of the table (NULL if it has none): only the
 * thread holding it sends on it. */
static sse_count *sse_take(uint64_t conn)
{
    if (!sse_parked)
        return NULL;
    pthread_mutex_lock(&sse_lock);
    sse_count **c = sse_slot(conn, 0);
    sse_count *st = c ? *c : NULL;
    if (c)
        *c = NULL, sse_parked--;
    pthread_mutex_unlock(&sse_lock);
    return st;
}

static int sse_park(sse_count *st)
{
    pthread_mutex_lock(&sse_lock);
    sse_count **c = sse_slot(st->conn, 1);
    if (c)
        *c = st, sse_parked++;
    pthread_mutex_unlock(&sse_lock);
    return c != NULL;
}

/* Sends until done (then ends the reply) or the output cap; parks the
 * stream to wait for TCP_WRITABLE in the second case. */
static void sse_pump(nsv_server *s, sse_count *st)
{
    while (st->next < st->n) {
        char d[24];
        int dl = snprintf(d, sizeof d, "%llu", (unsigned long long)st->next);
        int r = nsv_sse_send(s, st->conn, NULL, 0, NULL, 0, d, (size_t)dl, -1);
        if (r == NSV_EAGAIN) {
            if (!sse_park(st)) {
                nsv_close(s, st->conn);
                free(st);
            }
            return;
        }
        if (r != 0) { /* the connection is gone */
            free(st);
            return;
        }
        st->next++;
    }
    nsv_reply_end(s, st->conn);
    free(st);
}

/* The value of the first n in the query (decoded by nsv_form_parse, as a
 * browser's URLSearchParams would): 0 .. SSE_COUNT_MAX, or -1. */
static int64_t sse_query_n(const char *q, size_t len)
{
    uint32_t pairs[4 * 16], np = 0;
    char dst[512];
    int64_t need = nsv_form_parse(q, len, pairs, 16, dst, sizeof dst, &np);
    if (need < 0 || need > (int64_t)sizeof dst || np > 16)
        return -1; /* a query this long is not one the route answers */
    for (uint32_t p = 0; p < np; p++) {
        const char *k = dst + pairs[4 * p], *v = dst + pairs[4 * p + 2];
        uint32_t vl = pairs[4 * p + 3];
        if (pairs[4 * p + 1] != 1 || *k != 'n')
            continue;
        if (vl == 0 || vl > 9)
            return -1;
        int64_t n = 0;
        for (uint32_t i = 0; i < vl; i++) {
            if (v[i] < '0' || v[i] > '9')
                return -1;
            n = n * 10 + (v[i] - '0');
        }
        return n <= SSE_COUNT_MAX ? n : -1;
    }
    return -1;
}

static void sse_begin(nsv_server *s, const nsv_event *ev, const char *a)
{
    int64_t n = sse_query_n(a + ev->query_off, ev->query_len);
    if (n < 0) {
        char why[96];
        int wl = snprintf(why, sizeof why, "n must be a number of events, 0..%d\n", SSE_COUNT_MAX);
        nsv_reply(s, ev->conn, 400, "Content-Type: text/plain\r\n", 26, why, (size_t)wl);
        return;
    }
    if (nsv_sse_start(s, ev->conn, NULL, 0) != 0)
        return;
    sse_count *st = calloc(1, sizeof *st);
    if (!st) {
        nsv_close(s, ev->conn);
        return;
    }
    st->conn = ev->conn;
    st->n = (uint64_t)n;
    sse_pump(s, st);
}

/* TCP_WRITABLE code 1: the queue drained; go on. */
static void sse_writable(nsv_server *s, const nsv_event *ev)
{
    if (ev->code != 1)
        return;
    sse_count *st = sse_take(ev->conn);
    if (st)
        sse_pump(s, st);
}

static void sse_gone(nsv_server *s, const nsv_event *ev)
{
    sse_count *st = sse_take(ev->conn);
    if (!st)
        return;
    if (ev->type == NSV_EV_HANGUP)
        nsv_close(s, ev->conn);
    free(st);
}

#endif
