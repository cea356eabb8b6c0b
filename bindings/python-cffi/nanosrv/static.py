"""Static files: Manager.static (nsv_serve_dir), Connection.send_file
(nsv_reply_file) and mime_type (nsv_mime_type).

Flags are passed by name, read from the cdef's enum nsv_static_flag
(NSV_STATIC_LIST -> list=True): list, symlinks, precompressed,
fallthrough (static only) and dotfiles.
"""
from ._conn import to_bytes
from ._ffi import ENUMS, ffi, lib
from .errors import check

FLAGS = {k[len("NSV_STATIC_"):].lower(): v for k, v in ENUMS["nsv_static_flag"].items()}
_ENOTFOUND = lib.NSV_ENOTFOUND


def flag_bits(flags):
    """{"list": True, ...} -> the nsv_static_flag bits; TypeError for an unknown name."""
    bits = 0
    for name, on in flags.items():
        bit = FLAGS.get(name)
        if bit is None:
            raise TypeError("unknown static flag %r (known: %s)" % (name, ", ".join(sorted(FLAGS))))
        if on:
            bits |= bit
    return bits


def serve_dir(srv, prefix, directory, cache_control, flags):
    p = to_bytes(prefix, "prefix")
    d = to_bytes(directory if not hasattr(directory, "__fspath__") else directory.__fspath__(), "directory")
    cc = to_bytes(cache_control, "cache_control") if cache_control else b""
    r = lib.nsv_serve_dir(srv, p, len(p), d, len(d), cc, len(cc), flag_bits(flags))
    if r == _ENOTFOUND:
        raise FileNotFoundError("static: %r is not a directory" % (directory,))
    return check(r, srv)


def reply_file(conn, msg, path, root, status, headers, flags):
    path = path.__fspath__() if hasattr(path, "__fspath__") else path
    root = root.__fspath__() if hasattr(root, "__fspath__") else root
    p = to_bytes(path, "path")
    rt = to_bytes(root, "root") if root else b""
    req = msg.raw_headers if msg is not None else b""
    r = lib.nsv_reply_file(conn._ptr(), conn.id, status, rt, len(rt), p, len(p), req, len(req),
                           headers, len(headers), flag_bits(flags))
    if r == _ENOTFOUND:
        return False
    check(r, conn._s)
    conn._pending = False
    conn._after_send()
    return True


def mime_type(name):
    """The media type the static server sends for a file name."""
    b = to_bytes(name, "name")
    return ffi.string(lib.nsv_mime_type(b, len(b))).decode("latin-1")
