"""HTTP/1.1 client on the server's own loop (nsv_http_request): no thread,
no second event loop. The requests' events arrive in the same poll batch
as the server's, by request id.

    async def handler(conn, msg):              # a coroutine route (nanosrv.aio)
        resp = await srv.fetch("http://127.0.0.1:9000/users/1", timeout=5)
        return resp.status, await resp.json()

    async with srv.fetch(url, method="POST", body=chunks()) as resp:
        async for piece in resp:               # streamed; reading pauses when
            ...                                # the consumer lags

From a plain (conn, msg) handler, which cannot await, the callback form
answers later (a handler that keeps `conn` may reply after it returned):

    def handler(conn, msg):
        srv.http_request(url, lambda resp, err: conn.http_reply(
            502 if err else resp.status, "", str(err) if err else resp.content))

Failures raise (or pass to the callback) a nanosrv.errors.ClientError
subclass carrying the library's code: ConnectionRefused, Timeout,
HostNotFound, BadResponse, ResponseTooLarge, ConnectionClosed,
ClientTlsError, ClientStopped.
"""
import asyncio
import collections
import collections.abc
import json as _json
import logging
import re
import weakref
from threading import get_ident as _get_ident
from typing import Any, Callable, Optional

from ._conn import to_bytes
from ._ffi import ffi, lib
from ._message import BODY, BODY_LEN, CODE, EVF_EOF, EVF_HTTP10, EVF_KEEPALIVE, EVF_TLS, FLAGS, HEADERS, \
    HEADERS_LEN, PATH, PATH_LEN
from .errors import ClientError, Timeout, check, client_error
from .headers import Headers, header_bytes

log = logging.getLogger("nanosrv")

_EV_RESPONSE, _EV_BODY = lib.NSV_EV_HTTP_RESPONSE, lib.NSV_EV_HTTP_BODY
_EV_ERROR, _EV_WRITABLE = lib.NSV_EV_ERROR, lib.NSV_EV_TCP_WRITABLE
_EAGAIN, _ESTALE, _ETIMEDOUT, _ESTOPPED = lib.NSV_EAGAIN, lib.NSV_ESTALE, lib.NSV_ETIMEDOUT, lib.NSV_ESTOPPED
_STREAM = lib.NSV_HTTP_STREAM_BODY
_JSON_HDR = b"Content-Type: application/json\r\n"
_HAS_CTYPE = re.compile(rb"(?:\A|\n)content-type[ \t]*:", re.I)

# What the body calls return once the library has ended the request.
_ENDED = (lib.NSV_ESTALE, lib.NSV_ESTATE)


class _Ended(Exception):
    """The request ended while its body was being sent."""


# Response bytes held for a consumer that lags (async for) before reading
# the response pauses (nsv_http_pause); it resumes at half of it.
BUFFER_LIMIT = 1 << 20


def _kick(m: Any) -> None:
    k = m._kick
    if k is not None:
        k()


def register(m: Any, start: Callable[[Any], int], obj: Any, url: str) -> int:
    """Start an outbound exchange (start(srv) returns its id or an error
    code) and route its events to obj._event. Under the Manager's lock:
    on a sharded server another thread's poll may see the first event
    before the id is known otherwise."""
    srv = m._live()
    with m._out_lock:
        m._out_busy += 1
        try:
            oid = start(srv)
            if oid >= 0:
                m._out[oid] = obj
        finally:
            m._out_busy -= 1
    if oid == _ESTOPPED:  # stopping or draining: what a request in flight gets at the deadline too
        raise client_error(oid, ffi.string(lib.nsv_last_error_detail(srv)).decode("utf-8", "replace"), url)
    return check(oid, srv)


def _own(m: Any, what: str) -> None:
    t = m._tid
    if t is not None and t != _get_ident():
        raise m._foreign(what)


def _body_args(body: Any, json: Any, headers: bytes, content_length: Optional[int]):
    """(body bytes, iterator or None, headers, content_length) for the call."""
    if json is not None:
        if body is not None:
            raise TypeError("give body= or json=, not both")
        body = _json.dumps(json, separators=(",", ":")).encode()
        if not _HAS_CTYPE.search(headers):
            headers += _JSON_HDR
    if body is None or isinstance(body, (bytes, bytearray, memoryview, str)):
        data = to_bytes(body)
        if content_length is not None and content_length != len(data):
            raise ValueError("content_length=%d but the body has %d bytes" % (content_length, len(data)))
        return data, None, headers, -1
    if isinstance(body, collections.abc.Mapping) or not (hasattr(body, "__aiter__") or hasattr(body, "__iter__")):
        raise TypeError("body must be bytes, str, an iterable or an async iterable of bytes, not %s"
                        % type(body).__name__)
    if content_length is not None and (not isinstance(content_length, int) or content_length < 0):
        raise ValueError("content_length must be an int >= 0 (or None: chunked), not %r" % (content_length,))
    return b"", body, headers, -1 if content_length is None else content_length


class Response:
    """An HTTP response: `status`, `reason`, `headers` (Headers: a
    case-insensitive multi-dict), `version` ("HTTP/1.1" or "HTTP/1.0"),
    `keep_alive` (the connection goes back to the pool), `tls`, `url`,
    `method`. The body: `await read()` (also `body()`), `await text()`,
    `await json()`, or `async for chunk in resp` (pieces as they arrive,
    paused while more than `buffer_limit` bytes wait for the consumer).
    `content` is the whole body once read (always in the callback form).
    `await release()` (or leaving `async with`) cancels a response not
    read to its end. `pauses` counts the times reading was paused."""

    def __init__(self, x: "_Exchange", e: Any, arena: Any) -> None:
        self._x = x
        self.status: int = e[CODE]
        self.reason: str = arena[e[PATH]:e[PATH] + e[PATH_LEN]].decode("latin-1")
        self.headers = Headers.from_block(arena[e[HEADERS]:e[HEADERS] + e[HEADERS_LEN]])
        f = e[FLAGS]
        self.version = "HTTP/1.0" if f & EVF_HTTP10 else "HTTP/1.1"
        self.keep_alive = bool(f & EVF_KEEPALIVE)
        self.tls = bool(f & EVF_TLS)
        self.url = x.url
        self.method = x.method
        self.content: Optional[bytes] = None

    @property
    def id(self) -> int:
        """The library's request id."""
        return self._x.id

    @property
    def ok(self) -> bool:
        """True for a 2xx status."""
        return 200 <= self.status < 300

    @property
    def done(self) -> bool:
        """True once the whole body has arrived (or the request failed)."""
        return self._x.done

    @property
    def pauses(self) -> int:
        return self._x.pauses

    @property
    def max_buffered(self) -> int:
        """The most body bytes that waited for the consumer at one time."""
        return self._x.max_buffered

    @property
    def buffer_limit(self) -> int:
        return self._x.limit

    @property
    def content_type(self) -> str:
        return (self.headers.get("content-type") or "").split(";", 1)[0].strip().lower()

    def _charset(self) -> str:
        for part in (self.headers.get("content-type") or "").split(";")[1:]:
            k, _, v = part.strip().partition("=")
            if k.lower() == "charset" and v:
                return v.strip('"')
        return "utf-8"

    async def read(self) -> bytes:
        """The rest of the body as bytes (all of it unless `async for` took
        some); again after that, the same bytes."""
        if self.content is not None:
            return self.content
        x = self._x
        x.read_all = True
        if x.paused:
            x.pause(False)
        while not x.done:
            await x.wait()
        if x.error is not None:
            raise x.error
        self.content = x.take_all()
        return self.content

    body = read

    async def text(self, encoding: Optional[str] = None, errors: str = "strict") -> str:
        """The body decoded (charset of Content-Type, else UTF-8)."""
        return (await self.read()).decode(encoding or self._charset(), errors)

    async def json(self, **kw: Any) -> Any:
        """The body parsed as JSON (ValueError if it is not)."""
        return _json.loads(await self.read(), **kw)

    def __aiter__(self) -> "Response":
        return self

    async def __anext__(self) -> bytes:
        x = self._x
        while not x.chunks:
            if x.error is not None:
                raise x.error
            if x.done:
                raise StopAsyncIteration
            await x.wait()
        c = x.chunks.popleft()
        x.buffered -= len(c)
        if x.paused and x.buffered <= x.limit // 2:
            x.pause(False)
        return c

    iter_chunks = __aiter__

    async def release(self) -> None:
        """Cancel the request if its body has not all arrived (its
        connection closes); nothing to do otherwise."""
        self._x.cancel(None)

    close = release

    def cancel(self) -> bool:
        """Cancel the request now (False when it had ended)."""
        return self._x.cancel(None)

    def __repr__(self) -> str:
        return "<Response %d %s %s>" % (self.status, self.method, self.url)


class _Exchange:
    """One request's state, fed by the Manager's dispatch (_event)."""

    def __init__(self, m: Any, url: str, method: str, limit: int) -> None:
        self.m = m
        self.url = url
        self.method = method
        self.id = 0
        self.resp: Optional[Response] = None
        self.done = False
        self.error: Optional[BaseException] = None
        self.chunks: Any = collections.deque()
        self.buffered = 0
        self.max_buffered = 0
        self.limit = limit
        self.read_all = False
        self.paused = False
        self.pauses = 0
        self.timer: Any = None
        self.sender: Any = None        # the task sending a streamed body
        self.waiter: Any = None        # a future the consumer awaits
        self.writable: Any = None      # a future the sender awaits (NSV_EAGAIN)
        self.on_head: Optional[Callable[[Response], None]] = None
        self.on_change: Optional[Callable[[], None]] = None

    # ---- from the dispatch ----

    def _event(self, t: int, e: Any, arena: Any) -> None:
        if self.done:
            return
        if t == _EV_BODY:
            n = e[BODY_LEN]
            if n:
                o = e[BODY]
                self.chunks.append(arena[o:o + n])
                self.buffered += n
                if self.buffered > self.max_buffered:
                    self.max_buffered = self.buffered
                if not self.paused and not self.read_all and self.buffered >= self.limit:
                    self.pause(True)
            if e[FLAGS] & EVF_EOF:
                self.finish(None)
            self.changed()
        elif t == _EV_RESPONSE:
            self.resp = Response(self, e, arena)
            if self.on_head is not None:
                self.on_head(self.resp)
        elif t == _EV_ERROR:
            text = arena[e[BODY]:e[BODY] + e[BODY_LEN]].decode("utf-8", "replace")
            self.finish(client_error(e[CODE], text, self.url))
            self.changed()
        elif t == _EV_WRITABLE:
            if e[CODE]:
                self._wake_sender()

    # ---- state ----

    def changed(self) -> None:
        w = self.waiter
        if w is not None:
            self.waiter = None
            if not w.done():
                w.set_result(None)
        if self.on_change is not None:
            self.on_change()

    def _wake_sender(self) -> None:
        w = self.writable
        if w is not None:
            self.writable = None
            if not w.done():
                w.set_result(None)

    def finish(self, err: Optional[BaseException]) -> None:
        """The final event (or a cancel): nothing more carries the id."""
        if self.done:
            return
        self.done = True
        self.error = err
        self.m._out.pop(self.id, None)
        if self.paused:
            self.paused = False
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self._wake_sender()
        s = self.sender
        if s is not None and not s.done():
            try:
                cur = asyncio.current_task()
            except RuntimeError:
                cur = None
            if s is not cur:
                s.cancel()

    def cancel(self, err: Optional[BaseException]) -> bool:
        if self.done:
            return False
        srv = self.m._srv
        r = lib.nsv_http_cancel(srv, self.id) if srv != ffi.NULL else _ESTALE
        self.finish(err)
        if err is not None:
            self.changed()
        _kick(self.m)
        return r == 0

    def pause(self, on: bool) -> None:
        if self.done:
            return
        r = lib.nsv_http_pause(self.m._srv, self.id, 1 if on else 0)
        if r == 0:
            self.paused = on
            if on:
                self.pauses += 1
            _kick(self.m)

    def take_all(self) -> bytes:
        data = b"".join(self.chunks)
        self.chunks.clear()
        self.buffered = 0
        return data

    def server_closed(self) -> None:
        if not self.done:
            self.finish(client_error(_ESTOPPED, "the server was closed", self.url))
            self.changed()

    def _timed_out(self, seconds: float) -> None:
        self.timer = None
        if not self.done:
            e = Timeout(_ETIMEDOUT, "%s: no complete response within %g s (timeout=)" % (self.url, seconds))
            e.url = self.url
            self.cancel(e)

    async def wait(self) -> None:
        """Until the next event of this request; cancelling the awaiting
        task cancels the request."""
        loop = self.m._loop
        w = self.waiter
        if w is None or w.done():
            w = self.waiter = loop.create_future()
        try:
            await w
        except asyncio.CancelledError:
            self.cancel(None)
            raise

    # ---- starting and the streamed body ----

    def start(self, method: bytes, url: bytes, headers: bytes, body: bytes, clen: int, flags: int,
              timeout: Optional[float]) -> None:
        self.id = register(self.m, lambda srv: lib.nsv_http_request(
            srv, method, len(method), url, len(url), headers, len(headers), body, len(body), clen, flags), self,
            self.url)
        if timeout is not None:
            self.timer = self.m.call_later(timeout, self._timed_out, timeout)
        _kick(self.m)

    async def send_body(self, it: Any) -> None:
        try:
            if hasattr(it, "__aiter__"):
                async for piece in it:
                    await self._piece(piece)
            else:
                for piece in it:
                    await self._piece(piece)
            if not self.done:
                r = lib.nsv_http_request_end(self.m._srv, self.id)
                if r < 0 and r not in _ENDED:
                    check(r, self.m._srv)
                _kick(self.m)
        except asyncio.CancelledError:
            raise
        except _Ended:
            return
        except BaseException as exc:
            # The request cannot complete: whoever awaits it gets the cause.
            self.cancel(exc)

    async def _piece(self, piece: Any) -> None:
        data = to_bytes(piece, "body piece")
        while data and not self.done:
            r = lib.nsv_http_request_body(self.m._srv, self.id, data, len(data))
            if r == 0:
                _kick(self.m)
                return
            if r in _ENDED:
                # The library ended the request (its ERROR or final BODY
                # event is on its way and tells why): stop sending.
                raise _Ended
            if r != _EAGAIN:
                check(r, self.m._srv)
            w = self.writable = self.m._loop.create_future()
            await w


class _Pending(collections.abc.Coroutine):
    """What fetch() returns: awaitable (and a coroutine, so create_task
    takes it) or an async context manager whose exit releases the
    response."""
    __slots__ = ("_coro", "_resp")

    def __init__(self, coro: Any) -> None:
        self._coro = coro
        self._resp: Any = None

    def send(self, value: Any) -> Any:
        return self._coro.send(value)

    def throw(self, *args: Any) -> Any:
        return self._coro.throw(*args)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Any:
        return self._coro.__await__()

    async def __aenter__(self) -> Any:
        self._resp = await self._coro
        return self._resp

    async def __aexit__(self, *exc: Any) -> None:
        r = self._resp
        if r is not None:
            await r.release()


def fetch(m: Any, url: str, *, method: str = "GET", headers: Any = None, body: Any = None, json: Any = None,
          timeout: Optional[float] = None, content_length: Optional[int] = None,
          buffer_limit: int = BUFFER_LIMIT) -> Any:
    """Start a request on Manager `m` (attached to asyncio: nanosrv.aio);
    await the result for the Response once its head has arrived."""
    if m._loop is None:
        raise RuntimeError("fetch() needs the Manager served by asyncio (nanosrv.aio.attach or serve); "
                           "plain handlers use http_request(url, callback)")
    if not isinstance(buffer_limit, int) or buffer_limit < 1:
        raise ValueError("buffer_limit must be an int >= 1, not %r" % (buffer_limit,))
    return _Pending(_fetch(m, url, method, headers, body, json, timeout, content_length, buffer_limit))


def _prepare(m: Any, url: Any, method: Any, headers: Any, timeout: Any):
    if not isinstance(url, str):
        raise TypeError("url must be str, not %s" % type(url).__name__)
    if not isinstance(method, str):
        raise TypeError("method must be str, not %s" % type(method).__name__)
    if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ValueError("timeout must be seconds > 0 or None, not %r" % (timeout,))
    _own(m, "fetch()")
    return url.encode(), method.upper(), header_bytes(headers)


async def _fetch(m, url, method, headers, body, json, timeout, content_length, limit):
    u, method, hdrs = _prepare(m, url, method, headers, timeout)
    data, it, hdrs, clen = _body_args(body, json, hdrs, content_length)
    loop = m._loop
    x = _Exchange(m, url, method, limit)
    head = loop.create_future()

    def on_head(resp: Response) -> None:
        # The exchange keeps no reference to the response: one its holder
        # drops unread is cancelled (from the polling thread, whichever
        # thread lets it go), instead of holding its connection paused.
        x.resp = x.on_head = x.on_change = None  # (these hold `head`, which holds resp)
        weakref.finalize(resp, m.call_soon_threadsafe, x.cancel, None)
        if not head.done():
            head.set_result(resp)

    def on_change() -> None:
        if x.error is not None and not head.done():
            head.set_exception(x.error)
    x.on_head, x.on_change = on_head, on_change
    x.start(method.encode(), u, hdrs, data, clen, _STREAM if it is not None else 0, timeout)
    if it is not None:
        x.sender = loop.create_task(x.send_body(it))
    try:
        return await head
    except asyncio.CancelledError:
        x.cancel(None)
        raise


class Request:
    """A request of the callback form: `id`, `done`, cancel()."""
    __slots__ = ("_x",)

    def __init__(self, x: _Exchange) -> None:
        self._x = x

    @property
    def id(self) -> int:
        return self._x.id

    @property
    def done(self) -> bool:
        return self._x.done

    def cancel(self) -> bool:
        """Cancel it; the callback is not called. False when it had ended."""
        x = self._x
        x.on_change = None
        return x.cancel(None)

    def __repr__(self) -> str:
        return "<Request %#x %s %s%s>" % (self._x.id, self._x.method, self._x.url, " done" if self.done else "")


def http_request(m: Any, url: str, callback: Callable[[Optional[Response], Optional[BaseException]], Any], *,
                 method: str = "GET", headers: Any = None, body: Any = None, json: Any = None,
                 timeout: Optional[float] = None) -> Request:
    """The callback form: callback(resp, None) once the whole body has
    arrived (resp.content), or callback(None, err) with a ClientError. It
    runs in the thread that polls the Manager, with or without asyncio."""
    if not callable(callback):
        raise TypeError("callback must be callable")
    u, method, hdrs = _prepare(m, url, method, headers, timeout)
    data, it, hdrs, clen = _body_args(body, json, hdrs, None)
    if it is not None:
        raise TypeError("http_request() takes a body of bytes or str; stream one with fetch()")
    x = _Exchange(m, url, method, BUFFER_LIMIT)
    x.read_all = True

    def on_change() -> None:
        if not x.done:
            return
        x.on_change = None
        resp = x.resp if x.error is None else None
        if resp is not None:
            resp.content = x.take_all()
        try:
            callback(resp, x.error)
        except Exception:
            log.exception("http_request callback %r failed", callback)
    x.on_change = on_change
    x.start(method.encode(), u, hdrs, data, clen, 0, timeout)
    return Request(x)


def fetch_blocking(m: Any, url: str, *, method: str = "GET", headers: Any = None, body: Any = None,
                   json: Any = None, timeout: Optional[float] = None) -> Response:
    """For threads that may block (a WSGI application on the server's
    worker threads): start http_request on the polling thread and wait for
    its end. Returns the Response with `content`, or raises the ClientError.
    Refused (StateError) on the thread that polls the Manager, which would
    wait for itself: handlers there use http_request or fetch."""
    import threading
    from .errors import StateError, ESTATE
    if m._plock._is_owned():
        raise StateError(ESTATE, "fetch_blocking() on the thread that polls the Manager would wait for itself; "
                         "use http_request(url, callback) or await fetch(url) there")
    done = threading.Event()
    box: list = []

    def callback(resp: Optional[Response], err: Optional[BaseException]) -> None:
        box.append((resp, err))
        done.set()

    def start() -> None:
        try:
            http_request(m, url, callback, method=method, headers=headers, body=body, json=json, timeout=timeout)
        except BaseException as e:
            callback(None, e)
    if m._single:
        m.call_soon_threadsafe(start)   # a single loop takes calls from its own thread only
    else:
        start()
    while not done.wait(0.25):
        if m._srv == ffi.NULL:
            raise client_error(_ESTOPPED, "the server was closed", url)
    resp, err = box[0]
    if err is not None:
        raise err
    return resp


def shutdown(m: Any) -> None:
    """The Manager is being freed: every request and WebSocket client still
    open fails (ClientStopped)."""
    for o in list(m._out.values()):
        o.server_closed()
    m._out.clear()


async def fetch_default(url: str, **kw: Any) -> Response:
    """fetch() on the running loop's own Manager (nanosrv.aionet's), for
    programs that serve nothing."""
    from .aionet import manager_for
    return await fetch(manager_for(), url, **kw)


__all__ = ["Response", "Request", "fetch", "http_request", "fetch_blocking", "fetch_default", "BUFFER_LIMIT",
           "ClientError"]
