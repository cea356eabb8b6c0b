/* ws_conn.c - WebSocket connections: handshake check and 101, the frame
 * receive path (reassembly, UTF-8, control frames, close handshake), sends,
 * broadcast and keepalive pings. Codec rules live in frame.c / utf8.c.
 * The same connections serve the client side (nsv_ws_connect, once its
 * handshake succeeded): frames go out masked with a fresh random key and
 * must come in unmasked. */
#include "ws.h"
#include "../loop/metrics.h"
#include "../http/http.h"
#include "../http/answer.h"
#include "../loop/io.h"
#include "deflate.h"
#include "frame.h"
#include "handshake.h"
#include "utf8.h"
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

typedef struct nsv__ws {
    nsv__ws_msg msg;
    nsv__ws_frame f;
    uint64_t fpos;       /* payload bytes of the current frame seen */
    uint8_t in_frame;    /* header parsed, payload still arriving */
    uint8_t close_sent;
    uint8_t close_recv;
    uint8_t ping_out;    /* keepalive ping unanswered */
    uint8_t close_told;  /* the host got its WS_CLOSE event */
    uint8_t client;      /* our end is the client: frames out masked, frames in unmasked */
    uint8_t rng_pos;     /* client: bytes of rng used (sizeof rng: refill) */
    uint16_t fail_code;  /* a violation was read: the close code sent at the next turn */
    uint8_t zmsg;        /* the message being read is compressed (RSV1 on its first frame) */
    uint8_t fail_wait;   /* pull mode: fail_code waits for the host's polls (fail_soon):
                            1 for the one that hands out the events before it, 2 the next */
    int64_t next_ping;
    nsv__pmd *pmd;       /* permessage-deflate agreed, else NULL */
    nsv__buf msgbuf;     /* message assembled from pieces or fragments */
    uint8_t rng[128];    /* client: random bytes for masking keys, from getrandom */
} nsv__ws;

/* An open WebSocket that is not closing. */
static int live(const nsv__conn *c) { return c->proto == &nsv__proto_ws && !c->closing; }

static const nsv__hdr *find(const nsv__request *r, const char *name, size_t n)
{
    for (size_t i = 0; i < r->num_headers; i++)
        if (r->headers[i].name_len == n && nsv__strncaseeq(r->headers[i].name, name, n))
            return &r->headers[i];
    return NULL;
}

/* What the request's permessage-deflate offers agreed to (nsv__pmd_pack),
 * kept in the connection until the upgrade. */
static nsv__pmd_cfg offered(const nsv__conn *c)
{
    nsv__pmd_cfg cfg;
    nsv__pmd_unpack(c->ws_pmd, &cfg);
    return cfg;
}

/* Sec-WebSocket-Extensions fields in order: the first acceptable offer of
 * permessage-deflate, negotiated against the widest window (the option's
 * limit applies at the upgrade, nsv__ws_accept). */
static void note_offers(nsv__conn *c, const nsv__request *r)
{
    nsv__pmd_cfg cfg = {0};
    for (size_t i = 0; i < r->num_headers; i++)
        if (r->headers[i].name_len == 24 && nsv__strncaseeq(r->headers[i].name, "sec-websocket-extensions", 24) &&
            nsv__pmd_negotiate(r->headers[i].value, r->headers[i].value_len, 15, &cfg))
            break;
    c->ws_pmd = nsv__pmd_pack(&cfg);
}

/* Decide at parse time whether the request is a valid RFC 6455 handshake,
 * since the head is not kept once its event is queued. */
void nsv__ws_check_request(nsv__conn *c, const nsv__request *r)
{
    c->ws_check = 0;
    c->ws_key_len = 0;
    if (!(r->flags & NSV__RF_UPGRADE_WS))
        return;
    const nsv__hdr *ver = find(r, "sec-websocket-version", 21);
    const nsv__hdr *key = find(r, "sec-websocket-key", 17);
    if (!ver || ver->value_len != 2 || memcmp(ver->value, "13", 2) != 0) {
        c->ws_check = 426;
        return;
    }
    int get = r->method_len == 3 && memcmp(r->method, "GET", 3) == 0;
    if (!get || r->minor_version != 1 || !(r->flags & NSV__RF_CONN_UPGRADE) || !key ||
        key->value_len > sizeof c->ws_key || nsv__ws_check_key(key->value, key->value_len) != 0) {
        c->ws_check = 400;
        return;
    }
    memcpy(c->ws_key, key->value, key->value_len);
    c->ws_key_len = (uint8_t)key->value_len;
    c->ws_check = 1;
    note_offers(c, r);
}

/* What the upgrade of c agrees to under the server's options: cfg.on 0
 * when permessage-deflate is off, not offered acceptably, or the host's own
 * header lines (extra) answer Sec-WebSocket-Extensions. */
static nsv__pmd_cfg agreed(const nsv_server *s, const nsv__conn *c, const char *extra, size_t elen)
{
    nsv__pmd_cfg cfg = offered(c);
    if (!s->ws_deflate || !nsv__pmd_available() || c->ws_check != 1) {
        cfg.on = 0;
        return cfg;
    }
    for (size_t i = 0; i + 24 <= elen; i++)
        if ((i == 0 || extra[i - 1] == '\n') && nsv__strncaseeq(extra + i, "sec-websocket-extensions", 24)) {
            cfg.on = 0;
            return cfg;
        }
    int max = (int)s->ws_deflate_window_bits;
    if (cfg.server_bits > max)
        cfg.server_bits = (uint8_t)max;
    if (cfg.cmwb && cfg.client_bits > max) /* ours to choose: never 8 (deflate.h) */
        cfg.client_bits = (uint8_t)(max < 9 ? 9 : max);
    return cfg;
}

int nsv__ws_deflate_agreed(const nsv_server *s, const nsv__conn *c)
{
    return agreed(s, c, NULL, 0).on;
}

/* A client frame: copied and masked with a key nobody can predict (RFC
 * 6455 5.3: the key of each frame is fresh, from a strong source), so it
 * never goes out from the caller's memory. */
static int queue_masked(nsv__loop *l, nsv__conn *c, int opcode, const char *data, size_t len)
{
    nsv__ws *ws = c->ws;
    uint8_t key[4], hdr[NSV__WS_MAX_HEADER];
    if (ws->rng_pos > sizeof ws->rng - 4) {
        if (nsv__ws_random(ws->rng, sizeof ws->rng) != 0)
            return nsv__set_detail(l->srv, NSV_ESYS, "ws send: no random bytes for a masking key");
        ws->rng_pos = 0;
    }
    memcpy(key, ws->rng + ws->rng_pos, 4);
    memset(ws->rng + ws->rng_pos, 0, 4);
    ws->rng_pos = (uint8_t)(ws->rng_pos + 4);
    size_t h = nsv__ws_write_masked_header(hdr, 1, opcode, len, key);
    int r = nsv__buf_reserve(l, &c->out, h + len);
    if (r)
        return r;
    uint8_t *p = (uint8_t *)c->out.p + c->out.len;
    memcpy(p, hdr, h);
    if (len) {
        memcpy(p + h, data, len);
        nsv__ws_unmask(p + h, len, key, 0); /* masking is the same XOR */
    }
    c->out.len += (uint32_t)(h + len);
    nsv__conn_mark_dirty(l, c);
    return NSV_OK;
}

static int queue_frame(nsv__loop *l, nsv__conn *c, int opcode, const char *data, size_t len)
{
    if (c->ws->client)
        return queue_masked(l, c, opcode, data, len);
    uint8_t hdr[NSV__WS_MAX_HEADER];
    size_t h = nsv__ws_write_header(hdr, 1, opcode, len);
    size_t sent = nsv__conn_send_direct(c, hdr, h, data, len); /* large frames, idle socket */
    nsv__metric_add(l, NSV_M_BYTES_OUT, sent); /* the direct send has no loop to count it */
    if (sent >= h) { /* header out: buffer the rest of the payload, if any */
        size_t done = sent - h;
        if (done == len)
            return NSV_OK;
        int r = nsv__buf_append(l, &c->out, data + done, len - done);
        if (r == 0)
            nsv__conn_mark_dirty(l, c);
        return r;
    }
    if (sent) { /* part of the header only: keep the rest of it, then the payload */
        memmove(hdr, hdr + sent, h - sent);
        h -= sent;
    }
    int r = nsv__buf_reserve(l, &c->out, h + len);
    if (r)
        return r;
    memcpy(c->out.p + c->out.len, hdr, h);
    if (len)
        memcpy(c->out.p + c->out.len + h, data, len);
    c->out.len += (uint32_t)(h + len);
    nsv__conn_mark_dirty(l, c);
    return NSV_OK;
}

int nsv__ws_accept(nsv__loop *l, nsv__conn *c, const char *extra, size_t elen)
{
    if (c->state != NSV__C_PENDING)
        return NSV_ESTATE;
    if (c->ws_check != 1) {
        if (c->ws_check == 426)
            nsv__set_detail(l->srv, NSV_EPARSE, "nsv_ws_upgrade: the request is no WebSocket handshake "
                            "of version 13 (Sec-WebSocket-Version); answered 426");
        else
            nsv__set_detail(l->srv, NSV_EPARSE, "nsv_ws_upgrade: the request is no valid WebSocket "
                            "handshake (it needs GET, HTTP/1.1, Connection: Upgrade and a 16-byte "
                            "base64 Sec-WebSocket-Key); answered 400");
        /* answered: other threads get NSV_ESTATE for a second answer */
        if (nsv__error_reply(l, c, c->ws_check ? c->ws_check : 400) == NSV_OK)
            nsv__ticket(l, c, NSV__T_IDLE);
        return NSV_EPARSE;
    }
    nsv__ws *ws = nsv__calloc(&l->srv->alloc, sizeof *ws);
    char accept[NSV__WS_ACCEPT_LEN];
    nsv__pmd_cfg pc = agreed(l->srv, c, extra, elen);
    if (ws && pc.on && !(ws->pmd = nsv__pmd_new(&l->srv->alloc, &pc)))
        pc.on = 0; /* no memory for it: uncompressed, which is always an answer */
    if (!ws || nsv__ws_accept_key(c->ws_key, c->ws_key_len, accept) != 0) {
        if (ws)
            nsv__pmd_free(ws->pmd);
        nsv__free(&l->srv->alloc, ws);
        nsv__error_reply(l, c, 503);
        return NSV_ENOMEM;
    }
    static const char head[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                               "Connection: Upgrade\r\nSec-WebSocket-Accept: ";
    char ext[NSV__PMD_ANSWER_MAX];
    size_t xlen = pc.on ? nsv__pmd_answer(&pc, ext) : 0;
    if (nsv__buf_reserve(l, &c->out, sizeof head + NSV__WS_ACCEPT_LEN + xlen + elen + 4) != 0) {
        nsv__pmd_free(ws->pmd);
        nsv__free(&l->srv->alloc, ws);
        nsv__error_reply(l, c, 503); /* answer (or close): never leave it pending */
        return NSV_ENOMEM;
    }
    char *p = c->out.p + c->out.len;
    memcpy(p, head, sizeof head - 1);
    p += sizeof head - 1;
    memcpy(p, accept, NSV__WS_ACCEPT_LEN);
    p += NSV__WS_ACCEPT_LEN;
    memcpy(p, "\r\n", 2);
    p += 2;
    memcpy(p, ext, xlen);
    p += xlen;
    if (elen) {
        memcpy(p, extra, elen);
        p += elen;
    }
    memcpy(p, "\r\n", 2);
    p += 2;
    nsv__answer_status(l, c, 101);
    nsv__answer_bytes(l, c, 0, (uint64_t)(p - (c->out.p + c->out.len)));
    nsv__answer_done(l, c);
    c->out.len = (uint32_t)(p - c->out.p);
    ws->msg.max = (uint64_t)l->srv->ws_max_message;
    if (l->srv->ws_ping_interval_ms)
        ws->next_ping = l->now + l->srv->ws_ping_interval_ms;
    c->ws = ws;
    c->proto = &nsv__proto_ws;
    c->state = NSV__C_NONE;
    c->deadline = 0;
    c->resp_started = 1;
    nsv__ticket(l, c, NSV__T_WS);
    nsv__conn_mark_dirty(l, c);
    if (!c->reading)
        nsv__conn_set_events(l, c, 1, c->writing);
    /* Frames sent right behind the handshake are read from the dirty list
     * (nsv__loop_flush_dirty): here c->in may still hold the request itself. */
    return NSV_OK;
}

static void emit(nsv__loop *l, nsv__conn *c, uint32_t type, int32_t code, const char *p, size_t n);

/* The connection is going away: a host that did not see a close frame
 * learns it as 1006 (abnormal closure); then the state goes. */
static void on_close(nsv__loop *l, nsv__conn *c)
{
    if (!c->ws)
        return;
    emit(l, c, NSV_EV_WS_CLOSE, 1006, NULL, 0);
    nsv__buf_release(l, &c->ws->msgbuf);
    nsv__pmd_free(c->ws->pmd);
    nsv__free(&l->srv->alloc, c->ws);
    c->ws = NULL;
}

static void emit(nsv__loop *l, nsv__conn *c, uint32_t type, int32_t code, const char *p, size_t n)
{
    if (type == NSV_EV_WS_CLOSE) {
        if (c->ws->close_told)
            return;
        c->ws->close_told = 1;
    }
    nsv__evq_emit(l, c, type, code, 0, p, n);
}

/* Fail the connection: close frame with `code`, tell the host, close after flush. */
static void fail(nsv__loop *l, nsv__conn *c, int code)
{
    nsv__ws *ws = c->ws;
    if (!ws->close_sent) {
        uint8_t b[2] = {(uint8_t)(code >> 8), (uint8_t)code};
        queue_frame(l, c, NSV__WS_CLOSE, (const char *)b, 2);
        ws->close_sent = 1;
    }
    emit(l, c, NSV_EV_WS_CLOSE, code, NULL, 0);
    c->closing = 1;
    c->deadline = l->now + l->srv->ws_close_timeout_ms;
    nsv__conn_mark_dirty(l, c);
}

/* Sharded pull mode: c's id joins the ones the host's next poll sends
 * NSV__OP_CONTINUE (core/shard.c, copy_out). 0, or -1 when that list is
 * full (the caller then waits a worker turn instead). */
static int note_turn(nsv__loop *l, nsv__conn *c)
{
    int r = -1;
    pthread_mutex_lock(&l->qlock);
    if (l->cont_n < sizeof l->cont_ids / sizeof l->cont_ids[0]) {
        l->cont_ids[l->cont_n++] = nsv__conn_id(l, c);
        r = 0;
    }
    pthread_mutex_unlock(&l->qlock);
    return r;
}

/* A violation in what was read. Events for the legal frames before it are
 * queued already, and the host must be able to answer them before the
 * connection fails (replies first, then the close frame): so reading stops
 * here, the rest is dropped, and fail() runs at the next turn: the loop
 * iteration after the host's callbacks ran, or its next nsv_poll (on_dirty).
 * When another thread polls a worker (host_turns) the worker's next
 * iteration comes at once, so the turn is counted in that thread's polls
 * instead (nsv__ws_turn). Returns -1 for process(). */
static long fail_soon(nsv__loop *l, nsv__conn *c, int code)
{
    nsv__ws *ws = c->ws;
    if (!ws->fail_code)
        ws->fail_code = (uint16_t)code;
    if (c->reading)
        nsv__conn_set_events(l, c, 0, c->writing);
    if (l->host_turns && !ws->fail_wait && note_turn(l, c) == 0)
        ws->fail_wait = 1;
    else if (!ws->fail_wait)
        nsv__loop_defer(l, c);
    return -1;
}

/* NSV__OP_CONTINUE of a WebSocket: a poll of the host. The first comes
 * with the poll that took the events queued before the violation (noted
 * in the same lock as them, so no poll can take one without the other);
 * the host answers those after it, so the failure waits for one more. */
void nsv__ws_turn(nsv__loop *l, nsv__conn *c)
{
    nsv__ws *ws = c->ws;
    if (!live(c) || !ws->fail_wait)
        return;
    if (ws->fail_wait == 1 && note_turn(l, c) == 0) {
        ws->fail_wait = 2;
        return;
    }
    ws->fail_wait = 0;
    fail(l, c, ws->fail_code);
}

static void on_control(nsv__loop *l, nsv__conn *c, int op, uint8_t *p, size_t n)
{
    nsv__ws *ws = c->ws;
    nsv_server *s = l->srv;
    if (op == NSV__WS_PING) {
        if (!ws->close_sent)
            queue_frame(l, c, NSV__WS_PONG, (const char *)p, n);
        if (s->ws_control_events)
            emit(l, c, NSV_EV_WS_PING, 0, (const char *)p, n);
        return;
    }
    if (op == NSV__WS_PONG) {
        ws->ping_out = 0;
        if (s->ws_control_events)
            emit(l, c, NSV_EV_WS_PONG, 0, (const char *)p, n);
        return;
    }
    uint16_t code = 0;
    int r = nsv__ws_check_close(p, n, &code);
    if (r < 0) {
        fail_soon(l, c, -r);
        return;
    }
    ws->close_recv = 1;
    int echo = !ws->close_sent;
    if (echo) { /* echo the peer's code (none if it sent none) */
        queue_frame(l, c, NSV__WS_CLOSE, (const char *)p, n >= 2 ? 2 : 0);
        ws->close_sent = 1;
    }
    /* WS_CLOSE carries the peer's code and reason, whoever started the close. */
    emit(l, c, NSV_EV_WS_CLOSE, code, (const char *)p + (n >= 2 ? 2 : 0), n >= 2 ? n - 2 : 0);
    if (ws->client && echo && !c->closing) {
        /* The server started it, so the server closes TCP first (RFC 6455
         * 7.1.1): the echo goes out and its EOF is awaited, within the close
         * timeout (no on_timer: the sweep then closes). Reading goes on,
         * dropping whatever comes. */
        c->deadline = l->now + s->ws_close_timeout_ms;
        return;
    }
    c->closing = 1;
    c->deadline = l->now + s->ws_close_timeout_ms;
    nsv__conn_mark_dirty(l, c);
}

/* Inflated bytes of a compressed message: checked as text, then kept. */
typedef struct sink_ctx {
    nsv__loop *l;
    nsv__conn *c;
} sink_ctx;

static int inflated(void *ctx, const uint8_t *p, size_t n)
{
    sink_ctx *k = ctx;
    nsv__ws *ws = k->c->ws;
    int r = nsv__ws_msg_data(&ws->msg, p, n);
    if (r < 0)
        return r;
    return nsv__buf_append(k->l, &ws->msgbuf, p, n) == 0 ? 0 : -NSV__WS_INTERNAL;
}

/* Consume frames from p[0..len). Returns bytes used (the rest is an
 * incomplete header or control frame), or -1 once the connection failed. */
static long process(nsv__loop *l, nsv__conn *c, uint8_t *p, size_t len)
{
    nsv__ws *ws = c->ws;
    size_t used = 0;
    while (used < len && live(c) && !ws->close_recv && !ws->fail_code) {
        if (!ws->in_frame) {
            int h = ws->client ? nsv__ws_parse_server_header(p + used, len - used, &ws->f)
                    : ws->pmd  ? nsv__ws_parse_header_rsv1(p + used, len - used, &ws->f)
                               : nsv__ws_parse_header(p + used, len - used, &ws->f);
            if (h == 0)
                break;
            if (h < 0)
                return fail_soon(l, c, -h);
            if (ws->f.opcode & 8) {
                if (len - used < h + ws->f.len)
                    break; /* control frames are handled whole (<= 125 bytes) */
                uint8_t *pl = p + used + h;
                if (!ws->client)
                    nsv__ws_unmask(pl, (size_t)ws->f.len, ws->f.key, 0);
                used += h + (size_t)ws->f.len;
                on_control(l, c, ws->f.opcode, pl, (size_t)ws->f.len);
                if (ws->fail_code)
                    return -1;
                continue;
            }
            int op = nsv__ws_msg_frame(&ws->msg, &ws->f);
            if (op < 0)
                return fail_soon(l, c, -op);
            if (ws->f.opcode != NSV__WS_CONT) /* a message starts: RSV1 says how it comes */
                ws->zmsg = ws->f.rsv1;
            used += (size_t)h;
            ws->in_frame = 1;
            ws->fpos = 0;
        }
        uint64_t want = ws->f.len - ws->fpos;
        size_t n = (size_t)(want < len - used ? want : len - used);
        uint8_t *pl = p + used;
        if (!ws->client)
            nsv__ws_unmask(pl, n, ws->f.key, (size_t)ws->fpos);
        uint8_t opcode = ws->msg.opcode;
        int r;
        if (ws->zmsg) { /* inflated as it comes; text checked after inflating */
            sink_ctx k = {l, c};
            int last = ws->f.fin && ws->fpos + n == ws->f.len;
            r = nsv__pmd_inflate(ws->pmd, pl, n, last, ws->msg.max, inflated, &k);
        } else {
            r = nsv__ws_msg_data(&ws->msg, pl, n);
        }
        if (r < 0)
            return fail_soon(l, c, -r);
        int whole = !ws->zmsg && ws->fpos == 0 && n == ws->f.len && ws->f.fin && ws->msgbuf.len == 0;
        /* Room for the whole frame at once: one allocation, not a doubling chain. */
        if (!whole && !ws->zmsg && ws->fpos == 0 && nsv__buf_reserve(l, &ws->msgbuf, (size_t)ws->f.len) != 0)
            return fail(l, c, 1011), -1;
        if (!whole && !ws->zmsg && n && nsv__buf_append(l, &ws->msgbuf, pl, n) != 0)
            return fail(l, c, 1011), -1;
        ws->fpos += n;
        used += n;
        if (ws->fpos < ws->f.len)
            break;
        ws->in_frame = 0;
        r = nsv__ws_msg_frame_end(&ws->msg);
        if (r < 0)
            return fail_soon(l, c, -r);
        if (r == 1) {
            NSV__COUNT(l, NSV_M_WS_MESSAGES_IN);
            if (whole) {
                emit(l, c, NSV_EV_WS_MESSAGE, opcode, (const char *)pl, n);
            } else {
                emit(l, c, NSV_EV_WS_MESSAGE, opcode, ws->msgbuf.p, ws->msgbuf.len);
                nsv__buf_release(l, &ws->msgbuf);
            }
        }
    }
    /* After the peer's close frame nothing more is data: the rest is dropped. */
    return ws->close_recv ? (long)len : (long)used;
}

/* A client that sends faster than it reads is not read while its answers
 * back up (loop.c), so echoing hosts never meet NSV_EAGAIN from it. */
static void on_readable(nsv__loop *l, nsv__conn *c)
{
    if (c->paused || c->ws->fail_code) { /* nsv_pause_read: what was read waits in `in`;
                                            a violation: nothing more is read */
        nsv__conn_set_events(l, c, 0, c->writing);
        return;
    }
    for (int rounds = 0; rounds < 4 && live(c); rounds++) {
        uint8_t *p;
        size_t len;
        int stash = c->in.len > c->in.off;
        ssize_t n = 0;
        if (!stash) {
            n = nsv__io_recv(l, c, l->scratch, NSV__SCRATCH);
            p = (uint8_t *)l->scratch;
            len = n > 0 ? (size_t)n : 0;
        } else {
            if (nsv__buf_reserve(l, &c->in, 4096) != 0)
                return fail(l, c, 1011);
            n = nsv__io_recv(l, c, c->in.p + c->in.len, c->in.cap - c->in.len);
            if (n > 0)
                c->in.len += (uint32_t)n;
            p = (uint8_t *)c->in.p + c->in.off;
            len = c->in.len - c->in.off;
            if (n < 0 && (errno == EAGAIN || errno == EINTR) && rounds == 0)
                n = 1; /* process what the handshake left behind */
        }
        if (n == 0) {
            /* EOF: frames already read (behind the handshake, or an
             * incomplete tail) are taken first; a close frame among them
             * is the peer's word, not an abnormal closure. */
            c->peer_closed = 1;
            if (stash && len && (process(l, c, p, len) < 0 || !c->proto))
                return;
            nsv__conn_close(l, c);
            return;
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return;
            nsv__conn_close(l, c);
            return;
        }
        long used = process(l, c, p, len);
        if (used < 0 || !c->proto)
            return;
        if (stash) {
            c->in.off += (uint32_t)used;
            if (c->in.off == c->in.len)
                nsv__buf_release(l, &c->in);
        } else if ((size_t)used < len) {
            if (nsv__buf_append(l, &c->in, p + used, len - (size_t)used) != 0)
                return fail(l, c, 1011);
        }
        if ((size_t)n < NSV__SCRATCH)
            return;
    }
}

/* Refusals of nsv__ws_send, off the hot path. */
static int send_refused(nsv__loop *l, nsv__conn *c, int err, int opcode, size_t len)
{
    nsv_server *s = l->srv;
    unsigned long long id = (unsigned long long)nsv__conn_id(l, c);
    if (err == NSV_ESTATE && live(c))
        return nsv__set_detail(s, err, "ws send: connection 0x%llx sent its close frame; no more "
                               "messages after nsv_ws_close", id);
    if (err == NSV_ESTATE)
        return nsv__set_detail(s, err, "ws send: connection 0x%llx is not a WebSocket (not upgraded, "
                               "or closing)", id);
    if (err == NSV_EINVAL)
        return nsv__set_detail(s, err, "ws opcode %d is not TEXT(1), BINARY(2), PING(9) or PONG(10)",
                               opcode);
    if (err == NSV_ETOOBIG)
        return nsv__set_detail(s, err, "%s payload is %zu bytes; control frames carry at most %d",
                               opcode == NSV_WS_PING ? "ping" : "pong", len, NSV__WS_MAX_CONTROL);
    return nsv__set_detail(s, err, "ws send: connection 0x%llx has %u bytes queued; %zu more would "
                           "pass the output limit of %llu (max_output); nothing was queued", id,
                           c->out.len - c->out.off, len, (unsigned long long)nsv__out_limit(l));
}

/* A compressed message (permessage-deflate): deflated straight into the
 * output behind room for the header its bound would need, then the real
 * header in front. Only when the compressed size needs a shorter header
 * (it fell under 126 or 65536 bytes) is the payload moved up to it. Plain
 * if the compressor cannot take it (deflate.c reset it). */
static int queue_deflated(nsv__loop *l, nsv__conn *c, int opcode, const char *data, size_t len)
{
    size_t bound = nsv__pmd_bound(len);
    uint8_t hdr[NSV__WS_MAX_HEADER];
    size_t room = nsv__ws_write_header(hdr, 1, opcode | NSV__WS_RSV1, (uint64_t)bound);
    int r = nsv__buf_reserve(l, &c->out, room + bound);
    if (r)
        return r;
    uint8_t *base = (uint8_t *)c->out.p + c->out.len;
    long k = nsv__pmd_deflate(c->ws->pmd, (const uint8_t *)data, len, base + room, bound);
    if (k < 0)
        return queue_frame(l, c, opcode, data, len);
    size_t h = nsv__ws_write_header(hdr, 1, opcode | NSV__WS_RSV1, (uint64_t)k);
    if (h != room)
        memmove(base + h, base + room, (size_t)k);
    memcpy(base, hdr, h);
    c->out.len += (uint32_t)(h + (size_t)k);
    nsv__conn_mark_dirty(l, c);
    return NSV_OK;
}

int nsv__ws_send(nsv__loop *l, nsv__conn *c, int opcode, const char *data, size_t len)
{
    if (!live(c) || c->ws->close_sent)
        return send_refused(l, c, NSV_ESTATE, opcode, len);
    if (opcode != NSV_WS_TEXT && opcode != NSV_WS_BINARY && opcode != NSV_WS_PING && opcode != NSV_WS_PONG)
        return send_refused(l, c, NSV_EINVAL, opcode, len);
    if ((opcode & 8) && len > NSV__WS_MAX_CONTROL)
        return send_refused(l, c, NSV_ETOOBIG, opcode, len);
    if (c->out.len - c->out.off > 0 && c->out.len - c->out.off + len > nsv__out_limit(l))
        return send_refused(l, c, NSV_EAGAIN, opcode, len);
    int r = !(opcode & 8) && c->ws->pmd && len >= (uint64_t)l->srv->ws_deflate_min_size &&
                    nsv__pmd_can_send(c->ws->pmd)
                ? queue_deflated(l, c, opcode, data, len)
                : queue_frame(l, c, opcode, data, len);
    if (r == 0 && !(opcode & 8))
        NSV__COUNT(l, NSV_M_WS_MESSAGES_OUT);
    if (r == 0 && c->water_events)
        nsv__out_queued(l, c); /* TCP_WRITABLE code 0 once past the high water mark */
    return r;
}

int nsv__ws_close(nsv__loop *l, nsv__conn *c, int code, const char *reason, size_t len)
{
    if (!live(c))
        return NSV_ESTATE;
    if (c->ws->close_sent)
        return NSV_OK;
    if (!nsv__ws_close_code_valid((unsigned)code))
        return nsv__set_detail(l->srv, NSV_EINVAL, "close code %d is %s; use 1000-1003, 1007-1014 or "
                               "3000-4999", code, (code >= 1004 && code <= 1006) || code == 1015
                               ? "reserved" : "not one a server may send");
    if (len > 123)
        return nsv__set_detail(l->srv, NSV_EINVAL, "close reason is %zu bytes; at most 123 fit a close "
                               "frame", len);
    if (len && !nsv__utf8_valid((const uint8_t *)reason, len))
        return nsv__set_detail(l->srv, NSV_EINVAL, "close reason (%zu bytes) is not valid UTF-8", len);
    char b[125];
    b[0] = (char)(code >> 8);
    b[1] = (char)code;
    if (len)
        memcpy(b + 2, reason, len);
    int r = queue_frame(l, c, NSV__WS_CLOSE, b, len + 2);
    if (r)
        return r;
    c->ws->close_sent = 1;
    c->deadline = l->now + l->srv->ws_close_timeout_ms;
    return NSV_OK;
}

int nsv__ws_broadcast_loop(nsv__loop *l, int32_t route, int opcode, const char *data, size_t len)
{
    int n = 0;
    for (uint32_t i = 0; i < l->nslots; i++) {
        nsv__conn *c = NSV__CONN(l, i);
        if (live(c) && !c->ws->close_sent && !c->ws->client && (route < 0 || c->route == route) &&
            nsv__ws_send(l, c, opcode, data, len) == NSV_OK)
            n++;
    }
    return n;
}

/* Sweep: keepalive pings; peers that did not answer the last one are closed. */
static void on_tick(nsv__loop *l, nsv__conn *c)
{
    nsv__ws *ws = c->ws;
    int64_t iv = l->srv->ws_ping_interval_ms;
    if (!iv || !live(c) || ws->close_sent || l->now < ws->next_ping)
        return;
    if (ws->ping_out) { /* peer stopped answering: 1006 with a reason */
        NSV__COUNT(l, NSV_M_TIMEOUT_OTHER);
        emit(l, c, NSV_EV_WS_CLOSE, 1006, "ping timeout", 12);
        nsv__conn_close(l, c);
        return;
    }
    queue_frame(l, c, NSV__WS_PING, "nsv", 3);
    ws->ping_out = 1;
    ws->next_ping = l->now + iv;
}

/* The close handshake did not finish in ws_close_timeout_ms. */
static void on_timer(nsv__loop *l, nsv__conn *c)
{
    NSV__COUNT(l, NSV_M_TIMEOUT_OTHER);
    nsv__conn_close(l, c);
}

/* The 101's bytes may all be out: the upgrade's latency (http/answer.h). */
static void on_flushed(nsv__loop *l, nsv__conn *c)
{
    nsv__answer_flushed(l, c);
}

/* Frames that came right behind the handshake wait in c->in. */
static int on_dirty(nsv__loop *l, nsv__conn *c)
{
    if (live(c) && c->ws->fail_code) {
        if (!c->on_held && !c->ws->fail_wait) /* the turn after the violation came (fail_soon) */
            fail(l, c, c->ws->fail_code);
        return 0;
    }
    if (live(c) && c->in.len > c->in.off)
        on_readable(l, c);
    return 0;
}

/* Draining: the peer hears "going away" and closes cleanly. */
static void on_drain(nsv__loop *l, nsv__conn *c)
{
    if (c->ws && c->ws->client)
        nsv__ws_close(l, c, 1001, "client shutting down", 20);
    else
        nsv__ws_close(l, c, 1001, "server shutting down", 20);
}

/* A client connection's handshake succeeded (core/ws_client.c checked the
 * 101): from now on it is a WebSocket like an upgraded one, in client mode.
 * Bytes that came behind the 101 wait in c->in and are read as frames from
 * the flush list, after the caller's WS_OPEN. */
int nsv__ws_client_open(nsv__loop *l, nsv__conn *c)
{
    nsv__ws *ws = nsv__calloc(&l->srv->alloc, sizeof *ws);
    if (!ws)
        return NSV_ENOMEM;
    ws->client = 1;
    ws->rng_pos = sizeof ws->rng; /* filled at the first frame */
    ws->msg.max = (uint64_t)l->srv->ws_max_message;
    if (l->srv->ws_ping_interval_ms)
        ws->next_ping = l->now + l->srv->ws_ping_interval_ms;
    c->ws = ws;
    c->proto = &nsv__proto_ws;
    c->state = NSV__C_NONE;
    c->deadline = 0;
    nsv__ticket(l, c, NSV__T_WS);
    if (!c->paused && !c->reading)
        nsv__conn_set_events(l, c, 1, c->writing);
    if (c->in.len > c->in.off)
        nsv__conn_mark_dirty(l, c);
    return NSV_OK;
}

const nsv__proto nsv__proto_ws = {
    .name = "a WebSocket",
    .flags = NSV__P_STREAM,
    .on_readable = on_readable,
    .on_dirty = on_dirty,
    .on_flushed = on_flushed,
    .on_timer = on_timer,
    .on_tick = on_tick,
    .on_drain = on_drain,
    .on_close = on_close,
};
