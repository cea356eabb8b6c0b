"""examples/echo.py keeps the echo contract of echo-server, over real sockets."""
import asyncio
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
import unittest

import _tap

import nanosrv

ECHO = os.path.join(_tap.PKG, "examples", "echo.py")
C_ECHO = os.path.join(os.path.dirname(os.environ["NANOSRV_LIBRARY"]), "echo-server")


class Server:
    def __init__(self, *args, cmd=None):
        self.p = subprocess.Popen((cmd or [sys.executable, ECHO]) + ["--port", "0"] + list(args),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        if not line.startswith("listening on "):
            self.p.kill()
            raise AssertionError("bad first line %r; stderr: %s" % (line, self.p.stderr.read()))
        self.port = int(line.split()[-1])

    def request(self, method, path, body=None, headers=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        out = r.status, r.getheader("content-type"), r.read()
        c.close()
        return out

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        rc = self.p.wait(10)
        self.p.stdout.close()
        self.p.stderr.close()
        return rc

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.p.poll() is None:
            self.stop()


CASES = [("GET", "/", None), ("GET", "/a/b?x=1&y=%22q%22", None), ("POST", "/echo", b"hello\x00\xff"),
         ("PUT", "/echo", b"x" * 100000), ("POST", "/other?z", b"12345"), ("DELETE", "/echo", None),
         ("GET", "/quote%22and%5Cback", None), ("HEAD", "/", None)]


class EchoContract(unittest.TestCase):
    def test_contract(self):
        with Server() as s:
            st, ct, body = s.request("GET", "/p/q?a=1&b=two")
            self.assertEqual((st, ct), (200, "application/json"))
            self.assertEqual(json.loads(body), {"method": "GET", "path": "/p/q", "query": "a=1&b=two",
                                                "body_len": 0})
            self.assertEqual(s.request("POST", "/echo", b"abc")[::2], (200, b"abc"))
            self.assertEqual(s.request("PUT", "/echo", b"\x00\x01")[::2], (200, b"\x00\x01"))
            self.assertEqual(json.loads(s.request("POST", "/x", b"1234")[2])["body_len"], 4)
            self.assertEqual(s.stop(), 0)

    def test_same_bytes_as_c_echo_server(self):
        if not os.path.exists(C_ECHO):
            self.skipTest("no echo-server next to the library")
        with Server() as py, Server(cmd=[C_ECHO]) as c:
            for method, path, body in CASES:
                self.assertEqual(py.request(method, path, body), c.request(method, path, body), (method, path))

    def test_flags(self):
        with Server("--max-body", "10", "--routes", "3", "--max-header-bytes", "2048",
                    "--request-timeout-ms", "2000", "--idle-timeout-ms", "2000", "--max-conns", "50") as s:
            self.assertEqual(s.request("POST", "/echo", b"x" * 11)[0], 413)
            self.assertEqual(s.request("POST", "/echo", b"x" * 10)[::2], (200, b"x" * 10))
            self.assertEqual(json.loads(s.request("GET", "/dummy/2/77")[2])["path"], "/dummy/2/77")
            self.assertEqual(s.request("GET", "/", headers={"X-Big": "v" * 4000})[0], 431)
        p = subprocess.run([sys.executable, ECHO, "--port"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("usage", p.stderr)
        p = subprocess.run([sys.executable, ECHO, "--port", "0", "--max-body", "-3"], capture_output=True,
                           text=True)
        self.assertEqual(p.returncode, 2)

    def test_busy_and_sigterm_drains_in_flight(self):
        with Server("--busy-us", "300000") as s:
            result = []
            t = threading.Thread(target=lambda: result.append(s.request("POST", "/echo", b"late")))
            t.start()
            time.sleep(0.1)  # the request is being handled
            self.assertEqual(s.stop(), 0)
            t.join(5)
            self.assertEqual(result, [(200, "application/octet-stream", b"late")])

    def test_threads(self):
        if not nanosrv.sharded_available():
            self.skipTest("sharded servers are not available in the loaded libnanosrv")
        with Server("--threads", "2") as s:
            for i in range(20):
                self.assertEqual(s.request("POST", "/echo", b"%d" % i)[2], b"%d" % i)
            self.assertEqual(s.stop(), 0)

    def test_websocket_echo(self):
        if not nanosrv.websocket_available():
            self.skipTest("WebSocket functions are not in the loaded libnanosrv")
        import websockets.client

        async def talk(port):
            async with websockets.client.connect("ws://127.0.0.1:%d/ws" % port) as ws:
                out = []
                for msg in ["hello", b"\x00\x01bin", "\u00e9t\u00e9", "x" * 70000]:
                    await ws.send(msg)
                    out.append(await asyncio.wait_for(ws.recv(), 5) == msg)
                return out
        with Server() as s:
            self.assertEqual(asyncio.run(talk(s.port)), [True] * 4)
            self.assertEqual(s.stop(), 0)


if __name__ == "__main__":
    _tap.main()
