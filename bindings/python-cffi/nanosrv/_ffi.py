"""Loads libnanosrv through cffi in ABI mode (no compiler needed).

The declarations come from the cdef shared by every binding: the repository
copy (bindings/cdef/nanosrv_cdef.h) when running from a checkout, so a
regenerated cdef is picked up at once, else the copy installed with the
package. Functions added to the library later simply appear on `lib`;
`has()` tells whether the loaded library exports one.
"""
import json
import os

import cffi

HERE = os.path.dirname(os.path.abspath(__file__))
_REPO_CDEF = os.path.normpath(os.path.join(HERE, "..", "..", "cdef"))
ABI_MAJOR_DEFAULT = 1


def _find(name):
    for d in (_REPO_CDEF, HERE):
        p = os.path.join(d, name)
        if os.path.exists(p):
            return p
    return None


def _load_cdef():
    path = _find("nanosrv_cdef.h")
    if path is None:
        raise ImportError("nanosrv: nanosrv_cdef.h not found (looked in %s and %s)" % (_REPO_CDEF, HERE))
    with open(path) as f:
        return f.read(), path


def _abi_major():
    path = _find("nanosrv_abi.json")
    if path is None:
        return ABI_MAJOR_DEFAULT
    with open(path) as f:
        return int(json.load(f).get("abi_major", ABI_MAJOR_DEFAULT))


def _candidates():
    # Order shared by all bindings: explicit path, a copy next to the
    # package, then the dynamic linker's search path.
    env = os.environ.get("NANOSRV_LIBRARY")
    if env:
        return [env]
    local = os.path.join(HERE, "libnanosrv.so.1")
    return ([local] if os.path.exists(local) else []) + ["libnanosrv.so.1"]


ffi = cffi.FFI()
CDEF_TEXT, CDEF_PATH = _load_cdef()
ffi.cdef(CDEF_TEXT)


def _open():
    errors = []
    for cand in _candidates():
        try:
            return ffi.dlopen(cand), cand
        except OSError as e:
            errors.append("%s: %s" % (cand, e))
    raise ImportError("nanosrv: cannot load libnanosrv.so.1 (set NANOSRV_LIBRARY to its path): "
                      + "; ".join(errors))


lib, LIBRARY_PATH = _open()
ABI_MAJOR = _abi_major()
EVENT_SIZE = ffi.sizeof("nsv_event")

# Refuse a library whose layout differs from the declarations: every event
# field read below depends on it.
_abi = lib.nsv_abi_version()
if _abi != ABI_MAJOR:
    raise ImportError("nanosrv: ABI mismatch: %s has ABI version %d, this binding needs %d"
                      % (LIBRARY_PATH, _abi, ABI_MAJOR))
_evsize = lib.nsv_event_size()
if _evsize != EVENT_SIZE:
    raise ImportError("nanosrv: event size mismatch: %s has sizeof(nsv_event) = %d, the cdef %s says %d"
                      % (LIBRARY_PATH, _evsize, CDEF_PATH, EVENT_SIZE))


def has(name):
    """True if the loaded library exports function `name` (and the cdef declares it)."""
    try:
        getattr(lib, name)
        return True
    except AttributeError:
        return False
