"""Connection: answers a request or talks WebSocket, by connection id.

Every method is one library call on the id. A reply or send to a client
that already left (the connection's CLOSE event was seen, or the library
answers NSV_ESTALE) does nothing and returns False; `closed` says so.
Programming errors still raise: replying twice (StateError), a bad status
or header (ValueError).
"""
import logging
import re

from ._ffi import ffi, lib
from .errors import ENOTSUP, ESTALE, check, error, require

log = logging.getLogger("nanosrv")
_reply = lib.nsv_reply
_TEXT, _BINARY = lib.NSV_WS_TEXT, lib.NSV_WS_BINARY
_abort = lib.nsv_abort
_STATUS_LINE = re.compile(rb"HTTP/1\.[01] ([1-9][0-9][0-9])(?: [^\r\n]*)?\r\n")
_CONTENT_LENGTH = re.compile(rb"(?im)^content-length:[ \t]*([0-9]+)[ \t]*\r\n")
_TRANSFER_ENCODING = re.compile(rb"(?im)^transfer-encoding:")
_RAW_HEAD_MAX = 65536


def ws_frame_size(n):
    """Bytes a server frame of n payload bytes takes (RFC 6455: no mask)."""
    return n + (2 if n < 126 else 4 if n < 65536 else 10)


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
                 "_hangup", "_gone_fns", "_body", "_hdrs", "_tls", "_client", "_closing", "_raw", "__weakref__")

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
        self._tls = False       # accepted on a TLS listener (or connected with tls://)
        self._client = False    # opened by this side (nsv_connect), not accepted
        self._closing = False   # close() or drain() was called
        self._raw = None        # bytes of a raw HTTP response being written with send_bytes

    def _ptr(self):
        if self._closed:
            raise error(ESTALE, "connection %#x has closed" % self.id)
        return self._s

    def _sent(self, r):
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

    def _after_send(self):
        # In an asyncio host output leaves on the next nsv_poll; ask for one
        # when the reply is made outside the event dispatch.
        k = self._m._kick
        if k is not None:
            k()

    # ---- HTTP ----

    def http_reply(self, status, headers="", body=b""):
        """Send a complete response. headers: "Name: value\\r\\n" lines, or a
        dict / (name, value) pairs. True when sent, False when the client
        had left (nothing to do)."""
        if self._closed:
            return False
        if type(headers) is not bytes:
            headers = header_bytes(headers)
        if type(body) is not bytes:
            body = to_bytes(body)
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

    def reply_start(self, status=200, headers=""):
        """Start a streamed response (chunked unless headers give a
        Content-Length); continue with send_chunk, finish with reply_end.
        False when the client had left."""
        if self._closed:
            return False
        headers = header_bytes(headers)
        h = self._take_headers()
        r = lib.nsv_reply_start(self._s, self.id, status, h + headers, len(h) + len(headers))
        if r < 0 and r != ESTALE:
            self._hdrs = h + self._hdrs
        if not self._sent(r):
            return False
        self._pending = False
        self._streaming = True
        return True

    def start_chunked(self, status=200, headers=""):
        """nanosrv's name: start a chunked response; write_chunk(data) for
        each piece, write_chunk(b"") ends it."""
        return self.reply_start(status, headers)

    def write_chunk(self, data):
        """One chunk of a started response; an empty one ends the stream."""
        data = to_bytes(data, "data")
        return self.send_chunk(data) if data else self.reply_end()

    def start_sse(self, headers=""):
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

    def sse_send(self, data, event=None, id=None, retry=None):
        """Send one event of a started stream: data (str or bytes; several
        lines become several data lines), event name, id, retry (ms). True
        when queued, False when the client had left. ValueError for CR/LF
        in event or id."""
        if self._closed:
            return False
        d, ev = to_bytes(data, "data"), None if event is None else to_bytes(event, "event")
        i = None if id is None else to_bytes(id, "id")
        r = lib.nsv_sse_send(self._s, self.id, ev or _NULL, len(ev or b""), _NULL if i is None else i,
                             len(i or b""), d, len(d), -1 if retry is None else int(retry))
        return self._sent(r)

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
        """One chunk of a started response (empty: nothing). True when
        queued, False when the client had left."""
        if self._closed:
            return False
        data = to_bytes(data, "data")
        return self._sent(lib.nsv_send_chunk(self._s, self.id, data, len(data)))

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

    async def wait_writable(self):
        """asyncio: wait until the queued output has drained below the low
        water mark (drain() is nanosrv's close-once-flushed)."""
        if self._blocked:
            if self._m._loop is None:
                raise RuntimeError("wait_writable() needs the asyncio host (nanosrv.aio); use on_drain(fn)")
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
        """End a streamed response. False when the client had left."""
        if self._closed:
            return False
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

    def ws_upgrade(self, msg=None, headers="", handler=None):
        """Answer the pending upgrade request with 101. WebSocket events of
        this connection then go to `handler(conn, event, data)` (default:
        the listener's WebSocket handler)."""
        fn = require("nsv_ws_upgrade", "ws_upgrade")
        headers = header_bytes(headers)
        if self._closed or not self._sent(fn(self._s, self.id, headers, len(headers))):
            return False
        self._pending = False
        if handler is not None:
            self._ws = handler
        elif self._ws is None:
            self._ws = self._m._ws_handler_for(self)
        return True

    def ws_send(self, data, opcode=_TEXT):
        """Send one message (str or bytes-like). Returns the bytes queued
        (the frame, as nanosrv counts them), 0 when the client had left."""
        fn = require("nsv_ws_send", "ws_send")
        data = to_bytes(data, "data")
        if self._closed:
            return 0
        return ws_frame_size(len(data)) if self._sent(fn(self._s, self.id, int(opcode), data, len(data))) else 0

    def ws_send_text(self, text):
        """A text message from str (or UTF-8 bytes); bytes queued as ws_send."""
        return self.ws_send(text, _TEXT)

    def ws_send_binary(self, data):
        return self.ws_send(data, _BINARY)

    def ws_close(self, code=1000, reason=""):
        fn = require("nsv_ws_close", "ws_close")
        reason = to_bytes(reason, "reason")
        if self._closed:
            return False
        return self._sent(fn(self._s, self.id, code, reason, len(reason)))

    # ---- raw ----

    def send_bytes(self, data):
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

    def close(self):
        """Close now, dropping output not yet sent (nanosrv's close; drain()
        closes once everything is sent)."""
        self._raw = None
        if self._closed:
            return False
        self._closing = True
        return self._sent(_abort(self._s, self.id))

    def drain(self):
        """Close once the queued output has been sent (a raw response
        written with send_bytes is completed first)."""
        if self._closed:
            return False
        if self._raw is not None:
            self._flush_raw()
        self._closing = True
        return self._sent(lib.nsv_close(self._s, self.id))

    # ---- state ----

    @property
    def closed(self):
        return self._closed

    @property
    def is_websocket(self):
        return self._ws is not None

    @property
    def is_listening(self):
        return False  # a listener is a ConnectionRef (http_listen), never a Connection

    @property
    def is_client(self):
        """True for a connection this side opened (connect)."""
        return self._client

    @property
    def is_accepted(self):
        return not self._client

    @property
    def is_tls(self):
        return self._tls

    @property
    def is_closing(self):
        """True once close() or drain() was called, or the connection closed."""
        return self._closing or self._closed

    @property
    def send_queue_len(self):
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

    def set_tag(self, tag):
        check(lib.nsv_conn_set_tag(self._ptr(), self.id, tag), self._s)

    def queued(self):
        """Bytes waiting to be sent."""
        return check(lib.nsv_conn_queued(self._ptr(), self.id), self._s)

    def __repr__(self):
        return "<Connection %#x%s>" % (self.id, " closed" if self._closed else "")


_NULL = ffi.NULL
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def header_bytes(headers):
    """A "Name: value\\r\\n" block from str / bytes (checked by the library
    when sent) or a dict / (name, value) pairs, checked here: names must be
    HTTP tokens and values free of CR, LF, NUL and other control bytes
    (HTAB allowed), else ValueError before anything is sent."""
    t = type(headers)
    if t is bytes:
        return headers
    if t is str or headers is None or isinstance(headers, (bytearray, memoryview)):
        return to_bytes(headers, "headers")
    items = headers.items() if isinstance(headers, dict) else headers
    out = []
    try:
        pairs = [(k, v) for k, v in items]
    except (TypeError, ValueError):
        raise TypeError("headers must be str, bytes, a dict or (name, value) pairs") from None
    for k, v in pairs:
        k = k.decode("latin-1") if isinstance(k, bytes) else k
        v = v.decode("latin-1") if isinstance(v, bytes) else str(v)
        if not isinstance(k, str) or not _TOKEN.match(k):
            raise ValueError("header name %r is not an HTTP token" % (k,))
        if _BAD_VALUE.search(v):
            raise ValueError("header %s: the value has a control character (CR, LF, NUL, ...): %r" % (k, v))
        out.append("%s: %s\r\n" % (k, v))
    return "".join(out).encode("utf-8")
