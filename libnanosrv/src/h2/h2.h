/* h2.h - HTTP/2 over nghttp2 (docs/HTTP2.md). A connection that speaks h2
 * becomes a session; each request stream is a virtual connection (fd -1,
 * proto nsv__proto_http) whose HTTP/1 bytes the session translates, so the
 * whole HTTP/1 machinery serves it. Built only with -DNSV_WITH_NGHTTP2. */
#ifndef NSV_H2_H
#define NSV_H2_H

#include "../loop/loop.h"

#define NSV__H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define NSV__H2_PREFACE_LEN 24
#define NSV__H2_MAX_CONTINUATIONS 8 /* CONTINUATION frames after one HEADERS */
#define NSV__H2_MAX_SETTINGS 32     /* entries of one SETTINGS frame */
#define NSV__H2_MAX_OUTBOUND_ACK 1000 /* queued PING/SETTINGS acks: a ping flood ends the session */

#ifdef NSV_WITH_NGHTTP2
typedef struct nsv__h2 nsv__h2;

/* The session's settings and defences from the server's options: fills
 * iv (at least 4 entries) and returns how many; *opt gets the nghttp2
 * options (nghttp2_option_del it). NSV_ENOMEM when nghttp2 has no memory. */
int nsv__h2_config(const nsv_server *s, void *iv, void **opt);
#endif

#endif
