"""`python3 -m nanosrv MODULE:APP`: the listening line, interface detection,
application loading errors, --root-path, https and mutual TLS, access log,
unix sockets, --limit-max-requests, and SIGTERM draining a slow request, on
the small apps of tests/apps/cli_apps.py, run as subprocesses."""
import http.client
import importlib.util
import os
import re
import select
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import unittest

import _tap
import _net

APPS = os.path.join(_tap.HERE, "apps")
LINE = re.compile(r"^listening on (\d+) \((https?)://127\.0\.0\.1:(\d+), (asgi|wsgi), (pid \d+|\d+ workers?)\)$")


def env():
    e = _net.env()
    e.pop("PYTHONUNBUFFERED", None)  # the command flushes its line itself
    return e


class Cmd:
    """`python3 -m nanosrv ARGS` in tests/apps, stopped by its PID."""

    def __init__(self, *args, expect_line=True, timeout=30, extra_env=None):
        e = env()
        e.update(extra_env or {})
        self.p = subprocess.Popen([sys.executable, "-m", "nanosrv"] + list(args), cwd=APPS, env=e,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.line = ""
        self.port = None
        self._err = b""
        self._errt = threading.Thread(target=self._read_err, daemon=True)
        self._errt.start()
        if expect_line:
            self.line = self.read_line(timeout)
            m = LINE.match(self.line)
            if not m and not self.line.startswith("listening on unix:"):
                self.kill()
                raise AssertionError("no listening line: %r; stderr %r" % (self.line, self.stderr()))
            self.port = int(m.group(1)) if m else None

    def _read_err(self):
        while True:
            b = self.p.stderr.read1(65536) if hasattr(self.p.stderr, "read1") else self.p.stderr.read(65536)
            if not b:
                return
            self._err += b

    def read_line(self, timeout):
        buf = b""
        fd = self.p.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in buf and time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], 0.2)
            if r:
                b = os.read(fd, 4096)
                if not b:
                    break
                buf += b
            elif self.p.poll() is not None:
                break
        return buf.decode().split("\n")[0]

    def stderr(self):
        return self._err.decode("utf-8", "replace")

    def wait(self, timeout=30):
        try:
            code = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("the command did not exit within %d s; stderr %r" % (timeout, self.stderr()))
        self._errt.join(5)
        return code

    def term(self, timeout=30):
        os.kill(self.p.pid, signal.SIGTERM)
        return self.wait(timeout)

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(10)

    def close(self):
        self.kill()
        self._errt.join(5)
        for f in (self.p.stdout, self.p.stderr):
            f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def get(port, path="/", ctx=None, timeout=20):
    """(status, body text) of GET path on a new connection."""
    if ctx is not None:
        c = http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=ctx)
    else:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def failure(*args):
    """(exit status, stderr) of a command that must not start."""
    with Cmd(*args, expect_line=False) as c:
        code = c.wait()
        return code, c.stderr()


class ListeningLine(unittest.TestCase):
    def test_wsgi_port0(self):
        with Cmd("cli_apps:wsgi_app", "--port", "0") as c:
            m = LINE.match(c.line)
            self.assertEqual(m.group(1), m.group(3), c.line)
            self.assertNotEqual(c.port, 0)
            self.assertEqual(m.group(2), "http")
            self.assertEqual(m.group(4), "wsgi")
            self.assertEqual(m.group(5), "pid %d" % c.p.pid)
            st, body = get(c.port, "/x")
            self.assertEqual(st, 200)
            self.assertEqual(body.split()[:4], ["pid", str(c.p.pid), "path", "/x"])
            self.assertEqual(c.term(), 0, c.stderr())

    def test_asgi_port0(self):
        with Cmd("cli_apps:asgi_app", "--port", "0") as c:
            self.assertIn(", asgi, ", c.line)
            self.assertEqual(get(c.port, "/y")[1].split()[3], "/y")
            self.assertEqual(c.term(), 0, c.stderr())

    def test_fixed_port_and_in_use(self):
        port = _net.free_port()
        with Cmd("cli_apps:wsgi_app", "--port", str(port)) as c:
            self.assertEqual(c.port, port)
            code, err = failure("cli_apps:wsgi_app", "--port", str(port))
            self.assertEqual(code, 1)
            lines = err.strip().splitlines()
            self.assertEqual(len(lines), 1, err)
            self.assertIn("cannot listen on 127.0.0.1:%d: address already in use" % port, lines[0])
            self.assertEqual(get(c.port)[0], 200, "the first server is unharmed")
            self.assertEqual(c.term(), 0)

    def test_version(self):
        p = subprocess.run([sys.executable, "-m", "nanosrv", "--version"], cwd=APPS, env=env(),
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout.strip(), r"^nanosrv \d+\.\d+\.\d+ \(libnanosrv \d+\.\d+\.\d+\) on cpython 3\.")

    def test_help(self):
        p = subprocess.run([sys.executable, "-m", "nanosrv", "-h"], cwd=APPS, env=env(),
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0)
        for flag in ("--workers", "--threads", "--uds", "--ssl-certfile", "--limit-max-requests",
                     "--timeout-graceful-shutdown", "--interface", "--root-path", "--no-access-log"):
            self.assertIn(flag, p.stdout)


class Interface(unittest.TestCase):
    """The auto-detection rule (also unit-tested on the function)."""

    def test_rule(self):
        sys.path.insert(0, APPS)
        try:
            import cli_apps
            from nanosrv.server import StartupError, detect_interface
            self.assertEqual(detect_interface(cli_apps.asgi_app), "asgi")
            self.assertEqual(detect_interface(cli_apps.asgi_object), "asgi")
            self.assertEqual(detect_interface(cli_apps.wsgi_app), "wsgi")
            self.assertEqual(detect_interface(cli_apps.wsgi_object), "wsgi")
            self.assertEqual(detect_interface(lambda scope, receive, send: None), "asgi")
            with self.assertRaisesRegex(StartupError, "pass --interface"):
                detect_interface(cli_apps.neither)
            with self.assertRaisesRegex(StartupError, "is a class"):
                detect_interface(cli_apps.AsgiObject)
        finally:
            sys.path.remove(APPS)

    def test_object_apps_and_explicit(self):
        for spec, flags, kind in (("cli_apps:asgi_object", (), "asgi"), ("cli_apps:wsgi_object", (), "wsgi"),
                                  ("cli_apps:wsgi_app", ("--interface", "wsgi"), "wsgi"),
                                  ("cli_apps:asgi_app", ("--interface", "asgi"), "asgi"),
                                  ("cli_apps:asgi_app", ("--loop", "asyncio"), "asgi"),
                                  ("cli_apps:create_wsgi", ("--factory",), "wsgi"),
                                  ("cli_apps:create_wsgi()", (), "wsgi")):
            with self.subTest(spec=spec, flags=flags):
                with Cmd(spec, "--port", "0", *flags) as c:
                    self.assertIn(", %s, " % kind, c.line)
                    self.assertEqual(get(c.port, "/o")[0], 200)
                    self.assertEqual(c.term(), 0)

    def test_undetectable(self):
        code, err = failure("cli_apps:neither", "--port", "0")
        self.assertEqual(code, 3)
        self.assertIn("pass --interface asgi or --interface wsgi", err)


class LoadErrors(unittest.TestCase):
    def one_line(self, args, status, text, others=False):
        """The command exits with status and one error line containing text
        (others: log records of the server may come before it)."""
        code, err = failure(*args)
        self.assertEqual(code, status, err)
        lines = err.strip().splitlines()
        if not others:
            self.assertEqual(len(lines), 1, err)
        mine = [x for x in lines if x.startswith("nanosrv: error: ")]
        self.assertEqual(len(mine), 1, err)
        self.assertIn(text, mine[0])

    def test_errors(self):
        cases = [
            (("nope_module:app",), 3, 'could not import module "nope_module"'),
            (("cli_apps:nope",), 3, 'attribute "nope" not found in module "cli_apps"'),
            (("cli_apps",), 2, '"MODULE:ATTRIBUTE"'),
            (("cli_apps:a:b",), 2, '"MODULE:ATTRIBUTE"'),
            (("cli_broken:app",), 3, 'importing module "cli_broken" failed: RuntimeError: this module is broken on purpose'),
            (("cli_apps:not_callable",), 3, '"not_callable" is a int, not an application'),
            (("cli_apps:boom", "--factory"), 3, "the factory raised RuntimeError: factory exploded"),
        ]
        for args, status, text in cases:
            with self.subTest(args=args):
                self.one_line(args + ("--port", "0"), status, text)

    def test_errors_with_workers(self):
        # Both workers fail the same way: one line, from the supervisor.
        self.one_line(("cli_apps:nope", "--port", "0", "--workers", "2"), 3,
                      'attribute "nope" not found in module "cli_apps"')

    def test_lifespan(self):
        # The ASGI server logs the failure too (an ERROR record), as uvicorn does.
        self.one_line(("cli_apps:asgi_bad_startup", "--port", "0"), 3,
                      "application startup failed: database unreachable", others=True)
        self.one_line(("cli_apps:asgi_bad_startup", "--port", "0", "--workers", "2"), 3,
                      "application startup failed: database unreachable", others=True)
        with Cmd("cli_apps:asgi_bad_startup", "--port", "0", "--lifespan", "off") as c:
            self.assertEqual(get(c.port, "/l")[0], 200)
            self.assertEqual(c.term(), 0)

    def test_bad_flags(self):
        code, err = failure("cli_apps:wsgi_app", "--workers", "0")
        self.assertEqual(code, 2)
        self.assertIn("--workers must be >= 1", err)
        if importlib.util.find_spec("uvloop") is None:
            code, err = failure("cli_apps:asgi_app", "--loop", "uvloop")
            self.assertEqual(code, 2)
            self.assertIn("--loop uvloop: the uvloop module is not installed", err)
        else:
            with Cmd("cli_apps:asgi_app", "--port", "0", "--loop", "uvloop") as c:
                self.assertEqual(get(c.port)[0], 200)
                self.assertEqual(c.term(), 0)
        code, err = failure("cli_apps:wsgi_app", "--ssl-certfile", "x.pem")
        self.assertEqual(code, 2)
        self.assertIn("--ssl-certfile and --ssl-keyfile go together", err)

    def test_bad_certificate(self):
        c = _net.certs()
        self.one_line(("cli_apps:wsgi_app", "--port", "0", "--ssl-certfile", "/nonexistent/cert.pem",
                       "--ssl-keyfile", c["srv.key"]), 3, "bad TLS settings")
        # A key that is not the certificate's; an encrypted key without its password.
        self.one_line(("cli_apps:asgi_app", "--port", "0", "--ssl-certfile", c["srv.crt"],
                       "--ssl-keyfile", c["alice.key"]), 3, "certificate and private key do not match")
        self.one_line(("cli_apps:wsgi_app", "--port", "0", "--workers", "2", "--ssl-certfile", c["srv.crt"],
                       "--ssl-keyfile", c["srv_enc.key"]), 3, "bad TLS settings")


class Options(unittest.TestCase):
    def test_root_path(self):
        for spec, field in (("cli_apps:asgi_app", "script"), ("cli_apps:wsgi_app", "script")):
            with self.subTest(spec=spec):
                with Cmd(spec, "--port", "0", "--root-path", "/mount") as c:
                    words = get(c.port, "/mount/page")[1].split()
                    got = dict(zip(words[::2], words[1::2]))
                    self.assertEqual(got[field], "/mount")
                    self.assertEqual(c.term(), 0)

    def test_threads(self):
        # WSGI apps run on the pool's threads; --threads 0 runs them on the loop thread.
        with Cmd("cli_apps:wsgi_app", "--port", "0", "--threads", "2") as c:
            self.assertNotIn("thread MainThread", get(c.port, "/t")[1])
            self.assertEqual(c.term(), 0)
        with Cmd("cli_apps:wsgi_app", "--port", "0", "--threads", "0") as c:
            self.assertIn("thread MainThread", get(c.port, "/t")[1])
            self.assertEqual(c.term(), 0)
        code, err = failure("cli_apps:wsgi_app", "--port", "0", "--threads", "-1")
        self.assertEqual(code, 2)
        self.assertIn("--threads must be", err)

    def test_access_log(self):
        for spec in ("cli_apps:asgi_app", "cli_apps:wsgi_app"):
            with self.subTest(spec=spec):
                with Cmd(spec, "--port", "0") as c:
                    get(c.port, "/logged?q=1")
                    self.assertEqual(c.term(), 0)
                    self.assertRegex(c.stderr(), r'INFO: 127\.0\.0\.1(:\d+)? - "GET /logged\?q=1 HTTP/1\.1"')
                with Cmd(spec, "--port", "0", "--no-access-log") as c:
                    get(c.port, "/quiet")
                    self.assertEqual(c.term(), 0)
                    self.assertNotIn("/quiet", c.stderr())

    def test_log_level_warning_hides_access_lines(self):
        with Cmd("cli_apps:asgi_app", "--port", "0", "--log-level", "warning") as c:
            get(c.port, "/hidden")
            self.assertEqual(c.term(), 0)
            self.assertNotIn("/hidden", c.stderr())

    def test_limit_max_requests_single_process(self):
        with Cmd("cli_apps:wsgi_app", "--port", "0", "--limit-max-requests", "3") as c:
            for i in range(3):
                self.assertEqual(get(c.port, "/n%d" % i)[0], 200)
            self.assertEqual(c.wait(), 0, c.stderr())

    def test_https_and_mutual_tls(self):
        certs = _net.certs()
        ctx = ssl.create_default_context(cafile=certs["ca.crt"])
        with Cmd("cli_apps:asgi_app", "--port", "0", "--ssl-certfile", certs["srv.crt"],
                 "--ssl-keyfile", certs["srv_enc.key"], "--ssl-keyfile-password", "s3cret") as c:
            self.assertIn("(https://127.0.0.1:%d, asgi" % c.port, c.line)
            st, body = get(c.port, "/tls", ctx)
            self.assertEqual(st, 200)
            self.assertIn("scheme https", body)
            self.assertEqual(c.term(), 0)
        with Cmd("cli_apps:wsgi_app", "--port", "0", "--ssl-certfile", certs["srv.crt"],
                 "--ssl-keyfile", certs["srv.key"], "--ssl-ca-certs", certs["ca.crt"]) as c:
            with self.assertRaises((ssl.SSLError, ConnectionError, OSError)):
                get(c.port, "/anon", ctx)  # no client certificate: required by default with --ssl-ca-certs
            mctx = ssl.create_default_context(cafile=certs["ca.crt"])
            mctx.load_cert_chain(certs["alice.crt"], certs["alice.key"])
            st, body = get(c.port, "/mtls", mctx)
            self.assertEqual(st, 200)
            self.assertIn("scheme https", body)
            self.assertEqual(c.term(), 0)

    def test_unix_socket(self):
        path = os.path.join("/tmp", "nsv_cli_%d.sock" % os.getpid())
        with Cmd("cli_apps:asgi_app", "--uds", path) as c:
            self.assertTrue(c.line.startswith("listening on unix:%s (http+unix://%s, asgi" % (path, path)), c.line)
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(20)
            s.connect(path)
            s.sendall(b"GET /unix HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
            s.close()
            self.assertTrue(data.startswith(b"HTTP/1.1 200"), data)
            self.assertIn(b"path /unix", data)
            self.assertEqual(c.term(), 0)
        self.assertFalse(os.path.exists(path), "the socket file is removed at exit")


class GracefulStop(unittest.TestCase):
    def slow_request_survives(self, *args):
        with Cmd(*args) as c:
            out = []
            t = threading.Thread(target=lambda: out.append(get(c.port, "/slow?1.5")), daemon=True)
            t.start()
            # The request is in the app once the access log is silent and
            # a second connection still gets through.
            self.assertEqual(get(c.port, "/fast")[0], 200)
            time.sleep(0.3)
            code = c.term()
            t.join(30)
            self.assertEqual(out and out[0][0], 200, c.stderr())
            self.assertIn("path /slow", out[0][1])
            self.assertEqual(code, 0, c.stderr())

    def test_sigterm_asgi(self):
        self.slow_request_survives("cli_apps:asgi_app", "--port", "0")

    def test_sigterm_wsgi_workers(self):
        self.slow_request_survives("cli_apps:wsgi_app", "--port", "0", "--workers", "2")

    def test_timeout_graceful_shutdown(self):
        # The app takes 20 s; the drain gives it 0.5 s, then the connection closes.
        with Cmd("cli_apps:asgi_app", "--port", "0", "--timeout-graceful-shutdown", "0.5") as c:
            t = threading.Thread(target=lambda: _swallow(get, c.port, "/slow?20"), daemon=True)
            t.start()
            self.assertEqual(get(c.port, "/fast")[0], 200)
            time.sleep(0.3)
            self.assertEqual(c.term(timeout=15), 0, c.stderr())
            t.join(20)


class ListenFd(unittest.TestCase):
    """nanosrv.server.listen_fd and the reuseport option, from Python."""

    def test_adopt_and_serve(self):
        import nanosrv
        from nanosrv.server import listen_fd
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        m = nanosrv.Manager()
        try:
            ref = listen_fd(m, "http://127.0.0.1:0", os.dup(s.fileno()),
                            lambda conn, msg: conn.http_reply(200, "", "adopted " + msg.uri))
            self.assertEqual(ref.port, s.getsockname()[1])
            s.close()  # the library's copy keeps the socket
            with _tap.ServerThread(m):
                self.assertEqual(get(ref.port, "/fd"), (200, "adopted /fd"))
        finally:
            m.close()

    def test_refusals(self):
        import nanosrv
        from nanosrv.server import listen_fd
        m = nanosrv.Manager()
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        r, w = os.pipe()
        try:
            with self.assertRaisesRegex(nanosrv.Error, "is not listening"):
                listen_fd(m, "http://127.0.0.1:0", s.fileno())
            with self.assertRaisesRegex(nanosrv.Error, "is not a socket"):
                listen_fd(m, "http://127.0.0.1:0", r)
            with self.assertRaises(TypeError):
                listen_fd(m, "http://127.0.0.1:0", "3")
            s.listen(4)
            other = s.getsockname()[1] % 60000 + 1024
            with self.assertRaisesRegex(nanosrv.Error, "is bound to port %d" % s.getsockname()[1]):
                listen_fd(m, "http://127.0.0.1:%d" % other, s.fileno())
            self.assertEqual(s.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE), socket.SOCK_STREAM,
                             "a refused socket stays open, the caller's")
        finally:
            s.close()
            os.close(r)
            os.close(w)
            m.close()

    def test_reuseport_option(self):
        import nanosrv
        a, b, c = nanosrv.Manager(), nanosrv.Manager(), nanosrv.Manager()
        try:
            a.set_option("reuseport", 1)
            b.set_option("reuseport", 1)
            self.assertEqual(a.get_option("reuseport"), 1)
            port = a.http_listen("http://127.0.0.1:0").port
            self.assertEqual(b.http_listen("http://127.0.0.1:%d" % port).port, port)
            with self.assertRaisesRegex(nanosrv.Error, "address in use"):
                c.http_listen("http://127.0.0.1:%d" % port)
        finally:
            for m in (a, b, c):
                m.close()


def _swallow(fn, *a):
    try:
        fn(*a)
    except Exception:
        pass


if __name__ == "__main__":
    _tap.main()
