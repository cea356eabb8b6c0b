"""The comparison harness of tests/test_frameworks_*.py: runs one app under
a reference server (uvicorn, gunicorn) and under `python3 -m nanosrv`, as
subprocesses on 127.0.0.1 with port 0, sends each the same request and
asserts that what a client observes is the same.

Observed: status, reason, headers (minus the ones listed in IGNORED with
the reason), body; WebSocket messages, close codes and reasons, handshake
status; the startup/shutdown/background records the apps append to the
file named by NSV_APP_EVENTS.

NSV_FW_SERVERS=uvicorn (names, comma-separated) runs a subset; the suites
fail, not skip, when the nanosrv server command is missing."""
import asyncio
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest
from typing import Any, Callable, Dict, List, Optional, Tuple

APPS = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(APPS)
PKG = os.path.dirname(TESTS)
PY = "/usr/bin/python3"

# Headers whose values differ between servers by design, never compared:
#   date    - the clock;
#   server  - each server names itself (uvicorn sends "uvicorn", gunicorn
#             "gunicorn/20.1.0"); nanosrv's own value is its business.
IGNORED = {"date", "server"}
# Header lines that carry no information and are dropped before comparing:
# HTTP/1.1 connections persist unless one side says close (RFC 9112 9.3),
# so "Connection: keep-alive" on an HTTP/1.1 answer (gunicorn's gthread
# worker sends it) means nothing.
REDUNDANT = {("connection", "keep-alive")}


def nanosrv_command() -> List[str]:
    """How nanosrv's server command is run: NSV_FW_NANOSRV (a command line,
    split on spaces) or `python3 -m nanosrv`."""
    return os.environ.get("NSV_FW_NANOSRV", PY + " -m nanosrv").split()


def nanosrv_command_present() -> bool:
    """The server command (nanosrv/__main__.py) exists in this tree."""
    return bool(os.environ.get("NSV_FW_NANOSRV")) or os.path.exists(os.path.join(PKG, "nanosrv", "__main__.py"))


class Server:
    """One server process for a test class: started in its own process
    group, port read from its output, stopped by its PID (SIGTERM, then
    SIGKILL on the group it leads)."""

    def __init__(self, name: str, argv: List[str], port_re: str, events: str,
                 extra_env: Optional[Dict[str, str]] = None) -> None:
        self.name, self.argv, self.port_re, self.events = name, argv, re.compile(port_re), events
        self.extra_env = extra_env or {}
        self.proc = None
        self.port = None
        self.lines = []
        self._ready = threading.Event()
        self.returncode = None

    def env(self) -> Dict[str, str]:
        e = dict(os.environ)
        e["PYTHONPATH"] = os.pathsep.join([APPS, PKG] + ([e["PYTHONPATH"]] if e.get("PYTHONPATH") else []))
        e["PYTHONUNBUFFERED"] = "1"
        e["NSV_APP_EVENTS"] = self.events
        e.update(self.extra_env)
        return e

    def start(self, timeout: float = 30.0) -> "Server":
        open(self.events, "w").close()
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, env=self.env(), cwd=APPS,
                                     start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(timeout) or self.port is None:
            self.stop()
            raise RuntimeError("%s did not announce a port within %ss: %s" % (
                self.name, timeout, "".join(self.lines)[-2000:]))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("%s: nothing listens on %d" % (self.name, self.port))

    def _read(self) -> None:
        for raw in iter(self.proc.stdout.readline, b""):
            line = raw.decode("utf-8", "replace")
            self.lines.append(line)
            if self.port is None:
                m = self.port_re.search(line)
                if m:
                    self.port = int(m.group(1))
                    self._ready.set()
        self._ready.set()  # exited: start() reports the output

    def output(self) -> str:
        return "".join(self.lines)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 15.0) -> Optional[int]:
        """SIGTERM and wait (a graceful stop runs the app's shutdown), then kill."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # leftover workers of the group, if any
        except (ProcessLookupError, PermissionError):
            pass
        self.returncode = self.proc.returncode
        self.proc.stdout.close()
        return self.returncode

    def records(self) -> List[str]:
        with open(self.events) as f:
            return [line.rstrip("\n") for line in f]

    def wait_record(self, want: str, seconds: float = 10.0) -> List[str]:
        """The records once `want` is among them (or after `seconds`)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            recs = self.records()
            if want in recs:
                return recs
            time.sleep(0.05)
        return self.records()


def asgi_servers(module: str, tmp: str, attr: str = "app") -> List[Server]:
    """uvicorn (reference) and nanosrv for one ASGI app, not yet started."""
    target = module + ":" + attr
    return [
        Server("uvicorn", [PY, "-m", "uvicorn", target, "--host", "127.0.0.1", "--port", "0",
                           "--log-level", "info", "--no-access-log"],
               r"Uvicorn running on https?://[^\s:]+:(\d+)", os.path.join(tmp, "uvicorn.events")),
        Server("nanosrv", nanosrv_command() + [target, "--host", "127.0.0.1", "--port", "0",
                                               "--interface", "asgi", "--no-access-log"],
               r"listening on (?:\S*:)?(\d+)", os.path.join(tmp, "nanosrv.events")),
    ]


def wsgi_servers(module: str, tmp: str, attr: str = "app") -> List[Server]:
    """gunicorn (reference: one gthread worker, 4 threads) and nanosrv for one WSGI app."""
    target = module + ":" + attr
    return [
        Server("gunicorn", [PY, "-m", "gunicorn", target, "-b", "127.0.0.1:0", "-w", "1",
                            "-k", "gthread", "--threads", "4", "--log-level", "info"],
               r"Listening at: https?://[^\s:]+:(\d+)", os.path.join(tmp, "gunicorn.events")),
        Server("nanosrv", nanosrv_command() + [target, "--host", "127.0.0.1", "--port", "0",
                                               "--interface", "wsgi", "--threads", "4", "--no-access-log"],
               r"listening on (?:\S*:)?(\d+)", os.path.join(tmp, "nanosrv.events")),
    ]


def free_port() -> int:
    """A port the kernel just handed out, for a server that cannot report the one 0 picked."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def selected(servers: List[Server]) -> List[Server]:
    want = os.environ.get("NSV_FW_SERVERS")
    if not want:
        return servers
    names = want.split(",")
    return [s for s in servers if s.name in names]


# ---------------------------------------------------------------- clients

class Reply:
    """What a client observed of one HTTP exchange, in a comparable form."""

    def __init__(self, status: int, reason: Optional[str], headers: List[Tuple[str, str]], body: bytes) -> None:
        self.status, self.reason, self.body = status, reason, body
        self.headers = sorted((k.lower(), v) for k, v in headers
                              if k.lower() not in IGNORED and (k.lower(), v.lower()) not in REDUNDANT)

    def without_reason(self) -> "Reply":
        """The same observation with the reason phrase blanked."""
        r = Reply(self.status, None, [], self.body)
        r.headers = self.headers
        return r

    def header(self, name: str) -> Optional[str]:
        for k, v in self.headers:
            if k == name:
                return v
        return None

    def json(self) -> Any:
        return json.loads(self.body)

    def key(self, drop: Tuple[str, ...] = ()) -> tuple:
        return (self.status, self.reason, [h for h in self.headers if h[0] not in drop], self.body)

    def __repr__(self):
        return "Reply(%d %s, %r, %r)" % (self.status, self.reason, self.headers, self.body[:300])


def request(port: int, method: str, path: str, body: Any = None, headers: Optional[Dict[str, str]] = None,
            timeout: float = 20, tls: Any = None) -> Reply:
    """One request on a fresh connection through http.client."""
    c = (http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=tls) if tls is not None
         else http.client.HTTPConnection("127.0.0.1", port, timeout=timeout))
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        return Reply(r.status, r.reason, r.getheaders(), data)
    finally:
        c.close()


def raw(port: int, data: bytes, timeout: float = 20, until_close: bool = True) -> bytes:
    """Bytes in, bytes out until the server closes (or `timeout`)."""
    s = socket.create_connection(("127.0.0.1", port), timeout)
    try:
        s.sendall(data)
        out = bytearray()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            if not b:
                break
            out += b
            if not until_close and b"\r\n\r\n" in out:
                break
        return bytes(out)
    finally:
        s.close()


def multipart(fields: List[Tuple[str, str]], files: List[Tuple[str, str, str, bytes]],
              boundary: str = "nsvBoundary7MA4YWxk") -> Tuple[bytes, str]:
    """(body, content-type) for text fields [(name, value)] and files
    [(name, filename, content_type, data)]."""
    out = bytearray()
    for name, value in fields:
        out += ("--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n%s\r\n" % (
            boundary, name, value)).encode()
    for name, filename, ctype, data in files:
        out += ("--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
                "Content-Type: %s\r\n\r\n" % (boundary, name, filename, ctype)).encode()
        out += data + b"\r\n"
    out += ("--%s--\r\n" % boundary).encode()
    return bytes(out), "multipart/form-data; boundary=" + boundary


def ws_session(port: int, path: str, script: List[tuple], subprotocols: Optional[List[str]] = None,
               timeout: float = 20, tls: Any = None) -> List[tuple]:
    """Runs a WebSocket conversation with python3-websockets: `script` is a
    list of ("send", text|bytes) and ("recv",) steps; returns what was
    observed: the handshake (status or accepted subprotocol), each message
    received (type and value), and the close code and reason."""
    import websockets

    async def go():
        seen = []
        try:
            ws = await websockets.connect("%s://127.0.0.1:%d%s" % ("wss" if tls else "ws", port, path),
                                          subprotocols=subprotocols, ssl=tls,
                                          open_timeout=timeout, close_timeout=timeout, compression=None)
        except websockets.exceptions.InvalidStatusCode as e:
            return [("rejected", e.status_code)]
        except websockets.exceptions.InvalidHandshake as e:
            return [("bad handshake", type(e).__name__)]
        seen.append(("open", ws.subprotocol))
        try:
            for step in script:
                if step[0] == "send":
                    await ws.send(step[1])
                elif step[0] == "send_fragments":  # one message in several frames
                    await ws.send(iter(step[1]))
                elif step[0] == "ping":
                    pong = await ws.ping(step[1] if len(step) > 1 else None)
                    await asyncio.wait_for(pong, timeout)
                    seen.append(("pong",))
                elif step[0] == "close":  # the client closes with this code and reason
                    await ws.close(step[1], step[2] if len(step) > 2 else "")
                elif step[0] == "recv":
                    m = await asyncio.wait_for(ws.recv(), timeout)
                    seen.append(("text" if isinstance(m, str) else "bytes", m))
                else:  # "wait": the server is expected to close
                    await asyncio.wait_for(ws.wait_closed(), timeout)
        except websockets.exceptions.ConnectionClosed:
            pass
        if not ws.closed:
            await ws.close()
        seen.append(("closed", ws.close_code, ws.close_reason))
        return seen
    return asyncio.run(asyncio.wait_for(go(), timeout * 3))


# ---------------------------------------------------------------- test base

class Compare(unittest.TestCase):
    """Starts the class's servers once; `same(fn)` runs fn(port) against
    each and asserts every result equals the reference server's (the first
    in the list), returning the reference's result for further asserts."""

    MODULE = None
    ATTR = "app"
    KIND = "asgi"
    ARGS = ()  # extra flags for every server of the class (both take them)
    FIXED_PORT = ()  # servers that get a free port picked first instead of 0 (uvicorn --workers)
    # False: reason phrases are left out of every comparison but the
    # class's own test of them (set where a known bug makes them differ).
    COMPARE_REASON = True
    servers = []

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="nsv_fw_")
        make = asgi_servers if cls.KIND == "asgi" else wsgi_servers
        cls.servers = selected(make(cls.MODULE, cls.tmp, cls.ATTR))
        for s in cls.servers:
            s.argv += list(cls.ARGS)
            if s.name in cls.FIXED_PORT:  # it would print the 0 it was given, not the port
                s.argv[s.argv.index("--port") + 1] = str(free_port())
        cls.missing = None
        if any(s.name == "nanosrv" for s in cls.servers) and not nanosrv_command_present():
            cls.missing = "nanosrv/__main__.py (the server command) is missing"
            cls.servers = [s for s in cls.servers if s.name != "nanosrv"]
        started = []
        try:
            for s in cls.servers:
                started.append(s.start())
        except Exception:
            for s in started:
                s.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        for s in cls.servers:
            s.stop()

    def setUp(self):
        if self.missing:
            self.fail(self.missing)

    def same(self, fn: Callable[[int], Any], norm: Optional[Callable[[Any], Any]] = None) -> Any:
        """fn(port) on every server; all must equal the reference's result
        (after norm, if given). Returns the reference's raw result."""
        got = []
        for s in self.servers:
            try:
                r = fn(s.port)
                if not self.COMPARE_REASON and isinstance(r, Reply):
                    r = r.without_reason()
                got.append((s, r))
            except Exception as e:  # noqa: BLE001 - an exception is an observation too
                got.append((s, ("exception", type(e).__name__, str(e))))
        ref_srv, ref = got[0]
        for s, r in got[1:]:
            a = norm(ref) if norm else ref
            b = norm(r) if norm and not (isinstance(r, tuple) and r[:1] == ("exception",)) else r
            if a != b:
                tail = s.output()[-1500:]
                self.fail("%s differs from %s:\n  %s: %r\n  %s: %r\n%s output tail:\n%s" % (
                    s.name, ref_srv.name, ref_srv.name, a, s.name, b, s.name, tail))
        if isinstance(ref, tuple) and ref[:1] == ("exception",):
            self.fail("reference %s raised %r" % (ref_srv.name, ref))
        return ref

    def server(self, name: str) -> Optional[Server]:
        for s in self.servers:
            if s.name == name:
                return s
        return None


def key(r: Any) -> Any:
    """The comparable form of a Reply (or anything else, as is)."""
    return r.key() if isinstance(r, Reply) else r


def known_bug(description: str) -> Callable[[Callable], Callable]:
    """Marks a check that fails because of a nanosrv bug named in
    `description`: reported as TAP TODO (`not ok ... # TODO`), not as
    passing; once the bug is fixed the check reports an unexpected pass
    (`ok ... # TODO`) and the marker should go."""
    def deco(fn):
        fn = unittest.expectedFailure(fn)
        fn.__nsv_bug__ = description
        return fn
    return deco


def _tap_patch() -> None:
    """Teaches _tap.TapResult the expected-failure outcomes, as TAP TODO lines."""
    import _tap

    def addExpectedFailure(self, test, err):
        unittest.TestResult.addExpectedFailure(self, test, err)
        bug = getattr(getattr(test, test._testMethodName), "__nsv_bug__", "known bug")
        self._line(False, test, " # TODO " + bug)
        self._diag(err)

    def addUnexpectedSuccess(self, test):
        unittest.TestResult.addUnexpectedSuccess(self, test)
        self._line(True, test, " # TODO fixed? remove the known_bug marker")
    _tap.TapResult.addExpectedFailure = addExpectedFailure
    _tap.TapResult.addUnexpectedSuccess = addUnexpectedSuccess


def main() -> None:
    """_tap.main() with TODO lines for known bugs."""
    import _tap
    _tap_patch()
    _tap.main()


def live_stream(port: int, live_path: str, release_path: str) -> tuple:
    """GET live_path, read its first 6 bytes ("first\\n"), then GET
    release_path on another connection, then read the rest: a server that
    streams gives ("first\\n", "second released\\n"); one that holds the
    answer until the app's generator ends gives "second timeout" after
    the app's bounded wait."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("GET", live_path, headers={"Host": "example.test"})
        r = c.getresponse()
        first = r.read(6)
        rel = request(port, "GET", release_path, headers={"Host": "example.test"})
        rest = r.read()
        return r.status, first, rest, rel.status, rel.body
    finally:
        c.close()


def reuse_count(port: int, path: str, n: int, timeout: float = 10) -> int:
    """n GETs one after another on one raw connection, each answer read by
    its Content-Length: how many answers came back before the server closed
    (n when it kept the connection open throughout)."""
    s = socket.create_connection(("127.0.0.1", port), timeout)
    got = 0
    buf = b""
    try:
        for _ in range(n):
            s.sendall(("GET %s HTTP/1.1\r\nHost: example.test\r\n\r\n" % path).encode())
            while b"\r\n\r\n" not in buf:
                b = s.recv(65536)
                if not b:
                    return got
                buf += b
            head, _, buf = buf.partition(b"\r\n\r\n")
            m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
            if not m:
                return got  # only Content-Length answers are counted
            need = int(m.group(1))
            while len(buf) < need:
                b = s.recv(65536)
                if not b:
                    return got
                buf += b
            buf = buf[need:]
            got += 1
        return got
    except OSError:
        return got
    finally:
        s.close()


def wait_output(srv: Server, text: str, start: int = 0, seconds: float = 10.0) -> bool:
    """Wait (bounded) until the server printed a line containing `text`
    after its line number `start`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if any(text in line for line in srv.lines[start:]):
            return True
        time.sleep(0.05)
    return False


def broken_stream(port: int, path: str) -> Tuple[int, bytes, str]:
    """GET path whose streamed answer the app breaks off: what http.client
    read before the connection ended, and how it ended."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        c.request("GET", path, headers={"Host": "example.test"})
        r = c.getresponse()
        try:
            body = r.read()
            return r.status, body, "complete"
        except http.client.IncompleteRead as e:
            return r.status, e.partial, "incomplete"
    finally:
        c.close()
