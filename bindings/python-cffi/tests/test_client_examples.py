"""examples/gateway.py and examples/ws_bridge.py end to end: each runs as
its own program in front of an upstream in a subprocess (python3
http.server, python3-websockets), asked by real clients (http.client,
websockets), stopped by PID with SIGTERM (exit 0)."""
import asyncio
import http.client
import json
import os
import signal
import socket
import sys
import unittest

import _tap
from _net import Proc

import websockets

from test_ws_client import ws_client_available

APPS = os.path.join(_tap.HERE, "apps")
EXAMPLES = os.path.join(_tap.PKG, "examples")


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, json.loads(r.read())
    finally:
        c.close()


def stop(proc):
    os.kill(proc.p.pid, signal.SIGTERM)
    return proc.p.wait(10)


class Gateway(unittest.TestCase):
    def test_gateway_against_http_server(self):
        with Proc([sys.executable, os.path.join(APPS, "http_upstream.py")]) as up:
            gw = Proc([sys.executable, os.path.join(EXAMPLES, "gateway.py"), "--port", "0",
                       "--upstream", "http://127.0.0.1:%d" % up.port])
            try:
                st, doc = get(gw.port, "/api/json?x=1")
                self.assertEqual((st, doc["status"], doc["upstream"]["path"]), (200, 200, "/json?x=1"))
                self.assertEqual(doc["upstream"]["accept"], "application/json")
                st, doc = get(gw.port, "/many?path=/json&path=/nothing")
                self.assertEqual(st, 200)
                self.assertEqual(doc["/json"]["upstream"]["ok"], True)
                self.assertEqual(doc["/nothing"], {"status": 404, "upstream": {"error": "not found"}})
                st, doc = get(gw.port, "/plain/json")
                self.assertEqual((st, doc["upstream"]["path"]), (200, "/json"))
                self.assertEqual(stop(gw), 0)
                self.assertNotIn(b"Traceback", gw.p.stderr.read())
            finally:
                gw.stop()

    def test_gateway_upstream_refused(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        gw = Proc([sys.executable, os.path.join(EXAMPLES, "gateway.py"), "--port", "0",
                   "--upstream", "http://127.0.0.1:%d" % port])
        try:
            for path in ("/api/json", "/plain/json"):
                st, doc = get(gw.port, path)
                self.assertEqual((st, doc["error"]), (502, "NSV_ECONNREFUSED"), path)
            self.assertEqual(stop(gw), 0)
        finally:
            gw.stop()


@unittest.skipUnless(ws_client_available(), "nsv_ws_connect is NSV_ENOTSUP in the loaded libnanosrv")
class WsBridge(unittest.TestCase):
    def test_bridge_against_websockets(self):
        with Proc([sys.executable, os.path.join(APPS, "ws_upstream.py")]) as up:
            br = Proc([sys.executable, os.path.join(EXAMPLES, "ws_bridge.py"), "--port", "0",
                       "--upstream", "ws://127.0.0.1:%d" % up.port])
            try:
                async def clients():
                    base = "ws://127.0.0.1:%d/ws" % br.port
                    out = []
                    async with websockets.connect(base + "/echo", max_size=1 << 22) as ws:
                        await ws.send("hello")
                        out.append(await ws.recv())
                        blob = os.urandom(300000)
                        await ws.send(blob)
                        out.append(await ws.recv() == blob)
                        for i in range(50):
                            await ws.send("n%d" % i)
                        out.append([await ws.recv() for _ in range(50)] == ["n%d" % i for i in range(50)])
                    for _ in range(3):  # clients that close first
                        async with websockets.connect(base + "/echo") as ws:
                            await ws.send("x")
                            out.append(await ws.recv())
                    ws = await websockets.connect(base + "/close?code=4003")
                    with self.assertRaises(websockets.ConnectionClosed):
                        await ws.recv()
                    out.append((ws.close_code, ws.close_reason))
                    return out
                out = asyncio.run(asyncio.wait_for(clients(), 20))
                self.assertEqual(out, ["hello", True, True, "x", "x", "x", (4003, "bye")])
                self.assertEqual(stop(br), 0)
                self.assertNotIn(b"Traceback", br.p.stderr.read())
            finally:
                br.stop()


if __name__ == "__main__":
    _tap.main()
