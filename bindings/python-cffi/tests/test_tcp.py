#!/usr/bin/python3
"""Raw TCP in the Python binding: examples/tcp_echo.py (random payloads up
to 8 MiB, half-close), examples/tcp_proxy.py in front of it, pause and
resume, water marks, abort, late calls, outbound connect errors, timers
and wakeups."""
import os
import socket
import sys
import threading
import unittest

import _tap
from _net import EXAMPLES, Proc, echo_roundtrip

import nanosrv


def tcp_echo():
    return Proc([sys.executable, os.path.join(EXAMPLES, "tcp_echo.py"), "--port", "0"])


class Examples(unittest.TestCase):
    def test_tcp_echo_payloads_half_close(self):
        with tcp_echo() as p:
            for size in (0, 1, 64, 65536, 1 << 20, 8 << 20):
                data = os.urandom(size)
                # The client shuts its write side; the server sends the
                # rest, then shuts its side: recv sees EOF after it all.
                self.assertEqual(echo_roundtrip(p.port, data, half_close=True), data, size)

    def test_tcp_echo_concurrent(self):
        with tcp_echo() as p:
            datas = [os.urandom(1024 * (i + 1) * 37) for i in range(16)]
            res = [None] * 16

            def one(i):
                res[i] = echo_roundtrip(p.port, datas[i])
            ts = [threading.Thread(target=one, args=(i,)) for i in range(16)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(120)
            self.assertEqual(res, datas)

    def test_tcp_proxy(self):
        with tcp_echo() as up:
            with Proc([sys.executable, os.path.join(EXAMPLES, "tcp_proxy.py"), "--port", "0",
                       "--to", "127.0.0.1:%d" % up.port]) as px:
                for size in (1, 100000, 8 << 20):
                    data = os.urandom(size)
                    self.assertEqual(echo_roundtrip(px.port, data, half_close=True, timeout=120), data, size)


class Loop:
    """A Manager polled in this thread, for a bounded number of turns."""

    def __init__(self):
        self.m = nanosrv.Manager()

    def until(self, cond, turns=400):
        for _ in range(turns):
            if cond():
                return True
            self.m.poll(25)
        return cond()


class Lifecycle(unittest.TestCase):
    def setUp(self):
        self.loop = Loop()
        self.m = self.loop.m

    def tearDown(self):
        self.m.close()

    def test_pause_resume_and_late_calls(self):
        log = []
        conns = []

        class H(nanosrv.TcpHandler):
            def on_open(self, conn):
                conns.append(conn)
                conn.pause_reading()
                log.append("open")

            def on_data(self, conn, data):
                log.append(data)

            def on_close(self, conn):
                log.append("close")
        lst = self.m.tcp_listen("tcp://127.0.0.1:0", H)
        s = socket.create_connection(("127.0.0.1", lst.port), 10)
        s.sendall(b"held back")
        self.assertTrue(self.loop.until(lambda: conns))
        # Paused: the bytes wait, however many turns the loop makes.
        for _ in range(20):
            self.m.poll(10)
        self.assertEqual(log, ["open"])
        self.assertFalse(conns[0].reading)
        conns[0].resume_reading()
        self.assertTrue(self.loop.until(lambda: len(log) > 1))
        self.assertEqual(b"".join(x for x in log if isinstance(x, bytes)), b"held back")
        s.close()
        self.assertTrue(self.loop.until(lambda: "close" in log))
        c = conns[0]
        self.assertTrue(c.closed)
        for call in (lambda: c.write(b"x"), lambda: c.send(b"x"), c.close, c.abort, c.shutdown,
                     c.pause_reading, lambda: c.set_water_marks(10, 5)):
            self.assertIs(call(), False)
        with self.assertRaises(ValueError):
            c.set_water_marks(5, 10)

    def test_calls_after_the_server_is_freed(self):
        conns = []
        lst = self.m.tcp_listen("tcp://127.0.0.1:0", type("H", (nanosrv.TcpHandler,), {
            "on_open": lambda self, conn: conns.append(conn)}))
        s = socket.create_connection(("127.0.0.1", lst.port), 10)
        self.assertTrue(self.loop.until(lambda: conns))
        self.m.close()
        # The server is gone: the connection is closed, its calls are late calls.
        self.assertTrue(conns[0].closed)
        self.assertIs(conns[0].write(b"x"), False)
        self.assertIs(conns[0].close(), False)
        s.close()

    def test_abort_resets_and_shutdown_half_closes(self):
        conns = []

        class H(nanosrv.TcpHandler):
            def on_open(self, conn):
                conns.append(conn)

            def on_eof(self, conn):
                conn.write(b"bye")
                conn.shutdown()
        lst = self.m.tcp_listen("tcp://127.0.0.1:0", H)
        a = socket.create_connection(("127.0.0.1", lst.port), 10)
        self.assertTrue(self.loop.until(lambda: conns))
        conns[0].write(b"x" * 100000)
        conns[0].abort()
        a.settimeout(10)
        got_reset = False
        for _ in range(100):
            self.m.poll(10)
            try:
                if not a.recv(1 << 16):
                    break
            except ConnectionResetError:
                got_reset = True
                break
            except socket.timeout:
                break
        self.assertTrue(got_reset, "abort must reset the connection")
        a.close()
        b = socket.create_connection(("127.0.0.1", lst.port), 10)
        b.sendall(b"hi")
        b.shutdown(socket.SHUT_WR)
        b.settimeout(0.05)
        got = b""
        for _ in range(400):
            self.m.poll(10)
            try:
                d = b.recv(100)
            except socket.timeout:
                continue
            if not d:
                break
            got += d
        self.assertEqual(got, b"bye")
        b.close()

    def test_writable_events_and_water_marks(self):
        ev = []
        lsock = socket.socket()
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(1)

        class H(nanosrv.TcpHandler):
            def on_open(self, conn):
                conn.set_water_marks(8192, 1024)
                ev.append("open")
                for _ in range(256):
                    conn.write(b"y" * 65536)  # 16 MiB: more than the limit; Python keeps the rest

            def on_writable(self, conn, ok):
                ev.append(ok)
        c = self.m.connect("tcp://127.0.0.1:%d" % lsock.getsockname()[1], H)
        self.assertTrue(c.is_client)
        peer, _ = lsock.accept()
        self.assertTrue(self.loop.until(lambda: False in ev))
        self.assertGreater(c.pending, 0)
        self.assertGreater(c.queued(), c.pending)
        peer.setblocking(False)
        total = 0
        for _ in range(4000):
            self.m.poll(5)
            try:
                while True:
                    d = peer.recv(1 << 20)
                    if not d:
                        break
                    total += len(d)
            except BlockingIOError:
                pass
            if total >= 256 * 65536 and True in ev:
                break
        self.assertEqual(total, 256 * 65536)
        self.assertEqual(ev[:3], ["open", False, True])
        peer.close()
        lsock.close()

    def test_connect_refused(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        out = []

        class H(nanosrv.TcpHandler):
            def on_open(self, conn):
                out.append("open")

            def on_error(self, conn, exc):
                out.append(exc.name)

            def on_close(self, conn):
                out.append("close")
        self.m.connect("tcp://127.0.0.1:%d" % port, H)
        self.assertTrue(self.loop.until(lambda: "close" in out))
        self.assertEqual(out, ["NSV_ECONNREFUSED", "close"])
        with self.assertRaises(nanosrv.Error):
            self.m.connect("tcp://no-port-here", H)

    def test_handler_exception_aborts_connection(self):
        class H(nanosrv.TcpHandler):
            def on_data(self, conn, data):
                raise RuntimeError("handler bug")
        lst = self.m.tcp_listen("tcp://127.0.0.1:0", H)
        s = socket.create_connection(("127.0.0.1", lst.port), 10)
        s.sendall(b"boom")
        s.settimeout(0.05)
        ended = False
        for _ in range(400):
            self.m.poll(10)
            try:
                if s.recv(10) == b"":
                    ended = True
                    break
            except socket.timeout:
                continue
            except ConnectionResetError:
                ended = True
                break
        self.assertTrue(ended)
        s.close()


def timers_available():
    m = nanosrv.Manager()
    try:
        m.timer(1000, lambda: None).cancel()
        return True
    except nanosrv.NotSupportedError:
        return False
    finally:
        m.close()


@unittest.skipUnless(timers_available(), "the loaded libnanosrv has no host timers yet (nsv_timer_add: NSV_ENOTSUP)")
class Timers(unittest.TestCase):
    def test_call_later_timer_cancel(self):
        loop = Loop()
        m = loop.m
        fired = []
        m.call_later(0.01, fired.append, "once")
        rep = m.timer(5, lambda: fired.append("tick"), repeat_ms=5)
        dead = m.call_later(0.01, fired.append, "cancelled")
        self.assertTrue(dead.cancel())
        self.assertFalse(dead.cancel())
        self.assertTrue(loop.until(lambda: fired.count("tick") >= 3 and "once" in fired))
        rep.cancel()
        n = fired.count("tick")
        for _ in range(10):
            m.poll(10)
        self.assertEqual(fired.count("tick"), n)
        self.assertEqual(fired.count("once"), 1)
        self.assertNotIn("cancelled", fired)
        m.close()

    def test_wakeup_from_another_thread(self):
        loop = Loop()
        m = loop.m
        got = []

        class H(nanosrv.TcpHandler):
            def on_open(self, conn):
                threading.Thread(target=lambda: m.wakeup(conn.id, b"from a thread")).start()

            def on_wakeup(self, conn, data):
                got.append(data)
                conn.write(data)
        lst = m.tcp_listen("tcp://127.0.0.1:0", H)
        s = socket.create_connection(("127.0.0.1", lst.port), 10)
        self.assertTrue(loop.until(lambda: got))
        self.assertEqual(got, [b"from a thread"])
        s.close()
        self.assertTrue(loop.until(lambda: not m._raw.conns))
        self.assertIs(m.wakeup(0x7fff00000001, b"x"), False)
        m.close()


if __name__ == "__main__":
    _tap.main()
