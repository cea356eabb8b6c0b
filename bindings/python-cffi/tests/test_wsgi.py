"""nanosrv.wsgi: PEP 3333 environ and start_response, with Flask and a bare app."""
import http.client
import logging
import socket
import sys
import threading
import unittest

import _tap

import nanosrv
import nanosrv.wsgi

logging.getLogger("nanosrv").setLevel(logging.CRITICAL)


def request(port, method, path, body=None, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    out = r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
    c.close()
    return out


class Serving:
    """nanosrv.wsgi.serve(app, **options) in a thread, stopped at the end."""

    def __init__(self, app, manager=None, **options):
        self.m = manager or nanosrv.Manager()
        self.ready = threading.Event()
        self.port = None

        def on_ready(lst):
            self.port = lst.port
            self.ready.set()
        self.t = threading.Thread(target=nanosrv.wsgi.serve, args=(app, "127.0.0.1", 0, self.m, on_ready),
                                  kwargs=options, daemon=True)

    def __enter__(self):
        self.t.start()
        self.ready.wait(5)
        return self.port

    def __exit__(self, *exc):
        self.m.stop()
        self.t.join(5)
        self.m.close()


class Wsgi(unittest.TestCase):
    def test_environ(self):
        seen = {}

        def app(environ, start_response):
            seen.update(environ)
            seen["body"] = environ["wsgi.input"].read()
            start_response("202 Accepted", [("Content-Type", "text/plain"), ("X-A", "1")])
            return [b"part1,", b"", b"part2"]
        with Serving(app) as port:
            st, hd, body = request(port, "POST", "/a%20b/c?x=1&y=%20", b"hello",
                                   {"Content-Type": "text/x-test", "X-Custom": "v"})
        self.assertEqual((st, hd["x-a"], hd["content-length"], body), (202, "1", "11", b"part1,part2"))
        self.assertEqual(seen["REQUEST_METHOD"], "POST")
        self.assertEqual(seen["PATH_INFO"], "/a b/c")
        self.assertEqual(seen["SCRIPT_NAME"], "")
        self.assertEqual(seen["QUERY_STRING"], "x=1&y=%20")
        self.assertEqual(seen["CONTENT_TYPE"], "text/x-test")
        self.assertEqual(seen["CONTENT_LENGTH"], "5")
        self.assertEqual(seen["HTTP_X_CUSTOM"], "v")
        self.assertNotIn("HTTP_CONTENT_TYPE", seen)
        self.assertEqual(seen["SERVER_PROTOCOL"], "HTTP/1.1")
        self.assertEqual(seen["wsgi.version"], (1, 0))
        self.assertEqual(seen["wsgi.url_scheme"], "http")
        self.assertEqual(seen["REMOTE_ADDR"], "127.0.0.1")
        self.assertEqual(seen["body"], b"hello")

    def test_write_callable_close_and_errors(self):
        closed = []

        class Result:
            def __iter__(self):
                return iter([b"-iter"])

            def close(self):
                closed.append(True)

        def app(environ, start_response):
            path = environ["PATH_INFO"]
            if path == "/boom":
                raise ValueError("app failure")
            if path == "/nostart":
                return [b"x"]
            if path == "/exc":
                start_response("200 OK", [])
                try:
                    raise KeyError("late")
                except KeyError:
                    import sys
                    start_response("503 Service Unavailable", [("Content-Type", "text/plain")], sys.exc_info())
                return [b"replaced"]
            write = start_response("200 OK", [("Content-Type", "text/plain")])
            write(b"written")
            return Result()
        with Serving(app) as port:
            self.assertEqual(request(port, "GET", "/")[::2], (200, b"written-iter"))
            self.assertEqual(request(port, "GET", "/boom")[0], 500)
            self.assertEqual(request(port, "GET", "/nostart")[0], 500)
            self.assertEqual(request(port, "GET", "/exc")[::2], (503, b"replaced"))
            self.assertEqual(request(port, "GET", "/")[0], 200)
        self.assertEqual(closed, [True, True])

    def test_flask(self):
        from flask import Flask, jsonify, request as freq
        app = Flask("t")
        app.logger.disabled = True

        @app.route("/hello/<name>")
        def hello(name):
            return jsonify(name=name, q=freq.args.get("q"))

        @app.route("/form", methods=["POST"])
        def form():
            return "got " + freq.form["a"]

        @app.route("/err")
        def err():
            raise RuntimeError("flask failure")
        with Serving(app) as port:
            st, hd, body = request(port, "GET", "/hello/bob?q=1")
            self.assertEqual((st, hd["content-type"]), (200, "application/json"))
            self.assertEqual(__import__("json").loads(body), {"name": "bob", "q": "1"})
            st, _, body = request(port, "POST", "/form", b"a=x%20y",
                                  {"Content-Type": "application/x-www-form-urlencoded"})
            self.assertEqual((st, body), (200, b"got x y"))
            self.assertEqual(request(port, "GET", "/missing")[0], 404)
            self.assertEqual(request(port, "GET", "/err")[0], 500)
            st, hd, body = request(port, "HEAD", "/hello/bob")
            self.assertEqual((st, body), (200, b""))
            self.assertGreater(int(hd["content-length"]), 0)


def raw(port, data, timeout=5):
    """Send bytes on a fresh socket, read until the server closes (or
    `timeout`); returns everything read."""
    s = socket.create_connection(("127.0.0.1", port), timeout)
    s.sendall(data)
    out = []
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out.append(b)
    except socket.timeout:
        pass
    s.close()
    return b"".join(out)


class Records(logging.Handler):
    """Collects the records of one logger for a with-block."""

    def __init__(self, name):
        super().__init__(logging.DEBUG)
        self.records = []
        self.logger = logging.getLogger(name)

    def emit(self, record):
        self.records.append(record)

    def __enter__(self):
        self.level = self.logger.level
        self.logger.addHandler(self)
        self.logger.setLevel(logging.DEBUG)
        self.logger.propagate_saved, self.logger.propagate = self.logger.propagate, False
        return self.records

    def __exit__(self, *exc):
        self.logger.removeHandler(self)
        self.logger.setLevel(self.level)
        self.logger.propagate = self.logger.propagate_saved


def env_app(seen):
    """An app that records its environ and answers 200 "ok"."""
    def app(environ, start_response):
        seen.append(dict(environ))
        environ["wsgi.input"].read()
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]
    return app


class Environ(unittest.TestCase):
    def test_underscore_headers_dropped(self):
        # X_Forwarded_For must not become HTTP_X_FORWARDED_FOR: behind a
        # proxy that sets X-Forwarded-For, a client could spoof it.
        seen = []
        with Serving(env_app(seen)) as port:
            out = raw(port, b"GET / HTTP/1.1\r\nHost: a\r\nX_Forwarded_For: 6.6.6.6\r\n"
                            b"X-Forwarded-For: 1.2.3.4\r\nX_Only: 1\r\nConnection: close\r\n\r\n")
        self.assertTrue(out.startswith(b"HTTP/1.1 200"), out)
        env = seen[0]
        self.assertEqual(env["HTTP_X_FORWARDED_FOR"], "1.2.3.4")
        self.assertNotIn("HTTP_X_ONLY", env)
        self.assertFalse([k for k in env if "6.6.6.6" in str(env[k])])

    def test_repeated_headers_joined(self):
        seen = []
        with Serving(env_app(seen)) as port:
            raw(port, b"GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\nCookie: a=1\r\nX-A: 2\r\nCookie: b=2\r\n"
                      b"Connection: close\r\n\r\n")
        self.assertEqual(seen[0]["HTTP_X_A"], "1, 2")
        self.assertEqual(seen[0]["HTTP_COOKIE"], "a=1; b=2")

    def test_server_name_port_and_remote(self):
        seen = []
        with Serving(env_app(seen)) as port:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/", headers={"Host": "example.com:8080"})
            c.getresponse().read()
            local_port = c.sock.getsockname()[1]
            c.close()
            raw(port, b"GET / HTTP/1.1\r\nHost: [::1]:9000\r\nConnection: close\r\n\r\n")
            raw(port, b"GET / HTTP/1.1\r\nHost: example.org\r\nConnection: close\r\n\r\n")
            raw(port, b"GET / HTTP/1.0\r\n\r\n")
        self.assertEqual((seen[0]["SERVER_NAME"], seen[0]["SERVER_PORT"]), ("example.com", "8080"))
        self.assertEqual((seen[0]["REMOTE_ADDR"], seen[0]["REMOTE_PORT"]), ("127.0.0.1", str(local_port)))
        self.assertEqual((seen[1]["SERVER_NAME"], seen[1]["SERVER_PORT"]), ("::1", "9000"))
        self.assertEqual((seen[2]["SERVER_NAME"], seen[2]["SERVER_PORT"]), ("example.org", "80"))
        # No Host: the listener's address.
        self.assertEqual((seen[3]["SERVER_NAME"], seen[3]["SERVER_PORT"]), ("127.0.0.1", str(port)))
        self.assertEqual(seen[3]["SERVER_PROTOCOL"], "HTTP/1.0")
        for env in seen:
            self.assertIs(env["wsgi.input_terminated"], True)
            self.assertIs(env["wsgi.multithread"], True)  # serve() runs 4 threads by default
            self.assertIs(env["wsgi.run_once"], False)

    def test_multithread_flag(self):
        seen = []
        with Serving(env_app(seen), threads=0) as port:
            request(port, "GET", "/")
        self.assertIs(seen[0]["wsgi.multithread"], False)

    def test_root_path(self):
        seen = []
        with Serving(env_app(seen), root_path="/app") as port:
            for path in ("/app/x/y?q=1", "/app", "/other", "/application"):
                request(port, "GET", path)
        got = [(e["SCRIPT_NAME"], e["PATH_INFO"], e["QUERY_STRING"]) for e in seen]
        self.assertEqual(got, [("/app", "/x/y", "q=1"), ("/app", "", ""), ("/app", "/other", ""),
                               ("/app", "/application", "")])

    def test_errors_go_to_logging(self):
        def app(environ, start_response):
            err = environ["wsgi.errors"]
            err.write("first line\nsecond ")
            err.write("line\n")
            err.writelines(["third\n"])
            err.flush()
            start_response("200 OK", [])
            return [b""]
        with Records("nanosrv.wsgi") as recs:
            with Serving(app) as port:
                self.assertEqual(request(port, "GET", "/")[0], 200)
        self.assertEqual([r.getMessage() for r in recs], ["first line", "second line", "third"])

    def test_url_scheme(self):
        from _net import certs
        import ssl
        c = certs()
        seen = []
        with Serving(env_app(seen), tls={"cert": c["srv.crt"], "key": c["srv.key"]}) as port:
            ctx = ssl.create_default_context(cafile=c["ca.crt"])
            conn = http.client.HTTPSConnection("localhost", port, timeout=10, context=ctx)
            conn.request("GET", "/s")
            r = conn.getresponse()
            self.assertEqual((r.status, r.read()), (200, b"ok"))
            conn.close()
        self.assertEqual(seen[0]["wsgi.url_scheme"], "https")
        self.assertEqual(seen[0]["SERVER_PORT"], str(port))
        seen = []
        with Serving(env_app(seen), url_scheme="https") as port:  # behind a TLS proxy
            request(port, "GET", "/")
            raw(port, b"GET / HTTP/1.1\r\nHost: example.org\r\nConnection: close\r\n\r\n")
        self.assertEqual(seen[0]["wsgi.url_scheme"], "https")
        self.assertEqual(seen[1]["SERVER_PORT"], "443")

    def test_serve_limits(self):
        def app(environ, start_response):
            data = environ["wsgi.input"].read()
            start_response("200 OK", [])
            return [str(len(data)).encode()]
        with Serving(app, limits={"max_body": 1000}) as port:
            self.assertEqual(request(port, "POST", "/", b"x" * 1000)[::2], (200, b"1000"))
            self.assertEqual(request(port, "POST", "/", b"x" * 1001)[0], 413)
        with self.assertRaises(Exception):
            nanosrv.wsgi.serve(app, port=0, limits={"no_such_option": 1})


class Errors(unittest.TestCase):
    def test_bad_status_and_headers_answer_500(self):
        bad = {
            "/s1": ("abc", []), "/s2": ("99 Low", []), "/s3": ("200OK", []), "/s4": (200, []),
            "/s5": ("101 Switching Protocols", []),
            "/h1": ("200 OK", [("X-A", "a\r\nSet-Cookie: x=1")]), "/h2": ("200 OK", [("Bad Name", "v")]),
            "/h3": ("200 OK", [("X-A", 1)]), "/h4": ("200 OK", [("Content-Length", "12x")]),
            "/h5": ("200 OK", [("Transfer-Encoding", "gzip")]), "/h6": ("200 OK", ("X-A", "b")),
            "/h7": ("200 OK", [("X-A", "caf\u20ac")]),
        }

        def app(environ, start_response):
            status, headers = bad.get(environ["PATH_INFO"], ("200 OK", []))
            start_response(status, headers)
            return [b"fine"]
        with Records("nanosrv.wsgi") as recs:
            with Serving(app) as port:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                for path in sorted(bad):
                    c.request("GET", path)
                    r = c.getresponse()
                    body = r.read()
                    self.assertEqual(r.status, 500, path)
                    self.assertNotIn("set-cookie", dict((k.lower(), v) for k, v in r.getheaders()))
                    self.assertNotIn(b"fine", body)
                c.request("GET", "/good")  # the same connection goes on
                r = c.getresponse()
                self.assertEqual((r.status, r.read()), (200, b"fine"))
                c.close()
        self.assertEqual(len([r for r in recs if r.levelno >= logging.ERROR and r.exc_info]), len(bad))

    def test_custom_reason(self):
        def app(environ, start_response):
            start_response("299 Custom Reason", [("Content-Type", "text/plain")])
            if environ["PATH_INFO"] == "/stream":
                return iter([b"a", b"b"])
            return [b"x"]
        with Serving(app) as port:
            for path in ("/", "/stream"):
                out = raw(port, b"GET " + path.encode() + b" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
                line = out.split(b"\r\n", 1)[0]
                if nanosrv.has("nsv_set_reason"):
                    self.assertEqual(line, b"HTTP/1.1 299 Custom Reason")
                else:
                    self.assertTrue(line.startswith(b"HTTP/1.1 299 "), line)

    def test_exception_before_and_during_body(self):
        def app(environ, start_response):
            if environ["PATH_INFO"] == "/before":
                raise ValueError("before anything")

            def gen():
                yield b"first"
                raise ValueError("mid-stream")
            start_response("200 OK", [("Content-Type", "text/plain")])
            return gen()
        for threads in (0, 4):
            with Records("nanosrv.wsgi") as recs:
                with Serving(app, threads=threads) as port:
                    self.assertEqual(request(port, "GET", "/before")[0], 500)
                    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                    c.request("GET", "/during")
                    r = c.getresponse()
                    self.assertEqual(r.status, 200)
                    # The body is cut (no final chunk): the client must not take it as whole.
                    with self.assertRaises(http.client.IncompleteRead):
                        r.read()
                    c.close()
                    self.assertEqual(request(port, "GET", "/before")[0], 500)  # still serving
            msgs = [(r.exc_info[1].args[0] if r.exc_info else None) for r in recs]
            self.assertEqual(msgs, ["before anything", "mid-stream", "before anything"], threads)

    def test_exc_info_after_headers_reraises(self):
        caught = []

        def app(environ, start_response):
            start_response("200 OK", [])

            def gen():
                yield b"head went out"
                try:
                    raise KeyError("late failure")
                except KeyError:
                    try:
                        start_response("500 Oops", [], sys.exc_info())
                    except KeyError as e:
                        caught.append(e)
                        raise
            return gen()
        with Records("nanosrv.wsgi"):
            with Serving(app) as port:
                out = raw(port, b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        self.assertTrue(out.startswith(b"HTTP/1.1 200 OK"), out)
        self.assertIn(b"head went out", out)
        self.assertFalse(out.endswith(b"0\r\n\r\n"))  # aborted, not ended
        self.assertEqual(len(caught), 1)

    def test_no_start_response(self):
        def app(environ, start_response):
            return iter([b"", b""])
        with Records("nanosrv.wsgi") as recs:
            with Serving(app) as port:
                self.assertEqual(request(port, "GET", "/")[0], 500)
        self.assertTrue(any("start_response" in r.getMessage() for r in recs))

    def test_head(self):
        def app(environ, start_response):
            path = environ["PATH_INFO"]
            if path == "/list":
                start_response("200 OK", [("Content-Type", "text/plain")])
                return [b"12345"]
            if path == "/len":
                start_response("200 OK", [("Content-Length", "7")])
                return iter([b"1234", b"567"])
            start_response("200 OK", [])
            return iter([b"abc", b"def"])
        for threads in (0, 4):
            with Serving(app, threads=threads) as port:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                for path, cl in (("/list", "5"), ("/len", "7"), ("/gen", None)):
                    c.request("HEAD", path)
                    r = c.getresponse()
                    self.assertEqual((r.status, r.read(), r.getheader("content-length")), (200, b"", cl))
                c.request("GET", "/gen")  # the connection stayed in step
                r = c.getresponse()
                self.assertEqual(r.read(), b"abcdef")
                c.close()

    def test_no_body_statuses(self):
        def app(environ, start_response):
            path = environ["PATH_INFO"]
            if path == "/204":
                start_response("204 No Content", [("Content-Length", "0")])
                return [b""]
            if path == "/304":
                start_response("304 Not Modified", [("ETag", '"x"')])
                return iter([b""])
            start_response("200 OK", [])
            return [b"after"]
        for threads in (0, 4):
            with Serving(app, threads=threads) as port:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                for path, status in (("/204", 204), ("/304", 304), ("/", 200)):
                    c.request("GET", path)
                    r = c.getresponse()
                    self.assertEqual((r.status, r.read()), (status, b"after" if status == 200 else b""))
                    if status == 204:
                        self.assertIsNone(r.getheader("content-length"))
                c.close()


if __name__ == "__main__":
    _tap.main()
