"""Response header blocks from the shapes Python code uses, checked.

A header given as a name and a value (a dict, a list of pairs, WSGI's
start_response list) becomes one "Name: value\\r\\n" line only if the name
is an HTTP token and the value holds no CR, LF, NUL or other control byte
(HTAB is allowed): otherwise a value such as "a\\r\\nSet-Cookie: x=1" would
reach the client as a second header. ValueError is raised before anything
is sent. A block given as str or bytes is the host's own wire text; the
library checks its lines (nsv_reply refuses a malformed block).
"""
import re
from typing import Any, Tuple

# RFC 9110 token characters.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
# Any control byte but HTAB, and DEL.
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def check_header(name: Any, value: Any) -> Tuple[str, str]:
    """(name, value) as str, or ValueError naming the header and the fault."""
    if not isinstance(name, str):
        if isinstance(name, (bytes, bytearray)):
            name = bytes(name).decode("latin-1")
        else:
            raise TypeError("header name must be str, not %s" % type(name).__name__)
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("latin-1")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    elif not isinstance(value, str):
        raise TypeError("header %r: value must be str, bytes or a number, not %s" % (name, type(value).__name__))
    if not _TOKEN.match(name):
        raise ValueError("header name %r is not an HTTP token" % (name,))
    m = _BAD_VALUE.search(value)
    if m is not None:
        raise ValueError("header %s: value has control byte %r at offset %d (CR, LF, NUL and other "
                         "control characters are refused)" % (name, m.group(), m.start()))
    return name, value


def header_bytes(headers: Any) -> bytes:
    """The wire block for str/bytes (as given), a dict, or (name, value) pairs."""
    if headers is None:
        return b""
    t = type(headers)
    if t is bytes:
        return headers
    if t is str:
        return headers.encode("utf-8", "surrogateescape")
    if isinstance(headers, (bytearray, memoryview)):
        return bytes(headers)
    items = headers.items() if hasattr(headers, "items") else headers
    out = []
    for pair in items:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError("headers must be str, bytes, a dict or (name, value) pairs, not a %s item"
                            % type(pair).__name__)
        name, value = check_header(pair[0], pair[1])
        out.append("%s: %s\r\n" % (name, value))
    return "".join(out).encode("latin-1", "surrogateescape") if out else b""


_MISSING = object()


class Headers:
    """Received headers (an HTTP client response, a WebSocket client's 101
    answer): a read-only multi-dict whose lookups ignore case. `h[name]` and
    `get(name)` give the first value, `getall(name)` / `getlist(name)` every
    value in order, `name in h`; `items()`, `keys()`, `values()` and
    iteration give every pair in the order received, names as sent, repeats
    included; `len()` counts lines. `header(name)` is `get(name)`, as on a
    request message."""
    __slots__ = ("_pairs", "_first")

    def __init__(self, pairs: Any = ()) -> None:
        self._pairs = list(pairs)
        self._first: Any = None

    @classmethod
    def from_block(cls, block: bytes) -> "Headers":
        """From b"Name: value\\r\\n" lines (latin-1, values trimmed)."""
        out = []
        for line in block.decode("latin-1").split("\r\n"):
            if line:
                name, _, value = line.partition(":")
                out.append((name, value.strip(" \t")))
        return cls(out)

    def _index(self) -> Any:
        f = self._first
        if f is None:
            f = {}
            for k, v in self._pairs:
                f.setdefault(k.lower(), v)
            self._first = f
        return f

    def __getitem__(self, name: str) -> str:
        return self._index()[name.lower()]

    def get(self, name: str, default: Any = None) -> Any:
        return self._index().get(name.lower(), default)

    header = get

    def getone(self, name: str, default: Any = _MISSING) -> Any:
        f = self._index()
        if name.lower() in f:
            return f[name.lower()]
        if default is _MISSING:
            raise KeyError(name)
        return default

    def getall(self, name: str, default: Any = _MISSING) -> Any:
        n = name.lower()
        out = [v for k, v in self._pairs if k.lower() == n]
        if out:
            return out
        if default is _MISSING:
            raise KeyError(name)
        return default

    def getlist(self, name: str) -> Any:
        n = name.lower()
        return [v for k, v in self._pairs if k.lower() == n]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._index()

    def __iter__(self) -> Any:
        return (k for k, _ in self._pairs)

    def __len__(self) -> int:
        return len(self._pairs)

    def __bool__(self) -> bool:
        return bool(self._pairs)

    def items(self) -> Any:
        return list(self._pairs)

    def keys(self) -> Any:
        return [k for k, _ in self._pairs]

    def values(self) -> Any:
        return [v for _, v in self._pairs]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Headers):
            return self._pairs == other._pairs
        return NotImplemented

    def __repr__(self) -> str:
        return "Headers(%r)" % (self._pairs,)
