/* server.h - the core layer: the public API's dispatch over the layers
 * below (loop, http, ws, net, router, tls). Only the core files include it. */
#ifndef NSV_SERVER_H
#define NSV_SERVER_H

#include "../loop/loop.h"
#include "../http/http.h"
#include "../ws/ws.h"
#include "../net/tcp.h"
#include "../router/router.h"
#include "shard.h"

/* detail.c (nsv__set_detail is declared in internal.h) */
uint64_t nsv__detail_serial(void);
uint64_t nsv__detail_mark(void);
int nsv__set_detail_text(nsv_server *s, int err, const char *text);
int nsv__detail_since(nsv_server *s, uint64_t mark);
int nsv__set_detail_since(nsv_server *s, uint64_t mark, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* client_url.c: parse url and check it for an outbound client of scheme
 * ("http", "ws") or its TLS form; *target / *tlen: what goes on the
 * request line. NSV_OK or the error with call's detail. */
int nsv__client_url(nsv_server *s, const char *call, const char *url, size_t len, const char *scheme, nsv_url *u,
                    int *tls, const char **target, size_t *tlen);

/* Per-connection operations: run in place on the owning loop (conn_api.c)
 * or queued to it from another thread (shard.c). */
enum {
    NSV__OP_REPLY = 1, NSV__OP_START, NSV__OP_CHUNK, NSV__OP_END, NSV__OP_CLOSE, NSV__OP_TAG,
    NSV__OP_WS_UPGRADE, NSV__OP_WS_SEND, NSV__OP_WS_CLOSE, NSV__OP_WS_BCAST,
    NSV__OP_FILE, /* nsv_reply_file: arg packs the open file (NSV__FILE_ARG) */
    NSV__OP_CONTINUE, /* the host polled again: send a waiting 100 Continue */
    NSV__OP_REASON /* nsv_set_reason: b/blen is the phrase (0 bytes: the standard one) */
    /* raw TCP operations: net/tcp.h */
};

/* conn_api.c: one operation (op, id, status, h/hlen, b/blen, arg of c). */
int nsv__conn_op(nsv__loop *l, const nsv__cmd *c);
/* nsv_reply_file's call: arg carries an open descriptor, which is closed
 * or handed to the connection on every path (static_api.c checked s, id
 * and the pointers). h: the host's header block; b: the request's. */
int nsv__conn_call_file(nsv_server *s, uint64_t id, int status, const char *h, size_t hlen, const char *b,
                        size_t blen, uint64_t arg);
/* The file of NSV__OP_FILE in the command's arg: descriptor (bits 0-31),
 * encoding (32-33), Vary (40), host flags (41-42: NSV__SF_HOST_CTYPE,
 * NSV__SF_PLAIN), media type index (48-63). */
#define NSV__FILE_ARG(fd, enc, vary, hflags, mime)                                                  \
    ((uint64_t)(uint32_t)(fd) | (uint64_t)(enc) << 32 | (uint64_t)(vary) << 40 |                    \
     (uint64_t)((hflags) & 3) << 41 | (uint64_t)(uint16_t)(mime) << 48)
/* options.c */
void nsv__options_defaults(nsv_server *s);

/* signal_drain.c: drop every nsv_drain_on_signal registration of s and
 * wait until no signal handler is using it (nsv_server_free). */
void nsv__signal_forget(nsv_server *s);

/* router.c: the method and flags checks of nsv__router_add. 0, or NSV_EINVAL
 * with the reason (static text) in *why. Methods are RFC 9110 tokens of at
 * most 64 bytes without lower-case letters; flags are enum nsv_route_flag
 * bits, and NSV_ROUTE_WEBSOCKET goes with GET only. */
int nsv__router_check(const char *method, size_t mlen, uint32_t flags, const char **why);

/* util/sse.c: nsv_sse_format with the detail set for server s and naming
 * the public call fn. */
int64_t nsv__sse_format(nsv_server *s, const char *fn, const char *event, size_t elen, const char *id, size_t idlen,
                        const char *data, size_t dlen, int64_t retry_ms, char *dst, size_t cap);

#endif
