"""Shared helpers for the integration tests: TAP output, starting servers on
ephemeral ports (stopped by PID), raw-socket HTTP helpers. Stdlib only."""
import os
import signal
import socket
import struct
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, os.environ.get("NSV_BUILD", "build"))

_n = 0
_fail = 0


def ok(cond, name, diag=None):
    global _n, _fail
    _n += 1
    if not cond:
        _fail += 1
    print("%sok %d - %s" % ("" if cond else "not ", _n, name))
    if not cond:
        # stderr too: prove shows it without -v, so a failure in CI says what failed
        lines = str(diag).splitlines()[:20] if diag is not None else []
        sys.stderr.write("not ok %d - %s\n" % (_n, name) + "".join("#   %s\n" % l for l in lines))
        sys.stderr.flush()
        for line in lines:
            print("#   " + line)
    sys.stdout.flush()
    return cond


def eq(got, want, name):
    return ok(got == want, name, "got:  %r\nwant: %r" % (got, want))


def done():
    print("1..%d" % _n)
    sys.exit(1 if _fail else 0)


class Server:
    """Runs PROGRAM --port 0 ARGS..., waits for 'listening on PORT'."""

    def __init__(self, argv, timeout=10, env=None):
        e = dict(os.environ)
        if env:
            e.update(env)
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=e, cwd=ROOT)
        deadline = time.time() + timeout
        self.port = None
        while time.time() < deadline:
            line = self.proc.stdout.readline().decode()
            if not line:
                break
            if line.startswith("listening on "):
                self.port = int(line.split()[2])
                break
        if self.port is None:
            self.stop()
            raise RuntimeError("server did not start: %r %s" % (argv, self.proc.stderr.read()[:2000]))

    def alive(self):
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=10):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.stop()


def http2_built():
    """Whether the build under test has HTTP/2: what its config records (a
    sanitizer build's library cannot be loaded into this interpreter), else
    nsv_http2_available() of its library."""
    try:
        with open(os.path.join(BUILD, "config")) as f:
            return "HTTP2=nghttp2\n" in f.read()
    except OSError:
        pass
    try:
        import ctypes
        return ctypes.CDLL(os.path.join(BUILD, "libnanosrv.so.1")).nsv_http2_available() == 1
    except (OSError, AttributeError):
        return False


def rss_kib(pid, field="VmRSS"):
    """A process's resident memory (or VmHWM, its peak) in KiB from /proc, 0 if gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def metrics(port):
    """echo-server's GET /metrics (Prometheus text) as {series: value}."""
    r = subprocess.run(["curl", "-sS", "--http1.1", "--max-time", "5", "http://127.0.0.1:%d/metrics" % port],
                       stdout=subprocess.PIPE)
    m = {}
    for line in r.stdout.decode().splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            try:
                m[k] = float(v)
            except ValueError:
                pass
    return m


def skip_without_http2():
    """A TAP skip_all (exit 0) when the build has no HTTP/2."""
    if not http2_built():
        print("1..0 # SKIP the library is built without HTTP/2 (nghttp2)")
        sys.exit(0)


def echo_server(*args, threads=None):
    argv = [os.path.join(BUILD, "echo-server"), "--port", "0"]
    t = threads if threads is not None else os.environ.get("NSV_THREADS")
    if t:
        argv += ["--threads", str(t)]
    extra = os.environ.get("NSV_ECHO_ARGS", "").split()
    return Server(argv + extra + list(args))


_bufs = {}


def connect(port, host="127.0.0.1", timeout=5):
    s = socket.create_connection((host, port), timeout=timeout)
    _bufs[id(s)] = b""
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_response(sock, head_only=False):
    """Reads one HTTP response; returns (status, headers dict lower-case, body)
    or None if the connection closed before a status line."""
    buf = _bufs.get(id(sock), b"")
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            _bufs[id(sock)] = b""
            return None if not buf else ("partial", {}, buf)
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin1").split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for l in lines[1:]:
        k, v = l.split(":", 1)
        hdrs[k.strip().lower()] = v.strip()
    body = b""
    if head_only or status in (100, 101, 204, 304):
        pass
    elif "content-length" in hdrs:
        n = int(hdrs["content-length"])
        parts, have = [rest], len(rest)  # joined once: += on bytes is quadratic for big bodies
        while have < n:
            chunk = sock.recv(max(65536, min(n - have, 1 << 20)))
            if not chunk:
                break
            parts.append(chunk)
            have += len(chunk)
        rest = b"".join(parts)
        body, rest = rest[:n], rest[n:]
    elif hdrs.get("transfer-encoding", "").lower() == "chunked":
        while True:
            while b"\r\n" not in rest:
                rest += sock.recv(65536)
            size_line, rest = rest.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            while len(rest) < size + 2:
                rest += sock.recv(65536)
            body += rest[:size]
            rest = rest[size + 2:]
            if size == 0:
                break
    else:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
        body, rest = rest, b""
    _bufs[id(sock)] = rest
    return status, hdrs, body


def request(port, raw, timeout=5, head_only=False):
    """Sends raw bytes on a new connection and reads one response."""
    s = connect(port, timeout=timeout)
    try:
        s.sendall(raw)
        return read_response(s, head_only)
    finally:
        s.close()


def closed_by_peer(sock, timeout=3):
    """True if the peer closes (EOF or reset) within timeout."""
    sock.settimeout(timeout)
    try:
        while True:
            d = sock.recv(65536)
            if not d:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


# ---- WebSocket client frames over raw sockets ------------------------------

def ws_frame(op, payload=b"", fin=True, mask=True, rsv=0, length=None):
    """A client frame (masked unless mask=False); length may lie on purpose."""
    b0 = (0x80 if fin else 0) | rsv << 4 | op
    n = len(payload) if length is None else length
    if n < 126:
        hdr = bytes([b0, (0x80 if mask else 0) | n])
    elif n < 65536:
        hdr = bytes([b0, (0x80 if mask else 0) | 126]) + struct.pack(">H", n)
    else:
        hdr = bytes([b0, (0x80 if mask else 0) | 127]) + struct.pack(">Q", n)
    if not mask:
        return hdr + payload
    key = b"\x11\x22\x33\x44"
    return hdr + key + bytes(c ^ key[i % 4] for i, c in enumerate(payload))


def ws_read_frame(s, whole_byte=False):
    """(opcode, payload) of the next server frame, or None at EOF; with
    whole_byte, the whole first byte (FIN, RSV bits, opcode) for the opcode."""
    def need(n):
        buf = b""
        while len(buf) < n:
            d = s.recv(n - len(buf))
            if not d:
                return None
            buf += d
        return buf
    h = need(2)
    if not h:
        return None
    n = h[1] & 0x7f
    if n == 126:
        n = struct.unpack(">H", need(2))[0]
    elif n == 127:
        n = struct.unpack(">Q", need(8))[0]
    return h[0] if whole_byte else h[0] & 0x0f, need(n) if n else b""
