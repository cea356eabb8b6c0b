"""Connection: answers a request or talks WebSocket, by connection id.

Every method is one library call on the id. A reply or send to a client
that already left (the connection's CLOSE event was seen, or the library
answers NSV_ESTALE) does nothing and returns False; `closed` says so.
Programming errors still raise: replying twice (StateError), a bad status
or header (ValueError).
"""
import logging
import re
import threading
from http import HTTPStatus
from typing import Any, Callable, Optional, Tuple, Union

from ._ffi import ffi, lib
from .errors import ENOTSUP, ESTALE, InvalidArgument, check, error, require
from .headers import header_bytes  # noqa: F401 (re-exported for _response and wsgi)

log = logging.getLogger("nanosrv")
_reply = lib.nsv_reply
_TEXT, _BINARY = lib.NSV_WS_TEXT, lib.NSV_WS_BINARY
_abort = lib.nsv_abort
_STATUS_LINE = re.compile(rb"HTTP/1\.[01] ([1-9][0-9][0-9])(?: [^\r\n]*)?\r\n")
_CONTENT_LENGTH = re.compile(rb"(?im)^content-length:[ \t]*([0-9]+)[ \t]*\r\n")
_TRANSFER_ENCODING = re.compile(rb"(?im)^transfer-encoding:")
_RAW_HEAD_MAX = 65536
_get_ident = threading.get_ident
_send_chunk = lib.nsv_send_chunk
_EINVAL = lib.NSV_EINVAL
_BAD_REASON = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")  # what RFC 9112 leaves out of a reason phrase
_STATUS_TEXT = re.compile(r"([1-9][0-9][0-9])(?: (.*))?\Z", re.S)
Status = Union[int, str]
Headers = Union[str, bytes, dict, list, tuple, None]

# The library's standard phrases (response.c: http.HTTPStatus's, with RFC
# 9110's wording for 413, 414 and 416): a reason equal to the one the library
# would send costs no call (WSGI's "200 OK" on every request).
STANDARD_REASONS = {s.value: s.phrase for s in HTTPStatus}
STANDARD_REASONS.update({413: "Content Too Large", 414: "URI Too Long", 416: "Range Not Satisfiable"})
_STANDARD_B = {k: v.encode() for k, v in STANDARD_REASONS.items()}


def parse_status(status: Any) -> Tuple[int, Optional[str]]:
    """(code, reason or None) from 200, "200", "299 Custom Reason" (a WSGI
    status line). ValueError naming the rule otherwise."""
    if isinstance(status, int) and not isinstance(status, bool):
        return status, None
    if isinstance(status, bytes):
        status = status.decode("latin-1")
    if not isinstance(status, str):
        raise TypeError("status must be an int or a str such as \"200 OK\", not %s" % type(status).__name__)
    m = _STATUS_TEXT.match(status)
    if m is None:
        raise ValueError("status %r: expected three digits, then optionally a space and a reason phrase"
                         % (status,))
    return int(m.group(1)), m.group(2)


def ws_frame_size(n: int) -> int:
    """Bytes a server frame of n payload bytes takes (RFC 6455: no mask)."""
    return n + (2 if n < 126 else 4 if n < 65536 else 10)


def to_bytes(x: Any, what: str = "body") -> bytes:
    """bytes for str (UTF-8, lone surrogates restored), bytes-like, or None."""
    t = type(x)
    if t is bytes:
        return x
    if t is str:
        return x.encode("utf-8", "surrogateescape")
    if x is None:
        return b""
    if isinstance(x, (bytearray, memoryview)):
        return bytes(x)
    raise TypeError("%s must be str or bytes, not %s" % (what, t.__name__))


class Connection:
    """One client connection of a Manager, by id. On a single-loop Manager
    its methods are called from the polling thread (StateError otherwise:
    see Manager.call_soon_threadsafe); on a ShardedManager from any."""
    __slots__ = ("_m", "_s", "id", "_pending", "_closed", "_ws", "_streaming", "_blocked", "_drained",
                 "_hangup", "_gone_fns", "_body", "_hdrs", "_tls", "_client", "_closing", "_raw", "_queued",
                 "_reason", "_rsent", "__weakref__")

    def __init__(self, manager: Any, conn_id: int) -> None:
        self._m = manager
        self._s = manager._srv
        self.id = conn_id
        self._pending = False   # a request waits for its reply
        self._closed = False
        self._ws: Optional[Callable[..., Any]] = None  # handler of WebSocket events, once upgraded
        self._streaming = False
        self._blocked = False   # a streamed reply is past the high water mark
        self._drained = None    # callbacks and futures waiting for it to drain
        self._hangup = False    # the client ended its side (HANGUP) or the connection closed
        self._gone_fns = None   # callbacks and futures waiting for that
        self._body = None       # BodyStream of the request whose body is streaming
        self._hdrs = b""        # header lines for the next reply (set_cookie)
        self._tls = False       # accepted on a TLS listener (or connected with tls://)
        self._client = False    # opened by this side (nsv_connect), not accepted
        self._closing = False   # close() or drain() was called
        self._raw = None        # bytes of a raw HTTP response being written with send_bytes
        self._queued = 0        # bytes of a streamed reply queued since the library last said (writable)
        self._reason: Optional[bytes] = None  # set_reason: the phrase for the next status line
        self._rsent = False     # ... handed to the library (nsv_set_reason), not yet used

    def _own(self, what: str) -> None:
        """StateError when a thread other than the polling one calls a
        single-loop Manager's connection (see Manager.call_soon_threadsafe)."""
        t = self._m._tid
        if t is not None and t != _get_ident():
            raise self._m._foreign("Connection." + what)

    def _ptr(self) -> Any:
        if self._closed:
            raise error(ESTALE, "connection %#x has closed" % self.id)
        return self._s

    def _sent(self, r: int) -> bool:
        """True when a send call succeeded; False (the connection marked
        closed) when the client had left; raise on other errors."""
        if r >= 0:
            if self._m._kick is not None:
                self._after_send()
            return True
        if r == ESTALE:
            self._closed = True
            return False
        check(r, self._s)
        return False  # (check raised)

    def _after_send(self):
        # In an asyncio host output leaves on the next nsv_poll; ask for one
        # when the reply is made outside the event dispatch.
        k = self._m._kick
        if k is not None:
            k()

    # ---- HTTP ----

    def http_reply(self, status: Status, headers: Headers = "", body: Any = b"", *,
                   reason: Optional[str] = None) -> bool:
        """Send a complete response. status: 200, or "299 Custom Reason"
        (the phrase goes out as given; reason= says it too). headers:
        "Name: value\\r\\n" lines, or a dict / (name, value) pairs. True
        when sent, False when the client had left (nothing to do); a bad
        header raises either way."""
        if type(status) is not int:
            status, text = parse_status(status)
            reason = text if reason is None else reason
        hb = headers if type(headers) is bytes else header_bytes(headers)
        if type(body) is not bytes:
            body = to_bytes(body)
        if self._closed:
            return False
        # (after the closed check: a late reply to a client that left is a
        # no-op from any thread; only calls into the library are the loop's)
        t = self._m._tid
        if t is not None and t != _get_ident():
            raise self._m._foreign("Connection.http_reply()")
        if reason is not None:
            self.set_reason(reason)
        if self._reason is not None and not self._put_reason(status):
            return False
        if self._hdrs:
            hb = self._take_headers() + hb
        r = _reply(self._s, self.id, status, hb, len(hb), body, len(body))
        if r:
            if r == ESTALE:
                self._closed = True
                return False
            self._drop_reason()
            check(r, self._s)
        self._pending = False
        if self._rsent:
            self._rsent = False  # used by this status line
        if self._m._kick is not None:
            self._after_send()
        return True

    reply = http_reply

    def set_reason(self, reason: Union[str, bytes, None]) -> bool:
        """Use `reason` as the phrase of the next status line of this
        connection's pending request (http_reply, reply_start, sse_start,
        send_file; once). At most 128 bytes of tab, space, visible ASCII or
        non-ASCII text (str is sent as UTF-8); ValueError (InvalidArgument)
        naming the byte otherwise. None or "" goes back to the standard
        phrase. Checked now and handed to the library with the reply, and
        only when it differs from the standard phrase of the status (a WSGI
        "200 OK" costs no call). True, or False when the client had left."""
        if reason is None or reason == "" or reason == b"":
            self._drop_reason()
            return not self._closed
        b = reason.encode("utf-8", "surrogateescape") if isinstance(reason, str) else to_bytes(reason, "reason")
        m = _BAD_REASON.search(b)
        if m is not None or len(b) > 128:
            why = ("byte 0x%02x at offset %d is not allowed in a reason phrase (HTAB, SP, visible ASCII and "
                   "bytes >= 0x80 only)" % (b[m.start()], m.start()) if m is not None else
                   "the reason phrase is %d bytes; at most 128" % len(b))
            raise InvalidArgument(_EINVAL, "set_reason(%r): %s" % (reason, why))
        self._reason = b
        return not self._closed

    def _put_reason(self, status: int) -> bool:
        """Hand the phrase of set_reason to the library before the status
        line it belongs to, unless it is the standard one of status."""
        b, self._reason = self._reason, None
        if b is None or (_STANDARD_B.get(status) == b and not self._rsent):
            return True
        self._own("set_reason()")
        fn = require("nsv_set_reason", "a custom reason phrase")
        r = fn(self._s, self.id, b, len(b))
        if not self._sent(r):
            return False
        self._rsent = True
        return True

    def _drop_reason(self) -> None:
        # A reply that failed, or an error answer instead of the handler's:
        # the phrase set for the handler's answer must not go out with it.
        self._reason = None
        if self._rsent:
            self._rsent = False
            if not self._closed:
                lib.nsv_set_reason(self._s, self.id, ffi.NULL, 0)

    def reply_start(self, status: Status = 200, headers: Headers = "", *, reason: Optional[str] = None) -> bool:
        """Start a streamed response (chunked unless headers give a
        Content-Length); continue with send_chunk, finish with reply_end.
        status and reason as in http_reply. False when the client had left;
        a bad header raises either way."""
        if type(status) is not int:
            status, text = parse_status(status)
            reason = text if reason is None else reason
        hb = header_bytes(headers)
        if self._closed:
            return False
        self._own("reply_start()")
        if reason is not None:
            self.set_reason(reason)
        if self._reason is not None and not self._put_reason(status):
            return False
        h = self._take_headers()
        r = lib.nsv_reply_start(self._s, self.id, status, h + hb, len(h) + len(hb))
        if r < 0 and r != ESTALE:
            self._hdrs = h + self._hdrs
            self._drop_reason()
        if not self._sent(r):
            return False
        self._pending = False
        self._rsent = False
        self._streaming = True
        self._queued = 0
        return True

    def start_chunked(self, status: Status = 200, headers: Headers = "") -> bool:
        """nanosrv's name: start a chunked response; write_chunk(data) for
        each piece, write_chunk(b"") ends it."""
        return self.reply_start(status, headers)

    def write_chunk(self, data: Any) -> bool:
        """One chunk of a started response; an empty one ends the stream."""
        data = to_bytes(data, "data")
        return self.send_chunk(data) if data else self.reply_end()

    def start_sse(self, headers: Headers = "") -> Any:
        """nanosrv's name: answer with a server-sent event stream
        (text/event-stream, no-cache); sse_send() for each event. Returns an
        EventStream (see sse_start), or None when the client had left."""
        if self._closed:
            return None
        try:
            return self.sse_start(headers)
        except Exception as exc:
            if getattr(exc, "code", None) == ESTALE:
                self._closed = True
                return None
            raise

    def sse_send(self, data: Any, event: Optional[Any] = None, id: Optional[Any] = None,
                 retry: Optional[int] = None) -> bool:
        """Send one event of a started stream: data (str or bytes; several
        lines become several data lines), event name, id, retry (ms). True
        when queued, False when the client had left. ValueError for CR/LF
        in event or id."""
        if self._closed:
            return False
        self._own("sse_send()")
        d, ev = to_bytes(data, "data"), None if event is None else to_bytes(event, "event")
        i = None if id is None else to_bytes(id, "id")
        r = lib.nsv_sse_send(self._s, self.id, ev or _NULL, len(ev or b""), _NULL if i is None else i,
                             len(i or b""), d, len(d), -1 if retry is None else int(retry))
        if r >= 0:
            q = self._queued = self._queued + len(d) + 8  # "data: " and the line ends, at least
            if q >= self._m._hw:
                self._over()
        return self._sent(r)

    def _take_headers(self) -> bytes:
        h, self._hdrs = self._hdrs, b""
        return h

    def set_cookie(self, name: str, value: str = "", *, path: Optional[str] = None, domain: Optional[str] = None,
                   max_age: Any = None, expires: Any = None, secure: bool = False, httponly: bool = False,
                   samesite: Optional[str] = None, partitioned: bool = False) -> None:
        """Add a Set-Cookie line to the next reply of this connection
        (http_reply, a returned value, reply_start, sse_start, send_file).
        Validated by the library: ValueError with its reason. Arguments as
        nanosrv.set_cookie_header."""
        from .forms import set_cookie_header
        line = set_cookie_header(name, value, path=path, domain=domain, max_age=max_age, expires=expires,
                                 secure=secure, httponly=httponly, samesite=samesite, partitioned=partitioned)
        self._hdrs += b"Set-Cookie: " + line.encode("latin-1") + b"\r\n"

    def delete_cookie(self, name: str, *, path: Optional[str] = None, domain: Optional[str] = None,
                      secure: bool = False, samesite: Optional[str] = None) -> None:
        """Tell the client to drop a cookie (empty value, Max-Age=0)."""
        self.set_cookie(name, "", path=path, domain=domain, max_age=0, secure=secure, samesite=samesite)

    def sse_start(self, headers: Headers = "") -> Any:
        """Answer the pending request with a server-sent event stream
        (nsv_sse_start); returns a nanosrv.sse.EventStream."""
        from .sse import EventStream
        self._own("sse_start()")
        hb = self._take_headers() + header_bytes(headers)
        if self._reason is not None:
            self._put_reason(200)
        r = lib.nsv_sse_start(self._ptr(), self.id, hb, len(hb))
        if r < 0:
            self._drop_reason()
        check(r, self._s)
        self._pending = False
        self._rsent = False
        self._queued = 0
        self._streaming = True
        self._after_send()
        return EventStream(self)

    def send_file(self, msg: Any, path: str, *, root: Optional[str] = None, status: int = 0,
                  headers: Headers = "", **flags: Any) -> bool:
        """Answer the pending request `msg` with a file (nsv_reply_file):
        with root, path is a URL path resolved under root as the static
        server does (no escape from root); without, a file system path.
        status 0 gives 200/206/304/416 from the request's conditional and
        Range headers. Returns False (nothing sent) when there is no such
        file. flags by name as Manager.static."""
        from .static import reply_file
        self._own("send_file()")
        hdrs = self._take_headers()
        if self._reason is not None:
            self._put_reason(status)  # status 0 (200/206/304 chosen by the library): never the standard one
        try:
            sent = reply_file(self, msg, path, root, status, hdrs + header_bytes(headers), flags)
        except BaseException:
            self._hdrs = hdrs + self._hdrs
            raise
        if not sent:
            self._hdrs = hdrs + self._hdrs  # still owed to whatever answer comes instead
        else:
            self._rsent = False
        return sent

    def send_chunk(self, data: Any) -> bool:
        """One chunk of a started response (empty: nothing). True when
        queued, False when the client had left."""
        if self._closed:
            return False
        t = self._m._tid
        if t is not None and t != _get_ident():
            raise self._m._foreign("Connection.send_chunk()")
        if type(data) is not bytes:
            data = to_bytes(data, "data")
        r = _send_chunk(self._s, self.id, data, len(data))
        if r >= 0:
            # Counted now, so `writable` turns False as soon as this chunk
            # crosses the high water mark, not at the next poll.
            q = self._queued = self._queued + len(data)
            if q >= self._m._hw:
                self._over()
        return self._sent(r)

    def _over(self) -> None:
        """The count of queued bytes reached the high water mark: check it
        where the library can tell (single loop: nsv_conn_queued, exact;
        past the mark the library has sent WRITABLE 0 too and will say 1
        once drained), else (sharded) block on the count until the next
        poll (Manager._recount) or the library's own WRITABLE events."""
        m = self._m
        r = lib.nsv_conn_queued(self._s, self.id)
        if r >= 0:
            self._queued = r
            if r >= m._hw:
                self._blocked = True
        elif m._count_blocked is not None:
            # The poll that ends the count may otherwise sleep its whole
            # timeout when the library sends no WRITABLE event (it flushed
            # faster than the count grew): wake it.
            if not m._count_blocked:
                lib.nsv_wakeup(self._s)
            m._count_blocked.add(self)

    @property
    def writable(self) -> bool:
        """False while a streamed reply's queued output is past the high
        water mark (NSV_OPT_TCP_HIGH_WATER), at once after the send_chunk or
        sse_send that crossed it; send more once it drained (on_drain,
        wait_writable)."""
        return not self._blocked and self._queued < self._m._hw

    def on_drain(self, fn: Callable[[], Any]) -> None:
        """Call fn() once the queued output has drained (at once if writable)."""
        if self.writable:
            fn()
        else:
            (self._drained or self._init_drained()).append(fn)

    async def wait_writable(self) -> None:
        """asyncio: wait until the queued output has drained below the low
        water mark (drain() is nanosrv's close-once-flushed)."""
        if not self.writable:
            if self._m._loop is None:
                raise RuntimeError("wait_writable() needs the asyncio host (nanosrv.aio); use on_drain(fn)")
            fut = self._m._loop.create_future()
            (self._drained or self._init_drained()).append(lambda: fut.done() or fut.set_result(None))
            await fut

    def _init_drained(self):
        self._drained = []
        return self._drained

    def _set_writable(self, ok: bool) -> None:
        self._blocked = not ok
        if ok:
            self._queued = 0
        if ok and self._drained:
            waiting, self._drained = self._drained, None
            for fn in waiting:
                try:
                    fn()
                except Exception:  # one failing callback must not cost the batch
                    log.exception("drain callback failed for connection %#x", self.id)

    def reply_end(self) -> bool:
        """End a streamed response. False when the client had left."""
        if self._closed:
            return False
        self._own("reply_end()")
        ok = self._sent(lib.nsv_reply_end(self._s, self.id))
        self._streaming = False
        return ok

    # ---- the client leaving (see HttpMessage.disconnected) ----

    def _on_gone(self, fn):
        if self._hangup or self._closed:
            fn()
        else:
            (self._gone_fns or self._init_gone()).append(fn)

    def _init_gone(self):
        self._gone_fns = []
        return self._gone_fns

    def _set_hangup(self):
        self._hangup = True
        if self._gone_fns:
            waiting, self._gone_fns = self._gone_fns, None
            for fn in waiting:
                try:
                    fn()
                except Exception:
                    log.exception("disconnect callback failed for connection %#x", self.id)

    # ---- WebSocket ----

    def ws_upgrade(self, msg: Any = None, headers: Headers = "", handler: Optional[Callable[..., Any]] = None) -> bool:
        """Answer the pending upgrade request with 101. WebSocket events of
        this connection then go to `handler(conn, event, data)` (default:
        the listener's WebSocket handler)."""
        fn = require("nsv_ws_upgrade", "ws_upgrade")
        hb = header_bytes(headers)
        if not self._closed:
            self._own("ws_upgrade()")
        if self._closed or not self._sent(fn(self._s, self.id, hb, len(hb))):
            return False
        self._pending = False
        if handler is not None:
            self._ws = handler
        elif self._ws is None:
            self._ws = self._m._ws_handler_for(self)
        return True

    def ws_send(self, data: Any, opcode: int = _TEXT) -> int:
        """Send one message (str or bytes-like). Returns the bytes queued
        (the frame, as nanosrv counts them), 0 when the client had left."""
        fn = require("nsv_ws_send", "ws_send")
        data = to_bytes(data, "data")
        if self._closed:
            return 0
        self._own("ws_send()")
        return ws_frame_size(len(data)) if self._sent(fn(self._s, self.id, int(opcode), data, len(data))) else 0

    def ws_send_text(self, text: Any) -> int:
        """A text message from str (or UTF-8 bytes); bytes queued as ws_send."""
        return self.ws_send(text, _TEXT)

    def ws_send_binary(self, data: Any) -> int:
        """A binary message; bytes queued as ws_send."""
        return self.ws_send(data, _BINARY)

    def ws_close(self, code: int = 1000, reason: Any = "") -> bool:
        """Start the WebSocket close handshake with code and reason."""
        fn = require("nsv_ws_close", "ws_close")
        reason = to_bytes(reason, "reason")
        if self._closed:
            return False
        self._own("ws_close()")
        return self._sent(fn(self._s, self.id, code, reason, len(reason)))

    # ---- raw ----

    def send_bytes(self, data: Any) -> bool:
        """Write bytes as they are. On a raw TCP connection they go to the
        socket; on an HTTP connection with a request waiting they are the
        response, status line and headers included (checked and sent once
        complete: at its Content-Length, else at drain()); during a started
        response they are the next piece of the body; on a WebSocket they
        are one binary message (the library owns the framing). True, or
        False when the client had left."""
        data = to_bytes(data, "data")
        if self._closed:
            return False
        self._own("send_bytes()")
        if self._ws is not None:
            return self.ws_send(data, _BINARY) > 0
        if self._streaming:
            return self.send_chunk(data)
        if self._pending or self._raw is not None:
            return self._raw_http(data)
        return self._sent(lib.nsv_send(self._s, self.id, data, len(data)))

    def _raw_http(self, data):
        # nanosrv lets a handler write its response raw; the library keeps
        # HTTP framing to itself, so the bytes are parsed back into status,
        # header block and body and go through nsv_reply, which checks them.
        buf = self._raw = (self._raw or b"") + data
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > _RAW_HEAD_MAX:
                self._raw = None
                raise ValueError("send_bytes: no end of the response head in %d bytes" % len(buf))
            return True
        head, body = buf[:end + 2], buf[end + 4:]
        m = _STATUS_LINE.match(head)
        if m is None:
            self._raw = None
            raise ValueError("send_bytes: a response starts with \"HTTP/1.1 NNN reason\\r\\n\", not %r"
                             % head[:40])
        if _TRANSFER_ENCODING.search(head):
            self._raw = None
            raise ValueError("send_bytes: a raw response cannot use Transfer-Encoding; use start_chunked()")
        cl = _CONTENT_LENGTH.search(head)
        if cl is None:
            return True  # the body runs until drain()
        n = int(cl.group(1))
        if len(body) < n:
            return True
        self._raw = None
        if len(body) > n:
            raise ValueError("send_bytes: %d bytes past the Content-Length of the response" % (len(body) - n))
        return self.http_reply(int(m.group(1)), head[m.end():], body)

    def _flush_raw(self):
        buf, self._raw = self._raw, None
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            raise ValueError("send_bytes: drain() before the end of the response head")
        m = _STATUS_LINE.match(buf)
        hdrs = buf[m.end():end + 2]
        if not re.search(rb"(?im)^connection:", hdrs):
            hdrs += b"Connection: close\r\n"
        return self.http_reply(int(m.group(1)), hdrs, buf[end + 4:])

    def close(self) -> bool:
        """Close now, dropping output not yet sent (nanosrv's close; drain()
        closes once everything is sent)."""
        self._raw = None
        if self._closed:
            return False
        self._own("close()")
        self._closing = True
        return self._sent(_abort(self._s, self.id))

    def drain(self) -> bool:
        """Close once the queued output has been sent (a raw response
        written with send_bytes is completed first)."""
        if self._closed:
            return False
        self._own("drain()")
        if self._raw is not None:
            self._flush_raw()
        self._closing = True
        return self._sent(lib.nsv_close(self._s, self.id))

    # ---- state ----

    @property
    def closed(self) -> bool:
        """True once the connection closed (its CLOSE event, or NSV_ESTALE)."""
        return self._closed

    @property
    def is_websocket(self) -> bool:
        return self._ws is not None

    @property
    def is_listening(self) -> bool:
        return False  # a listener is a ConnectionRef (http_listen), never a Connection

    @property
    def is_client(self) -> bool:
        """True for a connection this side opened (connect)."""
        return self._client

    @property
    def is_accepted(self) -> bool:
        return not self._client

    @property
    def is_tls(self) -> bool:
        return self._tls

    @property
    def is_closing(self) -> bool:
        """True once close() or drain() was called, or the connection closed."""
        return self._closing or self._closed

    @property
    def send_queue_len(self) -> int:
        """Bytes queued for the socket and not yet written. On a sharded
        server, whose output is the workers' business, the polling thread
        cannot ask: there it is 0 while the connection is writable, else
        the high water mark it crossed."""
        if self._closed:
            return 0
        r = lib.nsv_conn_queued(self._s, self.id)
        if r >= 0:
            return r
        if r == ENOTSUP:
            return lib.nsv_get_int(self._s, lib.NSV_OPT_TCP_HIGH_WATER) if self._blocked else 0
        if r == ESTALE:
            self._closed = True
            return 0
        return check(r, self._s)

    def set_tag(self, tag: int) -> None:
        """Tag the connection (nsv_conn_set_tag)."""
        self._own("set_tag()")
        check(lib.nsv_conn_set_tag(self._ptr(), self.id, tag), self._s)

    def queued(self) -> int:
        """Bytes waiting to be sent."""
        return check(lib.nsv_conn_queued(self._ptr(), self.id), self._s)

    def __repr__(self) -> str:
        return "<Connection %#x%s>" % (self.id, " closed" if self._closed else "")


_NULL = ffi.NULL
