"""Real WSGI apps (tests/apps/flask_app.py, django_wsgi_app.py) under
gunicorn (one gthread worker, 4 threads), the reference, and under
`python3 -m nanosrv --interface wsgi --threads 4`: every check sends the
same request to both and asserts the same observable result (status,
reason, headers but Date and Server, body), and asserts on the reference's
result so a check also fails when both are wrong.

Documented differences: the Date and Server headers (apps/harness.py
IGNORED) and "Connection: keep-alive" (REDUNDANT); the framing of streamed
answers (unframed() below); the order in Flask's Allow header (built
from a set); the HTTP version of the status line answering HTTP/1.0
(test_http10); a request header spelled with
an underscore (X_Custom) reaches the app through gunicorn 20.1 as
HTTP_X_CUSTOM and must not through nanosrv (it would let a client spoof a
proxy's X-Custom), so that check asserts each server's own answer."""
import concurrent.futures
import hashlib
import http.client
import json
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "apps"))
import _tap  # noqa: E402,F401  (sets NANOSRV_LIBRARY for the servers it starts)
import harness  # noqa: E402
from harness import Compare, key, multipart, request  # noqa: E402

HOST = {"Host": "example.test"}
BLOB = bytes(range(256)) * 1200  # 300 KiB of every byte value
BIG = hashlib.sha256(b"seed").digest() * (1 << 15)  # 1 MiB


def sha(b):
    return hashlib.sha256(b).hexdigest()


def get(path, headers=None):
    return lambda port: request(port, "GET", path, headers=dict(HOST, **(headers or {})))


def post(path, body, ctype, headers=None):
    h = dict(HOST, **{"Content-Type": ctype}, **(headers or {}))
    return lambda port: request(port, "POST", path, body=body, headers=h)


def chunked_post(path, pieces, ctype="application/octet-stream"):
    def go(port):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        try:
            c.request("POST", path, body=iter(pieces), headers=dict(HOST, **{"Content-Type": ctype}),
                      encode_chunked=True)
            r = c.getresponse()
            return harness.Reply(r.status, r.reason, r.getheaders(), r.read())
        finally:
            c.close()
    return go


def keepalive(paths):
    def go(port):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        out = []
        try:
            for p in paths:
                c.request("GET", p, headers=HOST)
                r = c.getresponse()
                out.append(key(harness.Reply(r.status, r.reason, r.getheaders(), r.read())))
        finally:
            c.close()
        return out
    return go


def unframed(r):
    """key() without the framing headers. Documented difference: nanosrv
    may send the pieces a generator made before the first write as one
    answer with Content-Length where gunicorn always sends them chunked;
    both are valid framing of the same body, and that nanosrv streams is
    checked by test_streams_while_generating."""
    return r.key(drop=("content-length", "transfer-encoding"))


def at_once(port, path, n):
    """n requests at once, each on its own connection: their statuses and bodies."""
    with concurrent.futures.ThreadPoolExecutor(n) as ex:
        futs = [ex.submit(request, port, "GET", path, None, HOST, 30) for _ in range(n)]
        return sorted((f.result().status, f.result().body) for f in futs)


class FlaskApp(Compare):
    MODULE = "flask_app"
    KIND = "wsgi"

    def test_reason_phrases(self):
        # PEP 3333: the application writes the reason ("302 FOUND" from Werkzeug); it goes out as given
        got = {}
        for s in self.servers:
            got[s.name] = [(r.status, r.reason) for r in (request(s.port, "GET", p, headers=HOST)
                                                          for p in ("/redirect", "/teapot", "/json"))]
        for name, g in got.items():
            self.assertEqual(g, [(302, "FOUND"), (418, "I'M A TEAPOT"), (200, "OK")], name)

    def test_streams_while_generating(self):
        got = self.same(lambda port: harness.live_stream(port, "/live/f%d" % port, "/release/f%d" % port))
        self.assertEqual(got, (200, b"first\n", b"second released\n", 200, b"released"))

    def test_routes(self):
        r = self.same(get("/plaintext"), key)
        self.assertEqual((r.status, r.body, r.header("content-type")), (200, b"Hello, World!", "text/plain; charset=utf-8"))
        r = self.same(get("/json"), key)
        self.assertEqual(r.json(), {"message": "Hello, World!"})
        r = self.same(get("/users/9"), key)
        self.assertEqual(r.json(), {"user_id": 9})
        r = self.same(get("/hello/J%C3%BCrgen?q=1&q=two"), key)
        self.assertEqual(r.json(), {"hello": "Jürgen", "q": ["1", "two"]})
        r = self.same(get("/files/a/b/c.txt"), key)
        self.assertEqual(r.json(), {"path": "a/b/c.txt"})

    def test_json_body(self):
        r = self.same(post("/echo-json", json.dumps({"k": [1, {"z": None}]}), "application/json"), key)
        self.assertEqual((r.status, r.json()), (201, {"got": {"k": [1, {"z": None}]}}))
        r = self.same(post("/echo-json", b"{", "application/json"), key)
        self.assertEqual(r.status, 400)
        self.assertIn(b"body is not JSON", r.body)

    def test_form_upload(self):
        body, ctype = multipart([("name", "x"), ("name", "y")], [("doc", "b.bin", "application/octet-stream", BLOB),
                                                                 ("doc", "t.txt", "text/plain", b"tt")])
        r = self.same(post("/form", body, ctype), key)
        self.assertEqual(r.json(), {"fields": {"name": ["x", "y"]}, "files": {"doc": [
            {"filename": "b.bin", "size": len(BLOB), "content_type": "application/octet-stream", "sha256": sha(BLOB)},
            {"filename": "t.txt", "size": 2, "content_type": "text/plain", "sha256": sha(b"tt")}]}})
        r = self.same(post("/form", "a=1&b=%C3%A9", "application/x-www-form-urlencoded"), key)
        self.assertEqual(r.json(), {"fields": {"a": ["1"], "b": ["é"]}, "files": {}})

    def test_streamed_request_body(self):
        r = self.same(post("/size", BIG, "application/octet-stream"), key)
        self.assertEqual(r.json(), {"size": len(BIG), "sha256": sha(BIG)})
        pieces = [BIG[i:i + 70000] for i in range(0, len(BIG), 70000)]
        r = self.same(chunked_post("/size", pieces), key)
        self.assertEqual(r.json(), {"size": len(BIG), "sha256": sha(BIG)})

    def test_stream_with_context(self):
        r = self.same(get("/stream?n=300&who=ann"), unframed)
        self.assertEqual(r.body, "".join("/stream ann %d\n" % i for i in range(300)).encode())
        self.assertEqual((r.header("x-lines"), r.header("transfer-encoding")), ("300", "chunked"))

    def test_errors(self):
        r = self.same(get("/teapot"), key)
        self.assertEqual((r.status, r.json()), (418, {"error": "teapot"}))
        r = self.same(get("/boom"), key)
        self.assertEqual(r.status, 500)
        self.assertIn(b"Internal Server Error", r.body)
        r = self.same(get("/nope"), key)
        self.assertEqual((r.status, r.json()), (404, {"error": "not found", "path": "/nope"}))
        # Flask builds Allow from a set: its order changes from process to process
        r = self.same(post("/plaintext", b"", "text/plain"), lambda r: (r.status, sorted(r.header("allow").split(", "))))
        self.assertEqual((r.status, sorted(r.header("allow").split(", "))), (405, ["GET", "HEAD", "OPTIONS"]))

    def test_cookies_redirect_head(self):
        r = self.same(get("/cookies", {"Cookie": "a=1; b=2"}), key)
        self.assertEqual(r.json(), {"cookies": {"a": "1", "b": "2"}})
        self.assertEqual(sorted(v.split(";")[0] for k, v in r.headers if k == "set-cookie"),
                         ["session=abc123", "theme=dark"])
        r = self.same(get("/redirect"), key)
        self.assertEqual((r.status, r.header("location")), (302, "/plaintext"))
        r = self.same(lambda port: request(port, "HEAD", "/plaintext", headers=HOST), key)
        self.assertEqual((r.status, r.body, r.header("content-length")), (200, b"", "13"))

    SRC = open(os.path.join(harness.APPS, "flask_app.py"), "rb").read()

    def test_send_file(self):
        r = self.same(get("/download"), key)
        self.assertEqual((r.status, r.body, r.header("content-length")), (200, self.SRC, str(len(self.SRC))))

    def test_send_file_body(self):
        r = self.same(get("/download"), lambda r: r.key(drop=("etag", "accept-ranges")))
        self.assertEqual((r.status, r.body, r.header("content-length")), (200, self.SRC, str(len(self.SRC))))

    def test_send_file_range(self):
        r = self.same(get("/download", {"Range": "bytes=10-19"}), key)
        self.assertEqual((r.status, r.body, r.header("content-range")),
                         (206, self.SRC[10:20], "bytes 10-19/%d" % len(self.SRC)))

    def test_send_file_revalidated(self):
        def go(port):  # the client revalidates with the ETag it was given
            etag = request(port, "GET", "/download", headers=HOST).header("etag")
            r = request(port, "GET", "/download", headers=dict(HOST, **{"If-None-Match": etag}))
            return r.status, r.body
        self.assertEqual(self.same(go), (304, b""))

    def test_send_file_head(self):
        r = self.same(lambda port: request(port, "HEAD", "/download", headers=HOST),
                      lambda r: r.key(drop=("etag", "accept-ranges")))
        self.assertEqual((r.status, r.body, r.header("content-length")), (200, b"", str(len(self.SRC))))

    def test_generator_failing_midway(self):
        # the client must see that the answer is cut short: the chunked body never ends
        got = self.same(lambda port: harness.broken_stream(port, "/stream-fail"))
        self.assertEqual(got, (200, b"one\ntwo\n", "incomplete"))

    def test_head_of_streamed_answer(self):
        r = self.same(lambda port: request(port, "HEAD", "/stream?n=3", headers=HOST), unframed)
        self.assertEqual((r.status, r.body, r.header("x-lines")), (200, b"", "3"))

    def test_big_answer(self):
        def go(port):
            r = request(port, "GET", "/big", headers=HOST, timeout=60)
            return r.status, len(r.body), sha(r.body)
        self.assertEqual(self.same(go), (200, 16 << 20, sha(bytes(range(256)) * 256 * 256)))

    def test_expect_100_continue(self):
        def go(port):
            sock = socket.create_connection(("127.0.0.1", port), 20)
            try:
                sock.sendall(b"POST /size HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
                interim = sock.recv(4096)
                sock.sendall(b"hello")
                out = b""
                while b"}" not in out:
                    b = sock.recv(65536)
                    if not b:
                        break
                    out += b
                return interim.split(b"\r\n")[0], out.split(b"\r\n")[0], json.loads(out.split(b"\r\n\r\n", 1)[-1])
            finally:
                sock.close()
        self.assertEqual(self.same(go), (b"HTTP/1.1 100 Continue", b"HTTP/1.1 200 OK",
                                         {"size": 5, "sha256": sha(b"hello")}))

    def test_http10(self):
        # Documented difference: gunicorn answers an HTTP/1.0 request with "HTTP/1.0 200 OK",
        # nanosrv (as uvicorn) with "HTTP/1.1 200 OK", the version it supports (RFC 9110 2.5);
        # the status and body are compared, and that both close the connection (raw() reads to EOF).
        def go(port):
            data = harness.raw(port, b"GET /users/4 HTTP/1.0\r\n\r\n")
            head, _, body = data.partition(b"\r\n\r\n")
            return head.split(b"\r\n")[0].split(b" ", 1)[1], json.loads(body)
        self.assertEqual(self.same(go), (b"200 OK", {"user_id": 4}))

    def test_environ(self):
        r = self.same(get("/environ?x=1&y=%20", {"X-Custom": "v"}), key)
        self.assertEqual(r.json(), {
            "REQUEST_METHOD": "GET", "SCRIPT_NAME": "", "PATH_INFO": "/environ", "QUERY_STRING": "x=1&y=%20",
            "SERVER_PROTOCOL": "HTTP/1.1", "CONTENT_TYPE": None, "CONTENT_LENGTH": None,
            "HTTP_HOST": "example.test", "HTTP_X_CUSTOM": "v", "REMOTE_ADDR": "127.0.0.1",
            "wsgi.url_scheme": "http", "wsgi.version": [1, 0], "multithread_type": "bool",
            "input_has_read": True, "errors_has_write": True})

    def test_underscore_header_not_merged(self):
        # Documented difference: gunicorn 20.1 passes X_Custom on as HTTP_X_CUSTOM (and merges it
        # with X-Custom: "evil,good"); later gunicorn drops it, and nanosrv must.
        got = {}
        for s in self.servers:
            env = lambda h: request(s.port, "GET", "/environ", headers=dict(HOST, **h)).json()["HTTP_X_CUSTOM"]
            got[s.name] = (env({"X_Custom": "evil"}), env({"X_Custom": "evil", "X-Custom": "good"}))
        self.assertEqual(got["gunicorn"], ("evil", "evil,good"))
        self.assertEqual(got.get("nanosrv", (None, "good")), (None, "good"))

    def test_keepalive_sequence(self):
        out = self.same(keepalive(["/plaintext", "/json", "/stream?n=2", "/users/1", "/plaintext"]))
        self.assertEqual([o[0] for o in out], [200] * 5)

    def test_threads_run_views_at_once(self):
        self.assertEqual(self.same(lambda port: at_once(port, "/barrier", 3)), [(200, b"met")] * 3)

    def test_zz_sigterm_mid_request(self):
        # SIGTERM while a view runs: the view's answer still goes out, then the server exits 0
        got = {}
        for s in self.servers:
            with concurrent.futures.ThreadPoolExecutor(1) as ex:
                fut = ex.submit(request, s.port, "GET", "/slow?s=1&tag=term", None, HOST, 30)
                s.wait_record("slow term")  # the view runs (and sleeps 1 s)
                code = s.stop()
                r = fut.result()
            got[s.name] = (r.status, r.body, code)
        for name, g in got.items():
            self.assertEqual(g, (200, b"slept", 0), name)


class DjangoWSGIApp(Compare):
    MODULE = "django_wsgi_app"
    KIND = "wsgi"

    def test_streams_while_generating(self):
        got = self.same(lambda port: harness.live_stream(port, "/live/d%d" % port, "/release/d%d" % port))
        self.assertEqual(got, (200, b"first\n", b"second released\n", 200, b"released"))

    def test_views(self):
        r = self.same(get("/plaintext"), key)
        self.assertEqual((r.status, r.body), (200, b"Hello, World!"))
        r = self.same(get("/hello/ann/?q=1&q=%C3%A9"), key)
        self.assertEqual(r.json(), {"hello": "ann", "q": ["1", "é"], "method": "GET"})
        r = self.same(get("/articles/2024/my-slug/"), key)
        self.assertEqual(r.json(), {"year": 2024, "slug": "my-slug"})
        r = self.same(get("/no/such/"), key)
        self.assertEqual(r.status, 404)

    def test_json_and_csrf(self):
        r = self.same(post("/json", json.dumps({"x": 1}), "application/json"), key)
        self.assertEqual((r.status, r.json()), (201, {"got": {"x": 1}}))
        r = self.same(post("/protected", b"a=1", "application/x-www-form-urlencoded"), key)
        self.assertEqual(r.status, 403)
        r = self.same(get("/json"), key)
        self.assertEqual((r.status, r.header("allow")), (405, "POST"))

    def test_form_and_upload(self):
        r = self.same(post("/form", "a=1&a=2", "application/x-www-form-urlencoded"), key)
        self.assertEqual(r.json(), {"fields": {"a": ["1", "2"]}, "files": {}})
        big = BLOB * 2
        body, ctype = multipart([("t", "x")], [("f", "big.bin", "application/octet-stream", big)])
        r = self.same(post("/form", body, ctype), key)
        self.assertEqual([(f["name"], f["size"], f["sha256"]) for f in r.json()["files"]["f"]],
                         [("big.bin", len(big), sha(big))])

    def test_streaming(self):
        r = self.same(get("/stream?n=100"), unframed)
        self.assertEqual((r.body, r.header("x-rows")), (b"".join(b"row %d\n" % i for i in range(100)), "100"))

    def test_meta_and_cookies(self):
        r = self.same(get("/meta/?a=b", {"X-Custom": "v", "Content-Type": "text/x"}), key)
        self.assertEqual(r.json(), {"path": "/meta/", "path_info": "/meta/", "script_name": "", "query": "a=b",
                                    "method": "GET", "scheme": "http", "host": "example.test",
                                    "remote_addr": "127.0.0.1", "content_type": "text/x", "x_custom": "v",
                                    "secure": False})
        r = self.same(get("/cookies", {"Cookie": "k=v"}), key)
        self.assertEqual(r.json(), {"cookies": {"k": "v"}})

    def test_server_error(self):
        r = self.same(get("/boom"), key)
        self.assertEqual(r.status, 500)

    def test_file_response(self):
        with open(os.path.join(harness.APPS, "django_common.py"), "rb") as f:
            src = f.read()
        r = self.same(get("/download"), key)
        self.assertEqual((r.status, r.body, r.header("content-length")), (200, src, str(len(src))))

    def test_threads_run_views_at_once(self):
        # four 0.3 s views at once on 4 threads: all answered (no ordering or time asserted)
        self.assertEqual(self.same(lambda port: at_once(port, "/slow?s=0.3", 4)), [(200, b"slept")] * 4)


if __name__ == "__main__":
    harness.main()
