/* conn_api.c - public per-connection calls. On a single loop they act at
 * once; on a sharded server, calls from threads other than the owner are
 * forwarded to the owning worker (shard.c). */
#include "server.h"
#include <string.h>
#include <unistd.h>


/* The loop owning id when the calling thread may act on it directly. */
static nsv__loop *direct_loop(nsv_server *s, uint64_t id)
{
    uint32_t li = NSV__ID_LOOP(id);
    if (li >= (uint32_t)s->nloops)
        return NULL;
    if (s->sharded && nsv__shard_current(s) != s->loops[li])
        return NULL;
    return s->loops[li];
}

int nsv__conn_op(nsv__loop *l, const nsv__cmd *k)
{
    uint32_t op = k->op;
    int status = k->status;
    uint64_t arg = k->arg;
    const char *h = k->h, *b = k->b;
    size_t hlen = k->hlen, blen = k->blen;
    if (op == NSV__OP_WS_BCAST)
        return nsv__ws_broadcast_loop(l, status, (int)arg, b, blen);
    nsv__conn *c = nsv__conn_get(l, k->id);
    if (!c) {
        if (op == NSV__OP_FILE)
            close((int)(uint32_t)arg);
        return NSV_ESTALE;
    }
    switch (op) {
    case NSV__OP_FILE: {
        nsv__sfile f = {.fd = (int)(uint32_t)arg, .enc = (uint8_t)(arg >> 32 & 3), .vary = (uint8_t)(arg >> 40 & 1),
                        .mime = (int16_t)(uint16_t)(arg >> 48)};
        nsv__sreq q;
        nsv__sreq_block(&q, b, blen);
        return nsv__static_send(l, c, status, &f, &q, NULL, 0, h, hlen, (int)(arg >> 41 & 3));
    }
    case NSV__OP_REPLY:
        return nsv__reply(l, c, status, h, hlen, b, blen, 0);
    case NSV__OP_START:
        return nsv__reply(l, c, status, h, hlen, NULL, 0, 1);
    case NSV__OP_CHUNK:
        return nsv__send_chunk(l, c, b, blen);
    case NSV__OP_END:
        return nsv__reply_end(l, c);
    case NSV__OP_CLOSE:
        if (c->closing)
            return NSV_OK;
        c->closing = 1;
        c->state = 0; /* an HTTP request in flight is abandoned */
        nsv__conn_mark_dirty(l, c);
        return NSV_OK;
    case NSV__OP_TAG:
        c->tag = arg;
        return NSV_OK;
    case NSV__OP_REASON:
        return nsv__reason_set(l, c, b, blen);
    case NSV__OP_CONTINUE:
        if (arg && (c->proto != &nsv__proto_http || c->state != NSV__C_PENDING))
            return NSV_ESTATE; /* nsv_continue with no request waiting */
        if (c->proto == &nsv__proto_http)
            nsv__http_continue(l, c, (int)arg);
        else if (c->proto == &nsv__proto_ws) /* a failure waiting for the host's poll */
            nsv__ws_turn(l, c);
        return NSV_OK;
    case NSV__OP_WS_UPGRADE:
        return nsv__ws_accept(l, c, h, hlen);
    case NSV__OP_WS_SEND:
        return nsv__ws_send(l, c, (int)arg, b, blen);
    case NSV__OP_WS_CLOSE:
        return nsv__ws_close(l, c, status, b, blen);
    case NSV__OP_TCP_SEND:
        return nsv__tcp_send(l, c, b, blen);
    case NSV__OP_TCP_PAUSE:
        if (c->proto == &nsv__proto_http) /* a streamed request body */
            return nsv__body_pause(l, c, arg != 0);
        return nsv__tcp_op(l, c, (int)op, (int64_t)arg, 0);
    case NSV__OP_TCP_SHUTDOWN:
    case NSV__OP_TCP_ABORT:
        return nsv__tcp_op(l, c, (int)op, (int64_t)arg, 0);
    case NSV__OP_TCP_WATER:
        return nsv__tcp_op(l, c, (int)op, (int64_t)(arg >> 32), (int64_t)(arg & 0xFFFFFFFFu));
    case NSV__OP_TLS_UPGRADE: {
        int r = nsv__tcp_tls_upgrade(l, c, b, blen, (uint32_t)arg);
        if (r >= 0 || !l->forwarded)
            return r;
        /* The caller was told it was queued and waits for TCP_CONNECTED:
         * it hears of the refusal instead, and the connection closes. */
        nsv__conn *cc = nsv__conn_get(l, k->id);
        if (cc) {
            const char *msg = nsv_last_error_detail(l->srv);
            nsv__evq_emit(l, cc, NSV_EV_ERROR, r, 0, msg, strlen(msg));
            nsv__conn_close(l, cc);
        }
        return NSV_OK;
    }
    }
    return NSV_EINVAL;
}

/* What a connection must be for op, said when it is not. */
static const char *state_rule(uint32_t op)
{
    switch (op) {
    case NSV__OP_REPLY:
    case NSV__OP_START:
    case NSV__OP_WS_UPGRADE:
    case NSV__OP_FILE:
    case NSV__OP_REASON:
    case NSV__OP_CONTINUE:
        return "has no request waiting for an answer (answered already, upgraded, or not HTTP)";
    case NSV__OP_CHUNK:
    case NSV__OP_END:
        return "has no streamed reply in progress (nsv_reply_start begins one)";
    case NSV__OP_WS_SEND:
    case NSV__OP_WS_CLOSE:
        return "is not an open WebSocket (not upgraded, or its close handshake began)";
    case NSV__OP_TCP_SEND:
    case NSV__OP_TCP_SHUTDOWN:
    case NSV__OP_TCP_PAUSE:
    case NSV__OP_TCP_WATER:
        return "is not a raw TCP connection (tcp:// listener or nsv_connect), or its write side is shut";
    }
    return "is not in a state that allows this call";
}

/* The name of the byte argument of op. */
static const char *data_name(uint32_t op)
{
    return op == NSV__OP_REPLY ? "body" : op == NSV__OP_WS_CLOSE || op == NSV__OP_REASON ? "reason" : "data";
}

/* The generic detail of a failed connection call, written only when
 * nothing during the call (reply checks, WebSocket rules, ...) said more. */
static int conn_fail(nsv_server *s, uint64_t mark, const char *fn, uint32_t op, uint64_t id, int r)
{
    unsigned long long cid = (unsigned long long)id;
    switch (r) {
    case NSV_ESTALE:
        return nsv__set_detail_since(s, mark, r, "%s: connection 0x%llx is not open (closed, or never existed)",
                                     fn, cid);
    case NSV_ESTATE:
        return nsv__set_detail_since(s, mark, r, "%s: connection 0x%llx %s", fn, cid, state_rule(op));
    case NSV_EAGAIN:
        return nsv__set_detail_since(s, mark, r, "%s: connection 0x%llx would pass max_output (%lld bytes "
                                     "queued at most); nothing was queued, retry once it drains",
                                     fn, cid, (long long)s->max_output);
    case NSV_ENOMEM:
        return nsv__set_detail_since(s, mark, r, "%s: connection 0x%llx: no memory for the output", fn, cid);
    }
    return nsv__set_detail_since(s, mark, r, "%s: connection 0x%llx refused the call (%s)", fn, cid,
                                 nsv_errname(r));
}

static int conn_call(nsv_server *s, const char *fn, uint32_t op, uint64_t id, int status, const char *h,
                     size_t hlen, const char *b, size_t blen, uint64_t arg)
{
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "%s: srv is NULL", fn);
    if (NSV__ID_LOOP(id) >= (uint32_t)s->nloops || NSV__ID_GEN(id) == 0)
        return nsv__set_detail(s, NSV_ESTALE, "%s: 0x%llx is not a connection id of this server "
                               "(generation %u, worker %u of %d)", fn, (unsigned long long)id,
                               NSV__ID_GEN(id), NSV__ID_LOOP(id), s->nloops);
    if (hlen && !h)
        return nsv__set_detail(s, NSV_EINVAL, "%s: headers is NULL with hlen %zu", fn, hlen);
    if (blen && !b)
        return nsv__set_detail(s, NSV_EINVAL, "%s: %s is NULL with length %zu", fn, data_name(op), blen);
    uint64_t mark = nsv__detail_mark(); /* a detail set deeper wins over the generic one */
    nsv__loop *l = direct_loop(s, id);
    nsv__cmd k = {.op = op, .status = status, .id = id, .arg = arg, .h = h, .hlen = hlen, .b = b, .blen = blen};
    int r = l ? nsv__conn_op(l, &k)
              : nsv__shard_forward(s, &k);
    return r < 0 ? conn_fail(s, mark, fn, op, id, r) : r;
}

int nsv__conn_call_file(nsv_server *s, uint64_t id, int status, const char *h, size_t hlen, const char *b,
                        size_t blen, uint64_t arg)
{
    uint64_t mark = nsv__detail_mark();
    nsv__loop *l = direct_loop(s, id);
    nsv__cmd k = {.op = NSV__OP_FILE, .status = status, .id = id, .arg = arg, .h = h, .hlen = hlen, .b = b,
                  .blen = blen};
    int r;
    if (l) {
        r = nsv__conn_op(l, &k);
    } else {
        r = nsv__shard_forward(s, &k);
        if (r < 0) /* not queued: the worker will not close it */
            close((int)(uint32_t)arg);
    }
    return r < 0 ? conn_fail(s, mark, "nsv_reply_file", NSV__OP_FILE, id, r) : r;
}

int nsv_reply(nsv_server *s, uint64_t id, int status, const char *h, size_t hlen, const char *b, size_t blen)
{
    return conn_call(s, "nsv_reply", NSV__OP_REPLY, id, status, h, hlen, b, blen, 0);
}

int nsv_reply_start(nsv_server *s, uint64_t id, int status, const char *h, size_t hlen)
{
    return conn_call(s, "nsv_reply_start", NSV__OP_START, id, status, h, hlen, NULL, 0, 0);
}

/* RFC 9112 reason-phrase = 1*( HTAB / SP / VCHAR / obs-text ); checked in
 * the calling thread, so the detail is the caller's and a bad phrase never
 * reaches a worker's queue. */
int nsv_set_reason(nsv_server *s, uint64_t id, const char *reason, size_t len)
{
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_set_reason: srv is NULL");
    if (len && !reason)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_set_reason: reason is NULL with len %zu", len);
    if (len > NSV__REASON_MAX)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_set_reason: the reason phrase is %zu bytes; at most %d",
                               len, NSV__REASON_MAX);
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)reason[i];
        if (ch != '\t' && (ch < 0x20 || ch == 0x7f))
            return nsv__set_detail(s, NSV_EINVAL, "nsv_set_reason: byte 0x%02x at offset %zu is not allowed in a "
                                   "reason phrase (HTAB, SP, visible ASCII and bytes >= 0x80 only)", ch, i);
    }
    return conn_call(s, "nsv_set_reason", NSV__OP_REASON, id, 0, NULL, 0, reason, len, 0);
}

int nsv_continue(nsv_server *s, uint64_t id)
{
    return conn_call(s, "nsv_continue", NSV__OP_CONTINUE, id, 0, NULL, 0, NULL, 0, 1);
}

int nsv_send_chunk(nsv_server *s, uint64_t id, const char *data, size_t len)
{
    return conn_call(s, "nsv_send_chunk", NSV__OP_CHUNK, id, 0, NULL, 0, data, len, 0);
}

int nsv_reply_end(nsv_server *s, uint64_t id) { return conn_call(s, "nsv_reply_end", NSV__OP_END, id, 0, NULL, 0, NULL, 0, 0); }
int nsv_close(nsv_server *s, uint64_t id) { return conn_call(s, "nsv_close", NSV__OP_CLOSE, id, 0, NULL, 0, NULL, 0, 0); }

int nsv_conn_set_tag(nsv_server *s, uint64_t id, uint64_t tag)
{
    return conn_call(s, "nsv_conn_set_tag", NSV__OP_TAG, id, 0, NULL, 0, NULL, 0, tag);
}

/* The connection for a reader that only the owning thread may run. */
static nsv__conn *read_conn(nsv_server *s, uint64_t id, const char *fn, const char *instead, int *err)
{
    nsv__loop *l = direct_loop(s, id);
    nsv__conn *c = l ? nsv__conn_get(l, id) : NULL;
    if (c)
        return c;
    if (!l && s->sharded && NSV__ID_LOOP(id) < (uint32_t)s->nloops)
        *err = nsv__set_detail(s, NSV_ENOTSUP, "%s: connection 0x%llx belongs to worker %u and this "
                               "thread is not that worker; %s", fn, (unsigned long long)id,
                               NSV__ID_LOOP(id), instead);
    else
        *err = nsv__set_detail(s, NSV_ESTALE, "%s: connection 0x%llx is not open (closed, or never "
                               "existed)", fn, (unsigned long long)id);
    return NULL;
}

int nsv_conn_tag(nsv_server *s, uint64_t id, uint64_t *tag)
{
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_conn_tag: srv is NULL");
    if (!tag)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_conn_tag: tag (the output pointer) is NULL");
    int err = NSV_OK;
    nsv__conn *c = read_conn(s, id, "nsv_conn_tag", "events carry the tag in nsv_event.tag", &err);
    if (!c)
        return err;
    *tag = c->tag;
    return NSV_OK;
}

int64_t nsv_conn_queued(nsv_server *s, uint64_t id)
{
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_conn_queued: srv is NULL");
    int err = NSV_OK;
    nsv__conn *c = read_conn(s, id, "nsv_conn_queued", "pace output by TCP_WRITABLE events there", &err);
    if (!c)
        return err;
    return (int64_t)(c->out.len - c->out.off);
}

int nsv_ws_upgrade(nsv_server *s, uint64_t id, const char *headers, size_t hlen)
{
    if (s && hlen) {
        nsv__hscan hs;
        if (!headers)
            return nsv__set_detail(s, NSV_EINVAL, "nsv_ws_upgrade: headers is NULL with hlen %zu", hlen);
        if (nsv__headers_scan(s, headers, hlen, &hs) != 0)
            return NSV_EINVAL; /* the detail names the byte and the rule */
    }
    return conn_call(s, "nsv_ws_upgrade", NSV__OP_WS_UPGRADE, id, 0, headers, hlen, NULL, 0, 0);
}

int nsv_ws_send(nsv_server *s, uint64_t id, int opcode, const char *data, size_t len)
{
    return conn_call(s, "nsv_ws_send", NSV__OP_WS_SEND, id, 0, NULL, 0, data, len, (uint64_t)opcode);
}

int nsv_ws_close(nsv_server *s, uint64_t id, int code, const char *reason, size_t len)
{
    return conn_call(s, "nsv_ws_close", NSV__OP_WS_CLOSE, id, code, NULL, 0, reason, len, 0);
}

int nsv_ws_send_many(nsv_server *s, const uint64_t *ids, size_t n, int opcode, const char *data, size_t len)
{
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_ws_send_many: srv is NULL");
    if (n && !ids)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_ws_send_many: conns is NULL with n %zu", n);
    if (len && !data)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_ws_send_many: data is NULL with len %zu", len);
    int sent = 0;
    for (size_t i = 0; i < n; i++)
        sent += nsv_ws_send(s, ids[i], opcode, data, len) == NSV_OK;
    return sent;
}

int nsv_ws_broadcast(nsv_server *s, int32_t route, int opcode, const char *data, size_t len)
{
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_ws_broadcast: srv is NULL");
    if (len && !data)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_ws_broadcast: data is NULL with len %zu", len);
    if (opcode != NSV_WS_TEXT && opcode != NSV_WS_BINARY && opcode != NSV_WS_PING)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_ws_broadcast: opcode %d is not TEXT(1), BINARY(2) or "
                               "PING(9)", opcode);
    if (!s->sharded)
        return nsv__ws_broadcast_loop(s->loops[0], route, opcode, data, len);
    return nsv__shard_broadcast(s, route, opcode, data, len);
}

int nsv_send(nsv_server *s, uint64_t id, const char *data, size_t len)
{
    return conn_call(s, "nsv_send", NSV__OP_TCP_SEND, id, 0, NULL, 0, data, len, 0);
}

/* The name is checked here, in the caller's thread, so its detail is the
 * caller's; the connection's state is judged by its loop. */
int nsv_tls_upgrade(nsv_server *s, uint64_t id, const char *name, size_t len, uint32_t flags)
{
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_tls_upgrade: srv is NULL");
    if (!nsv_tls_available())
        return nsv__set_detail(s, NSV_ENOTSUP, "nsv_tls_upgrade: this build has no TLS (nsv_tls_available() "
                               "is 0)");
    if (flags & ~(uint32_t)NSV_TLS_UPGRADE_VERIFY)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_tls_upgrade: unknown flags 0x%x (known: "
                               "NSV_TLS_UPGRADE_VERIFY)", (unsigned)(flags & ~(uint32_t)NSV_TLS_UPGRADE_VERIFY));
    if (len && !name)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_tls_upgrade: server_name is NULL with len %zu", len);
    if (len > 253)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_tls_upgrade: server_name is %zu bytes; a host name has "
                               "at most 253", len);
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
              ch == '.' || ch == '_' || ch == ':'))
            return nsv__set_detail(s, NSV_EINVAL, "nsv_tls_upgrade: byte 0x%02x at offset %zu of server_name is "
                                   "not allowed in a host name (letters, digits, '-', '.', '_', ':')", ch, i);
    }
    return conn_call(s, "nsv_tls_upgrade", NSV__OP_TLS_UPGRADE, id, 0, NULL, 0, name, len, flags);
}

int nsv_shutdown(nsv_server *s, uint64_t id) { return conn_call(s, "nsv_shutdown", NSV__OP_TCP_SHUTDOWN, id, 0, NULL, 0, NULL, 0, 0); }
int nsv_abort(nsv_server *s, uint64_t id) { return conn_call(s, "nsv_abort", NSV__OP_TCP_ABORT, id, 0, NULL, 0, NULL, 0, 0); }

int nsv_pause_read(nsv_server *s, uint64_t id, int paused)
{
    return conn_call(s, "nsv_pause_read", NSV__OP_TCP_PAUSE, id, 0, NULL, 0, NULL, 0, paused ? 1 : 0);
}

int nsv_set_water_marks(nsv_server *s, uint64_t id, int64_t high, int64_t low)
{
    if (high <= 0 || low < 0 || low > high || high > UINT32_MAX)
        return nsv__set_detail(s, NSV_ERANGE, "nsv_set_water_marks: high %lld, low %lld; need "
                               "0 <= low <= high and 1 <= high <= 4294967295", (long long)high,
                               (long long)low);
    return conn_call(s, "nsv_set_water_marks", NSV__OP_TCP_WATER, id, 0, NULL, 0, NULL, 0, ((uint64_t)high << 32) | (uint64_t)low);
}

struct connect_args {
    const char *url;
    size_t len;
};

static int64_t connect_here(nsv__loop *l, const void *args)
{
    const struct connect_args *a = args;
    nsv_server *s = l->srv;
    if (atomic_load(&s->stop) || atomic_load(&s->draining))
        return nsv__set_detail(s, NSV_ESTOPPED, "nsv_connect: the server is %s; no new connections",
                               atomic_load(&s->draining) ? "draining" : "stopped");
    return nsv__tcp_connect_here(l, a->url, a->len);
}

int64_t nsv_connect(nsv_server *s, const char *url, size_t len)
{
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_connect: srv is NULL");
    if (!url)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_connect: url is NULL");
    struct connect_args a = {url, len};
    return nsv__on_some_loop(s, "nsv_connect", connect_here, &a);
}

int nsv_reply_batch(nsv_server *s, const char *buf, size_t len)
{
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_reply_batch: srv is NULL");
    if (len && !buf)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_reply_batch: buf is NULL with len %zu", len);
    size_t pos = 0;
    int ok = 0;
    while (len - pos >= 24) {
        uint64_t id;
        int32_t status;
        uint32_t hlen, blen;
        memcpy(&id, buf + pos, 8);
        memcpy(&status, buf + pos + 8, 4);
        memcpy(&hlen, buf + pos + 12, 4);
        memcpy(&blen, buf + pos + 16, 4);
        pos += 24;
        if ((uint64_t)hlen + blen > len - pos)
            return ok ? ok : nsv__set_detail(s, NSV_EINVAL, "nsv_reply_batch: record at byte %zu "
                                             "announces %u header and %u body bytes; only %zu follow",
                                             pos - 24, hlen, blen, len - pos);
        if (nsv_reply(s, id, status, buf + pos, hlen, buf + pos + hlen, blen) == NSV_OK)
            ok++;
        pos += ((size_t)hlen + blen + 7) & ~(size_t)7;
    }
    return ok;
}
