/* server.h - the server, its loops (workers) and connections. */
#ifndef NSV_SERVER_H
#define NSV_SERVER_H

#include "../internal.h"
#include "../http/parse.h"
#include "../router/router.h"
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

#define NSV__MAX_LISTENERS 32
#define NSV__MAX_LOOPS 64
#define NSV__SCRATCH (256 * 1024) /* per-loop read buffer: a 64 KiB frame and more fit */
#define NSV__BLOCK (16 * 1024)    /* pooled per-connection buffer size */
#define NSV__BUF_MAX 0xFFFF0000u  /* 4 GiB - 64 KiB: largest buffer, so the largest reply */
#define NSV__POOL_MAX 256         /* pooled blocks kept per loop */
#define NSV__PIPELINE_OUT (64 * 1024) /* stop parsing ahead above this much output */
#define NSV__MAX_PARAMS 32
#define NSV__SWEEP_MS 100
#define NSV__CHUNK 1024           /* connection slots per table chunk */
#define NSV__MAX_CHUNKS 16384     /* 16M slots: the 24-bit slot field of an id */
#define NSV__GEN_MAX 0x1FFFFFFFu  /* generations fit 29 bits (tickets use 3 more) */

/* Connection ids: slot (24 bits) | loop (8 bits) | generation (31 bits) << 32. */
#define NSV__ID(slot, loop, gen) (((uint64_t)(gen) << 32) | ((uint64_t)(loop) << 24) | (uint64_t)(slot))
#define NSV__ID_SLOT(id) ((uint32_t)((id) & 0xFFFFFFu))
#define NSV__ID_LOOP(id) ((uint32_t)(((id) >> 24) & 0xFFu))
#define NSV__ID_GEN(id) ((uint32_t)((id) >> 32))

/* Where an HTTP/1 request is in its life (nsv__conn.state; 0 for the other
 * protocols, which keep their state in their own fields). */
enum nsv__http_state {
    NSV__C_NONE = 0,  /* not reading requests (closing, or not HTTP) */
    NSV__C_READ,      /* waiting for (the rest of) a request */
    NSV__C_PENDING,   /* request delivered; waiting for the host's reply */
    NSV__C_STREAM     /* streamed reply in progress */
};

typedef struct nsv__conn nsv__conn;
typedef struct nsv__loop nsv__loop;

/* What a protocol does with a connection: the loop knows connections only
 * through this table (one static instance per protocol; an upgrade or a
 * finished connect swaps it). Optional entries are NULL. */
enum { NSV__P_STREAM = 1,   /* reads stop while its own output is past half the cap
                               or a sharded host lags (raw TCP, WebSocket) */
       NSV__P_WATCH_HUP = 2 /* learn of the peer's EOF even while not reading */ };
typedef struct nsv__proto {
    const char *name;
    unsigned flags;
    void (*on_open)(nsv__loop *l, nsv__conn *c);      /* accepted (after TLS setup); optional */
    void (*on_readable)(nsv__loop *l, nsv__conn *c);  /* input, EOF or error to read */
    void (*on_event)(nsv__loop *l, nsv__conn *c);     /* optional: takes every poller event itself
                                                         (an outbound connect in progress) */
    int (*on_dirty)(nsv__loop *l, nsv__conn *c);      /* on the flush list: process buffered input;
                                                         1 = output may wait one turn (pipelining) */
    void (*on_flushed)(nsv__loop *l, nsv__conn *c);   /* output moved (some or all sent); optional */
    void (*on_blocked)(nsv__loop *l, nsv__conn *c);   /* output met a full socket; NULL: idle deadline */
    void (*on_timer)(nsv__loop *l, nsv__conn *c);     /* the deadline passed; NULL: close */
    void (*on_tick)(nsv__loop *l, nsv__conn *c);      /* each sweep otherwise; optional */
    void (*on_drain)(nsv__loop *l, nsv__conn *c);     /* each drain check; optional */
    void (*on_tls_ready)(nsv__loop *l, nsv__conn *c); /* TLS handshake finished; optional */
    void (*on_peer_eof)(nsv__loop *l, nsv__conn *c);  /* EOF seen while not reading; optional */
    void (*on_close)(nsv__loop *l, nsv__conn *c);     /* the slot is about to be freed; optional */
} nsv__proto;

extern const nsv__proto nsv__proto_http, nsv__proto_ws, nsv__proto_tcp, nsv__proto_connect;

/* What a reply's header block says (http/response.c). */
typedef struct nsv__hscan {
    unsigned seen;           /* which of the headers the library adds are present */
    uint32_t te_off, te_len; /* the Transfer-Encoding line in the block */
    uint64_t cl;             /* the Content-Length value, when present */
} nsv__hscan;

/* Growable byte buffer; memory from the loop pool when it is one block. */
typedef struct nsv__buf {
    char *p;
    uint32_t len, cap;
    uint32_t off; /* consumed prefix (output: bytes already sent) */
} nsv__buf;

struct nsv__conn {
    int fd;
    uint32_t gen;
    const nsv__proto *proto; /* NULL: a free slot */
    uint8_t state;      /* HTTP: enum nsv__http_state */
    uint8_t closing;    /* flush the output, then close (any protocol) */
    uint8_t keepalive;  /* current request keeps the connection */
    uint8_t head;       /* current request is HEAD */
    uint8_t seen;       /* the host has seen an event: send it CLOSE */
    uint8_t reading;    /* EPOLLIN armed */
    uint8_t writing;    /* EPOLLOUT armed */
    uint8_t dirty;      /* on the loop's flush list */
    uint8_t draining_close; /* answer with Connection: close */
    uint8_t req_started;    /* bytes of a new request received */
    uint8_t resp_started;   /* some response bytes queued for this request */
    uint8_t continue_sent;
    uint8_t peer_closed;    /* read side hit EOF */
    uint8_t http10;
    uint8_t lingering;      /* write side shut; discarding input until EOF */
    uint8_t served;         /* answered a request: idle now means idle keep-alive */
    uint16_t listener;
    uint16_t peer_port;
    uint32_t slot;
    uint32_t head_len;      /* parsed head length of the request in `in`, 0 = not yet */
    uint32_t scan_len;      /* head bytes already parsed without finding its end */
    int64_t body_need;      /* Content-Length body bytes still missing (-1 chunked) */
    uint32_t body_len;      /* decoded chunked body bytes so far */
    uint32_t raw_off;       /* chunked: raw (undecoded) data starts here */
    nsv__chunked chunk;
    int64_t deadline;       /* ms; 0 = none */
    uint64_t tag;
    nsv__buf in, out;
    struct nsv__conn *next_dirty;
    char peer[46];
    uint8_t peer_len;
    uint8_t ws_key_len;
    uint16_t ws_check;      /* upgrade request: 1 valid, else the status to answer */
    char ws_key[24];        /* Sec-WebSocket-Key of a valid upgrade request */
    int32_t route;          /* route of the current request / WebSocket */
    struct nsv__ws *ws;     /* WebSocket state once upgraded */
    void *tls;              /* TLS session (tls/), NULL for plain TCP */
    uint8_t paused;         /* raw TCP: host paused reading */
    uint8_t await_tls;      /* outbound tls://: TCP_CONNECTED waits for the handshake */
    uint8_t tls_host_len;
    char *tls_host;         /* outbound tls://: name for SNI and verification */
    uint8_t unwritable;     /* raw TCP, streamed reply: queued output went over the high water mark */
    uint8_t shut_wr;        /* raw TCP: shut the write side once output is sent */
    uint32_t high_water, low_water;
    uint8_t throttled;      /* not read until the host drains the queue (loop/throttle.c) */
    uint8_t no_body;        /* streamed reply: the status allows no body (204, 304) */
    uint8_t fixed_len;      /* streamed reply framed by the host's Content-Length */
    uint8_t held;           /* output held one turn for the next pipelined answer (loop.c) */
    uint8_t on_held;        /* linked on the loop's held list */
    uint8_t eof_seen;       /* HTTP: the peer's EOF was noticed (HANGUP or NSV_EVF_EOF given) */
    uint8_t watch_hup;      /* EPOLLRDHUP armed: learn of an EOF while not reading */
    struct nsv__conn *next_held;
    uint64_t stream_left;   /* fixed_len: body bytes still owed */
};

typedef struct nsv__listener {
    int fd;                      /* primary socket (worker 0 / single loop) */
    int wfd[NSV__MAX_LOOPS];     /* per-worker SO_REUSEPORT sockets (wfd[0] == fd) */
    int port;
    const nsv__proto *proto; /* what its connections speak */
    int tls;  /* NSV__TLS_* (tls/tls.h): 0 plain */
} nsv__listener;

/* Queue of serialized events: [uint32 size][nsv_event][bytes], 8-aligned. */
typedef struct nsv__evq {
    char *p;
    size_t len, cap, rd;
    uint32_t count;
} nsv__evq;

struct nsv__loop {
    nsv_server *srv;
    int idx;
    int epfd;
    int wakefd;          /* eventfd: wakeups from other threads */
    int64_t now;         /* ms, cached per iteration */
    int64_t next_sweep;
    int io_skips;        /* polls served from the queue without epoll_wait */
    /* Connection table: fixed top-level arrays, so chunks never move and
     * other threads may read tickets without locks. */
    nsv__conn *chunks[NSV__MAX_CHUNKS];
    _Atomic(_Atomic uint32_t *) tickets[NSV__MAX_CHUNKS];
    uint32_t nchunks, nslots, nused;
    uint32_t *freelist;
    uint32_t nfree, freecap;
    nsv__conn *dirty;    /* connections with output to flush */
    nsv__conn *held;     /* connections whose output waits for the next turn */
    char *scratch;
    char *pool[NSV__POOL_MAX];
    int npool;
    nsv__buf big[4];     /* released large buffers kept for reuse (no malloc churn) */
    int nbig;
    nsv__evq q;          /* events for the host (sharded: guarded by qlock) */
    char date[40];       /* "Date: ...\r\n" */
    int64_t date_sec;
    int64_t date_until;  /* loop time (ms) when the Date line must be checked again */
    uint32_t accept_paused_until; /* EMFILE back-off, ms (low 32 bits of now) */
    int64_t accept_pause_end;
    nsv__hdr hdrs[256];
    nsv__param params[NSV__MAX_PARAMS];
    char detail[256];
    char hc[128];           /* last reply header block that passed the check (response.c) */
    uint32_t hc_len;
    nsv__hscan hc_scan;
    /* sharded servers only */
    pthread_t thread;
    int started;
    pthread_mutex_t qlock;  /* guards q */
    pthread_cond_t qcond;   /* per-worker pollers wait here */
    int qwaiters;
    int pushed;             /* events pushed this iteration (notify the host) */
    pthread_mutex_t cmdlock;
    char *cmd, *cmd_spare;  /* commands from other threads */
    size_t cmd_len, cmd_cap, cmd_spare_cap;
    uint32_t rr;            /* hand-off round robin */
    void *tls;              /* per-loop mbedTLS objects (tls/tls.c) */
    int locks_ready;
    atomic_int has_cmd;     /* commands waiting (checked without the lock) */
    int forwarded;          /* running a call queued by another thread (nsv__out_limit) */
    _Atomic size_t backlog; /* bytes in q not yet taken by the host (loop/throttle.c) */
    atomic_int throttled;   /* stream reads stopped until the host drains q */
    uint64_t *thr;          /* ids of the connections stopped */
    uint32_t nthr, thr_cap;
};

/* Per-slot ticket readable from any thread: (generation << 3) | wsok | state.
 * NSV__T_WSOK rides on PENDING when the request is a valid WebSocket
 * handshake (c->ws_check == 1, decided before the request is emitted), so
 * nsv_ws_upgrade from another thread knows its answer synchronously. */
enum { NSV__T_IDLE = 0, NSV__T_PENDING = 1, NSV__T_STREAM = 2, NSV__T_WS = 3 };
#define NSV__T_STATE 3u  /* mask of the state bits */
#define NSV__T_WSOK 4u   /* PENDING: the request is a valid upgrade */
#define NSV__T_SHIFT 3   /* generation starts here */
static inline void nsv__ticket(nsv__loop *l, const nsv__conn *c, unsigned st)
{
    _Atomic uint32_t *t = atomic_load_explicit(&l->tickets[c->slot / NSV__CHUNK], memory_order_relaxed);
    if (st == NSV__T_PENDING && c->ws_check == 1)
        st |= NSV__T_WSOK;
    atomic_store_explicit(&t[c->slot % NSV__CHUNK], (c->gen << NSV__T_SHIFT) | st, memory_order_release);
}
#define NSV__CONN(l, i) (&(l)->chunks[(i) / NSV__CHUNK][(i) % NSV__CHUNK])

struct nsv_server {
    nsv__alloc alloc;
    uint64_t detail_serial; /* tells this server's error details apart (detail.c) */
    /* options */
    int64_t max_header_bytes, max_headers, max_uri, max_body;
    int64_t request_timeout_ms, idle_timeout_ms, max_conns, max_output;
    int64_t auto_404;
    int64_t ws_max_message, ws_ping_interval_ms, ws_control_events, ws_close_timeout_ms;
    int64_t tcp_high_water, tcp_low_water, connect_timeout_ms, shard_accept;
    int64_t tls_verify_client, tls_verify_server;
    atomic_llong tls_failures; /* handshakes that failed */
    void *tls;           /* TLS option strings (tls/tls.c) */
    nsv__router *router;
    nsv__listener listeners[NSV__MAX_LISTENERS];
    int nlisteners;
    nsv__loop *loops[NSV__MAX_LOOPS];
    int nloops;
    int sharded;
    atomic_int stop;
    atomic_int draining;
    atomic_int drain_claimed;    /* the first nsv_drain_start sets the deadline... */
    _Atomic int64_t drain_deadline, drain_total; /* ...before `draining` shows */
    atomic_int nconns;   /* open connections across loops */
    int notify[2];       /* sharded: pipe; readable when events wait */
    atomic_int notify_armed;
    atomic_int resolvers; /* name lookups in flight (they post back to a loop) */
    int workers_started;
    pthread_mutex_t start_lock;
    nsv_event_fn cb;
    void *cb_ud;
};

/* Output a call may queue. A call queued by another thread was accepted
 * before the worker saw it; that host learns of the backlog only from a later
 * TCP_WRITABLE event, so it gets four times the room before the connection is
 * closed with an ERROR event. */
static inline uint64_t nsv__out_limit(const nsv__loop *l)
{
    return (uint64_t)l->srv->max_output << (l->forwarded ? 2 : 0);
}

/* This connection's unsent output is past max_output / div. */
static inline int nsv__out_over(const nsv__loop *l, const nsv__conn *c, int div)
{
    return (int64_t)(c->out.len - c->out.off) > l->srv->max_output / div;
}

/* detail.c (nsv__set_detail and nsv__fail are declared in internal.h) */
uint64_t nsv__detail_serial(void);
uint64_t nsv__detail_mark(void);
int nsv__set_detail_text(nsv_server *s, int err, const char *text);
int nsv__detail_since(nsv_server *s, uint64_t mark);
int nsv__set_detail_since(nsv_server *s, uint64_t mark, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
uint64_t nsv__call_enter(nsv_server *s, const char *fn);
void nsv__call_leave(void);

/* loop.c */
nsv__loop *nsv__loop_new(nsv_server *s, int idx);
void nsv__loop_free(nsv__loop *l);
int nsv__loop_add_listener(nsv__loop *l, int lidx);
int nsv__loop_run_once(nsv__loop *l, int timeout_ms);
nsv__conn *nsv__conn_get(nsv__loop *l, uint64_t id);
void nsv__conn_close(nsv__loop *l, nsv__conn *c);
void nsv__conn_mark_dirty(nsv__loop *l, nsv__conn *c);
int nsv__conn_flush(nsv__loop *l, nsv__conn *c);
void nsv__conn_set_events(nsv__loop *l, nsv__conn *c, int rd, int wr);
void nsv__loop_flush_dirty(nsv__loop *l);
void nsv__loop_turn(nsv__loop *l);
uint64_t nsv__conn_id(nsv__loop *l, nsv__conn *c);
int nsv__throttle(nsv__loop *l, nsv__conn *c);
int nsv__thread_start(pthread_t *t, const pthread_attr_t *at, void *(*fn)(void *), void *arg);
void nsv__throttle_release(nsv__loop *l);
void nsv__throttle_check(nsv__loop *l);
nsv__conn *nsv__conn_alloc(nsv__loop *l);
void nsv__cmd_run(nsv__loop *l);

/* Per-connection operations: run in place on the owning loop (conn_api.c)
 * or queued to it from another thread (shard.c). */
enum {
    NSV__OP_REPLY = 1, NSV__OP_START, NSV__OP_CHUNK, NSV__OP_END, NSV__OP_CLOSE, NSV__OP_TAG,
    NSV__OP_WS_UPGRADE, NSV__OP_WS_SEND, NSV__OP_WS_CLOSE, NSV__OP_WS_BCAST,
    NSV__OP_TCP_SEND = 20, NSV__OP_TCP_SHUTDOWN, NSV__OP_TCP_ABORT, NSV__OP_TCP_PAUSE, NSV__OP_TCP_WATER,
    NSV__OP_ADOPT = 100, NSV__OP_RESOLVED, NSV__OP_CONNECT /* loop-level, shard.c only */
};

/* conn_api.c / options.c / server.c */
int nsv__conn_op(nsv_server *s, nsv__loop *l, uint32_t op, uint64_t id, int status, const char *h,
                 size_t hlen, const char *b, size_t blen, uint64_t arg);
void nsv__options_defaults(nsv_server *s);
void nsv__drain_check(nsv__loop *l);
int nsv__scan_headers(const char *h, size_t n, unsigned *seen);
int nsv__headers_scan(nsv_server *s, const char *h, size_t n, nsv__hscan *out);
int nsv__reply_check(nsv_server *s, int status, const nsv__hscan *hs, int stream);

/* shard.c */
int nsv__shard_start(nsv_server *s, int workers);
int nsv__shard_started(nsv_server *s);
int nsv__setup_begin(nsv_server *s, const char *call, const char *what);
void nsv__setup_end(nsv_server *s);
void nsv__shard_stop(nsv_server *s);
nsv__loop *nsv__shard_current(nsv_server *s);
int nsv__shard_forward(nsv_server *s, uint32_t op, uint64_t id, int status, const char *h, size_t hlen,
                       const char *b, size_t blen, uint64_t arg);
int nsv__shard_broadcast(nsv_server *s, int32_t route, int opcode, const char *data, size_t len);
int64_t nsv__shard_connect(nsv_server *s, const char *url, size_t len);
int nsv__shard_poll(nsv_server *s, nsv_event *evs, int max, char *arena, size_t cap, int timeout_ms);
int64_t nsv__shard_need(nsv_server *s);
int nsv__shard_fd(nsv_server *s);
int nsv__shard_run(nsv_server *s);
int nsv__shard_drain_wait(nsv_server *s);
void nsv__shard_handoff(nsv__loop *from, int fd, int lidx, const struct sockaddr_storage *ss);
void nsv__post_resolved(nsv__loop *l, uint64_t id, int err, const struct sockaddr_storage *ss);

/* router.c: the method and flags checks of nsv__router_add. 0, or NSV_EINVAL
 * with the reason (static text) in *why. Methods are RFC 9110 tokens of at
 * most 64 bytes without lower-case letters; flags are enum nsv_route_flag
 * bits, and NSV_ROUTE_WEBSOCKET goes with GET only. */
int nsv__router_check(const char *method, size_t mlen, uint32_t flags, const char **why);

/* buf.c */
int64_t nsv__buf_grow_cap(uint32_t cap, uint64_t need);
int nsv__buf_reserve(nsv__loop *l, nsv__buf *b, size_t extra);
void nsv__buf_release(nsv__loop *l, nsv__buf *b);
int nsv__buf_append(nsv__loop *l, nsv__buf *b, const void *p, size_t n);

/* evq.c */
char *nsv__evq_push(nsv__loop *l, nsv_event **ev, size_t data_len);
void nsv__evq_commit(nsv__loop *l);
int nsv__evq_emit(nsv__loop *l, nsv__conn *c, uint32_t type, int32_t code, uint32_t flags,
                  const char *body, size_t blen);
int nsv__evq_emit_simple(nsv__loop *l, nsv__conn *c, uint32_t type, int32_t code,
                         const char *body, size_t blen);
int nsv__evq_copy_out(nsv__loop *l, nsv_event *evs, int max, char *arena, size_t cap,
                      size_t *aoff);
int64_t nsv__evq_need(nsv__loop *l);

/* http_conn.c */
void nsv__http_process(nsv__loop *l, nsv__conn *c);
void nsv__out_queued(nsv__loop *l, nsv__conn *c);
void nsv__read_resume(nsv__loop *l, nsv__conn *c);

/* tcp.c */
nsv__conn *nsv__loop_adopt(nsv__loop *l, int fd, int lidx, const struct sockaddr_storage *ss);
int nsv__tcp_send(nsv__loop *l, nsv__conn *c, const char *data, size_t len);
int nsv__tcp_op(nsv__loop *l, nsv__conn *c, int op, int64_t a, int64_t b);
int64_t nsv__tcp_connect_here(nsv__loop *l, const char *url, size_t len);
void nsv__tcp_resolved(nsv__loop *l, uint64_t id, int err, const struct sockaddr_storage *ss);

/* ws_conn.c */
void nsv__ws_check_request(nsv__conn *c, const nsv__request *r);
int nsv__ws_accept(nsv__loop *l, nsv__conn *c, const char *extra, size_t elen);
int nsv__ws_send(nsv__loop *l, nsv__conn *c, int opcode, const char *data, size_t len);
int nsv__ws_close(nsv__loop *l, nsv__conn *c, int code, const char *reason, size_t len);
int nsv__ws_broadcast_loop(nsv__loop *l, int32_t route, int opcode, const char *data, size_t len);

/* response.c */
int nsv__reply(nsv__loop *l, nsv__conn *c, int status, const char *hdrs, size_t hlen,
               const char *body, size_t blen, int stream);
int nsv__send_chunk(nsv__loop *l, nsv__conn *c, const char *data, size_t len);
int nsv__reply_end(nsv__loop *l, nsv__conn *c);
int nsv__error_reply(nsv__loop *l, nsv__conn *c, int status);
void nsv__update_date(nsv__loop *l);

#endif
