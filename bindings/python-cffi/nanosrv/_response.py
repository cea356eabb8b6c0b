"""Turning a handler's return value into a reply."""
import json as _json
from typing import Any, Tuple

from .headers import header_bytes

_JSON = b"Content-Type: application/json\r\n"
_TEXT = b"Content-Type: text/plain; charset=utf-8\r\n"
_OCTET = b"Content-Type: application/octet-stream\r\n"


def header_block(headers: Any) -> bytes:
    """A "Name: value\\r\\n" block from str, bytes, a dict or (name, value)
    pairs; names and values are checked (nanosrv.headers): ValueError."""
    return header_bytes(headers)


def _body(value: Any) -> Tuple[bytes, bytes]:
    """(content-type header, body bytes) for a plain value."""
    if isinstance(value, bytes):
        return _OCTET, value
    if isinstance(value, str):
        return _TEXT, value.encode("utf-8", "surrogateescape")
    if isinstance(value, (dict, list)):
        return _JSON, _json.dumps(value, separators=(",", ":")).encode()
    if isinstance(value, (bytearray, memoryview)):
        return _OCTET, bytes(value)
    raise TypeError("cannot make a response body from %s" % type(value).__name__)


def to_reply(value: Any) -> Tuple[Any, bytes, bytes]:
    """(status, header bytes, body bytes) from str | bytes | dict | list | int
    | (status, body) | (status, headers, body)."""
    if isinstance(value, tuple):
        if len(value) == 2:
            status, body = value
            headers = None
        elif len(value) == 3:
            status, headers, body = value
        else:
            raise TypeError("a reply tuple is (status, body) or (status, headers, body)")
        ctype, data = _body(body) if body is not None else (b"", b"")
        hdr = header_block(headers)
        if b"content-type:" not in hdr.lower():
            hdr = ctype + hdr
        return status, hdr, data
    if isinstance(value, int) and not isinstance(value, bool):
        return value, b"", b""
    ctype, data = _body(value)
    return 200, ctype, data
