"""Query strings, urlencoded forms and cookies, parsed by libnanosrv.

    md = nanosrv.parse_form("a=1&b=x+y&a=2")
    md["a"], md.getall("a"), list(md.items())    # "1", ["1", "2"], [("a","1"), ("b","x y"), ("a","2")]
    nanosrv.parse_cookies("sid=abc; theme=dark")  # {"sid": "abc", "theme": "dark"}
    nanosrv.set_cookie_header("sid", "abc", path="/", httponly=True, samesite="Lax")

Names and values are decoded from UTF-8 with undecodable bytes kept as
surrogates (as the rest of the binding does), so encoding them back with
"surrogateescape" gives the bytes the client sent.
"""
import datetime

from ._conn import to_bytes
from ._ffi import ffi, lib
from .errors import check

_MISSING = object()


class MultiDict:
    """Read-only pairs with repeated keys kept in order (as the `multidict`
    package and werkzeug's MultiDict): `md[k]` and `get(k)` give the first
    value, `getall(k)` / `getlist(k)` every value, `items()`, `keys()` and
    `values()` every pair in input order, repeats included; `len()` counts
    pairs. `to_dict()` keeps the first value of each key."""
    __slots__ = ("_pairs", "_first")

    def __init__(self, pairs=()):
        self._pairs = list(pairs)
        self._first = None

    def _index(self):
        f = self._first
        if f is None:
            f = {}
            for k, v in self._pairs:
                f.setdefault(k, v)
            self._first = f
        return f

    def __getitem__(self, key):
        return self._index()[key]

    def get(self, key, default=None):
        return self._index().get(key, default)

    def getone(self, key, default=_MISSING):
        """The first value; KeyError (or default) when the key is absent."""
        f = self._index()
        if key in f:
            return f[key]
        if default is _MISSING:
            raise KeyError(key)
        return default

    def getall(self, key, default=_MISSING):
        """Every value of key in order; KeyError (or default) when absent."""
        out = [v for k, v in self._pairs if k == key]
        if out:
            return out
        if default is _MISSING:
            raise KeyError(key)
        return default

    def getlist(self, key):
        """Every value of key in order; [] when absent."""
        return [v for k, v in self._pairs if k == key]

    def __contains__(self, key):
        return key in self._index()

    def __iter__(self):
        return (k for k, _ in self._pairs)

    def __len__(self):
        return len(self._pairs)

    def __bool__(self):
        return bool(self._pairs)

    def keys(self):
        return [k for k, _ in self._pairs]

    def values(self):
        return [v for _, v in self._pairs]

    def items(self):
        return list(self._pairs)

    def to_dict(self):
        return dict(self._index())

    def __eq__(self, other):
        if isinstance(other, MultiDict):
            return self._pairs == other._pairs
        return NotImplemented

    def __repr__(self):
        return "MultiDict(%r)" % (self._pairs,)


def _text(b):
    return b.decode("utf-8", "surrogateescape")


def _pairs(fn, src, what):
    src = to_bytes(src, what)
    n = len(src)
    if not n:
        return []
    # Decoded text is never longer than the input, and every pair takes at
    # least one input byte plus a separator: one call sizes nothing.
    maxp = n // 2 + 1
    pairs = ffi.new("uint32_t[]", 4 * maxp)
    dst = ffi.new("char[]", n)
    npairs = ffi.new("uint32_t *")
    need = check(fn(src, n, pairs, maxp, dst, n, npairs))
    if need > n or npairs[0] > maxp:  # cannot happen by the bounds above; never read past the buffers
        raise RuntimeError("%s: parser needs %d bytes for %d pairs" % (what, need, npairs[0]))
    buf = ffi.buffer(dst, need)[:]
    p = ffi.unpack(pairs, 4 * npairs[0])
    return [(_text(buf[p[i]:p[i] + p[i + 1]]), _text(buf[p[i + 2]:p[i + 2] + p[i + 3]]))
            for i in range(0, len(p), 4)]


def parse_form(data):
    """A query string (without '?') or an application/x-www-form-urlencoded
    body (str or bytes) as a MultiDict of decoded pairs in input order."""
    return MultiDict(_pairs(lib.nsv_form_parse, data, "form"))


parse_query = parse_form


def parse_cookie_pairs(header):
    """A Cookie header value as (name, value) pairs in header order."""
    return _pairs(lib.nsv_cookie_parse, header, "cookie header")


def parse_cookies(header):
    """A Cookie header value as a dict. A name sent twice keeps its first
    value (browsers send the cookie of the most specific path first)."""
    out = {}
    for k, v in parse_cookie_pairs(header or b""):
        out.setdefault(k, v)
    return out


_SAMESITE = {"lax": lib.NSV_COOKIE_SAMESITE_LAX, "strict": lib.NSV_COOKIE_SAMESITE_STRICT,
             "none": lib.NSV_COOKIE_SAMESITE_NONE}


def _seconds(x, what):
    if isinstance(x, datetime.timedelta):
        return int(x.total_seconds())
    if isinstance(x, datetime.datetime):
        if x.tzinfo is None:
            raise ValueError("%s: a naive datetime is ambiguous; give it a tzinfo" % what)
        return int(x.timestamp())
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeError("%s must be a number%s, not %s" % (
            what, " or datetime" if what == "expires" else " or timedelta", type(x).__name__))
    return int(x)


def set_cookie_header(name, value="", *, path=None, domain=None, max_age=None, expires=None, secure=False,
                      httponly=False, samesite=None, partitioned=False):
    """The value of a Set-Cookie header (without "Set-Cookie: "), built and
    validated by nsv_set_cookie. max_age: seconds or timedelta; expires:
    Unix seconds or an aware datetime; samesite: "Lax", "Strict", "None"
    or None. ValueError with the library's reason for anything a browser
    would reject or misread (a name that is not a token, a value with ';',
    SameSite=None without secure, a __Host- cookie with a domain, ...)."""
    flags = 0
    if secure:
        flags |= lib.NSV_COOKIE_SECURE
    if httponly:
        flags |= lib.NSV_COOKIE_HTTPONLY
    if partitioned:
        flags |= lib.NSV_COOKIE_PARTITIONED
    if samesite is not None:
        bit = _SAMESITE.get(str(samesite).lower())
        if bit is None:
            raise ValueError("samesite must be 'Lax', 'Strict' or 'None', not %r" % (samesite,))
        flags |= bit
    n, v = to_bytes(name, "name"), to_bytes(value, "value")
    p = to_bytes(path, "path") if path is not None else b""
    d = to_bytes(domain, "domain") if domain is not None else b""
    ma = _seconds(max_age, "max_age") if max_age is not None else -1
    ex = _seconds(expires, "expires") if expires is not None else -1
    if max_age is not None and ma < 0:
        ma = 0  # a negative Max-Age means "expire now" to browsers (RFC 6265 5.2.2)
    if expires is not None and ex < 0:
        raise ValueError("expires must be at or after 1970-01-01")
    # Sized by the encoder convention: one call that fits the common case,
    # a second one only for long values.
    cap = 256 + len(n) + len(v) + len(p) + len(d)
    buf = ffi.new("char[]", cap)
    r = lib.nsv_set_cookie(n, len(n), v, len(v), p, len(p), d, len(d), ma, ex, flags, buf, cap)
    if r == lib.NSV_EINVAL:
        raise ValueError(ffi.string(lib.nsv_last_error_detail(ffi.NULL)).decode("utf-8", "replace"))
    check(r)
    if r > cap:
        buf = ffi.new("char[]", r)
        r = check(lib.nsv_set_cookie(n, len(n), v, len(v), p, len(p), d, len(d), ma, ex, flags, buf, r))
    return ffi.buffer(buf, r)[:].decode("latin-1")
