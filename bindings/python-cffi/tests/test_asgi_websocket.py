"""nanosrv.asgi, websocket scope: connect/accept with a subprotocol and
extra headers, text and bytes both ways, close with code and reason from
either side, disconnect codes (1005 without a code, 1006 when the peer
vanished), close before accept (403), the denial response extension, an
app that raises (1011) or returns, large messages and ws_max_size. The
client is python3-websockets; raw sockets where it cannot misbehave."""
import asyncio
import base64
import logging
import os
import socket
import time
import unittest

import _tap
from test_asgi_http import AppServer, LogCapture, wait_for

import websockets.client
import websockets.exceptions

logging.getLogger("nanosrv").setLevel(logging.CRITICAL)


def talk(coro_fn, timeout=20):
    return asyncio.run(asyncio.wait_for(coro_fn(), timeout))


def echo_app(events):
    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            return
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"plain"})
            return
        events.append(("scope", scope))
        m = await receive()
        events.append(m["type"])
        path = scope["path"]
        if path == "/deny":
            await send({"type": "websocket.close", "code": 1008})
            events.append(await receive())
            return
        if path == "/denial":
            await send({"type": "websocket.http.response.start", "status": 401,
                        "headers": [(b"www-authenticate", b"Bearer"), (b"content-type", b"text/plain")]})
            await send({"type": "websocket.http.response.body", "body": b"no ", "more_body": True})
            await send({"type": "websocket.http.response.body", "body": b"token"})
            return
        if path == "/raise-early":
            raise RuntimeError("before accept")
        sub = scope["subprotocols"][-1] if scope["subprotocols"] else None
        await send({"type": "websocket.accept", "subprotocol": sub, "headers": [(b"x-extra", b"yes")]})
        while True:
            m = await receive()
            if m["type"] == "websocket.disconnect":
                events.append(("disconnect", m["code"]))
                return
            if m.get("text") == "close-me":
                await send({"type": "websocket.close", "code": 4001, "reason": "as asked"})
                continue
            if m.get("text") == "raise":
                raise RuntimeError("after accept")
            if m.get("text") == "return":
                return
            if m.get("text") is not None:
                await send({"type": "websocket.send", "text": "echo:" + m["text"]})
            else:
                await send({"type": "websocket.send", "bytes": m["bytes"][::-1]})
    return app


class WebSocket(unittest.TestCase):
    def test_accept_echo_and_scope(self):
        events = []

        async def client(port):
            async with websockets.client.connect("ws://127.0.0.1:%d/chat/1?room=a%%20b" % port,
                                                 subprotocols=["one", "two"],
                                                 extra_headers={"X-Mine": "v"}, max_size=None) as ws:
                hdrs = ws.response_headers
                await ws.send("hi")
                a = await ws.recv()
                await ws.send(b"\x01\x02\x03")
                b = await ws.recv()
                big = os.urandom(3 << 20)
                await ws.send(big)
                c = await ws.recv()
                return ws.subprotocol, hdrs.get("x-extra"), a, b, c == big[::-1]

        with AppServer(echo_app(events), ws_max_size=8 << 20) as s:
            out = talk(lambda: client(s.port))
            wait_for(lambda: any(isinstance(e, tuple) and e[0] == "disconnect" for e in events), "disconnect")
            port = s.port
        self.assertEqual(out, ("two", "yes", "echo:hi", b"\x03\x02\x01", True))
        scope = events[0][1]
        self.assertEqual(scope["type"], "websocket")
        self.assertEqual(scope["scheme"], "ws")
        self.assertEqual(scope["path"], "/chat/1")
        self.assertEqual(scope["raw_path"], b"/chat/1")
        self.assertEqual(scope["query_string"], b"room=a%20b")
        self.assertEqual(scope["subprotocols"], ["one", "two"])
        self.assertEqual(scope["server"], ("127.0.0.1", port))
        self.assertIn((b"x-mine", b"v"), scope["headers"])
        self.assertIn("websocket.http.response", scope["extensions"])
        self.assertEqual(events[1], "websocket.connect")
        self.assertEqual(events[-1], ("disconnect", 1000))

    def test_close_codes_both_ways(self):
        events = []

        async def server_closes(port):
            async with websockets.client.connect("ws://127.0.0.1:%d/x" % port) as ws:
                await ws.send("close-me")
                try:
                    await ws.recv()
                except websockets.exceptions.ConnectionClosed as e:
                    return e.rcvd.code, e.rcvd.reason

        async def client_closes(port, code):
            ws = await websockets.client.connect("ws://127.0.0.1:%d/x" % port)
            await ws.send("hi")
            await ws.recv()
            if code is None:
                await ws.close()  # 1000
            else:
                await ws.close(code, "bye")

        with AppServer(echo_app(events)) as s:
            self.assertEqual(talk(lambda: server_closes(s.port)), (4001, "as asked"))
            wait_for(lambda: ("disconnect", 4001) in events, "the disconnect after our close")
            talk(lambda: client_closes(s.port, 4321))
            wait_for(lambda: ("disconnect", 4321) in events, "the client's close code")
            # a close frame without a code: 1005
            key = base64.b64encode(os.urandom(16))
            sock = socket.create_connection(("127.0.0.1", s.port), 10)
            sock.sendall(b"GET /x HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n\r\n")
            got = b""
            while b"\r\n\r\n" not in got:
                got += sock.recv(4096)
            self.assertTrue(got.startswith(b"HTTP/1.1 101"), got)
            sock.sendall(b"\x88\x80" + os.urandom(4))  # masked close, empty payload
            wait_for(lambda: ("disconnect", 1005) in events, "1005")
            sock.close()
            # a peer that vanishes: 1006
            sock = socket.create_connection(("127.0.0.1", s.port), 10)
            sock.sendall(b"GET /x HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n\r\n")
            got = b""
            while b"\r\n\r\n" not in got:
                got += sock.recv(4096)
            sock.close()
            wait_for(lambda: ("disconnect", 1006) in events, "1006")

    def test_deny_and_denial_response(self):
        events = []
        with LogCapture() as logs, AppServer(echo_app(events)) as s:
            async def attempt(path):
                try:
                    async with websockets.client.connect("ws://127.0.0.1:%d%s" % (s.port, path)):
                        return "opened"
                except websockets.exceptions.InvalidStatusCode as e:
                    return e.status_code
            self.assertEqual(talk(lambda: attempt("/deny")), 403)
            self.assertEqual(talk(lambda: attempt("/raise-early")), 500)
            key = base64.b64encode(os.urandom(16))
            sock = socket.create_connection(("127.0.0.1", s.port), 10)
            sock.sendall(b"GET /denial HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n\r\n")
            got = b""
            end = time.monotonic() + 10
            while not got.endswith(b"no token") and time.monotonic() < end:
                b = sock.recv(4096)
                if not b:
                    break
                got += b
            sock.close()
            self.assertTrue(got.startswith(b"HTTP/1.1 401"), got)
            self.assertIn(b"www-authenticate: Bearer", got)
            self.assertTrue(got.endswith(b"no token"), got)
            wait_for(lambda: any(isinstance(e, dict) for e in events), "the denied app's disconnect")
        self.assertIn({"type": "websocket.disconnect", "code": 1006}, events)
        self.assertIn("Exception in ASGI application", logs.text())

    def test_app_raising_or_returning_after_accept(self):
        events = []

        async def client(port, text):
            async with websockets.client.connect("ws://127.0.0.1:%d/x" % port) as ws:
                await ws.send(text)
                try:
                    await ws.recv()
                except websockets.exceptions.ConnectionClosed as e:
                    return e.rcvd.code if e.rcvd else None

        with LogCapture() as logs, AppServer(echo_app(events)) as s:
            self.assertEqual(talk(lambda: client(s.port, "raise")), 1011)
            self.assertEqual(talk(lambda: client(s.port, "return")), 1000)
        self.assertIn("Exception in ASGI application", logs.text())

    def test_message_over_ws_max_size_closes_1009(self):
        events = []

        async def client(port):
            async with websockets.client.connect("ws://127.0.0.1:%d/x" % port, max_size=None) as ws:
                await ws.send(b"x" * 200000)
                try:
                    await ws.recv()
                except websockets.exceptions.ConnectionClosed as e:
                    return e.rcvd.code if e.rcvd else None

        with LogCapture(), AppServer(echo_app(events), ws_max_size=100000) as s:
            self.assertEqual(talk(lambda: client(s.port)), 1009)
            wait_for(lambda: any(isinstance(e, tuple) and e[0] == "disconnect" for e in events), "disconnect")

    def test_ws_ping_interval(self):
        events = []
        with AppServer(echo_app(events), ws_ping_interval=0.05) as s:
            key = base64.b64encode(os.urandom(16))
            sock = socket.create_connection(("127.0.0.1", s.port), 10)
            sock.sendall(b"GET /x HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n\r\n")
            got = b""
            end = time.monotonic() + 10
            while b"\x89" not in got.partition(b"\r\n\r\n")[2] and time.monotonic() < end:
                b = sock.recv(4096)
                if not b:
                    break
                got += b
            sock.close()
        self.assertTrue(got.startswith(b"HTTP/1.1 101"), got[:40])
        self.assertEqual(got.partition(b"\r\n\r\n")[2][:1], b"\x89")  # a ping frame, unasked

    def test_many_sends_with_backpressure(self):
        async def app(scope, receive, send):
            if scope["type"] != "websocket":
                return
            await receive()
            await send({"type": "websocket.accept"})
            for i in range(200):
                await send({"type": "websocket.send", "bytes": b"%06d" % i + b"." * 65530})
            await send({"type": "websocket.close"})

        async def client(port):
            n = 0
            async with websockets.client.connect("ws://127.0.0.1:%d/" % port, max_size=None) as ws:
                try:
                    while True:
                        m = await ws.recv()
                        self.assertEqual(m[:6], b"%06d" % n)
                        n += 1
                        if n % 20 == 0:
                            await asyncio.sleep(0.02)
                except websockets.exceptions.ConnectionClosedOK:
                    pass
            return n

        with AppServer(app) as s:
            self.assertEqual(talk(lambda: client(s.port)), 200)


if __name__ == "__main__":
    _tap.main()
