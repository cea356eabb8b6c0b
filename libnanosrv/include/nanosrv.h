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
 *   nsv_shutdown, nsv_abort, nsv_pause_read, nsv_set_water_marks, nsv_connect,
 *   nsv_tls_upgrade
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
#define NSV_VERSION_MINOR 5
#define NSV_VERSION_PATCH 0
/* MAJOR*10000 + MINOR*100 + PATCH */
#define NSV_VERSION_NUMBER 10500
#define NSV_VERSION_STRING "1.5.0"
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
    NSV_EV_WAKEUP = 16,    /* nsv_wakeup_conn: conn = the connection (its tag), body =
                              the payload */
    NSV_EV_HTTP_RESPONSE = 17, /* outbound request (nsv_http_request): conn = the request
                              id, code = status, headers as for REQUEST, path = the reason
                              phrase, method = the request's method; flags NSV_EVF_KEEPALIVE
                              (the connection goes back to the pool), NSV_EVF_TLS. Since 1.3. */
    NSV_EV_HTTP_BODY = 18  /* a de-chunked piece of its body; NSV_EVF_EOF on the last
                              (possibly empty) one, the request's final event. Since 1.3. */
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
    NSV_EVF_STREAM_BODY = 128, /* REQUEST: the body follows in BODY events (see
                              NSV_ROUTE_STREAM_BODY); body_len is 0 here */
    NSV_EVF_PROXY = 256,   /* REQUEST, WS_OPEN, TCP_OPEN: the connection came through a
                              front that sent a PROXY protocol header (listener option
                              NSV_LOPT_PROXY_PROTOCOL); peer and peer_port are the client's
                              from that header, and the event's tls block carries the
                              front's fields (see "PROXY protocol" below). Since 1.4. */
    NSV_EVF_HTTP2 = 512,   /* REQUEST, BODY: the request is an HTTP/2 stream; conn is the
                              stream's id (answered as usual, see "HTTP/2"). Since 1.5. */
    NSV_EVF_DEFLATE = 1024 /* WS_OPEN: permessage-deflate was negotiated. Since 1.5. */
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
 * PROXY protocol: REQUEST and WS_OPEN events of a connection flagged
 * NSV_EVF_PROXY carry a tls block even on a plain connection, extended by
 * the front's fields: "sni\0peer_subject\0front\0front_port\0dst\0dst_port\0
 * ssl\0authority\0alpn\0" (nine NUL-terminated fields; the first two are ""
 * unless the connection to this server is itself TLS). front is the address
 * that connected to this server (the load balancer), dst and dst_port the
 * address the client connected to on the front, ssl the TLS version the
 * client spoke to the front ("" when none or not told; v2 PP2_TYPE_SSL),
 * authority the host name the client asked the front for (PP2_TYPE_AUTHORITY,
 * its SNI) and alpn the protocol it chose (PP2_TYPE_ALPN); "" when the header
 * did not say (v1 carries no TLVs).
 * A v2 LOCAL header (a front's health check), a v1 "PROXY UNKNOWN" line and
 * a v2 PROXY header of family AF_UNSPEC keep the socket's own peer and set
 * no NSV_EVF_PROXY; an AF_UNIX client gives an empty peer and port 0.
 * TCP_OPEN events carry the block too; there sni and peer_subject are
 * always "" (it comes before any TLS handshake).
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
    NSV_OPT_EXPECT_MANUAL = 27,     /* 1: a streamed request (NSV_EVF_STREAM_BODY) that asks
                                       "Expect: 100-continue" gets its 100 Continue only when
                                       the host calls nsv_continue (when its application first
                                       reads the body), however many polls go by; an answer
                                       instead sends none. 0 (default): at the host's next turn
                                       unless it answered. Since 1.2. */
    /* The HTTP client (nsv_http_request). Since 1.3. */
    NSV_OPT_HTTP_CONNS_PER_ORIGIN = 28, /* connections per scheme+host+port, default 8
                                       (1..256); more requests wait in FIFO order */
    NSV_OPT_HTTP_POOL_IDLE_MS = 29, /* idle pooled connection closed after, default 30000;
                                       0 = no keep-alive pool */
    NSV_OPT_HTTP_HEAD_TIMEOUT_MS = 30, /* request handed to a connection -> response head
                                       complete, default 30000 */
    NSV_OPT_HTTP_TIMEOUT_MS = 31,   /* whole request, start to last body byte; 0 = none (default) */
    NSV_OPT_HTTP_READ_TIMEOUT_MS = 32, /* idle between response body reads, default 30000 */
    NSV_OPT_HTTP_MAX_HEAD_BYTES = 33, /* response head size, default 65536 */
    NSV_OPT_HTTP_MAX_HEADERS = 34,  /* response header lines, default 100 (1..256) */
    NSV_OPT_HTTP_MAX_BODY = 35,     /* response body bytes on the wire (chunk framing
                                       counts), default 1 GiB */
    NSV_OPT_DRAINING = 36,          /* read-only: 1 once a drain has started (nsv_drain_start,
                                       nsv_drain_on_signal), also after it ended; 0 before.
                                       For readiness checks that must fail before
                                       connections are refused. Any thread. Since 1.3. */
    NSV_OPT_METRICS_LATENCY = 37,   /* 1 (default): time each request for the latency
                                       histograms of nsv_metrics (two clock reads per
                                       request; a head is stamped with its loop turn's clock);
                                       0: the histograms stay empty. Since 1.4. */
    NSV_OPT_ACCESS_LOG = 38,        /* 0 (default): off; N > 0: keep up to N access records
                                       per worker for nsv_access_take (one per completed
                                       request), and at most N x 512 bytes of them (at least
                                       384 KiB: a record's size is the client's); records past
                                       either are dropped and counted (NSV_M_ACCESS_DROPPED).
                                       Since 1.4. */
    NSV_OPT_SHED = 39,              /* at NSV_OPT_MAX_CONNS: 1 (default) makes room for a new
                                       connection by closing an idle keep-alive connection,
                                       else the one longest inside an unfinished request head
                                       (see "Shedding" at nsv_metrics); 0 refuses the new one
                                       (503 on plain HTTP) as before. Since 1.4. */
    NSV_OPT_HTTP2 = 40,             /* HTTP/2 (see "HTTP/2" below): NSV_H2_* bits, 0 (default)
                                       = HTTP/1.1 only. Read by nsv_listen: later listeners
                                       use the value set then. NSV_ENOTSUP for a non-zero
                                       value when nsv_http2_available() is 0. Since 1.5. */
    NSV_OPT_H2_MAX_STREAMS = 41,    /* concurrent streams per HTTP/2 connection
                                       (SETTINGS_MAX_CONCURRENT_STREAMS), default 100 (1..65535).
                                       Since 1.5. */
    NSV_OPT_H2_WINDOW = 42,         /* initial flow-control window of each request stream
                                       (what a client may send before the host's side reads
                                       it), default 1048576 (65535..2^31-1). Since 1.5. */
    NSV_OPT_H2_HPACK_TABLE = 43,    /* HPACK dynamic table size, both directions
                                       (SETTINGS_HEADER_TABLE_SIZE), default 4096 (0..65536).
                                       Since 1.5. */
    NSV_OPT_H2_MAX_RESETS = 44,     /* RST_STREAM frames a client may send on one connection:
                                       a burst of this many, refilled at this many per second;
                                       past it GOAWAY ENHANCE_YOUR_CALM ends the connection
                                       (rapid reset, CVE-2023-44487). Streams nghttp2 itself
                                       resets or refuses count in its own limit of twice this
                                       (GOAWAY INTERNAL_ERROR). Default 200 (1..100000).
                                       Since 1.5. */
    NSV_OPT_TLS_TICKETS = 45,       /* 1 (default): TLS session tickets (RFC 5077) with keys that
                                       rotate every NSV_OPT_TLS_TICKET_LIFETIME_S (a ticket is
                                       accepted for up to one lifetime); 0: off. One key set
                                       and one cache serve every worker of a sharded server.
                                       This and the next two are read at the first TLS
                                       nsv_listen; later changes have no effect. TLS 1.2 only:
                                       the mbedTLS 2.28 server has no TLS 1.3. Since 1.5. */
    NSV_OPT_TLS_TICKET_LIFETIME_S = 46, /* ticket lifetime and key rotation period in seconds,
                                       default 3600 (60..86400). Since 1.5. */
    NSV_OPT_TLS_SESSION_CACHE = 47, /* server-side session cache entries (session-id
                                       resumption), default 1000; 0: off. Bounded: when full,
                                       an expired entry, else the one stored longest ago (to
                                       the second) makes room; lookups scan it, so keep it in
                                       the thousands. Since 1.5. */
    NSV_OPT_WS_DEFLATE = 48,        /* WebSocket permessage-deflate (RFC 7692): 0 (default)
                                       off, 1 on: an upgrade takes the first acceptable offer
                                       of the client's Sec-WebSocket-Extensions (one with an
                                       unknown, repeated or bad parameter is declined, never
                                       failed) and answers it, unless the host's own
                                       nsv_ws_upgrade headers carry that field; WS_OPEN then
                                       has NSV_EVF_DEFLATE. Received messages are inflated
                                       before WS_MESSAGE, counted against
                                       NSV_OPT_WS_MAX_MESSAGE as they inflate (1009), corrupt
                                       data 1007; sends at least _MIN_SIZE long are compressed.
                                       NSV_ENOTSUP in builds without zlib. See
                                       docs/WEBSOCKET.md. Since 1.5. */
    NSV_OPT_WS_DEFLATE_MIN_SIZE = 49, /* messages shorter than this are sent uncompressed,
                                       default 64. Since 1.5. */
    NSV_OPT_WS_DEFLATE_WINDOW_BITS = 50, /* largest LZ77 window (8..15), default 15: the
                                       server's (server_max_window_bits, at most the offer's)
                                       and the one it chooses for a client offering
                                       client_max_window_bits (never 8); a client that offers
                                       no limit uses 15. Memory per connection, made at the
                                       first compressed message each way: deflate about
                                       1 << (bits + 3) bytes (memLevel bits - 7), inflate
                                       1 << bits + 7 KiB. A server window of 8 sends every
                                       message uncompressed (zlib has no 256-byte raw
                                       deflate). Since 1.5. */
    NSV_OPT_H2_BODY_BUFFER = 51     /* request body bytes one HTTP/2 connection may buffer for
                                       requests the host has not been given yet (bodies that
                                       are not streamed arrive whole, each up to
                                       NSV_OPT_MAX_BODY), default 8388608 (65536..2^62). Past
                                       it the newest such streams are refused with
                                       RST_STREAM REFUSED_STREAM (nothing was processed:
                                       clients may retry), never the oldest, so one
                                       connection holds at most about this plus one
                                       max_body, as an HTTP/1.1 connection holds one.
                                       Since 1.5. */
};

/* NSV_OPT_HTTP2 bits. Since 1.5. */
enum nsv_http2_mode {
    NSV_H2_TLS = 1,     /* TLS listeners offer "h2" before "http/1.1" by ALPN */
    NSV_H2_PRIOR = 2,   /* plain HTTP listeners accept h2c with prior knowledge (the
                           connection starts with the HTTP/2 preface) */
    NSV_H2_UPGRADE = 4, /* plain HTTP listeners honour "Upgrade: h2c" (RFC 7540 3.2)
                           on a request without a body */
    NSV_H2_ALL = 7
};

/*
 * HTTP/2 (docs/HTTP2.md). Each request stream reaches the host as an
 * ordinary REQUEST event (then BODY events for a streamed body) with
 * NSV_EVF_HTTP2 set and NSV_EVF_KEEPALIVE never set; ev->conn is the
 * stream's own 64-bit id, stale (NSV_ESTALE) once the stream ends, and the
 * host answers it with the usual calls: nsv_reply, nsv_reply_batch,
 * nsv_reply_start/nsv_send_chunk/nsv_reply_end, nsv_sse_*, nsv_reply_file,
 * nsv_continue, nsv_set_reason (ignored: HTTP/2 has no reason phrase),
 * nsv_close (the stream is reset), nsv_pause_read (the stream's window is
 * not reopened while paused), nsv_set_water_marks and TCP_WRITABLE (paced by
 * the client's flow-control window), tags and nsv_conn_queued. Header names
 * arrive in lower case; :authority arrives as Host; cookie fields arrive
 * joined with "; "; a body without content-length arrives as chunked
 * (NSV_EVF_CHUNKED). The reply's connection-specific headers (Connection,
 * Keep-Alive, Transfer-Encoding, Upgrade) are dropped on the wire.
 * HTTP/1.1 only: nsv_ws_upgrade (a stream is never an upgrade request: it
 * answers like any request that is not, NSV_EPARSE and 400), WebSocket
 * routes (426), and the raw TCP calls (NSV_ESTATE as on any HTTP request).
 * A stream's CLOSE event comes when the stream ends.
 */

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
/* METHOD: version text, e.g. "1.5.0". Static storage. Since 1.0. */
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
/* METHOD: 1 if the build has HTTP/2 (nghttp2), else 0. Since 1.5. */
NSV_API int nsv_http2_available(void);

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
 * and WebSocket input and streamed request bodies until the host catches up,
 * so a slow host bounds memory. NULL on failure. Since 1.0. */
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

/* Listener options (nsv_listener_set_int / nsv_listener_set_str). Ids are
 * never reused. Since 1.4. */
enum nsv_listener_option {
    NSV_LOPT_PROXY_PROTOCOL = 1,   /* 0 (default) off; NSV_PROXY_V1, NSV_PROXY_V2 or
                                      NSV_PROXY_ANY: every connection must begin with a
                                      PROXY protocol header of that version (sent by a load
                                      balancer: HAProxy send-proxy / send-proxy-v2, nginx
                                      proxy_protocol, AWS NLB). It is read before anything
                                      else, TLS included; a missing, malformed or late one
                                      closes the connection (counted, NSV_M_PROXY_ERRORS)
                                      and nothing reaches the host. */
    NSV_LOPT_PROXY_TIMEOUT_MS = 2, /* deadline for the whole header from accept, default 5000
                                      (1 .. 86400000, NSV_ERANGE otherwise) */
    NSV_LOPT_PROXY_FROM = 100,     /* string: fronts allowed to connect when the PROXY
                                      protocol is on, as a CIDR list (below); a connection
                                      from any other address is closed at accept, before a
                                      byte is read (NSV_M_CONNS_DENIED). "" (default): any. */
    NSV_LOPT_ALLOW = 101,          /* string: CIDR list; when not empty, only clients in it
                                      are served */
    NSV_LOPT_DENY = 102            /* string: CIDR list of clients never served; checked
                                      before ALLOW (a client in both is refused) */
};

/* Values of NSV_LOPT_PROXY_PROTOCOL. */
enum nsv_proxy_version {
    NSV_PROXY_OFF = 0,
    NSV_PROXY_V1 = 1,  /* the text header "PROXY TCP4 ...\r\n" */
    NSV_PROXY_V2 = 2,  /* the binary header, with its TLVs */
    NSV_PROXY_ANY = 3  /* either, told apart by the first byte */
};

/* METHOD: set an integer option (enum nsv_listener_option) of a listener
 * (the id from nsv_listen or nsv_listen_fd). NSV_EINVAL for an unknown
 * listener or option, NSV_ERANGE for a bad value (detail says which).
 * Sharded servers: NSV_ESTATE once the workers run; a single loop accepts
 * it between polls (it applies to connections accepted afterwards).
 * Since 1.4. */
NSV_API int nsv_listener_set_int(nsv_server *srv, int listener, int opt, int64_t value);
/* METHOD: read an integer listener option; NSV_EINVAL for an unknown
 * listener or option. Since 1.4. */
NSV_API int64_t nsv_listener_get_int(nsv_server *srv, int listener, int opt);
/* METHOD: set a string option of a listener: an address list (copied; NULL
 * or len 0 clears it). A list is entries separated by commas, spaces or
 * both: IPv4 or IPv6 addresses with an optional prefix length
 * ("10.0.0.0/8", "192.168.1.7", "::1", "2001:db8::/32"). An IPv4 entry also
 * matches the same address seen as IPv4-mapped IPv6 ("::ffff:10.1.2.3"),
 * and an AF_UNIX peer matches no entry (only an empty ALLOW list lets it
 * in). NSV_EINVAL names the first bad entry (host bits set past the prefix
 * are refused: "10.0.0.1/8"); at most 256 entries (NSV_ERANGE). The lists
 * are checked at accept against the socket's peer, before a byte is read,
 * or with the PROXY protocol on: PROXY_FROM against the socket's peer at
 * accept, then ALLOW and DENY against the client address of the header (for
 * a LOCAL or UNKNOWN header: the socket's peer, the front itself) as soon as
 * it is read; a refused connection is closed without an answer and
 * counted (NSV_M_CONNS_DENIED), and the host sees nothing of it. Threads
 * and errors as nsv_listener_set_int. Since 1.4. */
NSV_API int nsv_listener_set_str(nsv_server *srv, int listener, int opt, const char *value, size_t len);
/* FUNCTION: listening sockets passed by systemd socket activation (or a
 * supervisor following the same protocol): the value of LISTEN_FDS when
 * LISTEN_PID is this process, else 0. The sockets are descriptors 3, 4, ...
 * 3 + n - 1, in the order of the socket unit (names in LISTEN_FDNAMES);
 * hand each to nsv_listen_fd. unset_env 1 removes LISTEN_PID, LISTEN_FDS and
 * LISTEN_FDNAMES from the environment (so child processes do not take them
 * for theirs; not thread-safe, as unsetenv; read LISTEN_FDNAMES first for
 * the names). NSV_EINVAL when the variables
 * are malformed. Since 1.4. */
NSV_API int nsv_inherited_fds(int unset_env);

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
/* METHOD: drain on a signal: installs a handler (sigaction, SA_RESTART)
 * for signo, one of SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2
 * (others NSV_EINVAL), whose first delivery calls
 * nsv_drain_start(srv, timeout_ms). While the drain runs, a SIGINT calls
 * nsv_stop(srv), so a stuck drain can be forced with a second ^C; other
 * signals are ignored then (one SIGTERM is often delivered twice, e.g. by
 * timeout(1) or a control-group kill, and must not drop the requests in
 * flight; timeout_ms bounds the drain). The signal's default action (ending the
 * process) no longer applies while a server is registered on it. A blocked
 * nsv_poll wakes and returns the drain's events, then NSV_ESTOPPED. Several
 * servers may register one signal (each is drained; at most 16
 * registrations in the process, NSV_ENOMEM beyond); calling again with
 * timeout_ms >= 0 for the same server and signal replaces the timeout
 * used by a later first delivery. timeout_ms < 0 removes srv's
 * registration for signo (NSV_ENOTFOUND if there is none); when no server
 * is left on the signal the disposition found at the first registration is
 * restored. nsv_server_free removes every registration of the server, and
 * waits for a handler running on another thread to leave it: once free
 * returns, no handler touches the server. From any thread; the handler
 * runs on whichever thread the kernel picks. Since 1.3. */
NSV_API int nsv_drain_on_signal(nsv_server *srv, int signo, int timeout_ms);

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
 * slows the client; NSV_OPT_REQUEST_TIMEOUT_MS keeps running; or (since
 * 1.3) a WebSocket, server side or client (nsv_ws_connect): no WS_* events
 * come while paused. NSV_ESTATE when the connection is none of these (on a
 * sharded server such a call from another thread is queued and does
 * nothing). Since 1.0. */
NSV_API int nsv_pause_read(nsv_server *srv, uint64_t conn, int paused);
/* METHOD: per-connection water marks (defaults NSV_OPT_TCP_HIGH_WATER /
 * NSV_OPT_TCP_LOW_WATER): 0 <= low <= high. Raw TCP connections always get
 * TCP_WRITABLE events at these marks; a WebSocket (server side or
 * nsv_ws_connect) gets them from this call on (since 1.3): code 0 once its
 * queued output passes high, code 1 when it is back at low, so a host can
 * stop sending before nsv_ws_send says NSV_EAGAIN. Since 1.0. */
NSV_API int nsv_set_water_marks(nsv_server *srv, uint64_t conn, int64_t high, int64_t low);

/* Flags of nsv_tls_upgrade. Since 1.3. */
enum nsv_tls_upgrade_flag {
    NSV_TLS_UPGRADE_VERIFY = 1 /* verify the peer's chain and name (see nsv_tls_upgrade) */
};
/* METHOD: start a TLS client session on an outbound raw TCP connection
 * (nsv_connect("tcp://...")) once its TCP_CONNECTED event came: STARTTLS,
 * as OpenResty's tcpsock:sslhandshake. server_name (len bytes, 0..253, no
 * NUL; may be NULL with len 0) is sent as SNI unless empty. With
 * NSV_TLS_UPGRADE_VERIFY the peer's chain is checked against
 * NSV_OPT_TLS_CLIENT_CA_FILE / _PEM (default: the system bundle), as for
 * tls:// URLs, and its name against server_name (an empty one checks no
 * name). Without the flag NOTHING is verified for this connection: that is
 * OpenResty's default (sslhandshake's verify argument is false unless
 * given); tls:// URLs keep verifying per NSV_OPT_TLS_VERIFY_SERVER.
 * Bytes already received are delivered (TCP_DATA) before the handshake;
 * data passed to nsv_send while it runs is queued and goes out encrypted
 * after it. On success a second TCP_CONNECTED event comes, with
 * NSV_EVF_TLS; on failure an ERROR event with code NSV_ETLS (body: the
 * mbedTLS reason, e.g. the verification failure), then CLOSE. The
 * handshake is bounded by NSV_OPT_CONNECT_TIMEOUT_MS from the call
 * (ERROR NSV_ETIMEDOUT, then CLOSE). Errors: NSV_EINVAL (bad flags or
 * server_name), NSV_ESTALE, NSV_ESTATE (not an outbound raw TCP
 * connection, not connected yet, already TLS or in a handshake, closing),
 * NSV_EAGAIN (output queued before the call is not yet sent: retry after
 * the TCP_WRITABLE event or a later poll), NSV_ENOTSUP (no TLS in this
 * build). Sharded servers: from any thread, like nsv_send (the checks are
 * made at once; a failure found on the owning worker comes as ERROR, then
 * CLOSE). Since 1.3. */
NSV_API int nsv_tls_upgrade(nsv_server *srv, uint64_t conn, const char *server_name, size_t len, uint32_t flags);

/* ---- HTTP/1.1 client ---- *
 * Outbound requests on the server's own loop. nsv_http_request returns a
 * request id at once (stale-safe like connection ids, never equal to one);
 * then come one HTTP_RESPONSE event (1xx interim responses are skipped),
 * HTTP_BODY events (the last has NSV_EVF_EOF), or instead, at any point, one
 * ERROR event with conn = the request id and code NSV_ECONNREFUSED,
 * NSV_ETIMEDOUT (connect, head, read or whole-request timeout; the body says
 * which), NSV_ENOTFOUND (name), NSV_ETLS, NSV_EPARSE (malformed response:
 * framing conflicts, bad chunk sizes, ...), NSV_ETOOBIG (head or body past
 * NSV_OPT_HTTP_MAX_*), NSV_ECLOSED (the server closed before the response
 * ended) or NSV_ESTOPPED (drain deadline). After the final event (BODY with
 * EOF, or ERROR) nothing carries the id. No CLOSE event is sent for a
 * request. Connections are pooled per origin (scheme, host, port) and
 * reused when the response allows it (HTTP/1.1 without "Connection: close",
 * a body read to its end); a request that fails on a reused connection
 * before any response byte is retried once on a new one when its method is
 * idempotent and its body was given in one piece. The response is read
 * while the request is being sent, so an early answer (a 413 or 401 before
 * the body ends) is delivered, also when the server then resets the
 * connection. A 101 response is
 * reported and ends the request (its connection is closed); redirects are
 * the host's to follow. https:// verifies the certificate and host name per
 * NSV_OPT_TLS_VERIFY_SERVER and NSV_OPT_TLS_CLIENT_CA_*, with SNI. Sharded
 * servers: from any thread; a request runs on one worker, whose poller gets
 * its events; from a thread that is not its worker, nsv_http_request_body,
 * _end, nsv_http_pause and nsv_http_cancel are queued and a state error
 * comes as the request's ERROR event. Draining: requests in flight go on,
 * new ones get NSV_ESTOPPED. */
enum nsv_http_flag {
    NSV_HTTP_STREAM_BODY = 1, /* the body follows in nsv_http_request_body pieces, then
                                 nsv_http_request_end */
    NSV_HTTP_HOST_HEADER = 2  /* the header block holds exactly one "Host:" line, sent
                                 instead of the URL's authority (checked as one: host
                                 [":" port]); the connection and its pool still follow
                                 the URL (a proxy passing its client's Host). Since 1.3. */
};
/* METHOD: start a request. method: a token (GET, POST, ...); url:
 * "http://" or "https://" host [":" port] [path ["?" query]] (the path and
 * query are sent as given; "#fragment" is refused); headers: zero or more
 * "Name: value\r\n" lines, without Host (unless NSV_HTTP_HOST_HEADER),
 * Content-Length, Transfer-Encoding, Connection, TE or Upgrade (the library
 * frames the request). body/body_len: the whole body (may be NULL with 0), sent with a
 * Content-Length (0 only for POST, PUT and PATCH). With
 * NSV_HTTP_STREAM_BODY, body must be empty and content_length is the body's
 * size (>= 0) or -1 to send it chunked; without it content_length must be
 * -1 or body_len. Returns the id (> 0) or NSV_EINVAL (which argument broke
 * which rule: nsv_last_error_detail), NSV_EURL, NSV_ENOTSUP (https without
 * TLS), NSV_ESTOPPED (stopping or draining), NSV_ENOMEM. Since 1.3. */
NSV_API int64_t nsv_http_request(nsv_server *srv, const char *method, size_t method_len, const char *url,
                                 size_t url_len, const char *headers, size_t headers_len, const char *body,
                                 size_t body_len, int64_t content_length, uint32_t flags);
/* METHOD: one piece of a streamed request body (sent as one chunk, or raw
 * under a declared content_length). NSV_EAGAIN when more than
 * NSV_OPT_MAX_OUTPUT waits to be sent (nothing queued; a TCP_WRITABLE event
 * with code 1 and conn = the request id comes once half of it has gone);
 * NSV_ERANGE past the declared content_length; NSV_ESTATE when the request
 * does not stream its body or was ended; NSV_ESTALE for an unknown id.
 * After a final response that ends the body early (Connection: close, or a
 * status >= 300, while the body is still being sent) the rest is not sent:
 * pieces return NSV_OK and are dropped, and nsv_http_request_end returns
 * NSV_OK. Since 1.3. */
NSV_API int nsv_http_request_body(nsv_server *srv, uint64_t req, const char *data, size_t len);
/* METHOD: end a streamed request body. NSV_ESTATE when fewer bytes than the
 * declared content_length were sent (the request stays open: send the rest
 * or cancel it) or it was ended already. Since 1.3. */
NSV_API int nsv_http_request_end(nsv_server *srv, uint64_t req);
/* METHOD: stop (paused != 0) or resume reading a request's response: no
 * HTTP_BODY events come while paused and at most one read of data is
 * buffered; the read timeout does not run. Since 1.3. */
NSV_API int nsv_http_pause(nsv_server *srv, uint64_t req, int paused);
/* METHOD: cancel a request: no more events carry its id; its connection,
 * if it had one, is closed. NSV_ESTALE when it already ended. Since 1.3. */
NSV_API int nsv_http_cancel(nsv_server *srv, uint64_t req);

/* ---- WebSocket client ---- *
 * nsv_ws_connect opens a ws:// or wss:// URL and returns a connection id at
 * once (stale-safe like every connection id). The library sends the
 * upgrade request (GET, Host, Upgrade, Connection, a fresh random
 * Sec-WebSocket-Key, Sec-WebSocket-Version 13, the subprotocols offered)
 * and checks the answer: status 101 (HTTP/1.1), "Upgrade: websocket", a
 * Connection header with "upgrade", the Sec-WebSocket-Accept that matches
 * the key, a subprotocol only if it was offered (one of them, one header),
 * and no extension.
 * Success: a WS_OPEN event with conn = the id, code 101, the response
 * headers (nsv_ev_header: e.g. Sec-WebSocket-Protocol), path and query =
 * the request's, route -1, peer = the server's address and NSV_EVF_TLS
 * (with the TLS block) for wss://. From then on the connection is a
 * WebSocket like the server's: WS_MESSAGE, WS_CLOSE, WS_PING/WS_PONG (with
 * NSV_OPT_WS_CONTROL_EVENTS), then CLOSE; nsv_ws_send, nsv_ws_close,
 * nsv_ws_send_many, nsv_close, nsv_pause_read, nsv_conn_set_tag and
 * nsv_wakeup_conn work on it (a call before WS_OPEN: NSV_ESTATE, except
 * nsv_close, nsv_conn_set_tag and nsv_wakeup_conn); frames that came in
 * the same packet as the 101 are read as frames; every frame it sends is
 * masked with a fresh random key (RFC 6455 5.3; from getrandom), and what
 * the server sends is held to the server-side rules the other way round:
 * a masked frame from the server is a protocol error (close 1002), as are
 * bad RSV bits, bad control frames and bad continuation; invalid UTF-8 in
 * text is 1007 and a message past NSV_OPT_WS_MAX_MESSAGE is 1009. Closing:
 * after nsv_ws_close the client waits for the server's close frame, then
 * closes TCP; a close the server starts is echoed and the server closes
 * TCP; either wait is bounded by NSV_OPT_WS_CLOSE_TIMEOUT_MS.
 * NSV_OPT_WS_PING_INTERVAL_MS pings servers too. nsv_ws_broadcast (by
 * route) does not reach client connections. Failure before the open: an
 * ERROR event with conn = the id and code NSV_ECONNREFUSED, NSV_ENOTFOUND
 * (name), NSV_ETIMEDOUT (NSV_OPT_CONNECT_TIMEOUT_MS for connect and TLS,
 * then NSV_OPT_HTTP_HEAD_TIMEOUT_MS for the answer, counted from the
 * request; the body says which), NSV_ETLS, NSV_EPARSE (not a valid 101
 * answer: the body gives the status line or the rule that failed),
 * NSV_ETOOBIG (an answer head past NSV_OPT_HTTP_MAX_HEAD_BYTES or
 * NSV_OPT_HTTP_MAX_HEADERS lines), NSV_ECLOSED (the server closed or reset
 * the connection before the answer was complete) or NSV_ESTOPPED (the
 * drain deadline passed), then CLOSE. wss:// verifies the server as
 * https:// does (NSV_OPT_TLS_VERIFY_SERVER, NSV_OPT_TLS_CLIENT_CA_*, SNI).
 * Sharded servers: from any thread, as nsv_connect (the call waits for a
 * worker to take it; that worker's poller gets the events). Draining:
 * open client WebSockets get a 1001 close like the server's; new calls
 * get NSV_ESTOPPED. */
/* METHOD: open a WebSocket client connection. url: "ws://" or "wss://"
 * host [":" port] [path ["?" query]] ("#fragment" refused; no path: "/");
 * headers: zero or more "Name: value\r\n" lines (e.g. Origin,
 * Authorization, Cookie), without Host, Upgrade, Connection,
 * Content-Length, Transfer-Encoding, TE or any Sec-WebSocket-* header (the
 * library writes those); protocols: a comma-separated list of distinct
 * subprotocol tokens ("chat, v2.chat"; at most 32), may be NULL with 0;
 * flags: 0. Returns the connection id (> 0) or NSV_EINVAL (which argument
 * broke which rule: nsv_last_error_detail), NSV_EURL, NSV_ENOTSUP (wss://
 * without TLS), NSV_ESTOPPED (stopping or draining), NSV_ERANGE
 * (NSV_OPT_MAX_CONNS connections are open), NSV_ENOMEM. Since 1.3. */
NSV_API int64_t nsv_ws_connect(nsv_server *srv, const char *url, size_t url_len, const char *headers,
                               size_t headers_len, const char *protocols, size_t protocols_len, uint32_t flags);

/* ---- metrics and access log ----
 *
 * Counters (only grow) and gauges (now) of a server, summed over its
 * workers, indexes into the array nsv_metrics fills. Ids are never reused;
 * a later version appends. Reading is cheap and safe from any thread, at
 * any time (each worker writes its own values; a read is a consistent
 * snapshot of each value, not of the set).
 *
 * Latency histograms (NSV_OPT_METRICS_LATENCY): for each answered request
 * the time from its head complete (a streamed body: its end) to the reply
 * queued by the host (or the library: 404s, static files, errors), and to
 * the reply's last byte handed to the kernel. NSV_M_LAT_BUCKETS cumulative
 * buckets each, upper bounds in microseconds (nsv_metric_bucket_us): 100,
 * 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
 * 1000000, 2500000, 10000000, and +Inf; with a _SUM_US and a _COUNT.
 * A request refused before its head was complete is timed from the
 * refusal; a pipelined answer whose bytes still wait when the next
 * request's head is complete counts as sent then.
 *
 * Shedding (NSV_OPT_SHED): a connection accepted at NSV_OPT_MAX_CONNS makes
 * room on its worker by closing, in this order, the idle keep-alive
 * connection idle longest, else the connection that has spent longest
 * inside an unfinished request head (a slowloris), else nothing: then the
 * new one is refused as before. Connections with a request at the host,
 * a reply in progress, a streamed body, WebSockets, raw TCP and outbound
 * connections are never closed for room. Each closed one counts in
 * NSV_M_CONNS_EVICTED. A connection that has sent nothing, is in its TLS
 * handshake or has not sent its PROXY header is inside its first request
 * head from its accept. Each worker closes only its own connections; with a
 * single acceptor (NSV_OPT_SHARD_ACCEPT 1, nsv_listen_fd on a sharded
 * server) the worker the socket is handed to makes room among its own, else
 * refuses it. Since 1.4.
 */
enum nsv_metric {
    NSV_M_CONNS_ACCEPTED = 0,    /* counter: connections accepted (before ACL and PROXY) */
    NSV_M_CONNS_ACTIVE = 1,      /* gauge: connections open (accepted and outbound) */
    NSV_M_CONNS_REFUSED = 2,     /* counter: closed at accept: max_conns with nothing to
                                    evict, or draining */
    NSV_M_CONNS_DENIED = 3,      /* counter: closed by NSV_LOPT_ALLOW/DENY/PROXY_FROM */
    NSV_M_CONNS_EVICTED = 4,     /* counter: closed to make room (shedding) */
    NSV_M_REQUESTS = 5,          /* counter: requests answered (every status, by host or library) */
    NSV_M_RESP_1XX = 6,          /* counters: answers by status class (101 upgrades count here;
                                    statuses 600-999 count in NSV_M_REQUESTS only) */
    NSV_M_RESP_2XX = 7,
    NSV_M_RESP_3XX = 8,
    NSV_M_RESP_4XX = 9,
    NSV_M_RESP_5XX = 10,
    NSV_M_BYTES_IN = 11,         /* counter: bytes read from sockets (after TLS: plain text) */
    NSV_M_BYTES_OUT = 12,        /* counter: bytes written to sockets (plain text) */
    NSV_M_PARSE_BAD_REQUEST = 13, /* counters: malformed requests by kind: 400 */
    NSV_M_PARSE_HEAD_TOO_LARGE = 14, /* 431 */
    NSV_M_PARSE_URI_TOO_LONG = 15,   /* 414 */
    NSV_M_PARSE_BODY_TOO_LARGE = 16, /* 413 */
    NSV_M_PARSE_OTHER = 17,      /* other refusals in C: 501 (Transfer-Encoding), 505 (version) */
    NSV_M_PROXY_ERRORS = 18,     /* counter: PROXY headers missing, malformed or late */
    NSV_M_TIMEOUT_REQUEST = 19,  /* counters: timeouts by kind: request head or body (408) */
    NSV_M_TIMEOUT_IDLE = 20,     /* idle connections closed (NSV_OPT_IDLE_TIMEOUT_MS): HTTP
                                    keep-alive, raw TCP streams */
    NSV_M_TIMEOUT_OTHER = 21,    /* TLS handshake, PROXY header, WebSocket close, outbound */
    NSV_M_WS_MESSAGES_IN = 22,   /* counters: WebSocket data messages received */
    NSV_M_WS_MESSAGES_OUT = 23,  /* and sent (a broadcast counts once per connection) */
    NSV_M_TLS_HANDSHAKES = 24,   /* counter: TLS handshakes completed (server side) */
    NSV_M_TLS_FAILURES = 25,     /* counter: TLS handshakes failed (server side;
                                    NSV_OPT_TLS_HANDSHAKE_FAILURES also counts outbound ones) */
    NSV_M_OUTPUT_QUEUED = 26,    /* gauge: bytes buffered and not yet taken by the socket, all
                                    connections (the rest of a file being sent is not counted) */
    NSV_M_EVENTS_QUEUED = 27,    /* gauge: events waiting for the host (all workers) */
    NSV_M_DRAINING = 28,         /* gauge: 1 once a drain started (NSV_OPT_DRAINING) */
    NSV_M_ACCESS_DROPPED = 29,   /* counter: access records dropped (queue full) */
    NSV_M_LAT_QUEUED_SUM_US = 30, /* latency to the reply queued: sum, count, buckets */
    NSV_M_LAT_QUEUED_COUNT = 31,
    NSV_M_LAT_QUEUED_BUCKET = 32, /* 32 .. 32 + NSV_M_LAT_BUCKETS - 1 */
    NSV_M_LAT_FLUSHED_SUM_US = 48, /* latency to the reply's last byte sent */
    NSV_M_LAT_FLUSHED_COUNT = 49,
    NSV_M_LAT_FLUSHED_BUCKET = 50, /* 50 .. 50 + NSV_M_LAT_BUCKETS - 1 */
    NSV_M_TLS_RESUMED = 66,      /* counter: TLS handshakes that resumed a session (ticket or
                                    cache); also counted in NSV_M_TLS_HANDSHAKES. Since 1.5. */
    NSV_M_H2_CONNS = 67,         /* counter: connections that switched to HTTP/2. Since 1.5. */
    NSV_M_H2_STREAMS = 68,       /* counter: HTTP/2 request streams opened. Since 1.5. */
    NSV_M_H2_ABUSE = 69,         /* counter: HTTP/2 connections ended by a defence: rapid
                                    reset, or a flood of CONTINUATION frames, SETTINGS entries
                                    or unread PING/SETTINGS acknowledgements. Since 1.5. */
    NSV_M_COUNT = 70,            /* values in this version */
    NSV_M_LAT_BUCKETS = 16
};

/* METHOD: copy the first n values (at most NSV_M_COUNT of the loaded
 * library) of the server's metrics, summed over its workers, into dst.
 * Returns the number of values the library has (NSV_M_COUNT: a host built
 * against an older header passes its own n and reads what it knows).
 * Any thread. Since 1.4. */
NSV_API int nsv_metrics(nsv_server *srv, uint64_t *dst, int n);
/* METHOD: the same for one worker of a sharded server (0 .. workers - 1;
 * a single loop is worker 0): its own share of each value, e.g. its queue
 * of events (NSV_M_EVENTS_QUEUED). NSV_ERANGE for another worker. Since 1.4. */
NSV_API int nsv_metrics_worker(nsv_server *srv, int worker, uint64_t *dst, int n);
/* FUNCTION: the name of a metric ("conns_accepted", "resp_2xx",
 * "lat_queued_bucket" for each bucket), or NULL past NSV_M_COUNT. Static
 * storage. Since 1.4. */
NSV_API const char *nsv_metric_name(int metric);
/* FUNCTION: upper bound in microseconds of latency bucket i (0 ..
 * NSV_M_LAT_BUCKETS - 1), -1 for the last (+Inf), NSV_ERANGE past it.
 * Since 1.4. */
NSV_API int64_t nsv_metric_bucket_us(int i);
/* METHOD: the metrics in the Prometheus text exposition format (version
 * 0.0.4: "# HELP" and "# TYPE" lines, counters ending in _total, the two
 * latency histograms in seconds with their _bucket{le=...}, _sum and
 * _count), every name prefixed with prefix (NULL or "" means "nanosrv_";
 * letters, digits (not first) and '_' only, at most 64 bytes, NSV_EINVAL otherwise), and with
 * worker="N" labels when per_worker is 1 (sharded servers). Returns the
 * length written to dst, or NSV_ENOBUFS when cap is too small (then
 * nsv_last_error_detail says the size needed; 32 KiB is always enough
 * for per_worker 0). Answer "GET /metrics" with it and
 * "Content-Type: text/plain; version=0.0.4". Any thread. Since 1.4. */
NSV_API int64_t nsv_metrics_prometheus(nsv_server *srv, const char *prefix, size_t plen, int per_worker, char *dst, size_t cap);

/*
 * Access records (NSV_OPT_ACCESS_LOG > 0): one per completed request, when
 * its answer is complete in the library (the reply queued, or a streamed
 * reply ended), or when its connection closed first (status as sent, 0 if
 * none). Answers made in C (404, static files, 400/408/413/431 ...) count.
 * A record is this fixed part followed by method (at most 64 bytes), target (path and query as
 * sent, at most 4096 bytes), peer (as in events), user agent (at most 512)
 * and referer (at most 1024), none NUL-terminated (a request refused
 * before its head was complete has an empty method and target); size is the whole
 * record rounded up to 8, so records follow one another in the buffer
 * nsv_access_take fills. Formats (common, combined, JSON) are the
 * bindings' (docs/OPERATIONS.md). Since 1.4.
 */
typedef struct nsv_access_record {
    uint32_t size;         /* bytes of the record with its strings, a multiple of 8 */
    int32_t status;        /* status sent; 0 when the connection closed with none */
    uint64_t conn;         /* connection id */
    int64_t time_ms;       /* wall clock, ms since the epoch, at the request head complete */
    uint64_t bytes_out;    /* response bytes (head and body as framed on the wire) */
    uint64_t bytes_in;     /* request bytes (head and body as framed on the wire) */
    uint32_t duration_us;  /* head complete -> answer complete in the library */
    uint32_t listener;     /* listener id */
    uint32_t peer_port;
    uint32_t flags;        /* NSV_EVF_HTTP10, NSV_EVF_TLS, NSV_EVF_PROXY, NSV_EVF_HEAD,
                              NSV_EVF_HTTP2 (since 1.5) */
    uint32_t method_len, target_len, peer_len, ua_len, referer_len, reserved;
} nsv_access_record;

/* METHOD: move whole access records (nsv_access_record, each followed by
 * its strings) into dst, oldest first, from every worker. Returns the bytes
 * written, 0 when none wait, NSV_ENOBUFS when the next one does not fit an
 * empty dst (8 KiB always fits one). Call it after each poll, or on a
 * timer. Any thread. Since 1.4. */
NSV_API int64_t nsv_access_take(nsv_server *srv, char *dst, size_t cap);

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
