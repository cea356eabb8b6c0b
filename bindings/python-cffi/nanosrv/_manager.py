"""Manager and ShardedManager: listeners, routes, and the event loop.

One nsv_poll fills an array of event records and an arena; _dispatch walks
the batch in Python, unpacking each record with one struct call, and calls
the handlers. No C-to-Python callbacks are involved, and cffi releases the
GIL while nsv_poll waits.
"""
import inspect
import logging
import sys
import threading

from ._conn import Connection, to_bytes
from ._ffi import ffi, has, lib, EVENT_SIZE
from ._message import (BODY, BODY_LEN, CODE, CONN, EVENT, EVF_EOF, EVF_STREAM_BODY, EVF_TLS, FLAGS, LISTENER, ROUTE,
                       TYPE, Event, HttpMessage, WsMessage, WsOpcode)
from ._response import to_reply
from .errors import HTTPError, InvalidArgument, NotSupportedError, check, error, require
from .stream import BodyStream, body_error

log = logging.getLogger("nanosrv")

_poll = lib.nsv_poll
_getrefcount = sys.getrefcount
_ENOBUFS, _ESTOPPED, _EINVAL = lib.NSV_ENOBUFS, lib.NSV_ESTOPPED, lib.NSV_EINVAL
_EV_REQUEST, _EV_CLOSE, _EV_ERROR = lib.NSV_EV_REQUEST, lib.NSV_EV_CLOSE, lib.NSV_EV_ERROR
_EV_WS_OPEN, _EV_WS_MESSAGE, _EV_WS_CLOSE = lib.NSV_EV_WS_OPEN, lib.NSV_EV_WS_MESSAGE, lib.NSV_EV_WS_CLOSE
_EV_WS_PING, _EV_WS_PONG = lib.NSV_EV_WS_PING, lib.NSV_EV_WS_PONG
_EV_WRITABLE, _EV_HANGUP = lib.NSV_EV_TCP_WRITABLE, lib.NSV_EV_HANGUP
_EV_BODY = lib.NSV_EV_BODY
_EV_WAKEUP = lib.NSV_EV_WAKEUP
_ESTALE = lib.NSV_ESTALE
_ECLOSED = lib.NSV_ECLOSED
_WS_TEXT = lib.NSV_WS_TEXT
_JSON_HDR = b"Content-Type: application/json\r\n"
_ERR_500 = b'{"error":"internal server error"}'
_ERR_404 = b'{"error":"not found"}'


def _not_found(conn, msg):
    conn.http_reply(404, _JSON_HDR, _ERR_404)


def _upgrade_required(conn, msg):
    conn.http_reply(426, b"Content-Type: application/json\r\nUpgrade: websocket\r\n",
                    b'{"error":"websocket upgrade required"}')


def _pattern(p):
    """Accept "/users/{id}" as well as the router's own "/users/:id"."""
    if not isinstance(p, str):
        raise TypeError("route pattern must be str, not %s" % type(p).__name__)
    return "/".join(":" + s[1:-1] if s.startswith("{") and s.endswith("}") else s for s in p.split("/"))


class Listener:
    """A bound listener: `id`, `port` and `url`."""
    __slots__ = ("id", "port", "url", "_m")

    def __init__(self, lid, port, url, manager=None):
        self.id, self.port, self.url, self._m = lid, port, url, manager

    def __repr__(self):
        return "<Listener %d port %d>" % (self.id, self.port)


class ConnectionRef(Listener):
    """What http_listen returns, as in nanosrv: a handle on the listening
    connection that is true while it accepts. close() stops accepting on
    it (connections that arrive are closed at once; the port stays bound
    until the server closes). A listener has no peer: http_reply and
    send_bytes do nothing and return False. Also a Listener (`id`, `port`,
    `url`)."""
    __slots__ = ()

    def __bool__(self):
        m = self._m
        return m is not None and m._srv != ffi.NULL and not m._draining and self.id not in m._closed_listeners

    is_listening = property(__bool__)

    def close(self):
        m = self._m
        if m is not None and self.id not in m._closed_listeners:
            m._closed_listeners.add(self.id)
            m._listen_fns[self.id] = _refuse
            m._listen_ws[self.id] = None
            m._listen_events[self.id] = None

    def http_reply(self, status, headers="", body=b""):
        return False

    def send_bytes(self, data):
        return False


def _refuse(conn, msg):
    conn.close()


class Metrics:
    """Counters of a server, as nanosrv's Metrics: `active` (connections
    open now, from the library), `accepted` and `closed` (connections the
    host was told about: a request, a WebSocket or TCP open; and their
    CLOSE events), `errors` (ERROR events). `bytes_read` and
    `bytes_written` are None: the library keeps no byte counters yet."""
    __slots__ = ("accepted", "closed", "errors", "bytes_read", "bytes_written", "active")

    def __init__(self, accepted, closed, errors, active):
        self.accepted, self.closed, self.errors, self.active = accepted, closed, errors, active
        self.bytes_read = self.bytes_written = None

    def __repr__(self):
        return "Metrics(accepted=%d, closed=%d, errors=%d, active=%d)" % (
            self.accepted, self.closed, self.errors, self.active)


# Largest values of the limits nanosrv's setters disable with 0.
_NO_LIMIT = {"idle_timeout_ms": 86400000, "request_timeout_ms": 86400000, "connect_timeout_ms": 86400000,
             "max_body": 1 << 31, "max_conns": 10000000, "max_output": 1 << 31}
_FOREVER_MS = (1 << 31) - 1


class Manager:
    """A single-loop server driven by poll(timeout_ms) or run() in one thread."""

    def __init__(self, max_events=256, arena_size=1 << 20, _srv=None):
        srv = _srv if _srv is not None else lib.nsv_server_new()
        if srv == ffi.NULL:
            raise MemoryError("nsv_server_new failed")
        self._srv = ffi.gc(srv, lib.nsv_server_free)
        if not isinstance(max_events, int) or max_events < 1:
            raise ValueError("max_events must be a positive int")
        self._max = max_events
        self._evs = ffi.new("nsv_event[]", max_events)
        self._evbuf = ffi.buffer(self._evs)
        self._set_arena(arena_size)
        self._conns = {}            # id -> Connection, until its CLOSE event
        self._listen_fns = []       # listener id -> fn(conn, msg)
        self._listen_ws = []        # listener id -> fn(conn, event, data) or None
        self._listen_events = []    # listener id -> fn(conn, event, data) for http_listen_event
        self._route_fns = []        # route id -> fn(conn, msg)
        self._route_ws = []         # route id -> ws handler or None
        self._kick = None           # set by the asyncio integration
        self._loop = None
        self._aio = None
        self._running = False
        self._stopped = False
        # Bytes of a streamed body buffered for a consumer that lags before
        # reading from the client pauses (see nanosrv.stream).
        self.body_buffer = 1 << 20
        self._later = []            # streamed requests waiting for the end of their batch
        self._stream_all = False    # the stream_body option is on: every handler may stream
        self._closed_listeners = set()
        self._draining = False
        self._n_seen = self._n_closed = self._n_errors = 0
        self._tl = threading.local()  # per-thread buffers of poll_worker

    def _set_arena(self, cap):
        self._arena = ffi.new("char[]", cap)
        self._abuf = ffi.buffer(self._arena)
        self._cap = cap

    def _live(self):
        if self._srv == ffi.NULL:
            raise error(lib.NSV_EINVAL, "the server has been closed")
        return self._srv

    # ---- setup ----

    def _listen(self, url, fn, ws, events):
        if not isinstance(url, str):
            raise TypeError("url must be str, not %s" % type(url).__name__)
        srv = self._live()
        u = url.encode()
        lid = check(lib.nsv_listen(srv, u, len(u)), srv)
        while len(self._listen_fns) <= lid:
            self._listen_fns.append(_not_found)
            self._listen_ws.append(None)
            self._listen_events.append(None)
        self._listen_fns[lid] = self._streaming(fn) if self._stream_all else fn
        self._listen_ws[lid] = ws
        self._listen_events[lid] = events
        return ConnectionRef(lid, lib.nsv_listener_port(srv, lid), url, self)

    def http_listen(self, url, handler=None, ws_handler=None):
        """Listen on url ("http://host:port"; port 0 picks one). handler(conn,
        msg) gets requests no route took; ws_handler(conn, event, data) gets
        WebSocket events of connections upgraded with conn.ws_upgrade().
        Returns a ConnectionRef (a Listener: `id`, `port`, `url`)."""
        if handler is not None and not callable(handler):
            raise TypeError("handler must be callable")
        return self._listen(url, handler or _not_found, ws_handler, None)

    listen = http_listen

    def http_listen_event(self, url, handler):
        """Listen with one handler(conn, event, data) for every event:
        Event.HttpMessage, WsOpen, WsMessage, WsControl, Close, Error."""
        if not callable(handler):
            raise TypeError("handler must be callable")

        def on_request(conn, msg):
            return handler(conn, Event.HttpMessage, msg)
        return self._listen(url, on_request, handler, handler)

    def route(self, method, pattern, handler=None, websocket=False, stream=False):
        """Register handler(conn, msg) for method ("GET", ..., "ALL") and
        pattern ("/users/:id" or "/users/{id}", trailing "*"). Usable as a
        decorator. With websocket=True the route upgrades automatically and
        handler(conn, event, data) gets the WebSocket events. With
        stream=True the handler is called once the head has arrived and
        reads the body from msg.stream (see nanosrv.stream)."""
        if handler is None:
            return lambda fn: self.route(method, pattern, fn, websocket, stream) or fn
        if not callable(handler):
            raise TypeError("handler must be callable")
        if not isinstance(method, str):
            raise TypeError("method must be str, not %s" % type(method).__name__)
        srv = self._live()
        m, p = method.upper().encode(), _pattern(pattern).encode()
        rid = len(self._route_fns)
        flags = (lib.NSV_ROUTE_WEBSOCKET if websocket else 0) | (lib.NSV_ROUTE_STREAM_BODY if stream else 0)
        check(lib.nsv_route(srv, m, len(m), p, len(p), rid, flags), srv)
        self._route_fns.append(_upgrade_required if websocket else
                               self._streaming(handler) if stream or self._stream_all else handler)
        self._route_ws.append(handler if websocket else None)
        return handler

    def get(self, pattern, handler=None):
        return self.route("GET", pattern, handler)

    def post(self, pattern, handler=None, stream=False):
        return self.route("POST", pattern, handler, stream=stream)

    def put(self, pattern, handler=None, stream=False):
        return self.route("PUT", pattern, handler, stream=stream)

    def static(self, prefix, directory, *, cache_control=None, **flags):
        """Serve `directory` under the URL `prefix` ("/assets/"), in C with
        no event for Python (nsv_serve_dir): GET/HEAD, index.html, ETag,
        Range, 304. flags by name: list, symlinks, precompressed,
        fallthrough, dotfiles (see nanosrv.static). Returns the mount id."""
        from .static import serve_dir
        return serve_dir(self._live(), prefix, directory, cache_control, flags)

    def websocket(self, pattern, handler=None):
        """Automatic-upgrade WebSocket route; handler(conn, event, data)."""
        if not has("nsv_ws_send"):
            raise NotSupportedError(lib.NSV_ENOTSUP, "WebSocket routes need nsv_ws_send(), which the "
                                    "loaded libnanosrv does not export")
        return self.route("GET", pattern, handler, websocket=True)

    # ---- options ----

    def set_option(self, name, value):
        """Set an option by name: integers ("max_body", "idle_timeout_ms",
        "tls_verify_client", ...) and strings ("tls_cert_file", "tls_key_file",
        "tls_ca_file", "tls_cert_pem", ...; str or bytes)."""
        srv = self._live()
        b = name.encode() if isinstance(name, str) else name
        opt = check(lib.nsv_opt_by_name(b, len(b))) if isinstance(b, bytes) else name
        if isinstance(value, (str, bytes)):
            v = value.encode() if isinstance(value, str) else value
            check(lib.nsv_set_str(srv, opt, v, len(v)), srv)
        else:
            check(lib.nsv_set_int(srv, opt, value), srv)
            if opt == lib.NSV_OPT_STREAM_BODY and value and not self._stream_all:
                # Every request body may now stream: wrap what is registered.
                self._stream_all = True
                self._listen_fns = [self._streaming(f) for f in self._listen_fns]
                self._route_fns = [f if f is _upgrade_required else self._streaming(f) for f in self._route_fns]

    def get_option(self, name):
        srv = self._live()
        b = name.encode() if isinstance(name, str) else name
        opt = check(lib.nsv_opt_by_name(b, len(b))) if isinstance(b, bytes) else name
        return check(lib.nsv_get_int(srv, opt), srv)

    # nanosrv's hardening setters: 0 disables the limit (sets the library's
    # largest value); the properties read 0 back for it.

    def _set_limit(self, name, v):
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError("%s must be an int, not %s" % (name, type(v).__name__))
        if v < 0:
            raise InvalidArgument(lib.NSV_ERANGE, "%s must be >= 0 (0 disables it), not %d" % (name, v))
        self.set_option(name, v or _NO_LIMIT[name])

    def _limit(self, name):
        v = self.get_option(name)
        return 0 if v == _NO_LIMIT[name] else v

    def set_idle_timeout(self, ms):
        self._set_limit("idle_timeout_ms", ms)

    def set_request_timeout(self, ms):
        self._set_limit("request_timeout_ms", ms)

    def set_connect_timeout(self, ms):
        self._set_limit("connect_timeout_ms", ms)

    def set_max_body_size(self, n):
        self._set_limit("max_body", n)

    def set_max_connections(self, n):
        self._set_limit("max_conns", n)

    def set_max_send_buffer(self, n):
        self._set_limit("max_output", n)

    idle_timeout = property(lambda self: self._limit("idle_timeout_ms"))
    request_timeout = property(lambda self: self._limit("request_timeout_ms"))
    connect_timeout = property(lambda self: self._limit("connect_timeout_ms"))
    max_body_size = property(lambda self: self._limit("max_body"))
    max_connections = property(lambda self: self._limit("max_conns"))
    max_send_buffer = property(lambda self: self._limit("max_output"))

    @property
    def num_connections(self):
        """Connections open now (accepted and outbound; every worker)."""
        return lib.nsv_get_int(self._live(), lib.NSV_OPT_CONNECTIONS)

    @property
    def metrics(self):
        """A Metrics snapshot."""
        return Metrics(self._n_seen, self._n_closed, self._n_errors, self.num_connections)

    def set_max_header_bytes(self, n):
        self.set_option("max_header_bytes", n)

    # ---- the loop ----

    def poll(self, timeout_ms=1000):
        """Wait up to timeout_ms (-1 = forever) and handle one batch of
        events. Returns the number handled, or -1 once the server stopped."""
        n = _poll(self._srv, self._evs, self._max, self._arena, self._cap, timeout_ms)
        if n > 0:
            self._dispatch(n)
            return n
        if n == 0:
            return 0
        return self._poll_failed(n)

    def _poll_failed(self, n):
        if n == _ESTOPPED:
            self._stopped = True
            return -1
        if n == _ENOBUFS:
            need = lib.nsv_poll_need(self._srv)
            cap = self._cap
            while cap < need + 4096:
                cap *= 2
            self._set_arena(cap)
            return self.poll(0)
        srv = self._live()
        if n == _EINVAL and b"Interrupted" in ffi.string(lib.nsv_last_error_detail(srv)):
            # A signal interrupted epoll_wait; libnanosrv 1.0.0 reports that
            # as an error. It is a wakeup: let the Python signal handler run.
            return 0
        return check(n, srv)

    def run(self, timeout_ms=250):
        """Poll until stop() (or the end of a drain). The timeout only bounds
        how long a Python signal handler may wait to run."""
        self._running = True
        while self._running:
            if self.poll(timeout_ms) < 0:
                break
        self._running = False

    def stop(self):
        """Make run() return; safe from other threads and signal handlers."""
        self._running = False
        lib.nsv_stop(self._srv)

    def wakeup(self, conn_id=None, data=b""):
        """wakeup(): make a waiting poll() return now. wakeup(conn_id,
        data=b""): deliver Event.Wakeup with data (bytes) to that
        connection's event handler (http_listen_event, or the WebSocket
        handler), in order with its other events. Both are safe from any
        thread. Returns False when the connection is not open."""
        if conn_id is None:
            lib.nsv_wakeup(self._live())
            return True
        d = to_bytes(data, "data")
        r = lib.nsv_wakeup_conn(self._live(), conn_id, d, len(d))
        if r == _ESTALE:
            return False
        check(r, self._srv)
        return True

    def drain_start(self, timeout_ms=5000):
        """Stop accepting, finish in-flight requests; poll() returns -1 when done."""
        self._draining = True
        check(lib.nsv_drain_start(self._live(), timeout_ms), self._srv)

    def start_drain(self, timeout_ms=0):
        """nanosrv's name: graceful stop, returning at once. Listeners close,
        connections finish their current response and close; poll() returns
        -1 once none is left. timeout_ms 0 waits as long as they take."""
        self.drain_start(timeout_ms or _FOREVER_MS)

    def drain(self, timeout_ms=5000):
        """Graceful stop, handling events until every connection is closed."""
        self.drain_start(timeout_ms)
        while self.poll(100) >= 0:
            pass

    def fd(self):
        """The pollable descriptor: readable when poll(0) has work."""
        return check(lib.nsv_fd(self._live()), self._srv)

    def close(self):
        """Free the server now. Connections of it become stale."""
        for c in self._conns.values():
            c._closed = True
        self._conns.clear()
        if self._aio is not None:
            from . import aio
            aio.detach(self)
        if self._srv != ffi.NULL:
            srv, self._srv = self._srv, ffi.NULL
            ffi.release(srv)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def workers(self):
        return lib.nsv_get_int(self._live(), lib.NSV_OPT_WORKERS)

    # ---- dispatch ----

    def _dispatch(self, n, evb=None, arena=None):
        unpack = EVENT.unpack_from
        if evb is None:
            evb, arena = self._evbuf, self._abuf
        conns = self._conns
        routes = self._route_fns
        listeners = self._listen_fns
        # Locals: the loop runs once per event.
        i_type, i_conn, i_route, ev_request, message, refs = (
            TYPE, CONN, ROUTE, _EV_REQUEST, HttpMessage, _getrefcount)
        for off in range(0, n * EVENT_SIZE, EVENT_SIZE):
            e = unpack(evb, off)
            if e[i_type] != ev_request:
                self._other(e, arena)
                continue
            cid = e[i_conn]
            c = conns.get(cid)
            if c is None:
                c = conns[cid] = self._new_conn(cid, e)
            c._pending = True
            msg = message(arena, e, c)
            r = e[i_route]
            try:
                res = (routes[r] if r >= 0 else listeners[e[LISTENER]])(c, msg)
                if res is not None:
                    self._result(c, msg, res)
            except Exception:
                self._failed(c, msg)
            # The arena is reused by the next poll: a message the handler kept
            # (stored, or held by a coroutine) gets its own copy now.
            if refs(msg) > 2:
                msg._freeze()
        if self._later:
            self._run_later()

    def _new_conn(self, cid, e):
        c = Connection(self, cid)
        c._tls = bool(e[FLAGS] & EVF_TLS)
        self._n_seen += 1
        return c

    def _streaming(self, fn):
        """fn wrapped for requests whose body may stream: such a request is
        handed to fn after the rest of its batch, whose BODY events then are
        in the stream, and a synchronous reader may poll for more
        (nanosrv.stream). Only routes (and listeners) that can stream pay
        for the check."""
        if getattr(fn, "_nsv_streaming", False):
            return fn
        later = self._later

        def streaming(c, msg):
            if msg._e[FLAGS] & EVF_STREAM_BODY:
                c._body = BodyStream(c, self.body_buffer)
                later.append((fn, c, msg))
                return None
            return fn(c, msg)
        streaming._nsv_streaming = True
        return streaming

    def _run_later(self):
        later = self._later
        while later:
            fn, c, msg = later.pop(0)
            try:
                res = fn(c, msg)
                if res is not None:
                    self._result(c, msg, res)
            except Exception:
                self._failed(c, msg)

    def _result(self, c, msg, res):
        if inspect.isawaitable(res):
            if self._loop is None:
                if hasattr(res, "close"):
                    res.close()  # never awaited: avoid the RuntimeWarning
                raise RuntimeError("a coroutine handler needs the asyncio host (nanosrv.aio)")
            self._loop.create_task(self._finish(c, msg, res))
        elif c._pending:
            c.http_reply(*to_reply(res))

    async def _finish(self, c, msg, coro):
        try:
            res = await coro
            if res is not None and c._pending and not c._closed:
                c.http_reply(*to_reply(res))
        except Exception:
            self._failed(c, msg)

    def _failed(self, c, msg):
        exc = sys.exc_info()[1]
        if isinstance(exc, HTTPError):
            # A handler's deliberate answer (e.g. a malformed upload: 400).
            log.info("%s %s: %d %s", _safe(lambda: msg.method), _safe(lambda: msg.uri), exc.status, exc)
            status, hdr, body = exc.status, b"Content-Type: text/plain; charset=utf-8\r\n", (str(exc) + "\n").encode()
        else:
            log.exception("handler failed for %s %s", _safe(lambda: msg.method), _safe(lambda: msg.uri))
            status, hdr, body = 500, _JSON_HDR, _ERR_500
        if c._pending and not c._closed:
            c._hdrs = b""  # cookies the failed handler set do not go out with its error answer
            try:
                c.http_reply(status, hdr, body)
            except Exception:
                log.debug("cannot send the %d reply", status, exc_info=True)

    def _other(self, e, arena):
        t = e[TYPE]
        cid = e[CONN]
        c = self._conns.get(cid)
        if t == _EV_BODY:  # a piece of a streamed request body
            if c is not None and c._body is not None:
                c._body._feed(arena[e[BODY]:e[BODY] + e[BODY_LEN]], e[FLAGS] & EVF_EOF)
            return
        if t == _EV_WRITABLE:  # a streamed reply crossed a water mark
            if c is not None:
                c._set_writable(e[CODE] != 0)
            return
        if t == _EV_HANGUP:  # the client ended its side while a request is with us
            if c is not None:
                if c._body is not None:
                    c._body._fail(body_error(_ECLOSED, "the client left before the body ended"))
                c._set_hangup()
            return
        if t == _EV_CLOSE:
            if c is not None:
                self._n_closed += 1
                del self._conns[cid]
                c._closed = True
                if c._body is not None:
                    c._body._fail(body_error(_ECLOSED, "the connection closed before the body ended"))
                c._set_writable(True)  # whoever waits for a drain learns of the close
                c._set_hangup()  # and whoever waits for the client to leave
                fn = c._ws or self._event_fn(e)
                if fn is not None:
                    self._call_event(fn, c, Event.Close, None)
            return
        if t == _EV_ERROR:
            self._n_errors += 1
            text = arena[e[BODY]:e[BODY] + e[BODY_LEN]].decode("utf-8", "replace")
            if c is not None and c._body is not None and not c._body._eof:
                c._body._fail(body_error(e[CODE], text))
            log.error("libnanosrv: %s (%s)", text, _errname(e[CODE]))
            fn = (c._ws if c is not None else None) or self._event_fn(e)
            if fn is not None and c is not None:
                self._call_event(fn, c, Event.Error, text)
            return
        if c is None:
            c = self._conns[cid] = self._new_conn(cid, e)
        if t == _EV_WAKEUP:
            fn = c._ws or self._event_fn(e)
            if fn is not None:
                self._call_event(fn, c, Event.Wakeup, arena[e[BODY]:e[BODY] + e[BODY_LEN]])
            return
        if t == _EV_WS_OPEN:
            r = e[ROUTE]
            c._ws = (self._route_ws[r] if 0 <= r < len(self._route_ws) else None) or self._listen_ws_fn(e)
            msg = HttpMessage(arena, e, c)
            if c._ws is None:
                log.error("WebSocket opened without a handler; closing it")
                c.close()
                return
            if not self._call_event(c._ws, c, Event.WsOpen, msg):
                c.close()
            if _getrefcount(msg) > 2:
                msg._freeze()
            return
        fn = c._ws or self._listen_ws_fn(e)
        if fn is None:
            return
        data = arena[e[BODY]:e[BODY] + e[BODY_LEN]]
        if t == _EV_WS_MESSAGE:
            self._call_event(fn, c, Event.WsMessage, WsMessage(data, e[CODE]))
        elif t == _EV_WS_CLOSE:
            code = e[CODE]
            # nanosrv's close frame payload: the code in two bytes, then the reason
            payload = code.to_bytes(2, "big") + data if 1000 <= code < 5000 and code != 1005 else data
            self._call_event(fn, c, Event.WsControl, WsMessage(payload, WsOpcode.Close, code))
        elif t in (_EV_WS_PING, _EV_WS_PONG):
            op = WsOpcode.Ping if t == _EV_WS_PING else WsOpcode.Pong
            self._call_event(fn, c, Event.WsControl, WsMessage(data, op))

    def _event_fn(self, e):
        lid = e[LISTENER]
        return self._listen_events[lid] if lid < len(self._listen_events) else None

    def _listen_ws_fn(self, e):
        lid = e[LISTENER]
        return self._listen_ws[lid] if lid < len(self._listen_ws) else None

    def _ws_handler_for(self, conn):
        # A manual upgrade: the connection's listener decides; the id alone
        # does not say which listener it came from, so use the only one
        # that has a WebSocket handler, if unambiguous.
        fns = [f for f in self._listen_ws if f is not None]
        return fns[0] if len(fns) == 1 else None

    def _call_event(self, fn, c, ev, data):
        try:
            res = fn(c, ev, data)
            if res is not None and inspect.isawaitable(res):
                if self._loop is None:
                    raise RuntimeError("a coroutine handler needs the asyncio host (nanosrv.aio)")
                self._loop.create_task(self._finish(c, data, res))
            return True
        except Exception:
            if ev == Event.HttpMessage:
                self._failed(c, data)
            else:
                log.exception("WebSocket handler failed (%s)", ev.name)
            return False


class ShardedManager(Manager):
    """A server with n I/O worker threads (0 = one per CPU). Events are
    polled and handled in the thread calling poll()/run(); replies may be
    made from any thread."""

    def __init__(self, n=0, max_events=256, arena_size=1 << 20, *, num_threads=None):
        if num_threads is not None:
            n = num_threads
        if not isinstance(n, int) or n < 0:
            raise ValueError("worker count must be an int >= 0")
        srv = lib.nsv_server_new_sharded(n)
        if srv == ffi.NULL:
            raise NotSupportedError(lib.NSV_ENOTSUP, "nsv_server_new_sharded(%d) failed: sharded servers "
                                    "are not available in the loaded libnanosrv" % n)
        super().__init__(max_events, arena_size, _srv=srv)

    def poll_worker(self, worker, timeout_ms=0):
        """Poll the events of one worker only (one thread per worker). Each
        calling thread has its own event array and arena."""
        fn = require("nsv_poll_worker", "poll_worker")
        tl = self._tl
        b = getattr(tl, "bufs", None)
        if b is None:
            b = tl.bufs = _Buffers(self._max, self._cap)
        while True:
            n = fn(self._srv, worker, b.evs, self._max, b.arena, b.cap, timeout_ms)
            if n > 0:
                self._dispatch(n, b.evbuf, b.abuf)
                return n
            if n == 0:
                return 0
            if n != _ENOBUFS:
                return self._poll_failed(n)
            need = lib.nsv_poll_need(self._srv)
            cap = b.cap
            while cap < need + 4096:
                cap *= 2
            b.set_arena(cap)
            timeout_ms = 0

    def drain(self, timeout_ms=5000):
        """nanosrv's ShardedManager.drain: start a graceful stop and return
        at once (any thread); run() returns when it is complete. Connections
        still open after timeout_ms are closed; 0 waits as long as they take."""
        self.drain_start(timeout_ms or _FOREVER_MS)

    @property
    def num_workers(self):
        return self.workers


class _Buffers:
    """An event array and arena for one polling thread."""
    __slots__ = ("evs", "evbuf", "arena", "abuf", "cap")

    def __init__(self, max_events, cap):
        self.evs = ffi.new("nsv_event[]", max_events)
        self.evbuf = ffi.buffer(self.evs)
        self.set_arena(cap)

    def set_arena(self, cap):
        self.arena = ffi.new("char[]", cap)
        self.abuf = ffi.buffer(self.arena)
        self.cap = cap


def _errname(code):
    return ffi.string(lib.nsv_errname(code)).decode()


def _safe(fn):
    try:
        return fn()
    except Exception:
        return "?"
