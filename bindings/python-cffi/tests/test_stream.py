"""Streamed request bodies (msg.stream): synchronous and asyncio consumers,
backpressure that really pauses the client, early answers, limits and a
client that leaves mid-body. Real clients: http.client and raw sockets on
loopback; every wait is a bounded loop."""
import asyncio
import hashlib
import http.client
import logging
import os
import select
import socket
import threading
import time
import unittest

import _tap

import nanosrv

logging.getLogger("nanosrv").setLevel(logging.CRITICAL)


def wait_for(cond, what, seconds=30):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError("timed out waiting for " + what)


def pieces(total, block):
    sent = 0
    while sent < total:
        b = block[:min(len(block), total - sent)]
        sent += len(b)
        yield b


def digest_of(total, block):
    h = hashlib.sha256()
    for b in pieces(total, block):
        h.update(b)
    return h.hexdigest()


def post(port, path, body, headers=None, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = headers or {}
    c.request("POST", path, body=body, headers=headers, encode_chunked="Transfer-Encoding" in headers)
    r = c.getresponse()
    out = r.status, r.read()
    c.close()
    return out


class AsyncServer:
    """An asyncio host in its own thread (the test thread is the client)."""

    def __init__(self, setup):
        self.setup = setup
        self.ready = threading.Event()
        self.t = threading.Thread(target=lambda: asyncio.run(self.main()), daemon=True)

    async def main(self):
        self.loop = asyncio.get_running_loop()
        self.m = nanosrv.Manager()
        self.setup(self.m)
        self.port = self.m.http_listen("http://127.0.0.1:0").port
        done = nanosrv.aio.attach(self.m)
        self.ready.set()
        await done
        self.m.close()

    def call(self, fn):
        self.loop.call_soon_threadsafe(fn)

    def __enter__(self):
        self.t.start()
        self.ready.wait(10)
        return self

    def __exit__(self, *exc):
        self.loop.call_soon_threadsafe(self.m.stop)
        self.t.join(10)


class Sync(unittest.TestCase):
    def test_large_chunked_upload_read_synchronously(self):
        m = nanosrv.Manager()
        m.set_max_body_size(128 << 20)
        seen = {}

        @m.post("/sum", stream=True)
        def total(conn, msg):
            h = hashlib.sha256()
            for chunk in msg.stream:
                h.update(chunk)
            seen["peak"] = msg.stream.peak
            return {"n": msg.stream.received, "sha256": h.hexdigest(), "streamed": msg.streamed}
        m.route("GET", "/hi", lambda c, msg: "hi")
        lst = m.http_listen("http://127.0.0.1:0")
        total_len, block = 96 << 20, os.urandom(1 << 20)
        with _tap.ServerThread(m):
            # http.client sends a generator chunked: the binding sees BODY events.
            st, body = post(lst.port, "/sum", pieces(total_len, block), {"Transfer-Encoding": "chunked"})
            self.assertEqual(st, 200)
            import json
            self.assertEqual(json.loads(body), {"n": total_len, "sha256": digest_of(total_len, block),
                                                "streamed": True})
            self.assertLessEqual(seen["peak"], m.body_buffer + (1 << 20))
            # A bodiless request on a stream route: an empty stream at its end.
            c = http.client.HTTPConnection("127.0.0.1", lst.port, timeout=10)
            c.request("POST", "/sum", body=b"")
            self.assertEqual(c.getresponse().read(), b'{"n":0,"sha256":"%s","streamed":false}'
                             % hashlib.sha256(b"").hexdigest().encode())
            c.close()

    def test_other_clients_served_while_a_body_is_read(self):
        m = nanosrv.Manager()
        state = {}

        @m.post("/slow", stream=True)
        def slow(conn, msg):
            state["reading"] = True
            data = msg.stream.read()
            return b"got %d" % len(data)
        m.route("GET", "/hi", lambda c, msg: "hi")
        lst = m.http_listen("http://127.0.0.1:0")
        with _tap.ServerThread(m):
            s = socket.create_connection(("127.0.0.1", lst.port), timeout=10)
            s.sendall(b"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345")
            wait_for(lambda: state.get("reading"), "the handler to start reading")
            c = http.client.HTTPConnection("127.0.0.1", lst.port, timeout=10)
            c.request("GET", "/hi")
            self.assertEqual(c.getresponse().read(), b"hi")  # served by the stream's nested poll
            c.close()
            s.sendall(b"67890")
            resp = s.recv(4096)
            self.assertTrue(resp.startswith(b"HTTP/1.1 200") and resp.endswith(b"got 10"), resp)
            s.close()

    def test_whole_body_routes_unchanged_and_stream_of_whole_body(self):
        m = nanosrv.Manager()
        m.route("POST", "/whole", lambda c, msg: (200, b"".join(msg.stream) + b"|%d" % msg.body_len))
        lst = m.http_listen("http://127.0.0.1:0")
        with _tap.ServerThread(m):
            self.assertEqual(post(lst.port, "/whole", b"abc"), (200, b"abc|3"))
        # The option streams every request's body.
        m = nanosrv.Manager()
        m.set_option("stream_body", 1)
        m.route("POST", "/routed", lambda c, msg: (200, b"routed %s" % msg.stream.read()))
        m.set_option("stream_body", 1)  # after the route: registered handlers stream too
        lst = m.http_listen("http://127.0.0.1:0", lambda c, msg: (200, b"%d:%s" % (msg.body_len, msg.stream.read())))
        with _tap.ServerThread(m):
            self.assertEqual(post(lst.port, "/any", b"abcdef"), (200, b"0:abcdef"))
            self.assertEqual(post(lst.port, "/routed", b"xyz"), (200, b"routed xyz"))

    def test_early_answer_before_the_body(self):
        m = nanosrv.Manager()
        m.set_max_body_size(1 << 30)
        read = []

        @m.post("/limited", stream=True)
        def limited(conn, msg):
            if int(msg.header("content-length") or 0) > 1 << 20:
                return 413, {"Content-Type": "text/plain"}, "too big\n"
            read.append(msg.stream.read())
            return "ok"
        lst = m.http_listen("http://127.0.0.1:0")
        with _tap.ServerThread(m):
            s = socket.create_connection(("127.0.0.1", lst.port), timeout=10)
            s.sendall(b"POST /limited HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\n"
                      b"Expect: 100-continue\r\n\r\n")
            head = b""
            while b"too big\n" not in head:
                d = s.recv(4096)
                if not d:
                    break
                head += d
            # The 413 comes first: no "100 Continue" invited the 100 MiB.
            self.assertTrue(head.startswith(b"HTTP/1.1 413"), head)
            s.close()
            self.assertEqual(post(lst.port, "/limited", b"small"), (200, b"ok"))
            self.assertEqual(read, [b"small"])

    def test_limits_and_client_leaving_raise_in_the_reader(self):
        m = nanosrv.Manager()
        m.set_max_body_size(100000)
        errors = []

        @m.post("/read", stream=True)
        def reader(conn, msg):
            try:
                for _ in msg.stream:
                    pass
            except nanosrv.BodyError as e:
                errors.append((type(e).__name__, e.name))
                raise
            return "read"
        lst = m.http_listen("http://127.0.0.1:0")
        with _tap.ServerThread(m):
            # Chunked past max_body: the library answers 413, the reader raises.
            s = socket.create_connection(("127.0.0.1", lst.port), timeout=10)
            s.sendall(b"POST /read HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
            try:
                for _ in range(20):
                    s.sendall(b"8000\r\n" + b"x" * 0x8000 + b"\r\n")
            except OSError:
                pass  # the server may close while we still send
            resp = s.recv(4096)
            s.close()
            self.assertTrue(resp.startswith(b"HTTP/1.1 413"), resp)
            wait_for(lambda: errors, "the reader's error")
            self.assertEqual(errors.pop(), ("BodyError", "NSV_ETOOBIG"))
            # The client leaves mid-body.
            s = socket.create_connection(("127.0.0.1", lst.port), timeout=10)
            s.sendall(b"POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 50000\r\n\r\n" + b"y" * 1000)
            time.sleep(0.05)  # let the head arrive alone (either order must work)
            s.close()
            wait_for(lambda: errors, "the reader's error")
            self.assertEqual(errors.pop(), ("Disconnected", "NSV_ECLOSED"))
            # Malformed chunking.
            s = socket.create_connection(("127.0.0.1", lst.port), timeout=10)
            s.sendall(b"POST /read HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
            resp = s.recv(4096)
            s.close()
            self.assertTrue(resp.startswith(b"HTTP/1.1 400"), resp)
            wait_for(lambda: errors, "the reader's error")
            self.assertEqual(errors.pop(), ("BodyError", "NSV_EPARSE"))
            self.assertEqual(post(lst.port, "/read", b"fine"), (200, b"read"))


class Async(unittest.TestCase):
    def test_slow_consumer_pauses_the_client(self):
        state = {"go": None, "stream": None}
        total, block = 64 << 20, os.urandom(1 << 16)

        def setup(m):
            m.set_max_body_size(128 << 20)
            m.body_buffer = 256 << 10

            @m.post("/slow", stream=True)
            async def slow(conn, msg):
                state["stream"] = msg.stream
                state["go"] = asyncio.Event()
                await state["go"].wait()
                h = hashlib.sha256()
                async for chunk in msg.stream:
                    h.update(chunk)
                return {"sha256": h.hexdigest(), "pauses": msg.stream.pauses}

        with AsyncServer(setup) as srv:
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 16)
            s.sendall(b"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % total)
            s.setblocking(False)
            data = b"".join(pieces(total, block))
            sent = 0
            stuck = False
            end = time.monotonic() + 60
            # Send until the socket stays full while the server says it paused.
            while time.monotonic() < end and sent < total:
                try:
                    sent += s.send(data[sent:sent + (1 << 16)])
                    continue
                except BlockingIOError:
                    pass
                st = state["stream"]
                _, w, _ = select.select([], [s], [], 0.5)
                if not w and st is not None and st.paused:
                    stuck = True
                    break
            st = state["stream"]
            self.assertTrue(stuck, "the client was never held back (sent %d of %d)" % (sent, total))
            self.assertLess(sent, total)
            self.assertTrue(st.paused)
            self.assertLessEqual(st.buffered, (256 << 10) + (1 << 20))  # a bounded buffer, not the body
            buffered_when_stuck = st.buffered
            srv.call(state["go"].set)
            s.setblocking(True)
            s.sendall(data[sent:])
            resp = b""
            while not resp.endswith(b"}"):
                d = s.recv(4096)
                if not d:
                    break
                resp += d
            s.close()
            import json
            out = json.loads(resp.split(b"\r\n\r\n", 1)[1])
            self.assertEqual(out["sha256"], hashlib.sha256(data).hexdigest())
            self.assertGreaterEqual(out["pauses"], 1)
            self.assertLess(buffered_when_stuck, total // 8)

    def test_aread_and_disconnect(self):
        got = []

        def setup(m):
            @m.post("/parts", stream=True)
            async def parts(conn, msg):
                first = await msg.stream.aread(3)
                rest = await msg.stream.aread()
                return b"%s|%s" % (first, rest)

            @m.post("/gone", stream=True)
            async def gone(conn, msg):
                try:
                    async for _ in msg.stream:
                        pass
                except nanosrv.Disconnected as e:
                    got.append(e.name)

        with AsyncServer(setup) as srv:
            self.assertEqual(post(srv.port, "/parts", pieces(10000, b"abcdefgh" * 100),
                                  {"Transfer-Encoding": "chunked"})[1][:8], b"abc|defg")
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            s.sendall(b"POST /gone HTTP/1.1\r\nHost: x\r\nContent-Length: 9999\r\n\r\nabc")
            s.close()
            wait_for(lambda: got, "the reader's Disconnected")
            self.assertEqual(got, ["NSV_ECLOSED"])


if __name__ == "__main__":
    _tap.main()
