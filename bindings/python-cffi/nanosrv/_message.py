"""Messages handed to handlers, read lazily from the poll arena.

An event record is unpacked into one tuple (EVENT.unpack_from). A message
keeps that tuple and the arena buffer and slices strings only when a
property is read. The arena is overwritten by the next poll, so a message
that outlives its batch is frozen first: the bytes it refers to are copied
and its offsets rebased (see Manager._dispatch).
"""
import enum
import struct

# nsv_event: conn, tag, type, flags, route, code, nparams, nheaders,
# 7 (off, len) pairs, peer_port, listener, 8 reserved bytes = 112 bytes.
EVENT = struct.Struct("=QQIIiiII14III8x")
(CONN, TAG, TYPE, FLAGS, ROUTE, CODE, NPARAMS, NHEADERS, METHOD, METHOD_LEN, PATH, PATH_LEN,
 QUERY, QUERY_LEN, HEADERS, HEADERS_LEN, PARAMS, PARAMS_LEN, BODY, BODY_LEN, PEER, PEER_LEN,
 PEER_PORT, LISTENER) = range(24)
_PAIRS = (METHOD, PATH, QUERY, HEADERS, PARAMS, BODY, PEER)

EVF_KEEPALIVE, EVF_HEAD, EVF_HTTP10, EVF_CHUNKED, EVF_UPGRADE, EVF_TLS = 1, 2, 4, 8, 16, 32


class Event(enum.IntEnum):
    """Event kinds passed to http_listen_event handlers (names as in nanosrv)."""
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
    Wakeup = 15
    User = 16


class WsOpcode(enum.IntEnum):
    Continue = 0
    Text = 1
    Binary = 2
    Close = 8
    Ping = 9
    Pong = 10


def freeze_event(e, arena):
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


class HttpMessage:
    """A complete HTTP request (also the request of a WebSocket upgrade)."""
    __slots__ = ("_a", "_e", "_h")

    def __init__(self, arena, e):
        self._a = arena
        self._e = e
        self._h = None

    def _freeze(self):
        if not isinstance(self._a, bytes):
            self._a, self._e = freeze_event(self._e, self._a)

    def _s(self, k):
        e = self._e
        o = e[k]
        return self._a[o:o + e[k + 1]]

    @property
    def method(self):
        e = self._e
        o = e[METHOD]
        return self._a[o:o + e[METHOD_LEN]].decode("latin-1")

    @property
    def uri(self):
        """The path, raw (not percent-decoded), without the query."""
        e = self._e
        o = e[PATH]
        return self._a[o:o + e[PATH_LEN]].decode("latin-1")

    path = uri

    @property
    def query(self):
        e = self._e
        o = e[QUERY]
        return self._a[o:o + e[QUERY_LEN]].decode("latin-1")

    @property
    def body(self):
        """The body as text (UTF-8; undecodable bytes kept as surrogates, so
        replying with it gives back the same bytes)."""
        return self.body_bytes.decode("utf-8", "surrogateescape")

    @property
    def body_bytes(self):
        e = self._e
        o = e[BODY]
        return self._a[o:o + e[BODY_LEN]]

    @property
    def body_len(self):
        return self._e[BODY_LEN]

    @property
    def raw_path(self):
        return self._s(PATH)

    @property
    def raw_query(self):
        return self._s(QUERY)

    @property
    def raw_method(self):
        return self._s(METHOD)

    @property
    def status_code(self):
        return 0  # requests carry no status; kept for nanosrv compatibility

    @property
    def route(self):
        return self._e[ROUTE]

    @property
    def keep_alive(self):
        return bool(self._e[FLAGS] & EVF_KEEPALIVE)

    @property
    def is_head(self):
        return bool(self._e[FLAGS] & EVF_HEAD)

    @property
    def http10(self):
        return bool(self._e[FLAGS] & EVF_HTTP10)

    @property
    def wants_upgrade(self):
        return bool(self._e[FLAGS] & EVF_UPGRADE)

    @property
    def peer(self):
        """(address, port) of the client."""
        return self._s(PEER).decode("latin-1"), self._e[PEER_PORT]

    @property
    def listener(self):
        return self._e[LISTENER]

    @property
    def headers(self):
        """List of (name, value) pairs, names as sent."""
        out = []
        for line in self._s(HEADERS).decode("latin-1").split("\r\n"):
            if line:
                name, _, value = line.partition(":")
                out.append((name, value.strip(" \t")))
        return out

    def header(self, name, default=None):
        """Value of the first header called `name` (case-insensitive), else default."""
        h = self._h
        if h is None:
            h = {}
            for k, v in self.headers:
                h.setdefault(k.lower(), v)
            self._h = h
        return h.get(name.lower(), default)

    @property
    def params(self):
        """Route parameters as a dict ("*" for a trailing wildcard)."""
        parts = self._s(PARAMS).split(b"\0")
        n = self._e[NPARAMS]
        return {parts[2 * i].decode("latin-1"): parts[2 * i + 1].decode("utf-8", "surrogateescape")
                for i in range(n)}

    def param(self, name, default=None):
        return self.params.get(name, default)

    def credentials(self):
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

    def __repr__(self):
        return "<HttpMessage %s %s>" % (self.method, self.uri)


class WsMessage:
    """One WebSocket message: `data` is str for text, bytes for binary."""
    __slots__ = ("data", "opcode", "flags")

    def __init__(self, data, opcode, flags=0):
        self.data = data
        self.opcode = opcode
        self.flags = flags

    @property
    def is_text(self):
        return self.opcode == WsOpcode.Text

    def __repr__(self):
        return "<WsMessage opcode=%d %d bytes>" % (self.opcode, len(self.data))
