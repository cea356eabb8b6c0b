"""Fixes to the native API found by trying it as a new user would: writable
at once, handlers that raise mid-stream or never answer, arena_size,
tcp:// on http_listen, decoded route params, Flask and Starlette patterns,
405 with Allow, dict headers, error messages, the library-not-found error,
reason phrases, the library's log lines in `logging`, request helpers."""
import http.client
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import unittest
import uuid

import _tap
from _tap import ServerThread

import nanosrv

LOG = logging.getLogger("nanosrv")


class Records(logging.Handler):
    """Collects the "nanosrv" logger's records for a with-block."""

    def __init__(self, level=logging.DEBUG):
        super().__init__(level)
        self.records = []
        self.old = None

    def emit(self, record):
        self.records.append(record)

    def __enter__(self):
        self.old = LOG.level, LOG.propagate
        LOG.setLevel(1)
        LOG.propagate = False  # expected errors stay off the test's output
        LOG.addHandler(self)
        return self

    def __exit__(self, *exc):
        LOG.removeHandler(self)
        LOG.setLevel(self.old[0])
        LOG.propagate = self.old[1]

    def text(self):
        return "\n".join(r.getMessage() for r in self.records)


def request(port, path="/", method="GET", body=None, headers=None, timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r, data


def get(port, path="/", method="GET", body=None, headers=None):
    r, data = request(port, path, method, body, headers)
    return r.status, data


def wait_for(cond, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def raw_exchange(port, req, timeout=5):
    """Send req and read until EOF (or timeout): (bytes, eof_seen)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(req)
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                s.close()
                return out, True
            out += d
    except socket.timeout:
        s.close()
        return out, False


CHUNK = b"x" * 65536


class Writable(unittest.TestCase):
    def stream_until_blocked(self, m):
        """A handler that sends 64 KiB chunks while `writable`, then the rest
        of 8 MiB from on_drain; returns what it saw."""
        seen = {"first_burst": 0, "errors": [], "total": 0}
        total = 8 << 20

        def pump(conn):
            try:
                while seen["total"] < total and conn.writable:
                    conn.send_chunk(CHUNK)
                    seen["total"] += len(CHUNK)
                if seen["total"] >= total:
                    conn.reply_end()
                else:
                    conn.on_drain(lambda: pump(conn))
            except Exception as e:
                seen["errors"].append(e)
                conn.close()

        def h(conn, msg):
            conn.reply_start(200, "Content-Type: application/octet-stream\r\n")
            while conn.writable and seen["first_burst"] < total:
                conn.send_chunk(CHUNK)
                seen["first_burst"] += len(CHUNK)
            seen["total"] = seen["first_burst"]
            conn.on_drain(lambda: pump(conn))
        lst = m.http_listen("http://127.0.0.1:0", h)
        with ServerThread(m):
            r, data = request(lst.port, timeout=30)
        return seen, len(data), total

    def test_writable_turns_false_at_once_single_loop(self):
        m = nanosrv.Manager()
        hw = m.get_option("tcp_high_water")
        seen, got, total = self.stream_until_blocked(m)
        self.assertEqual(seen["errors"], [])
        # Before: writable stayed True until the next poll, the burst ran into
        # NSV_EAGAIN at the output cap (~4 MiB).
        self.assertLessEqual(seen["first_burst"], hw + len(CHUNK))
        self.assertGreaterEqual(seen["first_burst"], hw)
        self.assertEqual(got, total)

    def test_writable_turns_false_at_once_sharded(self):
        m = nanosrv.ShardedManager(2)
        hw = m.get_option("tcp_high_water")
        seen, got, total = self.stream_until_blocked(m)
        self.assertEqual(seen["errors"], [])
        self.assertLessEqual(seen["first_burst"], hw + len(CHUNK))
        self.assertEqual(got, total)

    def test_sse_counts_too(self):
        m = nanosrv.Manager()
        hw = m.get_option("tcp_high_water")
        sent = []

        def h(conn, msg):
            conn.start_sse()
            n = 0
            while conn.writable and n < 10000:
                conn.sse_send("y" * 4096)
                n += 1
            sent.append(n)
            conn.reply_end()
        lst = m.http_listen("http://127.0.0.1:0", h)
        with ServerThread(m):
            get(lst.port)
        self.assertLessEqual(sent[0] * 4096, hw + 8192)


class Hanging(unittest.TestCase):
    def setUp(self):
        self.m = nanosrv.Manager()

    def tearDown(self):
        self.m.close()

    def test_raise_mid_stream_closes_and_logs(self):
        def h(conn, msg):
            conn.reply_start(200, "Content-Type: text/plain\r\n")
            conn.send_chunk("partial")
            raise RuntimeError("boom mid-stream")
        lst = self.m.http_listen("http://127.0.0.1:0", h)
        with Records() as rec, ServerThread(self.m):
            out, eof = raw_exchange(lst.port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertTrue(eof, "the connection is closed, not left hanging: %r" % out)
        self.assertTrue(out.startswith(b"HTTP/1.1 200"))
        self.assertNotIn(b"0\r\n\r\n", out)  # no clean end: the client sees the stream broke
        self.assertIn("closing the connection", rec.text())
        self.assertTrue(any(r.exc_info and "boom mid-stream" in str(r.exc_info[1]) for r in rec.records))

    def test_sse_raise_mid_stream_closes(self):
        def h(conn, msg):
            conn.start_sse()
            conn.sse_send("one")
            raise ValueError("sse boom")
        lst = self.m.http_listen("http://127.0.0.1:0", h)
        with Records(), ServerThread(self.m):
            out, eof = raw_exchange(lst.port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertTrue(eof)
        self.assertIn(b"data: one", out)

    def test_return_none_without_reply_answers_500_and_logs(self):
        self.m.route("GET", "/forgot", lambda c, msg: None)
        lst = self.m.http_listen("http://127.0.0.1:0")
        with Records() as rec, ServerThread(self.m):
            self.assertEqual(get(lst.port, "/forgot")[0], 500)
        self.assertIn("returned without replying to GET /forgot", rec.text())

    def test_late_replies_still_work(self):
        m = self.m
        kept = []
        m.route("GET", "/stored", lambda c, msg: kept.append(c))
        m.route("GET", "/timer", lambda c, msg: m.call_later(0.05, c.http_reply, 200, "", "timer") and None)
        m.route("GET", "/msg", lambda c, msg: kept.append(msg))
        m.route("GET", "/closure", lambda c, msg: m.call_soon_threadsafe(lambda: c.http_reply(200, "", "soon")))
        lst = m.http_listen("http://127.0.0.1:0")
        with Records() as rec, ServerThread(m):
            out = []
            t = threading.Thread(target=lambda: out.append(get(lst.port, "/stored")))
            t.start()
            self.assertTrue(wait_for(lambda: kept))
            m.call_soon_threadsafe(kept[0].http_reply, 200, "", "stored")
            t.join(10)
            self.assertEqual(out, [(200, b"stored")])
            self.assertEqual(get(lst.port, "/timer"), (200, b"timer"))
            self.assertEqual(get(lst.port, "/closure"), (200, b"soon"))
            kept.clear()
            t = threading.Thread(target=lambda: out.append(get(lst.port, "/msg")))
            t.start()
            self.assertTrue(wait_for(lambda: kept))
            m.call_soon_threadsafe(kept[0]._c.http_reply, 200, "", "msg")
            t.join(10)
            self.assertEqual(out[-1], (200, b"msg"))
        self.assertNotIn("returned without replying", rec.text())

    def test_event_listener_may_answer_from_a_wakeup(self):
        ids = []

        def h(conn, ev, data):
            if ev == nanosrv.Event.HttpMessage:
                ids.append(conn.id)  # only the id: a wakeup brings the connection back
            elif ev == nanosrv.Event.Wakeup:
                conn.http_reply(200, "", b"woken")
        ref = self.m.http_listen_event("http://127.0.0.1:0", h)
        with Records() as rec, ServerThread(self.m):
            out = []
            t = threading.Thread(target=lambda: out.append(get(ref.port)))
            t.start()
            self.assertTrue(wait_for(lambda: ids))
            self.m.wakeup(ids[0], b"x")
            t.join(10)
        self.assertEqual(out, [(200, b"woken")])
        self.assertNotIn("returned without replying", rec.text())

    def test_coroutines(self):
        import asyncio
        m = self.m

        async def forgot(conn, msg):
            await asyncio.sleep(0.01)

        async def later(conn, msg):
            await asyncio.sleep(0.01)
            conn.http_reply(200, "", "later")
        m.route("GET", "/forgot", forgot)
        m.route("GET", "/later", later)
        lst = m.http_listen("http://127.0.0.1:0")
        results = []

        async def main():
            task = asyncio.ensure_future(nanosrv.aio.serve(m))
            loop = asyncio.get_running_loop()
            results.append(await loop.run_in_executor(None, get, lst.port, "/forgot"))
            results.append(await loop.run_in_executor(None, get, lst.port, "/later"))
            m.stop()
            await asyncio.wait_for(task, 10)
        with Records() as rec:
            asyncio.run(main())
        self.assertEqual(results[0][0], 500)
        self.assertEqual(results[1], (200, b"later"))
        self.assertIn("returned without replying to GET /forgot", rec.text())


class Setup(unittest.TestCase):
    def test_arena_size_validated(self):
        for bad in (0, -1, 10, "1m", 1.5, True):
            with self.assertRaises((ValueError, TypeError)) as cm:
                nanosrv.Manager(arena_size=bad)
            self.assertIn("arena_size", str(cm.exception))
        with self.assertRaises(ValueError):
            nanosrv.Manager(max_events=0)

    def test_small_arena_grows(self):
        m = nanosrv.Manager(arena_size=1024)
        m.route("POST", "/echo", lambda c, msg: msg.body_bytes)
        lst = m.http_listen("http://127.0.0.1:0")
        big = os.urandom(300000)
        with ServerThread(m):
            self.assertEqual(get(lst.port, "/echo", "POST", big), (200, big))

    def test_http_listen_refuses_tcp(self):
        m = nanosrv.Manager()
        self.addCleanup(m.close)
        for url in ("tcp://127.0.0.1:0", "TLS://127.0.0.1:0"):
            with self.assertRaises(ValueError) as cm:
                m.http_listen(url, lambda c, msg: None)
            self.assertIn("tcp_listen", str(cm.exception))
            with self.assertRaises(ValueError):
                m.http_listen_event(url, lambda c, e, d: None)


class Routes(unittest.TestCase):
    def setUp(self):
        self.m = nanosrv.Manager()

    def tearDown(self):
        self.m.close()

    def serve(self):
        lst = self.m.http_listen("http://127.0.0.1:0")
        return lst.port

    def test_params_percent_decoded(self):
        got = []
        self.m.route("GET", "/u/:name", lambda c, msg: got.append((msg.params, msg.raw_params, msg.param("name")))
                     or "ok")
        port = self.serve()
        with ServerThread(self.m):
            self.assertEqual(get(port, "/u/caf%C3%A9")[0], 200)
            self.assertEqual(get(port, "/u/a%20b%2Fc")[0], 200)
            self.assertEqual(get(port, "/u/%FF")[0], 200)
            self.assertEqual(get(port, "/u/plain")[0], 200)
        self.assertEqual(got[0], ({"name": "café"}, {"name": "caf%C3%A9"}, "café"))
        self.assertEqual(got[1][0], {"name": "a b/c"})
        self.assertEqual(got[2][0]["name"].encode("utf-8", "surrogateescape"), b"\xff")
        self.assertEqual(got[3][0], {"name": "plain"})

    def test_flask_and_starlette_patterns(self):
        got = {}

        def h(name):
            def handler(c, msg):
                got[name] = msg.params
                return "ok"
            return handler
        m = self.m
        m.route("GET", "/files/<path:p>", h("path"))
        m.route("GET", "/item/<int:id>", h("int"))
        m.route("GET", "/user/<name>/<string:tab>", h("str"))
        m.route("GET", "/f/<float:x>", h("float"))
        m.route("GET", "/id/<uuid:u>", h("uuid"))
        m.route("GET", "/s/{id:int}/{rest:path}", h("brace"))
        port = self.serve()
        u = uuid.uuid4()
        with ServerThread(m):
            self.assertEqual(get(port, "/files/a/b%20c.txt")[0], 200)
            self.assertEqual(get(port, "/item/42")[0], 200)
            self.assertEqual(get(port, "/item/abc"), (404, b'{"error":"not found"}'))
            self.assertEqual(get(port, "/item/-1")[0], 404)
            self.assertEqual(get(port, "/user/bob/posts")[0], 200)
            self.assertEqual(get(port, "/f/2.5")[0], 200)
            self.assertEqual(get(port, "/f/x")[0], 404)
            self.assertEqual(get(port, "/id/%s" % u)[0], 200)
            self.assertEqual(get(port, "/id/nope")[0], 404)
            self.assertEqual(get(port, "/s/7/x/y")[0], 200)
        self.assertEqual(got["path"], {"p": "a/b c.txt"})
        self.assertEqual(got["int"], {"id": 42})
        self.assertIs(type(got["int"]["id"]), int)
        self.assertEqual(got["str"], {"name": "bob", "tab": "posts"})
        self.assertEqual(got["float"], {"x": 2.5})
        self.assertEqual(got["uuid"], {"u": u})
        self.assertEqual(got["brace"], {"id": 7, "rest": "x/y"})

    def test_bad_patterns_raise(self):
        for pat, word in (("/x-<id>", "whole segment"), ("/<path:p>/x", "last segment"),
                          ("/<foo:x>", "unknown converter"), ("/a/{b", "whole segment"), ("nope", "start with")):
            with self.assertRaises(ValueError) as cm:
                self.m.route("GET", pat, lambda c, msg: "x")
            self.assertIn(word, str(cm.exception))

    def test_405_with_allow(self):
        m = self.m
        m.route("POST", "/only-post", lambda c, msg: "posted")
        m.route("GET", "/g/:id", lambda c, msg: "got")
        m.route("PUT", "/g/:id", lambda c, msg: "put")
        m.route("ALL", "/any", lambda c, msg: "any")
        port = self.serve()
        with ServerThread(m):
            r, body = request(port, "/only-post")
            self.assertEqual((r.status, r.getheader("Allow")), (405, "POST"))
            r, body = request(port, "/g/1", "DELETE")
            self.assertEqual((r.status, r.getheader("Allow")), (405, "GET, HEAD, PUT"))
            self.assertEqual(get(port, "/g/1", "PUT"), (200, b"put"))
            self.assertEqual(get(port, "/any", "PATCH"), (200, b"any"))
            self.assertEqual(get(port, "/nothing")[0], 404)
            self.assertEqual(get(port, "/g/1/2")[0], 404)

    def test_own_fallback_handler_keeps_its_answers(self):
        self.m.route("POST", "/p", lambda c, msg: "p")
        lst = self.m.http_listen("http://127.0.0.1:0", lambda c, msg: c.http_reply(404, "", "mine"))
        with ServerThread(self.m):
            self.assertEqual(get(lst.port, "/p"), (404, b"mine"))

    def test_http_reply_takes_dict_headers(self):
        self.m.route("GET", "/d", lambda c, msg: c.http_reply(201, {"X-A": "1", "Content-Type": "text/plain"}, "d"))
        self.m.route("GET", "/l", lambda c, msg: c.http_reply(200, [("X-B", 2)], "l"))
        port = self.serve()
        with ServerThread(self.m):
            r, body = request(port, "/d")
            self.assertEqual((r.status, r.getheader("X-A"), body), (201, "1", b"d"))
            r, body = request(port, "/l")
            self.assertEqual((r.getheader("X-B"), body), ("2", b"l"))


class Errors(unittest.TestCase):
    def test_messages_say_each_part_once(self):
        e = nanosrv.errors.error(nanosrv._ffi.lib.NSV_EINVAL, "route GET x: invalid argument")
        self.assertEqual(str(e), "NSV_EINVAL (invalid argument): route GET x")
        self.assertEqual(str(nanosrv.StaleError(nanosrv._ffi.lib.NSV_ESTALE)),
                         "NSV_ESTALE: connection id is unknown or the connection is closed")
        m = nanosrv.Manager()
        self.addCleanup(m.close)
        errors = []

        def h(conn, msg):
            conn.http_reply(200, "", "once")
            try:
                conn.http_reply(200, "", "twice")
            except nanosrv.StateError as exc:
                errors.append(exc)
        lst = m.http_listen("http://127.0.0.1:0", h)
        with ServerThread(m):
            get(lst.port)
        text = str(errors[0])
        self.assertEqual(text.count("NSV_ESTATE"), 1, text)
        self.assertEqual(text.count(errors[0].meaning), 1, text)
        self.assertTrue(text.startswith("NSV_ESTATE (%s): " % errors[0].meaning), text)
        self.assertIn("nsv_reply", errors[0].detail)
        self.assertNotIn("(", text[len("NSV_ESTATE (%s)" % errors[0].meaning):].replace("(answered", ""))

    def test_library_not_found_says_where_it_looked(self):
        env = dict(os.environ, NANOSRV_LIBRARY="/nonexistent/dir/libnanosrv.so.1", PYTHONPATH=_tap.PKG)
        p = subprocess.run([sys.executable, "-c", "import nanosrv"], env=env, capture_output=True, text=True,
                           timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("/nonexistent/dir/libnanosrv.so.1 (NANOSRV_LIBRARY)", p.stderr)
        self.assertIn("No such file", p.stderr)
        env.pop("NANOSRV_LIBRARY")
        env["LD_LIBRARY_PATH"] = "/nonexistent/ld"
        p = subprocess.run([sys.executable, "-c", "import nanosrv"], env=env, capture_output=True, text=True,
                           timeout=60, cwd="/")
        if p.returncode == 0:
            self.skipTest("a libnanosrv.so.1 is installed where the dynamic linker finds it")
        self.assertIn("the copy next to the package", p.stderr)
        self.assertIn("dynamic linker", p.stderr)
        self.assertIn("/nonexistent/ld", p.stderr)
        self.assertIn("NANOSRV_LIBRARY=/path/to/build/libnanosrv.so.1", p.stderr)


class Reasons(unittest.TestCase):
    def run_app(self, m, paths):
        lst = m.http_listen("http://127.0.0.1:0")
        out = []
        with ServerThread(m):
            c = http.client.HTTPConnection("127.0.0.1", lst.port, timeout=10)
            for p in paths:  # one connection: the phrase is used once
                c.request("GET", p)
                r = c.getresponse()
                out.append((r.status, r.reason, r.read()))
            c.close()
        return out

    def test_custom_reason_phrases(self):
        m = nanosrv.Manager()
        m.route("GET", "/line", lambda c, msg: c.http_reply("299 Custom Reason", "", "a"))
        m.route("GET", "/kw", lambda c, msg: c.http_reply(200, "", "b", reason="Fine Thanks"))
        m.route("GET", "/tuple", lambda c, msg: ("201 Made It", "c"))
        m.route("GET", "/plain", lambda c, msg: "d")
        m.route("GET", "/stream", lambda c, msg: (c.reply_start("202 Streaming Along"), c.send_chunk("e"),
                                                  c.reply_end()) and None)
        m.route("GET", "/set", lambda c, msg: (c.set_reason("Via Set Reason"), c.http_reply(200, "", "f")) and None)
        m.route("GET", "/utf8", lambda c, msg: c.http_reply(200, "", "g", reason="Très Bien"))
        m.route("GET", "/ok", lambda c, msg: c.http_reply("200 OK", "", "h"))
        m.route("GET", "/file", lambda c, msg: (c.set_reason("File Here"), c.send_file(msg, __file__)) and None)
        m.route("GET", "/sse", lambda c, msg: (c.set_reason("Events Follow"), c.start_sse(), c.reply_end()) and None)
        out = self.run_app(m, ["/line", "/plain", "/kw", "/tuple", "/stream", "/plain", "/set", "/ok", "/utf8",
                               "/file", "/sse", "/plain"])
        self.assertEqual([o[:2] for o in out[9:]], [(200, "File Here"), (200, "Events Follow"), (200, "OK")])
        self.assertEqual(out[:8], [(299, "Custom Reason", b"a"), (200, "OK", b"d"), (200, "Fine Thanks", b"b"),
                                   (201, "Made It", b"c"), (202, "Streaming Along", b"e"), (200, "OK", b"d"),
                                   (200, "Via Set Reason", b"f"), (200, "OK", b"h")])
        self.assertEqual(out[8][1].encode("latin-1").decode("utf-8"), "Très Bien")
        m.close()

    def test_bad_reasons_refused(self):
        m = nanosrv.Manager()
        errors = []

        def h(conn, msg):
            for bad in ("Bad\r\nX-Injected: 1", "nul\0", "x" * 129):
                try:
                    conn.http_reply(200, "", "no", reason=bad)
                except ValueError as e:
                    errors.append(str(e))
            for bad in ("2000 Big", "20 Short", "abc"):
                try:
                    conn.http_reply(bad, "", "no")
                except ValueError as e:
                    errors.append(str(e))
            conn.http_reply(200, "", "fine")
        m.route("GET", "/", h)
        out = self.run_app(m, ["/"])
        self.assertEqual(out, [(200, "OK", b"fine")])
        self.assertEqual(len(errors), 6, errors)
        self.assertIn("0x0d at offset 3", errors[0])
        self.assertIn("at most 128", errors[2])
        self.assertIn("three digits", errors[3])
        m.close()

    def test_failed_handler_does_not_keep_the_phrase(self):
        m = nanosrv.Manager()

        def h(conn, msg):
            conn.set_reason("Almost There")
            raise RuntimeError("failed after set_reason")
        m.route("GET", "/", h)
        with Records():
            out = self.run_app(m, ["/"])
        self.assertEqual(out[0][:2], (500, "Internal Server Error"))
        m.close()

    def test_sharded_reason_from_another_thread(self):
        m = nanosrv.ShardedManager(2)
        m.route("GET", "/", lambda c, msg: threading.Thread(
            target=c.http_reply, args=("299 From A Thread", "", "t")).start())
        out = self.run_app(m, ["/", "/"])
        self.assertEqual(out, [(299, "From A Thread", b"t")] * 2)
        m.close()


class LibraryLog(unittest.TestCase):
    def tearDown(self):
        nanosrv.set_log_level(nanosrv.LogLevel.Error)

    def test_library_lines_reach_logging_from_the_polling_thread(self):
        m = nanosrv.ShardedManager(2)
        where = []

        def h(conn, msg):
            where.append(threading.get_ident())
            # A reply the worker refuses (the body disagrees with the
            # Content-Length): the worker thread logs the refusal.
            conn.http_reply(200, "Content-Length: 9\r\n", "x")
        lst = m.http_listen("http://127.0.0.1:0", h)
        nanosrv.set_log_level(nanosrv.LogLevel.Debug)
        with Records() as rec, ServerThread(m):
            self.assertEqual(get(lst.port)[0], 500)
            self.assertTrue(wait_for(lambda: any("Content-Length is 9" in r.getMessage() and r.levelno == logging.DEBUG
                                                 for r in rec.records)))
        # (the ERROR event of the connection is logged too, at ERROR; the
        # library's own line comes through the log queue, at its level)
        lines = [r for r in rec.records if "Content-Length is 9" in r.getMessage() and r.levelno == logging.DEBUG]
        self.assertTrue(lines, rec.text())
        self.assertTrue(lines[0].getMessage().startswith("libnanosrv: NSV_EINVAL: "), lines[0].getMessage())
        self.assertEqual(lines[0].thread, where[0])  # the polling thread, not a worker
        m.close()

    def test_levels_map(self):
        m = nanosrv.Manager()
        m.http_listen("http://127.0.0.1:0", lambda c, msg: "x")
        nanosrv.set_log_level(nanosrv.LogLevel.Debug)
        with Records() as rec:
            try:
                m.set_option("no_such_option", 1)
            except nanosrv.Error:
                pass
            m.poll(0)
        self.assertTrue(any(r.levelno == logging.DEBUG and r.getMessage().startswith("libnanosrv: ")
                            for r in rec.records), rec.text())
        m.close()


class RequestHelpers(unittest.TestCase):
    def test_json_args_cookies_form(self):
        m = nanosrv.Manager()
        got = {}

        def j(conn, msg):
            return {"got": msg.json()}

        def strict(conn, msg):
            return {"got": msg.json(require_content_type=True)}

        def info(conn, msg):
            got["args"] = (msg.args.get("a"), msg.args.getall("a"), msg.args.get("none"))
            got["cookies"] = msg.cookies
            got["form"] = dict(msg.form)
            return "ok"
        m.route("POST", "/json", j)
        m.route("POST", "/strict", strict)
        m.route("POST", "/info", info)
        lst = m.http_listen("http://127.0.0.1:0")
        with Records(), ServerThread(m):
            p = lst.port
            self.assertEqual(get(p, "/json", "POST", b'{"a": [1, 2]}', {"Content-Type": "application/json"}),
                             (200, b'{"got":{"a":[1,2]}}'))
            self.assertEqual(get(p, "/json", "POST", b'{"a": 1}', {"Content-Type": "text/plain"})[0], 200)
            status, body = get(p, "/json", "POST", b'{"a": ', {"Content-Type": "application/json"})
            self.assertEqual(status, 400)
            self.assertIn(b"malformed JSON", body)
            self.assertEqual(get(p, "/json", "POST", b"", {"Content-Type": "application/json"})[0], 400)
            self.assertEqual(get(p, "/json", "POST", b"\xff\xfe", {"Content-Type": "application/json"})[0], 400)
            self.assertEqual(get(p, "/strict", "POST", b'{"a": 1}', {"Content-Type": "text/plain"})[0], 415)
            self.assertEqual(get(p, "/strict", "POST", b'{"a": 1}',
                                 {"Content-Type": "application/vnd.api+json"})[0], 200)
            self.assertEqual(get(p, "/info?a=1&a=2", "POST", b"x=y&z=%20",
                                 {"Content-Type": "application/x-www-form-urlencoded",
                                  "Cookie": "sid=abc; theme=dark"})[0], 200)
        self.assertEqual(got["args"], ("1", ["1", "2"], None))
        self.assertEqual(got["cookies"], {"sid": "abc", "theme": "dark"})
        self.assertEqual(got["form"], {"x": "y", "z": " "})
        m.close()


if __name__ == "__main__":
    _tap.main()
