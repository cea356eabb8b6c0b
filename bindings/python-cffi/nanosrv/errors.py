"""Exceptions raised for negative NSV_E* codes."""
from typing import Any, Optional

from ._ffi import ffi, lib

ESTALE = lib.NSV_ESTALE
ESTATE = lib.NSV_ESTATE
ENOTSUP = lib.NSV_ENOTSUP


def _message(name: str, meaning: str, detail: str) -> str:
    """"NAME (meaning): detail", each part said once: a detail that repeats
    the name or the meaning (the library's generic "...: invalid argument",
    "(NSV_EINVAL)") loses the repetition; without a detail, "NAME: meaning"."""
    d = detail.strip()
    for pre in (name + ": ", name + " "):
        if d.startswith(pre):
            d = d[len(pre):]
    for tail in (" (%s)" % name, " (%s)" % meaning, ": " + meaning, "; " + meaning, " " + name):
        if d.endswith(tail):
            d = d[:-len(tail)].rstrip()
    if not d or d == meaning:
        return "%s: %s" % (name, meaning)
    return "%s (%s): %s" % (name, meaning, d)


class Error(RuntimeError):
    """A libnanosrv call failed. `code` is the NSV_E* value, `name` its
    symbol, `meaning` the library's text for the code and `detail` what
    went wrong in this call (which argument broke which rule; may be "").
    str(): "NSV_ESTATE (operation not valid ...): nsv_reply: connection ...",
    each part once."""
    code: int
    name: str
    meaning: str
    detail: str

    def __init__(self, code: int, detail: str = "") -> None:
        self.code = code
        self.name = ffi.string(lib.nsv_errname(code)).decode()
        self.meaning = ffi.string(lib.nsv_strerror(code)).decode()
        self.detail = detail
        super().__init__(_message(self.name, self.meaning, detail))


class StaleError(Error):
    """The connection id is unknown or the connection has closed."""


class StateError(Error):
    """The call is not valid now, e.g. replying twice to one request."""


class NotSupportedError(Error):
    """The loaded libnanosrv does not provide this feature."""


class InvalidArgument(Error, ValueError):
    """The library refused a value (NSV_EINVAL): a header block with a
    control byte or a name that is not a token, a bad status, ... A
    ValueError as well, as Python code expects for a bad value."""


class TlsError(Error):
    """TLS setup or a TLS connection failed (NSV_ETLS); the message names
    the cause: a missing file, bad PEM, a wrong key password, ..."""


class BodyError(Error):
    """A streamed request body cannot complete: `code` NSV_ETOOBIG (over
    max_body; the library answered 413), NSV_ETIMEDOUT (the request
    deadline; 408), NSV_EPARSE (malformed chunking; 400)."""


class Disconnected(BodyError):
    """The client left (or the connection closed) before the body ended or
    while a stream (SSE, streamed reply) was going to it: code NSV_ECLOSED."""


class HTTPError(Exception):
    """Raise from a handler to answer `status` with a plain-text `message`
    (when no reply was made yet). MultipartError (400) and
    UnsupportedMediaType (415) are HTTPErrors."""
    status: int = 500

    def __init__(self, message: str = "", status: Optional[int] = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status


_BY_CODE = {ESTALE: StaleError, ESTATE: StateError, ENOTSUP: NotSupportedError, lib.NSV_EINVAL: InvalidArgument,
            lib.NSV_ETLS: TlsError}


def error(code: int, detail: str = "") -> Error:
    """The Error subclass for code (StaleError, StateError, ...) with detail."""
    return _BY_CODE.get(code, Error)(code, detail)


def check(code: int, srv: Any = None) -> int:
    """Return code if >= 0, else raise the matching Error with the server's detail."""
    if code >= 0:
        return code
    detail = ""
    if srv is not None and srv != ffi.NULL:
        detail = ffi.string(lib.nsv_last_error_detail(srv)).decode("utf-8", "replace")
    raise error(code, detail)


def require(name: str, what: str) -> Any:
    """Raise NotSupportedError naming the missing function when the library lacks it."""
    try:
        return getattr(lib, name)
    except AttributeError:
        raise error(ENOTSUP, "%s needs %s(), which the loaded libnanosrv does not export" % (what, name)) from None
