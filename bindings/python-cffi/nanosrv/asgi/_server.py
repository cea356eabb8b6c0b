"""nanosrv.asgi.Server: ASGI 3 apps on a Manager driven by asyncio."""
import asyncio
import logging
from typing import Any, Awaitable, Callable, Dict, List, Optional, Set
from urllib.parse import quote, urlsplit

from .. import aio
from .._ffi import has
from .._message import (BODY, BODY_LEN, EVF_HTTP10, EVF_HTTP2, EVF_PROXY, EVF_STREAM_BODY, EVF_UPGRADE, FLAGS, HEADERS,
                        HEADERS_LEN, METHOD, METHOD_LEN, PATH, PATH_LEN, PEER, PEER_LEN, PEER_PORT, QUERY, QUERY_LEN,
                        TLS, TLS_LEN)
from ..ops import proxy_info
from ..stream import BodyStream
from ._http import HttpCycle
from ._lifespan import Lifespan
from ._scope import _METHODS, decode_path, subprotocols, tls_extension
from ._websocket import WebSocketCycle

log = logging.getLogger("nanosrv.asgi")
access_log = logging.getLogger("nanosrv.access")

ASGIApp = Callable[[Dict[str, Any], Callable[[], Awaitable[Dict[str, Any]]],
                    Callable[[Dict[str, Any]], Awaitable[None]]], Awaitable[None]]

_WS_EXT = {"websocket.http.response": {}}
_SPECIAL = EVF_UPGRADE
# header block -> parsed pairs; at most 256 blocks of up to 2 KiB (about
# 1.5 MiB with the pairs, whatever clients send), emptied when full
_HEADER_CACHE = {}
_HEADER_CACHE_MAX = 256
_HEADER_CACHE_BLOCK = 2048


class Server:
    """An ASGI 3 application served by one or more nanosrv listeners.

    Options: root_path, lifespan ("auto" | "on" | "off"),
    response_timeout (seconds an app may take to start a response, then
    500; None = no limit), access_log (one INFO record per request on the
    "nanosrv.access" logger, uvicorn's format; or "common", "combined",
    "json", a callable(record): the library's access records, see
    Manager.access_log), limit_max_requests (after
    that many requests a graceful drain starts), ws_max_size (bytes of one
    WebSocket message), ws_ping_interval (seconds; None = no pings),
    timeout_graceful_shutdown (seconds a drain waits; None = as long as it
    takes), body_buffer (bytes of a streamed request body buffered before
    reading from the client pauses), max_body_size (bytes of a request
    body, then 413; None = no limit, as bodies stream with backpressure).
    stream_body=False makes bodies arrive whole instead (up to
    max_body_size, default the library's 1 MiB; no backpressure).
    The options that are the library's (body size, WebSocket message size
    and pings, streamed bodies) apply to every listener of the Manager."""

    def __init__(self, app: "ASGIApp", *, root_path: str = "", lifespan: str = "auto",
                 response_timeout: Optional[float] = None, access_log: Any = False,
                 limit_max_requests: Optional[int] = None, ws_max_size: int = 16 * 1024 * 1024,
                 ws_ping_interval: Optional[float] = None, timeout_graceful_shutdown: Optional[float] = None,
                 body_buffer: int = 1 << 20, max_body_size: Optional[int] = None, stream_body: bool = True) -> None:
        if not callable(app):
            raise TypeError("app must be an ASGI 3 callable app(scope, receive, send), not %s" % type(app).__name__)
        if not isinstance(root_path, str):
            raise TypeError("root_path must be str, not %s" % type(root_path).__name__)
        if response_timeout is not None and not response_timeout > 0:
            raise ValueError("response_timeout must be None or > 0 seconds, not %r" % (response_timeout,))
        if limit_max_requests is not None and (not isinstance(limit_max_requests, int) or limit_max_requests < 1):
            raise ValueError("limit_max_requests must be None or an int >= 1, not %r" % (limit_max_requests,))
        if not isinstance(ws_max_size, int) or ws_max_size < 1:
            raise ValueError("ws_max_size must be an int >= 1, not %r" % (ws_max_size,))
        if ws_ping_interval is not None and not ws_ping_interval > 0:
            raise ValueError("ws_ping_interval must be None or > 0 seconds, not %r" % (ws_ping_interval,))
        self.app = _asgi3(app)
        self.root_path = root_path
        self.lifespan = Lifespan(self.app, lifespan)
        self.response_timeout = response_timeout
        # A format or callable: the library's records (Manager.access_log);
        # True: this server's own line per request.
        self.access_format = access_log if isinstance(access_log, str) or callable(access_log) else None
        self.access_log = bool(access_log) and self.access_format is None
        self.limit_max_requests = limit_max_requests
        self.count_requests = limit_max_requests is not None
        self.requests = 0
        self.ws_max_size = ws_max_size
        self.ws_ping_interval = ws_ping_interval
        self.timeout_graceful_shutdown = timeout_graceful_shutdown
        self.body_buffer = body_buffer
        if max_body_size is not None and (not isinstance(max_body_size, int) or max_body_size < 1):
            raise ValueError("max_body_size must be None or an int >= 1, not %r" % (max_body_size,))
        self.max_body_size = max_body_size
        self.stream_body = bool(stream_body)
        # The library holds "100 Continue" until the app first receives
        # (NSV_OPT_EXPECT_MANUAL, nsv_continue: libnanosrv 1.2).
        self.expect_manual = self.stream_body and has("nsv_continue")
        self.tasks: Set[asyncio.Task] = set()  # running request tasks: asyncio keeps only weak references
        self.managers: List[Any] = []
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.high_water = 65536
        self.ws_high_water = 1 << 20
        self.draining = False

    # ---- setup ----

    def listen(self, manager: Any, url: str, **lopts: Any) -> Any:
        """Serve this app on `url` ("http://host:port", "https://..." after
        manager.set_tls(...); port 0 picks one). Returns the Listener.
        Listener options as Manager.http_listen (proxy_protocol,
        proxy_from, allow, deny, ...): behind a PROXY protocol front
        scope["client"] is the client's address and
        scope["extensions"]["nanosrv.proxy"] the front's facts."""
        if not isinstance(url, str):
            raise TypeError("url must be str, not %s" % type(url).__name__)
        u = urlsplit(url)
        if u.scheme not in ("http", "https"):
            raise ValueError("url must start with http:// or https://, not %r" % (url,))
        if manager not in self.managers:
            self._configure(manager)
        handler = _Listener(self, manager, u.scheme == "https")
        # Upgrade requests reach the app as plain requests (no WebSocket
        # routes). With stream_body every body arrives in BODY events; the
        # handler sets up the connection's BodyStream itself (on_request is
        # marked so that the Manager does not defer it to the end of the
        # batch, which is for synchronous readers).
        lst = manager.http_listen(url, handler.on_request, **lopts)
        handler.server = (u.hostname or "0.0.0.0", lst.port)
        return lst

    def _configure(self, manager):
        self.managers.append(manager)
        if self.access_format is not None and manager._access is None:
            manager.set_access_log(self.access_format)
        if self.stream_body:
            manager.set_option("stream_body", 1)
            if self.expect_manual:
                # "100 Continue" only once the app calls receive() (HttpCycle.receive).
                manager.set_option("expect_manual", 1)
            manager.body_buffer = self.body_buffer
            manager.set_max_body_size(self.max_body_size or 0)  # 0: the library's largest
        elif self.max_body_size:
            manager.set_max_body_size(self.max_body_size)
        manager.set_option("ws_max_message", self.ws_max_size)
        if self.ws_ping_interval:
            manager.set_option("ws_ping_interval_ms", max(1, round(self.ws_ping_interval * 1000)))
        self.high_water = manager.get_option("tcp_high_water")
        self.ws_high_water = max(self.high_water, manager.get_option("max_output") // 4)

    # ---- lifespan and serving ----

    async def startup(self) -> None:
        """Lifespan startup; LifespanFailure (the app's message) on failure."""
        await self.lifespan.startup()

    async def shutdown(self) -> None:
        """Lifespan shutdown (after the drain)."""
        await self.lifespan.shutdown()

    async def serve(self, manager: Any) -> None:
        """Serve from the running asyncio loop until the manager stops or a
        drain completes; request tasks still running then get
        timeout_graceful_shutdown (or 5 s) to finish before they are cancelled."""
        self.loop = asyncio.get_running_loop()
        done = aio.attach(manager)
        try:
            await done
        finally:
            aio.detach(manager)
        await self.wait_tasks(self.timeout_graceful_shutdown or 5.0)

    async def wait_tasks(self, timeout: float) -> None:
        """Wait up to timeout seconds for running request tasks, then cancel them."""
        if not self.tasks:
            return
        pending = list(self.tasks)
        _, still = await asyncio.wait(pending, timeout=timeout)
        for t in still:
            t.cancel()
        if still:
            await asyncio.wait(still, timeout=1.0)

    def drain(self, manager: Any = None, timeout: Optional[float] = None) -> None:
        """Start a graceful drain: listeners close, in-flight requests
        finish; serve() returns once it is done (timeout in seconds, None:
        timeout_graceful_shutdown, or as long as they take)."""
        self.draining = True
        t = self.timeout_graceful_shutdown if timeout is None else timeout
        for m in ([manager] if manager is not None else self.managers):
            m.start_drain(0 if not t else max(1, round(t * 1000)))
            if m._aio is not None:
                m._aio.kick()

    def request_done(self):
        self.requests += 1
        if self.requests >= self.limit_max_requests and not self.draining:
            log.info("limit_max_requests (%d) reached: draining", self.limit_max_requests)
            self.drain()

    def log_access(self, scope, status):
        client = scope.get("client")
        qs = scope.get("query_string")
        path = quote(scope.get("root_path", "") + scope["path"])
        if qs:
            path += "?" + qs.decode("ascii", "replace")
        access_log.info('%s - "%s %s HTTP/%s" %d', "%s:%d" % client if client else "-", scope["method"], path,
                        scope["http_version"], status)


class _Listener:
    """The request handler of one listener: its scheme and server address."""
    __slots__ = ("srv", "m", "tls", "scheme", "server")

    def __init__(self, srv, manager, tls):
        self.srv = srv
        self.m = manager
        self.tls = tls
        self.scheme = "https" if tls else "http"
        self.server = None

    def on_request(self, conn, msg):
        # The hot path: everything inline, the scope in one dict literal.
        e = msg._e
        a = msg._a
        srv = self.srv
        o = e[METHOD]
        m = a[o:o + e[METHOD_LEN]]
        method = _METHODS.get(m) or m.decode("latin-1")
        o = e[PATH]
        raw_path = a[o:o + e[PATH_LEN]]
        if b"%" in raw_path:
            path = decode_path(raw_path)
        else:
            try:
                path = raw_path.decode("ascii")
            except UnicodeDecodeError:
                path = decode_path(raw_path)
        o = e[QUERY]
        qs = a[o:o + e[QUERY_LEN]]
        o = e[HEADERS]
        block = a[o:o + e[HEADERS_LEN]]
        # Clients send the same header block again and again (keep-alive,
        # API clients): parsed once, each scope gets its own list of the
        # shared (immutable) pairs. The block is canonical ("Name: value\r\n",
        # values trimmed by the parser), so splitting on ": " is exact.
        parsed = _HEADER_CACHE.get(block)
        if parsed is None:
            parsed = tuple([(n.lower(), v) for n, _, v in
                            [line.partition(b": ") for line in block.split(b"\r\n")[:-1]]])
            if len(block) <= _HEADER_CACHE_BLOCK:
                if len(_HEADER_CACHE) >= _HEADER_CACHE_MAX:
                    _HEADER_CACHE.clear()
                _HEADER_CACHE[block] = parsed
        headers = list(parsed)
        o = e[PEER]
        client = (a[o:o + e[PEER_LEN]].decode("latin-1"), e[PEER_PORT])
        flags = e[FLAGS]
        if flags & _SPECIAL:
            if flags & EVF_UPGRADE:
                return self._websocket(conn, a, e, path, raw_path, qs, headers, client,
                                       "1.0" if flags & EVF_HTTP10 else "1.1")
        scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
                 "http_version": "2" if flags & EVF_HTTP2 else "1.0" if flags & EVF_HTTP10 else "1.1",
                 "server": self.server, "client": client, "scheme": self.scheme, "method": method,
                 "root_path": srv.root_path, "path": path, "raw_path": raw_path, "query_string": qs,
                 "headers": headers}
        lifespan = srv.lifespan
        if lifespan.supported:
            scope["state"] = lifespan.state.copy()
        if self.tls:
            scope["extensions"] = {"tls": tls_extension(a, e)}
        if flags & EVF_PROXY:
            scope.setdefault("extensions", {})["nanosrv.proxy"] = proxy_info(a, e[TLS], e[TLS_LEN])
        if flags & EVF_STREAM_BODY:
            # BODY events of this batch and later ones feed the stream; the
            # task runs after the batch, so nothing needs deferring.
            body = conn._body = BodyStream(conn, self.m.body_buffer)
            cycle = HttpCycle(srv, conn, scope, None, body)
            if srv.expect_manual:
                for name, value in headers:
                    if name == b"expect":
                        cycle.expect = value.lower() == b"100-continue"
                        break
        elif e[BODY_LEN]:
            o = e[BODY]
            cycle = HttpCycle(srv, conn, scope, a[o:o + e[BODY_LEN]], None)
        else:
            cycle = HttpCycle(srv, conn, scope, b"", None)
        task = cycle.task = srv.loop.create_task(cycle.run(srv.app))
        srv.tasks.add(task)
        if srv.response_timeout is not None:
            cycle.timer = srv.loop.call_later(srv.response_timeout, cycle.on_timeout)

    on_request._nsv_streaming = True  # sets up streamed bodies itself (Manager._streaming)

    def _websocket(self, conn, a, e, path, raw_path, qs, headers, client, version):
        srv = self.srv
        scope = {"type": "websocket", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": version, "server": self.server,
                 "client": client, "scheme": "wss" if self.tls else "ws", "root_path": srv.root_path,
                 "path": path, "raw_path": raw_path, "query_string": qs, "headers": headers,
                 "subprotocols": subprotocols(headers), "extensions": dict(_WS_EXT)}
        if srv.lifespan.supported:
            scope["state"] = srv.lifespan.state.copy()
        if self.tls:
            scope["extensions"]["tls"] = tls_extension(a, e)
        if e[FLAGS] & EVF_PROXY:
            scope["extensions"]["nanosrv.proxy"] = proxy_info(a, e[TLS], e[TLS_LEN])
        cycle = WebSocketCycle(srv, conn, scope)
        task = cycle.task = srv.loop.create_task(cycle.run(srv.app))
        srv.tasks.add(task)


def _asgi3(app):
    """ASGI 2 apps (app(scope) returning app(receive, send)) are wrapped."""
    import inspect
    fn = getattr(app, "__call__", app)
    if inspect.iscoroutinefunction(app) or inspect.iscoroutinefunction(fn):
        return app
    try:
        params = inspect.signature(app).parameters
    except (TypeError, ValueError):
        return app
    if len(params) == 1:
        async def asgi2(scope, receive, send):
            await app(scope)(receive, send)
        return asgi2
    return app
