"""Serving from an asyncio loop through nsv_fd, with coroutine handlers."""
import asyncio
import http.client
import logging
import unittest

import _tap

import nanosrv

logging.getLogger("nanosrv").setLevel(logging.CRITICAL)


def fetch(port, path, method="GET", body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request(method, path, body=body)
    r = c.getresponse()
    out = r.status, r.read()
    c.close()
    return out


class Asyncio(unittest.TestCase):
    def serve_and(self, setup, client):
        async def main():
            m = nanosrv.Manager()
            setup(m)
            lst = m.http_listen("http://127.0.0.1:0")
            done = nanosrv.aio.attach(m)
            try:
                return await asyncio.get_running_loop().run_in_executor(None, client, lst.port)
            finally:
                m.stop()
                await asyncio.wait_for(done, 5)
                m.close()
        return asyncio.run(main())

    def test_sync_and_coroutine_handlers(self):
        def setup(m):
            m.route("GET", "/sync", lambda c, msg: "sync")

            @m.route("GET", "/slow/:ms")
            async def slow(conn, msg):
                await asyncio.sleep(int(msg.params["ms"]) / 1000)
                return {"waited": msg.params["ms"], "uri": msg.uri}

            @m.route("POST", "/manual")
            async def manual(conn, msg):
                await asyncio.sleep(0)
                conn.http_reply(201, "", msg.body_bytes[::-1])

            @m.route("GET", "/fail")
            async def fail(conn, msg):
                await asyncio.sleep(0.01)
                raise RuntimeError("async failure")

        def client(port):
            return [fetch(port, "/sync"), fetch(port, "/slow/50"), fetch(port, "/manual", "POST", b"abc"),
                    fetch(port, "/fail"), fetch(port, "/sync")]
        self.assertEqual(self.serve_and(setup, client), [
            (200, b"sync"), (200, b'{"waited":"50","uri":"/slow/50"}'), (201, b"cba"),
            (500, b'{"error":"internal server error"}'), (200, b"sync")])

    def test_concurrent_slow_requests_overlap(self):
        def setup(m):
            @m.route("GET", "/wait")
            async def wait(conn, msg):
                await asyncio.sleep(0.3)
                return "done"

        def client(port):
            import concurrent.futures
            import time
            t = time.time()
            with concurrent.futures.ThreadPoolExecutor(8) as ex:
                res = list(ex.map(lambda _: fetch(port, "/wait"), range(8)))
            return res, time.time() - t
        res, took = self.serve_and(setup, client)
        self.assertEqual(res, [(200, b"done")] * 8)
        self.assertLess(took, 1.5)  # 8 x 0.3 s would be 2.4 s if serialised

    def test_streamed_reply_paced_by_drain(self):
        total, state = 48 << 20, {"pauses": 0}

        def setup(m):
            @m.route("GET", "/big")
            async def big(conn, msg):
                chunk = b"a" * 65536
                conn.reply_start(200, "Content-Type: application/octet-stream\r\n")
                for _ in range(total // len(chunk)):
                    conn.send_chunk(chunk)
                    await asyncio.sleep(0)  # let the server's events in
                    if not conn.writable:
                        state["pauses"] += 1
                        await conn.wait_writable()
                conn.reply_end()

        def client(port):
            import socket
            import time
            s = socket.create_connection(("127.0.0.1", port), timeout=20)
            s.sendall(b"GET /big HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            until = time.time() + 5
            while state["pauses"] == 0 and time.time() < until:
                time.sleep(0.01)  # read nothing until the handler had to wait
            n, tail = 0, b""
            while True:
                d = s.recv(1 << 20)
                if not d:
                    break
                n += len(d)
                tail = (tail + d)[-5:]
            s.close()
            return n, tail
        n, tail = self.serve_and(setup, client)
        self.assertGreater(state["pauses"], 0)
        self.assertGreater(n, total)
        self.assertEqual(tail, b"0\r\n\r\n")

    def test_coroutine_without_asyncio_host_is_500(self):
        m = nanosrv.Manager()

        async def h(conn, msg):
            return "never"
        m.route("GET", "/", h)
        lst = m.http_listen("http://127.0.0.1:0")
        with _tap.ServerThread(m):
            self.assertEqual(fetch(lst.port, "/")[0], 500)

    def test_serve_returns_on_stop(self):
        async def main():
            m = nanosrv.Manager()
            m.http_listen("http://127.0.0.1:0")
            asyncio.get_running_loop().call_later(0.2, m.stop)
            await asyncio.wait_for(nanosrv.aio.serve(m), 5)
            m.close()
            return True
        self.assertTrue(asyncio.run(main()))


if __name__ == "__main__":
    _tap.main()
