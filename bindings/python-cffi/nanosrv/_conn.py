"""Connection: answers a request or talks WebSocket, by connection id.

Every method is one library call on the id. A closed connection (its CLOSE
event was seen) raises StaleError without calling into C; the library
itself rejects stale ids and double replies, which surface as StaleError
and StateError.
"""
import logging

from ._ffi import lib
from .errors import ESTALE, check, error, require
from .headers import header_bytes

log = logging.getLogger("nanosrv")
_reply = lib.nsv_reply
_TEXT, _BINARY = lib.NSV_WS_TEXT, lib.NSV_WS_BINARY


def to_bytes(x, what="body"):
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
    __slots__ = ("_m", "_s", "id", "_pending", "_closed", "_ws", "_streaming", "_blocked", "_drained",
                 "_hangup", "_gone_fns", "_body", "_hdrs", "__weakref__")

    def __init__(self, manager, conn_id):
        self._m = manager
        self._s = manager._srv
        self.id = conn_id
        self._pending = False   # a request waits for its reply
        self._closed = False
        self._ws = None         # handler of WebSocket events, once upgraded
        self._streaming = False
        self._blocked = False   # a streamed reply is past the high water mark
        self._drained = None    # callbacks and futures waiting for it to drain
        self._hangup = False    # the client ended its side (HANGUP) or the connection closed
        self._gone_fns = None   # callbacks and futures waiting for that
        self._body = None       # BodyStream of the request whose body is streaming
        self._hdrs = b""        # header lines for the next reply (set_cookie)

    def _ptr(self):
        if self._closed:
            raise error(ESTALE, "connection %#x has closed" % self.id)
        return self._s

    def _after_send(self):
        # In an asyncio host output leaves on the next nsv_poll; ask for one
        # when the reply is made outside the event dispatch.
        k = self._m._kick
        if k is not None:
            k()

    # ---- HTTP ----

    def http_reply(self, status, headers="", body=b""):
        """Send a complete response. headers: "Name: value\\r\\n" lines, a
        dict or (name, value) pairs (checked: ValueError). Returns True, or
        False when the client has left (a late reply is not an error)."""
        if type(headers) is not bytes:
            headers = header_bytes(headers)
        if type(body) is not bytes:
            body = to_bytes(body)
        if self._closed:
            return False
        if self._hdrs:
            headers = self._take_headers() + headers
        r = _reply(self._s, self.id, status, headers, len(headers), body, len(body))
        if r:
            if r == ESTALE:
                self._closed = True
                return False
            check(r, self._s)
        self._pending = False
        if self._m._kick is not None:
            self._after_send()
        return True

    reply = http_reply

    def reply_start(self, status, headers=""):
        """Start a chunked response; continue with send_chunk, finish with reply_end."""
        headers = self._take_headers() + header_bytes(headers)
        check(lib.nsv_reply_start(self._ptr(), self.id, status, headers, len(headers)), self._s)
        self._pending = False
        self._streaming = True
        self._after_send()

    def _take_headers(self):
        h, self._hdrs = self._hdrs, b""
        return h

    def set_cookie(self, name, value="", *, path=None, domain=None, max_age=None, expires=None, secure=False,
                   httponly=False, samesite=None, partitioned=False):
        """Add a Set-Cookie line to the next reply of this connection
        (http_reply, a returned value, reply_start, sse_start, send_file).
        Validated by the library: ValueError with its reason. Arguments as
        nanosrv.set_cookie_header."""
        from .forms import set_cookie_header
        line = set_cookie_header(name, value, path=path, domain=domain, max_age=max_age, expires=expires,
                                 secure=secure, httponly=httponly, samesite=samesite, partitioned=partitioned)
        self._hdrs += b"Set-Cookie: " + line.encode("latin-1") + b"\r\n"

    def delete_cookie(self, name, *, path=None, domain=None, secure=False, samesite=None):
        """Tell the client to drop a cookie (empty value, Max-Age=0)."""
        self.set_cookie(name, "", path=path, domain=domain, max_age=0, secure=secure, samesite=samesite)

    def sse_start(self, headers=""):
        """Answer the pending request with a server-sent event stream
        (nsv_sse_start); returns a nanosrv.sse.EventStream."""
        from .sse import EventStream
        headers = self._take_headers() + header_bytes(headers)
        check(lib.nsv_sse_start(self._ptr(), self.id, headers, len(headers)), self._s)
        self._pending = False
        self._streaming = True
        self._after_send()
        return EventStream(self)

    def send_file(self, msg, path, *, root=None, status=0, headers="", **flags):
        """Answer the pending request `msg` with a file (nsv_reply_file):
        with root, path is a URL path resolved under root as the static
        server does (no escape from root); without, a file system path.
        status 0 gives 200/206/304/416 from the request's conditional and
        Range headers. Returns False (nothing sent) when there is no such
        file. flags by name as Manager.static."""
        from .static import reply_file
        hdrs = self._take_headers()
        try:
            sent = reply_file(self, msg, path, root, status, hdrs + header_bytes(headers), flags)
        except BaseException:
            self._hdrs = hdrs + self._hdrs
            raise
        if not sent:
            self._hdrs = hdrs + self._hdrs  # still owed to whatever answer comes instead
        return sent

    def send_chunk(self, data):
        """One chunk of a streamed reply; False (nothing sent) when the
        client has left."""
        data = to_bytes(data, "data")
        if self._closed:
            return False
        if self._late(lib.nsv_send_chunk(self._s, self.id, data, len(data))):
            return False
        self._after_send()
        return True

    def _late(self, r):
        """True when r says the connection is gone (a late call: no error)."""
        if r == ESTALE:
            self._closed = True
            return True
        if r < 0:
            check(r, self._s)
        return False

    @property
    def writable(self):
        """False while a streamed reply's queued output is past the high
        water mark (NSV_OPT_TCP_HIGH_WATER); send_chunk more once it drained."""
        return not self._blocked

    def on_drain(self, fn):
        """Call fn() once the queued output has drained (at once if writable)."""
        if not self._blocked:
            fn()
        else:
            (self._drained or self._init_drained()).append(fn)

    async def drain(self):
        """asyncio: wait until the queued output has drained."""
        if self._blocked:
            if self._m._loop is None:
                raise RuntimeError("drain() needs the asyncio host (nanosrv.aio); use on_drain(fn)")
            fut = self._m._loop.create_future()
            (self._drained or self._init_drained()).append(lambda: fut.done() or fut.set_result(None))
            await fut

    def _init_drained(self):
        self._drained = []
        return self._drained

    def _set_writable(self, ok):
        self._blocked = not ok
        if ok and self._drained:
            waiting, self._drained = self._drained, None
            for fn in waiting:
                try:
                    fn()
                except Exception:  # one failing callback must not cost the batch
                    log.exception("drain callback failed for connection %#x", self.id)

    def reply_end(self):
        check(lib.nsv_reply_end(self._ptr(), self.id), self._s)
        self._streaming = False
        self._after_send()

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

    def ws_upgrade(self, msg=None, headers="", handler=None):
        """Answer the pending upgrade request with 101. WebSocket events of
        this connection then go to `handler(conn, event, data)` (default:
        the listener's WebSocket handler)."""
        fn = require("nsv_ws_upgrade", "ws_upgrade")
        headers = header_bytes(headers)
        check(fn(self._ptr(), self.id, headers, len(headers)), self._s)
        self._pending = False
        if handler is not None:
            self._ws = handler
        elif self._ws is None:
            self._ws = self._m._ws_handler_for(self)
        self._after_send()

    def ws_send(self, data, opcode=_TEXT):
        fn = require("nsv_ws_send", "ws_send")
        data = to_bytes(data, "data")
        if self._closed:
            return False
        if self._late(fn(self._s, self.id, opcode, data, len(data))):
            return False
        self._after_send()
        return True

    def ws_send_text(self, text):
        if not isinstance(text, str):
            raise TypeError("ws_send_text needs str, not %s" % type(text).__name__)
        return self.ws_send(text, _TEXT)

    def ws_send_binary(self, data):
        return self.ws_send(data, _BINARY)

    def ws_close(self, code=1000, reason=""):
        fn = require("nsv_ws_close", "ws_close")
        reason = to_bytes(reason, "reason")
        check(fn(self._ptr(), self.id, code, reason, len(reason)), self._s)
        self._after_send()

    # ---- raw ----

    def send_bytes(self, data):
        """Send bytes on the connection: a binary message on a WebSocket, a
        chunk during a streamed response."""
        if self._ws is not None:
            return self.ws_send(data, _BINARY)
        if self._closed:
            return False
        if self._streaming:
            return self.send_chunk(data)
        raise error(lib.NSV_ENOTSUP, "send_bytes needs a WebSocket or a started chunked response")

    def close(self):
        """Close after the queued output is sent."""
        if self._closed:
            return False
        if self._late(lib.nsv_close(self._s, self.id)):
            return False
        self._after_send()
        return True

    # ---- state ----

    @property
    def closed(self):
        return self._closed

    @property
    def is_websocket(self):
        return self._ws is not None

    def set_tag(self, tag):
        check(lib.nsv_conn_set_tag(self._ptr(), self.id, tag), self._s)

    def queued(self):
        """Bytes waiting to be sent."""
        return check(lib.nsv_conn_queued(self._ptr(), self.id), self._s)

    def __repr__(self):
        return "<Connection %#x%s>" % (self.id, " closed" if self._closed else "")
