"""WebSocket through the nanosrv API: automatic routes, manual upgrade,
events and bad input. Skipped when the library has no WebSocket functions."""
import asyncio
import logging
import time
import unittest

import _tap
from _tap import ServerThread

import nanosrv

logging.getLogger("nanosrv").setLevel(logging.CRITICAL)
E = nanosrv.Event


def client(port, path, messages, close=True):
    import websockets.client

    async def talk():
        out = []
        async with websockets.client.connect("ws://127.0.0.1:%d%s" % (port, path)) as ws:
            for m in messages:
                await ws.send(m)
                out.append(await asyncio.wait_for(ws.recv(), 5))
        return out
    return asyncio.run(talk())


def wait_for(cond, timeout=3):
    end = time.time() + timeout
    while time.time() < end and not cond():
        time.sleep(0.02)


@unittest.skipUnless(nanosrv.websocket_available(), "WebSocket functions are not in the loaded libnanosrv")
class WebSocket(unittest.TestCase):
    def test_route_events(self):
        m = nanosrv.Manager()
        seen = []

        @m.websocket("/chat/:room")
        def chat(conn, ev, data):
            seen.append(ev)
            if ev == E.WsOpen:
                seen.append(data.params["room"])
            elif ev == E.WsMessage:
                if data.is_text:
                    conn.ws_send_text("echo: " + data.text)
                else:
                    conn.ws_send_binary(data.data[::-1])
        lst = m.http_listen("http://127.0.0.1:0")
        with ServerThread(m):
            out = client(lst.port, "/chat/7", ["hi", b"\x01\x02"])
            wait_for(lambda: E.Close in seen)
        self.assertEqual(out, ["echo: hi", b"\x02\x01"])
        self.assertEqual(seen[:4], [E.WsOpen, "7", E.WsMessage, E.WsMessage])
        self.assertEqual(seen[-1], E.Close)

    def test_manual_upgrade_with_event_handler(self):
        m = nanosrv.Manager()
        seen = []

        def h(conn, ev, data):
            seen.append(ev)
            if ev == E.HttpMessage:
                if data.header("upgrade", "").lower() == "websocket":
                    conn.ws_upgrade(data, "X-Hello: 1\r\n")
                else:
                    conn.http_reply(200, "", "plain")
            elif ev == E.WsMessage:
                conn.ws_send_text(data.text.upper())
        lst = m.http_listen_event("http://127.0.0.1:0", h)
        with ServerThread(m):
            self.assertEqual(client(lst.port, "/any", ["abc", "def"]), ["ABC", "DEF"])
            wait_for(lambda: E.Close in seen)
        self.assertEqual(seen[0], E.HttpMessage)
        self.assertIn(E.WsMessage, seen)

    def test_bad_input_and_handler_errors(self):
        m = nanosrv.Manager()
        errors = []

        def h(conn, ev, data):
            if ev != E.WsMessage:
                return
            if data.data == b"boom":
                raise RuntimeError("ws handler failure")
            for call in (lambda: conn.ws_send_text(42), lambda: conn.ws_send(5),
                         lambda: conn.http_reply(200, "", "x")):
                try:
                    call()
                except Exception as e:
                    errors.append(type(e))
            conn.ws_send_text("still here")
        m.websocket("/ws", h)
        lst = m.http_listen("http://127.0.0.1:0")
        with ServerThread(m):
            self.assertEqual(client(lst.port, "/ws", ["x"]), ["still here"])
            import websockets.client

            async def boom():
                async with websockets.client.connect("ws://127.0.0.1:%d/ws" % lst.port) as ws:
                    await ws.send("boom")
                    await ws.send("after")
                    return await asyncio.wait_for(ws.recv(), 5)
            self.assertEqual(asyncio.run(boom()), "still here")
        self.assertEqual(errors[:2], [TypeError, TypeError])
        self.assertTrue(issubclass(errors[2], nanosrv.Error))

    def test_plain_request_to_ws_route(self):
        import http.client
        m = nanosrv.Manager()
        m.websocket("/ws", lambda c, e, d: None)
        lst = m.http_listen("http://127.0.0.1:0")
        with ServerThread(m):
            c = http.client.HTTPConnection("127.0.0.1", lst.port, timeout=5)
            c.request("GET", "/ws")
            status = c.getresponse().status
            c.close()
        self.assertIn(status, (400, 426))


if __name__ == "__main__":
    _tap.main()
