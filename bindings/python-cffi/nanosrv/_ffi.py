"""Loads libnanosrv through cffi in ABI mode (no compiler needed).

The declarations come from the cdef shared by every binding: the repository
copy (bindings/cdef/nanosrv_cdef.h) when running from a checkout, so a
regenerated cdef is picked up at once, else the copy installed with the
package. Functions added to the library later simply appear on `lib`;
`has()` tells whether the loaded library exports one.

Nothing about the ABI is written here by hand: the ABI major comes from
nanosrv_abi.json, enum constants (event types, flags, errors, options) from
the cdef'd enums (`ENUMS`, `lib.NSV_*`), and the event record layout from
the cdef'd struct (`EVENT_FIELDS`), which must agree with the JSON's
description of it.
"""
import json
import os
import re

import cffi

HERE = os.path.dirname(os.path.abspath(__file__))
_REPO_CDEF = os.path.normpath(os.path.join(HERE, "..", "..", "cdef"))


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


def _load_abi_json():
    path = _find("nanosrv_abi.json")
    if path is None:
        raise ImportError("nanosrv: nanosrv_abi.json not found (looked in %s and %s)" % (_REPO_CDEF, HERE))
    with open(path) as f:
        return json.load(f), path


def _candidates():
    """[(path or name, how it was chosen, why it was skipped or None)] in the
    order shared by all bindings: explicit path, a copy next to the package,
    then the dynamic linker's search path."""
    env = os.environ.get("NANOSRV_LIBRARY")
    if env:
        return [(env, "NANOSRV_LIBRARY", None)]
    local = os.path.join(HERE, "libnanosrv.so.1")
    return [(local, "the copy next to the package",
             None if os.path.exists(local) else "no such file"),
            ("libnanosrv.so.1", "the dynamic linker's search path (LD_LIBRARY_PATH=%r, the ldconfig cache, "
             "/lib, /usr/lib)" % os.environ.get("LD_LIBRARY_PATH", ""), None)]


ffi = cffi.FFI()
CDEF_TEXT, CDEF_PATH = _load_cdef()
ffi.cdef(CDEF_TEXT)


def _open():
    tried = []
    for cand, how, skip in _candidates():
        if skip is not None:
            tried.append("%s (%s): %s" % (cand, how, skip))
            continue
        try:
            return ffi.dlopen(cand), cand
        except OSError as e:
            tried.append("%s (%s): %s" % (cand, how, e))
    raise ImportError("nanosrv: cannot load libnanosrv.so.1. Tried, in order:\n  " + "\n  ".join(tried)
                      + "\nBuild it with `make` in the libnanosrv checkout and point at it with "
                      "NANOSRV_LIBRARY=/path/to/build/libnanosrv.so.1, or install it (make install) where "
                      "the dynamic linker looks.")


ABI, ABI_PATH = _load_abi_json()
ABI_MAJOR = int(ABI["abi_major"])

# Every enum of the cdef: {"nsv_err": {"NSV_ESTALE": -3, ...}, ...}.
ENUMS = {}
for _tag in re.findall(r"\benum\s+(\w+)\s*\{", CDEF_TEXT):
    ENUMS[_tag] = dict(ffi.typeof("enum " + _tag).relements)

# The event record as the cdef declares it: [(name, offset, C type), ...].
EVENT_FIELDS = [(name, f.offset, f.type.cname) for name, f in ffi.typeof("nsv_event").fields]
EVENT_SIZE = ffi.sizeof("nsv_event")

# The JSON describes the same record; a cdef and JSON from different
# generations must not be mixed.
_jev = ABI["structs"]["nsv_event"]
_jfields = [(f["name"], f["offset"], f["type"]) for f in _jev["fields"]]
if _jfields != EVENT_FIELDS or _jev["size"] != EVENT_SIZE:
    raise ImportError("nanosrv: %s and %s describe nsv_event differently (%d vs %d bytes, fields %s vs %s)"
                      % (CDEF_PATH, ABI_PATH, EVENT_SIZE, _jev["size"], EVENT_FIELDS, _jfields))

lib, LIBRARY_PATH = _open()

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


def has(name: str) -> bool:
    """True if the loaded library exports function `name` (and the cdef declares it)."""
    try:
        getattr(lib, name)
        return True
    except AttributeError:
        return False
