"""Threads and a single-loop Manager: use from a foreign thread is refused
with a clear error instead of corrupting the heap, call_soon_threadsafe
hands work to the polling thread, and close() from another thread while the
loop runs stops it first (the "server in a thread, close in teardown"
pattern that used to segfault)."""
import concurrent.futures
import http.client
import logging
import os
import subprocess
import sys
import threading
import time
import unittest

import _tap

import nanosrv

logging.getLogger("nanosrv").setLevel(logging.CRITICAL)


def get(port, path="/", timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("GET", path)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def quiet_get(port):
    try:
        get(port, timeout=2)
    except OSError:
        pass  # no answer is expected


def wait_for(cond, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


class Runner:
    """run() in a thread; the test thread is a foreign one."""

    def __init__(self, m):
        self.m = m
        self.exc = []
        self.t = threading.Thread(target=self._run, name="loop", daemon=True)

    def _run(self):
        try:
            self.m.run(50)
        except BaseException as e:  # reported by the test
            self.exc.append(e)

    def __enter__(self):
        self.t.start()
        wait_for(lambda: self.m._tid is not None)
        return self.m

    def __exit__(self, *exc):
        self.m.stop()
        self.t.join(10)
        self.m.close()


class ForeignThreads(unittest.TestCase):
    def test_poll_from_a_second_thread_is_refused(self):
        m = nanosrv.Manager()
        m.http_listen("http://127.0.0.1:0", lambda c, msg: c.http_reply(200, "", "x"))
        with Runner(m):
            with self.assertRaises(nanosrv.StateError) as cm:
                m.poll(0)
            text = str(cm.exception)
            self.assertIn("'loop'", text)  # names the owning thread
            self.assertIn("call_soon_threadsafe", text)
            self.assertIn("ShardedManager", text)
            with self.assertRaises(nanosrv.StateError):
                m.run(10)

    def test_reply_from_an_executor_is_refused_not_corrupting(self):
        pool = concurrent.futures.ThreadPoolExecutor(4)
        self.addCleanup(pool.shutdown)
        m = nanosrv.Manager()
        errors = []

        def answer(conn):
            try:
                conn.http_reply(200, "", "from the pool")
            except nanosrv.StateError as e:
                errors.append(str(e))
                # what the message says to do instead
                m.call_soon_threadsafe(conn.http_reply, 200, "", "handed over")

        def h(conn, msg):
            pool.submit(answer, conn)
        lst = m.http_listen("http://127.0.0.1:0", h)
        with Runner(m) as m:
            for i in range(30):
                self.assertEqual(get(lst.port, "/%d" % i), (200, b"handed over"))
        self.assertEqual(len(errors), 30)
        self.assertIn("Connection.http_reply() called from thread", errors[0])
        self.assertIn("polled by thread 'loop'", errors[0])

    def test_streamed_reply_from_an_executor(self):
        # The WSGI thread pool's pattern: every call of a streamed answer
        # goes through call_soon_threadsafe, in order.
        pool = concurrent.futures.ThreadPoolExecutor(4)
        self.addCleanup(pool.shutdown)
        m = nanosrv.Manager()

        def work(conn, n):
            m.call_soon_threadsafe(conn.reply_start, 200, "Content-Type: text/plain\r\n")
            for i in range(n):
                m.call_soon_threadsafe(conn.send_chunk, "%d," % i)
            m.call_soon_threadsafe(conn.reply_end)

        def h(conn, msg):
            pool.submit(work, conn, int(msg.uri[1:]))
        lst = m.http_listen("http://127.0.0.1:0", h)
        with Runner(m):
            for n in (1, 10, 200):
                self.assertEqual(get(lst.port, "/%d" % n), (200, "".join("%d," % i for i in range(n)).encode()))

    def test_call_soon_threadsafe_order_and_errors(self):
        m = nanosrv.Manager()
        m.http_listen("http://127.0.0.1:0")
        seen = []
        with Runner(m):
            for i in range(100):
                m.call_soon_threadsafe(seen.append, i)
            m.call_soon_threadsafe(lambda: 1 / 0)  # logged, does not stop the loop
            m.call_soon_threadsafe(seen.append, "after")
            self.assertTrue(wait_for(lambda: "after" in seen))
            self.assertEqual(seen, list(range(100)) + ["after"])
        with self.assertRaises(TypeError):
            m.call_soon_threadsafe(42)

    def test_callbacks_run_in_the_polling_thread(self):
        m = nanosrv.Manager()
        m.http_listen("http://127.0.0.1:0")
        where = []
        with Runner(m):
            threading.Thread(target=m.call_soon_threadsafe,
                             args=(lambda: where.append(threading.current_thread().name),)).start()
            self.assertTrue(wait_for(lambda: where))
        self.assertEqual(where, ["loop"])

    def test_setup_from_a_foreign_thread_while_polling_is_refused(self):
        m = nanosrv.Manager()
        lst = m.http_listen("http://127.0.0.1:0", lambda c, msg: c.http_reply(200, "", "x"))
        with Runner(m):
            with self.assertRaises(nanosrv.StateError):
                m.route("GET", "/late", lambda c, msg: "late")
            with self.assertRaises(nanosrv.StateError):
                m.http_listen("http://127.0.0.1:0")
            with self.assertRaises(nanosrv.StateError):
                m.set_option("max_body", 1000)
            self.assertEqual(get(lst.port, "/late"), (200, b"x"))  # nothing half-registered

    def test_setup_before_the_first_poll_from_any_thread(self):
        m = nanosrv.Manager()
        ports = []

        def setup():
            m.route("GET", "/a", lambda c, msg: "a")
            ports.append(m.http_listen("http://127.0.0.1:0").port)
        t = threading.Thread(target=setup)
        t.start()
        t.join(10)
        with Runner(m):
            self.assertEqual(get(ports[0], "/a"), (200, b"a"))

    def test_a_late_reply_to_a_closed_connection_is_a_noop_from_any_thread(self):
        m = nanosrv.Manager()
        kept = []
        lst = m.http_listen("http://127.0.0.1:0", lambda c, msg: kept.append(c) or c.http_reply(200, "", "x"))
        with Runner(m):
            get(lst.port)
            self.assertTrue(wait_for(lambda: kept and kept[0].closed))
            self.assertIs(kept[0].http_reply(200, "", "late"), False)

    def test_sharded_replies_from_any_thread_still_work(self):
        pool = concurrent.futures.ThreadPoolExecutor(4)
        self.addCleanup(pool.shutdown)
        m = nanosrv.ShardedManager(2)
        lst = m.http_listen("http://127.0.0.1:0", lambda c, msg: pool.submit(c.http_reply, 200, "", "pool") and None)
        with Runner(m):
            for i in range(30):
                self.assertEqual(get(lst.port), (200, b"pool"))


class CloseWhileRunning(unittest.TestCase):
    def test_close_from_another_thread_stops_the_loop_first(self):
        # 3 of 3 runs segfaulted before: close() freed the server under
        # nsv_poll. Now it stops the loop, waits for it, then frees.
        for i in range(25):
            m = nanosrv.Manager()
            lst = m.http_listen("http://127.0.0.1:0", lambda c, msg: c.http_reply(200, "", "x"))
            exc = []
            t = threading.Thread(target=lambda: exc.extend([None]) if m.run(200) is None else None)
            t.start()
            self.assertTrue(wait_for(lambda: m._tid is not None))
            if i % 5 == 0:
                self.assertEqual(get(lst.port), (200, b"x"))
            m.close()  # no stop() first
            t.join(10)
            self.assertFalse(t.is_alive(), "run() returned after close()")
            self.assertEqual(exc, [None])
            with self.assertRaises(nanosrv.Error):
                m.http_listen("http://127.0.0.1:0")

    def test_close_from_another_thread_with_a_poll_loop(self):
        # A hand-written loop of poll() calls: close() waits for the poll in
        # progress; the next poll sees the closed server and raises, no crash.
        m = nanosrv.Manager()
        m.http_listen("http://127.0.0.1:0")
        out = []

        def loop():
            try:
                for _ in range(10000):
                    if m.poll(50) < 0:
                        out.append("stopped")
                        return
            except nanosrv.Error as e:
                out.append(type(e).__name__)
        t = threading.Thread(target=loop)
        t.start()
        self.assertTrue(wait_for(lambda: m._tid is not None))
        m.close()
        t.join(10)
        self.assertFalse(t.is_alive())
        self.assertEqual(len(out), 1)

    def test_close_gives_up_on_a_blocked_loop(self):
        m = nanosrv.Manager()
        m.close_timeout = 0.3
        release = threading.Event()
        lst = m.http_listen("http://127.0.0.1:0", lambda c, msg: release.wait(10) and c.http_reply(200, "", "x"))
        t = threading.Thread(target=m.run, args=(50,), daemon=True)
        t.start()
        client = threading.Thread(target=quiet_get, args=(lst.port,), daemon=True)
        client.start()
        time.sleep(0.3)  # the handler is now blocking inside poll
        with self.assertRaises(nanosrv.StateError) as cm:
            m.close()
        self.assertIn("still inside poll", str(cm.exception))
        release.set()  # (the loop was stopped: the client gets no answer)
        t.join(10)
        m.close()  # the loop has left: now it frees
        self.assertFalse(t.is_alive())

    def test_close_inside_a_handler(self):
        m = nanosrv.Manager()
        lst = m.http_listen("http://127.0.0.1:0", lambda c, msg: (c.http_reply(200, "", "bye"), m.close()) and None)
        t = threading.Thread(target=m.run, args=(50,), daemon=True)
        t.start()
        try:
            get(lst.port, timeout=2)
        except OSError:
            pass  # the server may go before the answer leaves
        t.join(10)
        self.assertFalse(t.is_alive())

    def test_wakeups_racing_close(self):
        # call_soon_threadsafe and wakeup from other threads while close()
        # frees: never a call on a freed server.
        for _ in range(10):
            m = nanosrv.Manager()
            m.http_listen("http://127.0.0.1:0")
            t = threading.Thread(target=m.run, args=(20,), daemon=True)
            t.start()
            stop = threading.Event()

            def spam():
                for _ in range(2000):
                    if stop.is_set():
                        return
                    m.call_soon_threadsafe(lambda: None)
                    try:
                        m.wakeup()
                    except nanosrv.Error:
                        return  # closed: "the server has been closed"
            spammers = [threading.Thread(target=spam) for _ in range(2)]
            for s in spammers:
                s.start()
            time.sleep(0.02)
            m.close()
            stop.set()
            for s in spammers:
                s.join(10)
            t.join(10)
            self.assertFalse(t.is_alive())


UAF = r"""
import sys, threading, time
import nanosrv
from nanosrv._ffi import ffi, lib
m = nanosrv.Manager()
m.http_listen("http://127.0.0.1:0")
srv = m._srv
evs, arena = ffi.new("nsv_event[]", 16), ffi.new("char[]", 65536)
t = threading.Thread(target=lambda: [lib.nsv_poll(srv, evs, 16, arena, 65536, 5) for _ in range(200)])
t.start()
time.sleep(0.05)
ffi.release(srv)  # what close() did before: free under a running poll
t.join()
"""


class Sanitizer(unittest.TestCase):
    def test_asan_reports_a_free_under_a_running_poll(self):
        # The ASan run of this suite (tests/run, SAN=asan) preloads the
        # sanitizer into the interpreter: the bug close() had must be
        # reported there, or the run proves nothing.
        if "libasan" not in os.environ.get("LD_PRELOAD", ""):
            self.skipTest("not the AddressSanitizer run (tests/run with SAN=asan)")
        env = dict(os.environ, PYTHONPATH=_tap.PKG)
        p = subprocess.run([sys.executable, "-c", UAF], env=env, capture_output=True, text=True, timeout=120)
        self.assertIn("ERROR: AddressSanitizer: heap-use-after-free", p.stderr)
        self.assertNotEqual(p.returncode, 0)


if __name__ == "__main__":
    _tap.main()
