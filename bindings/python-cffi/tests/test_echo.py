"""examples/echo.py keeps the echo contract of echo-server, over real sockets."""
import asyncio
import hashlib
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
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
         ("GET", "/quote%22and%5Cback", None), ("HEAD", "/", None), ("GET", "/healthz", None),
         ("GET", "/readyz", None)]
_PEER_PORT = re.compile(rb'"peer_port":\d+')


def same_port(answer):
    """The answer with the client's port (a new one per connection) masked."""
    st, ct, body = answer
    return st, ct, _PEER_PORT.sub(b'"peer_port":N', body)


def raw(port, data):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(data)
        out = b""
        while True:
            b = s.recv(65536)
            if not b:
                return out
            out += b
    finally:
        s.close()


class EchoContract(unittest.TestCase):
    def test_contract(self):
        with Server() as s:
            st, ct, body = s.request("GET", "/p/q?a=1&b=two")
            self.assertEqual((st, ct), (200, "application/json"))
            got = json.loads(body)
            self.assertIsInstance(got.pop("peer_port"), int)
            self.assertEqual(got, {"method": "GET", "path": "/p/q", "query": "a=1&b=two", "body_len": 0,
                                   "peer": "127.0.0.1"})
            self.assertEqual(s.request("POST", "/echo", b"abc")[::2], (200, b"abc"))
            self.assertEqual(s.request("PUT", "/echo", b"\x00\x01")[::2], (200, b"\x00\x01"))
            self.assertEqual(json.loads(s.request("POST", "/x", b"1234")[2])["body_len"], 4)
            self.assertEqual(s.stop(), 0)

    def test_same_bytes_as_c_echo_server(self):
        if not os.path.exists(C_ECHO):
            self.skipTest("no echo-server next to the library")
        with Server() as py, Server(cmd=[C_ECHO]) as c:
            for method, path, body in CASES:
                self.assertEqual(same_port(py.request(method, path, body)), same_port(c.request(method, path, body)),
                                 (method, path))

    def test_same_bytes_as_c_echo_server_behind_a_front(self):
        if not os.path.exists(C_ECHO):
            self.skipTest("no echo-server next to the library")
        req = b"PROXY TCP4 203.0.113.7 192.0.2.1 4567 80\r\nGET /x?y HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
        with Server("--proxy-protocol") as py, Server("--proxy-protocol", cmd=[C_ECHO]) as c:
            a, b = raw(py.port, req), raw(c.port, req)
            self.assertEqual(a.partition(b"\r\n\r\n")[2], b.partition(b"\r\n\r\n")[2])
            self.assertIn(b'"peer":"203.0.113.7","peer_port":4567,"front":"127.0.0.1"}', a)

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


def rss_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def post_upload(port, pieces, boundary, length, timeout=120):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.putrequest("POST", "/upload")
    c.putheader("Content-Type", "multipart/form-data; boundary=" + boundary)
    c.putheader("Content-Length", str(length))
    c.endheaders()
    for piece in pieces:
        c.send(piece)
    r = c.getresponse()
    out = r.status, r.read()
    c.close()
    return out


class Upload(unittest.TestCase):
    """POST /upload as tests/integration/test_upload.py asks of echo-server."""

    def test_curl_form_and_errors_same_as_c(self):
        with tempfile.NamedTemporaryFile() as f, Server("--max-body", str(1 << 20)) as py:
            f.write(os.urandom(300000))
            f.flush()
            out = subprocess.run(["curl", "-s", "-F", "a=1", "-F", "f=@%s;type=image/png" % f.name,
                                  "http://127.0.0.1:%d/upload" % py.port], capture_output=True, timeout=30)
            parts = json.loads(out.stdout or b"[]")
            with open(f.name, "rb") as g:
                digest = hashlib.sha256(g.read()).hexdigest()
            self.assertEqual([(p["name"], p["filename"], p["content_type"], p["size"], p["sha256"]) for p in parts],
                             [("a", None, None, 1, hashlib.sha256(b"1").hexdigest()),
                              ("f", os.path.basename(f.name), "image/png", 300000, digest)])
            bad = b'--xx\r\nbroken header\r\n\r\nhello\r\n--xx--\r\n'
            st, data = post_upload(py.port, [bad], "xx", len(bad))
            self.assertEqual(st, 400)
            self.assertIn(b"multipart: byte 12:", data)
            short = b'--xx\r\nContent-Disposition: form-data; name="a"\r\n\r\nhello\r\n--xx'
            self.assertEqual(post_upload(py.port, [short], "xx", len(short))[0], 400)
            self.assertEqual(py.request("POST", "/upload", b"x=1",
                                        {"Content-Type": "application/x-www-form-urlencoded"})[0], 415)
            self.assertEqual(py.request("POST", "/upload", b"",
                                        {"Content-Type": "multipart/form-data; boundary=xx"})[0], 400)
            if os.path.exists(C_ECHO):
                # Byte for byte what echo-server answers, names with quotes,
                # control bytes and UTF-8 included.
                body = (b'--b\r\nContent-Disposition: form-data; name="q\\"x"; filename="\xc3\xa9\tt.txt"\r\n'
                        b'Content-Type: text/x\r\n\r\n' + b"z" * 70000 + b'\r\n--b\r\n'
                        b'Content-Disposition: form-data; name=e\r\n\r\n\r\n--b--\r\n')
                with Server(cmd=[C_ECHO]) as c:
                    hdr = {"Content-Type": "multipart/form-data; boundary=b"}
                    for b in (body, bad, short):
                        self.assertEqual(py.request("POST", "/upload", b, hdr), c.request("POST", "/upload", b, hdr))
            self.assertEqual(py.stop(), 0)

    def test_150_mib_upload_bounded_memory(self):
        big = 150 << 20
        boundary = "----nsvtest" + os.urandom(8).hex()
        block = os.urandom(1 << 20)
        head = ('--%s\r\nContent-Disposition: form-data; name="note"\r\n\r\nhello\r\n'
                '--%s\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n'
                'Content-Type: application/octet-stream\r\n\r\n' % (boundary, boundary)).encode()
        tail = ("\r\n--%s--\r\n" % boundary).encode()
        want = hashlib.sha256()
        for _ in range(big // len(block)):
            want.update(block)

        def pieces():
            yield head
            for _ in range(big // len(block)):
                yield block
            yield tail
        for threads in ([], ["--threads", "2"]):
            with Server("--max-body", str(200 << 20), *threads) as s:
                s.request("POST", "/upload", b"x", {"Content-Type": "text/plain"})  # warm up the code path
                before = rss_kib(s.p.pid, "VmRSS")
                st, data = post_upload(s.port, pieces(), boundary, len(head) + big + len(tail))
                peak = rss_kib(s.p.pid, "VmHWM")
                self.assertEqual(st, 200, threads)
                self.assertEqual(json.loads(data), [
                    {"name": "note", "filename": None, "content_type": None, "size": 5,
                     "sha256": hashlib.sha256(b"hello").hexdigest()},
                    {"name": "file", "filename": "big.bin", "content_type": "application/octet-stream",
                     "size": big, "sha256": want.hexdigest()}])
                self.assertLess(peak - before, 16 * 1024, "peak RSS grew %d KiB for 150 MiB" % (peak - before))
                self.assertEqual(s.stop(), 0)


class Sse(unittest.TestCase):
    def test_events_parsed_by_a_client(self):
        with Server() as s:
            c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
            c.request("GET", "/sse?n=5")
            r = c.getresponse()
            self.assertEqual((r.status, r.getheader("content-type")), (200, "text/event-stream"))
            events = [b[len("data: "):] for b in r.read().decode().split("\n\n") if b]
            self.assertEqual(events, ["0", "1", "2", "3", "4"])
            c.close()
            # Many events: paced by the client, all arrive in order.
            c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
            c.request("GET", "/sse?n=200000")
            r = c.getresponse()
            n = 0
            for line in r:
                if line.startswith(b"data: "):
                    self.assertEqual(int(line[6:]), n)
                    n += 1
            self.assertEqual(n, 200000)
            c.close()
            self.assertEqual(s.request("GET", "/sse?n=x")[0], 400)
            self.assertEqual(s.stop(), 0)


if __name__ == "__main__":
    _tap.main()
