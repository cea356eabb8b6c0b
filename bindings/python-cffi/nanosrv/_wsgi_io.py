"""nanosrv.wsgi's request-side objects: wsgi.input, wsgi.errors and
wsgi.file_wrapper.

wsgi.input reads from a "source": a callable returning the next piece of
the body (bytes) or b"" at its end. A body that arrived whole is one
piece; a streamed body (NSV_EVF_STREAM_BODY) is either the library's
BodyStream (the app runs on the polling thread, which polls for more) or a
ThreadedBody, fed by the polling thread and read by a worker thread.
"""
import logging
import threading
import time
from typing import Any, Callable, Iterator, List, Optional

from ._ffi import lib
from .errors import BodyError
from .stream import BodyStream

__all__ = ["Input", "ThreadedBody", "ErrorStream", "FileWrapper"]

_ESTOPPED, _ETIMEDOUT = lib.NSV_ESTOPPED, lib.NSV_ETIMEDOUT
_SLICE_S = 0.25  # a waiting worker re-checks that the server still runs this often


def _end():
    return b""


class Input:
    """wsgi.input: read(n), readline(n), readlines(hint) and iteration over
    lines, on a body that may still be arriving (PEP 3333). read(n) returns
    n bytes unless the body ends first."""
    __slots__ = ("_next", "_buf", "_pos", "_eof")

    def __init__(self, source: Optional[Callable[[], bytes]] = None, data: bytes = b"") -> None:
        self._next = source or _end
        self._buf = data
        self._pos = 0
        self._eof = source is None

    def _more(self):
        """Append the next piece to the buffer; False at the end."""
        if self._eof:
            return False
        piece = self._next()
        if not piece:
            self._eof = True
            return False
        buf, pos = self._buf, self._pos
        # Drop what was read so the buffer holds only unread bytes.
        self._buf = buf[pos:] + piece if pos < len(buf) else piece
        self._pos = 0
        return True

    def read(self, size: Optional[int] = -1) -> bytes:
        """Up to `size` bytes (all of the rest when size is None or < 0)."""
        if size is None or size < 0:
            parts = [self._buf[self._pos:]]
            self._buf, self._pos = b"", 0
            while not self._eof:
                piece = self._next()
                if not piece:
                    self._eof = True
                    break
                parts.append(piece)
            return b"".join(parts)
        if not isinstance(size, int):
            raise TypeError("wsgi.input.read(size): size must be an int, not %s" % type(size).__name__)
        while len(self._buf) - self._pos < size and self._more():
            pass
        pos = self._pos
        out = self._buf[pos:pos + size]
        self._pos = pos + len(out)
        return out

    def readline(self, size: Optional[int] = -1) -> bytes:
        """One line, its b"\\n" included (at most `size` bytes when size >= 0)."""
        limit = size if size is not None and size >= 0 else None
        start = self._pos
        while True:
            buf = self._buf
            nl = buf.find(b"\n", start)
            if nl >= 0:
                end = nl + 1
                break
            if limit is not None and len(buf) - self._pos >= limit:
                end = len(buf)
                break
            before = len(buf) - self._pos
            if not self._more():
                end = len(self._buf)
                break
            start = before + self._pos  # search only the new bytes next time
        pos = self._pos
        if limit is not None and end - pos > limit:
            end = pos + limit
        out = self._buf[pos:end]
        self._pos = end
        return out

    def readlines(self, hint: Optional[int] = -1) -> List[bytes]:
        """Lines until the end (or until `hint` bytes were read, if > 0)."""
        lines, total = [], 0
        while True:
            line = self.readline()
            if not line:
                return lines
            lines.append(line)
            total += len(line)
            if hint is not None and 0 < hint <= total:
                return lines

    def __iter__(self) -> "Input":
        return self

    def __next__(self) -> bytes:
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    def prefetch(self, limit: int) -> None:
        """Take the rest of the body into the buffer (the app may still read
        it), unless more than `limit` bytes would wait there."""
        while not self._eof and len(self._buf) - self._pos < limit:
            if not self._more():
                return

    def close(self) -> None:
        pass


class body_stream_source:
    """A source over the library's BodyStream (polling-thread reader)."""
    __slots__ = ("stream", "_next")

    def __init__(self, stream):
        self.stream = stream
        self._next = stream.__next__

    def __call__(self):
        try:
            return self._next()
        except StopIteration:
            return b""


class ThreadedBody(BodyStream):
    """A streamed request body handed from the polling thread to a worker
    thread. The Manager feeds it as it feeds a BodyStream (_feed, _fail,
    _eof): it takes the place of the connection's BodyStream. Past `high`
    buffered bytes reading from the client is paused; it resumes once the
    worker has taken the buffer down to `high // 4`, through `resume(self)`
    (which runs the library call on the polling thread)."""
    __slots__ = ("_cond", "_resume", "_alive", "timeout")

    def __init__(self, conn, high, resume, alive, timeout):
        super().__init__(conn, high)
        self._cond = threading.Condition(threading.Lock())
        self._resume = resume     # fn(body): un-pause reading, on the polling thread
        self._alive = alive       # fn() -> False once the server closes
        self.timeout = timeout    # seconds a read may wait for the next piece

    def adopt(self, stream):
        """Take over what a BodyStream received in the batch so far."""
        self._chunks.extend(stream._chunks)
        self._size = stream._size
        self.received = stream.received
        self.peak = stream.peak
        self._eof = stream._eof
        self._exc = stream._exc
        self._paused = stream._paused

    # ---- polling thread: BodyStream's bookkeeping, under the lock the
    # worker thread reads with; a waiting reader is woken by the condition ----

    def _feed(self, data, eof):
        with self._cond:
            BodyStream._feed(self, data, eof)

    def _fail(self, exc):
        with self._cond:
            BodyStream._fail(self, exc)

    def _wake(self):
        self._cond.notify()  # called by _feed/_fail with the lock held

    def _pause(self, on):
        c = self._c
        self._paused = bool(on)
        if on:
            self.pauses += 1
        if c is None or c._closed:
            return
        lib.nsv_pause_read(c._s, c.id, 1 if on else 0)

    # ---- worker thread ----

    def __call__(self):
        """The next piece of the body, b"" at its end; raises Disconnected or
        BodyError when it cannot complete."""
        cond = self._cond
        with cond:
            deadline = None
            while not self._chunks:
                if self._eof:
                    return b""
                if self._exc is not None:
                    raise self._exc
                if not self._alive():
                    raise BodyError(_ESTOPPED, "the server stopped before the body ended")
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self.timeout
                elif now >= deadline:
                    raise BodyError(_ETIMEDOUT, "no body data for %.0f s" % self.timeout)
                cond.wait(_SLICE_S)
            piece = self._chunks.popleft()
            self._size -= len(piece)
            resume = self._paused and self._size <= self.low
            if resume:
                self._paused = False  # one resume request, not one per read
        if resume:
            self._resume(self)
        return piece


class ErrorStream:
    """wsgi.errors: text written here goes to logging (logger
    "nanosrv.wsgi", level ERROR), one record per line."""
    __slots__ = ("_log", "_buf", "_lock")

    def __init__(self, logger=None):
        self._log = logger or logging.getLogger("nanosrv.wsgi")
        self._buf = ""
        self._lock = threading.Lock()

    def write(self, s: str) -> int:
        if isinstance(s, bytes):
            s = s.decode("utf-8", "replace")
        elif not isinstance(s, str):
            raise TypeError("wsgi.errors.write() takes str, not %s" % type(s).__name__)
        with self._lock:
            text = self._buf + s
            lines = text.split("\n")
            self._buf = lines.pop()
        for line in lines:
            if line:
                self._log.error("%s", line)
        return len(s)

    def writelines(self, seq: Any) -> None:
        for s in seq:
            self.write(s)

    def flush(self) -> None:
        with self._lock:
            text, self._buf = self._buf, ""
        if text:
            self._log.error("%s", text)


class FileWrapper:
    """wsgi.file_wrapper: iterates a file-like object in blocks. A real
    file (a fileno and a name that is the same file, read from its start)
    is sent by the library's file sender instead (nsv_reply_file:
    sendfile on plain TCP), with no read in Python."""
    __slots__ = ("filelike", "blksize", "close")

    def __init__(self, filelike: Any, blksize: int = 8192) -> None:
        self.filelike = filelike
        self.blksize = blksize if isinstance(blksize, int) and blksize > 0 else 8192
        close = getattr(filelike, "close", None)
        if close is not None:
            self.close = close

    def __iter__(self) -> Iterator[bytes]:
        read, n = self.filelike.read, self.blksize
        while True:
            data = read(n)
            if not data:
                return
            yield data


def real_file(wrapper):
    """(path, size) when the wrapped object is a regular file that the
    library can send by name from its current position 0, else None."""
    import os
    import stat
    f = wrapper.filelike
    try:
        fd = f.fileno()
        name = getattr(f, "name", None)
        if not isinstance(name, (str, bytes)) or isinstance(name, int):
            return None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or f.tell() != 0:
            return None
        on_disk = os.stat(name)
        if (on_disk.st_dev, on_disk.st_ino) != (st.st_dev, st.st_ino):
            return None
        return os.fsdecode(os.path.abspath(name)), st.st_size
    except (AttributeError, OSError, ValueError, TypeError):
        return None
    except Exception:  # io.UnsupportedOperation and the like from odd file objects
        return None

