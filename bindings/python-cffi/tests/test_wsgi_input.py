"""nanosrv.wsgi's wsgi.input: the body streams to the app (read(n),
readline, readlines, iteration), chunked uploads, CONTENT_LENGTH,
Expect: 100-continue, a 32 MiB upload read in pieces with bounded memory,
with threads and on the polling thread."""
import hashlib
import http.client
import os
import socket
import subprocess
import threading
import unittest

import _tap

from test_wsgi import Serving, request

WAIT = 10


def plain_env():
    """The environment for a client program: without the sanitizer runtime
    an ASan run preloads into this interpreter (curl hangs under it)."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    return env


class Input(unittest.TestCase):
    def test_read_readline_readlines_iter(self):
        seen = {}

        def app(environ, start_response):
            inp = environ["wsgi.input"]
            path = environ["PATH_INFO"]
            seen[path] = environ.get("CONTENT_LENGTH")
            if path == "/read":
                out = [inp.read(3), inp.read(0), inp.read(4), inp.read()]
            elif path == "/readline":
                out = [inp.readline(), inp.readline(2), inp.readline(), inp.readline(), inp.readline()]
            elif path == "/readlines":
                out = inp.readlines()
            else:
                out = list(inp)
            start_response("200 OK", [])
            return [repr(out).encode()]
        body = b"line one\nline two\nlast"
        for threads in (0, 4):
            with Serving(app, threads=threads) as port:
                self.assertEqual(request(port, "POST", "/read", body)[2],
                                 repr([b"lin", b"", b"e on", b"e\nline two\nlast"]).encode())
                self.assertEqual(request(port, "POST", "/readline", body)[2],
                                 repr([b"line one\n", b"li", b"ne two\n", b"last", b""]).encode())
                self.assertEqual(request(port, "POST", "/readlines", body)[2],
                                 repr([b"line one\n", b"line two\n", b"last"]).encode())
                self.assertEqual(request(port, "POST", "/iter", body)[2],
                                 repr([b"line one\n", b"line two\n", b"last"]).encode())
                self.assertEqual(request(port, "GET", "/iter")[2], b"[]")
            self.assertEqual(seen["/read"], str(len(body)))

    def test_chunked_upload_in_pieces(self):
        # A chunked body sent in pieces, with pauses, so it reaches the app
        # in several BODY events; read(n) still returns n bytes.
        seen = []

        def app(environ, start_response):
            inp = environ["wsgi.input"]
            seen.append(environ.get("CONTENT_LENGTH"))
            first = inp.read(10)
            lines = list(inp)
            start_response("200 OK", [])
            return [first + b"|" + b"|".join(lines)]
        for threads in (0, 4):
            with Serving(app, threads=threads) as port:
                s = socket.create_connection(("127.0.0.1", port), WAIT)
                s.sendall(b"POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
                for piece in (b"0123", b"45678", b"9abc\nde", b"f\n", b"tail"):
                    s.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
                    threading.Event().wait(0.02)
                s.sendall(b"0\r\n\r\n")
                f = s.makefile("rb")
                status = f.readline()
                headers = {}
                while True:
                    line = f.readline()
                    if line in (b"\r\n", b""):
                        break
                    k, _, v = line.decode().partition(":")
                    headers[k.lower()] = v.strip()
                body = f.read(int(headers["content-length"]))
                s.close()
                self.assertTrue(status.startswith(b"HTTP/1.1 200"), status)
                self.assertEqual(body, b"0123456789|abc\n|def\n|tail")
        self.assertEqual(seen, [None, None])  # no length was sent: wsgi.input_terminated says where it ends

    def test_expect_100_continue(self):
        def app(environ, start_response):
            data = environ["wsgi.input"].read()
            start_response("200 OK", [])
            return [hashlib.sha256(data).hexdigest().encode()]
        payload = b"z" * 200000
        with Serving(app) as port:
            out = subprocess.run(["curl", "-sS", "--max-time", "20", "-H", "Expect: 100-continue",
                                  "-H", "Content-Type: application/octet-stream", "--data-binary", "@-",
                                  "-w", "\n%{http_code}", "http://127.0.0.1:%d/up" % port],
                                 input=payload, capture_output=True, timeout=30, env=plain_env())
        self.assertEqual(out.stdout.decode().split("\n"), [hashlib.sha256(payload).hexdigest(), "200"])

    def test_32mib_upload_read_in_pieces(self):
        total = 32 << 20
        results = {}

        def app(environ, start_response):
            inp = environ["wsgi.input"]
            h = hashlib.sha256()
            n = 0
            while True:
                piece = inp.read(65536)
                if not piece:
                    break
                h.update(piece)
                n += len(piece)
            results["n"], results["cl"] = n, environ.get("CONTENT_LENGTH")
            src = inp._next  # white-box: the body's buffer (ThreadedBody, or the polling thread's BodyStream)
            results["peak"] = getattr(src, "peak", None) or src.stream.peak
            start_response("200 OK", [])
            return [h.hexdigest().encode()]

        block = bytes(range(256)) * 256  # 64 KiB, sent 512 times

        def body():
            for _ in range(total // len(block)):
                yield block
        want = hashlib.sha256()
        for _ in range(total // len(block)):
            want.update(block)
        for threads in (0, 4):
            with Serving(app, threads=threads, limits={"max_body": 64 << 20}) as port:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                c.request("POST", "/upload", body=body(), headers={"Content-Length": str(total)})
                r = c.getresponse()
                got = r.read()
                c.close()
            self.assertEqual((r.status, got), (200, want.hexdigest().encode()), threads)
            self.assertEqual((results["n"], results["cl"]), (total, str(total)))
            # The body was never held whole: at most the body buffer (1 MiB)
            # and what one poll brings waited for the app.
            self.assertLess(results["peak"], 4 << 20, "threads=%d: %d bytes buffered" % (threads, results["peak"]))

    def test_unread_body(self):
        # An app that answers without reading (a CSRF check, a redirect): a
        # small body is taken in first, so the connection is kept; the app
        # may still read it after start_response.
        def app(environ, start_response):
            start_response("403 Forbidden", [("Content-Type", "text/plain")])
            if environ["PATH_INFO"] == "/late-read":
                return [b"late " + environ["wsgi.input"].read()]
            return [b"no"]
        for threads in (0, 4):
            with Serving(app, threads=threads, limits={"max_body": 8 << 20}) as port:
                s = socket.create_connection(("127.0.0.1", port), WAIT)
                f = s.makefile("rb")
                for path in (b"/", b"/late-read"):
                    s.sendall(b"POST " + path + b" HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n")
                    threading.Event().wait(0.05)  # the body in a later packet
                    s.sendall(b"hello")
                    status, headers = f.readline(), {}
                    while True:
                        line = f.readline()
                        if line in (b"\r\n", b""):
                            break
                        k, _, v = line.decode().partition(":")
                        headers[k.lower()] = v.strip()
                    body = f.read(int(headers["content-length"]))
                    self.assertTrue(status.startswith(b"HTTP/1.1 403"), status)
                    self.assertNotEqual(headers.get("connection"), "close", (threads, path))
                    self.assertEqual(body, b"late hello" if path == b"/late-read" else b"no")
                s.close()
                # A large unread body is not waited for: the answer comes,
                # then the connection closes.
                s = socket.create_connection(("127.0.0.1", port), WAIT)
                s.sendall(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n" % (4 << 20) +
                          b"x" * 100000)
                out = b""
                while True:
                    piece = s.recv(65536)
                    if not piece:
                        break  # closed by the server: the rest of the body is not read
                    out += piece
                s.close()
                self.assertTrue(out.startswith(b"HTTP/1.1 403"), out)
                self.assertTrue(out.endswith(b"\r\n\r\nno"), out)

    def test_slow_reader_pauses_upload(self):
        # The app reads slowly: what arrives beyond the body buffer waits in
        # the kernel (reading is paused), the buffer stays bounded.
        peaks = []

        def app(environ, start_response):
            inp = environ["wsgi.input"]
            body = inp._next  # the ThreadedBody behind wsgi.input (white-box: its high-water figures)
            n = 0
            while True:
                piece = inp.read(16384)
                if not piece:
                    break
                n += len(piece)
                if n % (1 << 20) < 16384:
                    threading.Event().wait(0.01)
            peaks.append((body.peak, body.high, body.pauses))
            start_response("200 OK", [])
            return [str(n).encode()]
        total = 8 << 20
        with Serving(app, threads=2, limits={"max_body": 16 << 20}) as port:
            st, _, got = request(port, "POST", "/", b"u" * total)
        self.assertEqual((st, got), (200, str(total).encode()))
        peak, high, pauses = peaks[0]
        self.assertGreater(pauses, 0)
        self.assertLess(peak, high + (1 << 20))


if __name__ == "__main__":
    _tap.main()
