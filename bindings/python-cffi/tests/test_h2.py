"""HTTP/2 (h2c) through the binding, unchanged: the library's `http2` option
set with Manager.set_option, then a plain route handler, an ASGI app
(FastAPI) and a WSGI app (Flask) answered to curl --http2-prior-knowledge
and httpx with http2=True. Bodies, statuses and headers must be what the
same apps answer over HTTP/1.1; cookie fields split by the client reach the
app joined. Skipped when the library has no HTTP/2."""
import asyncio
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import unittest

import _tap

import nanosrv
import nanosrv.asgi
import nanosrv.wsgi

logging.getLogger("nanosrv").setLevel(logging.CRITICAL)

H2_ALL = nanosrv.H2_ALL  # NSV_H2_TLS | NSV_H2_PRIOR | NSV_H2_UPGRADE, from the cdef
AVAILABLE = nanosrv.http2_available()
try:
    import httpx
    import h2  # noqa: F401 (httpx's http2=True needs it)
except ImportError:
    httpx = None

if not AVAILABLE:
    print("1..0 # SKIP the library is built without HTTP/2 (nghttp2)")
    raise SystemExit(0)


def h2_manager():
    m = nanosrv.Manager()
    m.set_option("http2", H2_ALL)
    m.set_max_body_size(8 << 20)
    return m


def curl(port, path, *args, http2=True):
    """(status, http version, body) through curl."""
    out = tempfile.NamedTemporaryFile(delete=False)
    out.close()
    try:
        r = subprocess.run(["curl", "-sS", "--max-time", "10", "-o", out.name, "-w", "%{http_code} %{http_version}",
                            "--http2-prior-knowledge" if http2 else "--http1.1"] + list(args) +
                           ["http://127.0.0.1:%d%s" % (port, path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        st, ver = (r.stdout.decode().split() + ["0", "0"])[:2]
        with open(out.name, "rb") as f:
            return int(st), ver, f.read()
    finally:
        os.unlink(out.name)


class Running:
    """Serves with target(manager, on_ready) in a thread; the port once ready."""

    def __init__(self, target):
        self.m = h2_manager()
        self.port = None
        self.ready = threading.Event()

        def on_ready(lst):
            self.port = lst.port
            self.ready.set()
        self.t = threading.Thread(target=target, args=(self.m, on_ready), daemon=True)

    def __enter__(self):
        self.t.start()
        if not self.ready.wait(20):
            raise RuntimeError("server did not start")
        return self.port

    def __exit__(self, *exc):
        self.m.stop()
        self.t.join(20)
        self.m.close()


def plain_server(m, on_ready):
    @m.get("/hello/:name")
    def hello(conn, msg):
        return 200, {"Content-Type": "text/plain", "X-Name": msg.params["name"]}, "hi " + msg.params["name"]

    @m.post("/echo")
    def echo(conn, msg):
        return 200, {"Content-Type": "application/octet-stream"}, msg.body

    @m.get("/cookies")
    def cookies(conn, msg):
        return 200, {"Content-Type": "text/plain"}, msg.header("cookie") or ""

    @m.get("/proto")
    def proto(conn, msg):
        return 200, {"Content-Type": "text/plain"}, "h2" if msg.http2 else "h1"

    @m.get("/stream")
    def stream(conn, msg):
        conn.reply_start(200, {"Content-Type": "text/plain"})
        for i in range(5):
            conn.send_chunk(b"part %d\n" % i)
        conn.reply_end()
    on_ready(m.http_listen("http://127.0.0.1:0"))
    m.run(50)


def fastapi_app():
    from fastapi import FastAPI, Request
    from fastapi.responses import PlainTextResponse, StreamingResponse
    app = FastAPI()

    @app.get("/items/{item_id}")
    async def item(item_id: int, q: str = ""):
        return {"item_id": item_id, "q": q}

    @app.post("/sha")
    async def sha(request: Request):
        return PlainTextResponse(hashlib.sha256(await request.body()).hexdigest())

    @app.get("/cookies")
    async def cookies(request: Request):
        return PlainTextResponse(request.headers.get("cookie", ""))

    @app.get("/version")
    async def version(request: Request):
        return PlainTextResponse(request.scope.get("http_version", ""))

    @app.get("/stream")
    async def stream():
        async def gen():
            for i in range(5):
                yield b"chunk %d\n" % i
        return StreamingResponse(gen(), media_type="text/plain")
    return app


def flask_app():
    from flask import Flask, request
    app = Flask("h2")

    @app.route("/hello/<name>")
    def hello(name):
        return "hello " + name

    @app.route("/sha", methods=["POST"])
    def sha():
        return hashlib.sha256(request.get_data()).hexdigest()

    @app.route("/cookies")
    def cookies():
        return request.headers.get("Cookie", "")

    @app.route("/protocol")
    def protocol():
        return request.environ.get("SERVER_PROTOCOL", "")
    return app


BIG = os.urandom(2 << 20)


class H2Binding(unittest.TestCase):
    def check_h2_like_h1(self, port, path, *args):
        st2, ver, b2 = curl(port, path, *args)
        st1, ver1, b1 = curl(port, path, *args, http2=False)
        self.assertEqual((ver, ver1), ("2", "1.1"), path)
        self.assertEqual((st2, b2), (st1, b1), "%s: same status and body over h2 and HTTP/1.1" % path)
        return st2, b2

    def test_plain_handler(self):
        with Running(plain_server) as port:
            self.assertEqual(self.check_h2_like_h1(port, "/hello/ann"), (200, b"hi ann"))
            with open(os.path.join(tempfile.gettempdir(), "nsv-h2-big-%d" % os.getpid()), "wb") as f:
                f.write(BIG)
            try:
                st, body = self.check_h2_like_h1(port, "/echo", "--data-binary", "@" + f.name)
            finally:
                os.unlink(f.name)
            self.assertEqual((st, hashlib.sha256(body).digest()), (200, hashlib.sha256(BIG).digest()))
            st, ver, body = curl(port, "/cookies", "-H", "cookie: a=1", "-H", "cookie: b=2")
            self.assertEqual((st, ver, body), (200, "2", b"a=1; b=2"), "split cookie fields joined")
            self.assertEqual(self.check_h2_like_h1(port, "/stream")[1], b"".join(b"part %d\n" % i for i in range(5)))
            self.assertEqual(self.check_h2_like_h1(port, "/nothing")[0], 404)
            self.assertEqual((curl(port, "/proto")[2], curl(port, "/proto", http2=False)[2]), (b"h2", b"h1"),
                             "msg.http2 tells the stream from an HTTP/1.1 request")

    @unittest.skipIf(httpx is None, "python3-httpx or python3-h2 not installed")
    def test_plain_handler_httpx(self):
        with Running(plain_server) as port:
            with httpx.Client(http1=False, http2=True, base_url="http://127.0.0.1:%d" % port, timeout=10) as c:
                rs = [c.get("/hello/n%d" % i) for i in range(10)]
                self.assertEqual({r.http_version for r in rs}, {"HTTP/2"})
                self.assertEqual([r.text for r in rs], ["hi n%d" % i for i in range(10)])
                self.assertEqual(rs[3].headers["x-name"], "n3")
                self.assertNotIn("connection", rs[3].headers)
                r = c.post("/echo", content=BIG)
                self.assertEqual((r.status_code, r.content == BIG), (200, True))

    def check_adapter(self, port, version_path, on_h2, on_h1, what):
        """What a framework adapter shows over h2: cookie fields joined, a body
        posted whole, and the protocol it reports on a stream and on HTTP/1.1."""
        st, ver, body = curl(port, "/cookies", "-H", "cookie: a=1", "-H", "cookie: b=2")
        self.assertEqual((st, body), (200, b"a=1; b=2"))
        if httpx is not None:
            with httpx.Client(http1=False, http2=True, base_url="http://127.0.0.1:%d" % port, timeout=10) as c:
                r = c.post("/sha", content=BIG)
                self.assertEqual((r.http_version, r.text), ("HTTP/2", hashlib.sha256(BIG).hexdigest()))
                self.assertEqual(c.get(version_path).text, on_h2, what)
        self.assertEqual(curl(port, version_path, http2=False)[2], on_h1)

    def test_asgi_fastapi(self):
        def target(m, on_ready):
            asyncio.run(nanosrv.asgi.serve(fastapi_app(), "127.0.0.1", 0, ready=on_ready, manager=m))
        with Running(target) as port:
            st, body = self.check_h2_like_h1(port, "/items/7?q=x")
            self.assertEqual((st, body), (200, b'{"item_id":7,"q":"x"}'))
            self.assertEqual(self.check_h2_like_h1(port, "/items/notint")[0], 422)
            self.assertEqual(self.check_h2_like_h1(port, "/stream")[1], b"".join(b"chunk %d\n" % i for i in range(5)))
            self.check_adapter(port, "/version", "2", b"1.1", "ASGI scope http_version on a stream")

    def test_wsgi_flask(self):
        def target(m, on_ready):
            nanosrv.wsgi.serve(flask_app(), "127.0.0.1", 0, m, on_ready)
        with Running(target) as port:
            self.assertEqual(self.check_h2_like_h1(port, "/hello/bob"), (200, b"hello bob"))
            self.assertEqual(self.check_h2_like_h1(port, "/missing")[0], 404)
            self.check_adapter(port, "/protocol", "HTTP/2", b"HTTP/1.1", "WSGI SERVER_PROTOCOL on a stream")


if __name__ == "__main__":
    if not shutil.which("curl"):
        print("1..0 # SKIP curl not installed")
        raise SystemExit(0)
    _tap.main()
