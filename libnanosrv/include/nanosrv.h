/*
 * nanosrv.h - the public interface of libnanosrv, an embeddable HTTP/1.1,
 * WebSocket and raw-TCP server library.
 *
 * This header is the whole contract. Anything not declared here is internal.
 *
 * Design in one paragraph: the host creates a server, adds listeners and
 * routes, then calls nsv_poll() in a loop. nsv_poll() runs the event loop in
 * the caller's thread (single-loop servers) or drains events produced by the
 * worker threads (sharded servers), and fills two caller-provided buffers: an
 * array of fixed-layout nsv_event records and a byte "arena" that holds every
 * string of those events (method, path, headers, body, ...). Records refer to
 * the arena by offset and length, so a host language turns them into strings
 * by slicing one buffer it owns. The host answers by connection id
 * (nsv_reply, nsv_ws_send, ...). Connection ids are 64-bit values made of a
 * slot, a worker index and a generation: a stale id returns NSV_ESTALE and
 * never touches another connection.
 *
 * FFI rules kept by this header: no varargs, no struct passed by value, no
 * function-like macros needed, fixed-width integer types only. The region
 * between NSV_CDEF_BEGIN and NSV_CDEF_END is cut out mechanically by
 * tools/gen_cdef.py into bindings/cdef/ for LuaJIT, cffi and koffi.
 *
 * Errors: functions returning int or int64_t return a negative NSV_E* code
 * on failure. nsv_strerror() gives a fixed message for each code;
 * nsv_last_error_detail(srv) says what was wrong in the last failure of a
 * call on srv made by the calling thread (which argument, which rule), and
 * nsv_last_error_detail(NULL) the same for calls without a server
 * (utilities, event readers, a NULL srv). Details are kept per server and
 * per thread: a failure on one server or in another thread never changes it.
 *
 * Threads.
 *
 * Single loop (nsv_server_new): the server belongs to the thread that polls
 * it (nsv_poll, nsv_run, nsv_drain); every call is made from that thread,
 * callbacks (nsv_set_callback) run in it, and setup calls (nsv_route,
 * nsv_listen, nsv_listen_fd, nsv_set_int, nsv_set_str, nsv_set_callback)
 * are allowed before the first poll and between polls.
 *
 * Sharded (nsv_server_new_sharded): worker threads run the loops. They start
 * at the first nsv_poll, nsv_poll_worker, nsv_run, nsv_fd, nsv_drain or
 * nsv_connect; until then one thread sets the server up, and from then on
 * the setup calls above return NSV_ESTATE. The connection calls
 *   nsv_reply, nsv_reply_batch, nsv_reply_start, nsv_set_reason, nsv_continue, nsv_send_chunk,
 *   nsv_reply_end, nsv_close, nsv_conn_set_tag, nsv_ws_upgrade, nsv_ws_send,
 *   nsv_ws_close, nsv_ws_send_many, nsv_ws_broadcast, nsv_send,
 *   nsv_shutdown, nsv_abort, nsv_pause_read, nsv_set_water_marks, nsv_connect
 * are safe from any thread, at once from many. Made by the worker that owns
 * the connection (inside a callback) they act at once. From any other thread
 * the id and the connection's state are checked at once (NSV_ESTALE,
 * NSV_ESTATE, and NSV_EPARSE from nsv_ws_upgrade, come back synchronously)
 * and the work is queued to the owning worker; a failure found only there
 * (the output limit, memory) arrives as an NSV_EV_ERROR event and closes the
 * connection. nsv_connect from a non-worker thread waits for a worker to
 * allocate the id. nsv_conn_tag and nsv_conn_queued answer only on the
 * owning worker (NSV_ENOTSUP elsewhere). Callbacks run on the worker
 * threads, concurrently: the events of one connection come in order from
 * its worker, but the same callback runs on several workers at once and must
 * be thread-safe. nsv_poll is called by one thread at a time, nsv_poll_worker
 * by one thread per worker; nsv_poll_need, nsv_get_int and nsv_listener_port
 * work from any thread once the workers run, and nsv_drain from any thread.
 *
 * Both: nsv_stop, nsv_wakeup and nsv_drain_start are safe from any thread and
 * from signal handlers. nsv_server_free must not run while another thread is
 * inside any call on the same server: stop the poller (nsv_stop), join it,
 * then free. Error details are per server and per thread (see Errors
 * above). Functions without
 * a server (nsv_ev_*, encoders, JSON, nsv_url_parse, nsv_strerror, ...) are
 * safe anywhere; the log level and sink are process-wide.
 */
#ifndef NANOSRV_H
#define NANOSRV_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define NSV_API
#elif defined(__GNUC__)
#define NSV_API __attribute__((visibility("default")))
#else
#define NSV_API
#endif

#define NSV_VERSION_MAJOR 1
#define NSV_VERSION_MINOR 2
#define NSV_VERSION_PATCH 0
/* MAJOR*10000 + MINOR*100 + PATCH */
#define NSV_VERSION_NUMBER 10200
#define NSV_VERSION_STRING "1.2.0"
/* Bumped only when the ABI breaks; equals the SONAME major. */
#define NSV_ABI_VERSION 1

#ifdef __cplusplus
extern "C" {
#endif

/* NSV_CDEF_BEGIN */

/* Opaque server handle. */
typedef struct nsv_server nsv_server;

/* Error codes. Values are frozen: they never change meaning. */
enum nsv_err {
    NSV_OK = 0,
    NSV_EINVAL = -1,        /* invalid argument (NULL, bad length, bad option) */
    NSV_ENOMEM = -2,        /* allocation failed */
    NSV_ESTALE = -3,        /* connection id unknown or no longer open */
    NSV_ESTATE = -4,        /* call not valid in this state (e.g. reply twice) */
    NSV_ECLOSED = -5,       /* the peer closed the connection */
    NSV_EURL = -6,          /* malformed or unsupported URL */
    NSV_EADDRINUSE = -7,    /* address already in use */
    NSV_ESYS = -8,          /* system call failed; see nsv_last_error_detail */
    NSV_ENOBUFS = -9,       /* caller's buffer too small for the next item */
    NSV_EAGAIN = -10,       /* output limit reached: retry after it drains */
    NSV_ENOTSUP = -11,      /* not supported by this build or this object */
    NSV_ERANGE = -12,       /* value out of range */
    NSV_ENOTFOUND = -13,    /* no such header, parameter, path or name */
    NSV_ETOOBIG = -14,      /* data larger than the configured limit */
    NSV_ETIMEDOUT = -15,    /* operation timed out */
    NSV_ECONNREFUSED = -16, /* connection refused */
    NSV_ETLS = -17,         /* TLS failure */
    NSV_ESTOPPED = -18,     /* the server is stopped or stopping */
    NSV_EPARSE = -19,       /* malformed input */
    NSV_EEXIST = -20        /* already exists (e.g. duplicate route) */
};

/* Event types (nsv_event.type). */
enum nsv_event_type {
    NSV_EV_REQUEST = 1,    /* complete HTTP request; answer with nsv_reply* */
    NSV_EV_CLOSE = 2,      /* connection closed; its id is now stale */
    NSV_EV_ERROR = 3,      /* code = NSV_E*, body = message; conn may be 0 */
    NSV_EV_WS_OPEN = 4,    /* WebSocket open; request fields as for REQUEST */
    NSV_EV_WS_MESSAGE = 5, /* code = opcode (1 text, 2 binary), body = payload */
    NSV_EV_WS_CLOSE = 6,   /* code = close code, body = reason */
    NSV_EV_WS_PING = 7,    /* body = payload (only with NSV_OPT_WS_CONTROL_EVENTS) */
    NSV_EV_WS_PONG = 8,    /* body = payload (only with NSV_OPT_WS_CONTROL_EVENTS) */
    NSV_EV_TCP_OPEN = 9,   /* raw TCP connection accepted (tcp:// listener) */
    NSV_EV_TCP_DATA = 10,  /* body = bytes received; flag NSV_EVF_EOF with no bytes at EOF */
    NSV_EV_TCP_WRITABLE = 11, /* code 0: queued output crossed the high water mark;
                                 code 1: it fell to the low water mark again
                                 (raw TCP, and streamed HTTP responses) */
    NSV_EV_TCP_CONNECTED = 12, /* nsv_connect succeeded (failure: ERROR then CLOSE) */
    NSV_EV_HANGUP = 13,    /* the client ended its side (EOF) while a request of the
                              connection is with the host (no reply yet, or a
                              streamed reply in progress); see below */
    NSV_EV_BODY = 14,      /* a piece of a streamed request body (REQUEST had
                              NSV_EVF_STREAM_BODY); NSV_EVF_EOF on the last one */
    NSV_EV_TIMER = 15,     /* a host timer fired (nsv_timer_add): conn = the timer id,
                              tag = the timer's tag */
    NSV_EV_WAKEUP = 16     /* nsv_wakeup_conn: conn = the connection (its tag), body =
                              the payload */
};

/* Event flags (nsv_event.flags). */
enum nsv_event_flag {
    NSV_EVF_KEEPALIVE = 1, /* the connection stays open after the reply */
    NSV_EVF_HEAD = 2,      /* HEAD request: a reply body is counted, not sent */
    NSV_EVF_HTTP10 = 4,    /* request was HTTP/1.0 */
    NSV_EVF_CHUNKED = 8,   /* request body arrived chunked (already decoded) */
    NSV_EVF_UPGRADE = 16,  /* request asks for a WebSocket upgrade */
    NSV_EVF_TLS = 32,      /* connection is TLS */
    NSV_EVF_EOF = 64,      /* TCP_DATA: the peer closed its side (no more data);
                              REQUEST: the client had ended its side before the
                              request was delivered (no HANGUP follows);
                              BODY: the last piece of the request body */
    NSV_EVF_STREAM_BODY = 128 /* REQUEST: the body follows in BODY events (see
                              NSV_ROUTE_STREAM_BODY); body_len is 0 here */
};

/*
 * One event record: 112 bytes, no pointers. Every _off/_len pair refers to
 * the arena passed to nsv_poll (or given to the event callback). Strings are
 * not NUL-terminated.
 *
 * REQUEST / WS_OPEN: method, path (raw, not percent-decoded), query (after
 * '?', without it), headers (a block of "Name: value\r\n" lines, names as
 * sent), params (route parameters: "name\0value\0" pairs, nparams of them),
 * body (de-chunked), peer (remote address text) and peer_port.
 * route is the matched route id or -1.
 *
 * TLS connections (flag NSV_EVF_TLS) carry on REQUEST and WS_OPEN events a
 * block at tls_off/tls_len: "sni\0peer_subject\0", the server name the
 * client asked for (SNI, "" if none) and the subject of the client
 * certificate when one was verified against NSV_OPT_TLS_CA_* (e.g.
 * "CN=alice, O=Example", "" otherwise). tls_len is 0 on other events.
 *
 * Streamed request bodies (routes with NSV_ROUTE_STREAM_BODY, or every
 * request with NSV_OPT_STREAM_BODY): a request whose head says a body
 * follows (Content-Length > 0 or chunked) is delivered as soon as its head
 * is parsed, flagged NSV_EVF_STREAM_BODY with body_len 0; then BODY events
 * carry the body as it is read (de-chunked, at most one read each), the last
 * with NSV_EVF_EOF (possibly empty). The host may answer at any time:
 *  - before the body: with Expect: 100-continue the library sends
 *    "100 Continue" only if no answer came by the next poll (one turn), so
 *    an early 401/413 spares the client the upload. On a sharded server
 *    the turn is that of the thread that takes the event: the call of
 *    nsv_poll (or nsv_poll_worker) after the one that delivered it, or
 *    the return of the callback;
 *  - a complete reply (nsv_reply) before the body ended ends the body: no
 *    more BODY events, "Connection: close", the rest is read and dropped;
 *  - a streamed reply (nsv_reply_start) keeps the BODY events coming (full
 *    duplex: an echo can answer each piece as it comes); ending it before
 *    the body ended closes the connection afterwards.
 * Reading can be paused (nsv_pause_read). Limits hold while the body
 * arrives: max_body (a chunked body past it: ERROR NSV_ETOOBIG, 413 unless
 * a response started, close), the request deadline (ERROR NSV_ETIMEDOUT,
 * 408), malformed chunking (ERROR NSV_EPARSE, 400), a client that leaves
 * mid-body (HANGUP, then ERROR NSV_ECLOSED). Memory per connection stays
 * at one read however large the body.
 *
 * HANGUP: the client ended its side of the connection (TCP FIN) while one of
 * its requests is with the host, once per connection. The connection stays
 * open: a client that only shut its write side still gets the reply, and
 * one that left makes the reply fail with a CLOSE event. A long-poll or
 * streaming host stops its work for the request here (Node's 'close',
 * ASGI's http.disconnect, an OpenResty client-abort handler). A request the
 * client sent before ending its side but that reaches the host afterwards
 * (pipelined) carries NSV_EVF_EOF instead. A vanished client that sent no
 * FIN (power loss, a dropped route) is seen only when a write fails or a
 * timeout expires.
 */
typedef struct nsv_event {
    uint64_t conn;      /* connection id (0 for server-level errors) */
    uint64_t tag;       /* the connection's user tag (nsv_conn_set_tag) */
    uint32_t type;      /* enum nsv_event_type */
    uint32_t flags;     /* enum nsv_event_flag bits */
    int32_t route;      /* route id, -1 when no route matched */
    int32_t code;       /* type-specific: error code, ws opcode, close code */
    uint32_t nparams;   /* number of route parameters */
    uint32_t nheaders;  /* number of header lines */
    uint32_t method_off, method_len;
    uint32_t path_off, path_len;
    uint32_t query_off, query_len;
    uint32_t headers_off, headers_len;
    uint32_t params_off, params_len;
    uint32_t body_off, body_len;
    uint32_t peer_off, peer_len;
    uint32_t peer_port; /* remote port */
    uint32_t listener;  /* listener id that accepted the connection */
    uint32_t tls_off, tls_len; /* TLS block (see above), 0/0 when none */
} nsv_event;

/* Integer options for nsv_set_int / nsv_get_int. Ids are never reused. */
enum nsv_option {
    NSV_OPT_MAX_HEADER_BYTES = 1,   /* request head size, default 16384 (431) */
    NSV_OPT_MAX_HEADERS = 2,        /* header lines, default 100 (431) */
    NSV_OPT_MAX_URI = 3,            /* request-target length, default 8192 (414) */
    NSV_OPT_MAX_BODY = 4,           /* request body, default 1 MiB (413) */
    NSV_OPT_REQUEST_TIMEOUT_MS = 5, /* whole request receive deadline, default 30000 (408) */
    NSV_OPT_IDLE_TIMEOUT_MS = 6,    /* keep-alive idle timeout, default 60000 */
    NSV_OPT_MAX_CONNS = 7,          /* open connections, default 10000 */
    NSV_OPT_MAX_OUTPUT = 8,         /* buffered output per connection, default 4 MiB */
    NSV_OPT_AUTO_404 = 9,           /* 1: unmatched requests get a 404 JSON reply in C */
    NSV_OPT_WS_MAX_MESSAGE = 10,    /* WebSocket message size, default 16 MiB (1009) */
    NSV_OPT_WS_PING_INTERVAL_MS = 11, /* server pings, 0 = off (default) */
    NSV_OPT_WS_CONTROL_EVENTS = 12, /* 1: deliver WS_PING / WS_PONG events */
    NSV_OPT_WS_CLOSE_TIMEOUT_MS = 13, /* wait for the peer's close frame, default 5000 */
    NSV_OPT_TCP_HIGH_WATER = 14,    /* raw TCP / streamed reply high water mark, default 65536 */
    NSV_OPT_TCP_LOW_WATER = 15,     /* raw TCP / streamed reply low water mark, default 32768 */
    NSV_OPT_CONNECT_TIMEOUT_MS = 16, /* outbound connect timeout, default 30000 */
    NSV_OPT_SHARD_ACCEPT = 17,      /* sharded: 0 SO_REUSEPORT per worker, 1 one acceptor hands off */
    NSV_OPT_WORKERS = 18,           /* read-only: worker count (0 for a single loop) */
    NSV_OPT_TLS_VERIFY_CLIENT = 19, /* client certificates: 0 not asked (default), 1 optional, 2 required */
    NSV_OPT_TLS_VERIFY_SERVER = 20, /* outbound: verify certificate and host name, default 1 */
    NSV_OPT_TLS_HANDSHAKE_FAILURES = 21, /* read-only: TLS handshakes that failed */
    NSV_OPT_STREAM_BODY = 22,       /* 1: every request body arrives in BODY events (see
                                       NSV_ROUTE_STREAM_BODY); default 0 */
    NSV_OPT_GZIP_MIN_SIZE = 23,     /* gzip replies of at least this many bytes to clients
                                       that accept it (see NSV_OPT_GZIP_TYPES); 0 = off (default);
                                       streamed replies regardless of size. NSV_ENOTSUP above 0
                                       in a build without zlib. Rules: docs/COMPRESSION.md. Since 1.1. */
    NSV_OPT_GZIP_LEVEL = 24,        /* zlib level 1..9, default 6. Since 1.1. */
    NSV_OPT_CONNECTIONS = 25,       /* read-only: connections open now (accepted and outbound,
                                       every worker; listeners not counted). Since 1.1. */
    NSV_OPT_REUSEPORT = 26,         /* 1: later nsv_listen calls set SO_REUSEPORT on their
                                       socket, so several processes (or servers) can bind one
                                       port and the kernel spreads connections among them;
                                       default 0. Sharded servers in per-worker accept mode
                                       set it anyway. Since 1.2. */
    NSV_OPT_EXPECT_MANUAL = 27      /* 1: a streamed request (NSV_EVF_STREAM_BODY) that asks
                                       "Expect: 100-continue" gets its 100 Continue only when
                                       the host calls nsv_continue (when its application first
                                       reads the body), however many polls go by; an answer
                                       instead sends none. 0 (default): at the host's next turn
                                       unless it answered. Since 1.2. */
};

/*
 * String options for nsv_set_str. Ids are never reused. TLS listeners
 * (https://, wss://, tls://) need a certificate chain and its key, each from
 * a PEM file or PEM bytes in memory (the _PEM forms, for hosts that keep
 * secrets out of files). A _FILE option reads the file at once (NSV_ETLS if
 * it cannot) and replaces its _PEM twin, and the other way round. The
 * options, with NSV_OPT_TLS_VERIFY_CLIENT, are parsed and checked by the
 * first TLS nsv_listen (NSV_ETLS with the mbedTLS reason in
 * nsv_last_error_detail) and frozen from then on (nsv_set_str returns
 * NSV_ESTATE). The _CLIENT_CA options are for outbound TLS connections and
 * are frozen at the first one.
 */
enum nsv_str_option {
    NSV_OPT_TLS_CERT_FILE = 100,     /* certificate chain (PEM file), leaf first */
    NSV_OPT_TLS_KEY_FILE = 101,      /* private key (PEM file) */
    NSV_OPT_TLS_CERT_PEM = 102,      /* certificate chain as PEM text */
    NSV_OPT_TLS_KEY_PEM = 103,       /* private key as PEM text */
    NSV_OPT_TLS_CA_FILE = 104,       /* CA that verifies client certificates (mutual TLS) */
    NSV_OPT_TLS_CA_PEM = 105,        /* the same as PEM text */
    NSV_OPT_TLS_KEY_PASSWORD = 106,  /* password of an encrypted private key */
    NSV_OPT_TLS_CLIENT_CA_FILE = 107, /* outbound: CA for server certificates (default: system bundle) */
    NSV_OPT_TLS_CLIENT_CA_PEM = 108, /* outbound: the same as PEM text */
    NSV_OPT_GZIP_TYPES = 109         /* media types gzip applies to: comma-separated; a type with
                                        no subtype ("text/") matches all of it; parameters are ignored;
                                        "" restores the default: text/html, text/css, text/plain,
                                        text/javascript, application/javascript,
                                        application/json, application/xml, image/svg+xml. Since 1.1. */
};

/* Allocator hook: realloc semantics; size 0 means free(ptr), return NULL. */
typedef void *(*nsv_alloc_fn)(void *ud, void *ptr, size_t size);

/* C-only push mode: called for each event instead of queueing it. */
typedef void (*nsv_event_fn)(nsv_server *srv, const nsv_event *ev, const char *arena, void *ud);

/* Log sink: level is enum nsv_log_level, msg is not NUL-terminated. */
typedef void (*nsv_log_fn)(int level, const char *msg, size_t len, void *ud);

enum nsv_log_level {
    NSV_LOG_NONE = 0,
    NSV_LOG_ERROR = 1,
    NSV_LOG_INFO = 2,
    NSV_LOG_DEBUG = 3,
    NSV_LOG_VERBOSE = 4
};

/* Route flags for nsv_route. */
enum nsv_route_flag {
    NSV_ROUTE_WEBSOCKET = 1,  /* upgrade automatically; host sees WS_* events */
    NSV_ROUTE_STREAM_BODY = 2 /* the request body arrives in pieces (BODY events) */
};

/* Flags for nsv_serve_dir and nsv_reply_file. */
enum nsv_static_flag {
    NSV_STATIC_LIST = 1,          /* an HTML listing for a directory without index.html
                                     (default: 404) */
    NSV_STATIC_SYMLINKS = 2,      /* follow symlinks that lead outside the root
                                     (default: such a path is 404) */
    NSV_STATIC_PRECOMPRESSED = 4, /* serve NAME.br / NAME.gz when present and the client
                                     accepts it, with Vary: Accept-Encoding */
    NSV_STATIC_FALLTHROUGH = 8,   /* nsv_serve_dir: a miss goes on to the routes
                                     instead of a 404 */
    NSV_STATIC_DOTFILES = 16,     /* serve names starting with '.' (default: 404) */
    NSV_STATIC_PLAIN = 32         /* nsv_reply_file only: the file is a plain body, for an
                                     application that sets its own validators (a WSGI
                                     file_wrapper): no ETag, Last-Modified or Accept-Ranges
                                     lines are added, and the request's conditional and
                                     Range headers are not applied (status 0 answers 200).
                                     Since 1.2. */
};

/* WebSocket opcodes for nsv_ws_send. */
enum nsv_ws_opcode {
    NSV_WS_TEXT = 1,
    NSV_WS_BINARY = 2,
    NSV_WS_PING = 9,
    NSV_WS_PONG = 10
};

/* Result of nsv_url_parse: offsets into the parsed string. */
typedef struct nsv_url {
    uint32_t scheme_off, scheme_len;
    uint32_t host_off, host_len; /* IPv6 hosts without brackets */
    uint32_t path_off, path_len; /* length 0 when absent (read it as "/") */
    uint32_t query_off, query_len;
    int32_t port;   /* explicit port, else the scheme's default, else 0 */
    int32_t is_tls; /* 1 for https, wss, tls */
} nsv_url;

/* ---- version and errors ---- */

/* METHOD: NSV_VERSION_NUMBER of the loaded library. Since 1.0. */
NSV_API uint32_t nsv_version(void);
/* METHOD: version text, e.g. "1.2.0". Static storage. Since 1.0. */
NSV_API const char *nsv_version_string(void);
/* METHOD: NSV_ABI_VERSION of the loaded library. Bindings refuse a mismatch. Since 1.0. */
NSV_API int nsv_abi_version(void);
/* METHOD: sizeof(nsv_event) in the loaded library (112). Since 1.0. */
NSV_API size_t nsv_event_size(void);
/* METHOD: fixed message for an NSV_E* code; never NULL. Since 1.0. */
NSV_API const char *nsv_strerror(int err);
/* METHOD: symbolic name of an NSV_E* code ("NSV_ESTALE"); never NULL. Since 1.0. */
NSV_API const char *nsv_errname(int err);
/* METHOD: 1 if the build has TLS (mbedTLS), else 0. Since 1.0. */
NSV_API int nsv_tls_available(void);

/* ---- server lifecycle ---- */

/* CONSTRUCTOR: single-loop server driven by nsv_poll/nsv_run in the caller's
 * thread, which owns it (see "Threads" at the top). NULL on allocation
 * failure. Since 1.0. */
NSV_API nsv_server *nsv_server_new(void);
/* CONSTRUCTOR: server with `workers` I/O threads (0 = one per CPU, at most
 * 64); the host polls events from any one thread. The threads start at the
 * first nsv_poll, nsv_poll_worker, nsv_run, nsv_fd, nsv_drain or
 * nsv_connect: set options, routes, listeners and the callback before (see
 * "Threads" at the top). A worker whose queue of events not yet
 * polled passes NSV_OPT_MAX_OUTPUT/8 (at least 256 KiB) stops reading raw TCP
 * and WebSocket input until the host catches up, so a slow host bounds
 * memory. NULL on failure. Since 1.0. */
NSV_API nsv_server *nsv_server_new_sharded(int workers);
/* CONSTRUCTOR: as above with an allocator hook (NULL = libc). workers < 0
 * makes a single-loop server. Every allocation of the server goes through
 * alloc(ud, ptr, size). Since 1.0. */
NSV_API nsv_server *nsv_server_new_ex(int workers, nsv_alloc_fn alloc, void *ud);
/* DESTRUCTOR: closes every socket and frees everything; NULL is ignored.
 * It must not be called while another thread is inside any call on the same
 * server (on a single loop a concurrent nsv_poll would use freed memory):
 * call nsv_stop, join the threads that poll or call it, then free. On a
 * sharded server it first stops the workers and joins them (a callback in
 * progress finishes; none runs after this returns). Name lookups in
 * flight (nsv_connect) get up to 10 s to end. Events not yet polled are
 * dropped and open connections are closed without CLOSE events. Ids and
 * arena contents from this server become invalid. A host that calls nsv_stop from a signal
 * handler ignores that signal first. Since 1.0. */
NSV_API void nsv_server_free(nsv_server *srv);
/* METHOD: what went wrong in the last failed call on srv made by the calling
 * thread, e.g. "close code 1005 is reserved; use 1000-1003, 1007-1014 or
 * 3000-4999" (never NULL; "" if none). Per server and per thread: failures
 * on other servers, or in other threads, do not change it, and a server
 * created later (even at a freed server's address) starts with "". A thread
 * remembers the details of its 16 most recently used servers. srv NULL: the
 * detail of the last failed call that has no server (nsv_url_parse,
 * nsv_base64_*, nsv_json_*, nsv_opt_by_name, nsv_ev_*, nsv_set_log_level,
 * or any call given a NULL srv). Successful calls leave it as it was, and
 * NSV_ENOTFOUND from the nsv_ev_* readers (an answer, not a refusal) sets
 * none. The text stays valid until the calling thread's next call into the
 * library. Since 1.0. */
NSV_API const char *nsv_last_error_detail(nsv_server *srv);

/* METHOD: set an integer option (enum nsv_option). NSV_EINVAL for an
 * unknown id, NSV_ERANGE for a bad value. NSV_OPT_TCP_LOW_WATER never
 * exceeds NSV_OPT_TCP_HIGH_WATER: a call that would make low > high gets
 * NSV_ERANGE (raise the high mark before the low one, lower the low mark
 * before the high one). Sharded servers: NSV_ESTATE once the workers run;
 * a single loop accepts it between polls (see "Threads"). Since 1.0. */
NSV_API int nsv_set_int(nsv_server *srv, int opt, int64_t value);
/* METHOD: read an integer option; NSV_EINVAL for an unknown id. Since 1.0. */
NSV_API int64_t nsv_get_int(nsv_server *srv, int opt);
/* METHOD: option id for a name such as "max_body" or "tls_cert_file"
 * (case-insensitive, with or without the NSV_OPT_ prefix; string options
 * included), or NSV_ENOTFOUND. Since 1.0. */
NSV_API int nsv_opt_by_name(const char *name, size_t len);
/* METHOD: set a string option (enum nsv_str_option) to len bytes of value
 * (copied; NULL or len 0 clears it). NSV_EINVAL for an unknown id,
 * NSV_ENOTSUP when the build has no TLS, NSV_ESTATE once the option is in
 * use (see enum nsv_str_option). Sharded servers: NSV_ESTATE once the
 * workers run; a single loop accepts it between polls. Since 1.0. */
NSV_API int nsv_set_str(nsv_server *srv, int opt, const char *value, size_t len);

/* METHOD: listen on a URL: "http://host:port", "ws://host:port" (same as
 * http), host an IPv4 or IPv6 literal ("[::1]"), "localhost", or "0.0.0.0";
 * port 0 picks an ephemeral port. "https://" and "wss://" (the same) listen
 * with TLS 1.2, or 1.3 where the mbedTLS build offers it, nothing older;
 * ALPN offers http/1.1; the certificate and key come from the
 * NSV_OPT_TLS_* string options, client certificates are asked for per
 * NSV_OPT_TLS_VERIFY_CLIENT. Handshakes run inside the loop and fall under
 * NSV_OPT_REQUEST_TIMEOUT_MS. Returns the listener id (>= 0) or NSV_EURL,
 * NSV_EADDRINUSE, NSV_ENOTSUP (a TLS URL when nsv_tls_available() is 0),
 * NSV_ETLS (bad certificate, key or CA), NSV_ESYS. The URL names scheme,
 * host and port only: a path other than "/", a query, a fragment or user
 * info ("user@") is NSV_EURL. Sharded servers: NSV_ESTATE once the workers
 * run; a single loop accepts new listeners between polls. Since 1.0. */
NSV_API int nsv_listen(nsv_server *srv, const char *url, size_t len);
/* METHOD: the bound port of a listener (useful after port 0), or an error. Since 1.0. */
NSV_API int nsv_listener_port(nsv_server *srv, int listener);
/* METHOD: adopt a socket the caller has already bound and put into the
 * listening state (an inherited one, in a pre-fork server; one from systemd
 * socket activation): connections accepted on fd are served like those of
 * nsv_listen(url). fd must be a SOCK_STREAM socket of family AF_INET,
 * AF_INET6 or AF_UNIX on which listen() was called. The URL gives the
 * scheme and so the protocol and TLS, with the same rules as nsv_listen
 * ("http://", "https://", "ws://", "wss://", "tcp://", "tls://"; TLS needs
 * the NSV_OPT_TLS_* options set first). Its host is not used (the socket's
 * bound address is what counts; write the address it was bound to, or
 * "0.0.0.0"); its port, when not 0, must equal the socket's bound port
 * (NSV_EINVAL otherwise: a guard against adopting the wrong socket; use
 * port 0 for AF_UNIX; a URL without a port names the scheme's default, 80
 * or 443, as everywhere). On success the library owns fd: it makes it
 * non-blocking and close-on-exec (O_NONBLOCK is shared with every process
 * holding the same socket, which all want it) and closes it at
 * nsv_server_free or when a drain starts, like its own listeners; the
 * socket itself stays open in other processes that hold it, so connections
 * waiting in its backlog are served by them. On failure fd is left
 * untouched and still the caller's. Returns the listener id (>= 0;
 * nsv_listener_port gives the bound port, 0 for AF_UNIX) or NSV_EINVAL (fd
 * negative, not a socket, not SOCK_STREAM, not listening, another family,
 * a port that differs; the detail says which), NSV_EURL, NSV_ENOTSUP,
 * NSV_ETLS as nsv_listen, NSV_ERANGE (too many listeners), NSV_ESTOPPED
 * (draining). Connections from an AF_UNIX socket have an empty peer
 * address and port 0. Sharded servers: worker 0 accepts on fd and hands
 * the connections to the workers in turn (as with NSV_OPT_SHARD_ACCEPT 1),
 * whatever NSV_OPT_SHARD_ACCEPT says; NSV_ESTATE once the workers run.
 * Since 1.2. */
NSV_API int nsv_listen_fd(nsv_server *srv, const char *url, size_t len, int fd);

/* METHOD: register a route. method is "GET", "POST", ... or "ALL"; a GET
 * route also answers HEAD. Methods are case-sensitive RFC 9110 tokens of at
 * most 64 bytes; lower-case letters are NSV_EINVAL (the detail names the
 * upper-case form: "get" never matches a request). pattern segments are
 * literals, ":name" params or a final "*" (matches the rest, available as
 * param "*"). Literals beat params, with backtracking. route_id >= 0 comes
 * back in events. flags: enum nsv_route_flag; other bits are NSV_EINVAL, and
 * NSV_ROUTE_WEBSOCKET goes with "GET" only (not "ALL": a handshake is a GET).
 * NSV_EEXIST for the same method+pattern twice. Sharded servers:
 * NSV_ESTATE once the workers run; a single loop accepts routes between
 * polls (they apply to requests parsed after the call). Since 1.0. */
NSV_API int nsv_route(nsv_server *srv, const char *method, size_t mlen, const char *pattern, size_t plen, int32_t route_id, uint32_t flags);

/* ---- the loop ---- */

/* METHOD: run the loop (single-loop servers) or wait for worker events
 * (sharded), for at most timeout_ms, and copy up to max_events records into
 * events and their bytes into arena. timeout_ms 0 does not block; any
 * negative value sets no deadline: it waits until an event, nsv_wakeup or
 * nsv_stop. Returns the number of events, or 0: on timeout, after
 * nsv_wakeup, or early when internal work produced no event (a single loop
 * returns after I/O that completed no event yet and after its timers, at
 * least every 100 ms while connections are open), so call it in a loop.
 * Once stopped (nsv_stop, a finished drain) it returns the events still
 * queued, then NSV_ESTOPPED. Every arena offset and every string of the
 * batch is valid until the next nsv_poll on this server. If the next event
 * does not fit into an empty arena it returns NSV_ENOBUFS and
 * nsv_poll_need() tells the size needed; the event stays queued. Since 1.0. */
NSV_API int nsv_poll(nsv_server *srv, nsv_event *events, int max_events, char *arena, size_t arena_cap, int timeout_ms);
/* METHOD: sharded servers: like nsv_poll (the same timeout rules: 0 does
 * not block, any negative value waits until an event of this worker,
 * nsv_wakeup or nsv_stop) but only the events of one worker
 * (0..workers-1), for hosts that run one interpreter per thread; one thread
 * per worker at a time. On a single loop only worker 0 is valid (it is
 * nsv_poll). Since 1.0. */
NSV_API int nsv_poll_worker(nsv_server *srv, int worker, nsv_event *events, int max_events, char *arena, size_t arena_cap, int timeout_ms);
/* METHOD: arena bytes the next queued event needs (0 if none). Since 1.0. */
NSV_API int64_t nsv_poll_need(nsv_server *srv);
/* METHOD: a file descriptor that is readable while nsv_poll has work, for
 * hosts with their own loop: when it becomes readable, call nsv_poll(..., 0)
 * until it returns 0. Sharded servers: a pipe read end (works with Node's
 * net.Socket), readable once events wait after a poll returned 0. Single
 * loop: the epoll descriptor (readable on I/O); such hosts should also poll
 * every ~100 ms so timeouts run. Owned by the server. On a sharded server
 * the first call starts the workers, as the first nsv_poll does. Since 1.0. */
NSV_API int nsv_fd(nsv_server *srv);
/* METHOD: C push mode: events are passed to fn (in the polling thread for a
 * single loop, on the worker thread for a sharded server) instead of being
 * queued. The arena pointer is valid during the call only. NULL restores
 * pull mode. Sharded servers: set it before the workers start (NSV_ESTATE
 * after); a single loop may switch between polls. Since 1.0. */
NSV_API int nsv_set_callback(nsv_server *srv, nsv_event_fn fn, void *ud);
/* METHOD: run until nsv_stop or a finished drain (callback mode; in pull
 * mode events are left queued). Single loop: runs the loop in the calling
 * thread, which calls the callback. Sharded: starts the workers, which call
 * the callback, and waits. Returns 0 or an error. Since 1.0. */
NSV_API int nsv_run(nsv_server *srv);
/* METHOD: make nsv_run return and nsv_poll stop waiting; nsv_poll then
 * returns the events still queued, then NSV_ESTOPPED. Connections stay open
 * until nsv_server_free. Safe from any thread and from a signal handler.
 * Since 1.0. */
NSV_API int nsv_stop(nsv_server *srv);
/* METHOD: make a blocked nsv_poll or nsv_poll_worker return 0 now (when
 * none is blocked, the next nsv_poll may return 0 at once). Safe from any
 * thread and from a signal handler. Since 1.0. */
NSV_API int nsv_wakeup(nsv_server *srv);
/* METHOD: a host timer: a TIMER event (conn = the returned id, tag = tag,
 * no body) after delay_ms, then every repeat_ms when repeat_ms > 0 (0:
 * once). delay_ms and repeat_ms are 0 to 2^40 (NSV_EINVAL below 0,
 * NSV_ERANGE above); delay 0 fires at the next poll. An event never comes
 * early; a repeating timer keeps its phase (the k-th event is due at
 * delay_ms + k * repeat_ms) and skips the periods a slow host missed: at
 * most one of its events waits undelivered, so there is no catch-up burst.
 * Where the events come out: single loop, nsv_poll and nsv_run (whose
 * poll timeout wakes for the next due timer); sharded, they belong to
 * worker 0: the host's nsv_poll returns them with the other events,
 * nsv_poll_worker returns them from worker 0 only, and in callback mode
 * worker 0's thread calls the callback. Returns the timer id (> 0, counting
 * up, never reused in the server's life), or NSV_EINVAL / NSV_ERANGE /
 * NSV_ENOMEM with a detail. From any thread (one added while a poll sleeps
 * wakes it). Live timers are freed by nsv_server_free. Since 1.1. */
NSV_API int64_t nsv_timer_add(nsv_server *srv, int64_t delay_ms, int64_t repeat_ms, uint64_t tag);
/* METHOD: cancel a timer and free it. After the call returns no TIMER event
 * of it is delivered, not even one already due and queued (a thread polling
 * at the same moment may still be handing out one it took before). A
 * one-shot timer is finished once its event was delivered: cancelling it
 * then, or an unknown or cancelled id, returns NSV_ENOTFOUND; an id <= 0
 * NSV_EINVAL. Safe inside the timer's own event or callback. From any
 * thread. Since 1.1. */
NSV_API int nsv_timer_cancel(nsv_server *srv, int64_t timer);
/* METHOD: deliver a WAKEUP event for a connection (conn, its tag and peer,
 * body = a copy of the len bytes of data, at most 65536; data may be NULL
 * when len is 0), from any thread (the nanosrv seed's wakeup(conn, data)).
 * The event goes through the loop that owns the connection, so it comes
 * out of the poll that delivers that connection's events (on a sharded
 * server: nsv_poll, or nsv_poll_worker of its worker), in order with them:
 * after the events that loop produced before, and before the effects of
 * calls on the connection made after this one returns (a reply, a send
 * and what the peer answers). Wakeups from one thread keep their order.
 * NSV_ESTALE for a connection that is not open; one that closes before its
 * loop takes the wakeup gets no WAKEUP (its CLOSE comes instead).
 * NSV_ETOOBIG past 65536 bytes, NSV_EINVAL for NULL data with len > 0.
 * Since 1.1. */
NSV_API int nsv_wakeup_conn(nsv_server *srv, uint64_t conn, const char *data, size_t len);
/* METHOD: graceful stop, waiting for its end: nsv_drain_start(timeout_ms),
 * then return once every connection is closed or timeout_ms passed (then
 * the rest are closed). Single loop: runs the loop in the calling thread,
 * which must be the one that polls the server; callbacks keep being called,
 * but pull-mode events stay queued and requests waiting for the host get no
 * reply, so a pull host calls nsv_drain_start and keeps calling nsv_poll
 * until NSV_ESTOPPED instead. Sharded: any thread; the workers keep serving
 * and calling callbacks, and a pull host keeps polling from another thread
 * (or uses nsv_drain_start + nsv_poll). Since 1.0. */
NSV_API int nsv_drain(nsv_server *srv, int timeout_ms);
/* METHOD: start a graceful stop and return at once: close listeners, answer
 * requests that arrive on open connections with "Connection: close", let
 * replies in flight go out, close idle connections, send WebSockets a 1001
 * close frame; nsv_poll returns NSV_ESTOPPED once every connection is closed
 * or timeout_ms passed (then the rest are closed). A second call does
 * nothing. Safe from any thread and from a signal handler. Since 1.0. */
NSV_API int nsv_drain_start(nsv_server *srv, int timeout_ms);

/* ---- answering requests ----
 *
 * Header blocks (nsv_reply, nsv_reply_start, nsv_reply_batch,
 * nsv_ws_upgrade) are checked before anything is queued: every line is
 * "Name: value\r\n" with a token name (RFC 9110: letters, digits and
 * !#$%&'*+-.^_`|~) and a value of visible ASCII, SP, HTAB or bytes >= 0x80;
 * CR, LF, NUL, DEL and other control bytes are refused (NSV_EINVAL, and
 * nsv_last_error_detail names the header and the byte offset), so no reply
 * can split into two or be cut short by a peer. Framing is checked too:
 * a reply can put only one framing on the wire, and it must be true.
 *
 * Order: a connection's requests reach the host one at a time, and the
 * answers leave in that order. An answer is written by the end of the next
 * nsv_poll (one nsv_run or worker iteration), except that when that poll
 * hands the host the connection's next pipelined request, the answer waits
 * one poll more, so that both answers leave in one write; it never waits
 * longer, answered or not (a long-polled second request cannot hold back the
 * first answer), and while it waits nsv_poll does not block.
 */

/* METHOD: send a complete response. headers is a block of "Name: value\r\n"
 * lines (may be empty/NULL). Content-Length (except on 204 and 304), Date
 * and Connection are added when absent. For HEAD requests, 204 and 304 the
 * body is not sent. status is 200..999: 1xx are interim responses, never
 * final (101 comes from nsv_ws_upgrade). A Content-Length of the host's must
 * be one decimal number equal to blen, except for HEAD requests and 304
 * (where it describes the body a GET would get) and is refused on 204;
 * Transfer-Encoding is refused (use nsv_reply_start). Errors: NSV_ESTALE,
 * NSV_ESTATE (no request pending, e.g. replied already), NSV_EINVAL (status,
 * header block or framing; see nsv_last_error_detail), NSV_EAGAIN (output
 * limit; nothing was queued). On a sharded server, from another thread, a
 * Content-Length that does not match the body is found by the worker (only
 * it knows whether the request was HEAD): the client gets a 500, the
 * connection closes and an ERROR event says why.
 * Output limit: only output already queued on the connection counts
 * (NSV_EAGAIN while it is over NSV_OPT_MAX_OUTPUT, e.g. after many pipelined
 * replies); the reply itself is not, so one reply larger than the cap is
 * accepted and copied whole. Stream large bodies with nsv_reply_start and
 * nsv_send_chunk, paced by TCP_WRITABLE events.
 * Size: the largest reply is 4 GiB - 64 KiB (4294901760 bytes) of status
 * line, headers and body, together with the output of the connection not
 * yet sent; past it NSV_ETOOBIG (nothing queued). From another thread of a
 * sharded server a reply over the maximum by itself is refused at once; one
 * that passes it only with the output already waiting fails on the worker:
 * the client gets a 500 and an ERROR event says why. Since 1.0. */
NSV_API int nsv_reply(nsv_server *srv, uint64_t conn, int status, const char *headers, size_t hlen, const char *body, size_t blen);
/* METHOD: many replies in one call. buf holds records, each: uint64 conn,
 * int32 status, uint32 hlen, uint32 blen, uint32 reserved (24 bytes, native
 * endianness), then hlen header bytes and blen body bytes, then zero padding
 * to a multiple of 8. Returns the number of replies accepted; a record that
 * fails does not stop the others. Since 1.0. */
NSV_API int nsv_reply_batch(nsv_server *srv, const char *buf, size_t len);
/* METHOD: start a streamed response. What frames the body:
 * - by default, HTTP/1.1: "Transfer-Encoding: chunked" is added and each
 *   nsv_send_chunk is one chunk; the host may give that same line itself
 *   (any other Transfer-Encoding is refused);
 * - a Content-Length of the host's: a fixed-length stream, no chunking; the
 *   chunks are counted (NSV_EINVAL for one that would pass the declared
 *   length, nothing queued) and nsv_reply_end before the count is reached
 *   returns NSV_EINVAL and closes the connection after what was sent, so the
 *   client sees a short body, never a desync. Not with Transfer-Encoding;
 * - HTTP/1.0 requests: no chunked coding exists there: without a
 *   Content-Length the body is sent as is and the connection closes after
 *   it ("Connection: close" is added, a Transfer-Encoding line of the
 *   host's is left out);
 * - HEAD requests: the headers only (chunks are accepted and not sent);
 *   204 and 304: no body at all (NSV_EINVAL for a non-empty chunk).
 * The status and header rules are those of nsv_reply. The header block counts
 * against the 4 GiB - 64 KiB maximum of queued output as in nsv_reply
 * (NSV_ETOOBIG past it). Since 1.0. */
NSV_API int nsv_reply_start(nsv_server *srv, uint64_t conn, int status, const char *headers, size_t hlen);
/* METHOD: custom reason phrase for the next status line of the request
 * waiting on conn: the one nsv_reply, nsv_reply_start, nsv_sse_start or
 * nsv_reply_file writes ("HTTP/1.1 299 Custom Reason"); it is used once,
 * and later requests get the standard phrases again. reason is at most 128
 * bytes of HTAB, SP, visible ASCII and obs-text (bytes >= 0x80), else
 * NSV_EINVAL with a detail naming the byte; len 0 goes back to the standard
 * phrase. NSV_ESTATE when no request waits for an answer, NSV_ESTALE for a
 * closed connection. On a sharded server from any thread: the phrase travels
 * with the connection's other calls, in order, so it applies to the reply
 * made after it. Since 1.2. */
NSV_API int nsv_set_reason(nsv_server *srv, uint64_t conn, const char *reason, size_t len);
/* METHOD: send "100 Continue" now to the client of the streamed request
 * waiting on conn, if it asked for one ("Expect: 100-continue") and none
 * went out yet; otherwise nothing (a request without Expect, a second call):
 * NSV_OK either way. Meant for NSV_OPT_EXPECT_MANUAL, where the host calls
 * it when its application first reads the body, so an application that
 * answers without reading (401, 413) never invites the body. NSV_ESTATE when
 * no request waits for an answer, NSV_ESTALE for a closed connection. On a
 * sharded server from any thread, in order with the connection's other
 * calls. Since 1.2. */
NSV_API int nsv_continue(nsv_server *srv, uint64_t conn);
/* METHOD: send one chunk of a streamed response (len 0 is ignored).
 * NSV_EAGAIN when queued output would exceed NSV_OPT_MAX_OUTPUT (nothing
 * queued). To pace a long stream, wait after a TCP_WRITABLE event with code 0
 * (queued output crossed NSV_OPT_TCP_HIGH_WATER) for the one with code 1
 * (down to NSV_OPT_TCP_LOW_WATER). On a sharded server, from another
 * thread, the limit is four times NSV_OPT_MAX_OUTPUT and an over-limit chunk
 * arrives as an ERROR event and closes the connection, and so does a chunk
 * past the Content-Length of a fixed-length stream. At most 4 GiB -
 * 64 KiB can wait on a connection: past it NSV_ETOOBIG (see nsv_reply).
 * Since 1.0. */
NSV_API int nsv_send_chunk(nsv_server *srv, uint64_t conn, const char *data, size_t len);
/* METHOD: finish a streamed response (the final empty chunk of a chunked
 * one; see nsv_reply_start for a fixed-length stream ended short). Since 1.0. */
NSV_API int nsv_reply_end(nsv_server *srv, uint64_t conn);
/* METHOD: start a server-sent event stream (EventSource) as the answer
 * to a pending request: nsv_reply_start with status 200 and the lines
 * "Content-Type: text/event-stream", "Cache-Control: no-cache" and
 * "X-Accel-Buffering: no" (nginx then passes events on at once), each
 * added unless the host's block has a line of that name. A host
 * Content-Type must be text/event-stream (parameters allowed), since
 * EventSource fails the connection on any other, and a Content-Length is
 * refused (a stream has no length): NSV_EINVAL with a detail. The block
 * must end with CRLF; the other rules and errors are nsv_reply_start's.
 * Send events with nsv_sse_send (or nsv_send_chunk of what nsv_sse_format
 * or nsv_sse_comment made), end with nsv_reply_end. Since 1.1. */
NSV_API int nsv_sse_start(nsv_server *srv, uint64_t conn, const char *headers, size_t hlen);
/* METHOD: format one event as nsv_sse_format does and send it as one
 * chunk of the stream: the errors, the NSV_EAGAIN at NSV_OPT_MAX_OUTPUT
 * (nothing queued), the pacing by TCP_WRITABLE events and the calls from
 * any thread of a sharded server are those of nsv_send_chunk. Events up
 * to 4 KiB are formatted on the stack, larger ones in one allocation for
 * the call. A keepalive is nsv_sse_comment sent with nsv_send_chunk.
 * Since 1.1. */
NSV_API int nsv_sse_send(nsv_server *srv, uint64_t conn, const char *event, size_t elen, const char *id, size_t idlen, const char *data, size_t dlen, int64_t retry_ms);
/* METHOD: serve the directory dir under the URL prefix (which starts and
 * ends with '/', e.g. "/static/"; matched against the raw request path
 * before routing, longest prefix first), answered in C with no event for
 * the host: GET and HEAD (other methods 405 with Allow), index.html for a
 * directory, a directory or the prefix named without its final '/' 301 to
 * the slash form, Content-Type from the file name (nsv_mime_type),
 * ETag ("MTIME-SIZE" in hex) and Last-Modified with If-None-Match /
 * If-Modified-Since (304), single Range requests (206; unsatisfiable: 416
 * with a Content-Range that gives the size; several ranges: the whole
 * file; If-Range), cache_control as the Cache-Control line when clen > 0,
 * and the flags above (with NSV_STATIC_FALLTHROUGH other methods go to the
 * routes too). No path outside dir is ever opened: "..", encoded dots and
 * slashes, backslashes, NUL, control bytes, overlong UTF-8 and symlinks out
 * of dir (unless NSV_STATIC_SYMLINKS) give 404. Files go out in bounded
 * pieces paced by the socket (sendfile on plain TCP, pread and write
 * through TLS). Setup call (before the first poll or run; NSV_ESTATE once a
 * sharded server's workers run; mounts serve on every worker). Returns the
 * mount id (>= 0), NSV_EINVAL with a detail (prefix, flags, a prefix
 * mounted twice, a control byte in cache_control), NSV_ENOTFOUND when dir
 * is not a directory. See docs/STATIC.md. Since 1.1. */
NSV_API int nsv_serve_dir(nsv_server *srv, const char *prefix, size_t plen, const char *dir, size_t dlen, const char *cache_control, size_t clen, uint32_t flags);
/* METHOD: answer a pending request with a file. With rlen > 0, path is a
 * URL path without the query (percent-encoded, as in the request) resolved
 * under root by the rules of nsv_serve_dir (a directory gives its
 * index.html); with rlen 0, path is a file system path used as given.
 * req_headers is the request's header block (the event's headers), read
 * for If-None-Match, If-Modified-Since, Range, If-Range and
 * Accept-Encoding (with NSV_STATIC_PRECOMPRESSED); HEAD is known from the
 * request. status 0 answers 200, 206, 304 or 416 as the headers ask;
 * another status (200..999 but 204 and 304, e.g. 404 for an error page)
 * sends the whole file with that status. headers is a reply header block
 * added to the library's (Content-Type, Content-Length, ETag,
 * Last-Modified, Accept-Ranges), rules as for nsv_reply; a Content-Type
 * line of the host's replaces the guessed one, a Content-Length or
 * Transfer-Encoding is NSV_EINVAL. The file is opened in the calling
 * thread: NSV_ENOTFOUND when there is no such regular file or the path is
 * refused (nothing was sent, the request is still pending: the host
 * answers otherwise). Returns 0 when the answer is queued, or the errors
 * of nsv_reply. From any thread of a sharded server (the open file is
 * handed to the owning worker). Since 1.1. */
NSV_API int nsv_reply_file(nsv_server *srv, uint64_t conn, int status, const char *root, size_t rlen, const char *path, size_t plen, const char *req_headers, size_t rhlen, const char *headers, size_t hlen, uint32_t flags);
/* METHOD: the media type the static server sends for a file name (e.g.
 * "text/html; charset=utf-8" for "index.html"; the extension after the
 * last '.' of the last path segment, any case), a static string; text
 * types carry "; charset=utf-8"; "application/octet-stream" when the
 * extension is unknown or name is NULL. Any thread. Since 1.1. */
NSV_API const char *nsv_mime_type(const char *name, size_t len);
/* METHOD: close a connection after its queued output is sent. Since 1.0. */
NSV_API int nsv_close(nsv_server *srv, uint64_t conn);
/* METHOD: set the connection's user tag, echoed in every event created
 * after the call (events already queued keep the old tag). Since 1.0. */
NSV_API int nsv_conn_set_tag(nsv_server *srv, uint64_t conn, uint64_t tag);
/* METHOD: read the connection's user tag into *tag. Since 1.0. */
NSV_API int nsv_conn_tag(nsv_server *srv, uint64_t conn, uint64_t *tag);
/* METHOD: bytes queued for output on the connection, or an error
 * (NSV_ENOTSUP from non-worker threads of a sharded server: use the
 * TCP_WRITABLE events there). Since 1.0. */
NSV_API int64_t nsv_conn_queued(nsv_server *srv, uint64_t conn);

/* ---- WebSocket ---- */

/* METHOD: accept a WebSocket upgrade for a pending request (its event has
 * NSV_EVF_UPGRADE). headers: extra response lines, e.g. the chosen
 * "Sec-WebSocket-Protocol: chat\r\n" (read the offer from the request).
 * A request that is not a valid handshake (decided when it was parsed) is
 * answered with 400, or 426 and Sec-WebSocket-Version: 13, and the call
 * returns NSV_EPARSE, on a single loop and from any thread of a sharded
 * server alike; the request then counts as answered (another reply gets
 * NSV_ESTATE, or NSV_ESTALE once the connection closed) and the connection
 * closes. NSV_EINVAL for a bad header block
 * (nothing sent, the request still pending). After it the connection produces
 * WS_MESSAGE / WS_CLOSE events (no WS_OPEN: the host made the call). Routes
 * registered with NSV_ROUTE_WEBSOCKET upgrade without this call and start
 * with a WS_OPEN event. Since 1.0. */
NSV_API int nsv_ws_upgrade(nsv_server *srv, uint64_t conn, const char *headers, size_t hlen);
/* METHOD: send one message (NSV_WS_TEXT, NSV_WS_BINARY) or a ping/pong (at
 * most 125 bytes). Text must be valid UTF-8 (not checked). NSV_EAGAIN when
 * the connection's output limit is reached (nothing queued), NSV_ESTATE if
 * not a WebSocket or closing. While more than half of NSV_OPT_MAX_OUTPUT
 * waits to be sent, the library stops reading the connection (until a
 * quarter), so answering each message never meets that limit. At most
 * 4 GiB - 64 KiB (frame headers included) can wait on a connection: past
 * it NSV_ETOOBIG (see nsv_reply). Since 1.0. */
NSV_API int nsv_ws_send(nsv_server *srv, uint64_t conn, int opcode, const char *data, size_t len);
/* METHOD: start the close handshake with code (1000-1003, 1007-1014,
 * 3000-4999) and a UTF-8 reason of at most 123 bytes. The TCP connection is
 * closed when the peer answers, or after NSV_OPT_WS_CLOSE_TIMEOUT_MS. Since 1.0. */
NSV_API int nsv_ws_close(nsv_server *srv, uint64_t conn, int code, const char *reason, size_t len);
/* METHOD: send one message to every open WebSocket of a route (route -1:
 * all), in one call. Returns the number of connections it was queued for
 * (those over the output limit or closing are skipped). Sharded servers: a
 * copy goes to every worker, and the return counts only the connections of
 * the worker running the call, i.e. 0 when called from a thread that is not
 * a worker (the usual pull host) and that worker's share from inside a
 * callback; the other workers send theirs asynchronously and their counts
 * and failures are not reported. Since 1.0. */
NSV_API int nsv_ws_broadcast(nsv_server *srv, int32_t route, int opcode, const char *data, size_t len);
/* METHOD: send one message to n connections; returns how many accepted it. Since 1.0. */
NSV_API int nsv_ws_send_many(nsv_server *srv, const uint64_t *conns, size_t n, int opcode, const char *data, size_t len);

/* ---- raw TCP ---- *
 * Listeners "tcp://host:port" produce TCP_OPEN, TCP_DATA, TCP_WRITABLE and
 * CLOSE events; the idle timeout and max connections apply to them. */

/* METHOD: open an outbound connection to "tcp://host:port". Returns the new
 * connection id at once (>= 0), then a TCP_CONNECTED event, or an ERROR
 * event (code NSV_ECONNREFUSED, NSV_ETIMEDOUT after
 * NSV_OPT_CONNECT_TIMEOUT_MS, NSV_ENOTFOUND for an unknown name, ...)
 * followed by CLOSE. Names resolve on a helper thread; the loop keeps
 * serving. Data sent before the connection is up is queued. Since 1.0. */
NSV_API int64_t nsv_connect(nsv_server *srv, const char *url, size_t len);
/* METHOD: queue bytes on a raw TCP connection. Crossing the connection's
 * high water mark emits TCP_WRITABLE code 0 (slow down); dropping to the
 * low water mark emits code 1. Past half of NSV_OPT_MAX_OUTPUT the library
 * also stops reading from the connection until its output drains. NSV_EAGAIN when queued output would
 * exceed NSV_OPT_MAX_OUTPUT (nothing queued). On a sharded server, called
 * from another thread, the call is accepted before the worker sees it: the
 * limit there is four times NSV_OPT_MAX_OUTPUT, and past it the failure
 * arrives as an ERROR event and the connection is closed (a host that
 * pauses on TCP_WRITABLE stays far below). At most 4 GiB - 64 KiB can
 * wait on a connection: past it NSV_ETOOBIG (see nsv_reply). Since 1.0. */
NSV_API int nsv_send(nsv_server *srv, uint64_t conn, const char *data, size_t len);
/* METHOD: half-close: shut the write side once queued output is sent; the
 * connection closes when the peer has closed too. Since 1.0. */
NSV_API int nsv_shutdown(nsv_server *srv, uint64_t conn);
/* METHOD: close a raw TCP connection at once, dropping queued output (the
 * peer sees a reset). nsv_close closes after the output is sent. Since 1.0. */
NSV_API int nsv_abort(nsv_server *srv, uint64_t conn);
/* METHOD: stop (paused != 0) or resume reading from a raw TCP connection,
 * or (since 1.1) the request body of an HTTP connection that is streaming
 * one (NSV_EVF_STREAM_BODY): no BODY events come while paused, and TCP
 * slows the client; NSV_OPT_REQUEST_TIMEOUT_MS keeps running. NSV_ESTATE
 * when the connection is neither (on a sharded server such a call from
 * another thread is queued and does nothing). Since 1.0. */
NSV_API int nsv_pause_read(nsv_server *srv, uint64_t conn, int paused);
/* METHOD: per-connection water marks (defaults NSV_OPT_TCP_HIGH_WATER /
 * NSV_OPT_TCP_LOW_WATER): 0 <= low <= high. Since 1.0. */
NSV_API int nsv_set_water_marks(nsv_server *srv, uint64_t conn, int64_t high, int64_t low);

/* ---- reading events (pure functions over an event and its arena) ---- */

/* METHOD: find a header by name (case-insensitive). Returns the arena offset
 * of the value (>= 0) and its length in *vlen, or NSV_ENOTFOUND. Since 1.0. */
NSV_API int64_t nsv_ev_header(const nsv_event *ev, const char *arena, const char *name, size_t nlen, uint32_t *vlen);
/* METHOD: header number idx: arena offsets and lengths of name and value.
 * NSV_ENOTFOUND past the end. Since 1.0. */
NSV_API int nsv_ev_header_at(const nsv_event *ev, const char *arena, uint32_t idx, uint32_t *name_off, uint32_t *name_len, uint32_t *val_off, uint32_t *val_len);
/* METHOD: route parameter idx: returns the value's arena offset, length in
 * *vlen, or NSV_ENOTFOUND. Since 1.0. */
NSV_API int64_t nsv_ev_param(const nsv_event *ev, const char *arena, uint32_t idx, uint32_t *vlen);
/* METHOD: route parameter by name: value offset or NSV_ENOTFOUND. Since 1.0. */
NSV_API int64_t nsv_ev_param_by_name(const nsv_event *ev, const char *arena, const char *name, size_t nlen, uint32_t *vlen);

/* ---- utilities ---- *
 * Encoders return the full output length; they write only if it fits into
 * cap (so call once with cap 0 to size a buffer). Negative = error. */

/* METHOD: standard base64 with padding. Since 1.0. */
NSV_API int64_t nsv_base64_encode(const char *src, size_t len, char *dst, size_t cap);
/* METHOD: decode base64 (padding optional; whitespace rejected): NSV_EPARSE on bad input. Since 1.0. */
NSV_API int64_t nsv_base64_decode(const char *src, size_t len, char *dst, size_t cap);
/* METHOD: percent-encode all but unreserved characters (RFC 3986). Since 1.0. */
NSV_API int64_t nsv_url_encode(const char *src, size_t len, char *dst, size_t cap);
/* METHOD: percent-decode; form != 0 also turns '+' into ' '. NSV_EPARSE on a bad escape. Since 1.0. */
NSV_API int64_t nsv_url_decode(const char *src, size_t len, char *dst, size_t cap, int form);
/* METHOD: split a URL into parts (offsets into url). NSV_EURL if malformed. Since 1.0. */
NSV_API int nsv_url_parse(const char *url, size_t len, nsv_url *out);
/* METHOD: JSON string at path ("$.a.b[2].c"), unescaped to UTF-8 (\u
 * escapes and surrogate pairs included). Returns the length or
 * NSV_ENOTFOUND (no such path or not a string), NSV_EPARSE (bad JSON). Since 1.0. */
NSV_API int64_t nsv_json_string(const char *json, size_t len, const char *path, size_t plen, char *dst, size_t cap);
/* METHOD: JSON number at path into *out. Since 1.0. */
NSV_API int nsv_json_number(const char *json, size_t len, const char *path, size_t plen, double *out);
/* METHOD: JSON integer at path into *out; NSV_ERANGE if not an integer in range. Since 1.0. */
NSV_API int nsv_json_integer(const char *json, size_t len, const char *path, size_t plen, int64_t *out);
/* METHOD: JSON boolean at path into *out (0/1). Since 1.0. */
NSV_API int nsv_json_boolean(const char *json, size_t len, const char *path, size_t plen, int *out);
/* METHOD: process-wide log level (enum nsv_log_level); default ERROR. Since 1.0. */
NSV_API int nsv_log_level(void);
/* METHOD: set the process-wide log level. Since 1.0. */
NSV_API int nsv_set_log_level(int level);
/* METHOD: route log lines to fn (NULL = stderr). Called from any library
 * thread; must be thread-safe. Since 1.0. */
NSV_API int nsv_set_log_callback(nsv_log_fn fn, void *ud);
/* METHOD: queue log lines instead of calling the sink: at most max_records
 * lines wait (each up to 511 bytes; longer ones are cut) until a host thread
 * takes them with nsv_log_take, so a host whose language cannot be entered
 * from the library's threads (a cffi callback into Python, ...) logs from
 * its own polling thread. Lines logged while the queue is full are dropped
 * and counted (nsv_log_dropped). 0 turns the queue off (waiting lines are
 * discarded; the sink of nsv_set_log_callback, or stderr, gets lines again).
 * Process-wide, like the level. NSV_ERANGE outside 0..65536, NSV_ENOMEM.
 * Since 1.2. */
NSV_API int nsv_set_log_queue(int max_records);
/* METHOD: lines waiting in the log queue; one atomic load, so a host may
 * call it after every poll and skip nsv_log_take when it is 0. Any thread.
 * Since 1.2. */
NSV_API int64_t nsv_log_pending(void);
/* METHOD: move waiting log lines, oldest first, into dst: as many whole
 * records as fit in cap bytes, each one byte of level (enum nsv_log_level),
 * two bytes of text length (little-endian) and the text (not
 * NUL-terminated). Returns the bytes written, 0 when none wait,
 * NSV_ENOBUFS when cap cannot hold the next record (514 bytes always do),
 * NSV_EINVAL for a NULL dst with cap > 0. Any thread. Since 1.2. */
NSV_API int64_t nsv_log_take(char *dst, size_t cap);
/* METHOD: log lines dropped because the queue was full, since the process
 * started. Since 1.2. */
NSV_API uint64_t nsv_log_dropped(void);
/* METHOD: monotonic clock in milliseconds. Since 1.0. */
NSV_API int64_t nsv_millis(void);

/* Form bodies, query strings and cookies. The parsers fill the same
 * layout: the decoded names and values go one after the other into dst,
 * and pairs[4*i .. 4*i+3] are name offset, name length, value offset and
 * value length of pair i, as offsets into dst (names and values may hold
 * any byte, NUL included). They return the dst bytes needed for all pairs
 * (>= 0) and set *npairs to the number of pairs; they write pairs and dst
 * only when both fit (npairs <= max_pairs and the return <= cap), so a
 * call with max_pairs 0 and cap 0 sizes both buffers. NSV_EINVAL for NULL
 * buffers with non-zero sizes or a NULL npairs, NSV_ETOOBIG for input of
 * 4 GiB or more. */

/* METHOD: parse an application/x-www-form-urlencoded body or a query
 * string (without the '?') into decoded pairs, in input order, repeated
 * names kept. As the WHATWG URL standard's urlencoded parser, Python's
 * urllib.parse.parse_qsl(keep_blank_values=True) and Node's
 * URLSearchParams: '&' separates and empty pieces are skipped; the first
 * '=' splits name from value, and a piece without '=' is a name with an
 * empty value; '+' is a space; %XX (hex, any case) is the byte XX; a '%'
 * not followed by two hex digits is kept as it is (never an error). ';'
 * does not separate. Bytes are passed through: no UTF-8 check or
 * replacement. Never fails on content. Since 1.1. */
NSV_API int64_t nsv_form_parse(const char *src, size_t len, uint32_t *pairs, size_t max_pairs, char *dst, size_t cap, uint32_t *npairs);
/* METHOD: parse a Cookie request header value into pairs, in header order
 * (a name sent twice appears twice; browsers send the most specific path
 * first). Lenient, as browsers send it (RFC 6265 5.4): pieces separated by
 * ';'; spaces and tabs around names and values dropped; the first '='
 * splits; a value wrapped in double quotes loses them; no percent-decoding
 * (values are returned as sent); an empty name ("=v") is kept; a piece
 * without '=' is skipped (as Node's cookie package does; Python's
 * http.cookies drops the whole header instead). Never fails on content.
 * Since 1.1. */
NSV_API int64_t nsv_cookie_parse(const char *hdr, size_t len, uint32_t *pairs, size_t max_pairs, char *dst, size_t cap, uint32_t *npairs);

/* Flags of nsv_set_cookie. At most one SameSite; SAMESITE_NONE and
 * PARTITIONED need SECURE. */
enum nsv_cookie_flag {
    NSV_COOKIE_SECURE = 1,
    NSV_COOKIE_HTTPONLY = 2,
    NSV_COOKIE_SAMESITE_LAX = 4,
    NSV_COOKIE_SAMESITE_STRICT = 8,
    NSV_COOKIE_SAMESITE_NONE = 16,
    NSV_COOKIE_PARTITIONED = 32
};

/* METHOD: a Set-Cookie header value (without "Set-Cookie: "), as
 * "name=value; Path=p; Max-Age=n; Expires=<IMF-fixdate>; Domain=d; Secure;
 * HttpOnly; SameSite=Lax; Partitioned" with absent parts left out: path
 * and domain when their length is 0, Max-Age when max_age < 0, Expires
 * when expires < 0 (else Unix seconds, up to year 9999), flags from enum
 * nsv_cookie_flag. Encoder convention (returns the length, writes only if
 * it fits into cap). Strict, NSV_EINVAL with a detail for: a name that is
 * empty or not an RFC 6265 token; a value with a byte outside cookie-octet
 * (controls, space, '"' other than a pair wrapping the whole value, ',',
 * ';', '\', non-ASCII: encode such values first); a path with ';', control
 * or non-ASCII bytes; a domain with those, space or ','; expires after
 * 9999-12-31T23:59:59Z; unknown flag bits; two SameSite flags; SameSite=None
 * or Partitioned without SECURE; a "__Secure-" name without SECURE; a
 * "__Host-" name without SECURE, with a domain or with a path other than
 * "/" (prefixes matched case-insensitively, as browsers do). Since 1.1. */
NSV_API int64_t nsv_set_cookie(const char *name, size_t nlen, const char *value, size_t vlen, const char *path, size_t plen, const char *domain, size_t dlen, int64_t max_age, int64_t expires, uint32_t flags, char *dst, size_t cap);

/* ---- multipart/form-data (streaming) ----
 * A body is fed in pieces of any size to an opaque parser, which turns
 * them into batches of fixed-layout records plus an arena, like nsv_poll.
 * Memory is one allocation at nsv_multipart_new (about max_header_bytes +
 * 400 bytes); feeding never allocates, whatever the size of the parts.
 * Syntax (RFC 7578 over RFC 2046), strict: the body starts with "--" and
 * the boundary (no preamble), a boundary line ends in CRLF (no transport
 * padding), header lines end in CRLF, names are tokens, values hold no
 * control byte but HTAB, no line folding; every part has one
 * "Content-Disposition: form-data" with a name parameter (token or quoted
 * string; duplicates, a missing ';' or '=', spaces around '=' are
 * errors). "\r\n--boundary" followed by anything but CRLF or "--" is data.
 * After the final "--boundary--" comes the epilogue, ignored, but a
 * delimiter line ("\r\n--boundary") in it is NSV_EPARSE. See
 * docs/MULTIPART.md. */

/* Opaque parser handle. */
typedef struct nsv_multipart nsv_multipart;

/* Record types (nsv_multipart_event.type). */
enum nsv_multipart_event_type {
    NSV_MP_PART = 1,     /* a part's headers are complete: name, filename, content type, headers */
    NSV_MP_DATA = 2,     /* data = the next bytes of the current part's body */
    NSV_MP_PART_END = 3, /* the current part's body is complete */
    NSV_MP_END = 4       /* the final boundary was seen (after the last PART_END) */
};

/* Flags of a PART record (nsv_multipart_event.flags). */
enum nsv_multipart_flag {
    NSV_MPF_FILENAME = 1,     /* a filename or filename* parameter was given (maybe empty) */
    NSV_MPF_CONTENT_TYPE = 2, /* the part has a Content-Type header */
    NSV_MPF_FILENAME_EXT = 4  /* the filename came from filename* (RFC 8187), decoded to UTF-8 */
};

/*
 * One multipart record: 64 bytes, no pointers; _off/_len pairs refer to the
 * arena given to nsv_multipart_feed. PART: name (quoted-string \" and \\
 * unescaped; other bytes as sent, so a browser's %22, %0D, %0A stay
 * encoded), filename (the same, or filename* decoded; length 0 and no
 * NSV_MPF_FILENAME when absent), content_type (the header's value,
 * trimmed; absent: no NSV_MPF_CONTENT_TYPE, read it as text/plain),
 * headers (the part's header lines, "Name: value\r\n" each, nheaders of
 * them). DATA: data. input_off is the offset in the whole body of the
 * record's bytes: the header block (PART), the first data byte (DATA),
 * the CRLF before the boundary (PART_END), the byte after "--boundary--"
 * (END). part is the part's index (0, 1, ...).
 */
typedef struct nsv_multipart_event {
    uint64_t input_off;
    uint32_t type;     /* enum nsv_multipart_event_type */
    uint32_t flags;    /* enum nsv_multipart_flag bits (PART) */
    uint32_t part;     /* index of the part */
    uint32_t nheaders; /* header lines (PART) */
    uint32_t name_off, name_len;
    uint32_t filename_off, filename_len;
    uint32_t content_type_off, content_type_len;
    uint32_t headers_off, headers_len;
    uint32_t data_off, data_len;
} nsv_multipart_event;

/* METHOD: the boundary of a Content-Type value "multipart/form-data;
 * boundary=..." (media type case-insensitive; the boundary parameter a
 * token or a quoted string; other parameters skipped). Returns 0 with the
 * boundary at content_type[*off, *off + *blen) (inside the quotes when
 * quoted), NSV_ENOTFOUND when the media type is not multipart/form-data
 * (answer 415), NSV_EPARSE when the parameters are malformed, the boundary
 * is missing or given twice, or it is not 1-70 RFC 2046 bchars (letters,
 * digits, '()+_,-./:=? and space) not ending in a space (answer 400); the
 * detail names the byte. Since 1.1. */
NSV_API int nsv_multipart_boundary(const char *content_type, size_t len, uint32_t *off, uint32_t *blen);
/* CONSTRUCTOR: a parser for one body with this boundary (as
 * nsv_multipart_boundary checks it). max_header_bytes bounds one part's
 * header block, its empty line included (0: 16384; at most 1 MiB);
 * max_parts bounds the parts (0: no limit). NULL on a bad boundary, a bad
 * limit or no memory (nsv_last_error_detail(NULL) says which). Since 1.1. */
NSV_API nsv_multipart *nsv_multipart_new(const char *boundary, size_t blen, uint32_t max_header_bytes, uint32_t max_parts);
/* DESTRUCTOR: frees the parser; NULL is ignored. Since 1.1. */
NSV_API void nsv_multipart_free(nsv_multipart *mp);
/* METHOD: parse the next len bytes of the body: fills up to max_events
 * records (at least 2) and their bytes into arena, sets *consumed to the
 * bytes of data it took and returns the number of records. Bytes taken
 * are either in the records or kept in the parser (a header block not yet
 * complete, at most boundary length + 5 bytes that may start a boundary),
 * so the caller passes only data + *consumed onwards. When the records or
 * the arena fill up it stops early (*consumed < len): handle the batch,
 * then call again with the rest (0 records is a valid answer while bytes
 * were taken). Consecutive data of a part in one batch is one DATA record.
 * NSV_ENOBUFS when nothing could be taken because the next record does
 * not fit into the empty arena: nsv_multipart_need tells the size (at most
 * 2 * max_header_bytes + 80). NSV_EPARSE with a detail naming the byte
 * offset in the body and the rule (answer 400): then the parser stays
 * failed and *consumed is where it stopped. NSV_EINVAL for bad
 * arguments. Records and arena bytes of a failed call are meaningless.
 * Since 1.1. */
NSV_API int nsv_multipart_feed(nsv_multipart *mp, const char *data, size_t len, nsv_multipart_event *evs, int max_events, char *arena, size_t arena_cap, size_t *consumed);
/* METHOD: end of input: 0 when the final boundary was seen (END was
 * returned), else NSV_EPARSE "missing final boundary" (or the earlier
 * parse error). Since 1.1. */
NSV_API int nsv_multipart_finish(nsv_multipart *mp);
/* METHOD: arena bytes the next record needs after nsv_multipart_feed
 * returned NSV_ENOBUFS (0 otherwise). Since 1.1. */
NSV_API int64_t nsv_multipart_need(const nsv_multipart *mp);
/* METHOD: sizeof(nsv_multipart_event) in the loaded library (64). Since 1.1. */
NSV_API size_t nsv_multipart_event_size(void);
/* METHOD: one server-sent event (WHATWG HTML, text/event-stream) into
 * dst, as the encoders above: "event: NAME\n" when elen > 0, "id: ID\n"
 * when id is not NULL (a non-NULL id of length 0 sends "id: ", which
 * resets the client's last event id), "retry: N\n" when retry_ms >= 0,
 * the data as "data: LINE\n" lines split on LF, CRLF and lone CR (the
 * client joins them with LF, so the data comes back as sent with every
 * line break an LF), then an empty line. Data lines are written when data
 * is not NULL or an event name is given, and that makes the client
 * dispatch the event (with dlen 0: one "data: \n", an event with empty
 * data); data NULL without a name sends only id and/or retry, which the
 * client records without dispatching anything. NSV_EINVAL with a detail
 * (nsv_last_error_detail(NULL)) for CR or LF in the name or id (they
 * would start another field), NUL in the id (clients ignore such an id),
 * a NULL pointer with a non-zero length, or nothing to send. Since 1.1. */
NSV_API int64_t nsv_sse_format(const char *event, size_t elen, const char *id, size_t idlen, const char *data, size_t dlen, int64_t retry_ms, char *dst, size_t cap);
/* METHOD: an event-stream comment, e.g. a keepalive that stops proxies
 * and clients from timing the stream out: ": LINE\n" for each line of
 * text (split as nsv_sse_format splits data; len 0 gives ": \n"), then an
 * empty line. Clients ignore it. Encoder convention as above. Since 1.1. */
NSV_API int64_t nsv_sse_comment(const char *text, size_t len, char *dst, size_t cap);

/* NSV_CDEF_END */

#ifdef __cplusplus
}
#endif
#endif /* NANOSRV_H */
