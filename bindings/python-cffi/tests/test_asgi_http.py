"""nanosrv.asgi, http scope: the scope, request bodies, responses (one
reply and streamed), the error paths (raise before and during a response,
return without one, never respond), HEAD, Content-Length disagreements,
Expect: 100-continue, http.disconnect, limit_max_requests and the access
log. Real clients (http.client, raw sockets) on loopback; every wait is
bounded.

AppServer, raw() and LogCapture are shared with the other test_asgi files."""
import asyncio
import http.client
import logging
import socket
import threading
import time
import unittest

import _tap

import nanosrv
import nanosrv.asgi


class AppServer:
    """Serve an ASGI app with nanosrv.asgi.serve in a thread for a with-block."""

    def __init__(self, app, tls=None, manager=None, **options):
        self.app = app
        self.m = manager or nanosrv.Manager()
        self.port = None
        self.error = None
        self.options = options
        self.tls = tls
        self.ready = threading.Event()
        self.t = threading.Thread(target=self._main, daemon=True)

    def _main(self):
        def ready(lst):
            self.port = lst.port
            self.ready.set()
        try:
            asyncio.run(nanosrv.asgi.serve(self.app, "127.0.0.1", 0, ready=ready, manager=self.m, tls=self.tls,
                                           **self.options))
        except BaseException as e:  # noqa: B902 (reported by __enter__ / stop)
            self.error = e
        finally:
            self.ready.set()

    def __enter__(self):
        self.t.start()
        if not self.ready.wait(20) or self.error is not None:
            raise RuntimeError("server did not start: %r" % (self.error,))
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        self.m.stop()
        self.t.join(20)
        if self.t.is_alive():
            raise AssertionError("server thread did not end")
        self.m.close()

    def get(self, path, method="GET", body=None, headers=None, timeout=10):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
        finally:
            c.close()


def raw(port, data, timeout=10, until_close=True, shut=False):
    """Send bytes, read until the server closes (or timeout): the bytes."""
    s = socket.create_connection(("127.0.0.1", port), timeout)
    s.sendall(data)
    if shut:
        s.shutdown(socket.SHUT_WR)
    out = b""
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            b = s.recv(65536)
            if not b:
                break
            out += b
            if not until_close and b"\r\n\r\n" in out:
                break
    except socket.timeout:
        pass
    finally:
        s.close()
    return out


class LogCapture(logging.Handler):
    """Records of the given loggers for a with-block."""

    def __init__(self, *names):
        super().__init__(logging.DEBUG)
        self.names = names or ("nanosrv.asgi",)
        self.records = []

    def emit(self, record):
        self.records.append(record)

    def __enter__(self):
        for n in self.names:
            lg = logging.getLogger(n)
            lg.addHandler(self)
            lg.setLevel(logging.DEBUG)
            lg.propagate = False
        return self

    def __exit__(self, *exc):
        for n in self.names:
            logging.getLogger(n).removeHandler(self)

    def text(self, level=logging.ERROR):
        return "\n".join(r.getMessage() for r in self.records if r.levelno >= level)


def wait_for(cond, what, seconds=20):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError("timed out waiting for " + what)


async def read_body(receive):
    body = []
    while True:
        m = await receive()
        assert m["type"] == "http.request", m
        body.append(m["body"])
        if not m.get("more_body"):
            return b"".join(body)


async def respond(send, status=200, body=b"", headers=None):
    await send({"type": "http.response.start", "status": status,
                "headers": headers if headers is not None else [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})


class Scope(unittest.TestCase):
    def test_http_scope(self):
        seen = []

        async def app(scope, receive, send):
            if scope["type"] == "lifespan":
                return  # an app without lifespan support; "auto" goes on
            body = await read_body(receive)
            seen.append((scope, body))
            await respond(send, body=b"ok")

        with AppServer(app, root_path="/api") as s:
            st, _, body = s.get("/caf%C3%A9/a%2Fb?x=1&y=%20", "POST", b"hello",
                                {"X-First": "1", "x-second": "Two", "X-First-Again": "3"})
            self.assertEqual((st, body), (200, b"ok"))
            out = raw(s.port, b"GET /ten HTTP/1.0\r\nHost: x\r\n\r\n")
            self.assertTrue(out.startswith(b"HTTP/1.0 200") or out.startswith(b"HTTP/1.1 200"), out[:40])
            port = s.port
        scope, body = seen[0]
        self.assertEqual(body, b"hello")
        self.assertEqual(scope["type"], "http")
        self.assertEqual(scope["asgi"], {"version": "3.0", "spec_version": "2.3"})
        self.assertEqual(scope["http_version"], "1.1")
        self.assertEqual(scope["method"], "POST")
        self.assertEqual(scope["scheme"], "http")
        self.assertEqual(scope["path"], "/café/a/b")
        self.assertEqual(scope["raw_path"], b"/caf%C3%A9/a%2Fb")
        self.assertEqual(scope["query_string"], b"x=1&y=%20")
        self.assertEqual(scope["root_path"], "/api")
        self.assertEqual(scope["server"], ("127.0.0.1", port))
        self.assertEqual(scope["client"][0], "127.0.0.1")
        self.assertIsInstance(scope["client"][1], int)
        names = [n for n, _ in scope["headers"]]
        self.assertTrue(all(isinstance(n, bytes) and n == n.lower() for n in names), names)
        hdrs = scope["headers"]
        i1, i2, i3 = (names.index(b"x-first"), names.index(b"x-second"), names.index(b"x-first-again"))
        self.assertLess(i1, i2)
        self.assertLess(i2, i3)
        self.assertEqual(hdrs[i2], (b"x-second", b"Two"))
        self.assertIn((b"content-length", b"5"), hdrs)
        self.assertNotIn("state", scope)  # no lifespan, no state
        self.assertEqual(seen[1][0]["http_version"], "1.0")

    def test_lifespan_state_is_copied_per_request(self):
        seen = []

        async def app(scope, receive, send):
            if scope["type"] == "lifespan":
                while True:
                    m = await receive()
                    if m["type"] == "lifespan.startup":
                        scope["state"]["db"] = "conn"
                        await send({"type": "lifespan.startup.complete"})
                    else:
                        await send({"type": "lifespan.shutdown.complete"})
                        return
            scope["state"]["mine"] = len(seen)
            seen.append(dict(scope["state"]))
            await respond(send, body=b"ok")

        with AppServer(app) as s:
            s.get("/")
            s.get("/")
        self.assertEqual(seen, [{"db": "conn", "mine": 0}, {"db": "conn", "mine": 1}])


class Bodies(unittest.TestCase):
    def test_chunked_and_large_uploads_and_keepalive(self):
        sizes = []

        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            n = 0
            msgs = 0
            while True:
                m = await receive()
                msgs += 1
                n += len(m["body"])
                if not m["more_body"]:
                    break
            sizes.append(n)
            await respond(send, body=str(n).encode())

        with AppServer(app) as s:
            out = raw(s.port, b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                      b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
            self.assertTrue(out.startswith(b"HTTP/1.1 200"), out[:60])
            self.assertTrue(out.endswith(b"\r\n\r\n11"), out[-20:])
            big = b"x" * (3 << 20)
            st, _, body = s.get("/big", "POST", big)
            self.assertEqual((st, body), (200, str(len(big)).encode()))
            c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
            for i in range(5):
                c.request("POST", "/k", body=b"a" * i)
                r = c.getresponse()
                self.assertEqual(r.read(), str(i).encode())
            c.close()


class Responses(unittest.TestCase):
    def test_single_body_and_streamed(self):
        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            if scope["path"] == "/one":
                await respond(send, 201, b"created", [(b"x-a", b"1"), (b"set-cookie", b"a=1"),
                                                      (b"set-cookie", b"b=2")])
            elif scope["path"] == "/stream":
                await send({"type": "http.response.start", "status": 200, "headers": []})
                for i in range(5):
                    await send({"type": "http.response.body", "body": b"part%d;" % i, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            elif scope["path"] == "/trailers":
                await send({"type": "http.response.start", "status": 200, "headers": [], "trailers": True})
                await send({"type": "http.response.body", "body": b"abc", "more_body": True})
                await send({"type": "http.response.body", "body": b"def"})
                await send({"type": "http.response.trailers", "headers": [(b"x-t", b"1")]})

        with AppServer(app) as s:
            c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
            c.request("GET", "/one")
            r = c.getresponse()
            self.assertEqual((r.status, r.read()), (201, b"created"))
            self.assertEqual(r.getheader("x-a"), "1")
            self.assertEqual(r.getheader("content-length"), "7")
            self.assertEqual(r.msg.get_all("set-cookie"), ["a=1", "b=2"])
            c.request("GET", "/stream")
            r = c.getresponse()
            self.assertEqual(r.getheader("transfer-encoding"), "chunked")
            self.assertEqual(r.read(), b"part0;part1;part2;part3;part4;")
            c.request("GET", "/trailers")
            r = c.getresponse()
            self.assertEqual(r.read(), b"abcdef")
            c.close()

    def test_pathsend(self):
        import os
        import tempfile
        fd, path = tempfile.mkstemp(suffix=".txt")
        os.write(fd, b"file contents\n" * 1000)
        os.close(fd)
        errors = []

        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            await send({"type": "http.response.start", "status": 200, "headers": [(b"x-from", b"pathsend")]})
            try:
                await send({"type": "http.response.pathsend", "path": path if scope["path"] == "/f" else path + ".no"})
            except FileNotFoundError as e:
                errors.append(str(e))
                raise

        try:
            with LogCapture(), AppServer(app) as s:
                st, h, body = s.get("/f")
                self.assertEqual((st, body), (200, b"file contents\n" * 1000))
                self.assertEqual(h["x-from"], "pathsend")
                self.assertEqual(h["content-length"], str(14 * 1000))
                self.assertEqual(s.get("/missing")[0], 500)
        finally:
            os.unlink(path)
        self.assertEqual(len(errors), 1)
        self.assertIn("no such file", errors[0])

    def test_head_sends_no_body(self):
        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            body = b"0123456789"
            if scope["path"] == "/stream":
                await send({"type": "http.response.start", "status": 200, "headers": []})
                await send({"type": "http.response.body", "body": body, "more_body": True})
                await send({"type": "http.response.body", "body": b""})
            else:
                await respond(send, 200, body, [(b"content-length", b"10")])

        with AppServer(app) as s:
            for path in ("/", "/stream"):
                out = raw(s.port, b"HEAD %s HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n"
                                  b"Connection: close\r\n\r\n" % path.encode())
                head, _, rest = out.partition(b"\r\n\r\n")
                self.assertTrue(head.startswith(b"HTTP/1.1 200"), out[:80])
                # The HEAD answer has no body: the next bytes are the GET's status line.
                self.assertTrue(rest.startswith(b"HTTP/1.1 200"), rest[:40])
                self.assertTrue(rest.endswith(b"0123456789"), rest[-20:])

    def test_bad_headers_and_status_raise_in_send_and_give_500(self):
        errors = []

        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            bad = {"/split": [(b"x-a", b"1\r\nSet-Cookie: evil=1")], "/name": [(b"x a", b"1")],
                   "/colon": [(b"x-a: b", b"1")], "/type": [("x-a", "1")], "/ctl": [(b"x-a", b"\x01")]}
            try:
                if scope["path"] == "/status":
                    await send({"type": "http.response.start", "status": 42, "headers": []})
                else:
                    await respond(send, 200, b"ok", bad[scope["path"]])
            except (ValueError, TypeError) as e:
                errors.append(type(e).__name__)
                raise

        with LogCapture() as logs, AppServer(app) as s:
            for p in ("/split", "/name", "/colon", "/type", "/ctl", "/status"):
                st, h, body = s.get(p)
                self.assertEqual(st, 500, p)
                self.assertNotIn("set-cookie", h)
        self.assertEqual(errors, ["ValueError", "InvalidArgument", "ValueError", "TypeError", "InvalidArgument",
                                  "ValueError"])
        self.assertIn("Exception in ASGI application", logs.text())

    def test_send_after_complete_raises(self):
        got = []

        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            await respond(send, body=b"done")
            for msg in ({"type": "http.response.body", "body": b"more"},
                        {"type": "http.response.start", "status": 200}):
                try:
                    await send(msg)
                except RuntimeError as e:
                    got.append(str(e))
            m = await receive()
            got.append(m["type"])

        with AppServer(app) as s:
            self.assertEqual(s.get("/")[2], b"done")
            wait_for(lambda: len(got) == 3, "the app's checks")
        self.assertIn("after the response completed", got[0])
        self.assertIn("twice", got[1])
        self.assertEqual(got[2], "http.disconnect")


class Failures(unittest.TestCase):
    def test_error_paths(self):
        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            p = scope["path"]
            if p == "/raise":
                raise RuntimeError("boom before")
            if p == "/none":
                return
            if p == "/start-only":
                await send({"type": "http.response.start", "status": 200, "headers": []})
                return
            if p == "/mid":
                await send({"type": "http.response.start", "status": 200, "headers": []})
                await send({"type": "http.response.body", "body": b"partial", "more_body": True})
                await asyncio.sleep(0.05)
                raise RuntimeError("boom mid-stream")
            if p == "/unfinished":
                await send({"type": "http.response.start", "status": 200, "headers": []})
                await send({"type": "http.response.body", "body": b"partial", "more_body": True})
                return
            await respond(send, body=b"fine")

        with LogCapture() as logs, AppServer(app) as s:
            for p in ("/raise", "/none", "/start-only"):
                st, _, body = s.get(p)
                self.assertEqual((p, st, body), (p, 500, b"Internal Server Error"))
            for p in ("/mid", "/unfinished"):
                c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
                c.request("GET", p)
                r = c.getresponse()
                self.assertEqual(r.status, 200)
                with self.assertRaises(http.client.IncompleteRead) as cm:
                    r.read()
                self.assertEqual(cm.exception.partial, b"partial")
                c.close()
            self.assertEqual(s.get("/ok")[2], b"fine")  # the server keeps going
        text = logs.text()
        self.assertIn("boom before", "\n".join(str(r.exc_info[1]) for r in logs.records if r.exc_info))
        self.assertIn("returned without starting a response", text)
        self.assertIn("returned without completing its response", text)
        self.assertIn("the app raised during its response", text)
        self.assertIn("the response was not completed", text)

    def test_response_timeout(self):
        cancelled = []

        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            if scope["path"] == "/slow-but-started":
                await send({"type": "http.response.start", "status": 200, "headers": []})
                await asyncio.sleep(0.5)
                await send({"type": "http.response.body", "body": b"late but fine"})
                return
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.append(scope["path"])
                raise

        with LogCapture() as logs, AppServer(app, response_timeout=0.2) as s:
            t = time.monotonic()
            st, _, _ = s.get("/never")
            self.assertEqual(st, 500)
            self.assertLess(time.monotonic() - t, 10)
            self.assertEqual(s.get("/slow-but-started")[2], b"late but fine")
            wait_for(lambda: cancelled == ["/never"], "the task to be cancelled")
        self.assertIn("no response within 0.2s", logs.text())

    def test_content_length_disagreements(self):
        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            if scope["path"] == "/one":
                await respond(send, 200, b"short", [(b"content-length", b"10")])
            elif scope["path"] == "/stream-short":
                await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"10")]})
                await send({"type": "http.response.body", "body": b"12345", "more_body": True})
                await send({"type": "http.response.body", "body": b""})
            elif scope["path"] == "/stream-long":
                await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"4")]})
                await send({"type": "http.response.body", "body": b"12", "more_body": True})
                await send({"type": "http.response.body", "body": b"345", "more_body": True})
                await send({"type": "http.response.body", "body": b""})

        with LogCapture(), AppServer(app) as s:
            self.assertEqual(s.get("/one")[0], 500)
            out = raw(s.port, b"GET /stream-short HTTP/1.1\r\nHost: x\r\n\r\nGET /one HTTP/1.1\r\nHost: x\r\n\r\n")
            head, _, rest = out.partition(b"\r\n\r\n")
            self.assertIn(b"content-length: 10", head)
            self.assertEqual(rest, b"12345")  # closed short: the second request is not answered
            out = raw(s.port, b"GET /stream-long HTTP/1.1\r\nHost: x\r\n\r\n")
            head, _, rest = out.partition(b"\r\n\r\n")
            self.assertIn(b"content-length: 4", head)
            self.assertEqual(rest, b"12")  # never more than declared, then closed


class ExpectContinue(unittest.TestCase):
    def test_100_continue_only_when_the_app_reads(self):
        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            if scope["path"] == "/reject":
                await respond(send, 413, b"too large")
                return
            if scope["path"] == "/reject-later":
                await asyncio.sleep(0.3)  # many polls go by; the app never reads
                await respond(send, 413, b"too large")
                return
            body = await read_body(receive)
            await respond(send, 200, b"got %d" % len(body))

        with AppServer(app) as s:
            head = (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n"
                    b"Connection: close\r\n\r\n")
            out = raw(s.port, head % b"/reject")
            self.assertTrue(out.startswith(b"HTTP/1.1 413"), out[:60])
            self.assertNotIn(b"100 Continue", out)
            sock = socket.create_connection(("127.0.0.1", s.port), 10)
            sock.sendall(head % b"/read")
            got = b""
            while b"\r\n\r\n" not in got:
                b = sock.recv(4096)
                self.assertTrue(b, "closed before 100 Continue")
                got += b
            self.assertTrue(got.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), got)
            sock.sendall(b"hello")
            while not got.endswith(b"got 5"):
                b = sock.recv(4096)
                if not b:
                    break
                got += b
            sock.close()
            self.assertIn(b"HTTP/1.1 200", got)
            self.assertTrue(got.endswith(b"got 5"), got[-40:])
            # An app that refuses only after awaiting something else: the
            # 100 Continue waits for its first receive(), which never comes
            # (NSV_OPT_EXPECT_MANUAL), so the client gets the 413 alone; the
            # answer closes the connection, so a body sent anyway never
            # passes for a request.
            big = (b"POST /reject-later HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n"
                   b"Expect: 100-continue\r\n\r\n")
            sock = socket.create_connection(("127.0.0.1", s.port), 10)
            sock.sendall(big)
            got = b""
            while b"\r\n\r\n" not in got:
                b = sock.recv(4096)
                self.assertTrue(b, "closed before an answer")
                got += b
            if got.startswith(b"HTTP/1.1 100 Continue"):
                inside = b"GET /inside HTTP/1.1\r\nHost: x\r\n\r\n"  # body bytes that look like a request
                try:
                    sock.sendall(inside + b"x" * (200000 - len(inside)))
                except OSError:
                    pass
            end = time.monotonic() + 10
            while time.monotonic() < end:
                if got.endswith(b"too large"):
                    sock.settimeout(0.3)  # then only what else might come: nothing
                try:
                    b = sock.recv(65536)
                except OSError:
                    break
                if not b:
                    break
                got += b
            sock.close()
            self.assertTrue(got.startswith(b"HTTP/1.1 413"), got[:60])  # no 100 Continue first
            self.assertNotIn(b"HTTP/1.1 2", got)  # the body was never taken for a request


class Disconnect(unittest.TestCase):
    def test_disconnect_reaches_a_waiting_app(self):
        events = []

        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            await read_body(receive)
            m = await asyncio.wait_for(receive(), 20)  # long poll: wait for the client to leave
            events.append(m["type"])
            try:
                await respond(send, body=b"too late")
                events.append("send-ok")
            except OSError as e:
                events.append(type(e).__name__)

        with LogCapture(), AppServer(app) as s:
            sock = socket.create_connection(("127.0.0.1", s.port), 10)
            sock.sendall(b"GET /poll HTTP/1.1\r\nHost: x\r\n\r\n")
            time.sleep(0.2)
            sock.close()
            wait_for(lambda: len(events) == 2, "http.disconnect")
        self.assertEqual(events, ["http.disconnect", "send-ok"])  # a late send is dropped, as uvicorn does

    def test_client_leaving_mid_upload(self):
        events = []

        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            while True:
                m = await receive()
                events.append(m["type"])
                if m["type"] == "http.disconnect" or not m.get("more_body"):
                    break

        with LogCapture(), AppServer(app) as s:
            sock = socket.create_connection(("127.0.0.1", s.port), 10)
            sock.sendall(b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n" + b"x" * 1000)
            wait_for(lambda: events, "the first body piece")
            sock.close()
            wait_for(lambda: events[-1] == "http.disconnect", "http.disconnect")
        self.assertEqual(events[0], "http.request")


    def test_app_that_stops_when_the_client_leaves_logs_no_error(self):
        ended = []

        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            await read_body(receive)
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"4")]})
            await send({"type": "http.response.body", "body": b"full", "more_body": True})
            m = await receive()  # as Starlette's BaseHTTPMiddleware: it stops at http.disconnect
            ended.append(m["type"])

        with LogCapture() as logs, AppServer(app) as s:
            c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
            c.request("GET", "/")
            self.assertEqual(c.getresponse().read(), b"full")
            c.close()
            wait_for(lambda: ended, "the app to end")
            wait_for(lambda: not s.m._conns, "the connection to close")
        self.assertEqual(ended, ["http.disconnect"])
        self.assertEqual(logs.text(logging.WARNING), "")


class Limits(unittest.TestCase):
    def test_limit_max_requests_drains_and_access_log(self):
        async def app(scope, receive, send):
            if scope["type"] == "http":
                await respond(send, body=b"n")

        with LogCapture("nanosrv.access", "nanosrv.asgi") as logs:
            s = AppServer(app, limit_max_requests=3, access_log=True)
            with s:
                for i in range(3):
                    self.assertEqual(s.get("/r%d?q=%d" % (i, i))[2], b"n")
                s.t.join(20)
                self.assertFalse(s.t.is_alive(), "serve() did not end after the drain")
        access = [r.getMessage() for r in logs.records if r.name == "nanosrv.access"]
        self.assertEqual(len(access), 3)
        self.assertRegex(access[0], r'^127\.0\.0\.1:\d+ - "GET /r0\?q=0 HTTP/1\.1" 200$')


if __name__ == "__main__":
    _tap.main()
