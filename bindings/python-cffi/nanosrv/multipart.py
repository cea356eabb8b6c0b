"""multipart/form-data, part by part, parsed by libnanosrv while it streams.

    @srv.post("/upload", stream=True)
    async def upload(conn, msg):
        async for part in nanosrv.multipart.MultipartReader(msg):
            print(part.name, part.filename, part.content_type)
            async for chunk in part:              # the part's data, in pieces
                ...

    @srv.post("/form", stream=True)
    def form(conn, msg):                          # synchronous, spooled
        form = nanosrv.multipart.read_form(msg, spool_threshold=1 << 20)
        upload = form["file"]                     # UploadFile: .file, .size, .read()
        return {"note": form.get("note"), "size": upload.size}

A body that is not multipart/form-data raises UnsupportedMediaType (a
handler that lets it escape answers 415), a malformed one MultipartError
naming the byte and the rule (400), a part over a size limit
PartTooLarge (413). Parts arrive in order; going on to the next part skips
what was not read of the current one. Memory is the parser's one
allocation plus one piece of data at a time, whatever the part sizes
(read_form spools file parts to temporary files past spool_threshold).
"""
import collections
import tempfile

from ._conn import to_bytes
from ._ffi import ffi, lib
from .errors import HTTPError
from .forms import MultiDict

PART, DATA, PART_END, END = lib.NSV_MP_PART, lib.NSV_MP_DATA, lib.NSV_MP_PART_END, lib.NSV_MP_END
_MPF_FILENAME, _MPF_CONTENT_TYPE = lib.NSV_MPF_FILENAME, lib.NSV_MPF_CONTENT_TYPE
_ENOBUFS, _ENOTFOUND, _EPARSE = lib.NSV_ENOBUFS, lib.NSV_ENOTFOUND, lib.NSV_EPARSE
_RECORDS = 64


class MultipartError(HTTPError, ValueError):
    """A malformed multipart body (400); the message names the byte and the rule."""
    status = 400


class PartTooLarge(MultipartError):
    """A part is larger than the limit it was read with (413)."""
    status = 413


class UnsupportedMediaType(HTTPError):
    """The body is not multipart/form-data (415)."""
    status = 415


def _detail():
    return ffi.string(lib.nsv_last_error_detail(ffi.NULL)).decode("utf-8", "replace")


def _text(b):
    return b.decode("utf-8", "surrogateescape")


def boundary(content_type):
    """The boundary (bytes) of a "multipart/form-data; boundary=..." value.
    UnsupportedMediaType for another media type, MultipartError when the
    parameters are malformed."""
    ct = to_bytes(content_type, "content_type")
    off, blen = ffi.new("uint32_t *"), ffi.new("uint32_t *")
    r = lib.nsv_multipart_boundary(ct, len(ct), off, blen)
    if r == _ENOTFOUND:
        raise UnsupportedMediaType("not multipart/form-data: %s" % ct[:200].decode("latin-1"))
    if r < 0:
        raise MultipartError("bad multipart Content-Type: %s" % _detail())
    return ct[off[0]:off[0] + blen[0]]


class Part:
    """One part: `name`, `filename` (None when absent), `content_type`
    (None when absent: read it as text/plain), `headers` [(name, value)],
    `index`, `size` (data bytes seen so far). Iterate it (`for` or
    `async for`) for its data; read() / await aread() join it."""
    __slots__ = ("name", "filename", "content_type", "headers", "index", "size", "done", "raw_name",
                 "raw_filename", "_r")

    def __repr__(self):
        return "<Part %d name=%r filename=%r content_type=%r>" % (self.index, self.name, self.filename,
                                                                  self.content_type)

    def __iter__(self):
        r = self._r
        while not self.done:
            rec = r._next()
            if rec is None:
                return
            if rec[0] == DATA:
                yield rec[1]

    def read(self):
        return b"".join(self)

    async def __aiter__(self):
        r = self._r
        while not self.done:
            rec = await r._anext()
            if rec is None:
                return
            if rec[0] == DATA:
                yield rec[1]

    async def aread(self):
        return b"".join([c async for c in self])


class Parser:
    """The push parser (nsv_multipart_*): feed(bytes) returns records
    (PART, Part), (DATA, bytes), (PART_END, Part), (END, None); finish()
    at the end of the body. MultipartError when malformed."""

    def __init__(self, content_type=None, *, boundary_bytes=None, max_header_bytes=0, max_parts=0):
        b = boundary_bytes if boundary_bytes is not None else boundary(content_type)
        mp = lib.nsv_multipart_new(b, len(b), max_header_bytes, max_parts)
        if mp == ffi.NULL:
            raise ValueError("multipart parser: %s" % _detail())
        self._mp = ffi.gc(mp, lib.nsv_multipart_free)
        self._evs = ffi.new("nsv_multipart_event[]", _RECORDS)
        self._grow(64 * 1024)
        self._used = ffi.new("size_t *")
        self._part = None
        self.ended = False

    def _grow(self, cap):
        self._arena = ffi.new("char[]", cap)
        self._ab = ffi.buffer(self._arena)
        self._cap = cap

    def feed(self, data):
        out = []
        if not data:
            return out
        src = ffi.from_buffer(data)
        at, n = 0, len(data)
        while at < n:
            k = lib.nsv_multipart_feed(self._mp, src + at, n - at, self._evs, _RECORDS, self._arena, self._cap,
                                       self._used)
            if k == _ENOBUFS:
                self._grow(max(self._cap * 2, lib.nsv_multipart_need(self._mp) + 4096))
                continue
            if k < 0:
                raise MultipartError(_detail() if k == _EPARSE else
                                     "multipart: %s" % ffi.string(lib.nsv_strerror(k)).decode())
            self._records(k, out)
            at += self._used[0]
        return out

    def _records(self, k, out):
        ab = self._ab
        for i in range(k):
            e = self._evs[i]
            t = e.type
            if t == DATA:
                o = e.data_off
                d = ab[o:o + e.data_len]
                self._part.size += len(d)
                out.append((DATA, d))
            elif t == PART:
                p = Part()
                p.index = e.part
                p.raw_name = ab[e.name_off:e.name_off + e.name_len]
                p.name = _text(p.raw_name)
                f = e.flags
                p.raw_filename = ab[e.filename_off:e.filename_off + e.filename_len] if f & _MPF_FILENAME else None
                p.filename = _text(p.raw_filename) if p.raw_filename is not None else None
                p.content_type = (ab[e.content_type_off:e.content_type_off + e.content_type_len].decode("latin-1")
                                  if f & _MPF_CONTENT_TYPE else None)
                hdrs = []
                for line in ab[e.headers_off:e.headers_off + e.headers_len].decode("latin-1").split("\r\n"):
                    if line:
                        hname, _, value = line.partition(":")
                        hdrs.append((hname, value.strip(" \t")))
                p.headers = hdrs
                p.size = 0
                p.done = False
                p._r = None
                self._part = p
                out.append((PART, p))
            elif t == PART_END:
                out.append((PART_END, self._part))
            elif t == END:
                self.ended = True
                out.append((END, None))

    def finish(self):
        if lib.nsv_multipart_finish(self._mp) != 0:
            raise MultipartError(_detail() or "multipart: missing final boundary")

    def close(self):
        if self._mp is not None:
            mp, self._mp = self._mp, None
            ffi.release(mp)


class MultipartReader:
    """Parts of a request body, in order: `for part in reader` (the body
    read from msg.stream, synchronously) or `async for part in reader`.
    `source` is an HttpMessage (its Content-Type and stream are used), or
    any iterable / async iterable of bytes with content_type given."""

    def __init__(self, source, content_type=None, *, max_parts=1000, max_header_bytes=0):
        if content_type is None:
            content_type = source.header("content-type")
            if content_type is None:
                raise UnsupportedMediaType("no Content-Type: multipart/form-data expected")
        self._src = source.stream if hasattr(source, "stream") and hasattr(source, "header") else source
        self._it = None
        self._p = Parser(content_type, max_header_bytes=max_header_bytes, max_parts=max_parts)
        self._q = collections.deque()
        self._cur = None
        self._end = False

    def _take(self):
        """The next queued record, None at the end, False when more input is needed."""
        q = self._q
        if q:
            rec = q.popleft()
            t = rec[0]
            if t == PART:
                rec[1]._r = self
                self._cur = rec[1]
            elif t == PART_END:
                rec[1].done = True
            elif t == END:
                self._end = True
                self._p.close()
                return None
            return rec
        return None if self._end else False

    def _next(self):
        while True:
            rec = self._take()
            if rec is not False:
                return rec
            if self._it is None:
                self._it = iter(self._src)
            chunk = next(self._it, None)
            if chunk is None:
                self._p.finish()
                raise MultipartError("multipart: missing final boundary")  # finish() raises first
            self._q.extend(self._p.feed(chunk))

    async def _anext(self):
        while True:
            rec = self._take()
            if rec is not False:
                return rec
            if self._it is None:
                self._it = self._src.__aiter__()
            try:
                chunk = await self._it.__anext__()
            except StopAsyncIteration:
                self._p.finish()
                raise MultipartError("multipart: missing final boundary") from None
            self._q.extend(self._p.feed(chunk))

    def __iter__(self):
        while True:
            rec = self._next()
            if rec is None:
                return
            if rec[0] == PART:
                yield rec[1]

    async def __aiter__(self):
        while True:
            rec = await self._anext()
            if rec is None:
                return
            if rec[0] == PART:
                yield rec[1]


class UploadFile:
    """A file part of read_form: `name`, `filename`, `content_type`,
    `headers`, `size`, and `file`, a tempfile.SpooledTemporaryFile (in
    memory up to the spool threshold, on disk past it) positioned at 0.
    read(n), seek(), close(); a context manager."""
    __slots__ = ("name", "filename", "content_type", "headers", "size", "file")

    def __init__(self, part, threshold, spool_dir):
        self.name, self.filename, self.content_type = part.name, part.filename, part.content_type
        self.headers = part.headers
        self.size = 0
        self.file = tempfile.SpooledTemporaryFile(max_size=threshold, dir=spool_dir)

    @property
    def on_disk(self):
        """True once the data went past the threshold into a temporary file."""
        return bool(getattr(self.file, "_rolled", False))

    def read(self, n=-1):
        return self.file.read(n)

    def seek(self, pos, whence=0):
        return self.file.seek(pos, whence)

    def close(self):
        self.file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "<UploadFile %r filename=%r %d bytes>" % (self.name, self.filename, self.size)


class _FormBuilder:
    """What read_form and aread_form share: one part's data at a time."""

    def __init__(self, spool_threshold, spool_dir, max_file_size, max_field_size):
        self.threshold, self.dir = spool_threshold, spool_dir
        self.max_file, self.max_field = max_file_size, max_field_size
        self.pairs = []
        self.files = []

    def start(self, part):
        if part.filename is not None:
            f = UploadFile(part, self.threshold, self.dir)
            self.files.append(f)
            return f
        return []

    def data(self, part, sink, chunk):
        if isinstance(sink, UploadFile):
            if self.max_file is not None and part.size > self.max_file:
                raise PartTooLarge("multipart: file part %r is larger than %d bytes" % (part.name, self.max_file))
            sink.file.write(chunk)
            sink.size += len(chunk)
        else:
            if self.max_field is not None and part.size > self.max_field:
                raise PartTooLarge("multipart: field %r is larger than %d bytes" % (part.name, self.max_field))
            sink.append(chunk)

    def end(self, part, sink):
        if isinstance(sink, UploadFile):
            sink.file.seek(0)
            self.pairs.append((part.name, sink))
        else:
            self.pairs.append((part.name, _text(b"".join(sink))))

    def fail(self):
        for f in self.files:
            f.close()


def read_form(msg, content_type=None, *, spool_threshold=1 << 20, spool_dir=None, max_file_size=None,
              max_field_size=1 << 20, max_parts=1000, max_header_bytes=0):
    """Read a whole multipart/form-data body (synchronously) into a
    MultiDict: fields as str, file parts (those with a filename) as
    UploadFile spooled to disk past spool_threshold bytes. Limits raise
    PartTooLarge (413); on any error the spooled files are closed."""
    b = _FormBuilder(spool_threshold, spool_dir, max_file_size, max_field_size)
    try:
        for part in MultipartReader(msg, content_type, max_parts=max_parts, max_header_bytes=max_header_bytes):
            sink = b.start(part)
            for chunk in part:
                b.data(part, sink, chunk)
            b.end(part, sink)
    except BaseException:
        b.fail()
        raise
    return MultiDict(b.pairs)


async def aread_form(msg, content_type=None, *, spool_threshold=1 << 20, spool_dir=None, max_file_size=None,
                     max_field_size=1 << 20, max_parts=1000, max_header_bytes=0):
    """asyncio: read_form over `async for` (the file writes are plain
    writes: past the threshold they go to a local temporary file)."""
    b = _FormBuilder(spool_threshold, spool_dir, max_file_size, max_field_size)
    try:
        async for part in MultipartReader(msg, content_type, max_parts=max_parts,
                                          max_header_bytes=max_header_bytes):
            sink = b.start(part)
            async for chunk in part:
                b.data(part, sink, chunk)
            b.end(part, sink)
    except BaseException:
        b.fail()
        raise
    return MultiDict(b.pairs)
