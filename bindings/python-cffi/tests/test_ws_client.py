"""The WebSocket client (nanosrv.ws_client): srv.websocket_connect under
asyncio, against the library's own WebSocket routes in this process and
python3-websockets in a subprocess; close codes, subprotocols, headers,
backpressure, errors, cancellation, a sharded server."""
import asyncio
import logging
import os
import socket
import sys
import unittest

import _tap
from _net import Proc, certs

import nanosrv
from nanosrv._ffi import lib

logging.getLogger("nanosrv").setLevel(logging.CRITICAL)
APPS = os.path.join(_tap.HERE, "apps")


def ws_client_available():
    """False when the loaded library's nsv_ws_connect says NSV_ENOTSUP."""
    m = nanosrv.Manager()
    try:
        u = b"ws://127.0.0.1:1/"
        r = lib.nsv_ws_connect(m._srv, u, len(u), b"", 0, b"", 0, 0)
        return r != lib.NSV_ENOTSUP
    finally:
        m.close()


def serve(body, setup=None, manager=None):
    async def main():
        m = manager if manager is not None else nanosrv.Manager()
        if setup is not None:
            setup(m)
        port = m.http_listen("http://127.0.0.1:0").port
        done = nanosrv.aio.attach(m)
        try:
            return await asyncio.wait_for(body(m, port), 20)
        finally:
            m.stop()
            await asyncio.wait_for(done, 5)
            m.close()
    return asyncio.run(main())


def echo_routes(m):
    def ws(conn, ev, data):
        if ev == nanosrv.Event.WsMessage:
            if data.is_text and data.text == "close me":
                conn.ws_close(4001, "bye")
            elif data.is_text:
                conn.ws_send_text(data.text)
            else:
                conn.ws_send_binary(data.data)
    m.websocket("/ws", ws)


@unittest.skipUnless(ws_client_available(), "nsv_ws_connect is NSV_ENOTSUP in the loaded libnanosrv")
class OwnServer(unittest.TestCase):
    def test_echo_text_binary_and_close(self):
        async def body(m, port):
            ws = await m.websocket_connect("ws://127.0.0.1:%d/ws" % port)
            out = [ws.open, ws.subprotocol, ws.path]
            await ws.send("héllo")
            out.append(await ws.recv())
            await ws.send(b"\x00\x01" * 40000)
            out.append(await ws.recv())
            await ws.close(1000, "done")
            out += [ws.closed, ws.close_code, len(m._out)]
            with self.assertRaises(nanosrv.WebSocketClosed):
                await ws.send("late")
            return out
        out = serve(body, echo_routes)
        self.assertEqual(out[:3], [True, None, "/ws"])
        self.assertEqual(out[3], "héllo")
        self.assertEqual(out[4], b"\x00\x01" * 40000)
        self.assertEqual(out[5:], [True, 1000, 0])

    def test_server_close_code_reaches_recv_and_iteration(self):
        async def body(m, port):
            ws = await m.websocket_connect("ws://127.0.0.1:%d/ws" % port)
            await ws.send("one")
            await ws.send("close me")
            got = []
            with self.assertRaises(nanosrv.WebSocketClosed) as cm:
                async for msg in ws:  # 4001 is not a normal close: the loop raises
                    got.append(msg)
            e = cm.exception
            return got, e.close_code, e.close_reason, e.ok, ws.close_code, ws.close_reason
        self.assertEqual(serve(body, echo_routes), (["one"], 4001, "bye", False, 4001, "bye"))

    def test_async_with_and_sharded_manager(self):
        async def body(m, port):
            async with m.websocket_connect("ws://127.0.0.1:%d/ws" % port) as ws:
                for i in range(20):
                    await ws.send("m%d" % i)
                got = [await ws.recv() for _ in range(20)]
            return got, ws.closed
        got, closed = serve(body, echo_routes, nanosrv.ShardedManager(2))
        self.assertEqual((got, closed), (["m%d" % i for i in range(20)], True))

    def test_needs_the_asyncio_host(self):
        m = nanosrv.Manager()
        try:
            with self.assertRaises(RuntimeError):
                m.websocket_connect("ws://127.0.0.1:1/")
        finally:
            m.close()


@unittest.skipUnless(ws_client_available(), "nsv_ws_connect is NSV_ENOTSUP in the loaded libnanosrv")
class Upstream(unittest.TestCase):
    """Against python3-websockets in a subprocess."""

    @classmethod
    def setUpClass(cls):
        cls.up = Proc([sys.executable, os.path.join(APPS, "ws_upstream.py")])
        cls.url = "ws://127.0.0.1:%d" % cls.up.port

    @classmethod
    def tearDownClass(cls):
        cls.up.stop()

    def test_headers_subprotocol_and_large_message(self):
        async def body(m, port):
            ws = await m.websocket_connect(self.url + "/hello", headers={"Origin": "http://here", "X-Token": "t"},
                                           subprotocols=["superchat", "v9"])
            import json
            hello = json.loads(await ws.recv())
            big = os.urandom(1 << 20)
            await ws.send(big)
            echoed = await ws.recv()
            await ws.close()
            return hello, ws.subprotocol, ws.headers.get("SEC-WEBSOCKET-PROTOCOL"), echoed == big, ws.close_code
        hello, sub, hdr, same, code = serve(body)
        self.assertEqual(hello, {"origin": "http://here", "token": "t", "subprotocol": "superchat"})
        self.assertEqual((sub, hdr, same, code), ("superchat", "superchat", True, 1000))

    def test_normal_close_ends_iteration(self):
        async def body(m, port):
            ws = await m.websocket_connect(self.url + "/close?code=1000")
            got = [msg async for msg in ws]
            return got, ws.close_code, ws.close_reason
        self.assertEqual(serve(body), ([], 1000, "bye"))

    def test_backpressure_pauses_reading(self):
        n = 3000

        async def body(m, port):
            ws = await m.websocket_connect(self.url + "/burst?n=%d" % n, max_queue=2048)
            for _ in range(500):  # take nothing until reading has paused
                if ws.pauses:
                    break
                await asyncio.sleep(0.01)
            queued = len(ws._q)
            got = [await ws.recv() for _ in range(n)]
            await ws.close()
            return ws.pauses, queued, got
        pauses, queued, got = serve(body)
        self.assertGreaterEqual(pauses, 1)
        self.assertLess(queued, n)
        self.assertEqual(got, [str(i) for i in range(n)])

    def test_not_a_websocket_server(self):
        up = Proc([sys.executable, os.path.join(APPS, "http_upstream.py")])
        try:
            async def body(m, port):
                with self.assertRaises(nanosrv.BadResponse) as cm:
                    await m.websocket_connect("ws://127.0.0.1:%d/json" % up.port)
                return cm.exception.code, len(m._out)
            self.assertEqual(serve(body), (lib.NSV_EPARSE, 0))
        finally:
            up.stop()


@unittest.skipUnless(ws_client_available() and nanosrv.tls_available(), "no nsv_ws_connect or no TLS")
class Wss(unittest.TestCase):
    def test_wss_verified_and_refused(self):
        c = certs()
        for ca, expect_ok in ((c["ca.crt"], True), (c["other.crt"], False)):
            m = nanosrv.Manager()
            m.set_tls(cert=c["srv.crt"], key=c["srv.key"], client_ca=ca)
            echo_routes(m)
            port = m.http_listen("https://127.0.0.1:0").port

            async def body(m2, _):
                url = "wss://localhost:%d/ws" % port
                if not expect_ok:
                    with self.assertRaises(nanosrv.ClientTlsError) as cm:
                        await m2.websocket_connect(url)
                    return cm.exception.code
                ws = await m2.websocket_connect(url)
                await ws.send("over tls")
                got = await ws.recv()
                await ws.close()
                return ws.tls, got
            self.assertEqual(serve(body, manager=m), (True, "over tls") if expect_ok else lib.NSV_ETLS)


@unittest.skipUnless(ws_client_available(), "nsv_ws_connect is NSV_ENOTSUP in the loaded libnanosrv")
class Errors(unittest.TestCase):
    def test_refused(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()

        async def body(m, _):
            with self.assertRaises(nanosrv.ConnectionRefused) as cm:
                await m.websocket_connect("ws://127.0.0.1:%d/" % port)
            return cm.exception.code, len(m._out)
        self.assertEqual(serve(body), (lib.NSV_ECONNREFUSED, 0))

    def test_cancel_while_connecting(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(4)  # accepts (in the kernel) but never answers the upgrade
        port = s.getsockname()[1]
        try:
            async def body(m, _):
                t = asyncio.ensure_future(m.websocket_connect("ws://127.0.0.1:%d/" % port))
                await asyncio.sleep(0.05)
                t.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await t
                for _ in range(200):  # its CLOSE event ends the registration
                    if not m._out:
                        break
                    await asyncio.sleep(0.01)
                return len(m._out)
            self.assertEqual(serve(body), 0)
        finally:
            s.close()

    def test_send_waits_while_the_output_limit_is_full(self):
        import base64
        import hashlib
        import threading
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        go, got = threading.Event(), [0]

        def server():  # answers the upgrade, then reads nothing until told
            c, _ = s.accept()
            head = b""
            while b"\r\n\r\n" not in head:
                head += c.recv(4096)
            key = [ln.split(b":", 1)[1].strip() for ln in head.split(b"\r\n")
                   if ln.lower().startswith(b"sec-websocket-key:")][0]
            accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
            c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
            go.wait(20)
            c.settimeout(10)
            try:
                while True:
                    b = c.recv(1 << 16)
                    if not b:
                        break
                    got[0] += len(b)
            except OSError:
                pass
            c.close()
        t = threading.Thread(target=server, daemon=True)
        t.start()
        n, size = 64, 64 << 10
        try:
            async def body(m, _):
                m.set_max_send_buffer(256 << 10)
                ws = await m.websocket_connect("ws://127.0.0.1:%d/" % port)
                sent = [0]

                async def send_all():
                    for i in range(n):
                        await ws.send(b"x" * size)
                        sent[0] += 1
                sender = asyncio.ensure_future(send_all())
                for _ in range(500):
                    if ws.send_waits:
                        break
                    await asyncio.sleep(0.01)
                blocked_at = sent[0]
                go.set()
                await asyncio.wait_for(sender, 15)
                for _ in range(1000):  # what the library still holds goes out
                    if got[0] >= n * size:
                        break
                    await asyncio.sleep(0.01)
                ws.abort()
                return ws.send_waits, blocked_at
            waits, blocked_at = serve(body)
            t.join(15)
        finally:
            go.set()
            s.close()
        self.assertGreaterEqual(waits, 1)
        self.assertLess(blocked_at, n)
        self.assertGreaterEqual(got[0], n * size)

    def test_bad_header_is_refused_at_once(self):
        async def body(m, _):
            with self.assertRaises(nanosrv.InvalidArgument):
                await m.websocket_connect("ws://127.0.0.1:1/", headers={"Sec-WebSocket-Key": "x"})
            return len(m._out)
        self.assertEqual(serve(body), 0)


if __name__ == "__main__":
    _tap.main()
