/* proxy_xchg.h - the exchanges of build/http-proxy (examples/http_proxy.c):
 * one per client request (or WebSocket pair), found from either of its ids
 * through a per-thread table; how they end and are freed; the proxy's own
 * short answers. */
#ifndef EXAMPLES_PROXY_XCHG_H
#define EXAMPLES_PROXY_XCHG_H

#include <nanosrv.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy_headers.h"
#include "proxy_map.h"

/* Response side of an exchange. */
enum { RESP_WAIT, RESP_HEAD, RESP_STREAM, RESP_DONE };

/* A WebSocket message waiting for room on the other side. */
typedef struct wsmsg {
    struct wsmsg *next;
    int op, code; /* op 8: a close to relay after the messages before it */
    size_t len;
    char data[];
} wsmsg;

typedef struct xchg {
    uint64_t down, up; /* client connection; upstream request or WebSocket */
    int status;        /* stored response head (RESP_HEAD) */
    int64_t resp_cl, req_cl;
    uint8_t ws, head, req_started, req_blocked, req_eof, resp, up_paused, up_done;
    uint8_t pass_host; /* the header block holds the client's Host (NSV_HTTP_HOST_HEADER) */
    uint8_t ws_open, down_open, up_open, closed_to_up, closed_to_down, src_paused;
    uint8_t ws_marks; /* both WebSockets have water marks: TCP_WRITABLE says when to retry */
    uint8_t req_open;  /* the client's body is still coming */
    uint8_t end_wait;  /* the response is complete but waits for the body's end */
    pbuf start;   /* a streamed request not started yet: method \0 url \0 headers */
    size_t start_url, start_hdr;
    pbuf rhead;   /* the response head kept until the first body piece */
    pbuf preq;    /* request body bytes waiting for room upstream */
    pbuf presp;   /* response body bytes waiting for room downstream */
    uint8_t presp_eof;
    wsmsg *q[2], **qt[2]; /* [0] to the client, [1] to the upstream */
    size_t qbytes[2];
    int64_t timer;
    int dead;            /* freed once the outermost event handler returns */
    struct xchg *next_dead;
} xchg;

/* State of the thread that handles events (each worker, or the main
 * thread): the exchange table and scratch buffers, on a list so that main
 * frees them all at exit. In callback mode a call made from a handler may
 * run the handler again (nsv_abort delivers the CLOSE at once): exchanges
 * are only marked dead inside, and freed when the outermost handler
 * returns. */
typedef struct tstate {
    pmap xm;
    pbuf hb, ub; /* header block and URL being built */
    xchg *graveyard;
    int depth;
    struct tstate *next;
} tstate;
static _Thread_local tstate *ts;
static tstate *all_ts;
static pthread_mutex_t ts_lock = PTHREAD_MUTEX_INITIALIZER;
static void xfree(nsv_server *s, xchg *x)
{
    if (x->dead)
        return;
    x->dead = 1;
    if (pm_get(&ts->xm, x->down) == x)
        pm_del(&ts->xm, x->down);
    if (x->up && pm_get(&ts->xm, x->up) == x)
        pm_del(&ts->xm, x->up);
    if (x->timer > 0)
        nsv_timer_cancel(s, x->timer);
    x->next_dead = ts->graveyard;
    ts->graveyard = x;
}

static void bury(void)
{
    while (ts->graveyard) {
        xchg *x = ts->graveyard;
        ts->graveyard = x->next_dead;
        for (int d = 0; d < 2; d++)
            while (x->q[d]) {
                wsmsg *m = x->q[d];
                x->q[d] = m->next;
                free(m);
            }
        free(x->start.p);
        free(x->rhead.p);
        free(x->preq.p);
        free(x->presp.p);
        free(x);
    }
}

/* A short plain-text answer made by the proxy itself. */
static void answer(nsv_server *s, uint64_t conn, int status, const char *text)
{
    static const char h[] = "Content-Type: text/plain; charset=utf-8\r\nCache-Control: no-store\r\n";
    nsv_reply(s, conn, status, h, sizeof h - 1, text, strlen(text));
}

static void answer_error(nsv_server *s, uint64_t conn, int code, const char *what)
{
    char t[200];
    int st = code == NSV_ETIMEDOUT ? 504 : 502;
    snprintf(t, sizeof t, "%s: %s (%s)\n", st == 504 ? "504 Gateway Timeout" : "502 Bad Gateway", what,
             nsv_errname(code));
    answer(s, conn, st, t);
}

/* Reading of the client's body resumes before a complete answer: that
 * answer ends the body (the library reads and drops the rest), and a pause
 * left on would hold the rest unread until the close turns it into a reset
 * that can destroy the answer on its way. */
static void unblock(nsv_server *s, xchg *x)
{
    if (x->req_blocked) {
        nsv_pause_read(s, x->down, 0);
        x->req_blocked = 0;
    }
}

/* The exchange's response ended (or failed): the upstream side is let go,
 * the client's connection reads again, the exchange is freed. */
static void finish(nsv_server *s, xchg *x)
{
    if (x->dead)
        return;
    if (!x->up_done)
        nsv_http_cancel(s, x->up);
    unblock(s, x);
    xfree(s, x);
}

#endif
