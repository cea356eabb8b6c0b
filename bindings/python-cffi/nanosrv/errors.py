"""Exceptions raised for negative NSV_E* codes."""
from ._ffi import ffi, lib

ESTALE = lib.NSV_ESTALE
ESTATE = lib.NSV_ESTATE
ENOTSUP = lib.NSV_ENOTSUP


class Error(RuntimeError):
    """A libnanosrv call failed. `code` is the NSV_E* value, `name` its symbol."""

    def __init__(self, code, detail=""):
        self.code = code
        self.name = ffi.string(lib.nsv_errname(code)).decode()
        msg = ffi.string(lib.nsv_strerror(code)).decode()
        super().__init__("%s: %s%s" % (self.name, msg, " (%s)" % detail if detail else ""))


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
    status = 500

    def __init__(self, message="", status=None):
        super().__init__(message)
        if status is not None:
            self.status = status


_BY_CODE = {ESTALE: StaleError, ESTATE: StateError, ENOTSUP: NotSupportedError, lib.NSV_EINVAL: InvalidArgument}


def error(code, detail=""):
    return _BY_CODE.get(code, Error)(code, detail)


def check(code, srv=None):
    """Return code if >= 0, else raise the matching Error with the server's detail."""
    if code >= 0:
        return code
    detail = ""
    if srv is not None and srv != ffi.NULL:
        detail = ffi.string(lib.nsv_last_error_detail(srv)).decode("utf-8", "replace")
    raise error(code, detail)


def require(name, what):
    """Raise NotSupportedError naming the missing function when the library lacks it."""
    try:
        return getattr(lib, name)
    except AttributeError:
        raise error(ENOTSUP, "%s needs %s(), which the loaded libnanosrv does not export" % (what, name)) from None
