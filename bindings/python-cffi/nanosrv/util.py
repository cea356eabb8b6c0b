"""base64, URL and log helpers, the clock and build facts, over libnanosrv.

Each helper is one library call: the output buffer is sized from an upper
bound of the result instead of asking for the length first.
"""
import enum
from typing import Any, Union

from ._conn import to_bytes
from ._ffi import ENUMS, ffi, lib
from .errors import check

_EPARSE, _EURL = lib.NSV_EPARSE, lib.NSV_EURL

# NSV_LOG_NONE .. NSV_LOG_VERBOSE as LogLevel.Off .. LogLevel.Verbose, the
# nanosrv names; "None" (the name in nanosrv's README, not valid after a dot)
# is an alias of Off: LogLevel["None"], getattr(LogLevel, "None").
_levels = sorted((("Off" if k == "NSV_LOG_NONE" else k[len("NSV_LOG_"):].capitalize(), v)
                  for k, v in ENUMS["nsv_log_level"].items()), key=lambda kv: kv[1])
LogLevel = enum.IntEnum("LogLevel", _levels + [("None", lib.NSV_LOG_NONE)])  # type: ignore[misc]
LogLevel.NONE = LogLevel.Off  # type: ignore[attr-defined]


def _call(fn: Any, src: bytes, cap: int, *extra: Any) -> bytes:
    buf = ffi.new("char[]", cap or 1)
    n = fn(src, len(src), buf, cap, *extra)
    if n == _EPARSE:
        raise ValueError("malformed input")
    check(n)
    return ffi.buffer(buf, n)[:]


def base64_encode_bytes(data: Union[str, bytes]) -> bytes:
    """base64 of data (str as UTF-8) as ASCII bytes."""
    src = to_bytes(data, "data")
    return _call(lib.nsv_base64_encode, src, (len(src) + 2) // 3 * 4)


def base64_decode_bytes(text: Union[str, bytes]) -> bytes:
    """The bytes of base64 text. ValueError if malformed."""
    src = to_bytes(text, "data")
    return _call(lib.nsv_base64_decode, src, len(src) // 4 * 3 + 3)


def base64_encode(data: Union[str, bytes]) -> str:
    """str (UTF-8) or bytes -> base64 str."""
    return base64_encode_bytes(data).decode("ascii")


def base64_decode(text: Union[str, bytes]) -> str:
    """base64 -> str (UTF-8; undecodable bytes kept as surrogates). ValueError if malformed."""
    return base64_decode_bytes(text).decode("utf-8", "surrogateescape")


def url_encode(text: Union[str, bytes]) -> str:
    """Percent-encode all but RFC 3986 unreserved characters."""
    src = to_bytes(text, "text")
    return _call(lib.nsv_url_encode, src, len(src) * 3).decode("ascii")


def url_decode(text: Union[str, bytes], form: bool = False) -> str:
    """Percent-decode (form=True also turns '+' into ' '). ValueError on a bad escape."""
    src = to_bytes(text, "text")
    return _call(lib.nsv_url_decode, src, len(src), 1 if form else 0).decode("utf-8", "surrogateescape")


def url_decode_bytes(text: Union[str, bytes], form: bool = False) -> bytes:
    """Percent-decode to the bytes as they are (no UTF-8 decoding)."""
    src = to_bytes(text, "text")
    return _call(lib.nsv_url_decode, src, len(src), 1 if form else 0)


class Url:
    """Parts of a URL: scheme, host, port, path, query, is_ssl."""
    __slots__ = ("scheme", "host", "port", "path", "query", "is_ssl")
    scheme: str
    host: str
    port: int
    path: str
    query: str
    is_ssl: bool

    @staticmethod
    def parse(url: Union[str, bytes]) -> "Url":
        """Split url (nsv_url_parse); ValueError if malformed."""
        src = to_bytes(url, "url")
        out = ffi.new("nsv_url *")
        r = lib.nsv_url_parse(src, len(src), out)
        if r == _EURL:
            raise ValueError("malformed URL: %r" % (url,))
        check(r)
        u = Url()

        def part(o, n):
            return src[o:o + n].decode("utf-8", "surrogateescape")
        u.scheme = part(out.scheme_off, out.scheme_len)
        u.host = part(out.host_off, out.host_len)
        u.path = part(out.path_off, out.path_len)
        u.query = part(out.query_off, out.query_len)
        u.port = out.port
        u.is_ssl = bool(out.is_tls)
        return u

    @property
    def is_tls(self) -> bool:
        return self.is_ssl

    def __repr__(self) -> str:
        return "Url(scheme=%r, host=%r, port=%r, path=%r, query=%r)" % (
            self.scheme, self.host, self.port, self.path, self.query)


def set_log_level(level: int) -> None:
    """Process-wide library log level (LogLevel or 0..4)."""
    check(lib.nsv_set_log_level(int(level)))


def get_log_level() -> "LogLevel":
    """The process-wide library log level."""
    return LogLevel(lib.nsv_log_level())


def millis() -> int:
    """Monotonic clock in milliseconds."""
    return lib.nsv_millis()


def tls_available() -> bool:
    """True if the loaded libnanosrv was built with TLS."""
    return bool(lib.nsv_tls_available())


def http2_available() -> bool:
    """True if the loaded libnanosrv was built with HTTP/2 (option "http2")."""
    return bool(lib.nsv_http2_available())


def version() -> str:
    """The loaded libnanosrv's version string."""
    return ffi.string(lib.nsv_version_string()).decode()
