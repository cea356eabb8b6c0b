"""nanosrv.wsgi.Server: the thread pool (a blocking view does not stall
other requests), the access log, limit_max_requests, a drain started from
a signal handler while run() polls, several listeners, make_handler with
threads under Manager.run()."""
import http.client
import logging
import os
import signal
import threading
import time
import unittest

import _tap

import nanosrv
import nanosrv.wsgi
from test_wsgi import Records, Serving, request

WAIT = 10


def slow_app(done):
    def app(environ, start_response):
        if environ["PATH_INFO"] == "/slow":
            time.sleep(1.0)  # a blocking view
            done.set()
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [environ["PATH_INFO"].encode()]
    return app


class Threads(unittest.TestCase):
    def test_blocking_view_does_not_stall(self):
        done = threading.Event()
        with Serving(slow_app(done), threads=4) as port:
            out = []
            t = threading.Thread(target=lambda: out.append(request(port, "GET", "/slow")))
            t.start()
            time.sleep(0.1)  # let the slow request reach its worker first
            self.assertEqual(request(port, "GET", "/fast")[::2], (200, b"/fast"))
            self.assertFalse(done.is_set())  # answered while the slow view still blocked
            t.join(WAIT)
        self.assertEqual(out[0][::2], (200, b"/slow"))

    def test_access_log(self):
        def app(environ, start_response):
            start_response("201 Created", [])
            return [b"x"]
        with Records("nanosrv.access") as recs:
            with Serving(app, access_log=True) as port:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
                c.request("GET", "/a/b?x=1")
                c.getresponse().read()
                local = c.sock.getsockname()[1]
                c.close()
        self.assertEqual(len(recs), 1)
        self.assertEqual(recs[0].levelno, logging.INFO)
        self.assertEqual(recs[0].getMessage(), '127.0.0.1:%d - "GET /a/b?x=1 HTTP/1.1" 201' % local)
        with Records("nanosrv.access") as recs:
            with Serving(app) as port:
                request(port, "GET", "/")
        self.assertEqual(recs, [])

    def test_limit_max_requests_drains(self):
        def app(environ, start_response):
            start_response("200 OK", [])
            return [b"ok"]
        m = nanosrv.Manager()
        srv = nanosrv.wsgi.Server(app, threads=2, limit_max_requests=3)
        lst = srv.listen(m, "http://127.0.0.1:0")
        t = threading.Thread(target=srv.run, args=(m,), daemon=True)
        t.start()
        try:
            c = http.client.HTTPConnection("127.0.0.1", lst.port, timeout=WAIT)
            for _ in range(3):
                c.request("GET", "/")
                r = c.getresponse()
                self.assertEqual(r.read(), b"ok")
            c.close()
            t.join(WAIT)
            self.assertFalse(t.is_alive())  # run() returned once the drain completed
            self.assertEqual(srv.requests, 3)
        finally:
            m.stop()
            t.join(WAIT)
            srv.close()
            m.close()

    def test_drain_from_signal_handler(self):
        # The server command's shape: run() in the main thread, a signal
        # handler calls drain_start; the request in flight is answered.
        done = threading.Event()
        m = nanosrv.Manager()
        srv = nanosrv.wsgi.Server(slow_app(done), threads=2)
        lst = srv.listen(m, "http://127.0.0.1:0")
        old = signal.signal(signal.SIGUSR1, lambda *a: m.drain_start(5000))
        out = []

        def client():
            c = http.client.HTTPConnection("127.0.0.1", lst.port, timeout=WAIT)
            c.request("GET", "/slow")
            t0 = time.monotonic()
            while not done.is_set() and time.monotonic() - t0 < WAIT:
                time.sleep(0.01)
            os.kill(os.getpid(), signal.SIGUSR1)  # while /slow is in flight
            r = c.getresponse()
            out.append((r.status, r.read()))
            c.close()
        t = threading.Thread(target=client)
        t.start()
        try:
            srv.run(m)  # returns when the drain ends
        finally:
            signal.signal(signal.SIGUSR1, old)
            t.join(WAIT)
            srv.close()
            m.close()
        self.assertEqual(out, [(200, b"/slow")])

    def test_several_listeners_one_pool(self):
        seen = []

        def app(environ, start_response):
            seen.append((environ["SERVER_PORT"], environ["wsgi.url_scheme"]))
            start_response("200 OK", [])
            return [b"ok"]
        m = nanosrv.Manager()
        srv = nanosrv.wsgi.Server(app, threads=2)
        a = srv.listen(m, "http://127.0.0.1:0")
        b = srv.listen(m, "http://127.0.0.1:0")
        t = threading.Thread(target=srv.run, args=(m,), daemon=True)
        t.start()
        try:
            for lst in (a, b):
                self.assertEqual(request(lst.port, "GET", "/")[::2], (200, b"ok"))
        finally:
            m.stop()
            t.join(WAIT)
            srv.close()
            m.close()
        self.assertEqual(seen, [(str(a.port), "http"), (str(b.port), "http")])
        with nanosrv.Manager() as other, self.assertRaises(ValueError):
            srv.listen(other, "tcp://127.0.0.1:0")

    def test_make_handler_with_threads_under_manager_run(self):
        # The replies of worker threads reach the library from whatever
        # loop polls the Manager (here its own run()).
        done = threading.Event()
        m = nanosrv.Manager()
        h = nanosrv.wsgi.make_handler(slow_app(done), threads=2)
        lst = m.http_listen("http://127.0.0.1:0", h)
        with _tap.ServerThread(m):
            self.assertEqual(request(lst.port, "GET", "/x")[::2], (200, b"/x"))
        h.server.close()

    def test_options_checked(self):
        app = slow_app(threading.Event())
        for bad in ({"threads": -1}, {"threads": "4"}, {"root_path": "app"}, {"root_path": "/app/"},
                    {"limit_max_requests": 0}, {"url_scheme": "ftp"}):
            with self.assertRaises(ValueError, msg=bad):
                nanosrv.wsgi.Server(app, **bad)
        with self.assertRaises(TypeError):
            nanosrv.wsgi.Server(None)


if __name__ == "__main__":
    _tap.main()
