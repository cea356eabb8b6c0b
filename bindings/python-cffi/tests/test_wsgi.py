"""nanosrv.wsgi: PEP 3333 environ and start_response, with Flask and a bare app."""
import http.client
import logging
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
    """nanosrv.wsgi.serve(app) in a thread, stopped at the end."""

    def __init__(self, app):
        self.m = nanosrv.Manager()
        self.ready = threading.Event()
        self.port = None

        def on_ready(lst):
            self.port = lst.port
            self.ready.set()
        self.t = threading.Thread(target=nanosrv.wsgi.serve, args=(app, "127.0.0.1", 0, self.m, on_ready),
                                  daemon=True)

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


if __name__ == "__main__":
    _tap.main()
