"""The nanosrv API: utilities, HTTP handling, routes, errors from bad input."""
import http.client
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import _tap
from _tap import ServerThread

import nanosrv

logging.getLogger("nanosrv").setLevel(logging.CRITICAL)  # expected handler failures stay quiet


def get(port, path, method="GET", body=None, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data


class Utilities(unittest.TestCase):
    def test_base64(self):
        self.assertEqual(nanosrv.base64_encode("hello"), "aGVsbG8=")
        self.assertEqual(nanosrv.base64_decode("aGVsbG8="), "hello")
        self.assertEqual(nanosrv.base64_decode_bytes(nanosrv.base64_encode(b"\x00\xff")), b"\x00\xff")
        self.assertEqual(nanosrv.base64_encode(""), "")
        with self.assertRaises(ValueError):
            nanosrv.base64_decode("a b!")
        with self.assertRaises(TypeError):
            nanosrv.base64_encode(42)

    def test_url(self):
        self.assertEqual(nanosrv.url_encode("hello world"), "hello%20world")
        self.assertEqual(nanosrv.url_decode("hello%20world"), "hello world")
        self.assertEqual(nanosrv.url_decode("a+b", form=True), "a b")
        with self.assertRaises(ValueError):
            nanosrv.url_decode("%zz")
        u = nanosrv.Url.parse("https://example.com:8443/path?q=1")
        self.assertEqual((u.scheme, u.host, u.port, u.path, u.query, u.is_ssl),
                         ("https", "example.com", 8443, "/path", "q=1", True))
        self.assertEqual(nanosrv.Url.parse("http://[::1]/").host, "::1")
        with self.assertRaises(ValueError):
            nanosrv.Url.parse("not a url")

    def test_json(self):
        self.assertEqual(nanosrv.json.string('{"name": "nanosrv"}', "$.name"), "nanosrv")
        self.assertEqual(nanosrv.json.integer('{"n": 42}', "$.n"), 42)
        self.assertAlmostEqual(nanosrv.json.number('{"x": 3.14}', "$.x"), 3.14)
        self.assertIs(nanosrv.json.boolean('{"ok": true}', "$.ok"), True)
        self.assertEqual(nanosrv.json.string('{"a":[1,{"b":"\\u00e9"}]}', "$.a[1].b"), "\u00e9")
        self.assertIsNone(nanosrv.json.string('{"a": 1}', "$.b"))
        with self.assertRaises(ValueError):
            nanosrv.json.integer('{"a": ', "$.a")

    def test_log_clock_facts(self):
        old = nanosrv.get_log_level()
        nanosrv.set_log_level(nanosrv.LogLevel.Debug)
        self.assertEqual(nanosrv.get_log_level(), nanosrv.LogLevel.Debug)
        nanosrv.set_log_level(getattr(nanosrv.LogLevel, "None"))
        self.assertEqual(nanosrv.get_log_level(), nanosrv.LogLevel.NONE)
        nanosrv.set_log_level(old)
        with self.assertRaises(nanosrv.Error):
            nanosrv.set_log_level(99)
        a = nanosrv.millis()
        time.sleep(0.01)
        self.assertGreaterEqual(nanosrv.millis() - a, 9)
        self.assertIsInstance(nanosrv.tls_available(), bool)
        self.assertIsInstance(nanosrv.http2_available(), bool)
        self.assertEqual(nanosrv.version(), "1.5.0")


class Loading(unittest.TestCase):
    def run_import(self, library):
        env = dict(os.environ, NANOSRV_LIBRARY=library)
        p = subprocess.run([sys.executable, "-c", "import nanosrv"], env=env, cwd=_tap.PKG,
                           capture_output=True, text=True)
        self.assertNotEqual(p.returncode, 0)
        return p.stderr

    def fake_library(self, abi, evsize):
        d = tempfile.mkdtemp()
        src = os.path.join(d, "fake.c")
        with open(src, "w") as f:
            f.write("#include <stddef.h>\nint nsv_abi_version(void){return %d;}\n"
                    "size_t nsv_event_size(void){return %d;}\n" % (abi, evsize))
        out = os.path.join(d, "libfake.so")
        subprocess.run(["cc", "-shared", "-fPIC", "-o", out, src], check=True)
        return out

    def test_missing_library(self):
        err = self.run_import("/nonexistent/libnanosrv.so.1")
        self.assertIn("cannot load libnanosrv.so.1", err)
        self.assertIn("NANOSRV_LIBRARY", err)

    def test_abi_mismatch(self):
        lib = self.fake_library(2, 112)
        err = self.run_import(lib)
        self.assertIn("ABI mismatch", err)
        self.assertIn(lib, err)
        self.assertIn("ABI version 2", err)

    def test_event_size_mismatch(self):
        err = self.run_import(self.fake_library(1, 100))
        self.assertIn("event size mismatch", err)
        self.assertIn("= 100", err)

    def test_loaded(self):
        self.assertTrue(os.path.exists(nanosrv.LIBRARY_PATH))


class Http(unittest.TestCase):
    def setUp(self):
        self.m = nanosrv.Manager()
        self.seen = []

    def tearDown(self):
        self.m.close()

    def test_request_fields(self):
        def h(conn, msg):
            self.seen.append((msg.method, msg.uri, msg.query, msg.text, msg.header("X-TEST"),
                              msg.header("nope"), msg.peer[0], msg.keep_alive))
            conn.http_reply(200, "Content-Type: text/plain\r\n", "you asked " + msg.uri)
        lst = self.m.http_listen("http://127.0.0.1:0", h)
        self.assertGreater(lst.port, 0)
        with ServerThread(self.m):
            st, hd, body = get(lst.port, "/a/b?x=1&y=2", "POST", b"payload", {"x-test": "yes"})
        self.assertEqual((st, body, hd["content-type"]), (200, b"you asked /a/b", "text/plain"))
        self.assertEqual(self.seen, [("POST", "/a/b", "x=1&y=2", "payload", "yes", None, "127.0.0.1", True)])

    def test_routes_and_return_values(self):
        m = self.m

        @m.route("GET", "/users/{id}")
        def user(conn, msg):
            return {"id": msg.params["id"]}

        @m.get("/files/*")
        def files(conn, msg):
            return msg.param("*")

        m.route("POST", "/items/:name", lambda c, msg: (201, {"X-Made": msg.params["name"]}, b"made"))
        m.route("ALL", "/status", lambda c, msg: 204)
        lst = m.http_listen("http://127.0.0.1:0")
        with ServerThread(m):
            self.assertEqual(get(lst.port, "/users/42")[::2], (200, b'{"id":"42"}'))
            st, hd, body = get(lst.port, "/files/a/b.txt")
            self.assertEqual((st, hd["content-type"], body), (200, "text/plain; charset=utf-8", b"a/b.txt"))
            st, hd, body = get(lst.port, "/items/box", "POST", b"")
            self.assertEqual((st, hd["x-made"], hd["content-type"], body),
                             (201, "box", "application/octet-stream", b"made"))
            self.assertEqual(get(lst.port, "/status", "DELETE")[0], 204)
            self.assertEqual(get(lst.port, "/nothing")[0], 404)
            st, hd, body = get(lst.port, "/users/7", "HEAD")
            self.assertEqual((st, body, hd["content-length"]), (200, b"", "10"))

    def test_handler_error_gives_500_and_server_lives(self):
        def h(conn, msg):
            if msg.uri == "/boom":
                raise ValueError("boom")
            conn.http_reply(200, "", "fine")
        lst = self.m.http_listen("http://127.0.0.1:0", h)
        # Routes are set up before the loop runs: while another thread
        # polls, setup raises StateError (see test_fixes_threads).
        self.m.route("GET", "/bad-return", lambda c, msg: object())
        with ServerThread(self.m):
            self.assertEqual(get(lst.port, "/boom")[0], 500)
            self.assertEqual(get(lst.port, "/ok")[::2], (200, b"fine"))
            self.assertEqual(get(lst.port, "/bad-return")[0], 500)

    def test_reply_twice_and_bad_types(self):
        errors = []

        def h(conn, msg):
            conn.http_reply(200, "", "first")
            for call in (lambda: conn.http_reply(200, "", "again"),
                         lambda: conn.http_reply(object(), "", "x"),
                         lambda: conn.http_reply(200, 5, "x"),
                         lambda: conn.http_reply(200, "", 3.5)):
                try:
                    call()
                except Exception as e:
                    errors.append(type(e))
        lst = self.m.http_listen("http://127.0.0.1:0", h)
        with ServerThread(self.m):
            self.assertEqual(get(lst.port, "/")[::2], (200, b"first"))
        self.assertEqual(errors, [nanosrv.StateError, TypeError, TypeError, TypeError])

    def test_bad_status_rejected(self):
        errors = []

        def h(conn, msg):
            try:
                conn.http_reply(42, "", "x")
            except nanosrv.Error as e:
                errors.append(e.name)
            conn.http_reply(200, "", "ok")
        lst = self.m.http_listen("http://127.0.0.1:0", h)
        with ServerThread(self.m):
            self.assertEqual(get(lst.port, "/")[0], 200)
        self.assertEqual(errors, ["NSV_EINVAL"])

    def test_stale_connection(self):
        kept = []
        lst = self.m.http_listen("http://127.0.0.1:0", lambda c, msg: kept.append(c) or c.http_reply(200, "", "x"))
        with ServerThread(self.m):
            get(lst.port, "/")
            for _ in range(100):
                if kept and kept[0].closed:
                    break
                time.sleep(0.02)
        self.assertTrue(kept[0].closed)
        # A late reply is a no-op: False, no exception.
        self.assertIs(kept[0].http_reply(200, "", "late"), False)
        self.assertIs(kept[0].send_chunk("late"), False)
        self.assertIs(kept[0].send_bytes(b"late"), False)
        self.assertEqual(kept[0].ws_send_text("late"), 0)
        self.assertIs(kept[0].close(), False)
        # Misuse still raises, closed or not.
        with self.assertRaises(ValueError):
            kept[0].http_reply(200, {"X-A": "a\r\nSet-Cookie: pwned=1"}, "late")

    def test_message_outlives_batch(self):
        kept = []

        def h(conn, msg):
            kept.append(msg)
            conn.http_reply(200, "", "")
        lst = self.m.http_listen("http://127.0.0.1:0", h)
        with ServerThread(self.m):
            for i in range(5):
                get(lst.port, "/path/%d?q=%d" % (i, i), "POST", b"body%d" % i, {"X-N": str(i)})
        self.assertEqual([(m.uri, m.query, m.text, m.header("x-n")) for m in kept],
                         [("/path/%d" % i, "q=%d" % i, "body%d" % i, str(i)) for i in range(5)])

    def test_arena_grows_for_large_body(self):
        m = nanosrv.Manager(arena_size=1024)
        m.route("POST", "/echo", lambda c, msg: msg.body_bytes)
        lst = m.http_listen("http://127.0.0.1:0")
        big = os.urandom(200000)
        with ServerThread(m):
            self.assertEqual(get(lst.port, "/echo", "POST", big)[::2], (200, big))
        self.m = nanosrv.Manager()

    def test_streaming(self):
        def h(conn, msg):
            conn.reply_start(200, "Content-Type: text/plain\r\n")
            conn.send_chunk("one,")
            conn.send_bytes(b"two")
            conn.reply_end()
        lst = self.m.http_listen("http://127.0.0.1:0", h)
        with ServerThread(self.m):
            st, hd, body = get(lst.port, "/")
        self.assertEqual((st, hd.get("transfer-encoding"), body), (200, "chunked", b"one,two"))

    def test_event_handler(self):
        events = []

        def h(conn, ev, data):
            events.append(ev)
            if ev == nanosrv.Event.HttpMessage:
                conn.http_reply(200, "", data.method)
        lst = self.m.http_listen_event("http://127.0.0.1:0", h)
        with ServerThread(self.m):
            self.assertEqual(get(lst.port, "/")[::2], (200, b"GET"))
            for _ in range(100):
                if nanosrv.Event.Close in events:
                    break
                time.sleep(0.02)
        self.assertEqual(events, [nanosrv.Event.HttpMessage, nanosrv.Event.Close])

    def test_options(self):
        m = self.m
        m.set_max_body_size(10)
        m.set_idle_timeout(5000)
        m.set_request_timeout(5000)
        m.set_max_connections(100)
        m.set_max_send_buffer(1 << 20)
        self.assertEqual(m.get_option("max_body"), 10)
        self.assertEqual(m.get_option("MAX_CONNS"), 100)
        with self.assertRaises(nanosrv.Error):
            m.set_option("no_such_option", 1)
        with self.assertRaises(nanosrv.Error):
            m.set_max_body_size(-5)
        lst = m.http_listen("http://127.0.0.1:0", lambda c, msg: c.http_reply(200, "", "ok"))
        with ServerThread(m):
            self.assertEqual(get(lst.port, "/", "POST", b"x" * 100)[0], 413)

    def test_setup_errors(self):
        m = self.m
        with self.assertRaises(TypeError):
            m.http_listen(8080, lambda c, msg: None)
        with self.assertRaises(TypeError):
            m.http_listen("http://127.0.0.1:0", "not callable")
        with self.assertRaises(TypeError):
            m.route("GET", 5, lambda c, msg: None)
        with self.assertRaises(ValueError):
            nanosrv.Manager(max_events=0)
        with self.assertRaises(nanosrv.Error) as cm:
            m.http_listen("gopher://127.0.0.1:0")
        self.assertEqual(cm.exception.name, "NSV_EURL")
        m.route("GET", "/dup", lambda c, msg: None)
        with self.assertRaises(nanosrv.Error) as cm:
            m.route("GET", "/dup", lambda c, msg: None)
        self.assertEqual(cm.exception.name, "NSV_EEXIST")
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen()
        with self.assertRaises(nanosrv.Error) as cm:
            m.http_listen("http://127.0.0.1:%d" % s.getsockname()[1])
        s.close()
        self.assertEqual(cm.exception.name, "NSV_EADDRINUSE")

    def test_closed_manager(self):
        m = nanosrv.Manager()
        m.close()
        m.close()
        with self.assertRaises(nanosrv.Error):
            m.http_listen("http://127.0.0.1:0")
        with self.assertRaises(nanosrv.Error):
            m.poll(0)

    def test_many_keepalive_requests_one_connection(self):
        lst = self.m.http_listen("http://127.0.0.1:0", lambda c, msg: c.http_reply(200, "", msg.query))
        with ServerThread(self.m):
            c = http.client.HTTPConnection("127.0.0.1", lst.port, timeout=5)
            for i in range(50):
                c.request("GET", "/?%d" % i)
                self.assertEqual(c.getresponse().read(), str(i).encode())
            c.close()


class Optional(unittest.TestCase):
    def test_sharded(self):
        if not nanosrv.sharded_available():
            with self.assertRaises(nanosrv.NotSupportedError) as cm:
                nanosrv.ShardedManager(2)
            self.assertIn("sharded", str(cm.exception))
            return
        m = nanosrv.ShardedManager(2)
        self.assertEqual(m.workers, 2)
        lst = m.http_listen("http://127.0.0.1:0", lambda c, msg: c.http_reply(200, "", msg.uri))
        with ServerThread(m):
            for i in range(20):
                self.assertEqual(get(lst.port, "/s%d" % i)[::2], (200, b"/s%d" % i))

    def test_websocket_degrades(self):
        if nanosrv.websocket_available():
            self.skipTest("WebSocket is available; covered by test_echo")
        m = nanosrv.Manager()
        with self.assertRaises(nanosrv.NotSupportedError) as cm:
            m.websocket("/ws", lambda c, e, d: None)
        self.assertIn("nsv_ws_send", str(cm.exception))
        errors = []

        def h(conn, msg):
            for call in (lambda: conn.ws_upgrade(msg), lambda: conn.ws_send_text("x"),
                         lambda: conn.send_bytes(b"x")):
                try:
                    call()
                except nanosrv.NotSupportedError as e:
                    errors.append(e.name)
            conn.http_reply(200, "", "")
        lst = m.http_listen("http://127.0.0.1:0", h)
        with ServerThread(m):
            get(lst.port, "/")
        self.assertEqual(errors, ["NSV_ENOTSUP"] * 3)


if __name__ == "__main__":
    _tap.main()
