"""Pieces of ASGI scopes and messages.

The scope itself is built inline with one dict literal per request
(_server.py); these helpers cover the less common parts (escaped paths,
TLS, subprotocols) and the response header block.
"""
from urllib.parse import unquote_to_bytes

from .._message import EVF_TLS, FLAGS, TLS, TLS_LEN

ASGI_HTTP = {"version": "3.0", "spec_version": "2.3"}
ASGI_WS = {"version": "3.0", "spec_version": "2.3"}

# Method names as str without a decode for the common ones.
_METHODS = {m.encode(): m for m in ("GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "CONNECT",
                                    "TRACE")}

__all__ = ["ASGI_HTTP", "ASGI_WS", "decode_path", "tls_extension", "subprotocols", "header_block"]


def decode_path(raw):
    """The percent-decoded path as str (UTF-8; undecodable bytes replaced,
    as uvicorn's unquote does)."""
    if b"%" not in raw:
        try:
            return raw.decode("ascii")
        except UnicodeDecodeError:
            return raw.decode("utf-8", "replace")
    return unquote_to_bytes(raw).decode("utf-8", "replace")


def tls_extension(a, e):
    """The scope's "tls" extension for a TLS connection, else None.

    The library exposes the SNI name and the subject of a verified client
    certificate; the other keys of the ASGI TLS extension are None/[]."""
    if not e[FLAGS] & EVF_TLS:
        return None
    o = e[TLS]
    parts = a[o:o + e[TLS_LEN]].split(b"\0")
    sni = parts[0].decode("utf-8", "replace") if parts and parts[0] else None
    subject = parts[1].decode("utf-8", "replace") if len(parts) > 1 and parts[1] else None
    return {"server_name": sni, "server_cert": None, "client_cert_chain": [], "client_cert_name": subject,
            "client_cert_error": None, "tls_version": None, "cipher_suite": None}


def subprotocols(headers):
    """Sec-WebSocket-Protocol offers, in order (every such header)."""
    out = []
    for name, value in headers:
        if name == b"sec-websocket-protocol":
            out.extend(p.strip().decode("latin-1") for p in value.split(b",") if p.strip())
    return out


def header_block(headers, what):
    """The wire block of an ASGI header list [(bytes, bytes)].

    A value with CR or LF, or a name with ':', would put a different
    header on the wire than the app wrote: ValueError naming it. The
    library checks the rest (token names, control bytes) when the block
    is sent."""
    if type(headers) is not list and type(headers) is not tuple:
        headers = list(headers)
    try:
        lines = [name + b": " + value + b"\r\n" for name, value in headers
                 if b":" not in name and b"\n" not in value and b"\r" not in value]
    except (TypeError, ValueError):
        raise TypeError("%s: headers must be an iterable of [name, value] byte-string pairs, not %r"
                        % (what, _short(headers))) from None
    if len(lines) != len(headers):
        for name, value in headers:
            if b":" in name:
                raise ValueError("%s: header name %r is not an HTTP token" % (what, name))
            if b"\r" in value or b"\n" in value:
                raise ValueError("%s: header %r: value has CR or LF" % (what, name))
    return b"".join(lines)


def _short(x):
    r = repr(x)
    return r if len(r) < 120 else r[:117] + "..."
