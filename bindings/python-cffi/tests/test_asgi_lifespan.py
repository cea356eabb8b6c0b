"""nanosrv.asgi, lifespan and run(): startup and shutdown around serving,
state reaching requests, startup.failed and shutdown.failed, "auto"
tolerating apps that raise on the lifespan scope while "on" refuses them,
"off"; run() as a program: startup failure exits with an error before
listening, SIGTERM drains (an in-flight request finishes) and runs
shutdown, an ASGI 2 app is served."""
import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
import unittest

import _tap
from _tap import PKG
from test_asgi_http import AppServer, LogCapture

import nanosrv
import nanosrv.asgi


def lifespan_app(log, fail_startup=None, fail_shutdown=None):
    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                m = await receive()
                log.append(m["type"])
                if m["type"] == "lifespan.startup":
                    if fail_startup:
                        await send({"type": "lifespan.startup.failed", "message": fail_startup})
                        return
                    scope["state"]["ready"] = True
                    await send({"type": "lifespan.startup.complete"})
                else:
                    if fail_shutdown:
                        await send({"type": "lifespan.shutdown.failed", "message": fail_shutdown})
                    else:
                        await send({"type": "lifespan.shutdown.complete"})
                    return
        log.append(("request", scope.get("state")))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
    return app


async def _run_server(srv, fn):
    m = nanosrv.Manager()
    try:
        await srv.startup()
        lst = srv.listen(m, "http://127.0.0.1:0")
        task = asyncio.ensure_future(srv.serve(m))
        await asyncio.get_running_loop().run_in_executor(None, fn, lst.port)
        srv.drain(m)
        await asyncio.wait_for(task, 10)
        await srv.shutdown()
    finally:
        m.close()


def get(port):
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/")
    r = c.getresponse()
    out = r.status, r.read()
    c.close()
    return out


class Lifespan(unittest.TestCase):
    def test_startup_state_shutdown_in_order(self):
        log = []
        srv = nanosrv.asgi.Server(lifespan_app(log), lifespan="on")
        asyncio.run(_run_server(srv, lambda port: log.append(get(port))))
        self.assertEqual(log, ["lifespan.startup", ("request", {"ready": True}), (200, b"ok"),
                               "lifespan.shutdown"])

    def test_startup_failed_raises_with_the_message(self):
        for mode in ("auto", "on"):
            log = []
            srv = nanosrv.asgi.Server(lifespan_app(log, fail_startup="no database"), lifespan=mode)
            with LogCapture(), self.assertRaises(nanosrv.asgi.LifespanFailure) as cm:
                asyncio.run(srv.startup())
            self.assertIn("no database", str(cm.exception))

    def test_shutdown_failed_raises(self):
        log = []
        srv = nanosrv.asgi.Server(lifespan_app(log, fail_shutdown="flush failed"))
        with LogCapture(), self.assertRaises(nanosrv.asgi.LifespanFailure) as cm:
            asyncio.run(_run_server(srv, lambda port: None))
        self.assertIn("flush failed", str(cm.exception))

    def test_auto_tolerates_apps_without_lifespan_and_on_does_not(self):
        async def app(scope, receive, send):
            if scope["type"] != "http":
                raise ValueError("only http here")
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"served"})

        got = []
        with LogCapture() as logs:
            asyncio.run(_run_server(nanosrv.asgi.Server(app), lambda port: got.append(get(port))))
        self.assertEqual(got, [(200, b"served")])
        self.assertIn("unsupported", logs.text(0))
        with LogCapture(), self.assertRaises(nanosrv.asgi.LifespanFailure):
            asyncio.run(nanosrv.asgi.Server(app, lifespan="on").startup())

    def test_off_never_calls_the_app_with_lifespan(self):
        types = []

        async def app(scope, receive, send):
            types.append(scope["type"])
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})

        with AppServer(app, lifespan="off") as s:
            self.assertEqual(s.get("/")[0], 204)
        self.assertEqual(types, ["http"])

    def test_bad_options_say_which(self):
        ok = lifespan_app([])
        for kw, word in ((dict(lifespan="maybe"), "lifespan"), (dict(response_timeout=0), "response_timeout"),
                         (dict(limit_max_requests=0), "limit_max_requests"), (dict(ws_max_size=0), "ws_max_size")):
            with self.assertRaises(ValueError) as cm:
                nanosrv.asgi.Server(ok, **kw)
            self.assertIn(word, str(cm.exception))
        with self.assertRaises(TypeError):
            nanosrv.asgi.Server("not an app")


PROGRAM = """
import asyncio, os, sys
sys.path.insert(0, %(pkg)r)
import nanosrv.asgi

MODE = sys.argv[1]

async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            m = await receive()
            if m["type"] == "lifespan.startup":
                if MODE == "fail":
                    await send({"type": "lifespan.startup.failed", "message": "cannot reach the db"})
                    return
                await send({"type": "lifespan.startup.complete"})
            else:
                print("shutdown ran", flush=True)
                await send({"type": "lifespan.shutdown.complete"})
                return
    await asyncio.sleep(0.5 if scope["path"] == "/slow" else 0)
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"done " + scope["path"].encode()})

def asgi2(scope):
    async def inner(receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"asgi2"})
    return inner

nanosrv.asgi.run(asgi2 if MODE == "asgi2" else app, "127.0.0.1", 0, lifespan="off" if MODE == "asgi2" else "auto",
                 ready=lambda lst: print("listening on", lst.port, flush=True))
print("run returned", flush=True)
"""


class Program(unittest.TestCase):
    def start(self, mode):
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        return subprocess.Popen([sys.executable, "-c", textwrap.dedent(PROGRAM % {"pkg": PKG}), mode],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)

    def test_startup_failure_exits_with_an_error(self):
        p = self.start("fail")
        try:
            out, err = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                p.wait(10)
        self.assertNotEqual(p.returncode, 0)
        self.assertNotIn(b"listening on", out)
        self.assertIn(b"LifespanFailure", err)
        self.assertIn(b"cannot reach the db", err)

    def test_sigterm_drains_then_shutdown(self):
        import threading
        p = self.start("ok")
        try:
            line = p.stdout.readline().decode()
            self.assertTrue(line.startswith("listening on "), (line, p.stderr.read() if p.poll() is not None else ""))
            port = int(line.split()[2])
            res = []
            t = threading.Thread(target=lambda: res.append(self._get(port, "/slow")))
            t.start()
            time.sleep(0.2)
            os.kill(p.pid, signal.SIGTERM)
            t.join(20)
            out, err = p.communicate(timeout=20)
        finally:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                p.wait(10)
        self.assertEqual(res, [(200, b"done /slow")])
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(out.decode().split("\n")[:2], ["shutdown ran", "run returned"])

    def test_asgi2_app(self):
        p = self.start("asgi2")
        try:
            line = p.stdout.readline().decode()
            port = int(line.split()[2])
            self.assertEqual(self._get(port, "/"), (200, b"asgi2"))
        finally:
            os.kill(p.pid, signal.SIGTERM)
            p.communicate(timeout=20)

    @staticmethod
    def _get(port, path):
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", path)
        r = c.getresponse()
        out = r.status, r.read()
        c.close()
        return out


if __name__ == "__main__":
    _tap.main()
