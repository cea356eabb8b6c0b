/* loop.h - the loop layer: the server's shared state, its loops (one per
 * worker), the connection table and what every protocol hands the loop
 * (nsv__proto). Nothing here knows HTTP, WebSocket or raw TCP beyond the
 * per-connection fields each of them keeps in nsv__conn. */
#ifndef NSV_LOOP_H
#define NSV_LOOP_H

#include "../internal.h"
/* Type only: the chunked decoder state an HTTP connection carries in its
 * record (the one include of a higher layer; no function of http/ is used). */
#include "../http/parse.h"
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

#define NSV__MAX_LISTENERS 32
#define NSV__MAX_LOOPS 64
#define NSV__SCRATCH (256 * 1024) /* per-loop read buffer: a 64 KiB frame and more fit */
#define NSV__BLOCK (16 * 1024)    /* pooled per-connection buffer size */
#define NSV__BUF_MAX 0xFFFF0000u  /* 4 GiB - 64 KiB: largest buffer, so the largest reply */
#define NSV__POOL_MAX 256         /* pooled blocks kept per loop */
#define NSV__DIRECT_MIN (16 * 1024)   /* writes this large skip the buffer when it is empty */
#define NSV__PIPELINE_OUT (64 * 1024) /* held output and pipelined parsing stop above this */
#define NSV__SWEEP_MS 100
#define NSV__SHED_PICK 16         /* connections one shedding scan keeps in order (shed.c) */
#define NSV__CHUNK 1024           /* connection slots per table chunk */
#define NSV__MAX_CHUNKS 16384     /* 16M slots: the 24-bit slot field of an id */
#define NSV__GEN_MAX 0x1FFFFFFFu  /* generations fit 29 bits (tickets use 3 more) */

/* Connection ids: slot (24 bits) | loop (8 bits) | generation (29 bits) << 32. */
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
                                                         (an outbound connect in progress, and HTTP
                                                         client connections, which read before they send) */
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
    int64_t accepted;       /* ms: when its loop adopted it (0 outbound); shedding orders by it (shed.c) */
    int64_t req_start_us;   /* HTTP: > 0 head complete (µs, monotonic), < 0 answered and not yet sent (http/answer.h) */
    uint64_t tag;
    nsv__buf in, out;
    uint32_t out_counted;   /* the part of out's unsent bytes in NSV_M_OUTPUT_QUEUED (loop.c) */
    struct nsv__conn *next_dirty;
    char peer[46];
    uint8_t peer_len;
    uint8_t ws_key_len;
    uint16_t ws_check;      /* upgrade request: 1 valid, else the status to answer */
    char ws_key[24];        /* Sec-WebSocket-Key of a valid upgrade request */
    uint16_t ws_pmd;        /* its permessage-deflate offer agreed to, packed (ws/deflate.h) */
    int32_t route;          /* route of the current request / WebSocket */
    struct nsv__ws *ws;     /* WebSocket state once upgraded */
    void *tls;              /* TLS session (tls/), NULL for plain TCP */
    struct nsv__edge_conn *edge; /* PROXY protocol state and the front's fields (edge.c), or NULL */
    uint8_t paused;         /* raw TCP: host paused reading */
    uint8_t await_tls;      /* outbound tls://: TCP_CONNECTED waits for the handshake */
    uint8_t tls_host_len;
    char *tls_host;         /* outbound tls://: name for SNI and verification */
    uint8_t unwritable;     /* raw TCP, streamed reply: queued output went over the high water mark */
    uint8_t shut_wr;        /* raw TCP: shut the write side once output is sent */
    uint8_t water_events;   /* WebSocket: TCP_WRITABLE events (the host set water marks) */
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
    /* a streamed request body (http/body.c) */
    uint8_t bstream;        /* its bytes are being delivered in BODY events */
    uint8_t continue_wait;  /* Expect: 100-continue unless replied: 1 at the next turn,
                               2 when the host's next poll says so (host_turns),
                               3 when the host calls nsv_continue (expect_manual) */
    int64_t bs_left;        /* Content-Length bytes still to come; -1 chunked */
    uint64_t bs_total;      /* bytes delivered (max_body) */
    /* A file sent after everything in `out` (loop.c, nsv__conn_attach_file):
     * file_left bytes of file_fd from file_off. Nothing is appended to `out`
     * while it is on (HTTP stops parsing), so bytes leave in order. */
    uint8_t file_on;
    uint8_t file_copy;      /* read into `out` and written (TLS, or sendfile refused) */
    int file_fd;
    uint64_t file_off, file_left;
    uint8_t gzip_ok;        /* the current request accepts gzip (noted only with NSV_OPT_GZIP_MIN_SIZE) */
    void *gz;               /* streamed reply: its deflate stream (http/gzip.c) */
    char *reason;           /* nsv_set_reason: length byte + phrase for the next status line, or NULL */
    uint8_t httpc;          /* a connection of the HTTP client (core/http_client.c): tag = its request id
                               (0 idle in the pool), route = its origin */
    /* An outbound connect made for a protocol above raw TCP (the WebSocket
     * client): once TCP is up, the connect path hands the connection to
     * `then` (its on_open runs), whose on_close also runs if the connect
     * fails first; `hs` is that protocol's state until then. */
    const struct nsv__proto *then;
    void *hs;
    /* HTTP/2 (h2/): a session's connection holds its session in h2; a
     * request stream is a virtual connection (fd -1, never polled) with its
     * stream in h2s and its session's connection in h2_parent. The loop
     * reaches the h2 layer for these only through nsv_server.h2_hooks. */
    void *h2;
    struct nsv__h2s *h2s;
    struct nsv__conn *h2_parent;
};

typedef struct nsv__listener {
    int wfd[NSV__MAX_LOOPS];     /* its socket per loop: SO_REUSEPORT copies, or only wfd[0] */
    int port;
    const nsv__proto *proto; /* what its connections speak */
    int tls;  /* NSV__TLS_* (tls/tls.h): 0 plain */
    int handoff; /* sharded: its only socket (wfd[0], adopted by nsv_listen_fd) hands connections out */
    int http2;   /* NSV_OPT_HTTP2 as nsv_listen found it (0 for raw TCP) */
    struct nsv__edge *edge; /* PROXY protocol and address lists (listener_api.c); NULL: none */
} nsv__listener;

/* Queue of serialized events (evq.c): [uint32 size][uint32 data_len][nsv_event][data], 8-aligned. */
typedef struct nsv__evq {
    char *p;
    size_t len, cap, rd;
    uint32_t count;
} nsv__evq;

/* Host timers (timer.c): only loop 0 fires them; any thread adds and cancels. */
typedef struct nsv__timers {
    pthread_mutex_t lock;      /* guards everything below but next_due */
    struct nsv__timer *rec;    /* records; free ones are chained from `free` */
    uint32_t *heap;            /* record indices, earliest due first */
    uint32_t *hash;            /* id -> record index (UINT32_MAX empty), hcap a power of 2 */
    uint32_t cap, nheap, nlive, hcap, free;
    int64_t last_id;           /* ids count up from 1 and are never reused */
    _Atomic int64_t next_due;  /* earliest due time, INT64_MAX none: read by the poll unlocked */
    int ready;
} nsv__timers;

struct nsv__loop {
    nsv_server *srv;
    int idx;
    int epfd;
    int wakefd;          /* eventfd: wakeups from other threads */
    int64_t now;         /* ms, cached per iteration */
    int64_t now_us;      /* the same instant in µs (CLOCK_MONOTONIC): request heads are stamped with it */
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
    nsv__buf big_bufs[4]; /* released large buffers kept for reuse (no malloc churn) */
    int nbig_bufs;
    nsv__evq events;     /* events for the host (sharded: guarded by qlock) */
    int64_t accept_pause_end; /* out of descriptors: accepts resume at this time */
    struct {                  /* shed.c: the connections to close first, from one scan */
        int64_t at;           /* l->now of that scan */
        uint64_t ids[NSV__SHED_PICK];
        uint8_t n, next, more; /* more: the scan found more than it kept */
    } shed;
    struct nsv__http_loop *http; /* HTTP's per-loop scratch (http/http.h), plain memory */
    /* sharded servers only */
    pthread_t thread;
    int started;
    pthread_mutex_t qlock;  /* guards events */
    pthread_cond_t qcond;   /* per-worker pollers wait here */
    int qwaiters;
    atomic_int wake_pollers; /* nsv_wakeup asked this worker to broadcast qcond: the
                                caller may be a signal handler, which must not touch
                                a condition variable */
    int pushed;             /* events pushed this iteration (notify the host) */
    int host_turns;         /* another thread takes the events (pull mode): a request's
                               "one turn" is that thread's next poll, not this loop's */
    /* Under qlock: connections whose REQUEST (streamed body, Expect:
     * 100-continue) the host took in its last poll, or WebSockets whose
     * failure waits for the host to answer what came before it (ws_conn.c);
     * its next poll sends them NSV__OP_CONTINUE (core/shard.c). */
    uint64_t cont_ids[256];
    uint32_t cont_n;
    pthread_mutex_t cmdlock;
    char *cmd, *cmd_spare;  /* commands from other threads */
    size_t cmd_len, cmd_cap, cmd_spare_cap;
    uint32_t handoff_next;  /* round robin of sockets handed to other loops */
    void *tls;              /* per-loop mbedTLS objects (tls/tls.c) */
    int locks_ready;
    atomic_int has_cmd;     /* commands waiting (checked without the lock) */
    int forwarded;          /* running a call queued by another thread (nsv__out_limit) */
    _Atomic size_t backlog; /* bytes in events not yet taken by the host (loop/throttle.c) */
    atomic_int throttled;   /* stream reads stopped until the host drains events */
    uint64_t *throttled_ids; /* ids of the connections stopped */
    uint32_t nthrottled, throttled_cap;
    nsv__timers timers;
    struct nsv__httpc_loop *httpc; /* the HTTP client's requests and pool (core/http_client.c), or NULL */
    _Atomic uint64_t metrics[NSV_M_COUNT]; /* this worker's counters and gauges (loop/metrics.h) */
    struct nsv__access_q *access; /* access records not yet taken (core/access_log.c), or NULL */
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

/* What the outbound HTTP client (core/http_client.c, a layer above this
 * one) hears of its connections (nsv__conn.httpc set): the loop, the connect
 * path and TLS call it through this table, which the server installs. */
typedef struct nsv__conn_hooks {
    void (*connected)(nsv__loop *l, nsv__conn *c);
    void (*conn_error)(nsv__loop *l, nsv__conn *c, int code, const char *msg, size_t n);
    void (*closed)(nsv__loop *l, nsv__conn *c);
    void (*after_close)(nsv__loop *l, int32_t origin);
    void (*stop)(nsv__loop *l);
    void (*loop_free)(nsv__loop *l);
} nsv__conn_hooks;

/* What the loop and HTTP layers need of HTTP/2 (h2/, a layer above them),
 * installed by the server when the library has nghttp2 (else NULL).
 * start: c (an HTTP connection) becomes a session; data[0..len) are bytes
 * already read for it (the preface onwards). With up set, c answered
 * "Upgrade: h2c": up->settings is the decoded HTTP2-Settings and up->req
 * the request head that becomes stream 1. 0, or < 0 when c was closed.
 * send: a stream's HTTP/1 output, as a socket would take it (bytes taken,
 * or -1 with errno EAGAIN while the stream's window is full).
 * arm: a stream's reading (c->reading) changed. closed: a stream's
 * connection is being closed. */
#define NSV__H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" /* a client's first bytes */
#define NSV__H2_PREFACE_LEN 24
typedef struct nsv__h2_upgrade {
    const char *settings, *req;
    size_t settings_len, req_len;
    int head;
} nsv__h2_upgrade;
typedef struct nsv__h2_hooks {
    int (*start)(nsv__loop *l, nsv__conn *c, const char *data, size_t len, const nsv__h2_upgrade *up);
    ssize_t (*send)(nsv__loop *l, nsv__conn *c, const char *p, size_t n);
    void (*arm)(nsv__loop *l, nsv__conn *c);
    void (*closed)(nsv__loop *l, nsv__conn *c);
} nsv__h2_hooks;

struct nsv_server {
    nsv__alloc alloc;
    const nsv__conn_hooks *httpc_hooks; /* the HTTP client's (set by nsv_server_new*) */
    const nsv__h2_hooks *h2_hooks;      /* HTTP/2's, or NULL without nghttp2 */
    uint64_t detail_serial; /* tells this server's error details apart (detail.c) */
    /* options */
    int64_t max_header_bytes, max_headers, max_uri, max_body;
    int64_t request_timeout_ms, idle_timeout_ms, max_conns, max_output;
    int64_t auto_404;
    int64_t ws_max_message, ws_ping_interval_ms, ws_control_events, ws_close_timeout_ms;
    int64_t tcp_high_water, tcp_low_water, connect_timeout_ms, shard_accept;
    int64_t reuseport;       /* NSV_OPT_REUSEPORT: SO_REUSEPORT on later nsv_listen sockets */
    int64_t tls_verify_client, tls_verify_server;
    int64_t stream_body;  /* NSV_OPT_STREAM_BODY */
    int64_t expect_manual; /* NSV_OPT_EXPECT_MANUAL: 100 Continue only by nsv_continue */
    int64_t metrics_latency; /* NSV_OPT_METRICS_LATENCY: time requests for the histograms */
    int64_t access_log;      /* NSV_OPT_ACCESS_LOG: access records kept per worker, 0 off */
    int64_t shed;            /* NSV_OPT_SHED: make room at max_conns (shed.c) */
    int64_t http2, h2_max_streams, h2_window, h2_hpack_table, h2_max_resets; /* NSV_OPT_HTTP2, NSV_OPT_H2_* */
    int64_t tls_tickets, tls_ticket_lifetime_s, tls_session_cache; /* NSV_OPT_TLS_TICKETS.. */
    int64_t ws_deflate, ws_deflate_min_size, ws_deflate_window_bits; /* NSV_OPT_WS_DEFLATE* */
    int64_t h2_body_buffer;  /* NSV_OPT_H2_BODY_BUFFER (h2/stream.c body_budget) */
    int64_t gzip_min_size, gzip_level; /* NSV_OPT_GZIP_MIN_SIZE (0 off), NSV_OPT_GZIP_LEVEL */
    int64_t http_per_origin, http_pool_idle_ms, http_head_timeout_ms, http_timeout_ms,
            http_read_timeout_ms, http_max_head, http_max_headers, http_max_body; /* NSV_OPT_HTTP_* */
    char *gzip_types;     /* NSV_OPT_GZIP_TYPES, normalised (http/gzip.c); NULL: the default list */
    int stream_routes;    /* some route has NSV_ROUTE_STREAM_BODY */
    atomic_llong tls_failures; /* handshakes that failed */
    void *tls;           /* TLS option strings (tls/tls.c) */
    struct nsv__router *router;
    struct nsv__mount *mounts; /* static directories (http/static.c), checked before routes */
    int nmounts;
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
    atomic_int signal_regs; /* nsv_drain_on_signal registrations (core/signal_drain.c) */
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

/* Nothing waits to be sent: neither buffered bytes nor a file. */
static inline int nsv__out_empty(const nsv__conn *c)
{
    return c->out.len == c->out.off && !c->file_on;
}

/* A command another thread hands a loop (cmdq.c): fn runs on the loop with
 * the command; h and b point at the hlen and blen bytes copied with it (an
 * address, for the commands that carry one, travels as the h bytes). */
typedef struct nsv__cmd nsv__cmd;
struct nsv__cmd {
    void (*fn)(nsv__loop *l, const nsv__cmd *c);
    uint32_t op;
    int32_t status;
    uint64_t id;
    uint64_t arg;
    size_t hlen, blen;
    const char *h, *b;
};

/* loop.c */
nsv__loop *nsv__loop_new(nsv_server *s, int idx);
void nsv__loop_free(nsv__loop *l);
int nsv__loop_fd(const nsv__loop *l);
int nsv__loop_add_listener(nsv__loop *l, int lidx);
void nsv__loop_remove_fd(nsv__loop *l, int fd);
int nsv__loop_watch(nsv__loop *l, nsv__conn *c, int rd, int wr);
int nsv__loop_run_once(nsv__loop *l, int timeout_ms);
void nsv__loop_flush_dirty(nsv__loop *l);
void nsv__loop_turn(nsv__loop *l);
void nsv__loop_defer(nsv__loop *l, nsv__conn *c);
nsv__conn *nsv__loop_adopt(nsv__loop *l, int fd, int lidx, const struct sockaddr_storage *ss);
nsv__conn *nsv__conn_alloc(nsv__loop *l);
nsv__conn *nsv__conn_get(nsv__loop *l, uint64_t id);
uint64_t nsv__conn_id(nsv__loop *l, nsv__conn *c);
void nsv__conn_close(nsv__loop *l, nsv__conn *c);
void nsv__conn_mark_dirty(nsv__loop *l, nsv__conn *c);
int nsv__conn_flush(nsv__loop *l, nsv__conn *c);
void nsv__conn_set_events(nsv__loop *l, nsv__conn *c, int rd, int wr);
/* An IPv4 or IPv6 address as text and its port; "" and 0 for other families. */
void nsv__addr_format(const struct sockaddr_storage *ss, char *out, size_t cap, unsigned *port);
void nsv__conn_format_peer(nsv__conn *c, const struct sockaddr_storage *ss);
size_t nsv__conn_send_direct(nsv__conn *c, const void *head, size_t hlen, const char *data, size_t len);
void nsv__out_queued(nsv__loop *l, nsv__conn *c);
void nsv__conn_attach_file(nsv__conn *c, int fd, uint64_t off, uint64_t len);
void nsv__read_resume(nsv__loop *l, nsv__conn *c);
void nsv__conn_pause(nsv__loop *l, nsv__conn *c, int paused);
void nsv__drain_check(nsv__loop *l);

/* cmdq.c */
void nsv__loop_wake(nsv__loop *l);
int nsv__cmd_push(nsv__loop *l, const nsv__cmd *c, const char *h, const char *b);
void nsv__cmd_run(nsv__loop *l);
void nsv__loop_handoff(nsv__loop *from, int fd, int lidx, const struct sockaddr_storage *ss);

/* shed.c */
int nsv__shed(nsv__loop *l);

/* throttle.c */
int nsv__throttle(nsv__loop *l, nsv__conn *c);
void nsv__throttle_release(nsv__loop *l);
void nsv__throttle_check(nsv__loop *l);

/* buf.c */
int64_t nsv__buf_grow_cap(uint32_t cap, uint64_t need);
int nsv__buf_reserve(nsv__loop *l, nsv__buf *b, size_t extra);
void nsv__buf_release(nsv__loop *l, nsv__buf *b);
int nsv__buf_append(nsv__loop *l, nsv__buf *b, const void *p, size_t n);

/* timer.c */
void nsv__timers_init(nsv__timers *t);
void nsv__timers_free(nsv_server *s, nsv__timers *t);
int64_t nsv__timer_add(nsv__loop *l, int64_t delay_ms, int64_t repeat_ms, uint64_t tag);
int nsv__timer_cancel(nsv__loop *l, int64_t id);
int64_t nsv__timers_wait(nsv__loop *l);
int nsv__timer_deliver(nsv__loop *l, int64_t id);
void nsv__timers_fire(nsv__loop *l);

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

#endif
