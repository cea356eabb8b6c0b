"""The py-netty model on libnanosrv: a py-netty program ports by changing
its import (`from py_netty import ...` -> `from nanosrv.netty import ...`).

    from nanosrv.netty import ServerBootstrap
    ServerBootstrap().bind(address='127.0.0.1', port=8080).close_future().sync()

An EventLoopGroup is one libnanosrv server polled by its own thread (the
library's loop does the socket and TLS work in C; the `num` argument is
accepted for compatibility). Handlers run in that thread. Calls made from
other threads (a write from a proxy's other side, a connect, a close) are
handed to the group's thread and run there between polls, as py-netty's
submit_task does; ChannelFuture.sync() waits for them. Waiting in a group's
own thread for work of the same group would never end, so it raises.

Writes never fail for size: what the library's output limit does not take
waits and goes out as the queue drains; channel_writability_changed fires
when queued output crosses the high (64 KiB) and low (32 KiB) marks.
bind(port=0) picks a free port (channel.port says which).
"""
import collections
import concurrent.futures
import logging
import threading

from ._manager import Manager
from .tcp import TcpHandler, connect as _connect, listen as _listen

log = logging.getLogger("nanosrv.netty")


class ChannelHandlerAdapter:
    """Callbacks of a channel; override the ones you need."""

    def channel_registered(self, ctx):
        pass

    def channel_unregistered(self, ctx):
        pass

    def channel_active(self, ctx):
        pass

    def channel_read(self, ctx, buffer):
        pass

    def channel_inactive(self, ctx):
        pass

    def channel_handshake_complete(self, ctx):
        pass

    def channel_writability_changed(self, ctx):
        pass

    def exception_caught(self, ctx, exception):
        log.error("exception in %s: %r; closing it", ctx.channel(), exception)
        ctx.close()


NoOpChannelHandler = ChannelHandlerAdapter


class EchoChannelHandler(ChannelHandlerAdapter):
    def channel_read(self, ctx, buffer):
        ctx.write(buffer)


class ChannelFuture:
    """A result to come: sync() waits and returns self (raising the failure),
    channel() gives the channel."""

    def __init__(self, channel=None):
        self._ch = channel
        self.future = concurrent.futures.Future()

    def channel(self):
        return self._ch

    def sync(self, timeout=None):
        if not self.future.done():
            g = getattr(self._ch, "_group", None)
            if g is not None and g.in_eventloop():
                raise RuntimeError("sync() in the event loop thread of %s would wait for itself; "
                                   "use add_listener() or another EventLoopGroup" % g.name)
        self.future.result(timeout)
        return self

    def done(self):
        return self.future.done()

    def result(self, timeout=None):
        return self.future.result(timeout)

    def exception(self, timeout=None):
        return self.future.exception(timeout)

    def add_listener(self, fn):
        self.future.add_done_callback(lambda f: fn(self))
        return self

    def _set(self, value=None):
        if not self.future.done():
            self.future.set_result(value)

    def _fail(self, exc):
        if not self.future.done():
            self.future.set_exception(exc)


class EventLoopGroup:
    """One libnanosrv server and the thread that polls it."""

    def __init__(self, num=1, prefix="EventLoopGroup"):
        self.num = num
        self.name = prefix
        self._m = None
        self._thread = None
        self._tasks = collections.deque()
        self._lock = threading.Lock()
        self._running = False
        self._ident = None

    # ---- the loop ----

    def manager(self):
        """The group's nanosrv.Manager (created on first use)."""
        with self._lock:
            if self._m is None:
                self._m = Manager()
            return self._m

    def _start(self):
        with self._lock:
            if self._thread is None:
                self._running = True
                self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self._thread.start()

    def _loop(self):
        self._ident = threading.get_ident()
        m = self._m
        try:
            while self._running:
                self._run_tasks()
                if m.poll(250) < 0:
                    break
        except Exception:
            log.exception("event loop %s failed", self.name)
        finally:
            self._running = False

    def _run_tasks(self):
        tasks = self._tasks
        while tasks:
            fn, fut = tasks.popleft()
            try:
                r = fn()
                if fut is not None:
                    fut.set_result(r)
            except BaseException as e:
                if fut is not None:
                    fut.set_exception(e)
                else:
                    log.exception("task failed in %s", self.name)

    def in_eventloop(self):
        return threading.get_ident() == self._ident

    def submit_task(self, fn, want_result=True):
        """Run fn() in the group's thread (now, when called from it)."""
        self.manager()
        fut = concurrent.futures.Future() if want_result else None
        if self.in_eventloop():
            try:
                r = fn()
                if fut is not None:
                    fut.set_result(r)
            except BaseException as e:
                if fut is None:
                    raise
                fut.set_exception(e)
            return fut
        self._tasks.append((fn, fut))
        self._start()
        self._m.wakeup()
        return fut

    def _call(self, fn):
        """fn() in the group's thread, waiting for its result."""
        return self.submit_task(fn).result()

    def get_eventloop(self):
        return self

    def shutdown_gracefully(self):
        self._running = False
        if self._m is not None:
            self._m.stop()
        t = self._thread
        if t is not None and not self.in_eventloop():
            t.join(10)


class ChannelHandlerContext:
    """What a handler gets: the channel and shortcuts to it."""
    __slots__ = ("_ch",)

    def __init__(self, channel):
        self._ch = channel

    def channel(self):
        return self._ch

    def write(self, buffer):
        return self._ch.write(buffer)

    def close(self):
        return self._ch.close()

    def close_forcibly(self):
        return self._ch.close_forcibly()


ChannelContext = ChannelHandlerContext


class NioSocketChannel(TcpHandler):
    """A connected channel (accepted or outbound)."""

    def __init__(self, group, handler_initializer, server=None):
        self._group = group
        self._init = handler_initializer
        self._handler = None
        self._conn = None
        self._ctx = ChannelHandlerContext(self)
        self._active = False
        self._auto_read = True
        self._close_future = ChannelFuture(self)
        self._connect_future = ChannelFuture(self)
        self._server = server

    # ---- TcpHandler callbacks (in the group's thread) ----

    def on_open(self, conn):
        self._conn = conn
        self._active = True
        h = self.handler()
        self._safe(h.channel_registered)
        if conn.is_client and conn.is_tls:
            self._safe(h.channel_handshake_complete)
        self._safe(h.channel_active)
        self._connect_future._set(self)

    def on_data(self, conn, data):
        self._safe(self.handler().channel_read, data)

    def on_eof(self, conn):
        # py-netty closes a channel whose peer ended its side.
        self.close()

    def on_writable(self, conn, writable):
        self._safe(self.handler().channel_writability_changed)

    def on_error(self, conn, exc):
        if not self._connect_future.done():
            self._connect_future._fail(ConnectionError(str(exc)))
            return
        self._safe(self.handler().exception_caught, exc, catch=False)

    def on_close(self, conn):
        was = self._active
        self._active = False
        if not self._connect_future.done():
            self._connect_future._fail(ConnectionError("connection closed before it was established"))
        h = self.handler()
        if was:
            self._safe(h.channel_inactive)
            self._safe(h.channel_unregistered)
        self._close_future._set(self)

    def _safe(self, fn, *args, catch=True):
        try:
            fn(self._ctx, *args)
        except Exception as e:
            if not catch:
                log.exception("exception_caught failed")
                return
            try:
                self.handler().exception_caught(self._ctx, e)
            except Exception:
                log.exception("exception_caught failed; closing %s", self)
                self.close_forcibly()

    # ---- the py-netty channel API ----

    def handler(self):
        if self._handler is None:
            self._handler = self._init()
        return self._handler

    def context(self):
        return self._ctx

    handler_context = context

    def eventloop(self):
        return self._group

    def in_eventloop(self):
        return self._group.in_eventloop()

    def id(self):
        return "%#x" % self._conn.id if self._conn is not None else "?"

    def is_active(self):
        return self._active and not self._close_future.done()

    def is_writable(self):
        c = self._conn
        return c is not None and c.writable

    def is_auto_read(self):
        return self._auto_read

    def close_future(self):
        return self._close_future

    def channel_future(self):
        return self._connect_future

    def _on_loop(self, fn):
        if self._group.in_eventloop():
            fn()
        else:
            self._group.submit_task(fn, want_result=False)

    def write(self, buffer, channel_future=None):
        """Queue bytes; returns a ChannelFuture done once queued (False
        when the channel had closed: a late write is not an error)."""
        cf = channel_future or ChannelFuture(self)
        data = buffer if type(buffer) is bytes else bytes(buffer)

        def do():
            c = self._conn
            cf._set(c.write(data) if c is not None else False)
        if self._conn is not None and self._group.in_eventloop():
            do()
        else:
            self._when_ready(do)
        return cf

    def _when_ready(self, fn):
        # Before the connection is up, writes wait for it (in order).
        def later(_f):
            # Connected (or failed: then the call has nothing to act on).
            self._group.submit_task(lambda: self._conn is not None and fn(), want_result=False)

        def run():
            if self._conn is None:
                self._connect_future.add_listener(later)
            else:
                fn()
        self._on_loop(run)

    def set_auto_read(self, auto_read):
        """Flow control: stop (False) or resume (True) reading."""
        self._auto_read = bool(auto_read)
        self._when_ready(lambda: self._conn._pause(not self._auto_read))

    def shutdown_output(self):
        """Half-close: end our side once queued output is sent."""
        self._when_ready(lambda: self._conn.shutdown())
        return self._close_future

    def close(self, force=False):
        if force:
            return self.close_forcibly()
        return self.close_gracefully()

    def close_gracefully(self):
        self._when_ready(lambda: self._conn.close())
        return self._close_future

    def close_forcibly(self):
        self._when_ready(lambda: self._conn.abort())
        return self._close_future

    def __str__(self):
        c = self._conn
        if c is None:
            return "[id:?, ? R:?]"
        sign = "-" if self.is_active() else "!"
        return "[id:%#x, %s R:/%s:%d]" % (c.id, sign, c.peer[0], c.peer[1])

    __repr__ = __str__


class NioServerSocketChannel:
    """A listening channel: `port`, close(), close_future()."""

    def __init__(self, group, listener):
        self._group = group
        self.listener = listener
        self.port = listener.port
        self._close_future = ChannelFuture(self)

    def close_future(self):
        return self._close_future

    def is_active(self):
        return not self._close_future.done()

    def close(self):
        """Stop the group's loop (a libnanosrv listener lives as long as its server)."""
        self._group.shutdown_gracefully()
        self._close_future._set(self)
        return self._close_future

    def __str__(self):
        return "[server port %d]" % self.port


class Bootstrap:
    """Outbound channels: connect(address, port) -> ChannelFuture."""

    def __init__(self, eventloop_group=None, handler_initializer=EchoChannelHandler, tls=False, verify=True,
                 ssl_context_cb=None, cafile=None):
        self.eventloop_group = eventloop_group or EventLoopGroup()
        self.handler_initializer = handler_initializer
        self.tls = tls
        self.verify = verify
        self.cafile = cafile

    def connect(self, address, port, ensure_connected=False, sni=None, use_socksocket=False):
        g = self.eventloop_group
        host = "[%s]" % address if ":" in address else address
        url = "%s://%s:%d" % ("tls" if self.tls else "tcp", host, port)
        ch = NioSocketChannel(g, self.handler_initializer)

        def do():
            m = g.manager()
            if self.tls:
                if self.cafile is not None:
                    m.set_tls(client_ca=self.cafile)
                if not self.verify:
                    m.set_tls(verify_server=False)
            try:
                _connect(m, url, ch)
            except Exception as e:
                ch._connect_future._fail(e)
                ch._close_future._set(ch)
        g.submit_task(do, want_result=False)
        if ensure_connected:
            ch._connect_future.sync()
        return ch._connect_future


class ServerBootstrap:
    """Listening channels: bind(address, port) -> ChannelFuture."""

    def __init__(self, parent_group=None, child_group=None, child_handler_initializer=EchoChannelHandler,
                 certfile=None, keyfile=None, ssl_context_cb=None, parant_group=None, cafile=None,
                 verify_client=None, keyfile_password=None):
        # The library accepts and serves in one loop: the child group's.
        self.parent_group = parent_group or parant_group
        self.child_group = child_group or EventLoopGroup(1, "Worker")
        self.child_handler_initializer = child_handler_initializer
        if (certfile is None) != (keyfile is None):
            raise ValueError("Both certfile and keyfile must be specified")
        self.certfile, self.keyfile = certfile, keyfile
        self.cafile, self.verify_client, self.password = cafile, verify_client, keyfile_password

    def bind(self, address="localhost", port=-1):
        if not isinstance(port, int) or port < 0:
            raise ValueError("port must be given (0 picks a free one)")
        g = self.child_group
        init = self.child_handler_initializer
        tls = self.certfile is not None
        host = "[%s]" % address if ":" in address else address
        url = "%s://%s:%d" % ("tls" if tls else "tcp", host, port)

        def do():
            m = g.manager()
            if tls:
                m.set_tls(cert=self.certfile, key=self.keyfile, password=self.password, ca=self.cafile,
                          verify_client=self.verify_client)
            return _listen(m, url, lambda: NioSocketChannel(g, init))
        listener = g._call(do)
        ch = NioServerSocketChannel(g, listener)
        cf = ChannelFuture(ch)
        cf._set(ch)
        return _BindFuture(ch, cf)


class _BindFuture(ChannelFuture):
    """bind()'s result: done at once; close_future() is the server's."""

    def __init__(self, ch, cf):
        super().__init__(ch)
        self.future = cf.future

    def close_future(self):
        return self._ch.close_future()


__all__ = ["ServerBootstrap", "Bootstrap", "EventLoopGroup", "ChannelHandlerAdapter", "NoOpChannelHandler",
           "EchoChannelHandler", "ChannelFuture", "ChannelHandlerContext", "ChannelContext", "NioSocketChannel",
           "NioServerSocketChannel"]
