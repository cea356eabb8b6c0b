"""The HTTP client (nanosrv.client): srv.fetch under asyncio and the
callback form, against the library's own server in this process and
python3's http.server in a subprocess; errors, streaming with
backpressure, cancellation, sharded servers."""
import asyncio
import hashlib
import http.client
import json
import logging
import os
import socket
import sys
import threading
import unittest

import _tap
from _net import Proc, certs

import nanosrv
from nanosrv._ffi import lib

logging.getLogger("nanosrv").setLevel(logging.CRITICAL)
APPS = os.path.join(_tap.HERE, "apps")
PATTERN = bytes(range(256)) * 256


def pattern(n):
    return (PATTERN * (n // len(PATTERN) + 1))[:n]


def serve(body, setup=None, manager=None):
    """asyncio.run(body(m, port)) with m (a Manager, or `manager`) serving
    its routes on an ephemeral port from the same loop."""
    async def main():
        m = manager if manager is not None else nanosrv.Manager()
        if setup is not None:
            setup(m)
        port = m.http_listen("http://127.0.0.1:0").port
        done = nanosrv.aio.attach(m)
        try:
            return await asyncio.wait_for(body(m, port), 20)
        finally:
            m.stop()
            await asyncio.wait_for(done, 5)
            m.close()
    return asyncio.run(main())


def _catch(fn):
    try:
        fn()
    except Exception as e:
        return e


class RawServer:
    """A loopback socket server answering each connection with `reply`
    (bytes, then close unless keep), in a thread; for malformed answers."""

    def __init__(self, reply, keep=False):
        self.s = socket.socket()
        self.s.bind(("127.0.0.1", 0))
        self.s.listen(8)
        self.port = self.s.getsockname()[1]
        self.reply, self.keep, self.conns = reply, keep, []
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while True:
            try:
                c, _ = self.s.accept()
            except OSError:
                return
            self.conns.append(c)
            try:
                c.recv(65536)
                if self.reply:
                    c.sendall(self.reply)
                if not self.keep:
                    c.close()
            except OSError:
                pass

    def close(self):
        try:
            self.s.shutdown(socket.SHUT_RDWR)  # wakes the accept() of the thread
        except OSError:
            pass
        self.s.close()
        for c in self.conns:
            c.close()
        self.t.join(5)


class OwnServer(unittest.TestCase):
    """Against routes of the Manager that makes the requests."""

    def test_get_status_reason_headers_json(self):
        def setup(m):
            @m.get("/users/:id")
            def user(conn, msg):
                conn.http_reply("201 Made It", "Content-Type: application/json\r\nSet-Cookie: a=1\r\n"
                                "set-cookie: b=2\r\n", json.dumps({"id": msg.params["id"],
                                                                   "x": msg.header("x-token")}))

        async def body(m, port):
            r = await m.fetch("http://127.0.0.1:%d/users/7" % port, headers={"X-Token": "t1"})
            return r, await r.json(), await r.text(), await r.read()
        r, doc, text, raw = serve(body, setup)
        self.assertEqual((r.status, r.reason, r.version, r.ok), (201, "Made It", "HTTP/1.1", True))
        self.assertEqual(doc, {"id": "7", "x": "t1"})
        self.assertEqual(text.encode(), raw)
        self.assertEqual(r.headers["content-type"], "application/json")
        self.assertEqual(r.headers.get("CONTENT-TYPE"), "application/json")
        self.assertEqual(r.headers.getall("Set-Cookie"), ["a=1", "b=2"])
        self.assertIn("SET-COOKIE", r.headers)
        self.assertEqual(r.content, raw)
        self.assertTrue(r.done)

    def test_head_and_pooled_connection(self):
        def setup(m):
            m.get("/peer", lambda conn, msg: {"port": msg.peer[1]})

        async def body(m, port):
            url = "http://127.0.0.1:%d/peer" % port
            h = await m.fetch(url, method="HEAD")
            head = (h.status, h.headers.get("content-length"), await h.read())
            ports = []
            for _ in range(3):  # each body read to its end: the connection goes back to the pool
                r = await m.fetch(url)
                ports.append((await r.json())["port"])
                self.assertTrue(r.keep_alive)
            return head, len(set(ports))
        head, distinct = serve(body, setup)
        self.assertEqual(head[0], 200)
        self.assertEqual(head[2], b"")
        self.assertEqual(distinct, 1)

    def test_post_bytes_json_and_streamed_bodies(self):
        def setup(m):
            m.post("/echo", lambda conn, msg: (200, {"Content-Type": msg.header("content-type") or "-",
                                                     "X-Chunked": "1" if msg.header("transfer-encoding") else "0"},
                                               msg.body))

        async def body(m, port):
            url = "http://127.0.0.1:%d/echo" % port
            out = []
            r = await m.fetch(url, method="POST", body=b"abc")
            out.append((await r.read(), r.headers["x-chunked"]))
            r = await m.fetch(url, method="post", json={"a": [1, 2]})
            out.append((await r.json(), r.headers["content-type"]))

            async def agen():
                for i in range(20):
                    yield pattern(40000)
                    await asyncio.sleep(0)
            r = await m.fetch(url, method="POST", body=agen())
            out.append((hashlib.sha256(await r.read()).hexdigest(), r.headers["x-chunked"]))
            r = await m.fetch(url, method="PUT" if False else "POST", body=[b"ab", b"", b"cd"], content_length=4)
            out.append((await r.read(), r.headers["x-chunked"]))
            return out
        out = serve(body, setup)
        self.assertEqual(out[0], (b"abc", "0"))
        self.assertEqual(out[1], ({"a": [1, 2]}, "application/json"))
        self.assertEqual(out[2], (hashlib.sha256(pattern(40000) * 20).hexdigest(), "1"))
        self.assertEqual(out[3], (b"abcd", "0"))

    def test_failing_body_iterator_fails_the_request(self):
        def setup(m):
            m.post("/echo", lambda conn, msg: msg.body)

        async def body(m, port):
            def gen():
                yield b"part"
                raise KeyError("no more")
            with self.assertRaises(KeyError):
                r = await m.fetch("http://127.0.0.1:%d/echo" % port, method="POST", body=gen())
                await r.read()
            return len(m._out)
        self.assertEqual(serve(body, setup), 0)

    def test_early_answer_stops_a_streamed_body(self):
        def setup(m):
            m.set_max_body_size(100000)
            m.post("/echo", lambda conn, msg: msg.body)

        async def body(m, port):
            sent = [0]

            async def gen():
                for i in range(200):
                    sent[0] += 1
                    yield b"x" * 65536
            r = await m.fetch("http://127.0.0.1:%d/echo" % port, method="POST", body=gen())
            return r.status, await r.read(), sent[0] < 200, len(m._out)
        self.assertEqual(serve(body, setup), (413, b"Content Too Large\n", True, 0))

    def test_refused_header_and_url(self):
        async def body(m, port):
            with self.assertRaises(nanosrv.InvalidArgument) as cm:
                await m.fetch("http://127.0.0.1:%d/" % port, headers={"Host": "x"})
            self.assertEqual(cm.exception.code, lib.NSV_EINVAL)
            with self.assertRaises(ValueError):
                await m.fetch("http://127.0.0.1:%d/" % port, headers={"X-A": "a\r\nB: c"})
            with self.assertRaises(nanosrv.Error) as cm:
                await m.fetch("ftp://127.0.0.1/")
            self.assertEqual(cm.exception.code, lib.NSV_EURL)
            return True
        self.assertTrue(serve(body))

    def test_fetch_needs_the_asyncio_host(self):
        m = nanosrv.Manager()
        try:
            with self.assertRaises(RuntimeError):
                m.fetch("http://127.0.0.1:1/")
        finally:
            m.close()

    def test_cancelling_the_task_cancels_the_request(self):
        held = []

        def setup(m):
            m.get("/hang", lambda conn, msg: held.append(msg))

        async def body(m, port):
            t = asyncio.ensure_future(m.fetch("http://127.0.0.1:%d/hang" % port))
            for _ in range(200):
                if held:
                    break
                await asyncio.sleep(0.01)
            t.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await t
            for _ in range(200):  # the library closes the request's connection
                if held[0].disconnected:
                    break
                await asyncio.sleep(0.01)
            return held[0].disconnected, len(m._out)
        self.assertEqual(serve(body, setup), (True, 0))

    def test_cancel_while_streaming_the_body(self):
        conns = []

        def setup(m):
            @m.get("/stream")
            def stream(conn, msg):
                conn.reply_start(200, "Content-Type: text/plain\r\n")
                conn.send_chunk(b"first")
                conns.append(msg)

        async def body(m, port):
            r = await m.fetch("http://127.0.0.1:%d/stream" % port)
            first = await r.__anext__()

            async def rest():
                return [c async for c in r]
            t = asyncio.ensure_future(rest())
            await asyncio.sleep(0)
            t.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await t
            for _ in range(200):
                if conns[0].disconnected:
                    break
                await asyncio.sleep(0.01)
            return first, r.done, conns[0].disconnected, len(m._out)
        self.assertEqual(serve(body, setup), (b"first", True, True, 0))

    def test_async_with_releases_an_unread_response(self):
        conns = []

        def setup(m):
            @m.get("/stream")
            def stream(conn, msg):
                conn.reply_start(200, "")
                conn.send_chunk(b"x" * 1000)
                conns.append(msg)

        async def body(m, port):
            async with m.fetch("http://127.0.0.1:%d/stream" % port) as r:
                status = r.status
            for _ in range(200):
                if conns[0].disconnected:
                    break
                await asyncio.sleep(0.01)
            return status, r.done, conns[0].disconnected
        self.assertEqual(serve(body, setup), (200, True, True))

    def test_sharded_manager(self):
        def setup(m):
            m.get("/n/:i", lambda conn, msg: {"i": msg.params["i"]})

        async def body(m, port):
            rs = await asyncio.gather(*[m.fetch("http://127.0.0.1:%d/n/%d" % (port, i)) for i in range(20)])
            return sorted([(await r.json())["i"] for r in rs], key=int)
        out = serve(body, setup, nanosrv.ShardedManager(2))
        self.assertEqual(out, [str(i) for i in range(20)])


    def test_fetch_default_uses_the_loops_own_manager(self):
        def setup(m):
            m.get("/d", lambda conn, msg: "default")

        async def body(m, port):
            r = await nanosrv.client.fetch_default("http://127.0.0.1:%d/d" % port)
            from nanosrv.aionet import manager_for
            return await r.read(), manager_for() is not m
        self.assertEqual(serve(body, setup), (b"default", True))

    def test_dropped_response_is_cancelled(self):
        held = []

        def setup(m):
            @m.get("/stream")
            def stream(conn, msg):
                conn.reply_start(200, "")
                conn.send_chunk(b"x" * 100)
                held.append(msg)

        async def body(m, port):
            r = await m.fetch("http://127.0.0.1:%d/stream" % port)
            del r  # unread and unreferenced: its request is cancelled
            for _ in range(200):
                if held and held[0].disconnected:
                    break
                await asyncio.sleep(0.01)
            return held[0].disconnected, len(m._out)
        self.assertEqual(serve(body, setup), (True, 0))

    def test_draining_server_refuses_new_requests(self):
        async def body(m, port):
            m.drain_start(1000)
            with self.assertRaises(nanosrv.ClientStopped) as cm:
                await m.fetch("http://127.0.0.1:%d/" % port)
            return cm.exception.code
        self.assertEqual(serve(body), lib.NSV_ESTOPPED)


@unittest.skipUnless(nanosrv.tls_available(), "libnanosrv built without TLS")
class Https(unittest.TestCase):
    def test_https_verified_and_refused(self):
        c = certs()
        m = nanosrv.Manager()
        m.set_tls(cert=c["srv.crt"], key=c["srv.key"], client_ca=c["ca.crt"])
        m.get("/s", lambda conn, msg: {"sni": msg.tls.sni})
        port = m.http_listen("https://127.0.0.1:0").port

        async def body(m2, _):
            r = await m2.fetch("https://localhost:%d/s" % port)
            return r.tls, await r.json()
        self.assertEqual(serve(body, manager=m), (True, {"sni": "localhost"}))

        m = nanosrv.Manager()
        m.set_tls(cert=c["srv.crt"], key=c["srv.key"], client_ca=c["other.crt"])  # not the server's CA
        port = m.http_listen("https://127.0.0.1:0").port

        async def refused(m2, _):
            with self.assertRaises(nanosrv.ClientTlsError) as cm:
                await m2.fetch("https://localhost:%d/s" % port)
            return cm.exception.code, isinstance(cm.exception, nanosrv.TlsError)
        self.assertEqual(serve(refused, manager=m), (lib.NSV_ETLS, True))


class CallbackForm(unittest.TestCase):
    """http_request(url, callback) from plain handlers, no asyncio."""

    def test_plain_handler_answers_from_the_callback(self):
        for manager in (nanosrv.Manager(), nanosrv.ShardedManager(2)):
            m = manager
            m.get("/up", lambda conn, msg: {"up": True, "q": msg.query})

            @m.get("/gw")
            def gw(conn, msg, m=m):
                def done(resp, err):
                    if err is not None:
                        conn.http_reply(502, "", str(err))
                    else:
                        conn.http_reply(resp.status, {"Content-Type": resp.headers["content-type"]},
                                        resp.content)
                m.http_request("http://127.0.0.1:%d/up?x=1" % port, done)

            @m.get("/gw-refused")
            def gw_refused(conn, msg, m=m):
                m.http_request("http://127.0.0.1:1/", lambda resp, err: conn.http_reply(
                    502, "", "%s %d" % (type(err).__name__, err.code)))
            port = m.http_listen("http://127.0.0.1:0").port
            with _tap.ServerThread(m):
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                c.request("GET", "/gw")
                r = c.getresponse()
                self.assertEqual((r.status, json.loads(r.read())), (200, {"up": True, "q": "x=1"}))
                c.request("GET", "/gw-refused")
                r = c.getresponse()
                self.assertEqual((r.status, r.read()), (502, b"ConnectionRefused %d" % lib.NSV_ECONNREFUSED))
                c.close()

    def test_from_other_threads(self):
        import queue
        # A single-loop Manager refuses a start from a thread that does not poll it ...
        m = nanosrv.Manager()
        m.get("/up", lambda conn, msg: "up")
        port = m.http_listen("http://127.0.0.1:0").port
        with _tap.ServerThread(m):
            for _ in range(100):
                if m._tid is not None:
                    break
                m.wakeup()
                threading.Event().wait(0.01)
            with self.assertRaises(nanosrv.StateError):
                m.http_request("http://127.0.0.1:%d/up" % port, lambda r, e: None)
        # ... a sharded one takes starts from any thread; callbacks run on the polling thread.
        m = nanosrv.ShardedManager(2)
        m.get("/up/:i", lambda conn, msg: msg.params["i"])
        port = m.http_listen("http://127.0.0.1:0").port
        got = queue.Queue()
        st = _tap.ServerThread(m)
        with st:
            def start(k):
                for i in range(10):
                    m.http_request("http://127.0.0.1:%d/up/%d" % (port, k * 10 + i), lambda r, e: got.put(
                        (r.content.decode(), threading.current_thread() is st.t) if e is None else repr(e)))
            ts = [threading.Thread(target=start, args=(k,)) for k in range(4)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(10)
            out = sorted(got.get(timeout=10) for _ in range(40))
        self.assertEqual(out, sorted((str(i), True) for i in range(40)))

    def test_wsgi_app_fetch_blocking(self):
        from nanosrv.wsgi import Server
        up = nanosrv.Manager()
        up.get("/up", lambda conn, msg: {"from": "upstream"})
        up_port = up.http_listen("http://127.0.0.1:0").port

        def app(environ, start_response):
            m = environ["nanosrv.manager"]
            try:
                r = m.fetch_blocking("http://127.0.0.1:%d%s" % (up_port, environ["PATH_INFO"]), timeout=5)
                status, body = "%d %s" % (r.status, r.reason), r.content
            except nanosrv.ClientError as e:
                status, body = "502 Bad Gateway", e.name.encode()
            start_response(status, [("Content-Type", "application/json")])
            return [body]
        m = nanosrv.Manager()
        srv = Server(app, threads=2)
        port = srv.listen(m, "http://127.0.0.1:0").port
        t = threading.Thread(target=srv.run, args=(m,), daemon=True)
        with _tap.ServerThread(up):
            t.start()
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                c.request("GET", "/up")
                r = c.getresponse()
                self.assertEqual((r.status, json.loads(r.read())), (200, {"from": "upstream"}))
                c.request("GET", "/nothing")
                r = c.getresponse()
                self.assertEqual(r.status, 404)
                r.read()
                c.close()
            finally:
                m.stop()
                t.join(10)
                srv.close()
                m.close()
        # On the polling thread it would wait for itself.
        m = nanosrv.Manager()
        m.get("/x", lambda conn, msg: repr(type(_catch(lambda: m.fetch_blocking("http://127.0.0.1:1/")))))
        port = m.http_listen("http://127.0.0.1:0").port
        with _tap.ServerThread(m):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("GET", "/x")
            self.assertIn(b"StateError", c.getresponse().read())
            c.close()

    def test_cancel_and_timeout(self):
        m = nanosrv.Manager()
        held, got = [], []
        m.get("/hang", lambda conn, msg: held.append(conn))
        port = m.http_listen("http://127.0.0.1:0").port
        url = "http://127.0.0.1:%d/hang" % port
        req = m.http_request(url, lambda resp, err: got.append(("cancelled", err)))
        m.http_request(url, lambda resp, err: got.append((type(err).__name__, err.code)), timeout=0.2)
        for _ in range(500):
            m.poll(20)
            if len(held) == 2 and not req.done:
                self.assertTrue(req.cancel())
                self.assertFalse(req.cancel())
            if got:
                break
        for _ in range(100):
            m.poll(10)
        m.close()
        self.assertEqual(got, [("Timeout", lib.NSV_ETIMEDOUT)])
        self.assertTrue(req.done)


class Upstream(unittest.TestCase):
    """Against python3 http.server in a subprocess."""

    @classmethod
    def setUpClass(cls):
        cls.up = Proc([sys.executable, os.path.join(APPS, "http_upstream.py")])
        cls.url = "http://127.0.0.1:%d" % cls.up.port

    @classmethod
    def tearDownClass(cls):
        cls.up.stop()

    def test_json_and_repeated_headers(self):
        async def body(m, port):
            r = await m.fetch(self.url + "/json?a=1", headers=[("Accept", "application/json")])
            return r.status, r.headers.getall("x-multi"), await r.json()
        st, multi, doc = serve(body)
        self.assertEqual((st, multi), (200, ["one", "two"]))
        self.assertEqual(doc, {"ok": True, "path": "/json?a=1", "accept": "application/json"})

    def test_post_echo_and_404(self):
        async def body(m, port):
            r = await m.fetch(self.url + "/echo", method="POST", body="héllo",
                              headers={"Content-Type": "text/plain; charset=utf-8"})
            r2 = await m.fetch(self.url + "/nothing")
            return await r.text(), r2.status, await r2.json()
        self.assertEqual(serve(body), ("héllo", 404, {"error": "not found"}))

    def test_asgi_app_fetches_on_its_loop(self):
        from test_asgi_http import AppServer
        url = self.url

        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            r = await nanosrv.client.fetch_default(url + "/json?p=" + scope["path"])
            body = await r.read()
            await send({"type": "http.response.start", "status": r.status,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
        with AppServer(app, lifespan="off") as a:
            st, _, body = a.get("/x")
        self.assertEqual((st, json.loads(body)["path"]), (200, "/json?p=/x"))

    def test_streaming_with_backpressure(self):
        n = 16 << 20
        limit = 64 << 10

        async def body(m, port):
            r = await m.fetch(self.url + "/big?n=%d" % n, buffer_limit=limit)
            for _ in range(500):  # consume nothing until reading has paused
                if r.pauses:
                    break
                await asyncio.sleep(0.01)
            paused_at = r.max_buffered
            # While paused the upstream cannot finish: it has written less than all.
            p = await m.fetch(self.url + "/progress")
            written = (await p.json())["written"]
            h = hashlib.sha256()
            total = 0
            async for chunk in r:
                h.update(chunk)
                total += len(chunk)
                if total < (2 << 20):
                    await asyncio.sleep(0.002)  # a slow consumer for the first 2 MiB
            return r.pauses, paused_at, r.max_buffered, written, total, h.hexdigest()
        pauses, paused_at, max_buf, written, total, digest = serve(body)
        self.assertGreaterEqual(pauses, 1)
        self.assertGreaterEqual(paused_at, limit)
        # A paused request holds at most one more read (256 KiB) per batch.
        self.assertLess(max_buf, limit + (1 << 20))
        self.assertLess(written, n)
        self.assertEqual((total, digest), (n, hashlib.sha256(pattern(n)).hexdigest()))

    def test_timeout_argument(self):
        async def body(m, port):
            with self.assertRaises(nanosrv.Timeout) as cm:
                await m.fetch(self.url + "/hang", timeout=0.2)
            with self.assertRaises(asyncio.TimeoutError):  # also a TimeoutError
                await m.fetch(self.url + "/hang", timeout=0.1)
            return cm.exception.code, len(m._out)
        self.assertEqual(serve(body), (lib.NSV_ETIMEDOUT, 0))

    def test_library_head_timeout(self):
        async def body(m, port):
            m.set_option("http_head_timeout_ms", 150)
            with self.assertRaises(nanosrv.Timeout) as cm:
                await m.fetch(self.url + "/hang")
            return cm.exception.code
        self.assertEqual(serve(body), lib.NSV_ETIMEDOUT)

    def test_closed_before_the_body_ended(self):
        async def body(m, port):
            r = await m.fetch(self.url + "/short")
            with self.assertRaises(nanosrv.ConnectionClosed) as cm:
                await r.read()
            return r.status, cm.exception.code
        self.assertEqual(serve(body), (200, lib.NSV_ECLOSED))


class Errors(unittest.TestCase):
    def test_connection_refused(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # nothing listens there now

        async def body(m, _):
            with self.assertRaises(nanosrv.ConnectionRefused) as cm:
                await m.fetch("http://127.0.0.1:%d/" % port)
            e = cm.exception
            return e.code, isinstance(e, ConnectionRefusedError), isinstance(e, nanosrv.ClientError), e.url
        code, builtin, base, url = serve(body)
        self.assertEqual((code, builtin, base), (lib.NSV_ECONNREFUSED, True, True))
        self.assertEqual(url, "http://127.0.0.1:%d/" % port)

    def test_host_not_found(self):
        async def body(m, _):
            try:
                await m.fetch("http://no-such-host.invalid/", timeout=5)  # RFC 6761: never resolves
            except nanosrv.Timeout:
                return "resolver did not answer in 5 s"
            except nanosrv.HostNotFound as e:
                return e.code
        got = serve(body)
        if isinstance(got, str):
            self.skipTest(got)
        self.assertEqual(got, lib.NSV_ENOTFOUND)

    def test_bad_responses(self):
        cases = [b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
                 b"this is not HTTP\r\n\r\n",
                 b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"]
        for reply in cases:
            srv = RawServer(reply)
            try:
                async def body(m, _):
                    with self.assertRaises(nanosrv.BadResponse) as cm:
                        r = await m.fetch("http://127.0.0.1:%d/" % srv.port)
                        await r.read()
                    return cm.exception.code
                self.assertEqual(serve(body), lib.NSV_EPARSE, reply)
            finally:
                srv.close()

    def test_response_too_large(self):
        srv = RawServer(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 200000 + b"\r\n\r\n")
        try:
            async def body(m, _):
                with self.assertRaises(nanosrv.ResponseTooLarge) as cm:
                    await m.fetch("http://127.0.0.1:%d/" % srv.port)
                return cm.exception.code
            self.assertEqual(serve(body), lib.NSV_ETOOBIG)
        finally:
            srv.close()

    def test_close_fails_requests_in_flight(self):
        srv = RawServer(b"", keep=True)
        got = []
        try:
            m = nanosrv.Manager()
            m.http_request("http://127.0.0.1:%d/" % srv.port, lambda resp, err: got.append(type(err).__name__))
            for _ in range(5):
                m.poll(10)
            m.close()
        finally:
            srv.close()
        self.assertEqual(got, ["ClientStopped"])


if __name__ == "__main__":
    _tap.main()
