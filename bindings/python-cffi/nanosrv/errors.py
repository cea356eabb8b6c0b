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


_BY_CODE = {ESTALE: StaleError, ESTATE: StateError, ENOTSUP: NotSupportedError}


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
