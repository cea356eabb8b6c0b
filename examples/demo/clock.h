/* clock.h - the demo's GET /clock: a server-sent event stream that carries
 * the server's time (UTC) once a second to every open stream.
 * Pacing: a stream whose client reads slowly skips ticks from the
 * TCP_WRITABLE event that says its output is backing up (code 0) until the
 * one that says it drained (code 1); a tick refused with NSV_EAGAIN is
 * dropped too. Nothing is lost that matters: the next tick carries the
 * time anyway. A stream leaves the list on CLOSE, and on HANGUP (the
 * client went away), where its response is ended. Single loop only (the
 * list has no lock). */
#ifndef DEMO_CLOCK_H
#define DEMO_CLOCK_H

#include <nanosrv.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define CLOCK_MAX 1024

static struct clock_stream {
    uint64_t conn;
    time_t sent; /* the second it last got */
    int paused;
} clocks[CLOCK_MAX];
static int nclocks;

/* The same clock as clock_wait_ms (time() may lag it by a few ms, and a
 * tick would then wait a whole second more). */
static time_t clock_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec;
}

static struct clock_stream *clock_find(uint64_t conn)
{
    for (int i = 0; i < nclocks; i++)
        if (clocks[i].conn == conn)
            return &clocks[i];
    return NULL;
}

static void clock_remove(uint64_t conn)
{
    struct clock_stream *c = clock_find(conn);
    if (c)
        *c = clocks[--nclocks];
}

static int clock_send(nsv_server *s, uint64_t conn, time_t now)
{
    char data[32];
    struct tm tm;
    gmtime_r(&now, &tm);
    size_t n = strftime(data, sizeof data, "%Y-%m-%d %H:%M:%S UTC", &tm);
    return nsv_sse_send(s, conn, NULL, 0, NULL, 0, data, n, -1);
}

/* The request for GET /clock: start the stream and send the time at once,
 * so the page need not wait for the next tick. */
static void clock_open(nsv_server *s, const nsv_event *ev)
{
    if (nclocks == CLOCK_MAX) {
        nsv_reply(s, ev->conn, 503, "Content-Type: text/plain\r\n", 26, "too many clocks\n", 16);
        return;
    }
    if (nsv_sse_start(s, ev->conn, NULL, 0) < 0)
        return;
    time_t now = clock_now();
    if ((ev->flags & NSV_EVF_HEAD) || clock_send(s, ev->conn, now) < 0) {
        nsv_reply_end(s, ev->conn); /* HEAD gets the headers only */
        return;
    }
    clocks[nclocks++] = (struct clock_stream){ev->conn, now, 0};
}

/* TCP_WRITABLE: code 0 pauses a stream, code 1 resumes it. */
static void clock_writable(uint64_t conn, int code)
{
    struct clock_stream *c = clock_find(conn);
    if (c)
        c->paused = code == 0;
}

/* HANGUP: the client left; end its stream (a CLOSE follows). */
static void clock_hangup(nsv_server *s, uint64_t conn)
{
    if (!clock_find(conn))
        return;
    clock_remove(conn);
    nsv_reply_end(s, conn);
}

/* Called after every poll: each stream gets a tick once its second is past. */
static void clock_tick(nsv_server *s)
{
    time_t now = clock_now();
    for (int i = 0; i < nclocks;) {
        struct clock_stream *c = &clocks[i];
        int r = c->paused || c->sent == now ? 0 : clock_send(s, c->conn, now);
        c->sent = now; /* a paused or refused stream skips this second */
        if (r < 0 && r != NSV_EAGAIN)
            *c = clocks[--nclocks]; /* gone (its CLOSE may still be queued) */
        else
            i++;
    }
}

/* The poll timeout: milliseconds to the next second (at least 1, so the
 * loop never spins just before it). */
static int clock_wait_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return 1000 - (int)(ts.tv_nsec / 1000000);
}

#endif
