"""Host timers and connection wakeups, delivered in the poll batch.

    t = srv.call_later(0.5, fn, arg)       # once, asyncio's shape
    t = srv.timer(100, fn, repeat_ms=100)  # fn() every 100 ms
    t.cancel()
    srv.wakeup(conn_id, b"payload")        # from any thread

Timers fire in the thread that polls the server, between other events.
A wakeup carries bytes to a connection's handler (TcpHandler.on_wakeup, or
the http_listen_event handler with Event.Wakeup), in order with the
connection's other events; NSV_ESTALE when the connection has closed.
"""
import logging

from ._ffi import ffi, lib
from .errors import check, require

log = logging.getLogger("nanosrv")


class Timer:
    """A scheduled call: `id`, `repeat_ms`, cancel(), cancelled()."""
    __slots__ = ("_m", "id", "fn", "args", "repeat_ms", "_done")

    def __init__(self, manager, tid, fn, args, repeat_ms):
        self._m = manager
        self.id = tid
        self.fn = fn
        self.args = args
        self.repeat_ms = repeat_ms
        self._done = False

    def cancel(self):
        """Stop it; no call follows. False when it had run or was cancelled."""
        if self._done:
            return False
        self._done = True
        raw = self._m._raw
        if raw is not None:
            raw.timers.pop(self.id, None)
        srv = self._m._srv
        if srv == ffi.NULL:
            return False
        return lib.nsv_timer_cancel(srv, self.id) == 0

    def cancelled(self):
        return self._done

    def _fire(self):
        if not self.repeat_ms:
            self._done = True
            self._m._raw.timers.pop(self.id, None)
        try:
            self.fn(*self.args)
        except Exception:
            log.exception("timer callback %r failed", self.fn)

    def __repr__(self):
        return "<Timer %d%s>" % (self.id, " done" if self._done else "")


def add(manager, delay_ms, fn, args=(), repeat_ms=0):
    from .tcp import state
    if not callable(fn):
        raise TypeError("timer callback must be callable")
    if delay_ms < 0 or repeat_ms < 0:
        raise ValueError("timer delays must be >= 0")
    srv = manager._live()
    fn_add = require("nsv_timer_add", "timers")
    st = state(manager)
    tid = check(fn_add(srv, int(delay_ms), int(repeat_ms), 0), srv)
    t = st.timers[tid] = Timer(manager, tid, fn, args, int(repeat_ms))
    if manager._kick is not None:
        manager._kick()
    return t


def wakeup_conn(manager, conn_id, data=b""):
    """nsv_wakeup_conn: True when queued; False when the connection is gone."""
    fn = require("nsv_wakeup_conn", "wakeup(conn, data)")
    if isinstance(data, str):
        data = data.encode("utf-8")
    elif not isinstance(data, bytes):
        data = bytes(data)
    cid = getattr(conn_id, "id", conn_id)
    srv = manager._live()
    r = fn(srv, cid, data, len(data))
    if r == lib.NSV_ESTALE:
        return False
    check(r, srv)
    return True


__all__ = ["Timer", "add", "wakeup_conn"]
