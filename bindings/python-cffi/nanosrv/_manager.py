"""Manager and ShardedManager: listeners, routes, and the event loop.

One nsv_poll fills an array of event records and an arena; _dispatch walks
the batch in Python, unpacking each record with one struct call, and calls
the handlers. No C-to-Python callbacks are involved, and cffi releases the
GIL while nsv_poll waits.
"""
import inspect
import logging
import re
import sys
import threading
import uuid
from collections import deque
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from ._conn import Connection, to_bytes
from ._ffi import ffi, has, lib, EVENT_SIZE
from ._message import (BODY, BODY_LEN, CODE, CONN, EVENT, EVF_EOF, EVF_STREAM_BODY, EVF_TLS, FLAGS, LISTENER, ROUTE,
                       TYPE, Event, HttpMessage, WsMessage, WsOpcode)
from ._response import to_reply
from .errors import ESTATE, HTTPError, InvalidArgument, NotSupportedError, StateError, check, error, require
from .stream import BodyStream, body_error

log = logging.getLogger("nanosrv")
_get_ident = threading.get_ident
Handler = Callable[..., Any]

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


def _not_found(conn: Connection, msg: HttpMessage) -> None:
    # Only a path no route took gets here: whether it matches a route of
    # another method is worked out now, off the routed requests' path.
    allow = conn._m._allowed(msg.raw_path)
    if allow:
        conn.http_reply(405, b"Content-Type: application/json\r\nAllow: " + allow.encode() + b"\r\n",
                        b'{"error":"method not allowed"}')
    else:
        conn.http_reply(404, _JSON_HDR, _ERR_404)


def _upgrade_required(conn: Connection, msg: HttpMessage) -> None:
    conn.http_reply(426, b"Content-Type: application/json\r\nUpgrade: websocket\r\n",
                    b'{"error":"websocket upgrade required"}')


# Converters of Flask ("<int:id>") and Starlette ("{id:int}") patterns: the
# router matches a whole segment; the value is converted before the handler
# runs, and a value the converter refuses is a 404, as in those frameworks.
_CONVERTERS = {"str": None, "string": None, "int": int, "float": float, "uuid": uuid.UUID, "path": None}
_FLASK_SEG = re.compile(r"<(?:(\w+):)?(\w+)>\Z")
_BRACE_SEG = re.compile(r"\{(\w+)(?::(\w+))?\}\Z")
_INT_RE = re.compile(r"[0-9]+\Z")


class _NoMatch(Exception):
    """A route parameter its converter refused (answered 404)."""


class _RouteSpec:
    """How one route's parameters are presented: `wild`, the name a
    "<path:name>" gives the trailing wildcard; `conv`, name -> converter."""
    __slots__ = ("wild", "conv")

    def __init__(self, wild: Optional[str], conv: Dict[str, Any]) -> None:
        self.wild, self.conv = wild, conv

    def apply(self, params: Dict[str, Any]) -> Dict[str, Any]:
        if self.wild is not None and "*" in params:
            params[self.wild] = params.pop("*")
        for name, fn in self.conv.items():
            v = params.get(name)
            if v is None:
                continue
            if fn is int and not _INT_RE.match(v):
                raise _NoMatch(name)
            try:
                params[name] = fn(v)
            except ValueError:
                raise _NoMatch(name) from None
        return params


def _pattern(p: str) -> Tuple[str, Optional[_RouteSpec]]:
    """(router pattern, spec or None). Accepts the router's own "/users/:id"
    and trailing "*", "/users/{id}" and "{id:int}" (Starlette), and
    "/users/<id>", "<int:id>", "<path:rest>" (Flask). A parameter must be a
    whole segment, and a path parameter the last one: ValueError otherwise."""
    if not isinstance(p, str):
        raise TypeError("route pattern must be str, not %s" % type(p).__name__)
    if not p.startswith("/"):
        raise ValueError("route pattern %r must start with '/'" % (p,))
    segs = p.split("/")
    wild, conv, out = None, {}, []
    for i, seg in enumerate(segs):
        m = _FLASK_SEG.match(seg)
        if m is not None:
            kind, name = m.group(1) or "str", m.group(2)
        else:
            m = _BRACE_SEG.match(seg)
            if m is None:
                if "<" in seg or ">" in seg or "{" in seg or "}" in seg:
                    raise ValueError("route pattern %r: segment %r mixes text and a parameter, or is "
                                     "malformed; a parameter is a whole segment: <name>, <int:name>, {name}"
                                     % (p, seg))
                out.append(seg)
                continue
            name, kind = m.group(1), m.group(2) or "str"
        if kind not in _CONVERTERS:
            raise ValueError("route pattern %r: unknown converter %r in %r (known: %s)"
                             % (p, kind, seg, ", ".join(sorted(_CONVERTERS))))
        if kind == "path":
            if i != len(segs) - 1:
                raise ValueError("route pattern %r: a path parameter (%r) must be the last segment"
                                 % (p, seg))
            wild = name
            out.append("*")
            continue
        if _CONVERTERS[kind] is not None:
            conv[name] = _CONVERTERS[kind]
        out.append(":" + name)
    return "/".join(out), (_RouteSpec(wild, conv) if wild is not None or conv else None)


def _route_regex(pattern: str) -> "re.Pattern[str]":
    """The router's match of a pattern ("/a/:x/*") as a regex over the raw
    path, for the 405 check: ":x" is one non-empty segment, a final "*" any
    remainder."""
    parts = []
    for seg in pattern.split("/")[1:]:
        if seg == "*":
            parts.append("/.*")
        elif seg.startswith(":"):
            parts.append("/[^/]+")
        else:
            parts.append("/" + re.escape(seg))
    return re.compile("".join(parts) + r"\Z", re.S)


class _Setup:
    __slots__ = ("m", "what")

    def __init__(self, m: "Manager", what: str) -> None:
        self.m, self.what = m, what

    def __enter__(self) -> Any:
        m = self.m
        srv = m._live()
        if not m._plock.acquire(False):
            raise m._foreign(self.what)
        return srv

    def __exit__(self, *exc: Any) -> None:
        self.m._plock.release()


class Listener:
    """A bound listener: `id`, `port` and `url`."""
    __slots__ = ("id", "port", "url", "_m")

    def __init__(self, lid: int, port: int, url: str, manager: Optional["Manager"] = None) -> None:
        self.id, self.port, self.url, self._m = lid, port, url, manager

    def __repr__(self) -> str:
        return "<Listener %d port %d>" % (self.id, self.port)

    def configure(self, **opts: Any) -> None:
        """Listener options (Manager.configure_listener): proxy_protocol,
        proxy_timeout_ms, proxy_from, allow, deny."""
        if self._m is None:
            raise StateError(ESTATE, "this Listener has no Manager")
        self._m.configure_listener(self.id, **opts)


class ConnectionRef(Listener):
    """What http_listen returns, as in nanosrv: a handle on the listening
    connection that is true while it accepts. close() stops accepting on
    it (connections that arrive are closed at once; the port stays bound
    until the server closes). A listener has no peer: http_reply and
    send_bytes do nothing and return False. Also a Listener (`id`, `port`,
    `url`)."""
    __slots__ = ()

    def __bool__(self) -> bool:
        m = self._m
        return m is not None and m._srv != ffi.NULL and not m._draining and self.id not in m._closed_listeners

    is_listening = property(__bool__)

    def close(self) -> None:
        """Stop accepting on this listener."""
        m = self._m
        if m is not None and self.id not in m._closed_listeners:
            m._closed_listeners.add(self.id)
            m._listen_fns[self.id] = _refuse
            m._listen_ws[self.id] = None
            m._listen_events[self.id] = None

    def http_reply(self, status: Any, headers: Any = "", body: Any = b"") -> bool:
        """A listener has no peer: nothing is sent."""
        return False

    def send_bytes(self, data: Any) -> bool:
        """A listener has no peer: nothing is sent."""
        return False


def _refuse(conn: Connection, msg: HttpMessage) -> None:
    conn.close()


def _converting(fn: Handler) -> Handler:
    """fn behind the route's parameter converters: a value one refuses
    (e.g. "abc" for <int:id>) is a 404, as Flask and Starlette answer."""
    def converting(conn, msg):
        try:
            msg.params
        except _NoMatch:
            conn.http_reply(404, _JSON_HDR, _ERR_404)
            return None
        return fn(conn, msg)
    converting.__wrapped__ = fn  # type: ignore[attr-defined]
    return converting


# Reference counts of a connection that only the loop holds, as
# sys.getrefcount sees it in _run_later (the table, `c`, msg._c, c._body and
# the argument) and in _finish (the table, `c`, msg._c, the argument).
_LATER_REFS = 5
_FINISH_REFS = 4


class Metrics(dict):
    """A snapshot of a server's metrics: a dict of every value the library
    keeps, by nsv_metric_name ("requests", "resp_2xx", "bytes_in", ...;
    the latency histograms "lat_queued" and "lat_flushed" as
    {"buckets": [[le_seconds, cumulative_count], ...], "sum_seconds",
    "count"}), read in one call. Also, as nanosrv's Metrics: `active`
    (connections open now), `accepted` and `closed` (connections the host
    was told about: a request, a WebSocket or TCP open; and their CLOSE
    events), `errors` (ERROR events), `bytes_read` and `bytes_written`
    (the library's bytes_in and bytes_out; None when it has no metrics).
    Calling it (mgr.metrics()) reads a fresh snapshot."""
    __slots__ = ("accepted", "closed", "errors", "bytes_read", "bytes_written", "active", "_m")

    def __init__(self, accepted: int, closed: int, errors: int, active: int,
                 values: Optional[Dict[str, Any]] = None, manager: Any = None) -> None:
        super().__init__(values or ())
        self.accepted, self.closed, self.errors, self.active = accepted, closed, errors, active
        self.bytes_read = self.get("bytes_in")
        self.bytes_written = self.get("bytes_out")
        self._m = manager

    def __call__(self) -> "Metrics":
        return self._m.metrics if self._m is not None else self

    def __repr__(self) -> str:
        return "Metrics(accepted=%d, closed=%d, errors=%d, active=%d, %s)" % (
            self.accepted, self.closed, self.errors, self.active, dict.__repr__(self))


# Largest values of the limits nanosrv's setters disable with 0.
_NO_LIMIT = {"idle_timeout_ms": 86400000, "request_timeout_ms": 86400000, "connect_timeout_ms": 86400000,
             "max_body": 1 << 31, "max_conns": 10000000, "max_output": 1 << 31}
_FOREVER_MS = (1 << 31) - 1


# Smallest arena accepted (0 made the growth on NSV_ENOBUFS spin); it grows
# on demand from there (_poll_failed).
_MIN_ARENA = 1024
_log_queue_on = False
_LOG_LEVELS = {1: logging.ERROR, 2: logging.INFO, 3: logging.DEBUG, 4: 5}  # NSV_LOG_VERBOSE: below DEBUG
_log_buf: Any = None
_log_dropped = 0


def _start_log_queue() -> None:
    """Route the library's log lines through its queue (nsv_set_log_queue),
    drained by the polling thread (_drain_log), so no library thread ever
    calls into Python. Process-wide, once."""
    global _log_queue_on, _log_buf
    if _log_queue_on or not has("nsv_set_log_queue"):
        return
    _log_buf = ffi.new("char[]", 1 << 16)
    if lib.nsv_set_log_queue(1024) == 0:
        _log_queue_on = True


_log_lock = threading.Lock()


def _drain_log() -> None:
    """Move the library's waiting log lines to the "nanosrv" logger (level
    byte, 2-byte length, text per record). One thread at a time (the buffer
    is shared; poll_worker threads may meet here): a thread that finds
    another draining leaves the lines to it."""
    if not _log_lock.acquire(False):
        return
    try:
        _drain_log_locked()
    finally:
        _log_lock.release()


def _drain_log_locked() -> None:
    global _log_dropped
    buf = _log_buf
    cap = 1 << 16  # len(_log_buf)
    while True:
        n = lib.nsv_log_take(buf, cap)
        if n <= 0:
            break
        data = ffi.buffer(buf, n)[:]
        at = 0
        while at + 3 <= n:
            ln = data[at + 1] | data[at + 2] << 8
            log.log(_LOG_LEVELS.get(data[at], logging.DEBUG), "libnanosrv: %s",
                    data[at + 3:at + 3 + ln].decode("utf-8", "replace"))
            at += 3 + ln
    d = lib.nsv_log_dropped()
    if d != _log_dropped:
        log.warning("libnanosrv: %d log lines dropped (the log queue was full)", d - _log_dropped)
        _log_dropped = d


class Manager:
    """A single-loop server driven by poll(timeout_ms) or run() in one thread.

    Threads: the thread inside (or last inside) poll()/run() owns the
    server; replies and setup from any other thread raise StateError (hand
    them over with call_soon_threadsafe, or use ShardedManager). Setup
    before the first poll may come from any thread; stop(), wakeup() and
    call_soon_threadsafe() from any thread at any time; close() from
    another thread stops a running loop first."""

    _single = True  # replies only from the polling thread (ShardedManager: from any)
    close_timeout: float = 10.0  # seconds close() waits for another thread to leave poll()

    def __init__(self, max_events: int = 256, arena_size: int = 1 << 20, _srv: Any = None) -> None:
        if not isinstance(max_events, int) or isinstance(max_events, bool) or max_events < 1:
            raise ValueError("max_events must be a positive int, not %r" % (max_events,))
        if not isinstance(arena_size, int) or isinstance(arena_size, bool) or arena_size < _MIN_ARENA:
            raise ValueError("arena_size must be an int >= %d (bytes; it grows on demand), not %r"
                             % (_MIN_ARENA, arena_size))
        srv = _srv if _srv is not None else lib.nsv_server_new()
        if srv == ffi.NULL:
            raise MemoryError("nsv_server_new failed")
        self._srv = ffi.gc(srv, lib.nsv_server_free)
        self._max = max_events
        self._evs = ffi.new("nsv_event[]", max_events)
        self._evbuf = ffi.buffer(self._evs)
        self._set_arena(arena_size)
        self._conns: Dict[int, Connection] = {}  # id -> Connection, until its CLOSE event
        self._listen_fns: List[Handler] = []  # listener id -> fn(conn, msg)
        self._listen_ws: List[Optional[Handler]] = []  # listener id -> fn(conn, event, data) or None
        self._listen_events: List[Optional[Handler]] = []  # listener id -> fn for http_listen_event
        self._route_fns: List[Handler] = []  # route id -> fn(conn, msg)
        self._route_ws: List[Optional[Handler]] = []  # route id -> ws handler or None
        self._kick = None           # set by the asyncio integration
        self._loop = None
        self._aio = None
        self._running = False
        self._stopped = False
        # Bytes of a streamed body buffered for a consumer that lags before
        # reading from the client pauses (see nanosrv.stream).
        self.body_buffer = 1 << 20
        # streamed requests waiting for the end of their batch
        self._later: List[Tuple[Handler, Connection, HttpMessage]] = []
        self._stream_all = False    # the stream_body option is on: every handler may stream
        self._closed_listeners: set = set()
        self._draining = False
        self._n_seen = self._n_closed = self._n_errors = 0
        self._tl = threading.local()  # per-thread buffers of poll_worker
        self._raw = None            # raw TCP, timers and wakeups (nanosrv.tcp)
        # Outbound HTTP requests and WebSocket clients (nanosrv.client,
        # nanosrv.ws_client): id -> object whose _event(type, e, arena)
        # takes the id's events. _out_busy counts starts under _out_lock.
        self._out: Dict[int, Any] = {}
        self._out_lock = threading.Lock()
        self._out_busy = 0
        # Threads: _plock is held by the thread inside poll()/run() (RLock: a
        # synchronous body reader polls from inside a handler); _tid is the
        # owning thread's ident (None until the first poll, and always on a
        # sharded server), the one comparison the reply paths make.
        self._plock = threading.RLock()
        self._tid: Optional[int] = None
        self._tname = ""
        self._soon: deque = deque()  # call_soon_threadsafe: (fn, args), run by the polling thread
        self._wlock = threading.Lock()  # a wakeup or stop from another thread never meets the free
        self._route_rx: List[Tuple[str, Any]] = []  # (method, regex) per route, for 405 on an unmatched path
        self._route_spec: List[Optional[_RouteSpec]] = []  # route id -> _RouteSpec or None
        # High water mark of streamed replies: a connection counts the bytes
        # it queues against it (Connection.writable).
        self._hw = lib.nsv_get_int(self._srv, lib.NSV_OPT_TCP_HIGH_WATER)
        self._count_blocked: Optional[set] = set() if not self._single else None
        self._access: Any = None  # nanosrv.ops.AccessLog while the access log is on
        _start_log_queue()

    def _set_arena(self, cap: int) -> None:
        self._arena = ffi.new("char[]", cap)
        self._abuf = ffi.buffer(self._arena)
        self._cap = cap

    def _live(self) -> Any:
        if self._srv == ffi.NULL:
            raise error(lib.NSV_EINVAL, "the server has been closed")
        return self._srv

    def _setup(self, what: str) -> "_Setup":
        """`with self._setup(what) as srv:` for setup calls: refused while
        another thread is inside poll()/run() (the C contract allows setup
        before the first poll and between polls), and holding the poll lock
        meanwhile so no poll starts under it."""
        return _Setup(self, what)

    def _foreign(self, what: str) -> StateError:
        """The error for a call from a thread that does not own the loop."""
        me = threading.current_thread()
        me_id = me.ident or 0
        return StateError(ESTATE, "%s called from thread %r (%d), but this Manager is polled by thread %r "
                          "(%d): a single-loop Manager is used from its polling thread only. Hand the call "
                          "to it with manager.call_soon_threadsafe(fn, *args), or use ShardedManager, "
                          "whose replies are safe from any thread" % (what, me.name, me_id, self._tname,
                                                                      self._tid or 0))

    def _claim(self, me: int) -> None:
        # The polling thread changed (first poll, or a new thread took over
        # while none was inside): it owns the server from now on.
        self._tid = me if self._single else None
        self._tname = threading.current_thread().name

    def call_soon_threadsafe(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run fn(*args) in the polling thread, after the batch being
        handled (or at once if poll() is waiting: it is woken up). Safe from
        any thread: the way for worker threads to reply on a single-loop
        Manager (conn.http_reply, send_chunk, ...). Exceptions fn raises
        are logged. Callbacks queued after close() never run."""
        if not callable(fn):
            raise TypeError("call_soon_threadsafe: fn must be callable, not %s" % type(fn).__name__)
        self._soon.append((fn, args))
        with self._wlock:
            srv = self._srv
            if srv != ffi.NULL:
                lib.nsv_wakeup(srv)

    def _run_soon(self) -> int:
        soon = self._soon
        n = 0
        # Bounded by what is queued now: a callback that queues another
        # runs in the next poll, so a poll always returns.
        for _ in range(len(soon)):
            fn, args = soon.popleft()
            n += 1
            try:
                fn(*args)
            except Exception:
                log.exception("call_soon_threadsafe callback %r failed", fn)
        return n

    # ---- setup ----

    def _listen(self, url: str, fn: Handler, ws: Optional[Handler], events: Optional[Handler],
                **lopts: Any) -> "ConnectionRef":
        if not isinstance(url, str):
            raise TypeError("url must be str, not %s" % type(url).__name__)
        scheme = url.partition("://")[0].lower()
        if scheme in ("tcp", "tls"):
            raise InvalidArgument(lib.NSV_EINVAL, "http_listen(%r): a %s:// listener carries raw TCP, not "
                                  "HTTP; use Manager.tcp_listen(url, handler) for it" % (url, scheme))
        u = url.encode()
        with self._setup("http_listen") as srv:
            lid = check(lib.nsv_listen(srv, u, len(u)), srv)
        ref = self._register_listener(lid, url, fn, ws, events)
        self._listener_options(ref, lopts)
        return ref

    def _listener_options(self, ref: "ConnectionRef", lopts: Dict[str, Any]) -> None:
        """Listener options of a new listener; one the library refuses
        leaves the listener closed (nothing is served unfiltered) and raises."""
        if not lopts:
            return
        try:
            self.configure_listener(ref, **lopts)
        except BaseException:
            ref.close()
            raise

    def configure_listener(self, listener: Any, **opts: Any) -> None:
        """Listener options of `listener` (a Listener or its id):
        proxy_protocol (True = either version, "v1", "v2", "any", False),
        proxy_timeout_ms, proxy_from, allow, deny (CIDR lists: a string
        "10.0.0.0/8, ::1" or a list of strings; "" or [] clears). They apply
        to connections accepted afterwards. A bad value raises
        InvalidArgument with the library's detail (the first bad entry)."""
        from .ops import configure_listener
        lid = listener.id if isinstance(listener, Listener) else listener
        configure_listener(self, lid, **opts)

    def listener_option(self, listener: Any, name: str) -> int:
        """An integer listener option: "proxy_protocol" (0 off, 1 v1, 2 v2,
        3 any) or "proxy_timeout_ms"."""
        from .ops import listener_option
        return listener_option(self, listener.id if isinstance(listener, Listener) else listener, name)

    def listen_inherited(self, handler: Optional[Handler] = None, ws_handler: Optional[Handler] = None, *,
                         tls: bool = False, unset_env: bool = True, **lopts: Any) -> List["ConnectionRef"]:
        """Adopt every socket systemd socket activation passed this process
        (LISTEN_FDS for LISTEN_PID, nsv_inherited_fds), serving http (https
        with tls=True, after set_tls) with handler as http_listen does, and
        the listener options given. Returns the listeners ([] when none
        were passed). unset_env removes the variables (children do not
        inherit them)."""
        from .ops import fd_url, inherited_fds
        out = []
        for fd in inherited_fds(unset_env):
            out.append(self.listen_fd(fd_url(fd, tls), fd, handler, ws_handler, **lopts))
        return out

    def _register_listener(self, lid: int, url: str, fn: Handler, ws: Optional[Handler],
                           events: Optional[Handler]) -> "ConnectionRef":
        """Handlers of listener `lid` (from nsv_listen or nsv_listen_fd)."""
        while len(self._listen_fns) <= lid:
            self._listen_fns.append(_not_found)
            self._listen_ws.append(None)
            self._listen_events.append(None)
        self._listen_fns[lid] = self._streaming(fn) if self._stream_all else fn
        self._listen_ws[lid] = ws
        self._listen_events[lid] = events
        return ConnectionRef(lid, lib.nsv_listener_port(self._srv, lid), url, self)

    def listen_fd(self, url: str, fd: int, handler: Optional[Handler] = None,
                  ws_handler: Optional[Handler] = None, **lopts: Any) -> "ConnectionRef":
        """Serve the already listening socket `fd` (inherited from a
        supervisor, or from systemd socket activation) with the scheme and
        TLS of `url`, as http_listen does; the library owns fd afterwards
        (nsv_listen_fd; see nanosrv.server.listen_fd). Listener options as
        http_listen."""
        from .server import listen_fd
        ref = listen_fd(self, url, fd, handler, ws_handler)
        self._listener_options(ref, lopts)
        return ref

    def http_listen(self, url: str, handler: Optional[Handler] = None,
                    ws_handler: Optional[Handler] = None, **lopts: Any) -> "ConnectionRef":
        """Listen on url ("http://host:port"; port 0 picks one). handler(conn,
        msg) gets requests no route took; ws_handler(conn, event, data) gets
        WebSocket events of connections upgraded with conn.ws_upgrade().
        Listener options (keywords, see configure_listener): proxy_protocol,
        proxy_timeout_ms, proxy_from, allow, deny.
        Returns a ConnectionRef (a Listener: `id`, `port`, `url`)."""
        if handler is not None and not callable(handler):
            raise TypeError("handler must be callable")
        return self._listen(url, handler or _not_found, ws_handler, None, **lopts)

    listen = http_listen

    def http_listen_event(self, url: str, handler: Handler, **lopts: Any) -> "ConnectionRef":
        """Listen with one handler(conn, event, data) for every event:
        Event.HttpMessage, WsOpen, WsMessage, WsControl, Close, Error.
        Listener options as http_listen."""
        if not callable(handler):
            raise TypeError("handler must be callable")

        def on_request(conn, msg):
            return handler(conn, Event.HttpMessage, msg)
        return self._listen(url, on_request, handler, handler, **lopts)

    def route(self, method: str, pattern: str, handler: Optional[Handler] = None, websocket: bool = False,
              stream: bool = False) -> Any:
        """Register handler(conn, msg) for method ("GET", ..., "ALL") and
        pattern. Usable as a decorator. Patterns: the router's "/users/:id"
        and trailing "*"; "/users/{id}", "{id:int}", "{rest:path}"
        (Starlette); "/users/<id>", "<int:id>", "<float:x>", "<uuid:u>",
        "<path:rest>" (Flask). A parameter is a whole segment; a path one is
        the last and may be empty. Converted values (int, float, UUID) reach
        msg.params converted, and a value the converter refuses answers 404
        without calling the handler. With websocket=True the route upgrades
        automatically and handler(conn, event, data) gets the WebSocket
        events. With stream=True the handler is called once the head has
        arrived and reads the body from msg.stream (see nanosrv.stream). A
        path that matches a route of another method only is answered 405
        with Allow (when the listener has no handler of its own)."""
        if handler is None:
            return lambda fn: self.route(method, pattern, fn, websocket, stream) or fn
        if not callable(handler):
            raise TypeError("handler must be callable")
        if not isinstance(method, str):
            raise TypeError("method must be str, not %s" % type(method).__name__)
        rp, spec = _pattern(pattern)
        m, p = method.upper().encode(), rp.encode()
        flags = (lib.NSV_ROUTE_WEBSOCKET if websocket else 0) | (lib.NSV_ROUTE_STREAM_BODY if stream else 0)
        with self._setup("route") as srv:
            rid = len(self._route_fns)
            check(lib.nsv_route(srv, m, len(m), p, len(p), rid, flags), srv)
            fn = handler
            if spec is not None and spec.conv and not websocket:
                fn = _converting(fn)
            self._route_fns.append(_upgrade_required if websocket else
                                   self._streaming(fn) if stream or self._stream_all else fn)
            self._route_ws.append(handler if websocket else None)
            self._route_spec.append(spec)
            self._route_rx.append((method.upper(), _route_regex(rp)))
        return handler

    def _allowed(self, raw_path: bytes) -> str:
        """The Allow value for a path no route of the request's method took:
        the methods of routes that match it ("" if none)."""
        if not self._route_rx:
            return ""
        path = raw_path.decode("latin-1")
        methods = set()
        for method, rx in self._route_rx:
            if rx.match(path):
                if method == "ALL":
                    return ""  # an ALL route would have taken it: not a method mismatch
                methods.add(method)
        if "GET" in methods:
            methods.add("HEAD")
        return ", ".join(sorted(methods))

    def get(self, pattern: str, handler: Optional[Handler] = None) -> Any:
        """route("GET", pattern, handler); a decorator without handler."""
        return self.route("GET", pattern, handler)

    def post(self, pattern: str, handler: Optional[Handler] = None, stream: bool = False) -> Any:
        """route("POST", ...)."""
        return self.route("POST", pattern, handler, stream=stream)

    def put(self, pattern: str, handler: Optional[Handler] = None, stream: bool = False) -> Any:
        """route("PUT", ...)."""
        return self.route("PUT", pattern, handler, stream=stream)

    def static(self, prefix: str, directory: str, *, cache_control: Optional[str] = None, **flags: Any) -> int:
        """Serve `directory` under the URL `prefix` ("/assets/"), in C with
        no event for Python (nsv_serve_dir): GET/HEAD, index.html, ETag,
        Range, 304. flags by name: list, symlinks, precompressed,
        fallthrough, dotfiles (see nanosrv.static). Returns the mount id."""
        from .static import serve_dir
        with self._setup("static") as srv:
            return serve_dir(srv, prefix, directory, cache_control, flags)

    def websocket(self, pattern: str, handler: Optional[Handler] = None) -> Any:
        """Automatic-upgrade WebSocket route; handler(conn, event, data)."""
        if not has("nsv_ws_send"):
            raise NotSupportedError(lib.NSV_ENOTSUP, "WebSocket routes need nsv_ws_send(), which the "
                                    "loaded libnanosrv does not export")
        return self.route("GET", pattern, handler, websocket=True)

    # ---- options ----

    def set_option(self, name: Union[str, bytes, int], value: Union[int, str, bytes]) -> None:
        """Set an option by name: integers ("max_body", "idle_timeout_ms",
        "tls_verify_client", ...) and strings ("tls_cert_file", "tls_key_file",
        "tls_ca_file", "tls_cert_pem", ...; str or bytes)."""
        b = name.encode() if isinstance(name, str) else name
        opt = check(lib.nsv_opt_by_name(b, len(b))) if isinstance(b, bytes) else name
        with self._setup("set_option") as srv:
            if isinstance(value, (str, bytes)):
                v = value.encode() if isinstance(value, str) else value
                check(lib.nsv_set_str(srv, opt, v, len(v)), srv)
            else:
                check(lib.nsv_set_int(srv, opt, value), srv)
                if opt == lib.NSV_OPT_TCP_HIGH_WATER:
                    self._hw = lib.nsv_get_int(srv, opt)
            if opt == lib.NSV_OPT_STREAM_BODY and value and not self._stream_all:
                # Every request body may now stream: wrap what is registered.
                self._stream_all = True
                self._listen_fns = [self._streaming(f) for f in self._listen_fns]
                self._route_fns = [f if f is _upgrade_required else self._streaming(f) for f in self._route_fns]

    def get_option(self, name: Union[str, bytes, int]) -> int:
        """An integer option's value by name (or NSV_OPT_* number)."""
        srv = self._live()
        b = name.encode() if isinstance(name, str) else name
        opt = check(lib.nsv_opt_by_name(b, len(b))) if isinstance(b, bytes) else name
        return check(lib.nsv_get_int(srv, opt), srv)

    # nanosrv's hardening setters: 0 disables the limit (sets the library's
    # largest value); the properties read 0 back for it.

    def _set_limit(self, name: str, v: int) -> None:
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError("%s must be an int, not %s" % (name, type(v).__name__))
        if v < 0:
            raise InvalidArgument(lib.NSV_ERANGE, "%s must be >= 0 (0 disables it), not %d" % (name, v))
        self.set_option(name, v or _NO_LIMIT[name])

    def _limit(self, name: str) -> int:
        v = self.get_option(name)
        return 0 if v == _NO_LIMIT[name] else v

    def set_idle_timeout(self, ms: int) -> None:
        self._set_limit("idle_timeout_ms", ms)

    def set_request_timeout(self, ms: int) -> None:
        self._set_limit("request_timeout_ms", ms)

    def set_connect_timeout(self, ms: int) -> None:
        self._set_limit("connect_timeout_ms", ms)

    def set_max_body_size(self, n: int) -> None:
        self._set_limit("max_body", n)

    def set_max_connections(self, n: int) -> None:
        self._set_limit("max_conns", n)

    def set_max_send_buffer(self, n: int) -> None:
        self._set_limit("max_output", n)

    @property
    def idle_timeout(self) -> int:
        """ms (0: none)."""
        return self._limit("idle_timeout_ms")

    @property
    def request_timeout(self) -> int:
        """ms (0: none)."""
        return self._limit("request_timeout_ms")

    @property
    def connect_timeout(self) -> int:
        """ms (0: none)."""
        return self._limit("connect_timeout_ms")

    @property
    def max_body_size(self) -> int:
        """bytes (0: no limit)."""
        return self._limit("max_body")

    @property
    def max_connections(self) -> int:
        """connections (0: no limit)."""
        return self._limit("max_conns")

    @property
    def max_send_buffer(self) -> int:
        """bytes (0: no limit)."""
        return self._limit("max_output")

    @property
    def num_connections(self) -> int:
        """Connections open now (accepted and outbound; every worker)."""
        return lib.nsv_get_int(self._live(), lib.NSV_OPT_CONNECTIONS)

    @property
    def metrics(self) -> Metrics:
        """A Metrics snapshot: a dict of every library metric by name
        (read in one nsv_metrics call; see nanosrv.ops.read_metrics), with
        the attributes accepted, closed, errors, active, bytes_read and
        bytes_written. `mgr.metrics()` gives the same (a fresh snapshot)."""
        srv = self._live()
        vals: Dict[str, Any] = {}
        if has("nsv_metrics"):
            from .ops import read_metrics
            try:
                vals = read_metrics(srv)
            except NotSupportedError:
                vals = {}
        return Metrics(self._n_seen, self._n_closed, self._n_errors, self.num_connections, vals, self)

    def metrics_worker(self, worker: int) -> Dict[str, Any]:
        """The metrics of one worker (0 .. workers - 1; a single loop is
        worker 0), as metrics."""
        from .ops import read_metrics
        return read_metrics(self._live(), worker)

    def metrics_text(self, prefix: Optional[str] = None, per_worker: bool = False) -> str:
        """The metrics in the Prometheus text format (names prefixed with
        prefix, default "nanosrv_"; worker="N" labels with per_worker).
        Serve it with nanosrv.ops.metrics_handler(mgr)."""
        from .ops import prometheus_text
        return prometheus_text(self._live(), prefix, per_worker)

    @property
    def access_log(self) -> Any:
        """None (default), "common", "combined", "json" or the callable
        given: records of the library (nsv_access_take) drained after each
        poll; the formats are written on the "nanosrv.access" logger at
        INFO, a callable gets each record (a dict)."""
        a = self._access
        return None if a is None else (a.format or a.fn)

    @access_log.setter
    def access_log(self, fmt: Any) -> None:
        self.set_access_log(fmt)

    def set_access_log(self, fmt: Any, queue: int = 4096) -> None:
        """Turn the access log on (fmt as the access_log property; queue:
        records kept per worker between polls, past it they are dropped and
        counted in metrics["access_dropped"]) or off (None)."""
        if fmt is None or fmt is False:
            self.set_option("access_log", 0)
            self._access = None
            return
        from .ops import AccessLog
        a = AccessLog(fmt)
        self.set_option("access_log", queue)
        self._access = a

    @property
    def draining(self) -> bool:
        """True once a drain has started (NSV_OPT_DRAINING): what a
        readiness check answers 503 on (nanosrv.ops.readyz_handler)."""
        srv = self._live()
        try:
            return bool(lib.nsv_get_int(srv, lib.NSV_OPT_DRAINING) > 0)
        except AttributeError:
            return self._draining

    def set_max_header_bytes(self, n: int) -> None:
        self.set_option("max_header_bytes", n)

    # ---- the loop ----

    def poll(self, timeout_ms: int = 1000) -> int:
        """Wait up to timeout_ms (-1 = forever) and handle one batch of
        events, then the callbacks of call_soon_threadsafe. Returns the
        number of events and callbacks handled, or -1 once the server
        stopped. StateError while another thread is inside poll()/run()."""
        lock = self._plock
        if not lock.acquire(False):
            raise self._foreign("poll()")
        try:
            me = _get_ident()
            if self._tid != me:
                self._claim(me)
            n = _poll(self._srv, self._evs, self._max, self._arena, self._cap, timeout_ms)
            if n > 0:
                self._dispatch(n)
            elif n < 0:
                n = self._poll_failed(n)
            if self._soon and n >= 0:
                n += self._run_soon()
            if self._count_blocked:
                self._recount()
            if _log_queue_on and lib.nsv_log_pending():
                _drain_log()
            if self._access is not None and self._srv != ffi.NULL:
                self._access.drain(self._srv)
            return n
        finally:
            lock.release()

    def _recount(self) -> None:
        # Sharded: a connection that blocked on its own count of queued bytes
        # hears nothing from the library unless the worker too saw the high
        # water mark crossed; after each poll the count starts again (the
        # library's WRITABLE events, if any, keep it blocked).
        blocked = self._count_blocked
        if blocked is None:
            return
        # One at a time out of the set: a connection that blocks again
        # meanwhile (another poll_worker thread) stays in it.
        for c in list(blocked):
            blocked.discard(c)
            c._queued = 0
            if not c._blocked:
                c._set_writable(True)

    def _poll_failed(self, n: int) -> int:
        if n == _ESTOPPED:
            self._stopped = True
            return -1
        if n == _ENOBUFS:
            need = lib.nsv_poll_need(self._srv)
            cap = max(self._cap, _MIN_ARENA)
            while cap < need + 4096:
                cap *= 2
            self._set_arena(cap)
            n = _poll(self._srv, self._evs, self._max, self._arena, self._cap, 0)
            if n > 0:
                self._dispatch(n)
                return n
            return 0 if n == 0 else self._poll_failed(n)
        srv = self._live()
        if n == _EINVAL and b"Interrupted" in ffi.string(lib.nsv_last_error_detail(srv)):
            # A signal interrupted epoll_wait; libnanosrv 1.0.0 reports that
            # as an error. It is a wakeup: let the Python signal handler run.
            return 0
        return check(n, srv)

    def run(self, timeout_ms: int = 250) -> None:
        """Poll until stop() (or the end of a drain). The timeout only bounds
        how long a Python signal handler may wait to run. The calling thread
        owns the server until run() returns."""
        lock = self._plock
        if not lock.acquire(False):
            raise self._foreign("run()")
        try:
            self._running = True
            null = ffi.NULL
            while self._running and self._srv != null:  # (close() from a handler ends the loop too)
                if self.poll(timeout_ms) < 0:
                    break
        finally:
            self._running = False
            lock.release()

    def stop(self) -> None:
        """Make run() return; safe from other threads and signal handlers."""
        self._running = False
        with self._wlock:
            srv = self._srv
            if srv != ffi.NULL:
                lib.nsv_stop(srv)

    def wakeup(self, conn_id: Any = None, data: bytes = b"") -> bool:
        """wakeup(): make a waiting poll() return now. wakeup(conn_id,
        data=b""): deliver Event.Wakeup with data (bytes) to that
        connection's event handler (http_listen_event, the WebSocket
        handler, a raw TCP handler's on_wakeup, or on_wakeup(fn)), in order
        with its other events; conn_id may be a connection object. Both are
        safe from any thread. Returns False when the connection is not open."""
        if conn_id is None:
            with self._wlock:
                lib.nsv_wakeup(self._live())
            return True
        from .timers import wakeup_conn
        return wakeup_conn(self, conn_id, data)

    # ---- raw TCP, TLS, timers (nanosrv.tcp, nanosrv.tls, nanosrv.timers) ----

    def tcp_listen(self, url: str, handler: Any, **lopts: Any) -> Any:
        """A tcp:// or tls:// listener; handler as in nanosrv.tcp; listener
        options as http_listen."""
        from .tcp import listen
        return listen(self, url, handler, **lopts)

    def connect(self, url: str, handler: Any) -> Any:
        """Outbound tcp:// or tls:// connection (a nanosrv.tcp.TcpConnection)."""
        from .tcp import connect
        return connect(self, url, handler)

    def set_tls(self, **kw: Any) -> None:
        """TLS settings by name: cert, key, ca, password, verify_client,
        client_ca, verify_server (see nanosrv.tls)."""
        from .tls import configure
        configure(self, **kw)

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Any:
        """Call fn(*args) once after `delay` seconds (a nanosrv.timers.Timer)."""
        from .timers import add
        return add(self, round(delay * 1000), fn, args)

    def timer(self, ms: int, fn: Callable[[], Any], repeat_ms: int = 0) -> Any:
        """Call fn() after ms milliseconds, then every repeat_ms if > 0."""
        from .timers import add
        return add(self, ms, fn, (), repeat_ms)

    def on_wakeup(self, fn: Callable[[int, bytes], Any]) -> Callable[[int, bytes], Any]:
        """fn(conn_id, data) for wakeups of connections that are not raw TCP."""
        from .tcp import state
        state(self).on_wakeup = fn
        return fn

    # ---- outbound HTTP and WebSocket (nanosrv.client, nanosrv.ws_client) ----

    def fetch(self, url: str, *, method: str = "GET", headers: Any = None, body: Any = None, json: Any = None,
              timeout: Optional[float] = None, content_length: Optional[int] = None,
              buffer_limit: int = 1 << 20) -> Any:
        """HTTP request on this server's loop (asyncio host needed):
        `resp = await srv.fetch(url)` once the head arrived, or
        `async with srv.fetch(url) as resp`. body: bytes, str, or an
        (async) iterable of bytes (streamed, chunked unless content_length).
        See nanosrv.client."""
        from .client import fetch
        return fetch(self, url, method=method, headers=headers, body=body, json=json, timeout=timeout,
                     content_length=content_length, buffer_limit=buffer_limit)

    def http_request(self, url: str, callback: Callable[..., Any], *, method: str = "GET", headers: Any = None,
                     body: Any = None, json: Any = None, timeout: Optional[float] = None) -> Any:
        """The callback form of fetch, for plain handlers: callback(resp,
        None) with the whole body in resp.content, or callback(None, err).
        Returns a nanosrv.client.Request (cancel())."""
        from .client import http_request
        return http_request(self, url, callback, method=method, headers=headers, body=body, json=json,
                            timeout=timeout)

    def fetch_blocking(self, url: str, *, method: str = "GET", headers: Any = None, body: Any = None,
                       json: Any = None, timeout: Optional[float] = None) -> Any:
        """For threads that may block (WSGI applications on worker
        threads): the request runs on the polling thread, this thread waits
        for the whole response (resp.content) or raises its ClientError.
        StateError on the polling thread itself."""
        from .client import fetch_blocking
        return fetch_blocking(self, url, method=method, headers=headers, body=body, json=json, timeout=timeout)

    def websocket_connect(self, url: str, *, headers: Any = None, subprotocols: Any = None,
                          max_queue: int = 1 << 20) -> Any:
        """WebSocket client on this server's loop (asyncio host needed):
        `ws = await srv.websocket_connect("ws://...")`, or `async with`.
        See nanosrv.ws_client."""
        from .ws_client import connect
        return connect(self, url, headers=headers, subprotocols=subprotocols, max_queue=max_queue)

    def drain_start(self, timeout_ms: int = 5000) -> None:
        """Stop accepting, finish in-flight requests; poll() returns -1 when done."""
        self._draining = True
        check(lib.nsv_drain_start(self._live(), timeout_ms), self._srv)

    def start_drain(self, timeout_ms: int = 0) -> None:
        """nanosrv's name: graceful stop, returning at once. Listeners close,
        connections finish their current response and close; poll() returns
        -1 once none is left. timeout_ms 0 waits as long as they take."""
        self.drain_start(timeout_ms or _FOREVER_MS)

    def drain(self, timeout_ms: int = 5000) -> None:
        """Graceful stop, handling events until every connection is closed."""
        self.drain_start(timeout_ms)
        while self.poll(100) >= 0:
            pass

    def fd(self) -> int:
        """The pollable descriptor: readable when poll(0) has work."""
        return check(lib.nsv_fd(self._live()), self._srv)

    def close(self) -> None:
        """Free the server now. Connections of it become stale. From another
        thread while poll()/run() runs, the loop is stopped first (nsv_stop)
        and close() waits up to close_timeout seconds for it to leave poll
        (StateError, nothing freed, if it does not); the server is never
        freed under a running poll."""
        lock = self._plock
        if not lock.acquire(False):
            self.stop()
            if not lock.acquire(timeout=self.close_timeout):
                raise StateError(ESTATE, "close(): thread %r is still inside poll()/run() %.1f s after "
                                 "stop(); the server is not freed (a handler that blocks keeps it there)"
                                 % (self._tname, self.close_timeout))
        try:
            self._close()
        finally:
            lock.release()

    def _close(self) -> None:
        self._soon.clear()
        if self._out:
            from .client import shutdown
            shutdown(self)
        for c in self._conns.values():
            c._closed = True
        self._conns.clear()
        if self._raw is not None:
            self._raw.close()
        if self._aio is not None:
            from . import aio
            aio.detach(self)
        with self._wlock:
            if self._srv != ffi.NULL:
                srv, self._srv = self._srv, ffi.NULL
                ffi.release(srv)

    def __enter__(self) -> "Manager":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def workers(self) -> int:
        """I/O worker threads (1 for a single loop)."""
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
                elif c._pending and refs(c) <= 4 and refs(msg) <= 2 and not self._wakeable(e):
                    # No reply, and only this loop holds the connection (the
                    # table, `c`, msg._c) and the message: nothing can ever
                    # answer. A handler that keeps either (stored, in a
                    # closure, a timer, a task) may still answer later.
                    self._abandoned(c, msg)
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
        refs = _getrefcount
        while later:
            fn, c, msg = later.pop(0)
            try:
                res = fn(c, msg)
                if res is not None:
                    self._result(c, msg, res)
                elif c._pending and refs(c) <= _LATER_REFS and refs(msg) <= 2 and not self._wakeable(msg._e):
                    self._abandoned(c, msg)  # as in _dispatch; c._body holds c too
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
            elif res is None and c._pending and type(msg) is HttpMessage:
                coro = None  # a finished coroutine holds nothing, but drop it before counting
                if _getrefcount(c) <= _FINISH_REFS and _getrefcount(msg) <= 2 and not self._wakeable(msg._e):
                    self._abandoned(c, msg)
        except Exception:
            self._failed(c, msg)

    def _wakeable(self, e):
        """True when a later event can hand the connection to a handler that
        may answer: Manager.wakeup(conn_id, data) reaches an
        http_listen_event handler, or on_wakeup(fn) by id."""
        return self._event_fn(e) is not None or (self._raw is not None and self._raw.on_wakeup is not None)

    def _abandoned(self, c, msg):
        """A handler returned without answering and kept no reference to
        the connection or the message: answer 500 and say so."""
        if c._closed or c._closing:
            return
        log.error("handler returned without replying to %s %s and kept no reference to the connection or "
                  "the message, so nothing can answer it later: answering 500 (reply, return a value, or "
                  "keep the connection to reply later)", _safe(lambda: msg.method), _safe(lambda: msg.uri))
        c._raw = None
        c._hdrs = b""
        try:
            c._drop_reason()
            c.http_reply(500, _JSON_HDR, _ERR_500)
        except Exception:
            log.debug("cannot send the 500 reply", exc_info=True)

    def _failed(self, c, msg):
        exc = sys.exc_info()[1]
        if c._streaming and not c._closed:
            # Part of the answer is on its way: no status can follow, and a
            # client would wait for the rest forever. Close the connection
            # once what was queued is sent (nsv_close): the body ends without
            # its last chunk (or short of its Content-Length), which every
            # client reports as a broken response.
            log.error("handler failed during the streamed reply to %s %s; closing the connection (the client "
                      "gets a truncated body)", _safe(lambda: msg.method), _safe(lambda: msg.uri), exc_info=exc)
            c._streaming = False
            try:
                c.drain()
            except Exception:
                log.debug("cannot close connection %#x", c.id, exc_info=True)
            return
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
                c._drop_reason()  # nor does its reason phrase
                c.http_reply(status, hdr, body)
            except Exception:
                log.debug("cannot send the %d reply", status, exc_info=True)

    def _other(self, e, arena):
        t = e[TYPE]
        cid = e[CONN]
        out = self._out
        if out or self._out_busy:
            o = out.get(cid)
            if o is None and self._out_busy:
                with self._out_lock:  # a start in another thread may not have registered its id yet
                    o = out.get(cid)
            if o is not None:
                o._event(t, e, arena)
                return
        if self._raw is not None and self._raw.handle(t, cid, e, arena):
            return
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
    _single = False

    def __init__(self, n: int = 0, max_events: int = 256, arena_size: int = 1 << 20, *,
                 num_threads: Optional[int] = None) -> None:
        if num_threads is not None:
            n = num_threads
        if not isinstance(n, int) or n < 0:
            raise ValueError("worker count must be an int >= 0")
        srv = lib.nsv_server_new_sharded(n)
        if srv == ffi.NULL:
            raise NotSupportedError(lib.NSV_ENOTSUP, "nsv_server_new_sharded(%d) failed: sharded servers "
                                    "are not available in the loaded libnanosrv" % n)
        super().__init__(max_events, arena_size, _srv=srv)

    def poll_worker(self, worker: int, timeout_ms: int = 0) -> int:
        """Poll the events of one worker only (one thread per worker). Each
        calling thread has its own event array and arena."""
        fn = require("nsv_poll_worker", "poll_worker")
        tl = self._tl
        b = getattr(tl, "bufs", None)
        if b is None:
            b = tl.bufs = _Buffers(self._max, self._cap)
        while True:
            n = fn(self._srv, worker, b.evs, self._max, b.arena, b.cap, timeout_ms)
            if n >= 0:
                if n > 0:
                    self._dispatch(n, b.evbuf, b.abuf)
                if self._count_blocked:
                    self._recount()
                if _log_queue_on and lib.nsv_log_pending():
                    _drain_log()
                if self._access is not None:
                    self._access.drain(self._srv)
                return n
            if n != _ENOBUFS:
                return self._poll_failed(n)
            need = lib.nsv_poll_need(self._srv)
            cap = b.cap
            while cap < need + 4096:
                cap *= 2
            b.set_arena(cap)
            timeout_ms = 0

    def drain(self, timeout_ms: int = 5000) -> None:
        """nanosrv's ShardedManager.drain: start a graceful stop and return
        at once (any thread); run() returns when it is complete. Connections
        still open after timeout_ms are closed; 0 waits as long as they take."""
        self.drain_start(timeout_ms or _FOREVER_MS)

    @property
    def num_workers(self) -> int:
        return self.workers


class _Buffers:
    """An event array and arena for one polling thread."""
    __slots__ = ("evs", "evbuf", "arena", "abuf", "cap")

    def __init__(self, max_events: int, cap: int) -> None:
        self.evs = ffi.new("nsv_event[]", max_events)
        self.evbuf = ffi.buffer(self.evs)
        self.set_arena(cap)

    def set_arena(self, cap: int) -> None:
        self.arena = ffi.new("char[]", cap)
        self.abuf = ffi.buffer(self.arena)
        self.cap = cap


def _errname(code: int) -> str:
    return ffi.string(lib.nsv_errname(code)).decode()


def _safe(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception:
        return "?"
