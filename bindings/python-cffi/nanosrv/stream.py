"""Streamed request bodies: msg.stream, an iterator of body chunks.

Routes registered with stream=True (NSV_ROUTE_STREAM_BODY), or every
request once the "stream_body" option is 1, reach their handler as soon
as the head is parsed; the body follows in BODY events, which the
Manager feeds into the connection's BodyStream:

    @srv.post("/upload", stream=True)
    async def upload(conn, msg):            # asyncio host
        async for chunk in msg.stream:
            ...

    @srv.post("/upload", stream=True)
    def upload(conn, msg):                  # poll()/run() host
        for chunk in msg.stream:
            ...

Backpressure: chunks the consumer has not taken are buffered up to
`high` bytes (Manager.body_buffer, 1 MiB by default); past it the stream
pauses reading (nsv_pause_read), so TCP slows the client, and it resumes
once the consumer has taken the buffer down to `high // 4`. Memory per
upload stays bounded whatever the body size.

A synchronous consumer cannot wait for the next chunk in the polling
thread without polling: the stream polls the Manager itself (nested
poll), so other connections keep being served while it waits. For that
the handler of a streamed request is called after the rest of its event
batch, never in the middle of one. In an asyncio host use `async for`.

Errors: the client leaving mid-body raises Disconnected; a body over
max_body BodyError(NSV_ETOOBIG) (the library answered 413 already), the
request deadline BodyError(NSV_ETIMEDOUT), malformed chunking
BodyError(NSV_EPARSE).
"""
import collections
import logging

from ._ffi import ffi, lib
from .errors import BodyError, Disconnected, Error

log = logging.getLogger("nanosrv")

_ECLOSED, _ESTOPPED = lib.NSV_ECLOSED, lib.NSV_ESTOPPED
_PUMP_MS = 250  # nested poll wait; bounds how late a stop() is noticed


class BodyStream:
    """The body of one request, as chunks (bytes) in order."""
    __slots__ = ("_c", "_chunks", "_size", "_eof", "_exc", "_paused", "_waiter", "high", "low", "received",
                 "peak", "pauses")

    def __init__(self, conn, high=1 << 20):
        self._c = conn
        self._chunks = collections.deque()
        self._size = 0          # bytes buffered, not yet taken
        self._eof = False       # the last piece arrived
        self._exc = None        # why the body cannot complete
        self._paused = False
        self._waiter = None     # asyncio future of a consumer waiting for data
        self.high = high
        self.low = high // 4
        self.received = 0       # body bytes that arrived so far
        self.peak = 0           # most bytes ever buffered (tests and tuning)
        self.pauses = 0         # times reading was paused

    @classmethod
    def complete(cls, body):
        """A stream over a body that arrived whole."""
        s = cls(None)
        if body:
            s._chunks.append(body)
            s._size = s.received = s.peak = len(body)
        s._eof = True
        return s

    # ---- fed by the Manager ----

    def _feed(self, data, eof):
        if data:
            self._chunks.append(data)
            n = len(data)
            self._size += n
            self.received += n
            if self._size > self.peak:
                self.peak = self._size
        if eof:
            self._eof = True
        elif self._size >= self.high and not self._paused:
            self._pause(1)
        self._wake()

    def _fail(self, exc):
        if not self._eof and self._exc is None:
            self._exc = exc
            self._wake()

    def _wake(self):
        w = self._waiter
        if w is not None:
            self._waiter = None
            if not w.done():
                w.set_result(None)

    def _pause(self, on):
        c = self._c
        if c is None or c._closed:
            return
        r = lib.nsv_pause_read(c._s, c.id, on)
        if r < 0:
            # The body may have ended with the batch that paused it; the
            # request is then no longer reading, which is what we wanted.
            log.debug("nsv_pause_read(%d) for %#x: %s", on, c.id, ffi.string(lib.nsv_errname(r)).decode())
        self._paused = bool(on)
        if on:
            self.pauses += 1
        else:
            c._after_send()  # an asyncio host polls soon, so reading starts again

    def _took(self, n):
        self._size -= n
        if self._paused and self._size <= self.low:
            self._pause(0)

    def _take(self, n):
        """Up to n bytes (n < 0: the first chunk) of the buffer."""
        chunks = self._chunks
        first = chunks[0]
        if n < 0 or n >= len(first):
            chunks.popleft()
            self._took(len(first))
            return first
        chunks[0] = first[n:]
        self._took(n)
        return first[:n]

    # ---- state ----

    @property
    def done(self):
        """True once every chunk arrived (they may still be buffered)."""
        return self._eof

    @property
    def buffered(self):
        return self._size

    @property
    def paused(self):
        return self._paused

    @property
    def error(self):
        return self._exc

    # ---- synchronous consumer (poll()/run() host) ----

    def _pump(self):
        c = self._c
        m = c._m
        if m._loop is not None:
            raise RuntimeError("in an asyncio host read the body with `async for chunk in msg.stream` "
                               "or `await msg.stream.aread()`")
        if m.poll(_PUMP_MS) < 0 and not self._chunks and not self._eof:
            self._fail(BodyError(_ESTOPPED, "the server stopped before the body ended"))

    def _ready(self):
        """True when a chunk is buffered; False at the end; raises the error."""
        while not self._chunks:
            if self._eof:
                return False
            if self._exc is not None:
                raise self._exc
            self._pump()
        return True

    def __iter__(self):
        return self

    def __next__(self):
        if not self._ready():
            raise StopIteration
        return self._take(-1)

    def read(self, n=-1):
        """Up to n bytes (b"" at the end); n < 0 reads the rest of the body."""
        if n < 0:
            return b"".join(self)
        if n == 0 or not self._ready():
            return b""
        return self._take(n)

    # ---- asyncio consumer ----

    async def _aready(self):
        while not self._chunks:
            if self._eof:
                return False
            if self._exc is not None:
                raise self._exc
            loop = self._c._m._loop
            if loop is None:
                raise RuntimeError("`async for` over a body needs the asyncio host (nanosrv.aio)")
            self._waiter = loop.create_future()
            await self._waiter
        return True

    def __aiter__(self):
        return self

    async def __anext__(self):
        if not await self._aready():
            raise StopAsyncIteration
        return self._take(-1)

    async def aread(self, n=-1):
        """asyncio: up to n bytes (b"" at the end); n < 0 reads the rest."""
        if n < 0:
            return b"".join([c async for c in self])
        if n == 0 or not await self._aready():
            return b""
        return self._take(n)

    def __repr__(self):
        return "<BodyStream %d bytes received%s%s>" % (self.received, ", done" if self._eof else "",
                                                      ", paused" if self._paused else "")


def body_error(code, text):
    return Disconnected(code, text) if code == _ECLOSED else BodyError(code, text)


__all__ = ["BodyStream", "BodyError", "Disconnected", "Error"]
