"""asyncio Protocol/Transport on libnanosrv raw TCP: protocol code written
for loop.create_server / loop.create_connection runs unchanged.

    class Echo(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport = transport
        def data_received(self, data):
            self.transport.write(data)

    async def main():
        server = await nanosrv.aionet.create_server(Echo, "127.0.0.1", 0)
        print(server.port)
        await server.serve_forever()

The sockets live in libnanosrv (one Manager per event loop, attached with
nanosrv.aio); callbacks run in the asyncio loop's thread. Transport
methods behave as asyncio's: write() buffers without limit and calls
protocol.pause_writing() past the high water mark (default 64 KiB) and
resume_writing() at the low one; eof_received() returning a false value
closes the transport; connection_lost(exc) comes once.
ssl= takes the keyword arguments of Manager.set_tls for a server
(ssl={"cert": ..., "key": ...}) and True (or such a dict, with client_ca /
verify_server) for a client.
"""
import asyncio
import weakref

from . import aio
from ._manager import Manager
from .errors import Error
from .tcp import TcpHandler, connect as _connect, listen as _listen

_managers = weakref.WeakKeyDictionary()   # event loop -> Manager


def manager_for(loop=None):
    """The Manager that serves this event loop's transports (made and
    attached on first use)."""
    loop = loop or asyncio.get_running_loop()
    m = _managers.get(loop)
    if m is None:
        m = Manager()
        aio.attach(m, loop)
        _managers[loop] = m
    return m


class Transport(asyncio.Transport):
    """asyncio.Transport over a nanosrv.tcp.TcpConnection."""

    def __init__(self, loop, protocol, extra=None):
        super().__init__(extra)
        self._loop = loop
        self._protocol = protocol
        self._conn = None
        self._closing = False
        self._lost = False
        self._paused_writing = False
        self._high, self._low = 65536, 16384

    # ---- reading ----

    def is_reading(self):
        return self._conn is not None and self._conn.reading

    def pause_reading(self):
        if self._conn is not None:
            self._conn.pause_reading()

    def resume_reading(self):
        if self._conn is not None:
            self._conn.resume_reading()

    # ---- writing ----

    def write(self, data):
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError("data argument must be a bytes-like object, not %r" % type(data).__name__)
        if self._closing or self._conn is None:
            return  # asyncio ignores writes after close
        self._conn.write(data)

    def writelines(self, list_of_data):
        for d in list_of_data:
            self.write(d)

    def can_write_eof(self):
        return True

    def write_eof(self):
        if self._conn is not None:
            self._conn.shutdown()

    def get_write_buffer_size(self):
        return self._conn.queued() if self._conn is not None else 0

    def get_write_buffer_limits(self):
        return self._low, self._high

    def set_write_buffer_limits(self, high=None, low=None):
        if high is None:
            high = 4 * low if low is not None else 65536
        if low is None:
            low = high // 4
        if not high >= low >= 0:
            raise ValueError("high (%r) must be >= low (%r) must be >= 0" % (high, low))
        self._high, self._low = high, low
        if self._conn is not None:
            self._conn.set_water_marks(high, low)

    # ---- closing ----

    def is_closing(self):
        return self._closing

    def close(self):
        if not self._closing:
            self._closing = True
            if self._conn is not None:
                self._conn.close()

    def abort(self):
        self._closing = True
        if self._conn is not None:
            self._conn.abort()

    def get_protocol(self):
        return self._protocol

    def set_protocol(self, protocol):
        self._protocol = protocol


class _Bridge(TcpHandler):
    """TcpHandler events -> asyncio Protocol calls."""

    def __init__(self, loop, protocol_factory, server=None, waiter=None):
        self.loop = loop
        self.factory = protocol_factory
        self.server = server
        self.waiter = waiter
        self.t = None

    def on_open(self, conn):
        try:
            proto = self.factory()
        except Exception as e:
            conn.abort()
            if self.waiter is not None and not self.waiter.done():
                self.waiter.set_exception(e)
            return
        t = self.t = Transport(self.loop, proto, {"peername": conn.peer, "nanosrv_conn": conn})
        t._conn = conn
        conn.set_water_marks(t._high, t._low)
        if self.server is not None:
            self.server._attach(t)
        proto.connection_made(t)
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result((t, proto))

    def on_data(self, conn, data):
        if self.t is not None:
            self.t._protocol.data_received(data)

    def on_eof(self, conn):
        t = self.t
        if t is None:
            return
        keep = t._protocol.eof_received() if hasattr(t._protocol, "eof_received") else None
        if not keep:
            t.close()

    def on_writable(self, conn, writable):
        t = self.t
        if t is None:
            return
        if not writable and not t._paused_writing:
            t._paused_writing = True
            t._protocol.pause_writing()
        elif writable and t._paused_writing:
            t._paused_writing = False
            t._protocol.resume_writing()

    def on_error(self, conn, exc):
        self.exc = exc
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError(str(exc)))

    def on_close(self, conn):
        t = self.t
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("connection closed before it was established"))
        if t is None or t._lost:
            return
        t._lost = True
        t._closing = True
        if self.server is not None:
            self.server._detach(t)
        exc = getattr(self, "exc", None)
        t._protocol.connection_lost(exc)


class Server(asyncio.AbstractServer):
    """What create_server returns: `port`, close(), wait_closed(),
    serve_forever(), is_serving(); async with."""

    def __init__(self, loop, manager, listener):
        self._loop = loop
        self._m = manager
        self.listener = listener
        self.port = listener.port
        self._transports = set()
        self._serving = True
        self._closed = loop.create_future()

    def _attach(self, t):
        self._transports.add(t)

    def _detach(self, t):
        self._transports.discard(t)

    def get_loop(self):
        return self._loop

    def is_serving(self):
        return self._serving

    def close(self):
        """Stop serving: transports opened by this server are closed (a
        libnanosrv listener lives as long as its server, so new
        connections are refused by closing them at once)."""
        if not self._serving:
            return
        self._serving = False
        for t in list(self._transports):
            t.close()
        if not self._closed.done():
            self._closed.set_result(None)

    async def start_serving(self):
        pass

    async def serve_forever(self):
        await self._closed

    async def wait_closed(self):
        await self._closed

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self.close()
        await self.wait_closed()


def _url(scheme, host, port):
    host = host or "127.0.0.1"
    return "%s://%s:%d" % (scheme, "[%s]" % host if ":" in host else host, port)


async def create_server(protocol_factory, host="127.0.0.1", port=0, *, ssl=None, manager=None):
    """loop.create_server for raw TCP (ssl: Manager.set_tls arguments)."""
    loop = asyncio.get_running_loop()
    m = manager or manager_for(loop)
    if ssl:
        m.set_tls(**ssl)
    holder = []

    def bridge():
        s = holder[0]
        if not s._serving:
            return _Refuse()
        return _Bridge(loop, protocol_factory, s)
    lst = _listen(m, _url("tls" if ssl else "tcp", host, port), bridge)
    server = Server(loop, m, lst)
    holder.append(server)
    return server


class _Refuse(TcpHandler):
    def on_open(self, conn):
        conn.abort()


async def create_connection(protocol_factory, host, port, *, ssl=None, manager=None):
    """loop.create_connection for raw TCP: (transport, protocol) once
    connected; ConnectionError (refused, timeout, TLS) otherwise."""
    loop = asyncio.get_running_loop()
    m = manager or manager_for(loop)
    if isinstance(ssl, dict):
        m.set_tls(**ssl)
    waiter = loop.create_future()
    try:
        _connect(m, _url("tls" if ssl else "tcp", host, port), _Bridge(loop, protocol_factory, None, waiter))
    except Error as e:
        raise ConnectionError(str(e)) from e
    return await waiter


async def open_connection(host, port, *, ssl=None, limit=2 ** 16, manager=None):
    """asyncio.open_connection on libnanosrv: (StreamReader, StreamWriter)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit, loop=loop)
    proto = asyncio.StreamReaderProtocol(reader, loop=loop)
    transport, _ = await create_connection(lambda: proto, host, port, ssl=ssl, manager=manager)
    writer = asyncio.StreamWriter(transport, proto, reader, loop)
    return reader, writer


async def start_server(client_connected_cb, host="127.0.0.1", port=0, *, ssl=None, limit=2 ** 16, manager=None):
    """asyncio.start_server on libnanosrv."""
    loop = asyncio.get_running_loop()

    def factory():
        reader = asyncio.StreamReader(limit=limit, loop=loop)
        return asyncio.StreamReaderProtocol(reader, client_connected_cb, loop=loop)
    return await create_server(factory, host, port, ssl=ssl, manager=manager)
