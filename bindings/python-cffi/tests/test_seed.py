"""The nanosrv seed's Python API: its README examples, copied verbatim,
run against this binding with real clients, and one test per name or
meaning the seed documents.

The only change to the examples: they listen on "0.0.0.0:8080"; the
test replaces ":8080" with ":0" (an ephemeral port) and reads the bound
port from the server's listener 0."""
import asyncio
import http.client
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import unittest

import _tap
from _tap import ServerThread

import nanosrv
from nanosrv._ffi import lib

# ---- the seed README's examples, verbatim ----

MINIMAL = '''import nanosrv

mgr = nanosrv.Manager()
mgr.http_listen("http://0.0.0.0:8080", lambda conn, msg: (
    conn.http_reply(200, "Content-Type: text/plain\\r\\n",
                    f"Hello! You requested {msg.uri}")
))

while True:
    mgr.poll(1000)
'''

SHARDED = '''import nanosrv
import threading

mgr = nanosrv.ShardedManager(0)  # 0 = use all CPU cores
mgr.http_listen("http://0.0.0.0:8080", lambda conn, msg: (
    conn.http_reply(200, "", "OK\\n")
))

runner = threading.Thread(target=mgr.run, daemon=True)
runner.start()

# mgr.stop() to shut down
'''

WEBSOCKET = '''def handler(conn, event, data):
    if event == nanosrv.Event.HttpMessage:
        conn.ws_upgrade(data, "")
    elif event == nanosrv.Event.WsMessage:
        conn.ws_send_text(f"echo: {data.data}")

mgr = nanosrv.Manager()
mgr.http_listen_event("http://0.0.0.0:8080", handler)
'''

UTILITIES = '''import nanosrv

# Base64
nanosrv.base64_encode("hello")   # "aGVsbG8="
nanosrv.base64_decode("aGVsbG8=") # "hello"

# URL encode/decode
nanosrv.url_encode("hello world") # "hello%20world"
nanosrv.url_decode("hello%20world") # "hello world"

# URL parsing
u = nanosrv.Url.parse("https://example.com:8443/path")
# u.host="example.com", u.port=8443, u.path="/path", u.is_ssl=True

# JSON path extraction
nanosrv.json.string('{"name": "nanosrv"}', "$.name")  # "nanosrv"
nanosrv.json.integer('{"n": 42}', "$.n")             # 42
nanosrv.json.number('{"x": 3.14}', "$.x")            # 3.14
nanosrv.json.boolean('{"ok": true}', "$.ok")          # True
'''


def ephemeral(src):
    """The one substitution: port 8080 becomes an ephemeral port."""
    assert src.count(":8080") == 1
    return src.replace(":8080", ":0")


def port_of(mgr):
    return lib.nsv_listener_port(mgr._srv, 0)


def get(port, path="/", method="GET", body=None, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, r.getheaders(), r.read()
    finally:
        c.close()


def curl(*args):
    p = subprocess.run(["curl", "-sS", "-i", "--max-time", "20"] + list(args), capture_output=True, timeout=30)
    return p.returncode, p.stdout


def wait_for(cond, timeout=10):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def ws_talk(port, path, messages):
    import websockets.client

    async def talk():
        out = []
        async with websockets.client.connect("ws://127.0.0.1:%d%s" % (port, path)) as ws:
            for m in messages:
                await ws.send(m)
                out.append(await asyncio.wait_for(ws.recv(), 10))
        return out
    return asyncio.run(talk())


class SeedReadme(unittest.TestCase):
    def test_minimal_http_server(self):
        # Its loop never ends: run it in a child and stop that by PID. The
        # child's prelude reports the port once the example has bound it.
        prelude = ("import sys, threading, time\nsys.path.insert(0, %r)\nfrom nanosrv._ffi import lib\n"
                   "ns = {}\n"
                   "def report():\n"
                   "    while 'mgr' not in ns: time.sleep(0.01)\n"
                   "    while lib.nsv_listener_port(ns['mgr']._srv, 0) <= 0: time.sleep(0.01)\n"
                   "    print(lib.nsv_listener_port(ns['mgr']._srv, 0), flush=True)\n"
                   "threading.Thread(target=report, daemon=True).start()\n"
                   "exec(compile(%r, 'minimal', 'exec'), ns)\n") % (_tap.PKG, ephemeral(MINIMAL))
        p = subprocess.Popen([sys.executable, "-c", prelude], stdout=subprocess.PIPE, env=os.environ)
        try:
            port = int(p.stdout.readline())
            rc, out = curl("http://127.0.0.1:%d/some/path?x=1" % port)
            self.assertEqual(rc, 0)
            self.assertIn(b"HTTP/1.1 200", out)
            self.assertIn(b"Content-Type: text/plain", out)
            self.assertTrue(out.endswith(b"\r\n\r\nHello! You requested /some/path"), out)
        finally:
            p.kill()
            p.wait(10)
            p.stdout.close()

    def test_sharded_server(self):
        ns = {}
        exec(compile(ephemeral(SHARDED), "sharded", "exec"), ns)
        mgr, runner = ns["mgr"], ns["runner"]
        try:
            port = port_of(mgr)
            for i in range(20):
                self.assertEqual(get(port, "/%d" % i)[::2], (200, b"OK\n"))
            rc, out = curl("http://127.0.0.1:%d/" % port)
            self.assertTrue(out.endswith(b"\r\n\r\nOK\n"), out)
        finally:
            mgr.stop()  # "mgr.stop() to shut down"
            runner.join(30)
        self.assertFalse(runner.is_alive())
        mgr.close()

    def test_websocket_upgrade(self):
        ns = {"nanosrv": nanosrv}
        exec(compile(ephemeral(WEBSOCKET), "websocket", "exec"), ns)
        with ServerThread(ns["mgr"]) as mgr:
            # As in nanosrv, data.data is bytes, so the f-string shows b'...'.
            self.assertEqual(ws_talk(port_of(mgr), "/", ["hello", "x y"]), ["echo: b'hello'", "echo: b'x y'"])

    def test_utilities(self):
        ns = {}
        exec(compile(UTILITIES, "utilities", "exec"), ns)
        checked = 0
        for line in UTILITIES.splitlines():
            code, _, comment = line.partition("#")
            if code.strip().startswith("nanosrv.") and comment.strip():
                self.assertEqual(eval(code, ns), eval(comment, ns), line)
                checked += 1
            elif line.startswith("# u."):
                for part in line[2:].split(", "):
                    attr, _, want = part.partition("=")
                    self.assertEqual(eval(attr, ns), eval(want, ns), part)
                    checked += 1
        self.assertEqual(checked, 12)


class SeedApi(unittest.TestCase):
    def setUp(self):
        self.m = nanosrv.Manager()

    def tearDown(self):
        self.m.close()

    def test_enums(self):
        E = nanosrv.Event
        self.assertEqual([(e.name, int(e)) for e in E],
                         [("Error", 0), ("Open", 1), ("Poll", 2), ("Resolve", 3), ("Connect", 4), ("Accept", 5),
                          ("TlsHandshake", 6), ("Read", 7), ("Write", 8), ("Close", 9), ("HttpHeaders", 10),
                          ("HttpMessage", 11), ("WsOpen", 12), ("WsMessage", 13), ("WsControl", 14),
                          ("Wakeup", 20), ("User", 100)])
        self.assertEqual([(e.name, int(e)) for e in nanosrv.WsOpcode],
                         [("Continue", 0), ("Text", 1), ("Binary", 2), ("Close", 8), ("Ping", 9), ("Pong", 10)])
        L = nanosrv.LogLevel
        self.assertEqual([(e.name, int(e)) for e in L],
                         [("Off", 0), ("Error", 1), ("Info", 2), ("Debug", 3), ("Verbose", 4)])
        self.assertIs(getattr(L, "None"), L.Off)
        self.assertIs(L["None"], L.Off)
        try:
            nanosrv.set_log_level(L.Off)
            self.assertIs(nanosrv.get_log_level(), L.Off)
        finally:
            nanosrv.set_log_level(L.Error)

    def test_connection_ref(self):
        ref = self.m.http_listen("http://127.0.0.1:0", lambda c, msg: c.http_reply(200, "", "hi"))
        self.assertIsInstance(ref, nanosrv.ConnectionRef)
        self.assertTrue(ref)
        self.assertGreater(ref.port, 0)
        self.assertIs(ref.http_reply(200, "", "x"), False)  # a listener has no peer
        self.assertIs(ref.send_bytes(b"x"), False)
        with ServerThread(self.m):
            self.assertEqual(get(ref.port)[::2], (200, b"hi"))
            ref.close()
            self.assertFalse(ref)
            # A connection that arrives now is closed without an answer.
            rc, out = curl("http://127.0.0.1:%d/" % ref.port)
            self.assertNotEqual(rc, 0)
            self.assertNotIn(b"hi", out)

    def test_chunked(self):
        def h(conn, msg):
            conn.start_chunked(201, "Content-Type: text/plain\r\n")
            for part in (b"one,", "two,", bytearray(b"three")):
                self.assertTrue(conn.write_chunk(part))
            self.assertTrue(conn.write_chunk(b""))  # ends the stream
        ref = self.m.http_listen("http://127.0.0.1:0", h)
        with ServerThread(self.m):
            rc, out = curl("--raw", "http://127.0.0.1:%d/" % ref.port)
            self.assertIn(b"HTTP/1.1 201", out)
            self.assertIn(b"Transfer-Encoding: chunked", out)
            self.assertTrue(out.endswith(b"4\r\none,\r\n4\r\ntwo,\r\n5\r\nthree\r\n0\r\n\r\n"), out)
            status, _, body = get(ref.port)  # keep-alive still framed right
            self.assertEqual((status, body), (201, b"one,two,three"))

    def test_sse(self):
        def h(conn, msg):
            conn.start_sse()
            conn.sse_send("hello")
            conn.sse_send("a\nb", event="multi", id="7", retry=1500)
            conn.sse_send(b"bytes too")
            with self.assertRaises(ValueError):
                conn.sse_send("x", event="bad\r\ndata: injected")
            conn.write_chunk(b"")
        ref = self.m.http_listen("http://127.0.0.1:0", h)
        with ServerThread(self.m):
            rc, out = curl("-N", "http://127.0.0.1:%d/" % ref.port)
        self.assertIn(b"Content-Type: text/event-stream", out)
        body = out.split(b"\r\n\r\n", 1)[1]
        self.assertEqual(body, b"data: hello\n\nevent: multi\nid: 7\nretry: 1500\ndata: a\ndata: b\n\n"
                               b"data: bytes too\n\n")
        self.assertNotIn(b"injected", body)

    def test_metrics_and_num_connections(self):
        ref = self.m.http_listen("http://127.0.0.1:0", lambda c, msg: c.http_reply(200, "", "ok"))
        self.assertEqual(self.m.num_connections, 0)
        with ServerThread(self.m):
            idle = [socket.create_connection(("127.0.0.1", ref.port)) for _ in range(3)]
            try:
                # Counted by the library although no request came yet.
                self.assertTrue(wait_for(lambda: self.m.num_connections == 3), self.m.num_connections)
                self.assertEqual(self.m.metrics.accepted, 0)
                get(ref.port)
                self.assertTrue(wait_for(lambda: self.m.metrics.closed == 1))
                met = self.m.metrics
                self.assertEqual((met.accepted, met.closed, met.errors), (1, 1, 0))
                self.assertEqual(met.active, self.m.num_connections)
            finally:
                for s in idle:
                    s.close()
            self.assertTrue(wait_for(lambda: self.m.num_connections == 0), self.m.num_connections)

    def test_start_drain(self):
        started = threading.Event()
        release = threading.Event()

        def h(conn, msg):
            if msg.uri == "/slow":
                started.set()
                self.m.start_drain()
                conn.http_reply(200, "", "finished")
        ref = self.m.http_listen("http://127.0.0.1:0", h)
        out = []
        t = threading.Thread(target=lambda: out.append(get(ref.port, "/slow")))
        t.start()
        n = 0
        while n < 10000 and self.m.poll(100) >= 0:
            n += 1
        t.join(30)
        release.set()
        self.assertTrue(started.is_set())
        self.assertEqual(out[0][::2], (200, b"finished"))
        self.assertEqual(self.m.num_connections, 0)
        self.assertFalse(ref)
        self.assertLess(n, 10000)

    def test_connection_state_close_and_drain(self):
        big = b"x" * (8 << 20)
        seen = {}

        def h(conn, msg):
            seen[msg.uri] = (conn.is_listening, conn.is_client, conn.is_accepted, conn.is_tls,
                             conn.is_closing, conn.send_queue_len)
            conn.http_reply(200, "", big)
            if msg.uri == "/close":
                conn.close()      # now: the queued reply is dropped
            else:
                conn.drain()      # once flushed
            seen[msg.uri + "/closing"] = conn.is_closing
        ref = self.m.http_listen("http://127.0.0.1:0", h)
        with ServerThread(self.m):
            self.assertEqual(get(ref.port, "/drain")[::2], (200, big))
            try:
                status, _, body = get(ref.port, "/close")
                got = len(body)
            except (http.client.HTTPException, ConnectionError):
                got = -1
            self.assertLess(got, len(big))
        self.assertEqual(seen["/drain"], (False, False, True, False, False, 0))
        self.assertTrue(seen["/drain/closing"] and seen["/close/closing"])

    def test_send_bytes_raw_response(self):
        def h(conn, msg):
            if msg.uri == "/cl":
                self.assertTrue(conn.send_bytes(b"HTTP/1.1 202 Accepted\r\nX-Raw: 1\r\nContent-"))
                self.assertTrue(conn.send_bytes(b"Length: 5\r\n\r\nhel"))
                self.assertTrue(conn.send_bytes("lo"))
            else:  # no Content-Length: the body ends at drain()
                conn.send_bytes(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil ")
                conn.send_bytes(b"drain")
                conn.drain()
        ref = self.m.http_listen("http://127.0.0.1:0", h)
        with ServerThread(self.m):
            rc, out = curl("http://127.0.0.1:%d/cl" % ref.port)
            self.assertIn(b"HTTP/1.1 202", out)
            self.assertIn(b"X-Raw: 1", out)
            self.assertTrue(out.endswith(b"\r\n\r\nhello"), out)
            rc, out = curl("http://127.0.0.1:%d/eof" % ref.port)
            self.assertEqual(rc, 0)
            self.assertTrue(out.endswith(b"\r\n\r\nuntil drain"), out)

    def test_bodies_bytes_and_text(self):
        got = []

        def h(conn, msg):
            got.append(msg.body)
            try:
                got.append(msg.text)
            except UnicodeDecodeError:
                got.append("not utf-8")
            conn.http_reply(200, "", msg.body)
        ref = self.m.http_listen("http://127.0.0.1:0", h)
        with ServerThread(self.m):
            self.assertEqual(get(ref.port, "/", "POST", "héllo".encode())[2], "héllo".encode())
            self.assertEqual(get(ref.port, "/", "POST", b"\xff\x00")[2], b"\xff\x00")
        self.assertEqual(got, ["héllo".encode(), "héllo", b"\xff\x00", "not utf-8"])

    def test_websocket_messages(self):
        seen = []

        def h(conn, ev, data):
            if ev == nanosrv.Event.HttpMessage:
                conn.ws_upgrade(data, "")
            elif ev == nanosrv.Event.WsMessage:
                seen.append((data.data, data.opcode, data.flags))
                n = conn.ws_send_text(data.text) if data.opcode == nanosrv.WsOpcode.Text \
                    else conn.ws_send_binary(data.data * 100)
                seen.append(n)
        ref = self.m.http_listen_event("http://127.0.0.1:0", h)
        with ServerThread(self.m):
            self.assertEqual(ws_talk(ref.port, "/", ["héllo", b"\x01\x02"]), ["héllo", b"\x01\x02" * 100])
        t = nanosrv.WsOpcode
        self.assertEqual(seen, [("héllo".encode(), t.Text, 0x81), 2 + 6,
                                (b"\x01\x02", t.Binary, 0x82), 4 + 200])
        self.assertIsInstance(seen[0][1], nanosrv.WsOpcode)

    def test_limits_zero_disables(self):
        m = self.m
        for name in ("idle_timeout", "request_timeout", "max_body_size", "max_connections", "max_send_buffer",
                     "connect_timeout"):
            getattr(m, "set_" + name)(0)
            self.assertEqual(getattr(m, name), 0, name)
        m.set_max_body_size(10)
        self.assertEqual(m.max_body_size, 10)
        with self.assertRaises(ValueError):
            m.set_max_connections(-1)
        m.set_max_body_size(0)
        ref = m.http_listen("http://127.0.0.1:0", lambda c, msg: c.http_reply(200, "", str(len(msg.body))))
        with ServerThread(m):  # past the library's 1 MiB default
            self.assertEqual(get(ref.port, "/", "POST", b"y" * (3 << 20))[::2], (200, b"%d" % (3 << 20)))

    def test_url_decode_bytes(self):
        self.assertEqual(nanosrv.url_decode_bytes("%ff%00a%20b"), b"\xff\x00a b")
        self.assertEqual(nanosrv.url_decode_bytes(b"a+b", form=True), b"a b")
        with self.assertRaises(ValueError):
            nanosrv.url_decode_bytes("%zz")

    def test_wakeup(self):
        if not nanosrv.has("nsv_wakeup_conn") or lib.nsv_wakeup_conn(self.m._srv, 1, b"", 0) == lib.NSV_ENOTSUP:
            self.skipTest("the loaded libnanosrv answers nsv_wakeup_conn with NSV_ENOTSUP")
        ids = []
        got = []

        def h(conn, ev, data):
            if ev == nanosrv.Event.HttpMessage:
                ids.append(conn.id)  # answered later, from the wakeup
            elif ev == nanosrv.Event.Wakeup:
                got.append(data)
                conn.http_reply(200, "", b"woken: " + data)
        ref = self.m.http_listen_event("http://127.0.0.1:0", h)
        with ServerThread(self.m):
            out = []
            t = threading.Thread(target=lambda: out.append(get(ref.port)))
            t.start()
            self.assertTrue(wait_for(lambda: ids))
            self.assertTrue(self.m.wakeup(ids[0], b"data\x00from a thread"))
            t.join(30)
            self.assertEqual(out[0][::2], (200, b"woken: data\x00from a thread"))
            self.assertTrue(wait_for(lambda: self.m.metrics.closed == 1 or not self.m.wakeup(ids[0])))
        self.assertEqual(got, [b"data\x00from a thread"])

    def test_header_injection_refused(self):
        evil = "a\r\nSet-Cookie: pwned=1"
        logging.getLogger("nanosrv").setLevel(logging.CRITICAL)  # the 500s are logged; expected here
        self.addCleanup(logging.getLogger("nanosrv").setLevel, logging.NOTSET)

        def h(conn, msg):
            if msg.uri == "/dict":
                return 200, {"X-Echo": evil}, "body"
            if msg.uri == "/pairs":
                return 200, [("X-Echo", evil)], "body"
            if msg.uri == "/name":
                return 200, {"X-Bad\r\nSet-Cookie": "pwned=1"}, "body"
            for headers in ({"X-Echo": evil}, "X-Echo: a\rSet-Cookie: pwned=1\r\n", "X-Echo: a\x00b\r\n"):
                try:
                    conn.http_reply(200, headers, "body")
                    return 200, "sent it"
                except ValueError:
                    pass
            conn.http_reply(200, "X-Echo: fine\r\n", "refused all")
        ref = self.m.http_listen("http://127.0.0.1:0", h)
        with ServerThread(self.m):
            for path in ("/dict", "/pairs", "/name"):
                rc, out = curl("http://127.0.0.1:%d%s" % (ref.port, path))
                self.assertIn(b"HTTP/1.1 500", out, path)
                self.assertNotIn(b"pwned", out, path)
            rc, out = curl("http://127.0.0.1:%d/block" % ref.port)
            self.assertNotIn(b"pwned", out)
            self.assertTrue(out.endswith(b"refused all"), out)


class SeedSharded(unittest.TestCase):
    def test_drain_returns_at_once_and_run_ends(self):
        mgr = nanosrv.ShardedManager(num_threads=2)
        self.assertEqual(mgr.num_workers, 2)
        held = []
        mgr.http_listen("http://127.0.0.1:0", lambda c, msg: held.append(c) if msg.uri == "/held"
                        else c.http_reply(200, "", "ok"))
        port = port_of(mgr)
        runner = threading.Thread(target=mgr.run, daemon=True)
        runner.start()
        try:
            self.assertEqual(get(port)[::2], (200, b"ok"))
            out = []
            t = threading.Thread(target=lambda: out.append(get(port, "/held")))
            t.start()
            self.assertTrue(wait_for(lambda: held))
            mgr.drain(0)  # returns although a request is still in flight
            self.assertTrue(runner.is_alive())
            held[0].http_reply(200, "", "late but answered")
            t.join(30)
            runner.join(30)
            self.assertFalse(runner.is_alive())
            self.assertEqual(out[0][::2], (200, b"late but answered"))
        finally:
            mgr.stop()
            runner.join(10)
            mgr.close()

    def test_poll_worker_threads_do_not_share_buffers(self):
        mgr = nanosrv.ShardedManager(2)
        mgr.http_listen("http://127.0.0.1:0", lambda c, msg: c.http_reply(200, "", msg.uri.encode() + msg.body))
        port = port_of(mgr)
        stop = threading.Event()

        def worker(i):
            n = 0
            while not stop.is_set() and n < 1000000:
                mgr.poll_worker(i, 20)
                n += 1
        threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(2)]
        for t in threads:
            t.start()
        bad = []

        def client(k):
            for j in range(40):
                path = "/c%d/%d" % (k, j)
                body = os.urandom(1 + (k * 997 + j * 131) % 20000)
                status, _, got = get(port, path, "POST", body)
                if (status, got) != (200, path.encode() + body):
                    bad.append(path)
        try:
            clients = [threading.Thread(target=client, args=(k,)) for k in range(6)]
            for c in clients:
                c.start()
            for c in clients:
                c.join(120)
            self.assertEqual(bad, [])
        finally:
            stop.set()
            for t in threads:
                t.join(10)
            mgr.close()


if __name__ == "__main__":
    _tap.main()
