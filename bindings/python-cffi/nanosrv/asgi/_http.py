"""One HTTP request of an ASGI app: its receive(), send() and task.

The fast path is a response whose body comes in one
http.response.body message: status, header block and body leave in one
nsv_reply. A response with more_body streams (nsv_reply_start,
nsv_send_chunk, nsv_reply_end) and send() waits while the connection's
queued output is past the library's high water mark, so a slow client
costs bounded memory.
"""
import asyncio
import logging

from .._ffi import ffi, lib
from ..errors import BodyError, check
from ._scope import header_block

log = logging.getLogger("nanosrv.asgi")
access_log = logging.getLogger("nanosrv.access")

_reply, _reply_start, _send_chunk, _reply_end = lib.nsv_reply, lib.nsv_reply_start, lib.nsv_send_chunk, lib.nsv_reply_end
_queued, _close, _abort = lib.nsv_conn_queued, lib.nsv_close, lib.nsv_abort
_continue = getattr(lib, "nsv_continue", None)
_ESTALE, _EAGAIN = lib.NSV_ESTALE, lib.NSV_EAGAIN
_DISCONNECT = {"type": "http.disconnect"}
_EMPTY = {"type": "http.request", "body": b"", "more_body": False}
_500_HDR = b"Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
_500_BODY = b"Internal Server Error"
_SLICE = 1 << 20   # pieces of a larger body chunk, so one send never meets NSV_OPT_MAX_OUTPUT
_CancelledError = asyncio.CancelledError


class ClientDisconnected(OSError):
    """Raised by send() when the client left while it waited to write."""


class HttpCycle:
    """Request state; `receive` and `send` are handed to the app."""
    __slots__ = ("srv", "conn", "scope", "body", "stream", "status", "headers", "started", "sent", "streaming",
                 "complete", "task", "timer", "gone_seen", "waiting", "expect")

    def __init__(self, srv, conn, scope, body, stream):
        self.srv = srv
        self.conn = conn
        self.scope = scope
        self.body = body        # bytes of a whole body, None once received
        self.stream = stream    # BodyStream of a streamed body, or None
        self.status = 0
        self.headers = b""
        self.started = False    # http.response.start seen
        self.sent = False       # something went to the library
        self.streaming = False
        self.complete = False
        self.task = None
        self.timer = None
        self.gone_seen = False  # the app was given http.disconnect
        self.waiting = False    # the app waits in send() for the client to read
        self.expect = False     # "Expect: 100-continue" not yet answered (sent at the first receive)

    # ---- the app's task ----

    async def run(self, app):
        try:
            await app(self.scope, self.receive, self.send)
        except _CancelledError:
            if not self.complete and not self.conn._closed:
                self._abort("the request task was cancelled before its response ended")
            raise
        except BaseException as exc:
            c = self.conn
            if isinstance(exc, ClientDisconnected):
                log.debug("ASGI app ended after the client left: %r", exc)
                if not self.complete:
                    self._abort(None)
            elif (c._closed or c._hangup) and not self.complete:
                # uvicorn's rule: logged, but no 500 for a client that left
                log.exception("Exception in ASGI application (%s %s)", self.scope["method"], self.scope["path"])
                self._abort(None)
            else:
                log.exception("Exception in ASGI application (%s %s)", self.scope["method"], self.scope["path"])
                if not self.sent:
                    self._fail_500()
                elif not self.complete:
                    self._abort("the app raised during its response")
            if not isinstance(exc, Exception):
                raise
        else:
            c = self.conn
            if not self.complete and (c._closed or c._hangup):
                # The client left (or ended its side) and the app stopped:
                # nothing to report, the connection closes after its output.
                log.debug("ASGI app returned after the client left (%s %s)", self.scope["method"],
                          self.scope["path"])
                self._abort(None)
            elif not self.complete:
                if not self.sent:
                    log.error("ASGI callable returned without %s response (%s %s)",
                              "completing its" if self.started else "starting a", self.scope["method"],
                              self.scope["path"])
                    self._fail_500()
                else:
                    log.error("ASGI callable returned without completing its response (%s %s)",
                              self.scope["method"], self.scope["path"])
                    self._abort("the response was not completed")
        finally:
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            self.srv.tasks.discard(self.task)

    def _fail_500(self):
        self.status = 500
        self._done()
        c = self.conn
        r = _reply(c._s, c.id, 500, _500_HDR, len(_500_HDR), _500_BODY, len(_500_BODY))
        if r < 0 and r != _ESTALE:
            log.debug("cannot send the 500 reply: %d", r)
        self.conn._after_send()

    def _abort(self, why):
        """A response that cannot complete: close the connection once what
        was sent is out, so the client sees a short body, never a desync.
        why: the error record's text (None: the client left, no record)."""
        if why is not None:
            log.error("closing connection %#x: %s (%s %s)", self.conn.id, why, self.scope["method"],
                      self.scope["path"])
        self._done()
        c = self.conn
        if not c._closed:
            c._closing = True
            _close(c._s, c.id)
            self.conn._after_send()

    def on_timeout(self):
        """response_timeout passed without a response start: 500, and the
        app's task is cancelled."""
        self.timer = None
        if self.sent or self.complete or self.conn._closed:
            return
        log.error("ASGI app gave no response within %gs (%s %s): 500", self.srv.response_timeout,
                  self.scope["method"], self.scope["path"])
        self._fail_500()
        if self.task is not None:
            self.task.cancel()

    def _done(self):
        self.complete = True
        srv = self.srv
        if srv.access_log:
            srv.log_access(self.scope, self.status)
        if srv.count_requests:
            srv.request_done()

    # ---- receive ----

    async def receive(self):
        """http.request messages with the body (more_body until its end),
        then http.disconnect once the client left or the response is complete."""
        body = self.body
        if body is not None and not self.complete:
            self.body = None
            if not body:
                return _EMPTY
            return {"type": "http.request", "body": body, "more_body": False}
        st = self.stream
        if st is not None and not self.complete:
            if self.expect:
                # The client waits for "100 Continue" before it sends the
                # body: the app asks for the body now, so invite it
                # (NSV_OPT_EXPECT_MANUAL); an app that answers first never does.
                self.expect = False
                c = self.conn
                if not c._closed:
                    _continue(c._s, c.id)
            try:
                if not st._chunks and not st._eof:
                    await st._aready()
            except BodyError:
                # The client left mid-body, or the library refused the body
                # (413, 408, 400: it answered already).
                self.stream = None
                if not self.sent:
                    self.complete = True
                return self._disconnect()
            chunks = st._chunks
            if len(chunks) == 1:
                data = chunks.popleft()
            else:
                data = b"".join(chunks)
                chunks.clear()
            st._took(len(data))
            more = not (st._eof and not st._chunks)
            if not more:
                self.stream = None
            return {"type": "http.request", "body": data, "more_body": more}
        return await self._wait_gone()

    def _disconnect(self):
        self.gone_seen = True
        return _DISCONNECT

    async def _wait_gone(self):
        c = self.conn
        if not self.complete and not (c._hangup or c._closed):
            fut = self.srv.loop.create_future()
            c._on_gone(lambda: fut.done() or fut.set_result(None))
            await fut
        return self._disconnect()

    # ---- send ----

    async def send(self, message):
        t = message["type"]
        if t == "http.response.body":
            if self.streaming or not self.started or self.complete or message.get("more_body", False):
                return await self._stream(message)
            # The fast path: the whole response in one nsv_reply.
            body = message.get("body", b"")
            if type(body) is not bytes:
                body = _bytes(body)
            c = self.conn
            h = self.headers
            r = _reply(c._s, c.id, self.status, h, len(h), body, len(body))
            if r < 0:
                if r != _ESTALE:
                    check(r, c._s)  # nothing went out: the app's error becomes a 500
                c._closed = True
            self.sent = self.complete = True
            srv = self.srv
            if srv.access_log:
                srv.log_access(self.scope, self.status)
            if srv.count_requests:
                srv.request_done()
            k = c._m._kick
            if k is not None:
                k()
            return
        if t == "http.response.start":
            if self.started:
                raise RuntimeError("ASGI: 'http.response.start' sent twice")
            status = message["status"]
            if type(status) is not int:
                raise TypeError("ASGI: http.response.start 'status' must be an int, not %s"
                                % type(status).__name__)
            if not 100 <= status <= 999 or status == 101:
                raise ValueError("ASGI: http.response.start 'status' %d is not a final HTTP status (200..999)"
                                 % status)
            headers = message.get("headers")
            if headers:
                self.headers = header_block(headers, "http.response.start")
            self.status = status
            self.started = True
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            return
        if t == "http.response.trailers":
            return  # trailers are not sent (documented); the body ends without them
        if t == "http.response.pathsend":
            return await self._pathsend(message)
        raise RuntimeError("ASGI: unexpected message type %r for an http scope" % (t,))

    async def _stream(self, message):
        """http.response.body past the fast path: a streamed body, or misuse."""
        if not self.started:
            raise RuntimeError("ASGI: 'http.response.body' before 'http.response.start'")
        if self.complete:
            if self.conn._closed:
                return
            raise RuntimeError("ASGI: 'http.response.body' after the response completed")
        body = message.get("body", b"")
        if type(body) is not bytes:
            body = _bytes(body)
        more = message.get("more_body", False)
        c = self.conn
        if not self.streaming:
            h = self.headers
            r = _reply_start(c._s, c.id, self.status, h, len(h))
            if r < 0:
                if r != _ESTALE:
                    check(r, c._s)  # nothing went out: the app's error becomes a 500
                c._closed = True
                self.sent = self.streaming = True
                self._done()
                return
            self.sent = self.streaming = True
        if c._closed:
            self._done()
            return
        if body:
            await self._chunk(c, body)
        if not more:
            self._done()
            r = _reply_end(c._s, c.id)
            if r < 0 and r != _ESTALE:
                # A Content-Length of the app's that the body fell short of:
                # the library closes the connection after the output.
                log.error("response of %s %s ended short: %s", self.scope["method"], self.scope["path"],
                          _detail(r, c._s))
            c._after_send()

    async def _chunk(self, c, body):
        s, cid, srv = c._s, c.id, self.srv
        n = len(body)
        if n > _SLICE:
            mv = memoryview(body)
            for i in range(0, n, _SLICE):
                await self._chunk(c, ffi.from_buffer(mv[i:i + _SLICE]))
            return
        r = _send_chunk(s, cid, body, n)
        if r < 0:
            if r == _ESTALE:
                c._closed = True
                return
            if r != _EAGAIN:
                self._abort("the library refused a chunk: %s" % _detail(r, s))
                check(r, s)
            # Over NSV_OPT_MAX_OUTPUT: wait for the drain and try once more.
            await self._wait_writable(c, True)
            r = _send_chunk(s, cid, body, n)
            if r < 0:
                if r == _ESTALE:
                    c._closed = True
                    return
                self._abort("the library refused a chunk: %s" % _detail(r, s))
                check(r, s)
        c._after_send()
        if c._blocked or _queued(s, cid) >= srv.high_water:
            await self._wait_writable(c, False)

    async def _wait_writable(self, c, force):
        # The library emits TCP_WRITABLE code 0 when the queue crosses the
        # high water mark and code 1 once it is down to the low one; the
        # first may not have been polled yet, so mark it here.
        c._blocked = True
        self.waiting = True
        try:
            await c.wait_writable()
        finally:
            self.waiting = False
        if c._closed:
            raise ClientDisconnected("the client left while the response was being sent")

    async def _pathsend(self, message):
        if not self.started or self.sent or self.complete:
            raise RuntimeError("ASGI: 'http.response.pathsend' must follow 'http.response.start' alone")
        path = message.get("path")
        if not isinstance(path, str) or not path.startswith("/"):
            raise ValueError("ASGI: http.response.pathsend 'path' must be an absolute path (str), not %r"
                             % (path,))
        c = self.conn
        p = path.encode("utf-8", "surrogateescape")
        h = self.headers
        self.sent = True
        r = lib.nsv_reply_file(c._s, c.id, self.status, b"", 0, p, len(p), b"", 0, h, len(h), 0)
        if r == lib.NSV_ENOTFOUND:
            self.sent = False
            raise FileNotFoundError("ASGI: http.response.pathsend: no such file %r" % path)
        if r < 0 and r != _ESTALE:
            check(r, c._s)
        self._done()
        self.conn._after_send()


def _bytes(body):
    if isinstance(body, (bytearray, memoryview)):
        return bytes(body)
    raise TypeError("ASGI: http.response.body 'body' must be bytes, not %s" % type(body).__name__)


def _detail(r, s):
    return "%s (%s)" % (ffi.string(lib.nsv_errname(r)).decode(),
                        ffi.string(lib.nsv_last_error_detail(s)).decode("utf-8", "replace"))
