"""Messages handed to handlers, read lazily from the poll arena.

An event record is unpacked into one tuple (EVENT.unpack_from). A message
keeps that tuple and the arena buffer and slices strings only when a
property is read. The arena is overwritten by the next poll, so a message
that outlives its batch is frozen first: the bytes it refers to are copied
and its offsets rebased (see Manager._dispatch).
"""
import enum
import json as _json
import struct
from typing import Any, Callable, Dict, List, Optional, Tuple
from urllib.parse import unquote_to_bytes

from ._ffi import EVENT_FIELDS, EVENT_SIZE, lib

# The struct format of one nsv_event record, built from the cdef'd layout
# (field order, offsets, types; gaps become pad bytes), so unpacking stays
# one struct call per record. FIELD maps a field name to its tuple index.
_CODES = {"uint64_t": "Q", "int64_t": "q", "uint32_t": "I", "int32_t": "i", "uint16_t": "H",
          "int16_t": "h", "uint8_t": "B", "int8_t": "b", "double": "d"}


def _event_format(fields: List[Tuple[str, int, str]], size: int) -> str:
    """"=2Q2I2i20I" for today's record: runs of one type are counted, which
    struct unpacks much faster than the same codes spelled out one by one."""
    codes, at = [], 0
    for name, off, ctype in sorted(fields, key=lambda f: f[1]):
        if ctype not in _CODES:
            raise ImportError("nanosrv: nsv_event field %s has type %s, which this binding cannot read"
                              % (name, ctype))
        if off < at:
            raise ImportError("nanosrv: nsv_event field %s overlaps the previous one" % name)
        if off > at:
            codes.append("x" * (off - at))
        codes.append(_CODES[ctype])
        at = off + struct.calcsize("=" + _CODES[ctype])
    if size > at:
        codes.append("x" * (size - at))
    runs: List[List[Any]] = []
    for c in "".join(codes):
        if runs and runs[-1][0] == c:
            runs[-1][1] += 1
        else:
            runs.append([c, 1])
    return "=" + "".join(c if n == 1 else "%d%s" % (n, c) for c, n in runs)


EVENT = struct.Struct(_event_format(EVENT_FIELDS, EVENT_SIZE))
FIELD = {name: i for i, (name, _, _) in enumerate(sorted(EVENT_FIELDS, key=lambda f: f[1]))}
CONN, TAG, TYPE, FLAGS = FIELD["conn"], FIELD["tag"], FIELD["type"], FIELD["flags"]
ROUTE, CODE, NPARAMS, NHEADERS = FIELD["route"], FIELD["code"], FIELD["nparams"], FIELD["nheaders"]
METHOD, METHOD_LEN = FIELD["method_off"], FIELD["method_len"]
PATH, PATH_LEN = FIELD["path_off"], FIELD["path_len"]
QUERY, QUERY_LEN = FIELD["query_off"], FIELD["query_len"]
HEADERS, HEADERS_LEN = FIELD["headers_off"], FIELD["headers_len"]
PARAMS, PARAMS_LEN = FIELD["params_off"], FIELD["params_len"]
BODY, BODY_LEN = FIELD["body_off"], FIELD["body_len"]
PEER, PEER_LEN = FIELD["peer_off"], FIELD["peer_len"]
TLS, TLS_LEN = FIELD["tls_off"], FIELD["tls_len"]
PEER_PORT, LISTENER = FIELD["peer_port"], FIELD["listener"]
# Every (offset, length) pair into the arena, as indices: what a frozen
# message must copy. The length index follows its offset index.
_PAIRS = tuple(i for name, i in FIELD.items()
               if name.endswith("_off") and FIELD.get(name[:-4] + "_len") == i + 1)

EVF_KEEPALIVE, EVF_HEAD, EVF_HTTP10 = lib.NSV_EVF_KEEPALIVE, lib.NSV_EVF_HEAD, lib.NSV_EVF_HTTP10
EVF_CHUNKED, EVF_UPGRADE, EVF_TLS, EVF_EOF = (lib.NSV_EVF_CHUNKED, lib.NSV_EVF_UPGRADE, lib.NSV_EVF_TLS,
                                              lib.NSV_EVF_EOF)
EVF_STREAM_BODY = lib.NSV_EVF_STREAM_BODY
EVF_HTTP2 = lib.NSV_EVF_HTTP2
EVF_PROXY = getattr(lib, "NSV_EVF_PROXY", 256)


class Event(enum.IntEnum):
    """Event kinds passed to http_listen_event handlers (names and values as
    in nanosrv: Wakeup 20, User 100)."""
    Error = 0
    Open = 1
    Poll = 2
    Resolve = 3
    Connect = 4
    Accept = 5
    TlsHandshake = 6
    Read = 7
    Write = 8
    Close = 9
    HttpHeaders = 10
    HttpMessage = 11
    WsOpen = 12
    WsMessage = 13
    WsControl = 14
    Wakeup = 20
    User = 100


# Text, Binary, Ping and Pong are the library's nsv_ws_opcode values;
# Continue and Close are RFC 6455 opcodes the library handles itself.
WsOpcode = enum.IntEnum("WsOpcode", [("Continue", 0), ("Text", lib.NSV_WS_TEXT), ("Binary", lib.NSV_WS_BINARY),
                                     ("Close", 8), ("Ping", lib.NSV_WS_PING), ("Pong", lib.NSV_WS_PONG)])


def freeze_event(e: Tuple[int, ...], arena: Any) -> Tuple[bytes, Tuple[int, ...]]:
    """Copy the bytes an event refers to; return (bytes, rebased tuple)."""
    lo, hi = None, 0
    for k in _PAIRS:
        if e[k + 1]:
            lo = e[k] if lo is None or e[k] < lo else lo
            hi = max(hi, e[k] + e[k + 1])
    lo = lo or 0
    data = arena[lo:hi] if hi > lo else b""
    if not lo:
        return data, e
    t = list(e)
    for k in _PAIRS:
        t[k] -= lo if t[k] >= lo else t[k]
    return data, tuple(t)


class TlsInfo:
    """TLS facts of a request: `sni`, the server name the client asked for
    ("" if none), and `peer_subject`, the subject of the client certificate
    when one was verified against the server's CA ("" otherwise)."""
    __slots__ = ("sni", "peer_subject")

    def __init__(self, sni: str, peer_subject: str) -> None:
        self.sni = sni
        self.peer_subject = peer_subject

    def __repr__(self) -> str:
        return "TlsInfo(sni=%r, peer_subject=%r)" % (self.sni, self.peer_subject)


class HttpMessage:
    """A complete HTTP request (also the request of a WebSocket upgrade)."""
    __slots__ = ("_a", "_e", "_h", "_c", "_p")

    def __init__(self, arena: Any, e: Tuple[int, ...], conn: Any = None) -> None:
        self._a = arena
        self._e = e
        self._h: Optional[Dict[str, str]] = None
        self._c = conn
        self._p: Optional[Dict[str, Any]] = None  # params, decoded and converted once

    def _freeze(self) -> None:
        if not isinstance(self._a, bytes):
            self._a, self._e = freeze_event(self._e, self._a)

    def _s(self, k: int) -> bytes:
        e = self._e
        o = e[k]
        return self._a[o:o + e[k + 1]]

    @property
    def method(self) -> str:
        e = self._e
        o = e[METHOD]
        return self._a[o:o + e[METHOD_LEN]].decode("latin-1")

    @property
    def uri(self) -> str:
        """The path, raw (not percent-decoded), without the query."""
        e = self._e
        o = e[PATH]
        return self._a[o:o + e[PATH_LEN]].decode("latin-1")

    path = uri

    @property
    def query(self) -> str:
        e = self._e
        o = e[QUERY]
        return self._a[o:o + e[QUERY_LEN]].decode("latin-1")

    @property
    def body(self) -> bytes:
        """The body as bytes (as nanosrv has it); `text` decodes it."""
        e = self._e
        o = e[BODY]
        return self._a[o:o + e[BODY_LEN]]

    @property
    def text(self) -> str:
        """The body decoded strictly as UTF-8 (UnicodeDecodeError if it is not)."""
        return self.body.decode("utf-8")

    @property
    def body_bytes(self) -> bytes:
        e = self._e
        o = e[BODY]
        return self._a[o:o + e[BODY_LEN]]

    @property
    def body_len(self) -> int:
        """Bytes of a whole body (0 when it is streamed: see `stream`)."""
        return self._e[BODY_LEN]

    @property
    def streamed(self) -> bool:
        """True when the body follows in pieces: read it from `stream`."""
        return bool(self._e[FLAGS] & EVF_STREAM_BODY)

    @property
    def stream(self) -> Any:
        """The body as a BodyStream: `for chunk in msg.stream`, `async for`,
        read(n) / await aread(n). A body that arrived whole is one chunk."""
        from .stream import BodyStream
        if self._e[FLAGS] & EVF_STREAM_BODY:
            return self._c._body
        return BodyStream.complete(self.body_bytes)

    @property
    def query_params(self) -> Any:
        """The query string as a MultiDict of decoded pairs, repeats in
        order (`get` the first, `getall`/`getlist` every value). `query`
        stays the raw string."""
        from .forms import parse_form
        return parse_form(self._s(QUERY))

    @property
    def form(self) -> Any:
        """An application/x-www-form-urlencoded body as a MultiDict (empty
        for other media types). For a streamed body parse what you read:
        nanosrv.parse_form(msg.stream.read()); multipart bodies: see
        nanosrv.multipart."""
        from .forms import MultiDict, parse_form
        ctype = (self.header("content-type") or "").split(";", 1)[0].strip().lower()
        if ctype != "application/x-www-form-urlencoded":
            return MultiDict()
        if self._e[FLAGS] & EVF_STREAM_BODY:
            raise RuntimeError("the body is streamed: parse it with nanosrv.parse_form(msg.stream.read())")
        return parse_form(self.body_bytes)

    @property
    def cookies(self) -> Dict[str, str]:
        """The Cookie header as a dict (a name sent twice keeps its first value)."""
        from .forms import parse_cookies
        h = self.header("cookie")
        return parse_cookies(h) if h else {}

    @property
    def raw_headers(self) -> bytes:
        """The header block as sent: b"Name: value\\r\\n" lines."""
        return self._s(HEADERS)

    @property
    def raw_path(self) -> bytes:
        return self._s(PATH)

    @property
    def raw_query(self) -> bytes:
        return self._s(QUERY)

    @property
    def raw_method(self) -> bytes:
        return self._s(METHOD)

    @property
    def status_code(self) -> int:
        return 0  # requests carry no status; kept for nanosrv compatibility

    @property
    def route(self) -> int:
        return self._e[ROUTE]

    @property
    def keep_alive(self) -> bool:
        return bool(self._e[FLAGS] & EVF_KEEPALIVE)

    @property
    def is_head(self) -> bool:
        return bool(self._e[FLAGS] & EVF_HEAD)

    @property
    def http10(self) -> bool:
        return bool(self._e[FLAGS] & EVF_HTTP10)

    @property
    def http2(self) -> bool:
        """The request came on an HTTP/2 stream (answered like any other)."""
        return bool(self._e[FLAGS] & EVF_HTTP2)

    @property
    def wants_upgrade(self) -> bool:
        return bool(self._e[FLAGS] & EVF_UPGRADE)

    @property
    def tls(self) -> Optional[TlsInfo]:
        """None on a plain connection, else a TlsInfo (`sni`, `peer_subject`)."""
        e = self._e
        if not e[FLAGS] & EVF_TLS:
            return None
        o = e[TLS]
        parts = self._a[o:o + e[TLS_LEN]].split(b"\0")
        sni = parts[0].decode("utf-8", "surrogateescape") if parts else ""
        subject = parts[1].decode("utf-8", "surrogateescape") if len(parts) > 1 else ""
        return TlsInfo(sni, subject)

    @property
    def proxy(self) -> Optional[Dict[str, Any]]:
        """None unless the connection came through a front that sent a
        PROXY protocol header (listener option proxy_protocol); then the
        front's facts: {"front", "front_port" (the load balancer's address),
        "dst", "dst_port" (what the client connected to on it), "ssl" (the
        TLS version the client spoke to it), "authority" (its SNI), "alpn"}
        ("" or 0 when the header did not say; v1 carries only addresses).
        peer is already the client's."""
        e = self._e
        if not e[FLAGS] & EVF_PROXY:
            return None
        from .ops import proxy_info
        return proxy_info(self._a, e[TLS], e[TLS_LEN])

    @property
    def disconnected(self) -> bool:
        """True once the client has ended its side of the connection: before
        this request was delivered (NSV_EVF_EOF), or since (NSV_EV_HANGUP, or
        the connection closed). A half-closed client still gets the reply;
        a long-poll or streaming handler may stop its work."""
        if self._e[FLAGS] & EVF_EOF:
            return True
        c = self._c
        return c is not None and (c._hangup or c._closed)

    def on_disconnect(self, fn: Callable[[], Any]) -> None:
        """Call fn() once the client has ended its side (at once if it has)."""
        if self._e[FLAGS] & EVF_EOF or self._c is None:
            fn()
        else:
            self._c._on_gone(fn)

    async def wait_disconnected(self) -> None:
        """asyncio: return once the client has ended its side."""
        if self.disconnected:
            return
        c = self._c
        if c._m._loop is None:
            raise RuntimeError("wait_disconnected() needs the asyncio host (nanosrv.aio); use on_disconnect(fn)")
        fut = c._m._loop.create_future()
        c._on_gone(lambda: fut.done() or fut.set_result(None))
        await fut

    @property
    def peer(self) -> Tuple[str, int]:
        """(address, port) of the client."""
        return self._s(PEER).decode("latin-1"), self._e[PEER_PORT]

    @property
    def listener(self) -> int:
        return self._e[LISTENER]

    @property
    def headers(self) -> List[Tuple[str, str]]:
        """List of (name, value) pairs, names as sent."""
        out = []
        for line in self._s(HEADERS).decode("latin-1").split("\r\n"):
            if line:
                name, _, value = line.partition(":")
                out.append((name, value.strip(" \t")))
        return out

    def header(self, name: str, default: Optional[str] = None) -> Optional[str]:
        """Value of the first header called `name` (case-insensitive), else default."""
        h = self._h
        if h is None:
            h = {}
            for k, v in self.headers:
                h.setdefault(k.lower(), v)
            self._h = h
        return h.get(name.lower(), default)

    @property
    def params(self) -> Dict[str, Any]:
        """Route parameters as a dict, percent-decoded ("/u/caf%C3%A9" gives
        "café"; bytes that are not UTF-8 stay as surrogates) and converted
        as the pattern says ("<int:id>" gives an int); "*" (or the name of
        a "<path:name>") for a trailing wildcard. raw_params has them as
        sent."""
        p = self._p
        if p is None:
            p = self._parse_params()
            self._p = p
        return p

    def _parse_params(self) -> Dict[str, Any]:
        p: Dict[str, Any] = {}
        parts = self._s(PARAMS).split(b"\0")
        for i in range(self._e[NPARAMS]):
            v = parts[2 * i + 1]
            if b"%" in v:
                v = unquote_to_bytes(v)
            p[parts[2 * i].decode("latin-1")] = v.decode("utf-8", "surrogateescape")
        c = self._c
        r = self._e[ROUTE]
        if c is not None and r >= 0:
            specs = c._m._route_spec
            if r < len(specs) and specs[r] is not None:
                p = specs[r].apply(p)
        return p

    @property
    def raw_params(self) -> Dict[str, str]:
        """Route parameters as they are in the path (not percent-decoded,
        not converted; latin-1 text of the raw bytes)."""
        parts = self._s(PARAMS).split(b"\0")
        return {parts[2 * i].decode("latin-1"): parts[2 * i + 1].decode("latin-1")
                for i in range(self._e[NPARAMS])}

    def param(self, name: str, default: Any = None) -> Any:
        """One route parameter (decoded, converted), else default."""
        return self.params.get(name, default)

    def json(self, *, require_content_type: bool = False) -> Any:
        """The body parsed as JSON. HTTPError 400 (the handler's caller
        answers it) for an empty body or bad JSON; with
        require_content_type=True, HTTPError 415 unless the Content-Type is
        application/json or */*+json (Flask's rule; Starlette parses any)."""
        from .errors import HTTPError
        if require_content_type:
            ct = (self.header("content-type") or "").split(";", 1)[0].strip().lower()
            if ct != "application/json" and not (ct.startswith("application/") and ct.endswith("+json")):
                raise HTTPError("expected a JSON body (Content-Type: application/json), got %s"
                                % (repr(ct) if ct else "no Content-Type"), 415)
        if self._e[FLAGS] & EVF_STREAM_BODY:
            raise RuntimeError("the body is streamed: parse it with json.loads(msg.stream.read())")
        body = self.body_bytes
        if not body:
            raise HTTPError("the request has no body; expected JSON", 400)
        try:
            return _json.loads(body)
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
            raise HTTPError("malformed JSON body: %s" % exc, 400) from None

    @property
    def args(self) -> Any:
        """Flask's name for query_params: the query as a MultiDict."""
        return self.query_params

    def credentials(self) -> Tuple[str, str]:
        """(user, password) from Basic authorization, or a Bearer token as
        ("", token); ("", "") when absent."""
        from .util import base64_decode
        auth = self.header("authorization") or ""
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "basic":
            try:
                user, _, pw = base64_decode(value.strip()).partition(":")
                return user, pw
            except ValueError:
                return "", ""
        if scheme.lower() == "bearer":
            return "", value.strip()
        return "", ""

    def __repr__(self) -> str:
        return "<HttpMessage %s %s>" % (self.method, self.uri)


_FIN = 0x80


class WsMessage:
    """One WebSocket message or control frame, as nanosrv has it: `data`
    (bytes, the payload), `text` (data decoded strictly as UTF-8),
    `opcode` (a WsOpcode), `flags` (FIN + opcode: 0x81 for a text
    message). A close frame has `code` and `reason` too (its data is the
    raw payload: the code in two bytes, then the reason)."""
    __slots__ = ("data", "opcode", "flags", "code")

    def __init__(self, data: bytes, opcode: int, code: int = 0) -> None:
        self.data = data
        self.opcode = WsOpcode(opcode)
        self.flags = _FIN | opcode
        self.code = code

    @property
    def text(self) -> str:
        if self.opcode == WsOpcode.Close:
            return self.reason
        return self.data.decode("utf-8")

    @property
    def reason(self) -> str:
        """The reason of a close frame (str)."""
        return self.data[2:].decode("utf-8", "replace") if self.opcode == WsOpcode.Close else ""

    @property
    def is_text(self) -> bool:
        return self.opcode == WsOpcode.Text

    def __repr__(self) -> str:
        return "<WsMessage opcode=%d %d bytes>" % (self.opcode, len(self.data))
