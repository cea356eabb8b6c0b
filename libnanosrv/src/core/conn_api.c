/* conn_api.c - public per-connection calls. On a single loop they act at
 * once; on a sharded server, calls from threads other than the owner are
 * forwarded to the owning worker (shard.c). */
#include "server.h"
#include <string.h>


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

int nsv__conn_op(nsv_server *s, nsv__loop *l, uint32_t op, uint64_t id, int status, const char *h,
                 size_t hlen, const char *b, size_t blen, uint64_t arg)
{
    if (op == NSV__OP_WS_BCAST)
        return nsv__ws_broadcast_loop(l, status, (int)arg, b, blen);
    nsv__conn *c = nsv__conn_get(l, id);
    if (!c)
        return NSV_ESTALE;
    switch (op) {
    case NSV__OP_REPLY:
        return nsv__reply(l, c, status, h, hlen, b, blen, 0);
    case NSV__OP_START:
        return nsv__reply(l, c, status, h, hlen, NULL, 0, 1);
    case NSV__OP_CHUNK:
        return nsv__send_chunk(l, c, b, blen);
    case NSV__OP_END:
        return nsv__reply_end(l, c);
    case NSV__OP_CLOSE:
        if (c->state == NSV__C_CLOSING)
            return NSV_OK;
        c->state = NSV__C_CLOSING;
        nsv__conn_mark_dirty(l, c);
        return NSV_OK;
    case NSV__OP_TAG:
        c->tag = arg;
        return NSV_OK;
    case NSV__OP_WS_UPGRADE:
        return nsv__ws_accept(l, c, h, hlen);
    case NSV__OP_WS_SEND:
        return nsv__ws_send(l, c, (int)arg, b, blen);
    case NSV__OP_WS_CLOSE:
        return nsv__ws_close(l, c, status, b, blen);
    case NSV__OP_TCP_SEND:
        return nsv__tcp_send(l, c, b, blen);
    case NSV__OP_TCP_SHUTDOWN:
    case NSV__OP_TCP_ABORT:
    case NSV__OP_TCP_PAUSE:
        return nsv__tcp_op(l, c, (int)op, (int64_t)arg, 0);
    case NSV__OP_TCP_WATER:
        return nsv__tcp_op(l, c, (int)op, (int64_t)(arg >> 32), (int64_t)(arg & 0xFFFFFFFFu));
    }
    return NSV_EINVAL;
}

static int conn_call(nsv_server *s, uint32_t op, uint64_t id, int status, const char *h, size_t hlen,
                     const char *b, size_t blen, uint64_t arg)
{
    if (!s)
        return NSV_EINVAL;
    if (NSV__ID_LOOP(id) >= (uint32_t)s->nloops || NSV__ID_GEN(id) == 0)
        return NSV_ESTALE;
    if ((hlen && !h) || (blen && !b))
        return NSV_EINVAL;
    nsv__loop *l = direct_loop(s, id);
    int r = l ? nsv__conn_op(s, l, op, id, status, h, hlen, b, blen, arg)
              : nsv__shard_forward(s, op, id, status, h, hlen, b, blen, arg);
    return r < 0 ? nsv__fail(r) : r;
}

int nsv_reply(nsv_server *s, uint64_t id, int status, const char *h, size_t hlen, const char *b, size_t blen)
{
    return conn_call(s, NSV__OP_REPLY, id, status, h, hlen, b, blen, 0);
}

int nsv_reply_start(nsv_server *s, uint64_t id, int status, const char *h, size_t hlen)
{
    return conn_call(s, NSV__OP_START, id, status, h, hlen, NULL, 0, 0);
}

int nsv_send_chunk(nsv_server *s, uint64_t id, const char *data, size_t len)
{
    return conn_call(s, NSV__OP_CHUNK, id, 0, NULL, 0, data, len, 0);
}

int nsv_reply_end(nsv_server *s, uint64_t id) { return conn_call(s, NSV__OP_END, id, 0, NULL, 0, NULL, 0, 0); }
int nsv_close(nsv_server *s, uint64_t id) { return conn_call(s, NSV__OP_CLOSE, id, 0, NULL, 0, NULL, 0, 0); }

int nsv_conn_set_tag(nsv_server *s, uint64_t id, uint64_t tag)
{
    return conn_call(s, NSV__OP_TAG, id, 0, NULL, 0, NULL, 0, tag);
}

int nsv_conn_tag(nsv_server *s, uint64_t id, uint64_t *tag)
{
    if (!s || !tag)
        return NSV_EINVAL;
    nsv__loop *l = direct_loop(s, id);
    if (!l)
        return s->sharded ? NSV_ENOTSUP : NSV_ESTALE;
    nsv__conn *c = nsv__conn_get(l, id);
    if (!c)
        return NSV_ESTALE;
    *tag = c->tag;
    return NSV_OK;
}

int64_t nsv_conn_queued(nsv_server *s, uint64_t id)
{
    if (!s)
        return NSV_EINVAL;
    nsv__loop *l = direct_loop(s, id);
    if (!l)
        return s->sharded ? NSV_ENOTSUP : NSV_ESTALE;
    nsv__conn *c = nsv__conn_get(l, id);
    if (!c)
        return NSV_ESTALE;
    return (int64_t)(c->out.len - c->out.off);
}

int nsv_ws_upgrade(nsv_server *s, uint64_t id, const char *headers, size_t hlen)
{
    if (hlen) {
        unsigned dummy;
        if (!headers || nsv__scan_headers(headers, hlen, &dummy) != 0)
            return NSV_EINVAL;
    }
    return conn_call(s, NSV__OP_WS_UPGRADE, id, 0, headers, hlen, NULL, 0, 0);
}

int nsv_ws_send(nsv_server *s, uint64_t id, int opcode, const char *data, size_t len)
{
    return conn_call(s, NSV__OP_WS_SEND, id, 0, NULL, 0, data, len, (uint64_t)opcode);
}

int nsv_ws_close(nsv_server *s, uint64_t id, int code, const char *reason, size_t len)
{
    return conn_call(s, NSV__OP_WS_CLOSE, id, code, NULL, 0, reason, len, 0);
}

int nsv_ws_send_many(nsv_server *s, const uint64_t *ids, size_t n, int opcode, const char *data, size_t len)
{
    if (!s || (n && !ids) || (len && !data))
        return NSV_EINVAL;
    int sent = 0;
    for (size_t i = 0; i < n; i++)
        sent += nsv_ws_send(s, ids[i], opcode, data, len) == NSV_OK;
    return sent;
}

int nsv_ws_broadcast(nsv_server *s, int32_t route, int opcode, const char *data, size_t len)
{
    if (!s || (len && !data))
        return NSV_EINVAL;
    if (opcode != NSV_WS_TEXT && opcode != NSV_WS_BINARY && opcode != NSV_WS_PING)
        return NSV_EINVAL;
    if (!s->sharded)
        return nsv__ws_broadcast_loop(s->loops[0], route, opcode, data, len);
    return nsv__shard_broadcast(s, route, opcode, data, len);
}

int nsv_send(nsv_server *s, uint64_t id, const char *data, size_t len)
{
    return conn_call(s, NSV__OP_TCP_SEND, id, 0, NULL, 0, data, len, 0);
}

int nsv_shutdown(nsv_server *s, uint64_t id) { return conn_call(s, NSV__OP_TCP_SHUTDOWN, id, 0, NULL, 0, NULL, 0, 0); }
int nsv_abort(nsv_server *s, uint64_t id) { return conn_call(s, NSV__OP_TCP_ABORT, id, 0, NULL, 0, NULL, 0, 0); }

int nsv_pause_read(nsv_server *s, uint64_t id, int paused)
{
    return conn_call(s, NSV__OP_TCP_PAUSE, id, 0, NULL, 0, NULL, 0, paused ? 1 : 0);
}

int nsv_set_water_marks(nsv_server *s, uint64_t id, int64_t high, int64_t low)
{
    if (high <= 0 || low < 0 || low > high || high > UINT32_MAX)
        return NSV_ERANGE;
    return conn_call(s, NSV__OP_TCP_WATER, id, 0, NULL, 0, NULL, 0, ((uint64_t)high << 32) | (uint64_t)low);
}

int64_t nsv_connect(nsv_server *s, const char *url, size_t len)
{
    if (!s || !url)
        return NSV_EINVAL;
    if (atomic_load(&s->stop) || atomic_load(&s->draining))
        return NSV_ESTOPPED;
    if (!s->sharded)
        return nsv__tcp_connect_here(s->loops[0], url, len);
    nsv__loop *self = nsv__shard_current(s);
    if (self)
        return nsv__tcp_connect_here(self, url, len);
    return nsv__shard_connect(s, url, len);
}

int nsv_reply_batch(nsv_server *s, const char *buf, size_t len)
{
    if (!s || (len && !buf))
        return NSV_EINVAL;
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
            return ok ? ok : NSV_EINVAL;
        if (nsv_reply(s, id, status, buf + pos, hlen, buf + pos + hlen, blen) == NSV_OK)
            ok++;
        pos += ((size_t)hlen + blen + 7) & ~(size_t)7;
    }
    return ok;
}
