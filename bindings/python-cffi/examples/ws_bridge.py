#!/usr/bin/python3
"""A WebSocket bridge: each client of /ws/<path> gets its own connection
to the upstream WebSocket server's /<path> (srv.websocket_connect, on the
loop that serves the clients), and messages flow both ways as they are,
text as text and binary as binary. A close on either side closes the
other with the same code and reason.

    NANOSRV_LIBRARY=build/libnanosrv.so.1 bindings/python-cffi/examples/ws_bridge.py \\
        --port 0 --upstream ws://127.0.0.1:9000

Prints "listening on PORT" once ready; SIGTERM or SIGINT stops it (exit 0).
A client whose upstream cannot be reached is closed with 1011 and the
reason (e.g. "NSV_ECONNREFUSED").
"""
import argparse
import asyncio
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import nanosrv  # noqa: E402

Event = nanosrv.Event


def quietly(fn, *args):
    """A send or close towards a client that is closing already does nothing."""
    try:
        fn(*args)
    except nanosrv.StateError:
        pass


class Bridge:
    """One client and its upstream connection."""

    def __init__(self, srv, conn, url):
        self.srv, self.conn, self.url = srv, conn, url
        self.up = None
        self.to_upstream = asyncio.Queue()   # client messages, in order
        self.task = asyncio.ensure_future(self.run())

    async def run(self):
        try:
            self.up = await self.srv.websocket_connect(self.url)
        except nanosrv.ClientError as err:
            quietly(self.conn.ws_close, 1011, err.name)
            return
        pump = asyncio.ensure_future(self.pump())
        try:
            async for msg in self.up:           # upstream -> client
                quietly(self.conn.ws_send_text if isinstance(msg, str) else self.conn.ws_send_binary, msg)
            code, reason = self.up.close_code, self.up.close_reason
        except nanosrv.WebSocketClosed as e:
            code, reason = e.close_code, e.close_reason
        finally:
            pump.cancel()
        if code in (1005, 1006):
            code = 1000 if code == 1005 else 1011
        quietly(self.conn.ws_close, code, reason)

    async def pump(self):                       # client -> upstream
        while True:
            msg = await self.to_upstream.get()
            if msg is None:
                return
            await self.up.send(msg)

    def from_client(self, msg):
        self.to_upstream.put_nowait(msg.text if msg.is_text else msg.data)

    def client_closed(self, code, reason):
        if self.up is not None and not self.up.closed:
            asyncio.ensure_future(self.up.close(code if 1000 <= code < 5000 and code not in (1005, 1006)
                                                else 1000, reason))
        elif self.up is None:
            self.task.cancel()  # still connecting: drop it


def build(upstream):
    srv = nanosrv.Manager()
    bridges = {}

    @srv.websocket("/ws/*")
    def ws(conn, ev, data):
        if ev == Event.WsOpen:
            path = data.uri[len("/ws"):] + ("?" + data.query if data.query else "")
            bridges[conn.id] = Bridge(srv, conn, upstream + path)
        elif ev == Event.WsMessage:
            b = bridges.get(conn.id)
            if b is not None:
                b.from_client(data)
        elif ev == Event.WsControl and data.opcode == nanosrv.WsOpcode.Close:
            b = bridges.get(conn.id)
            if b is not None:
                b.client_closed(data.code, data.reason)
        elif ev == Event.Close:
            b = bridges.pop(conn.id, None)
            if b is not None:
                b.client_closed(1001, "")

    return srv


async def main(args):
    srv = build(args.upstream.rstrip("/"))
    listener = srv.http_listen("http://%s:%d" % (args.host, args.port))
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, srv.stop)
    print("listening on %d" % listener.port, flush=True)
    try:
        await nanosrv.aio.serve(srv)
    finally:
        srv.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    p.add_argument("--upstream", required=True, help="base ws:// or wss:// URL, e.g. ws://127.0.0.1:9000")
    asyncio.run(main(p.parse_args()))
