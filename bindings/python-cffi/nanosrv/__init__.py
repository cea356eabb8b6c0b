"""nanosrv: Python binding of libnanosrv (cffi, ABI mode).

    import nanosrv
    mgr = nanosrv.Manager()
    mgr.http_listen("http://0.0.0.0:8080",
                    lambda conn, msg: conn.http_reply(200, "", "hello " + msg.uri))
    mgr.run()
"""
from . import aio, json, multipart, sse
from ._conn import Connection
from ._ffi import LIBRARY_PATH, has, lib as _lib
from ._manager import ConnectionRef, Listener, Manager, Metrics, ShardedManager
from ._message import Event, HttpMessage, TlsInfo, WsMessage, WsOpcode
from .errors import (BadResponse, BodyError, ClientError, ClientStopped, ClientTlsError, ConnectionClosed,
                     ConnectionRefused, Disconnected, Error, HostNotFound, HTTPError, InvalidArgument,
                     NotSupportedError, ResponseTooLarge, StaleError, StateError, Timeout, TlsError, WebSocketClosed)
from .headers import Headers
from . import aionet, client, ops, tcp, timers, tls, ws_client
from .tcp import TcpConnection, TcpHandler
from .timers import Timer
from .forms import MultiDict, parse_cookies, parse_form, parse_query, set_cookie_header
from .multipart import MultipartError, MultipartReader, UnsupportedMediaType, UploadFile, read_form, aread_form
from .sse import EventStream
from .static import mime_type
from .stream import BodyStream
from .util import (LogLevel, Url, base64_decode, base64_decode_bytes, base64_encode, base64_encode_bytes,
                   get_log_level, millis, set_log_level, tls_available, http2_available, url_decode, url_decode_bytes, url_encode, version)

__version__ = "1.5.0"


def websocket_available() -> bool:
    """True if the loaded libnanosrv has the WebSocket send functions."""
    return has("nsv_ws_send") and has("nsv_ws_upgrade")


def sharded_available() -> bool:
    """True if the loaded libnanosrv can create sharded servers."""
    m = None
    try:
        m = ShardedManager(1)
        return True
    except NotSupportedError:
        return False
    finally:
        if m is not None:
            m.close()


__all__ = ["Manager", "ShardedManager", "Connection", "HttpMessage", "TlsInfo", "WsMessage", "Listener", "ConnectionRef", "Metrics", "Event",
           "WsOpcode", "LogLevel", "Url", "Error", "StaleError", "StateError", "NotSupportedError",
           "base64_encode", "base64_decode", "base64_encode_bytes", "base64_decode_bytes", "url_encode",
           "url_decode", "url_decode_bytes", "InvalidArgument", "json", "set_log_level", "get_log_level", "millis", "tls_available", "http2_available", "version",
           "websocket_available", "sharded_available", "LIBRARY_PATH", "multipart", "sse", "BodyError",
           "Disconnected", "HTTPError", "MultiDict", "parse_cookies", "parse_form", "parse_query",
           "set_cookie_header", "MultipartError", "MultipartReader", "UnsupportedMediaType", "UploadFile",
           "read_form", "aread_form", "EventStream", "mime_type", "BodyStream", "aionet", "ops", "tcp", "tls", "timers",
           "TcpConnection", "TcpHandler", "Timer", "TlsError", "client", "ws_client", "Headers", "ClientError",
           "ConnectionRefused", "Timeout", "HostNotFound", "BadResponse", "ResponseTooLarge", "ConnectionClosed",
           "ClientTlsError", "ClientStopped", "WebSocketClosed"]

# NSV_OPT_HTTP2 bits for set_option("http2", ...) (from the cdef, as every constant).
H2_TLS, H2_PRIOR, H2_UPGRADE, H2_ALL = _lib.NSV_H2_TLS, _lib.NSV_H2_PRIOR, _lib.NSV_H2_UPGRADE, _lib.NSV_H2_ALL
__all__ += ["H2_TLS", "H2_PRIOR", "H2_UPGRADE", "H2_ALL"]
