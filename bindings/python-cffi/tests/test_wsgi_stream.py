"""nanosrv.wsgi streamed responses: chunks leave as they are produced,
Content-Length is checked, write(), SSE beside other requests, a client
that leaves stops the iterator, a 64 MiB body to a slow reader in bounded
memory, the same on a ShardedManager."""
import http.client
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest

import _tap

import nanosrv
import nanosrv.wsgi
from test_wsgi import Records, Serving, raw, request

WAIT = 10  # seconds any single wait in these tests may last (a failure, not a pass, when it runs out)


def read_until(sock, marker, limit=1 << 20):
    data = b""
    while marker not in data and len(data) < limit:
        b = sock.recv(65536)
        if not b:
            break
        data += b
    return data


class Streaming(unittest.TestCase):
    def test_chunks_leave_as_produced(self):
        go_on = threading.Event()

        def app(environ, start_response):
            start_response("200 OK", [("Content-Type", "text/plain")])

            def gen():
                yield b"first-chunk"
                go_on.wait(WAIT)  # only after the client has read the first chunk
                yield b"second-chunk"
            return gen()
        with Serving(app, threads=2) as port:
            s = socket.create_connection(("127.0.0.1", port), WAIT)
            s.sendall(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            head = read_until(s, b"first-chunk")
            self.assertIn(b"Transfer-Encoding: chunked", head)
            self.assertIn(b"first-chunk", head)
            self.assertFalse(go_on.is_set())
            go_on.set()
            rest = read_until(s, b"0\r\n\r\n")
            self.assertIn(b"second-chunk", rest)
            self.assertTrue(rest.endswith(b"0\r\n\r\n"))
            s.close()

    def test_inline_stream(self):
        # threads=0: the generator runs on the polling thread, still chunked.
        def app(environ, start_response):
            start_response("200 OK", [])
            return (b"%d," % i for i in range(1000))
        with Serving(app, threads=0) as port:
            st, hd, body = request(port, "GET", "/")
        self.assertEqual((st, hd.get("transfer-encoding")), (200, "chunked"))
        self.assertEqual(body, b"".join(b"%d," % i for i in range(1000)))

    def test_content_length_checked(self):
        def app(environ, start_response):
            path = environ["PATH_INFO"]
            if path == "/many":
                start_response("200 OK", [("Content-Length", "5")])
                return iter([b"123", b"45678"])
            if path == "/few":
                start_response("200 OK", [("Content-Length", "10")])
                return iter([b"12", b"3"])
            if path == "/late":
                start_response("200 OK", [("Content-Length", "3")])
                return iter([b"abc", b"def"])
            if path == "/many-list":
                start_response("200 OK", [("Content-Length", "2")])
                return [b"abcdef"]
            start_response("200 OK", [("Content-Length", "6")])
            return iter([b"abc", b"def"])
        for threads in (0, 4):
            with Records("nanosrv.wsgi") as recs:
                with Serving(app, threads=threads) as port:
                    # Too many: the declared length goes out, then the
                    # connection closes: the pipelined request behind it is
                    # not answered from the excess bytes.
                    for path, body in (("/many", b"12345"), ("/many-list", b"ab")):
                        out = raw(port, b"GET " + path.encode() + b" HTTP/1.1\r\nHost: a\r\n\r\n"
                                  b"GET /ok HTTP/1.1\r\nHost: a\r\n\r\n")
                        self.assertEqual(out.count(b"HTTP/1.1 "), 1, out)
                        self.assertTrue(out.endswith(b"\r\n\r\n" + body), out)
                    # The length reached first, the excess after it: the
                    # answer went out whole, the excess is dropped.
                    out = raw(port, b"GET /late HTTP/1.1\r\nHost: a\r\n\r\nGET /ok HTTP/1.1\r\nHost: a\r\n"
                              b"Connection: close\r\n\r\n")
                    self.assertEqual(out.count(b"HTTP/1.1 200 OK"), 2, out)
                    self.assertIn(b"\r\n\r\nabcHTTP/1.1 200 OK", out)
                    self.assertTrue(out.endswith(b"\r\n\r\nabcdef"), out)
                    # Too few: the client sees a short body and a close.
                    c = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
                    c.request("GET", "/few")
                    r = c.getresponse()
                    with self.assertRaises(http.client.IncompleteRead):
                        r.read()
                    c.close()
                    # Exact: kept alive.
                    c = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
                    for _ in range(2):
                        c.request("GET", "/ok")
                        r = c.getresponse()
                        self.assertEqual((r.status, r.read(), r.getheader("content-length")), (200, b"abcdef", "6"))
                    c.close()
            logged = " ".join(r.getMessage() for r in recs)
            self.assertIn("past its Content-Length", logged)
            self.assertIn("bytes of its Content-Length 10", logged)

    def test_write_callable(self):
        def app(environ, start_response):
            write = start_response("200 OK", [("Content-Type", "text/plain")])
            write(b"w1,")
            write(bytearray(b"w2,"))
            return iter([b"i1,", b"i2"])
        for threads in (0, 4):
            with Serving(app, threads=threads) as port:
                st, hd, body = request(port, "GET", "/")
                self.assertEqual((st, body), (200, b"w1,w2,i1,i2"))

    def test_sse_does_not_block_other_requests(self):
        other_done = threading.Event()
        closed = threading.Event()

        def app(environ, start_response):
            if environ["PATH_INFO"] == "/events":
                start_response("200 OK", [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")])

                def events():
                    try:
                        for i in range(3):
                            yield b"data: tick %d\n\n" % i
                            time.sleep(0.05)
                        other_done.wait(WAIT)  # the other request was answered meanwhile
                        yield b"data: other answered %s\n\n" % str(other_done.is_set()).encode()
                    finally:
                        closed.set()
                return events()
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"other"]
        with Serving(app, threads=4) as port:
            s = socket.create_connection(("127.0.0.1", port), WAIT)
            s.sendall(b"GET /events HTTP/1.1\r\nHost: a\r\nAccept: text/event-stream\r\n\r\n")
            got = read_until(s, b"tick 0")
            self.assertIn(b"text/event-stream", got)
            self.assertEqual(request(port, "GET", "/other")[::2], (200, b"other"))
            self.assertFalse(closed.is_set())  # the stream is still open
            other_done.set()
            got += read_until(s, b"0\r\n\r\n")
            s.close()
        self.assertIn(b"data: other answered True", got)
        self.assertTrue(closed.is_set())

    def test_client_leaving_closes_iterator(self):
        for threads in (0, 4):
            closed = threading.Event()
            produced = []

            def app(environ, start_response):
                start_response("200 OK", [])

                def gen():
                    try:
                        for i in range(100000):  # far more than the client will take
                            produced.append(i)
                            yield b"x" * 65536
                    finally:
                        closed.set()
                return gen()
            with Serving(app, threads=threads) as port:
                s = socket.create_connection(("127.0.0.1", port), WAIT)
                s.sendall(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
                read_until(s, b"xxxx")
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")  # RST on close
                s.close()
                self.assertTrue(closed.wait(WAIT), threads)
            self.assertLess(len(produced), 100000)

    def test_sharded_manager(self):
        def app(environ, start_response):
            path = environ["PATH_INFO"]
            if path == "/gen":
                start_response("200 OK", [])
                return (b"%05d" % i for i in range(20000))
            if path == "/write":
                write = start_response("201 Created", [("X-W", "1")])
                write(b"written ")
                return [b"and returned"]
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"hello " + environ["wsgi.input"].read()]
        with Serving(app, manager=nanosrv.ShardedManager(2), threads=4) as port:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
            for _ in range(3):
                c.request("POST", "/", body=b"world")
                r = c.getresponse()
                self.assertEqual((r.status, r.read()), (200, b"hello world"))
                c.request("GET", "/gen")
                r = c.getresponse()
                self.assertEqual(r.read(), b"".join(b"%05d" % i for i in range(20000)))
                c.request("GET", "/write")
                r = c.getresponse()
                self.assertEqual((r.status, r.getheader("x-w"), r.read()), (201, "1", b"written and returned"))
            c.close()


SERVER = r"""
import os, sys
sys.path.insert(0, %(pkg)r)
import nanosrv, nanosrv.wsgi
TOTAL = 64 << 20
def app(environ, start_response):
    start_response("200 OK", [("Content-Length", str(TOTAL))])
    def gen():
        for i in range(TOTAL // 65536):
            yield bytes([65 + i %% 26]) * 65536
    return gen()
def ready(lst):
    print("listening on %%d" %% lst.port, flush=True)
nanosrv.wsgi.serve(app, "127.0.0.1", 0, manager=%(manager)s, ready=ready, threads=%(threads)d)
"""


def vm(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


class BigResponse(unittest.TestCase):
    def test_64mib_to_slow_reader_bounded_rss(self):
        for threads, manager in ((0, "None"), (4, "None"), (4, "nanosrv.ShardedManager(2)")):
            code = SERVER % {"pkg": _tap.PKG, "threads": threads, "manager": manager}
            env = dict(os.environ)
            # Under AddressSanitizer freed memory is held in quarantine, and
            # RSS would count every byte ever allocated: not for this child.
            env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=0"
            p = subprocess.Popen([sys.executable, "-c", code],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            try:
                line = p.stdout.readline().decode()
                if not line.startswith("listening on "):
                    p.kill()
                    self.fail("no 'listening on' line: %r %r" % (line, p.stderr.read()))
                port = int(line.split()[2])
                base = vm(p.pid, "VmRSS")
                s = socket.create_connection(("127.0.0.1", port), 30)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
                s.sendall(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
                got, n, head = 0, 0, b""
                while b"\r\n\r\n" not in head:
                    head += s.recv(4096)
                got = len(head) - head.index(b"\r\n\r\n") - 4
                while got < 64 << 20:
                    b = s.recv(65536)
                    if not b:
                        break
                    got += len(b)
                    n += 1
                    if n % 16 == 0:
                        time.sleep(0.002)  # a slow reader: the server must wait, not buffer
                s.close()
                self.assertEqual(got, 64 << 20)
                growth = vm(p.pid, "VmHWM") - base  # the peak
                print("# threads=%d %s: peak RSS %d bytes above the start" % (threads, manager, growth))
                self.assertLess(growth, 24 << 20, "threads=%d %s: RSS grew by %d bytes" % (threads, manager, growth))
            finally:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(10)
                p.stdout.close()
                p.stderr.close()


if __name__ == "__main__":
    _tap.main()
