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


class ClientError(Error):
    """An outbound request or WebSocket connection failed (nanosrv.client,
    nanosrv.ws_client). `code` is the NSV_E* value of the failure, `detail`
    the library's reason (e.g. which timeout expired); `url` the target."""
    url: str = ""


class ConnectionRefused(ClientError, ConnectionRefusedError):
    """Nothing listens at the URL's host and port (NSV_ECONNREFUSED); also a
    ConnectionRefusedError."""


class Timeout(ClientError, TimeoutError):
    """A connect, head, read or whole-request timeout expired
    (NSV_ETIMEDOUT; detail says which), or the `timeout=` of the call;
    also a TimeoutError (asyncio.TimeoutError since Python 3.11)."""


class HostNotFound(ClientError):
    """The URL's host name does not resolve (NSV_ENOTFOUND)."""


class BadResponse(ClientError):
    """The server's answer broke HTTP/1.1 (NSV_EPARSE: status line, headers,
    framing, chunk sizes) or, for a WebSocket, was not a valid 101 answer
    (detail: the status line or the rule that failed)."""


class ResponseTooLarge(ClientError):
    """The answer's head or body passed a limit (NSV_ETOOBIG:
    NSV_OPT_HTTP_MAX_HEAD_BYTES, _MAX_HEADERS, _MAX_BODY)."""


class ConnectionClosed(ClientError, ConnectionError):
    """The server closed the connection before the response ended
    (NSV_ECLOSED); also a ConnectionError."""


class ClientTlsError(ClientError, TlsError):
    """The TLS handshake or the server's certificate check failed (NSV_ETLS)."""


class ClientStopped(ClientError):
    """The server is stopping or draining, or was closed (NSV_ESTOPPED)."""


class WebSocketClosed(ClientError):
    """recv() or send() on a WebSocket client that has closed. `close_code`
    and `close_reason` are those of the server's close frame (1006 and ""
    when the connection ended without one); `code` is NSV_ECLOSED. `ok`
    is True for a normal close (1000, 1001, or no status: 1005)."""
    close_code: int = 1006
    close_reason: str = ""

    @property
    def ok(self) -> bool:
        return self.close_code in (1000, 1001, 1005)


_CLIENT_BY_CODE = {lib.NSV_ECONNREFUSED: ConnectionRefused, lib.NSV_ETIMEDOUT: Timeout,
                   lib.NSV_ENOTFOUND: HostNotFound, lib.NSV_EPARSE: BadResponse, lib.NSV_ETOOBIG: ResponseTooLarge,
                   lib.NSV_ECLOSED: ConnectionClosed, lib.NSV_ETLS: ClientTlsError, lib.NSV_ESTOPPED: ClientStopped}


def client_error(code: int, detail: str = "", url: str = "") -> ClientError:
    """The ClientError subclass for a request's ERROR code (ConnectionRefused,
    Timeout, ...); other codes give a plain ClientError."""
    e = _CLIENT_BY_CODE.get(code, ClientError)(code, ("%s: %s" % (url, detail)) if url and detail else detail or url)
    e.url = url
    return e


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
