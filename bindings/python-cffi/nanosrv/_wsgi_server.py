"""The WSGI server behind nanosrv.wsgi: environ, start_response, streamed
responses, the thread pool and the hand-over of replies to the polling
thread.

Roles. The polling thread (the one in Server.run, or whoever polls the
Manager when threads=0) turns each request into an environ, then either
runs the application itself (threads=0) or queues an _Exchange for a
worker thread. Every library call on a single-loop Manager is made by the
polling thread: a worker posts (fn, args) to its _Loop's outbox and wakes
the poll with nsv_wakeup; the polling thread runs the outbox after each
poll. On a ShardedManager complete replies are made by the worker itself
(the library takes them from any thread there); streamed ones still go
through the outbox, where the polling thread sees the WRITABLE events
that pace them.

Backpressure. Loop side, a chunk that leaves the connection's queue at or
past the high water mark marks the exchange blocked; the WRITABLE event
with code 1 (low water) clears it. Worker side, the producer waits while
the exchange is blocked or while more than _AHEAD bytes it posted are not
taken yet. With threads=0 the iteration itself stops and resumes from the
drain callback.
"""
import collections
import http
import itertools
import logging
import queue
import re
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple
from urllib.parse import unquote_to_bytes

from ._ffi import lib
from ._manager import ShardedManager
from ._message import EVF_PROXY, EVF_HEAD, EVF_HTTP10, EVF_HTTP2, EVF_STREAM_BODY, EVF_TLS, FLAGS, HEADERS, HEADERS_LEN, PEER, PEER_LEN, \
    PEER_PORT, LISTENER
from .static import FLAGS as STATIC_FLAGS
from ._wsgi_io import ErrorStream, FileWrapper, Input, ThreadedBody, body_stream_source, real_file

log = logging.getLogger("nanosrv.wsgi")
access = logging.getLogger("nanosrv.access")

_ESTALE, _EAGAIN = lib.NSV_ESTALE, lib.NSV_EAGAIN
_send_chunk, _conn_queued, _wakeup = lib.nsv_send_chunk, lib.nsv_conn_queued, lib.nsv_wakeup
_AHEAD = 256 * 1024       # bytes a worker may post before the polling thread took them
_JOIN_MAX = 1 << 20       # a list body up to this size is joined into one reply
_COLLECT_MAX = 64 * 1024  # an iterable body of declared length up to this is sent as one reply
_BURST = 2 << 20          # sharded: bytes a stream may send between looks at the I/O thread's word
_TICK_S = 0.002
_PREFETCH = 64 * 1024     # an unread body up to this is taken in before the answer (keep-alive)
_SLICE_S = 0.25           # waits re-check that the server and the client are still there
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_PHRASES = {s.value: s.phrase for s in http.HTTPStatus}
_STATUS = {}              # status line -> (code, custom reason or None); bounded, apps use few
_500_HDR = b"Content-Type: text/plain; charset=utf-8\r\n"
_500_BODY = b"Internal Server Error\n"
# Headers the library's file sender writes itself (nsv_reply_file).
_FILE_OWN = ("content-length", "etag", "last-modified", "accept-ranges")
_HAS_PLAIN = "plain" in STATIC_FLAGS  # NSV_STATIC_PLAIN (1.2)


WSGIApp = Callable[[Dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def parse_status(status: str) -> Tuple[int, Optional[str]]:
    """(code, reason to send when it is not the standard phrase, else None).
    TypeError/ValueError naming the rule a bad status breaks."""
    r = _STATUS.get(status)
    if r is not None:
        return r
    if not isinstance(status, str):
        raise TypeError("start_response: status must be str (\"200 OK\"), not %s" % type(status).__name__)
    digits = status[:3]
    if not (len(digits) == 3 and digits.isascii() and digits.isdigit()) or (len(status) > 3 and status[3] != " "):
        raise ValueError("start_response: status %r is not \"NNN Reason\" (three digits, a space, a reason)"
                         % (status,))
    code = int(digits)
    if not 200 <= code <= 999:
        raise ValueError("start_response: status %r: a final status is 200..999 (1xx are interim)" % (status,))
    reason = status[4:]
    if _BAD_VALUE.search(reason) or not reason.isascii() and not _latin1(reason):
        raise ValueError("start_response: status %r: the reason has a control or non-latin-1 character" % (status,))
    r = (code, reason if reason and reason != _PHRASES.get(code) else None)
    if len(_STATUS) < 1024:
        _STATUS[status] = r
    return r


def _latin1(s):
    try:
        s.encode("latin-1")
        return True
    except UnicodeEncodeError:
        return False


def header_block(headers: List[Tuple[str, str]]) -> Tuple[bytes, Optional[int]]:
    """(wire block, declared Content-Length or None) from start_response's
    list; TypeError/ValueError naming the bad header. Apps send the same
    few header lists again and again: checked ones are remembered."""
    if type(headers) is list:
        try:
            key = tuple(headers)
            r = _BLOCKS.get(key)
        except TypeError:  # an unhashable item: checked (and refused) below
            key = r = None
        if r is not None:
            return r
        r = _header_block(headers)
        if key is not None:
            if len(_BLOCKS) >= 512:
                _BLOCKS.clear()
            _BLOCKS[key] = r
        return r
    return _header_block(headers)


_BLOCKS = {}


def _header_block(headers):
    if type(headers) is not list:
        raise TypeError("start_response: headers must be a list of (name, value) tuples, not %s"
                        % type(headers).__name__)
    out = []
    cl = None
    for item in headers:
        if type(item) is not tuple or len(item) != 2:
            raise TypeError("start_response: each header must be a (name, value) tuple, not %r" % (item,))
        name, value = item
        if type(name) is not str or type(value) is not str:
            raise TypeError("start_response: header %r: name and value must be str" % (item,))
        if not _TOKEN.match(name):
            raise ValueError("start_response: header name %r is not an HTTP token" % (name,))
        m = _BAD_VALUE.search(value)
        if m is not None:
            raise ValueError("start_response: header %s: value has control byte %r at offset %d"
                             % (name, m.group(), m.start()))
        n = len(name)
        if n == 14 or n == 17:
            low = name.lower()
            if low == "content-length":
                v = value.strip(" \t")
                if not (v.isascii() and v.isdigit()):
                    raise ValueError("start_response: Content-Length %r is not a decimal number" % (value,))
                if cl is not None and int(v) != cl:
                    raise ValueError("start_response: two different Content-Length headers")
                cl = int(v)
            elif low == "transfer-encoding":
                if value.strip(" \t").lower() != "chunked":
                    raise ValueError("start_response: Transfer-Encoding %r: the server frames the body; only "
                                     "chunked may be named" % (value,))
                continue  # the library adds it for a streamed body without a length
        out.append("%s: %s\r\n" % (name, value))
    try:
        block = "".join(out).encode("latin-1")
    except UnicodeEncodeError as e:
        raise ValueError("start_response: a header value has a character outside latin-1 (%s)" % e.reason)
    return block, cl


def _strip(block, names):
    """The block without the lines whose names (lower case) are in names."""
    keep = [ln for ln in block.split(b"\r\n") if ln and ln.split(b":", 1)[0].strip().lower().decode() not in names]
    return b"".join(ln + b"\r\n" for ln in keep)


class _Where:
    """Scheme, host and port of a listener (the environ's defaults)."""
    __slots__ = ("scheme", "host", "port")

    def __init__(self, scheme, host, port):
        self.scheme, self.host, self.port = scheme, host, port


class _ReqHeaders:
    """What the file sender reads of a request: its header block."""
    __slots__ = ("raw_headers",)

    def __init__(self, raw):
        self.raw_headers = raw


class _Exchange:
    """One request and its response, from the environ to the last byte."""
    __slots__ = ("lp", "conn", "env", "head", "inline", "status", "code", "reason", "block", "cl", "sent",
                 "nbytes", "posted", "taken", "blocked", "gone", "ev", "waiting", "stalled", "req", "it",
                 "result", "finished", "uri", "resumer", "stop", "is_head", "unconfirmed", "input", "__weakref__")

    def __init__(self, lp, conn, env, head, inline, req):
        self.lp = lp
        self.conn = conn
        self.env = env
        self.head = head        # no body goes out: a HEAD request, or a 204/304 answer
        self.is_head = head
        self.inline = inline
        self.status = None      # start_response's status, until the headers went out
        self.code = 0
        self.reason = None
        self.block = b""
        self.cl = None          # the application's Content-Length
        self.sent = False       # the head went out (worker side)
        self.nbytes = 0         # body bytes handed on
        self.posted = 0         # bytes posted to the outbox (worker writes)
        self.taken = 0          # bytes the polling thread took from it (loop writes)
        self.blocked = False    # queued output is past the high water mark
        self.gone = False       # the client left; stop producing
        self.ev = None          # threading.Event a waiting worker sleeps on
        self.waiting = False
        self.stalled = None     # commands held back after NSV_EAGAIN, in order
        self.req = req          # request header block (file_wrapper's file sender)
        self.it = None
        self.result = None
        self.finished = False
        self.uri = None
        self.resumer = None
        self.input = None       # wsgi.input of a body still arriving (see Server._prefetch)
        self.unconfirmed = 0    # sharded: bytes sent since the last pause (see _l_chunk)
        self.stop = False       # worker side: produce no more (a body cut at its Content-Length)

    # ---- start_response (PEP 3333) ----

    def start_response(self, status, headers, exc_info=None):
        if exc_info is not None:
            try:
                if self.sent:
                    raise exc_info[1].with_traceback(exc_info[2])
            finally:
                exc_info = None
        elif self.status is not None:
            raise AssertionError("start_response called a second time without exc_info")
        code, reason = parse_status(status)
        self.block, self.cl = header_block(headers)
        if code == 204 or code == 304:
            self.head = True
            if code == 204 and self.cl is not None:  # a 204 has no length (the library refuses one)
                self.block, self.cl = _strip(self.block, ("content-length",)), None
        else:
            self.head = self.is_head
        self.code, self.reason, self.status = code, reason, status
        return self.write

    def write(self, data):
        """The write() callable: the bytes go out before it returns (paced
        by the client's reading)."""
        if self.status is None:
            raise AssertionError("write() before start_response")
        if type(data) is not bytes:
            data = _chunk_bytes(data)
        if data:
            self.lp.srv._write(self, data)

    # ---- polling thread: pacing ----

    def wake(self):
        if self.waiting:
            self.ev.set()

    def drained(self):
        self.blocked = False
        if self.resumer is not None:
            fn, self.resumer = self.resumer, None
            fn()
        else:
            self.wake()


def _small(items):
    """True for a list of bytes that is worth joining into one reply."""
    n = 0
    for x in items:
        if type(x) is not bytes:
            return False
        n += len(x)
    return n <= _JOIN_MAX


def _chunk_bytes(data):
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError("a WSGI body is bytes; the application gave %s" % type(data).__name__)


class _Loop:
    """Per Manager: the outbox of calls the polling thread makes for the
    workers, and the listeners' environ templates."""

    def __init__(self, server, manager):
        self.srv = server
        self.m = manager
        self.s = manager._srv
        self.sharded = isinstance(manager, ShardedManager)
        self.direct = server.direct if server.direct is not None else self.sharded
        self.outbox = collections.deque()
        self.signalled = False
        self.hw = manager.get_option("tcp_high_water")
        self.bases = {}         # listener id -> environ template
        self.soon = getattr(manager, "call_soon_threadsafe", None)

    def post(self, fn, *args):
        """Any thread: have the polling thread call fn(*args) after its poll."""
        self.outbox.append((fn, args))
        if not self.signalled:
            # One wakeup per flush: the flag is cleared before the outbox is
            # read, so an append that sees it set is read by that flush.
            self.signalled = True
            soon = self.soon
            if soon is not None:
                soon(self.flush)  # runs in whatever loop polls the Manager (run(), asyncio, drain)
            else:
                s = self.m._srv
                if s:  # NULL once the Manager is closed
                    _wakeup(s)

    def flush(self):
        """Polling thread: run what the workers posted."""
        self.signalled = False
        box = self.outbox
        n = len(box)  # later posts wait for the next poll, so WRITABLE events come between
        while n:
            fn, args = box.popleft()
            n -= 1
            try:
                fn(*args)
            except Exception:
                log.exception("a reply step failed")


class Server:
    """A WSGI (PEP 3333) server: see nanosrv.wsgi."""

    def __init__(self, app: WSGIApp, *, threads: int = 4, root_path: str = "", access_log: Any = False,
                 limit_max_requests: Optional[int] = None, url_scheme: Optional[str] = None,
                 multiprocess: bool = False, stream_body: bool = True, drain_timeout_ms: int = 30000,
                 send_timeout: float = 60.0, body_timeout: float = 60.0, direct: Optional[bool] = None,
                 file_wrapper: str = "auto") -> None:
        """app: the WSGI callable. threads: worker threads running it (0:
        the polling thread). root_path: SCRIPT_NAME. access_log: True, an INFO
        record per response on "nanosrv.access" ('%s - "%s %s HTTP/%s" %d');
        "common", "combined", "json" or a callable(record): the library's
        access records instead (Manager.access_log, set on each Manager
        listen() serves).
        limit_max_requests: after that many responses, a graceful drain
        (drain_timeout_ms). url_scheme: wsgi.url_scheme instead of the
        listener's. multiprocess: wsgi.multiprocess. stream_body: wsgi.input
        reads the body as it arrives (listen() sets the Manager's
        stream_body option). send_timeout: seconds a response may wait for
        a client that reads nothing; body_timeout: for body data. direct:
        workers make complete replies themselves (default: on a
        ShardedManager). file_wrapper: how wsgi.file_wrapper over a real
        file is sent: "auto" by the library's file sender as the app's
        plain answer (NSV_STATIC_PLAIN: its status and headers, no
        validators added, no Range or condition answered), "sender" by the
        sender answering Range and conditional requests (its ETag,
        Last-Modified and Accept-Ranges replace the app's), "read" never."""
        if not callable(app):
            raise TypeError("app must be a WSGI callable, not %s" % type(app).__name__)
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 0:
            raise ValueError("threads must be an int >= 0 (0 runs the app on the polling thread), not %r"
                             % (threads,))
        if not isinstance(root_path, str) or (root_path and (not root_path.startswith("/") or
                                                             root_path.endswith("/"))):
            raise ValueError("root_path must be \"\" or start with '/' and not end with it, not %r" % (root_path,))
        if limit_max_requests is not None and (not isinstance(limit_max_requests, int) or limit_max_requests < 1):
            raise ValueError("limit_max_requests must be None or an int >= 1, not %r" % (limit_max_requests,))
        if file_wrapper not in ("auto", "sender", "read"):
            raise ValueError("file_wrapper must be \"auto\", \"sender\" or \"read\", not %r" % (file_wrapper,))
        if url_scheme not in (None, "http", "https"):
            raise ValueError("url_scheme must be None (from the listener), \"http\" or \"https\", not %r"
                             % (url_scheme,))
        self.app = app
        self.threads = threads
        self.root_path = root_path
        # A format or callable: the library's records (Manager.access_log);
        # True: this server's own line per response.
        self.access_format = access_log if isinstance(access_log, str) or callable(access_log) else None
        self.access_log = bool(access_log) and self.access_format is None
        self.limit_max_requests = limit_max_requests
        self.url_scheme = url_scheme
        self.multiprocess = bool(multiprocess)
        self.stream_body = stream_body
        self.drain_timeout_ms = drain_timeout_ms
        self.send_timeout = send_timeout
        self.body_timeout = body_timeout
        self.direct = direct
        self.file_wrapper = file_wrapper
        self.errors = ErrorStream(log)
        self.requests = 0       # responses finished
        self._count = itertools.count(1)
        self._loops = {}        # id(manager) -> _Loop
        self._closing = False
        self._jobs = queue.SimpleQueue()
        self._pool = []
        for i in range(threads):
            t = threading.Thread(target=self._worker, name="nanosrv-wsgi-%d" % i, daemon=True)
            t.start()
            self._pool.append(t)

    # ---- setup ----

    def listen(self, manager: Any, url: str, **lopts: Any) -> Any:
        """Listen on url (http://, https://, http+unix://, https+unix://;
        port 0 picks one) with this app; returns the Listener.
        wsgi.url_scheme follows the listener. Listener options as
        Manager.http_listen (proxy_protocol, proxy_from, allow, deny, ...);
        behind a PROXY protocol front REMOTE_ADDR is the client's and
        environ["nanosrv.proxy"] has the front's facts (HttpMessage.proxy)."""
        scheme = url.split("://", 1)[0] if isinstance(url, str) and "://" in url else None
        if scheme not in ("http", "https", "http+unix", "https+unix"):
            raise ValueError("listen(manager, url): url must start with http://, https://, http+unix:// or "
                             "https+unix://, not %r" % (url,))
        lp = self._loop(manager)
        if self.stream_body and not manager._stream_all:
            manager.set_option("stream_body", 1)  # wsgi.input reads the body as it arrives
        host = "localhost" if scheme.endswith("+unix") else _url_host(url)
        where = _Where("https" if scheme.startswith("https") else "http", host, 0)
        if self.access_format is not None and manager._access is None:
            manager.set_access_log(self.access_format)
        lst = manager.http_listen(url, self._handler(lp, where), **lopts)
        where.port = lst.port
        return lst

    def handler(self, manager: Any, server_name: str = "127.0.0.1", server_port: int = 0,
                url_scheme: str = "http") -> Callable[[Any, Any], None]:
        """A handler(conn, msg) for routes or listeners of `manager`
        (SERVER_NAME/SERVER_PORT when the request has no Host header)."""
        return self._handler(self._loop(manager), _Where(url_scheme, server_name, server_port))

    def _loop(self, manager):
        lp = self._loops.get(id(manager))
        if lp is None or lp.m is not manager:
            lp = self._loops[id(manager)] = _Loop(self, manager)
        return lp

    def _base(self, scheme, host, port):
        return {
            "SCRIPT_NAME": self.root_path,
            "SERVER_NAME": host,
            "SERVER_PORT": str(port),
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": self.url_scheme or scheme,
            "wsgi.errors": self.errors,
            "wsgi.multithread": self.threads > 0,
            "wsgi.multiprocess": self.multiprocess,
            "wsgi.run_once": False,
            "wsgi.input_terminated": True,
            "wsgi.file_wrapper": FileWrapper,
        }

    # ---- the loop ----

    def run(self, manager: Any) -> None:
        """Poll `manager` in this thread until it stops (stop(), or the end
        of a drain: drain_start() may be called from a signal handler; the
        poll returns within 250 ms to let it run)."""
        lp = self._loop(manager)
        poll = manager.poll
        flush = lp.flush
        box = lp.outbox
        while True:
            n = poll(0 if box else 250)
            if box:
                flush()
            if n < 0:
                return

    def close(self) -> None:
        """Stop and join the worker threads (work in progress is told the
        server stops: waiting writers and readers give up)."""
        self._closing = True
        for _ in self._pool:
            self._jobs.put(None)
        for t in self._pool:
            t.join(10)
        self._pool = []

    def _alive(self):
        return not self._closing

    def _worker(self):
        get = self._jobs.get
        while True:
            ex = get()
            if ex is None:
                return
            try:
                if type(ex) is _Later:
                    ex.fn(*ex.args)
                else:
                    self._run(ex)
            except BaseException:
                log.exception("WSGI worker failed")

    # ---- polling thread: a request arrives ----

    def _handler(self, lp, where):
        srv = self
        root = self.root_path
        rlen = len(root)
        inline = self.threads == 0
        jobs = self._jobs
        bases = lp.bases

        def base_for(lid, tls):
            key = (lid, tls)
            b = bases.get(key)
            if b is None:
                b = bases[key] = srv._base("https" if tls else where.scheme, where.host, where.port)
                b["nanosrv.manager"] = lp.m  # for the HTTP client: environ["nanosrv.manager"].fetch_blocking(url)
            return b

        def handler(conn, msg):
            e = msg._e
            flags = e[FLAGS]
            a = msg._a
            o = e[HEADERS]
            raw = a[o:o + e[HEADERS_LEN]]
            env = (bases.get((e[LISTENER], flags & EVF_TLS)) or base_for(e[LISTENER], flags & EVF_TLS)).copy()
            env["REQUEST_METHOD"] = msg.method
            path = msg.raw_path
            path = (unquote_to_bytes(path) if b"%" in path else path).decode("latin-1")
            if rlen and path.startswith(root) and (len(path) == rlen or path[rlen] == "/"):
                path = path[rlen:]
            env["PATH_INFO"] = path
            env["QUERY_STRING"] = msg.query
            env["SERVER_PROTOCOL"] = ("HTTP/2" if flags & EVF_HTTP2 else
                                      "HTTP/1.0" if flags & EVF_HTTP10 else "HTTP/1.1")
            o = e[PEER]
            env["REMOTE_ADDR"] = a[o:o + e[PEER_LEN]].decode("latin-1")
            env["REMOTE_PORT"] = str(e[PEER_PORT])
            if flags & EVF_PROXY:
                env["nanosrv.proxy"] = msg.proxy
            _add_headers(env, raw)
            ex = _Exchange(lp, conn, env, bool(flags & EVF_HEAD), inline, raw)
            if srv.access_log:
                q = env["QUERY_STRING"]
                ex.uri = msg.uri + ("?" + q if q else "")
            if flags & EVF_STREAM_BODY:
                if inline:
                    inp = Input(body_stream_source(msg.stream))
                else:
                    body = ThreadedBody(conn, conn._m.body_buffer, srv._resume_reading(lp), srv._alive,
                                        srv.body_timeout)
                    if conn._body is not None:
                        body.adopt(conn._body)
                    conn._body = body
                    inp = Input(body)
                env["wsgi.input"] = ex.input = inp
            else:
                data = msg.body_bytes
                env["wsgi.input"] = Input(None, data)
                if data and "CONTENT_LENGTH" not in env:
                    env["CONTENT_LENGTH"] = str(len(data))  # a chunked body that arrived whole
            if inline:
                srv._run(ex)
            else:
                jobs.put(ex)
        return handler

    def _resume_reading(self, lp):
        if lp.sharded:
            return lambda body: body._pause(0)  # nsv_pause_read is safe from any thread there
        return lambda body: lp.post(body._pause, 0)

    # ---- running the application (worker thread, or the polling thread) ----

    def _run(self, ex):
        env = ex.env
        try:
            result = self.app(env, ex.start_response)
        except Exception:
            self._failed(ex, "the WSGI application raised")
            return
        ex.result = result
        try:
            if type(result) in (list, tuple) and not ex.sent and (len(result) <= 1 or _small(result)):
                # Already in memory: one reply, with the length set by the library.
                body = (result[0] if result else b"") if len(result) <= 1 else b"".join(result)
                if type(body) is not bytes:
                    body = _chunk_bytes(body)
                if ex.status is None:
                    raise RuntimeError("the WSGI application returned without calling start_response")
                if ex.cl is None or ex.cl == len(body) or ex.head:
                    self._whole(ex, body)
                    return
                ex.it = iter(result)
            elif type(result) is FileWrapper and not ex.sent and self._send_file(ex, result):
                return
            else:
                ex.it = iter(result)
        except Exception:
            self._close_result(ex)
            self._failed(ex, "the WSGI response failed")
            return
        self._pump(ex)

    def _pump(self, ex):
        """Send the iterable's chunks; with threads=0 stop while the client
        is slow and go on from the drain callback."""
        collect = None  # a small body of declared length: its pieces, joined into one reply
        try:
            for data in ex.it:
                if type(data) is not bytes:
                    data = _chunk_bytes(data)
                if not data:
                    continue
                if collect is not None or (not ex.sent and ex.cl is not None and ex.cl <= _COLLECT_MAX and
                                           not ex.head and ex.status is not None):
                    # Frameworks (Flask) give a one-piece body as an iterator
                    # with its length: it leaves as one reply, sent as soon
                    # as the length is reached.
                    if collect is None:
                        collect, n = [], 0
                    elif collect is False:
                        self._excess(ex, len(data))
                        break
                    collect.append(data)
                    n += len(data)
                    if n >= ex.cl:
                        body = collect[0] if len(collect) == 1 else b"".join(collect)
                        collect = False
                        if n > ex.cl:
                            # The declared length goes out, and the connection
                            # ends after it: the app's framing is not to be trusted.
                            self._excess(ex, n - ex.cl)
                            body = body[:ex.cl]
                            ex.block = _strip(ex.block, ("connection",)) + b"Connection: close\r\n"
                        self._whole(ex, body)
                        if n > ex.cl:
                            break
                    continue
                self._write(ex, data)
                if ex.gone or ex.stop or ex.head:
                    break  # the client left, the length is reached, or a HEAD answer went out
                if ex.inline and ex.blocked:
                    ex.resumer = lambda: self._pump(ex)
                    return
        except Exception:
            self._close_result(ex)
            self._failed(ex, "the WSGI application failed while sending its body")
            return
        self._close_result(ex)
        if collect is False or ex.gone or ex.stop:
            return
        if collect:  # ended short of its length: sent as a stream, which the library cuts
            self._write(ex, b"".join(collect))
        if ex.status is None:
            self._failed(ex, "the WSGI application returned without calling start_response", trace=False)
        elif not ex.sent:
            self._whole(ex, b"")
        elif ex.head:
            return  # _head_only answered
        else:
            if ex.cl is not None and ex.nbytes < ex.cl and not ex.head:
                log.error("%s %s: the application sent %d bytes of its Content-Length %d; the connection is "
                          "closed", ex.env["REQUEST_METHOD"], ex.env["PATH_INFO"], ex.nbytes, ex.cl)
            self._emit(ex, self._l_end, ex)

    def _excess(self, ex, n):
        log.error("%s %s: the application sent %d bytes past its Content-Length %d; they are dropped%s",
                  ex.env["REQUEST_METHOD"], ex.env["PATH_INFO"], n, ex.cl,
                  "" if ex.sent else " and the connection is closed")

    def _close_result(self, ex):
        r, ex.result = ex.result, None
        close = getattr(r, "close", None)
        if close is not None:
            try:
                close()
            except Exception:
                log.exception("the close() of the WSGI response failed")

    def _emit(self, ex, fn, *args):
        if ex.inline:
            fn(*args)
        else:
            ex.lp.post(fn, *args)

    def _prefetch(self, ex):
        """Before the head goes out: a small body the app left unread is
        taken in first (kept for the app), so the library has it all and
        the connection stays open for the next request. A large one is
        not waited for: the connection closes after the answer."""
        inp, ex.input = ex.input, None
        env = ex.env
        cl = env.get("CONTENT_LENGTH")
        if cl and not (cl.isdigit() and int(cl) <= _PREFETCH):
            return
        if "100-continue" in env.get("HTTP_EXPECT", "").lower():
            return  # the client waits to hear whether to send it: an early answer spares the upload
        try:
            inp.prefetch(_PREFETCH)
        except Exception as e:  # the body broke (the client left, a limit): answer anyway
            log.debug("request body: %s", e)

    def _whole(self, ex, body):
        """One complete reply (http_reply: the library sets Content-Length)."""
        if ex.input is not None:
            self._prefetch(ex)
        ex.sent = True
        if ex.inline or ex.lp.direct:
            self._l_reply(ex, ex.code, ex.reason, ex.block, body)
        else:
            ex.lp.post(self._l_reply, ex, ex.code, ex.reason, ex.block, body)

    def _write(self, ex, data):
        """Worker side: one body chunk, the head first; pacing."""
        if ex.gone or ex.stop:
            return
        if ex.head:
            if not ex.sent:
                self._head_only(ex)
            return
        cl = ex.cl
        if cl is not None and ex.nbytes + len(data) > cl:
            extra = ex.nbytes + len(data) - cl
            log.error("%s %s: the application sent %d bytes past its Content-Length %d; the connection is closed",
                      ex.env["REQUEST_METHOD"], ex.env["PATH_INFO"], extra, cl)
            data = data[:len(data) - extra]
            ex.stop = True  # no more from the iterable; the connection closes after what fits
        ex.nbytes += len(data)
        if not ex.sent:
            if ex.status is None:
                raise AssertionError("the WSGI application gave body data before calling start_response")
            if ex.input is not None:
                self._prefetch(ex)
            ex.sent = True
            self._emit(ex, self._l_start, ex, ex.code, ex.reason, ex.block, data)
        elif data:
            self._emit(ex, self._l_chunk, ex, data)
        if ex.stop:
            self._emit(ex, self._l_close, ex)
            return
        if not ex.inline:
            ex.posted += len(data)
            if ex.blocked or ex.posted - ex.taken > _AHEAD:
                self._wait_room(ex)

    def _head_only(self, ex):
        """HEAD: the head alone, with the length the app declared (or the
        chunked framing a GET would get)."""
        if ex.cl is not None or ex.code == 204 or ex.code == 304:
            self._whole(ex, b"")
        else:
            if ex.input is not None:
                self._prefetch(ex)
            ex.sent = True
            self._emit(ex, self._l_start, ex, ex.code, ex.reason, ex.block, b"")
            self._emit(ex, self._l_end, ex)

    def _wait_room(self, ex):
        ev = ex.ev
        if ev is None:
            ev = ex.ev = threading.Event()
        deadline = time.monotonic() + self.send_timeout
        c = ex.conn
        while (ex.blocked or ex.posted - ex.taken > _AHEAD) and not ex.gone:
            ev.clear()
            ex.waiting = True
            if not (ex.blocked or ex.posted - ex.taken > _AHEAD) or ex.gone:
                break
            if c._closed or self._closing:
                ex.gone = True
                break
            if time.monotonic() >= deadline:
                log.error("%s %s: the client read nothing for %.0f s; the connection is closed",
                          ex.env["REQUEST_METHOD"], ex.env["PATH_INFO"], self.send_timeout)
                ex.gone = True
                ex.lp.post(self._l_abort, ex, True)
                break
            ev.wait(_SLICE_S)
        ex.waiting = False

    def _send_file(self, ex, wrapper):
        """wsgi.file_wrapper over a real file: nsv_reply_file. False to send
        it by reading instead."""
        mode = self.file_wrapper
        if mode == "read" or ex.status is None or ex.code in (204, 206, 304):
            return False
        upper = ex.block.upper()
        if b"\nCONTENT-RANGE:" in b"\n" + upper:
            return False  # the app answered a range itself
        # "auto": the file as a plain body (NSV_STATIC_PLAIN), so the answer
        # is the app's own, as other WSGI servers send it: its headers and
        # status stand, the library adds no validators and answers no
        # condition or Range. A library without the flag would add its own,
        # so there an app that set validators is read instead.
        plain = mode == "auto" and _HAS_PLAIN
        if mode == "auto" and not plain and (b"\nETAG:" in b"\n" + upper or b"\nLAST-MODIFIED:" in b"\n" + upper):
            return False
        f = real_file(wrapper)
        if f is None:
            return False
        path, size = f
        if ex.cl is not None and ex.cl != size:
            return False  # the app declared another length: it is checked as it is read
        if ex.input is not None:
            self._prefetch(ex)
        ex.sent = True
        block = _strip(ex.block, ("content-length",) if plain else _FILE_OWN)
        # "sender" with 200: the file sender answers conditional and Range
        # requests itself (its ETag and Last-Modified replace the app's);
        # another status sends the whole file with it.
        status = ex.code if plain or ex.code != 200 else 0
        if ex.inline or ex.lp.direct:
            self._l_file(ex, status, block, path, wrapper, plain)
        else:
            ex.lp.post(self._l_file, ex, status, block, path, wrapper, plain)
        return True

    def _failed(self, ex, what, trace=True):
        env = ex.env
        if trace:
            log.exception("%s: %s %s", what, env.get("REQUEST_METHOD"), env.get("PATH_INFO"))
        else:
            log.error("%s: %s %s", what, env.get("REQUEST_METHOD"), env.get("PATH_INFO"))
        if ex.gone or ex.stop:
            return
        if not ex.sent:
            if ex.input is not None:
                self._prefetch(ex)
            ex.sent = True
            ex.code = 500
            if ex.inline or ex.lp.direct:
                self._l_reply(ex, 500, None, _500_HDR, _500_BODY)
            else:
                ex.lp.post(self._l_reply, ex, 500, None, _500_HDR, _500_BODY)
        else:
            # Part of the body went out: the client must not take it for whole.
            # (stop, not gone: what was posted before still goes out.)
            ex.stop = True
            self._emit(ex, self._l_abort, ex)

    # ---- polling thread (or a sharded server's worker): library calls ----

    def _l_reply(self, ex, code, reason, block, body):
        c = ex.conn
        try:
            if reason is not None:
                _set_reason(c, reason)
            if not c.http_reply(code, block, body):
                ex.gone = True
        except Exception as e:
            log.error("%s %s: the reply was refused (%s); answering 500", ex.env["REQUEST_METHOD"],
                      ex.env["PATH_INFO"], e)
            ex.code = 500
            try:
                c.http_reply(500, _500_HDR, _500_BODY)
            except Exception:
                c.close()
        self._done(ex)

    def _l_start(self, ex, code, reason, block, first):
        c = ex.conn
        try:
            if reason is not None:
                _set_reason(c, reason)
            if not c.reply_start(code, block):
                ex.gone = True
                ex.wake()
                return
        except Exception as e:
            log.error("%s %s: the reply was refused (%s); answering 500", ex.env["REQUEST_METHOD"],
                      ex.env["PATH_INFO"], e)
            ex.code = 500
            ex.gone = True
            ex.wake()
            try:
                c.http_reply(500, _500_HDR, _500_BODY)
            except Exception:
                c.close()
            self._done(ex)
            return
        if first:
            self._l_chunk(ex, first)

    def _l_chunk(self, ex, data):
        if ex.stalled is not None:
            ex.stalled.append((self._l_chunk, data))  # counted as taken when replayed
            return
        ex.taken += len(data)
        if ex.gone:
            ex.wake()
            return
        c = ex.conn
        if c._closed:
            ex.gone = True
            ex.wake()
            return
        lp = ex.lp
        r = _send_chunk(lp.s, c.id, data, len(data))
        if r:
            if r == _EAGAIN:
                ex.taken -= len(data)  # replayed by _unstall, which counts it again
                ex.stalled = collections.deque([(self._l_chunk, data)])
                ex.blocked = True
                _when_drained(c, lambda: self._unstall(ex))
                return
            if r == _ESTALE:
                c._closed = True
            else:
                log.error("%s %s: a body chunk was refused (%s); the connection is closed",
                          ex.env["REQUEST_METHOD"], ex.env["PATH_INFO"], _errname(r))
                c.close()
            ex.gone = True
            ex.wake()
            self._done(ex)
            return
        if not ex.blocked:
            if lp.sharded:
                if c._blocked:
                    ex.blocked = True
                    _when_drained(c, ex.drained)
                    return
                # The I/O thread reports a full queue only once it has
                # taken the chunks; until then they wait in its inbox, where
                # the library allows 4 x max_output. Past _BURST bytes
                # without word from it, pause a tick and look again.
                ex.unconfirmed += len(data)
                if ex.unconfirmed >= _BURST:
                    ex.blocked = True
                    lp.m.call_later(_TICK_S, self._l_tick, ex)
                    return
            elif _conn_queued(lp.s, c.id) >= lp.hw:
                # The library emitted TCP_WRITABLE code 0 with this chunk (or
                # earlier); code 1 follows at the low water mark.
                ex.blocked = True
                _when_drained(c, ex.drained)
                return
        ex.wake()

    def _l_tick(self, ex):
        """Sharded: a pause after a burst is over (see _l_chunk)."""
        ex.unconfirmed = 0
        c = ex.conn
        if c._blocked and not c._closed:
            _when_drained(c, ex.drained)  # the I/O thread said the queue is full: wait for it
        else:
            ex.drained()

    def _unstall(self, ex):
        q, ex.stalled = ex.stalled, None
        ex.blocked = False
        while q:
            fn, arg = q.popleft()
            if fn == self._l_chunk:
                fn(ex, arg)
            else:
                fn(ex)
            if ex.stalled is not None:  # stalled again: keep the rest behind it
                ex.stalled.extend(q)
                return
        ex.drained()

    def _l_end(self, ex):
        if ex.stalled is not None:
            ex.stalled.append((self._l_end, None))
            return
        c = ex.conn
        if not ex.gone and not c._closed:
            try:
                c.reply_end()
            except Exception as e:
                log.debug("reply_end: %s", e)  # a short fixed-length body: the library closed it (logged)
        self._done(ex)

    def _l_close(self, ex):
        """Close once what was sent has gone out (a body cut at its length)."""
        if ex.stalled is not None:
            ex.stalled.append((self._l_close, None))
            return
        c = ex.conn
        if not c._closed:
            try:
                if ex.cl is not None and ex.nbytes >= ex.cl:
                    c.reply_end()
                c.drain()
            except Exception:
                c.close()
        ex.wake()
        self._done(ex)

    def _l_abort(self, ex, hard=False):
        """End a response that cannot complete: close the connection after
        what was queued (the client sees a cut body, never a whole one), or
        at once (hard: the client does not read)."""
        ex.gone = True
        ex.stalled = None
        c = ex.conn
        if not c._closed:
            if hard:
                c.close()
            else:
                try:
                    c.drain()
                except Exception:
                    c.close()
        ex.wake()
        self._done(ex)

    def _l_file(self, ex, status, block, path, wrapper, plain=False):
        c = ex.conn
        try:
            if ex.reason is not None:
                _set_reason(c, ex.reason)
            if plain:
                sent = c.send_file(_ReqHeaders(ex.req), path, status=status, headers=block, plain=True)
            else:
                sent = c.send_file(_ReqHeaders(ex.req), path, status=status, headers=block)
        except Exception as e:
            log.error("%s %s: the file could not be sent (%s)", ex.env["REQUEST_METHOD"], ex.env["PATH_INFO"], e)
            sent = False
        if not sent and c._pending and not c._closed:
            # The file went away, or its status was refused: read it instead.
            ex.sent = False
            if ex.inline or ex.lp.direct:
                self._fallback_file(ex, wrapper)
            else:
                self._jobs.put(_Later(self._fallback_file, ex, wrapper))
            return
        self._close_wrapper(wrapper)
        self._done(ex)

    def _fallback_file(self, ex, wrapper):
        ex.it = iter(wrapper)
        ex.result = wrapper
        self._pump(ex)

    def _close_wrapper(self, wrapper):
        close = getattr(wrapper, "close", None)
        if close is not None:
            try:
                close()
            except Exception:
                log.exception("the close() of the file wrapper failed")

    def _done(self, ex):
        """A response is over: the access log line, the request count."""
        if ex.finished:
            return
        ex.finished = True
        if self.access_log:
            env = ex.env
            access.info('%s - "%s %s HTTP/%s" %d', "%s:%s" % (env["REMOTE_ADDR"], env["REMOTE_PORT"]),
                        env["REQUEST_METHOD"], ex.uri, env["SERVER_PROTOCOL"][5:], ex.code)
        n = self.requests = next(self._count)
        limit = self.limit_max_requests
        if limit is not None and n == limit:
            log.info("%d requests served (limit_max_requests): draining", n)
            try:
                ex.lp.m.drain_start(self.drain_timeout_ms)
            except Exception:
                log.exception("drain_start failed")


class _Later:
    """A job for a worker thread that is not a request (a file read instead
    of sent)."""
    __slots__ = ("fn", "args")

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args


def _when_drained(c, fn):
    # conn.on_drain(fn) would call fn at once while the WRITABLE code 0 of
    # this very chunk is still on its way; the code 1 that follows it runs
    # the list either way.
    if c._drained is None:
        c._drained = []
    c._drained.append(fn)


def _set_reason(c, reason):
    """The app's own reason phrase for the next status line ("299 Custom
    Reason"), where the library can send one (nsv_set_reason, 1.2)."""
    fn = getattr(c, "set_reason", None)
    if fn is not None:
        fn(reason)
    elif _lib_reason is not None:
        r = reason.encode("latin-1")
        _lib_reason(c._s, c.id, r, len(r))


try:
    _lib_reason = lib.nsv_set_reason
except AttributeError:  # a 1.1 library: the standard phrase goes out
    _lib_reason = None


def _errname(code):
    from ._ffi import ffi
    return ffi.string(lib.nsv_errname(code)).decode()


def _url_host(url):
    rest = url.split("://", 1)[-1].split("/", 1)[0]
    if rest.startswith("["):
        return rest[1:rest.find("]")]
    return rest.rsplit(":", 1)[0] if ":" in rest else rest


def _add_headers(env, raw):
    """HTTP_* (and CONTENT_TYPE, CONTENT_LENGTH) from the request's header
    block. A name with "_" is dropped: HTTP_X_FORWARDED_FOR must come only
    from X-Forwarded-For, never from a client's X_Forwarded_For. Repeated
    headers are joined with ", " (Cookie with "; ")."""
    if not raw:
        return
    for line in raw.decode("latin-1").split("\r\n"):
        if not line:
            continue
        name, _, value = line.partition(":")
        if "_" in name:
            continue
        value = value.strip(" \t")
        key = name.upper().replace("-", "_")
        if key == "CONTENT_TYPE" or key == "CONTENT_LENGTH":
            env[key] = value
            continue
        if key == "HOST":
            _host(env, value)
        key = "HTTP_" + key
        old = env.get(key)
        if old is None:
            env[key] = value
        else:
            env[key] = old + ("; " if key == "HTTP_COOKIE" else ", ") + value


def _host(env, value):
    # SERVER_NAME / SERVER_PORT from Host (PEP 3333 keeps the listener's
    # otherwise); "[::1]:8080", "example.com:8080", "example.com".
    key = (value, env["wsgi.url_scheme"])
    r = _HOSTS.get(key)
    if r is None:
        r = _parse_host(*key)
        if len(_HOSTS) >= 256:
            _HOSTS.clear()
        _HOSTS[key] = r
    name, port = r
    if name:
        env["SERVER_NAME"] = name
        if port:
            env["SERVER_PORT"] = port


_HOSTS = {}


def _parse_host(value, scheme):
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None, None
        name, rest = value[1:end], value[end + 1:]
        port = rest[1:] if rest.startswith(":") else ""
    else:
        name, _, port = value.partition(":")
    if not name:
        return None, None
    if port.isascii() and port.isdigit():
        return name, port
    if not port:
        return name, "443" if scheme == "https" else "80"
    return name, None
