/* proxy_ws.h - WebSocket pass-through of build/http-proxy (docs/PROXY.md
 * "WebSocket pass-through"): the upstream side is opened with
 * nsv_ws_connect, the client is upgraded once it opens, then messages,
 * pings and closes are relayed both ways, a message that meets a full
 * connection waiting in the exchange while its sender is not read, until
 * the full side's TCP_WRITABLE (a timer if the marks could not be set). */
#ifndef EXAMPLES_PROXY_WS_H
#define EXAMPLES_PROXY_WS_H

#include "proxy_xchg.h"

#define WS_QUEUE_MAX (64u << 20) /* per direction: a sender that cannot be paused */
#define WS_HIGH (1u << 20)       /* water marks of both sides */
#define WS_LOW (256u << 10)


static void ws_start(nsv_server *s, xchg *x, const nsv_event *e, const char *a)
{
    uint32_t kl = 0, vl = 0;
    int64_t ko = nsv_ev_header(e, a, "Sec-WebSocket-Key", 17, &kl);
    int64_t vo = nsv_ev_header(e, a, "Sec-WebSocket-Version", 21, &vl);
    if (ko < 0 || kl != 24 || vo < 0 || vl != 2 || memcmp(a + vo, "13", 2) || !ph_ieq(a + e->method_off, e->method_len, "get")) {
        nsv_ws_upgrade(s, x->down, NULL, 0); /* answers 400 or 426 as the handshake deserves */
        xfree(s, x);
        return;
    }
    /* every offered subprotocol, in order */
    char protos[1024];
    size_t pl = 0, pos = e->headers_off, end = (size_t)e->headers_off + e->headers_len;
    ph_line ln;
    while (ph_next(a, end, &pos, &ln))
        if (ph_ieq(ln.name, ln.nlen, "sec-websocket-protocol") && ln.vlen && pl + ln.vlen + 2 < sizeof protos) {
            if (pl)
                memcpy(protos + pl, ", ", 2), pl += 2;
            memcpy(protos + pl, ln.value, ln.vlen);
            pl += ln.vlen;
        }
    x->ws = 1;
    x->resp = RESP_WAIT;
    int64_t id = nsv_ws_connect(s, ts->ub.p, ts->ub.len, ts->hb.p, ts->hb.len, pl ? protos : NULL, pl, 0);
    if (id < 0) {
        answer_error(s, x->down, (int)id, id == NSV_ENOTSUP ? "WebSocket client not available" : "WebSocket upstream");
        xfree(s, x);
        return;
    }
    x->up = (uint64_t)id;
    x->up_open = 1;
    if (pm_put(&ts->xm, x->up, x)) {
        nsv_close(s, x->up);
        answer(s, x->down, 503, "503 Service Unavailable: out of memory\n");
        x->up = 0;
        xfree(s, x);
    }
}

static void ws_on_open(nsv_server *s, xchg *x, const nsv_event *e, const char *a)
{
    uint32_t vl;
    int64_t vo = nsv_ev_header(e, a, "Sec-WebSocket-Protocol", 22, &vl);
    char h[300];
    int hl = vo >= 0 && vl < 200 ? snprintf(h, sizeof h, "Sec-WebSocket-Protocol: %.*s\r\n", (int)vl, a + vo) : 0;
    if (nsv_ws_upgrade(s, x->down, h, (size_t)hl) < 0) {
        nsv_close(s, x->up);
        x->closed_to_up = 1;
        return;
    }
    x->ws_open = 1;
    x->resp = RESP_DONE;
    x->ws_marks = nsv_set_water_marks(s, x->up, WS_HIGH, WS_LOW) == NSV_OK &&
                  nsv_set_water_marks(s, x->down, WS_HIGH, WS_LOW) == NSV_OK;
}

static void ws_arm(nsv_server *s, xchg *x)
{
    if (!x->ws_marks && x->timer <= 0)
        x->timer = nsv_timer_add(s, 2, 0, x->down);
}

static int ws_close_code(int code)
{
    if ((code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999))
        return code;
    return 1000; /* 1005 (none given) and 1006 (no close frame) cannot be sent */
}

/* Send one message (or a close) to side d: 0 the client, 1 the upstream. */
static int ws_out(nsv_server *s, xchg *x, int d, int op, int code, const char *p, size_t n)
{
    uint64_t to = d ? x->up : x->down;
    if (op == 8) {
        if (d ? x->closed_to_up : x->closed_to_down)
            return 0;
        int r = nsv_ws_close(s, to, ws_close_code(code), p, n > 123 ? 0 : n);
        if (d)
            x->closed_to_up = 1;
        else
            x->closed_to_down = 1;
        return r == NSV_EAGAIN ? NSV_EAGAIN : 0;
    }
    int r = nsv_ws_send(s, to, op, p, n);
    return r == NSV_EAGAIN ? NSV_EAGAIN : 0;
}

static void ws_queue(nsv_server *s, xchg *x, int d, int op, int code, const char *p, size_t n)
{
    if (x->qbytes[d] + n > WS_QUEUE_MAX) { /* a side that cannot be paused and never drains */
        nsv_ws_close(s, x->down, 1013, "proxy queue full", 16);
        nsv_ws_close(s, x->up, 1013, "proxy queue full", 16);
        x->closed_to_down = x->closed_to_up = 1;
        return;
    }
    wsmsg *m = malloc(sizeof *m + n);
    if (!m)
        return;
    m->next = NULL;
    m->op = op;
    m->code = code;
    m->len = n;
    memcpy(m->data, p, n);
    if (!x->q[d])
        x->qt[d] = &x->q[d];
    *x->qt[d] = m;
    x->qt[d] = &m->next;
    x->qbytes[d] += n;
    /* Stop the sender while its messages wait (nsv_pause_read works on
     * both sides' WebSockets). */
    uint64_t from = d ? x->down : x->up;
    if (!x->src_paused && nsv_pause_read(s, from, 1) == 0)
        x->src_paused = (uint8_t)(d ? 2 : 1);
    ws_arm(s, x);
}

static void ws_relay(nsv_server *s, xchg *x, int d, int op, int code, const char *p, size_t n)
{
    if (x->q[d] || ws_out(s, x, d, op, code, p, n) == NSV_EAGAIN)
        ws_queue(s, x, d, op, code, p, n);
}

static void ws_flush(nsv_server *s, xchg *x)
{
    x->timer = 0;
    for (int d = 0; d < 2; d++) {
        while (x->q[d]) {
            wsmsg *m = x->q[d];
            if (ws_out(s, x, d, m->op, m->code, m->data, m->len) == NSV_EAGAIN) {
                ws_arm(s, x);
                break;
            }
            x->q[d] = m->next;
            x->qbytes[d] -= m->len;
            free(m);
        }
        if (!x->q[d] && x->src_paused == (d ? 2 : 1)) {
            nsv_pause_read(s, d ? x->down : x->up, 0);
            x->src_paused = 0;
        }
    }
}

static void ws_event(nsv_server *s, xchg *x, const nsv_event *e, const char *a)
{
    int from_up = e->conn == x->up;
    int d = from_up ? 0 : 1; /* where it goes */
    const char *p = a + e->body_off;
    switch (e->type) {
    case NSV_EV_WS_OPEN:
        if (from_up)
            ws_on_open(s, x, e, a);
        break;
    case NSV_EV_WS_MESSAGE:
        if (x->ws_open)
            ws_relay(s, x, d, e->code, 0, p, e->body_len);
        break;
    case NSV_EV_TCP_WRITABLE: /* code 1: a full side drained to its low mark */
        if (e->code == 1)
            ws_flush(s, x);
        break;
    case NSV_EV_WS_PING: /* each hop answers pings itself; the ping goes on too */
        if (x->ws_open && !x->q[d])
            ws_out(s, x, d, NSV_WS_PING, 0, p, e->body_len);
        break;
    case NSV_EV_WS_CLOSE:
        if (x->ws_open)
            ws_relay(s, x, d, 8, e->code, p, e->body_len);
        break;
    case NSV_EV_ERROR:
        if (from_up && !x->ws_open && x->down_open && x->resp == RESP_WAIT) {
            char what[120];
            snprintf(what, sizeof what, "%.*s", (int)(e->body_len < 100 ? e->body_len : 100), p);
            answer_error(s, x->down, e->code, what);
            x->resp = RESP_DONE;
        }
        break;
    case NSV_EV_CLOSE:
        if (from_up) {
            x->up_open = 0;
            pm_del(&ts->xm, x->up);
            if (x->ws_open && x->down_open && !x->closed_to_down && !x->q[0]) {
                nsv_ws_close(s, x->down, 1014, "upstream closed", 15);
                x->closed_to_down = 1;
            }
            if (!x->ws_open && x->down_open && x->resp == RESP_WAIT) {
                answer(s, x->down, 502, "502 Bad Gateway: the WebSocket upstream closed\n");
                x->resp = RESP_DONE;
            }
        } else {
            x->down_open = 0;
            pm_del(&ts->xm, x->down);
            if (x->up_open && !x->closed_to_up) {
                nsv_ws_close(s, x->up, 1001, NULL, 0);
                x->closed_to_up = 1;
            }
        }
        if (!x->up_open && !x->down_open)
            xfree(s, x);
        break;
    }
}

#endif
