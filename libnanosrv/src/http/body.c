/* body.c - request bodies delivered in pieces (NSV_ROUTE_STREAM_BODY,
 * NSV_OPT_STREAM_BODY): the head goes to the host as soon as it is parsed,
 * then each read of body bytes becomes a BODY event (de-chunked in place),
 * the last with NSV_EVF_EOF. Nothing of the body is buffered beyond one
 * read, the host can pause reading (nsv_pause_read), and the limits hold:
 * max_body (413 while de-chunking) and the request deadline (408). */
#include "http.h"
#include "answer.h"
#include <string.h>

#define H2_FLAG(c) ((c)->h2s ? NSV_EVF_HTTP2 : 0u) /* BODY events of an HTTP/2 stream say so */

/* The body broke a rule mid-stream: the host hears why, the client gets
 * the status if no response has started, and the connection closes. */
static void body_fail(nsv__loop *l, nsv__conn *c, int err, int status, const char *why, size_t wlen)
{
    c->bstream = 0;
    nsv__evq_emit(l, c, NSV_EV_ERROR, err, 0, why, wlen);
    if (!c->resp_started)
        nsv__error_reply(l, c, status);
    else
        nsv__conn_close(l, c);
}

static void body_done(nsv__loop *l, nsv__conn *c)
{
    c->bstream = 0;
    c->continue_wait = 0;
    if (c->req_start_us > 0 && c->state == NSV__C_PENDING)
        c->req_start_us = nsv__mono_us(); /* a streamed body's latency runs from its end */
    if (c->paused) { /* the next request must be read */
        c->paused = 0;
        nsv__conn_set_events(l, c, 1, c->writing);
    }
    if (c->state == NSV__C_PENDING || c->state == NSV__C_STREAM)
        c->deadline = 0; /* the request is whole: the host works at its own pace */
}

size_t nsv__body_feed(nsv__loop *l, nsv__conn *c, char *data, size_t n)
{
    if (!c->bstream)
        return 0;
    if (c->bs_left >= 0) {
        size_t take = (uint64_t)c->bs_left < n ? (size_t)c->bs_left : n;
        c->bs_left -= (int64_t)take;
        c->bs_total += take;
        nsv__answer_bytes(l, c, take, 0);
        if (take || c->bs_left == 0)
            nsv__evq_emit(l, c, NSV_EV_BODY, 0, (c->bs_left == 0 ? NSV_EVF_EOF : 0) | H2_FLAG(c), data, take);
        if (c->bs_left == 0)
            body_done(l, c);
        return take;
    }
    size_t cons = 0, prod = 0;
    int r = nsv__chunked_decode(&c->chunk, data, data, n, &cons, &prod);
    c->bs_total += prod;
    nsv__answer_bytes(l, c, cons, 0);
    if ((int64_t)c->bs_total > l->srv->max_body) {
        static const char msg[] = "request body: chunked body passed max_body";
        nsv__answer_refused(l, 413);
        body_fail(l, c, NSV_ETOOBIG, 413, msg, sizeof msg - 1);
        return n;
    }
    if (r < 0) {
        static const char msg[] = "request body: malformed chunked coding";
        nsv__answer_refused(l, 400);
        body_fail(l, c, NSV_EPARSE, 400, msg, sizeof msg - 1);
        return n;
    }
    if (prod || r == 1)
        nsv__evq_emit(l, c, NSV_EV_BODY, 0, (r == 1 ? NSV_EVF_EOF : 0) | H2_FLAG(c), data, prod);
    if (r == 1)
        body_done(l, c);
    return cons;
}

void nsv__body_start(nsv__loop *l, nsv__conn *c, int64_t content_length, int expect_continue)
{
    c->bstream = 1;
    c->bs_left = content_length; /* -1: chunked */
    c->bs_total = 0;
    memset(&c->chunk, 0, sizeof c->chunk);
    if (expect_continue && l->srv->expect_manual) { /* nsv_continue sends it */
        c->continue_wait = 3;
    } else if (expect_continue && l->host_turns) { /* the host's next poll sends NSV__OP_CONTINUE */
        c->continue_wait = 2;
    } else if (expect_continue) { /* answered at the next turn, unless the host answers first */
        c->continue_wait = 1;
        nsv__loop_defer(l, c);
    }
}

/* The client closed its side in the middle of the body. */
void nsv__body_aborted(nsv__loop *l, nsv__conn *c)
{
    static const char msg[] = "request body: the client closed before the end of the body";
    body_fail(l, c, NSV_ECLOSED, 400, msg, sizeof msg - 1);
}

/* The deadline passed while the body was still arriving. */
void nsv__body_timeout(nsv__loop *l, nsv__conn *c)
{
    static const char msg[] = "request body: not complete within request_timeout_ms";
    NSV__COUNT(l, NSV_M_TIMEOUT_REQUEST);
    body_fail(l, c, NSV_ETIMEDOUT, 408, msg, sizeof msg - 1);
}

int nsv__body_pause(nsv__loop *l, nsv__conn *c, int paused)
{
    if (!c->bstream)
        return nsv__set_detail(l->srv, NSV_ESTATE, "nsv_pause_read: connection 0x%llx has no request body "
                               "streaming (NSV_ROUTE_STREAM_BODY) and is not raw TCP",
                               (unsigned long long)nsv__conn_id(l, c));
    nsv__conn_pause(l, c, paused);
    return NSV_OK;
}
