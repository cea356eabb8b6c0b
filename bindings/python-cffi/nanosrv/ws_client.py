"""WebSocket client on the server's own loop (nsv_ws_connect): no thread,
no second event loop; the connection's events arrive in the server's poll
batch by id.

    ws = await srv.websocket_connect("ws://127.0.0.1:9000/chat", subprotocols=["chat"])
    await ws.send("hello")            # str: a text message; bytes: binary
    reply = await ws.recv()           # str or bytes
    async for msg in ws:              # until the server closes normally
        ...
    await ws.close(1000, "bye")

Messages the consumer has not taken wait in a queue; past `max_queue`
bytes the connection stops reading (nsv_pause_read) until it is half
empty, so TCP slows the server. recv() and send() on a closed connection
raise nanosrv.errors.WebSocketClosed (close_code, close_reason); a failed
open raises the ClientError of its cause (ConnectionRefused, Timeout,
BadResponse for an answer that is not a valid 101, ...).
"""
import asyncio
import collections
from typing import Any, Optional

from ._conn import to_bytes
from ._ffi import ffi, lib
from ._message import BODY, BODY_LEN, CODE, FLAGS, HEADERS, HEADERS_LEN, PATH, PATH_LEN, EVF_TLS
from .client import _Pending, _kick, _own, register
from .errors import ClientError, WebSocketClosed, check, client_error
from .headers import Headers, header_bytes

_EV_OPEN, _EV_MESSAGE, _EV_WSCLOSE = lib.NSV_EV_WS_OPEN, lib.NSV_EV_WS_MESSAGE, lib.NSV_EV_WS_CLOSE
_EV_CLOSE, _EV_ERROR = lib.NSV_EV_CLOSE, lib.NSV_EV_ERROR
_TEXT, _BINARY, _PING = lib.NSV_WS_TEXT, lib.NSV_WS_BINARY, lib.NSV_WS_PING
_EAGAIN, _ECLOSED, _ESTOPPED = lib.NSV_EAGAIN, lib.NSV_ECLOSED, lib.NSV_ESTOPPED
_GONE = (lib.NSV_ESTALE, lib.NSV_ECLOSED, lib.NSV_ESTATE)


class WebSocket:
    """One client connection: `id`, `url`, `subprotocol` (the server's
    choice or None), `headers` (the 101 answer's, a Headers), `path`,
    `tls`, `open`, `closed`, `close_code` / `close_reason` (None / "" until
    closed; 1006 when it ended without a close frame)."""

    def __init__(self, m: Any, url: str, max_queue: int) -> None:
        self._m = m
        self.url = url
        self.id = 0
        self.subprotocol: Optional[str] = None
        self.headers = Headers()
        self.path = ""
        self.tls = False
        self.open = False
        self.closed = False
        self.close_code: Optional[int] = None
        self.close_reason = ""
        self._error: Optional[BaseException] = None
        self._closing = False
        self._q: Any = collections.deque()
        self._qbytes = 0
        self._limit = max_queue
        self._paused = False
        self.pauses = 0
        self.send_waits = 0     # sends that met the output limit and waited
        loop = m._loop
        self._opened = loop.create_future()
        self._gone = loop.create_future()
        self._waiter: Any = None

    # ---- from the dispatch ----

    def _event(self, t: int, e: Any, arena: Any) -> None:
        if t == _EV_MESSAGE:
            data = arena[e[BODY]:e[BODY] + e[BODY_LEN]]
            if e[CODE] == _TEXT:
                msg: Any = data.decode("utf-8", "surrogateescape")  # the library checked the UTF-8
            else:
                msg = data
            self._q.append(msg)
            self._qbytes += len(data)
            if not self._paused and self._qbytes >= self._limit:
                self._pause(True)
            self._wake()
        elif t == _EV_OPEN:
            self.open = True
            self.headers = Headers.from_block(arena[e[HEADERS]:e[HEADERS] + e[HEADERS_LEN]])
            self.subprotocol = self.headers.get("sec-websocket-protocol")
            self.path = arena[e[PATH]:e[PATH] + e[PATH_LEN]].decode("latin-1")
            self.tls = bool(e[FLAGS] & EVF_TLS)
            if not self._opened.done():
                self._opened.set_result(self)
        elif t == _EV_WSCLOSE:
            if self.close_code is None:
                code = e[CODE]
                self.close_code = code if code else 1005
                self.close_reason = arena[e[BODY]:e[BODY] + e[BODY_LEN]].decode("utf-8", "replace")
        elif t == _EV_ERROR:
            text = arena[e[BODY]:e[BODY] + e[BODY_LEN]].decode("utf-8", "replace")
            if self._error is None:
                self._error = client_error(e[CODE], text, self.url)
        elif t == _EV_CLOSE:
            self._ended()

    def _ended(self) -> None:
        self.closed = True
        self.open = False
        self._m._out.pop(self.id, None)
        if self.close_code is None:
            self.close_code = 1006
        if not self._opened.done():
            err = self._error or ClientError(_ECLOSED, "%s: the connection closed before the WebSocket opened"
                                             % self.url)
            self._opened.set_exception(err)
        if not self._gone.done():
            self._gone.set_result(None)
        self._wake()

    def server_closed(self) -> None:
        if not self.closed:
            if self._error is None:
                self._error = client_error(_ESTOPPED, "the server was closed", self.url)
            self._ended()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None:
            self._waiter = None
            if not w.done():
                w.set_result(None)

    def _pause(self, on: bool) -> None:
        if self.closed:
            return
        if lib.nsv_pause_read(self._m._srv, self.id, 1 if on else 0) == 0:
            self._paused = on
            if on:
                self.pauses += 1
            _kick(self._m)

    def _closed_error(self) -> WebSocketClosed:
        e = WebSocketClosed(_ECLOSED, "%s: the WebSocket has closed (code %s%s)" % (
            self.url, self.close_code, ", " + self.close_reason if self.close_reason else ""))
        e.url = self.url
        e.close_code = self.close_code or 1006
        e.close_reason = self.close_reason
        if self._error is not None:
            e.__cause__ = self._error
        return e

    # ---- the API ----

    async def recv(self) -> Any:
        """The next message: str (text) or bytes (binary). WebSocketClosed
        once the connection has closed and the queue is empty. Cancelling
        recv() leaves the connection open."""
        while not self._q:
            if self.closed:
                raise self._closed_error()
            w = self._waiter
            if w is None or w.done():
                w = self._waiter = self._m._loop.create_future()
            await w
        msg = self._q.popleft()
        self._qbytes -= len(msg)
        if self._paused and self._qbytes <= self._limit // 2:
            self._pause(False)
        return msg

    def __aiter__(self) -> "WebSocket":
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.recv()
        except WebSocketClosed as e:
            if e.ok:
                raise StopAsyncIteration
            raise

    async def send(self, data: Any) -> None:
        """Send one message: str as text, bytes-like as binary. While the
        library's output limit is full (NSV_EAGAIN) it waits and retries.
        WebSocketClosed once closing or closed."""
        if isinstance(data, str):
            op, b = _TEXT, data.encode("utf-8")
        else:
            op, b = _BINARY, to_bytes(data, "data")
        await self._send(op, b)

    async def ping(self, data: Any = b"") -> None:
        """Send a ping (at most 125 bytes); the server's pong is answered by
        the library (see NSV_OPT_WS_CONTROL_EVENTS)."""
        await self._send(_PING, to_bytes(data, "data"))

    async def _send(self, op: int, b: bytes) -> None:
        delay = 0.001
        while True:
            if self.closed or self._closing:
                raise self._closed_error()
            _own(self._m, "WebSocket.send()")
            r = lib.nsv_ws_send(self._m._srv, self.id, op, b, len(b))
            if r >= 0:
                _kick(self._m)
                return
            if r in _GONE:
                raise self._closed_error()
            if r != _EAGAIN:
                check(r, self._m._srv)
            # The output limit is full: no event says when it drains, so
            # retry after a growing pause (what is queued keeps leaving).
            self.send_waits += 1
            _kick(self._m)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)

    async def close(self, code: int = 1000, reason: Any = "") -> None:
        """Start the close handshake (once) and wait until the connection
        has closed (the library bounds the wait)."""
        if not self.closed and not self._closing:
            self._closing = True
            rb = to_bytes(reason, "reason")
            r = lib.nsv_ws_close(self._m._srv, self.id, int(code), rb, len(rb))
            if r < 0 and r not in _GONE:
                self._closing = False
                check(r, self._m._srv)
            _kick(self._m)
        if not self.closed:
            await asyncio.shield(self._gone)

    async def wait_closed(self) -> None:
        """Return once the connection has closed."""
        if not self.closed:
            await asyncio.shield(self._gone)

    def abort(self) -> None:
        """Drop the connection now (no close handshake)."""
        if not self.closed:
            lib.nsv_abort(self._m._srv, self.id)
            _kick(self._m)

    def __repr__(self) -> str:
        return "<WebSocket %#x %s%s>" % (self.id, self.url, " closed" if self.closed else "")


def _protocols(subprotocols: Any) -> bytes:
    if subprotocols is None:
        return b""
    if isinstance(subprotocols, str):
        return subprotocols.encode()
    return ", ".join(subprotocols).encode()


class _Connecting(_Pending):
    __slots__ = ()

    async def __aexit__(self, *exc: Any) -> None:
        ws = self._resp
        if ws is not None:
            await ws.close()


def connect(m: Any, url: str, *, headers: Any = None, subprotocols: Any = None, max_queue: int = 1 << 20) -> Any:
    """Open a WebSocket client on Manager `m` (attached to asyncio); await
    it for the open WebSocket, or use `async with`."""
    if m._loop is None:
        raise RuntimeError("websocket_connect() needs the Manager served by asyncio (nanosrv.aio.attach or serve)")
    if not isinstance(url, str):
        raise TypeError("url must be str, not %s" % type(url).__name__)
    if not isinstance(max_queue, int) or max_queue < 1:
        raise ValueError("max_queue must be an int >= 1, not %r" % (max_queue,))
    return _Connecting(_connect(m, url, header_bytes(headers), _protocols(subprotocols), max_queue))


async def _connect(m: Any, url: str, hdrs: bytes, protos: bytes, max_queue: int) -> WebSocket:
    _own(m, "websocket_connect()")
    u = url.encode()
    ws = WebSocket(m, url, max_queue)
    ws.id = register(m, lambda srv: lib.nsv_ws_connect(srv, u, len(u), hdrs, len(hdrs), protos, len(protos), 0), ws,
                     url)
    _kick(m)
    try:
        return await ws._opened
    except asyncio.CancelledError:
        # Not open yet: drop it; its CLOSE event still ends the registration.
        if not ws.closed and m._srv != ffi.NULL:
            lib.nsv_abort(m._srv, ws.id)
            _kick(m)
        raise


async def connect_default(url: str, **kw: Any) -> WebSocket:
    """websocket_connect on the running loop's own Manager (nanosrv.aionet's)."""
    from .aionet import manager_for
    return await connect(manager_for(), url, **kw)


__all__ = ["WebSocket", "connect", "connect_default", "WebSocketClosed"]
