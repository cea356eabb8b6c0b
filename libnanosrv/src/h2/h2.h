/* h2.h - HTTP/2 over nghttp2 (docs/HTTP2.md). A connection that speaks h2
 * becomes a session; each request stream is a virtual connection (fd -1,
 * proto nsv__proto_http) whose HTTP/1 bytes the session translates, so the
 * whole HTTP/1 machinery serves it. Built only with -DNSV_WITH_NGHTTP2. */
#ifndef NSV_H2_H
#define NSV_H2_H

#include "../loop/loop.h"

#define NSV__H2_MAX_CONTINUATIONS 8 /* CONTINUATION frames after one HEADERS */
#define NSV__H2_MAX_SETTINGS 32     /* entries of one SETTINGS frame */
#define NSV__H2_MAX_OUTBOUND_ACK 1000 /* queued PING/SETTINGS acks: a ping flood ends the session */
#define NSV__H2_OUT_MAX (256 * 1024)  /* frames pulled from nghttp2 while the socket has this much unsent */
#define NSV__H2_STREAM_BUF (64 * 1024) /* a stream's response body waiting for its window */
#define NSV__H2_HEAD_MAX (64 * 1024)   /* a response head the host wrote (far above any real one) */

#ifdef NSV_WITH_NGHTTP2
#include <nghttp2/nghttp2.h>

typedef struct nsv__h2s nsv__h2s;

/* One session (a connection speaking h2). */
typedef struct nsv__h2 {
    nghttp2_session *ng;
    nsv__loop *l;
    nsv__conn *c;        /* its connection */
    nsv__h2s *streams;   /* every stream nghttp2 has open, linked */
    uint32_t nstreams;
    uint32_t nlive;      /* streams with a virtual connection (a request the HTTP layer has) */
    uint8_t dead;        /* a fatal error: no more input, the connection ends once GOAWAY is out */
    uint8_t goaway;      /* draining: GOAWAY sent */
    uint8_t closing;     /* the connection is being closed: streams go without a word */
    uint8_t abused;      /* counted in NSV_M_H2_ABUSE */
    int64_t rst_tokens, rst_at; /* the client's RST_STREAM budget and when it was refilled (ms) */
    uint64_t held_bound; /* at least the request bytes its unseen streams buffer (stream.c body_budget) */
    char *names;         /* response header names in lower case (nghttp2 wants them so) */
    size_t names_cap;
} nsv__h2;

/* One request stream. The request is staged here until its header block
 * ends, then its virtual connection (c) takes the bytes; the response the
 * HTTP layer writes to c is parsed back into HEADERS and DATA. */
struct nsv__h2s {
    nsv__h2 *h;
    int32_t id;
    nsv__conn *c;           /* NULL before the header block ends and after its close */
    nsv__h2s *next, *prev;
    /* request */
    nsv__buf req;           /* HTTP/1.1 request head (and early body) being built */
    char *pseudo;           /* :method, :path, :authority, one after the other */
    uint32_t pseudo_len, pseudo_cap;
    uint32_t m_off, m_len, p_off, p_len, a_off, a_len;
    char *cookie;           /* cookie fields joined with "; " (RFC 9113 8.2.3) */
    uint32_t cookie_len, cookie_cap;
    uint32_t hdr_bytes;     /* decoded header bytes: past max_header_bytes it is a 431 */
    uint8_t line_done;      /* the request line is written */
    uint8_t has_cl;         /* content-length was sent */
    uint8_t too_big;
    uint8_t bad_host;       /* a Host header that is not :authority */
    uint8_t chunked_req;    /* the body is framed as chunked for the HTTP layer */
    uint8_t req_end;        /* END_STREAM seen */
    uint8_t gone;           /* nghttp2 closed it, or the session ends: no more frames */
    uint64_t unconsumed;    /* DATA bytes not yet returned to the windows (reading stopped) */
    /* response */
    uint8_t rstate;         /* 0 head, 1 body, 2 done */
    uint8_t kind;           /* NSV__BODY_* */
    uint8_t submitted;      /* HEADERS submitted */
    uint8_t deferred;       /* the data source said DEFERRED */
    uint8_t resp_end;       /* the body is complete (buffered) */
    nsv__buf rhead;         /* a response head that came in pieces */
    nsv__buf body;          /* decoded body bytes waiting for the window */
    uint64_t left;          /* BODY_LENGTH: bytes still owed */
    nsv__chunked ck;
};

/* session.c */
extern const nsv__proto nsv__proto_h2;
extern const nsv__h2_hooks nsv__h2_server_hooks;
/* The session's settings and defences from the server's options: fills
 * iv (at least 4 entries) and returns how many; *opt gets the nghttp2
 * options (nghttp2_option_del it). NSV_ENOMEM when nghttp2 has no memory. */
int nsv__h2_config(const nsv_server *s, void *iv, void **opt);
void nsv__h2_wake(nsv__h2 *h); /* frames may be ready: the session's connection goes on the flush list */

/* stream.c: nghttp2's callbacks for requests, and the hooks of a stream's connection */
int nsv__h2s_begin(nghttp2_session *ng, const nghttp2_frame *f, void *ud);
int nsv__h2s_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                    const uint8_t *value, size_t vlen, uint8_t flags, void *ud);
int nsv__h2s_frame(nghttp2_session *ng, const nghttp2_frame *f, void *ud);
int nsv__h2s_data(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *ud);
int nsv__h2s_closed(nghttp2_session *ng, int32_t id, uint32_t code, void *ud);
int nsv__h2s_sent(nghttp2_session *ng, const nghttp2_frame *f, void *ud);
/* Stream 1 of an upgraded connection: the HTTP/1.1 request that asked for it. */
int nsv__h2s_upgraded(nsv__h2 *h, const char *req, size_t len);
void nsv__h2s_free(nsv__h2 *h, nsv__h2s *s);
ssize_t nsv__h2s_send(nsv__loop *l, nsv__conn *c, const char *p, size_t n);
void nsv__h2s_arm(nsv__loop *l, nsv__conn *c);
void nsv__h2s_conn_closed(nsv__loop *l, nsv__conn *c);
#endif

#endif
