"""Operating behind load balancers: listener options (PROXY protocol,
address lists), metrics and their Prometheus text, the access log,
readiness, and sockets inherited from systemd (libnanosrv 1.4).

The Manager methods (http_listen(..., proxy_protocol=...), metrics,
metrics_text(), access_log, draining, listen_inherited()) are the usual
way in; this module holds what they share, and the handlers:

    mgr.get("/metrics", nanosrv.ops.metrics_handler(mgr))
    mgr.get("/readyz", nanosrv.ops.readyz_handler(mgr))

The access record layout and the metric names come from the library and
its cdef (nsv_access_record, nsv_metric_name), never from this file.
"""
import datetime
import logging
import re
import struct
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ._ffi import ffi, has, lib
from ._message import _event_format
from .errors import InvalidArgument, check, error, require

access_logger = logging.getLogger("nanosrv.access")

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4"

# ---- listener options ----

_PROXY = {"v1": lib.NSV_PROXY_V1, "v2": lib.NSV_PROXY_V2, "any": lib.NSV_PROXY_ANY, "off": lib.NSV_PROXY_OFF}
_LIST_OPTS = (("proxy_from", lib.NSV_LOPT_PROXY_FROM), ("allow", lib.NSV_LOPT_ALLOW), ("deny", lib.NSV_LOPT_DENY))
LISTENER_OPTIONS = ("proxy_protocol", "proxy_timeout_ms", "proxy_from", "allow", "deny")


def proxy_version(v: Any) -> int:
    """NSV_PROXY_* for True ("any": either version), False/None ("off"),
    "v1", "v2", "any", "off" or the number itself."""
    if v is True:
        return lib.NSV_PROXY_ANY
    if v is False or v is None:
        return lib.NSV_PROXY_OFF
    if isinstance(v, int) and v in _PROXY.values():
        return v
    if isinstance(v, str) and v.lower() in _PROXY:
        return _PROXY[v.lower()]
    raise InvalidArgument(lib.NSV_EINVAL, 'proxy_protocol must be True, False, "v1", "v2", "any" or "off", '
                          "not %r" % (v,))


def address_list(v: Union[None, str, bytes, Sequence[str]], name: str = "address list") -> bytes:
    """A CIDR list as the library takes it: a string ("10.0.0.0/8, ::1")
    or a list of entries; None or [] is the empty list."""
    if v is None:
        return b""
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    try:
        items = list(v)
    except TypeError:
        raise TypeError("%s must be a string or a list of CIDR strings, not %s" % (name, type(v).__name__))
    for x in items:
        if not isinstance(x, str):
            raise TypeError("%s entries must be strings, not %s" % (name, type(x).__name__))
    return ",".join(items).encode()


def configure_listener(manager: Any, lid: int, **opts: Any) -> None:
    """Apply the listener options given (proxy_protocol, proxy_timeout_ms,
    proxy_from, allow, deny; None leaves one alone) to listener `lid`. A
    bad value raises with the library's detail (which entry is wrong)."""
    unknown = set(opts) - set(LISTENER_OPTIONS)
    if unknown:
        raise TypeError("unknown listener option%s %s (known: %s)" % (
            "s" if len(unknown) > 1 else "", ", ".join(sorted(unknown)), ", ".join(LISTENER_OPTIONS)))
    if all(v is None for v in opts.values()):
        return
    set_int = require("nsv_listener_set_int", "listener options")
    set_str = lib.nsv_listener_set_str
    with manager._setup("listener options") as srv:
        if opts.get("proxy_protocol") is not None:
            check(set_int(srv, lid, lib.NSV_LOPT_PROXY_PROTOCOL, proxy_version(opts["proxy_protocol"])), srv)
        t = opts.get("proxy_timeout_ms")
        if t is not None:
            if not isinstance(t, int) or isinstance(t, bool):
                raise TypeError("proxy_timeout_ms must be an int, not %s" % type(t).__name__)
            check(set_int(srv, lid, lib.NSV_LOPT_PROXY_TIMEOUT_MS, t), srv)
        for name, opt in _LIST_OPTS:
            v = opts.get(name)
            if v is not None:
                b = address_list(v, name)
                check(set_str(srv, lid, opt, b, len(b)), srv)


def listener_option(manager: Any, lid: int, name: str) -> int:
    """An integer listener option ("proxy_protocol", "proxy_timeout_ms")."""
    opt = {"proxy_protocol": lib.NSV_LOPT_PROXY_PROTOCOL, "proxy_timeout_ms": lib.NSV_LOPT_PROXY_TIMEOUT_MS}.get(name)
    if opt is None:
        raise ValueError("listener_option: %r is not an integer listener option" % (name,))
    srv = manager._live()
    return check(require("nsv_listener_get_int", "listener options")(srv, lid, opt), srv)


def proxy_info(arena: Any, tls_off: int, tls_len: int) -> Dict[str, Any]:
    """The front's fields of a proxied connection, from the event's tls
    block (nanosrv.h, "PROXY protocol")."""
    parts = bytes(arena[tls_off:tls_off + tls_len]).split(b"\0")
    parts += [b""] * (9 - len(parts))
    s = [p.decode("utf-8", "surrogateescape") for p in parts[:9]]
    return {"front": s[2], "front_port": int(s[3] or 0), "dst": s[4], "dst_port": int(s[5] or 0),
            "ssl": s[6], "authority": s[7], "alpn": s[8]}


# ---- metrics ----

_names: Optional[List[str]] = None
_layout: Optional[List[Tuple[str, Any]]] = None
_buckets_s: List[float] = []


def metric_names() -> List[str]:
    """Every metric's name in index order (nsv_metric_name)."""
    global _names
    if _names is None:
        fn = require("nsv_metric_name", "metrics")
        out = []
        for i in range(4096):
            p = fn(i)
            if p == ffi.NULL:
                break
            out.append(ffi.string(p).decode())
        _names = out
    return _names


def _metric_layout() -> List[Tuple[str, Any]]:
    """[(key, index)] for single values and [(key, (sum_i, count_i,
    first_bucket_i, n))] for histograms: a run of "<base>_bucket" names
    with "<base>_sum_us" and "<base>_count" next to it."""
    global _layout, _buckets_s
    if _layout is not None:
        return _layout
    names = metric_names()
    index = {}
    for i, n in enumerate(names):
        index.setdefault(n, i)
    out: List[Tuple[str, Any]] = []
    seen = set()
    i = 0
    while i < len(names):
        n = names[i]
        if n.endswith("_bucket"):
            base = n[:-len("_bucket")]
            j = i
            while j < len(names) and names[j] == n:
                j += 1
            if base not in seen:
                seen.add(base)
                out.append((base, (index.get(base + "_sum_us"), index.get(base + "_count"), i, j - i)))
            i = j
            continue
        if not (n.endswith("_sum_us") and names[i + 1:i + 2] == [n[:-len("_sum_us")] + "_count"]) and \
                not (n.endswith("_count") and (n[:-len("_count")] + "_bucket") in index):
            out.append((n, i))
        i += 1
    bucket_us = require("nsv_metric_bucket_us", "metrics")
    nb = max([v[3] for _, v in out if isinstance(v, tuple)] or [0])
    _buckets_s = [(lambda us: float("inf") if us < 0 else us / 1e6)(bucket_us(k)) for k in range(nb)]
    _layout = out
    return out


def read_metrics(srv: Any, worker: Optional[int] = None) -> Dict[str, Any]:
    """Every metric by name, read in one call: counters and gauges as
    ints, histograms as {"buckets": [[le_seconds, cumulative_count], ...],
    "sum_seconds": float, "count": int} (the last le is inf)."""
    layout = _metric_layout()
    n = len(metric_names())
    buf = ffi.new("uint64_t[]", n)
    if worker is None:
        got = check(lib.nsv_metrics(srv, buf, n), srv)
    else:
        got = check(lib.nsv_metrics_worker(srv, worker, buf, n), srv)
    got = min(got, n)
    vals = list(buf)
    out: Dict[str, Any] = {}
    for key, where in layout:
        if isinstance(where, int):
            if where < got:
                out[key] = vals[where]
            continue
        si, ci, b0, nb = where
        if b0 + nb > got:
            continue
        out[key] = {"buckets": [[_buckets_s[k], vals[b0 + k]] for k in range(nb)],
                    "sum_seconds": vals[si] / 1e6 if si is not None else 0.0,
                    "count": vals[ci] if ci is not None else 0}
    return out


def prometheus_text(srv: Any, prefix: Optional[str] = None, per_worker: bool = False) -> str:
    """The metrics in the Prometheus text format (nsv_metrics_prometheus)."""
    fn = require("nsv_metrics_prometheus", "metrics_text")
    p = (prefix or "").encode()
    cap = 32 << 10
    for _ in range(8):
        buf = ffi.new("char[]", cap)
        n = fn(srv, p, len(p), 1 if per_worker else 0, buf, cap)
        if n >= 0:
            return ffi.buffer(buf, n)[:].decode()
        if n != lib.NSV_ENOBUFS:
            check(n, srv)
        cap *= 4
    raise error(lib.NSV_ENOBUFS, "metrics_text: the exposition did not fit %d bytes" % cap)


def metrics_handler(manager: Any, prefix: Optional[str] = None, per_worker: bool = False) -> Callable[[Any, Any], None]:
    """A handler(conn, msg) answering the Prometheus text with its
    Content-Type, for mgr.get("/metrics", ...)."""
    def metrics(conn: Any, msg: Any) -> None:
        conn.http_reply(200, "Content-Type: %s\r\n" % PROMETHEUS_CONTENT_TYPE,
                        manager.metrics_text(prefix, per_worker=per_worker))
    return metrics


def readyz_handler(manager: Any) -> Callable[[Any, Any], None]:
    """A handler(conn, msg) for a load balancer's readiness check: 200
    "ready" while the server takes new work, 503 "draining" once a drain
    started (the check fails, so the front stops sending new connections
    while the ones in flight finish)."""
    def readyz(conn: Any, msg: Any) -> None:
        if manager.draining:
            conn.http_reply(503, "Content-Type: text/plain\r\nConnection: close\r\n", "draining\n")
        else:
            conn.http_reply(200, "Content-Type: text/plain\r\n", "ready\n")
    return readyz


# ---- access log ----

_REC: Optional[struct.Struct] = None
_REC_FIELDS: Dict[str, int] = {}


def _record_struct() -> struct.Struct:
    global _REC
    if _REC is None:
        t = ffi.typeof("nsv_access_record")
        fields = [(name, f.offset, f.type.cname) for name, f in t.fields]
        _REC = struct.Struct(_event_format(fields, ffi.sizeof(t)))
        for i, (name, _, _) in enumerate(sorted(fields, key=lambda f: f[1])):
            _REC_FIELDS[name] = i
    return _REC


def parse_records(data: bytes) -> List[Dict[str, Any]]:
    """The access records in `data` (what nsv_access_take wrote) as dicts:
    time (ISO 8601 UTC, ms), peer, port, method, target, status, bytes_out,
    bytes_in, duration_ms, user_agent, referer (the JSON format's fields,
    in its order), then time_ms, duration_us, conn, listener, http10,
    tls, proxy, head. Strings are decoded as UTF-8 with surrogateescape
    (s.encode("utf-8", "surrogateescape") gives the bytes as sent)."""
    st = _record_struct()
    F = _REC_FIELDS
    out = []
    at, n = 0, len(data)
    lens = [F[k] for k in ("method_len", "target_len", "peer_len", "ua_len", "referer_len")]
    while at + st.size <= n:
        r = st.unpack_from(data, at)
        size = r[F["size"]]
        if size < st.size or at + size > n:
            break
        o = at + st.size
        strs = []
        for k in lens:
            ln = r[k]
            strs.append(data[o:o + ln].decode("utf-8", "surrogateescape"))
            o += ln
        flags = r[F["flags"]]
        us = r[F["duration_us"]]
        t = r[F["time_ms"]]
        out.append({"time": iso_time(t), "peer": strs[2], "port": r[F["peer_port"]], "method": strs[0],
                    "target": strs[1], "status": max(0, r[F["status"]]), "bytes_out": r[F["bytes_out"]],
                    "bytes_in": r[F["bytes_in"]], "duration_ms": us / 1000, "user_agent": strs[3],
                    "referer": strs[4], "time_ms": t, "duration_us": us, "conn": r[F["conn"]],
                    "listener": r[F["listener"]], "http10": bool(flags & lib.NSV_EVF_HTTP10),
                    "tls": bool(flags & lib.NSV_EVF_TLS), "proxy": bool(flags & lib.NSV_EVF_PROXY),
                    "head": bool(flags & lib.NSV_EVF_HEAD)})
        at += size
    return out


def iso_time(ms: int) -> str:
    """"2026-12-02T03:33:00.123Z" for ms since the epoch."""
    d = datetime.datetime.fromtimestamp(ms // 1000, datetime.timezone.utc)
    return d.strftime("%Y-%m-%dT%H:%M:%S") + ".%03dZ" % (ms % 1000)


_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _clf_time(ms: int) -> str:
    """nginx's $time_local: "02/Dec/2026:03:33:00 +0000", in local time
    (English month names whatever the locale)."""
    t = time.localtime(ms // 1000)
    off = t.tm_gmtoff // 60
    return "%02d/%s/%04d:%02d:%02d:%02d %s%02d%02d" % (
        t.tm_mday, _MONTHS[t.tm_mon - 1], t.tm_year, t.tm_hour, t.tm_min, t.tm_sec,
        "-" if off < 0 else "+", abs(off) // 60, abs(off) % 60)


def _nginx(s: str) -> str:
    """nginx's escape=default of a field's bytes: '"', '\\' and bytes
    outside 0x20..0x7e as \\xHH; an empty field is "-"."""
    if not s:
        return "-"
    b = s.encode("utf-8", "surrogateescape")
    if _PLAIN.fullmatch(b):
        return b.decode("ascii")
    return "".join(chr(c) if 0x20 <= c < 0x7f and c not in (0x22, 0x5c) else "\\x%02X" % c for c in b)


_PLAIN = re.compile(rb'[\x20\x21\x23-\x5b\x5d-\x7e]*')
_JSON_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _json_str(s: str) -> str:
    """A JSON string as every binding writes it: '"' and '\\' escaped,
    \\b \\f \\n \\r \\t short, other controls \\u00hh, valid UTF-8 as is,
    and each byte that is not valid UTF-8 (a surrogateescape) \\u00hh."""
    out = []
    for c in s:
        o = ord(c)
        if c in _JSON_SHORT:
            out.append(_JSON_SHORT[c])
        elif o < 0x20:
            out.append("\\u%04x" % o)
        elif 0xdc80 <= o <= 0xdcff:
            out.append("\\u%04x" % (o - 0xdc00))
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def format_common(r: Dict[str, Any]) -> str:
    """nginx "common": peer - - [time_local] "METHOD target HTTP/1.x" status bytes_out
    (bytes_out: the whole answer as framed on the wire, head included)."""
    if r["method"] or r["target"]:
        req = "%s %s HTTP/%s" % (_nginx(r["method"]), _nginx(r["target"]), "1.0" if r["http10"] else "1.1")
    else:
        req = "-"
    return '%s - - [%s] "%s" %d %d' % (_nginx(r["peer"]), _clf_time(r["time_ms"]), req, r["status"], r["bytes_out"])


def format_combined(r: Dict[str, Any]) -> str:
    """nginx "combined": common, then "referer" "user agent" ("-" if none)."""
    return '%s "%s" "%s"' % (format_common(r), _nginx(r["referer"]), _nginx(r["user_agent"]))


def format_json(r: Dict[str, Any]) -> str:
    """One JSON object: time, peer, port, method, target, status,
    bytes_out, bytes_in, duration_ms (always 3 decimals), user_agent,
    referer, in that order, no spaces."""
    us = r["duration_us"]
    return ('{"time":"%s","peer":%s,"port":%d,"method":%s,"target":%s,"status":%d,"bytes_out":%d,'
            '"bytes_in":%d,"duration_ms":%d.%03d,"user_agent":%s,"referer":%s}') % (
        r["time"], _json_str(r["peer"]), r["port"], _json_str(r["method"]), _json_str(r["target"]), r["status"],
        r["bytes_out"], r["bytes_in"], us // 1000, us % 1000, _json_str(r["user_agent"]), _json_str(r["referer"]))


FORMATS: Dict[str, Callable[[Dict[str, Any]], str]] = {
    "common": format_common, "combined": format_combined, "json": format_json}


class AccessLog:
    """Drains a server's access records (nsv_access_take) after each poll
    batch and hands each to `sink`: a format name ("common", "combined",
    "json": a line on the "nanosrv.access" logger at INFO) or a
    callable(record dict)."""

    def __init__(self, fmt: Union[str, Callable[[Dict[str, Any]], Any]]) -> None:
        if callable(fmt):
            self.fn: Callable[[Dict[str, Any]], Any] = fmt
            self.format = None
        elif isinstance(fmt, str) and fmt in FORMATS:
            f = FORMATS[fmt]
            self.format = fmt
            self.fn = lambda r: access_logger.info("%s", f(r))
        else:
            raise ValueError('access_log must be "common", "combined", "json", a callable(record) or None, '
                             "not %r" % (fmt,))
        self._buf = ffi.new("char[]", 64 << 10)
        self._lock = threading.Lock()

    def drain(self, srv: Any) -> int:
        """Hand every waiting record to the sink; returns how many. One
        thread at a time (the buffer is shared): another that finds the lock
        taken leaves the records to it."""
        if not self._lock.acquire(False):
            return 0
        try:
            total = 0
            for _ in range(64):  # bounded: records that keep coming wait for the next poll
                n = lib.nsv_access_take(srv, self._buf, len(self._buf))
                if n <= 0:
                    break
                for r in parse_records(ffi.buffer(self._buf, n)[:]):
                    total += 1
                    try:
                        self.fn(r)
                    except Exception:
                        logging.getLogger("nanosrv").exception("access_log callable %r failed", self.fn)
            return total
        finally:
            self._lock.release()


# ---- inherited sockets (systemd socket activation) ----

def inherited_fds(unset_env: bool = True) -> List[int]:
    """The descriptors systemd (or a supervisor speaking its protocol)
    passed this process: [3, 4, ...], [] when LISTEN_FDS is not for it.
    unset_env removes the variables so child processes do not take them."""
    if not has("nsv_inherited_fds"):
        return []
    n = check(lib.nsv_inherited_fds(1 if unset_env else 0))
    return list(range(3, 3 + n))


def fd_url(fd: int, tls: bool = False) -> str:
    """The "http"/"https" URL of an inherited listening socket: its own port,
    so nsv_listen_fd's port guard holds."""
    import socket
    s = socket.socket(fileno=fd)
    try:
        if s.family == socket.AF_UNIX:
            port = 0
            host = "localhost"
        else:
            addr = s.getsockname()
            host, port = addr[0], addr[1]
            if ":" in host:
                host = "[%s]" % host
    finally:
        s.detach()
    return "%s://%s:%d" % ("https" if tls else "http", host, port)
