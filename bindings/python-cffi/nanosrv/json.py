"""JSON path extraction ("$.a.b[2].c") done by libnanosrv.

Each function returns None when the path does not exist (or holds another
type) and raises ValueError for malformed JSON.
"""
from ._conn import to_bytes
from ._ffi import ffi, lib
from .errors import check

_ENOTFOUND, _EPARSE, _ERANGE = lib.NSV_ENOTFOUND, lib.NSV_EPARSE, lib.NSV_ERANGE


def _args(doc, path):
    return to_bytes(doc, "json"), to_bytes(path, "path")


def _status(r):
    if r == _ENOTFOUND:
        return False
    if r == _EPARSE:
        raise ValueError("malformed JSON")
    check(r)
    return True


def string(doc, path):
    d, p = _args(doc, path)
    buf = ffi.new("char[]", len(d) + 1)
    n = lib.nsv_json_string(d, len(d), p, len(p), buf, len(d) + 1)
    return ffi.buffer(buf, n)[:].decode("utf-8", "surrogateescape") if _status(n) else None


def number(doc, path):
    d, p = _args(doc, path)
    out = ffi.new("double *")
    return out[0] if _status(lib.nsv_json_number(d, len(d), p, len(p), out)) else None


def integer(doc, path):
    d, p = _args(doc, path)
    out = ffi.new("int64_t *")
    r = lib.nsv_json_integer(d, len(d), p, len(p), out)
    if r == _ERANGE:
        return None
    return out[0] if _status(r) else None


def boolean(doc, path):
    d, p = _args(doc, path)
    out = ffi.new("int *")
    return bool(out[0]) if _status(lib.nsv_json_boolean(d, len(d), p, len(p), out)) else None
