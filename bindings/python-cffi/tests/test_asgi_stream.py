"""nanosrv.asgi, backpressure both ways: a 64 MiB streamed response to a
client that reads slowly keeps the server's memory flat (send() waits),
and a 32 MiB upload to an app that reads slowly pauses the client (the
body buffer stays bounded) and arrives intact. A client that leaves while
send() waits ends the app's task."""
import asyncio
import hashlib
import logging
import os
import socket
import time
import unittest

import _tap
from test_asgi_http import AppServer, LogCapture, wait_for

logging.getLogger("nanosrv").setLevel(logging.CRITICAL)

MiB = 1 << 20


def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class Download(unittest.TestCase):
    def test_64mib_to_a_slow_reader_keeps_memory_flat(self):
        chunk = b"z" * (64 * 1024)
        total = 64 * MiB
        waits = []
        queued = [0]
        server = None

        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/octet-stream")]})
            loop = asyncio.get_running_loop()
            for _ in range(total // len(chunk)):
                t = loop.time()
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                if loop.time() - t > 0.001:
                    waits.append(1)
                for c in server.m._conns.values():  # test introspection: the library's queue
                    queued[0] = max(queued[0], c.send_queue_len)
            await send({"type": "http.response.body", "body": b""})

        with AppServer(app) as s:
            server = s
            sock = socket.create_connection(("127.0.0.1", s.port), 10)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            base = rss()
            peak = base
            got = 0
            head = b""
            end = time.monotonic() + 120
            n = 0
            while time.monotonic() < end:
                b = sock.recv(256 * 1024)
                if not b:
                    break
                if not head:
                    head, _, b = b.partition(b"\r\n\r\n")
                got += len(b)
                n += 1
                if n % 4 == 0:
                    peak = max(peak, rss())
                    time.sleep(0.01)  # a slow reader: ~100 MB/s at most
            sock.close()
        self.assertIn(b"Transfer-Encoding: chunked", head)
        # the body is chunked: 64 KiB of data plus the framing per chunk
        self.assertGreater(got, total)
        self.assertLess(got, total + 1024 * 16)
        self.assertLess(queued[0], 512 * 1024, "%d bytes queued for the client" % queued[0])
        if "libasan" not in os.environ.get("LD_PRELOAD", ""):  # ASan's quarantine keeps freed memory
            self.assertLess(peak - base, 12 * MiB, "server memory grew by %d bytes" % (peak - base))
        self.assertGreater(len(waits), 10, "send() never waited for the client")

    def test_client_leaving_while_send_waits_ends_the_task(self):
        state = []

        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            await send({"type": "http.response.start", "status": 200, "headers": []})
            try:
                for _ in range(100000):
                    await send({"type": "http.response.body", "body": b"y" * 65536, "more_body": True})
            except OSError as e:
                state.append(type(e).__name__)
                raise
            state.append("finished?")

        with LogCapture() as logs, AppServer(app) as s:
            sock = socket.create_connection(("127.0.0.1", s.port), 10)
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            sock.recv(65536)
            time.sleep(0.3)
            sock.close()
            wait_for(lambda: state, "the app to see the client leave")
            wait_for(lambda: not s.m._conns, "the connection to close")
        self.assertEqual(state, ["ClientDisconnected"])
        self.assertNotIn("Exception in ASGI application", logs.text())


class Upload(unittest.TestCase):
    def test_32mib_upload_to_a_slow_app_is_paused_and_intact(self):
        total = 32 * MiB
        result = []
        server = None

        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            h = hashlib.sha256()
            n = 0
            pieces = 0
            biggest = 0
            while True:
                m = await receive()
                h.update(m["body"])
                n += len(m["body"])
                biggest = max(biggest, len(m["body"]))
                pieces += 1
                if not m["more_body"]:
                    break
                if pieces % 8 == 0:
                    await asyncio.sleep(0.002)  # a slow consumer
            # the connection's BodyStream (test introspection): bounded, and paused
            st = [c._body for c in server.m._conns.values() if c._body is not None and c._body.received]
            result.append((n, h.hexdigest(), biggest, st[0].peak, st[0].pauses))
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"%d" % n})

        data = bytes(range(256)) * (total // 256)
        with AppServer(app, body_buffer=MiB) as s:
            server = s
            base = rss()
            st, _, body = s.get("/up", "POST", data, timeout=60)
            grew = rss() - base
        self.assertEqual((st, body), (200, b"%d" % total))
        n, digest, biggest, peak, pauses = result[0]
        self.assertEqual((n, digest), (total, hashlib.sha256(data).hexdigest()))
        # receive() hands over what is buffered: never much more than the buffer
        self.assertLessEqual(biggest, 2 * MiB)
        self.assertLessEqual(peak, 2 * MiB)
        self.assertGreater(pauses, 0, "reading from the client never paused")
        if "libasan" not in os.environ.get("LD_PRELOAD", ""):  # ASan's quarantine keeps freed memory
            self.assertLess(grew, 24 * MiB, "memory grew by %d bytes" % grew)


if __name__ == "__main__":
    _tap.main()
