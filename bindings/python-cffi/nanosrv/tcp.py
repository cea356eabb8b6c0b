"""Raw TCP (and TLS) connections: tcp:// and tls:// listeners, outbound
connections, and the whole lifecycle of the C API.

    class Echo(nanosrv.TcpHandler):
        def on_data(self, conn, data):
            conn.write(data)

    srv = nanosrv.Manager()
    srv.tcp_listen("tcp://127.0.0.1:0", Echo())
    srv.run()

A handler is an object with any of the methods below (a TcpHandler
subclass, or a class/factory called once per connection):

    on_open(conn)            accepted (listener) or connected (outbound)
    on_data(conn, data)      bytes, in order
    on_eof(conn)             the peer shut its write side; default: close
                             once the output is sent (a half-close answer)
    on_writable(conn, ok)    ok False: queued output passed the high water
                             mark; True: it fell to the low one again
    on_error(conn, exc)      a nanosrv.Error (connect refused, timeout, TLS);
                             on_close follows
    on_close(conn)           the connection is gone; its id is stale
    on_wakeup(conn, data)    Manager.wakeup(conn.id, data) from any thread

conn.write() never refuses: what the library's output limit does not take
waits in Python and goes out as the queue drains. conn.send() is the raw
call (nanosrv.Error NSV_EAGAIN at the limit). Calls on a connection that
closed do nothing and return False (the peer left; not an error).

The events are read by this module from the Manager's batch (the Manager
hands it every raw TCP, timer and wakeup event), so raw TCP, HTTP and
WebSocket listeners share one server and one loop.
"""
import collections
import logging
import threading

from ._ffi import lib
from ._message import BODY, BODY_LEN, CODE, FLAGS, LISTENER, PEER, PEER_LEN, PEER_PORT, EVF_EOF, EVF_TLS
from .errors import check, error

log = logging.getLogger("nanosrv")

_EV_OPEN, _EV_DATA, _EV_WRITABLE = lib.NSV_EV_TCP_OPEN, lib.NSV_EV_TCP_DATA, lib.NSV_EV_TCP_WRITABLE
_EV_CONNECTED, _EV_CLOSE, _EV_ERROR = lib.NSV_EV_TCP_CONNECTED, lib.NSV_EV_CLOSE, lib.NSV_EV_ERROR
_EV_TIMER = getattr(lib, "NSV_EV_TIMER", 15)
_EV_WAKEUP = getattr(lib, "NSV_EV_WAKEUP", 16)
_EAGAIN, _ESTALE, _ECLOSED, _ESTATE = lib.NSV_EAGAIN, lib.NSV_ESTALE, lib.NSV_ECLOSED, lib.NSV_ESTATE
_send = lib.nsv_send
_GONE = (_ESTALE, _ECLOSED)


class TcpHandler:
    """Base class with the default behaviour of every callback."""

    def on_open(self, conn):
        pass

    def on_data(self, conn, data):
        pass

    def on_eof(self, conn):
        conn.close()

    def on_writable(self, conn, writable):
        pass

    def on_error(self, conn, exc):
        log.info("connection %#x: %s", conn.id, exc)

    def on_close(self, conn):
        pass

    def on_wakeup(self, conn, data):
        pass


def _instance(handler):
    """A handler object for one connection: a class or factory is called."""
    if isinstance(handler, type) or (callable(handler) and not hasattr(handler, "on_data")):
        return handler()
    return handler


class TcpConnection:
    """One raw TCP/TLS connection. `id`, `peer` ((address, port)),
    `is_client` (made by connect), `is_tls`, `closed`, `eof` (the peer
    shut its side), `writable`, `handler`, and `data`, free for the host."""
    __slots__ = ("_m", "_s", "id", "handler", "listener", "peer", "is_client", "is_tls", "closed", "eof",
                 "writable", "connected", "data", "_pending", "_pending_len", "_after", "_paused", "__weakref__")

    def __init__(self, manager, cid, handler, listener=-1, is_client=False, is_tls=False):
        self._m = manager
        self._s = manager._srv
        self.id = cid
        self.handler = handler
        self.listener = listener
        self.peer = ("", 0)
        self.is_client = is_client
        self.is_tls = is_tls
        self.closed = False
        self.eof = False
        self.writable = True
        self.connected = not is_client
        self.data = None
        self._pending = None    # bytes the output limit did not take yet
        self._pending_len = 0
        self._after = None      # "close" / "shutdown" once _pending is out
        self._paused = False

    def _kick(self):
        k = self._m._kick
        if k is not None:
            k()

    def _fail(self, r):
        if r in _GONE:
            self.closed = True
            return False
        check(r, self._s)

    # ---- output ----

    def send(self, data):
        """Queue bytes (nsv_send). True when queued, False when the
        connection has closed; nanosrv.Error NSV_EAGAIN at the output limit."""
        if self.closed:
            return False
        if type(data) is not bytes:
            data = bytes(data)
        r = _send(self._s, self.id, data, len(data))
        if r:
            return self._fail(r)
        if self._m._kick is not None:
            self._kick()
        return True

    def write(self, data):
        """Queue bytes, keeping in Python what the output limit refuses
        (sent as the queue drains). True, or False once closed."""
        if self.closed:
            return False
        if type(data) is not bytes:
            data = bytes(data)
        if not data:
            return True
        if self._pending:
            self._pending.append(data)
            self._pending_len += len(data)
            return True
        r = _send(self._s, self.id, data, len(data))
        if r == 0:
            if self._m._kick is not None:
                self._kick()
            return True
        if r == _EAGAIN:
            self._pending = collections.deque((data,))
            self._pending_len = len(data)
            return True
        return self._fail(r)

    def writelines(self, chunks):
        return all([self.write(c) for c in chunks])

    def _flush(self):
        p = self._pending
        while p:
            data = p[0]
            r = _send(self._s, self.id, data, len(data))
            if r == _EAGAIN:
                return
            if r:
                p.clear()
                self._pending_len = 0
                self._fail(r)
                return
            p.popleft()
            self._pending_len -= len(data)
        self._pending = None
        after, self._after = self._after, None
        if after == "close":
            self.close()
        elif after == "shutdown":
            self.shutdown()
        self._kick()

    @property
    def pending(self):
        """Bytes waiting in Python for the library's output queue."""
        return self._pending_len

    def queued(self):
        """Bytes queued in the library plus those waiting in Python (0 once
        closed)."""
        if self.closed:
            return 0
        r = lib.nsv_conn_queued(self._s, self.id)
        if r < 0:
            if r in _GONE:
                return 0
            r = 0  # another thread of a sharded server: only the Python part is known
        return r + self._pending_len

    # ---- lifecycle ----

    def close(self):
        """Close once queued output (Python's included) is sent."""
        if self.closed:
            return False
        if self._pending:
            self._after = "close"
            return True
        r = lib.nsv_close(self._s, self.id)
        self._kick()
        return True if r == 0 else self._fail(r)

    def abort(self):
        """Close now, dropping queued output (the peer sees a reset)."""
        if self.closed:
            return False
        self._pending, self._pending_len, self._after = None, 0, None
        r = lib.nsv_abort(self._s, self.id)
        self._kick()
        return True if r == 0 else self._fail(r)

    def shutdown(self):
        """Half-close: shut the write side once queued output is sent; the
        connection closes when the peer has closed too."""
        if self.closed:
            return False
        if self._pending:
            self._after = "shutdown"
            return True
        r = lib.nsv_shutdown(self._s, self.id)
        self._kick()
        return True if r == 0 else self._fail(r)

    write_eof = shutdown

    def pause_reading(self):
        return self._pause(True)

    def resume_reading(self):
        return self._pause(False)

    def _pause(self, on):
        if self.closed:
            return False
        r = lib.nsv_pause_read(self._s, self.id, 1 if on else 0)
        if r == 0:
            self._paused = on
            self._kick()
            return True
        return self._fail(r)

    @property
    def reading(self):
        return not self._paused and not self.closed

    def set_water_marks(self, high, low=None):
        """Per-connection water marks: on_writable(False) past `high`,
        on_writable(True) at `low` again (default high // 2)."""
        if low is None:
            low = high // 2
        if not (0 <= low <= high):
            raise ValueError("water marks need 0 <= low <= high (got high %r, low %r)" % (high, low))
        if self.closed:
            return False
        r = lib.nsv_set_water_marks(self._s, self.id, high, low)
        return True if r == 0 else self._fail(r)

    def set_tag(self, tag):
        if self.closed:
            return False
        check(lib.nsv_conn_set_tag(self._s, self.id, tag), self._s)
        return True

    def __repr__(self):
        return "<TcpConnection %#x %s:%d%s>" % (self.id, self.peer[0], self.peer[1],
                                               " closed" if self.closed else "")


class Raw:
    """Per-Manager state: raw listeners and connections, timers, the wakeup
    handler. handle() takes the events that are its and says so."""

    def __init__(self, manager):
        self.m = manager
        self.listeners = {}     # listener id -> handler (object or factory)
        self.conns = {}         # connection id -> TcpConnection
        self.timers = {}        # timer id -> Timer
        self.on_wakeup = None   # fn(conn_id, data) for connections that are not raw
        self.lock = threading.Lock()  # a connect from another thread registers under it
        self.connecting = 0

    def close(self):
        """The server is being freed: every connection and timer is gone
        (calls on them are late calls, never touching the freed server)."""
        for c in self.conns.values():
            c.closed = True
            c._pending, c._pending_len = None, 0
        self.conns.clear()
        for t in self.timers.values():
            t._done = True
        self.timers.clear()

    def handle(self, t, cid, e, arena):
        conns = self.conns
        c = conns.get(cid)
        if c is None:
            if t == _EV_OPEN:
                h = self.listeners.get(e[LISTENER])
                if h is None:
                    return False
                c = conns[cid] = TcpConnection(self.m, cid, None, e[LISTENER], False, bool(e[FLAGS] & EVF_TLS))
                c.peer = (arena[e[PEER]:e[PEER] + e[PEER_LEN]].decode("latin-1"), e[PEER_PORT])
                try:
                    c.handler = _instance(h)
                except Exception:
                    log.exception("handler factory failed; closing connection %#x", cid)
                    c.abort()
                    return True
                self._call(c, "on_open", c)
                return True
            if t == _EV_TIMER:
                tm = self.timers.get(cid)
                if tm is not None:
                    tm._fire()
                    return True
                return t == _EV_TIMER
            if self.connecting and t in (_EV_CONNECTED, _EV_DATA, _EV_ERROR, _EV_CLOSE, _EV_WRITABLE):
                with self.lock:  # a connect() in another thread may not have registered its id yet
                    c = conns.get(cid)
            if c is None:
                if t == _EV_WAKEUP and self.on_wakeup is not None:
                    data = arena[e[BODY]:e[BODY] + e[BODY_LEN]]
                    try:
                        self.on_wakeup(cid, data)
                    except Exception:
                        log.exception("wakeup handler failed")
                    return True
                return False
        if t == _EV_DATA:
            n = e[BODY_LEN]
            if n:
                o = e[BODY]
                self._call(c, "on_data", c, arena[o:o + n])
            if e[FLAGS] & EVF_EOF:
                c.eof = True
                self._call(c, "on_eof", c)
            return True
        if t == _EV_WRITABLE:
            ok = e[CODE] != 0
            if ok and c._pending:
                c._flush()
                if c._pending:
                    return True  # still over the limit: stay unwritable
            if c.writable != ok:
                c.writable = ok
                self._call(c, "on_writable", c, ok)
            return True
        if t == _EV_CONNECTED:
            c.connected = True
            c.peer = (arena[e[PEER]:e[PEER] + e[PEER_LEN]].decode("latin-1"), e[PEER_PORT]) if e[PEER_LEN] \
                else c.peer
            self._call(c, "on_open", c)
            return True
        if t == _EV_CLOSE:
            del conns[cid]
            c.closed = True
            c._pending, c._pending_len = None, 0
            self._call(c, "on_close", c)
            return True
        if t == _EV_ERROR:
            text = arena[e[BODY]:e[BODY] + e[BODY_LEN]].decode("utf-8", "replace")
            self._call(c, "on_error", c, error(e[CODE], text))
            return True
        if t == _EV_WAKEUP:
            self._call(c, "on_wakeup", c, arena[e[BODY]:e[BODY] + e[BODY_LEN]])
            return True
        return True

    def _call(self, c, name, *args):
        fn = getattr(c.handler, name, None)
        if fn is None:
            if name == "on_eof":
                c.close()
            return
        try:
            fn(*args)
        except Exception:
            # A failing callback must not cost the batch; the connection is
            # in an unknown state for its handler, so it goes.
            log.exception("%s failed for connection %#x; aborting it", name, c.id)
            c.abort()


def state(manager):
    r = manager._raw
    if r is None:
        r = manager._raw = Raw(manager)
    return r


class _Refuse:
    """The handler of a listener whose options were refused."""

    def on_open(self, conn):
        conn.abort()


def listen(manager, url, handler, **lopts):
    """tcp:// or tls:// listener whose connections `handler` serves.
    Listener options as Manager.http_listen (proxy_protocol, proxy_from,
    allow, deny, ...): behind a PROXY protocol front conn.peer is the
    client's address."""
    if not isinstance(url, str):
        raise TypeError("url must be str, not %s" % type(url).__name__)
    if handler is None or not (callable(handler) or hasattr(handler, "on_data") or hasattr(handler, "on_open")):
        raise TypeError("handler must be a handler object, class or factory")
    from ._manager import Listener
    srv = manager._live()
    u = url.encode()
    st = state(manager)
    lid = check(lib.nsv_listen(srv, u, len(u)), srv)
    st.listeners[lid] = handler
    ref = Listener(lid, lib.nsv_listener_port(srv, lid), url, manager)
    if lopts:
        try:
            manager.configure_listener(lid, **lopts)
        except BaseException:
            st.listeners[lid] = _Refuse  # nothing is served unfiltered
            raise
    return ref


def connect(manager, url, handler):
    """Outbound tcp://host:port or tls://host:port; returns the
    TcpConnection at once (handler.on_open once connected; on_error then
    on_close on failure). Data written before is queued."""
    if not isinstance(url, str):
        raise TypeError("url must be str, not %s" % type(url).__name__)
    srv = manager._live()
    u = url.encode()
    st = state(manager)
    h = _instance(handler)
    with st.lock:
        st.connecting += 1
        try:
            cid = check(lib.nsv_connect(srv, u, len(u)), srv)
            c = st.conns[cid] = TcpConnection(manager, cid, h, -1, True, url.lower().startswith("tls:"))
        finally:
            st.connecting -= 1
    host, _, port = url.split("://", 1)[-1].rpartition(":")
    c.peer = (host.strip("[]"), int(port) if port.isdigit() else 0)
    if manager._kick is not None:
        manager._kick()
    return c
