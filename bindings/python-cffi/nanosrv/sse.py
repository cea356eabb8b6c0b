"""Server-sent events (EventSource): conn.sse_start() returns an EventStream.

    @srv.get("/events")
    async def events(conn, msg):
        async with conn.sse_start() as es:          # ends the stream on exit
            for i in range(10):
                await es.asend(str(i), event="tick", id=str(i))  # waits while the client is behind
                await asyncio.sleep(1)

In a poll()/run() host send() queues at once and returns whether the
output is still under the high water mark; on_drain(fn) says when to go
on. A client that leaves stops the stream: send() and asend() raise
nanosrv.Disconnected, and `closed` turns true.
"""
import asyncio

from ._conn import to_bytes
from ._ffi import ffi, lib
from .errors import Disconnected, check, error

_ECLOSED = lib.NSV_ECLOSED


def _opt(x, what):
    return None if x is None else to_bytes(x, what)


class EventStream:
    """One text/event-stream response."""
    __slots__ = ("_c", "_ended")

    def __init__(self, conn):
        self._c = conn
        self._ended = False

    @property
    def conn(self):
        return self._c

    @property
    def closed(self):
        """True once the client left (or the connection closed) or end() ran."""
        c = self._c
        return self._ended or c._closed or c._hangup

    @property
    def writable(self):
        """False while the queued output is past the high water mark."""
        return self._c.writable

    def _check(self):
        c = self._c
        if self._ended:
            raise error(lib.NSV_ESTATE, "the event stream has ended")
        if c._closed or c._hangup:
            raise Disconnected(_ECLOSED, "the client has left the event stream")

    def send(self, data=None, *, event=None, id=None, retry=None):
        """Send one event: data (str or bytes; line breaks become several
        data lines, which the client joins with LF), event name, id ("" resets
        the client's last event id), retry (ms). Returns `writable`.
        ValueError for CR/LF in event or id; nanosrv.Error NSV_EAGAIN when the
        output is at max_output (nothing sent: wait for a drain)."""
        self._check()
        c = self._c
        d, ev, i = _opt(data, "data"), _opt(event, "event"), _opt(id, "id")
        if d is None and ev is None and i is None and retry is None:
            raise ValueError("an event needs data, event, id or retry")
        r = lib.nsv_sse_send(c._s, c.id, ev or ffi.NULL, len(ev or b""), ffi.NULL if i is None else i,
                             len(i or b""), ffi.NULL if d is None else d, len(d or b""),
                             -1 if retry is None else int(retry))
        if r == lib.NSV_EINVAL:
            detail = (ffi.string(lib.nsv_last_error_detail(c._s)) or ffi.string(lib.nsv_last_error_detail(ffi.NULL)))
            detail = detail.decode("utf-8", "replace")
            raise ValueError("server-sent event: " + detail)
        check(r, c._s)
        c._after_send()
        return c.writable

    def comment(self, text=""):
        """A comment line, e.g. a keepalive that stops proxies from timing out."""
        self._check()
        t = to_bytes(text, "text")
        cap = 4 * len(t) + 8
        buf = ffi.new("char[]", cap)
        n = check(lib.nsv_sse_comment(t, len(t), buf, cap))
        if n > cap:  # cannot happen by the bound above; never read past buf
            raise RuntimeError("nsv_sse_comment needs %d bytes" % n)
        self._c.send_chunk(ffi.buffer(buf, n)[:])
        return self._c.writable

    def on_drain(self, fn):
        """Call fn() once the queued output has drained (at once if writable)."""
        self._c.on_drain(fn)

    async def drain(self):
        """asyncio: wait while the client is behind; Disconnected if it leaves."""
        c = self._c
        if not c._blocked:
            # Queued output leaves, and the water marks are learnt, only when
            # the host polls: give it that turn, or a writer that never has
            # to wait would fill the queue up to max_output without pause.
            await asyncio.sleep(0)
        while c._blocked and not (c._closed or c._hangup):
            loop = c._m._loop
            if loop is None:
                raise RuntimeError("EventStream.drain() needs the asyncio host (nanosrv.aio)")
            fut = loop.create_future()

            def wake():
                if not fut.done():
                    fut.set_result(None)
            c.on_drain(wake)
            c._on_gone(wake)
            await fut
        self._check()

    async def asend(self, data=None, *, event=None, id=None, retry=None):
        """asyncio: wait until the client has taken what was queued, then send."""
        await self.drain()
        return self.send(data, event=event, id=id, retry=retry)

    async def acomment(self, text=""):
        await self.drain()
        return self.comment(text)

    def end(self):
        """Finish the stream (a client that left is not an error here)."""
        if self._ended:
            return
        self._ended = True
        c = self._c
        if not c._closed:
            try:
                c.reply_end()
            except Exception:
                if not c._hangup:
                    raise

    async def wait_closed(self):
        """asyncio: return once the client has left."""
        c = self._c
        if c._closed or c._hangup:
            return
        fut = c._m._loop.create_future()
        c._on_gone(lambda: fut.done() or fut.set_result(None))
        await fut

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.end()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self.end()

    def __repr__(self):
        return "<EventStream conn %#x%s>" % (self._c.id, " closed" if self.closed else "")
