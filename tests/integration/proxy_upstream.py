#!/usr/bin/env python3
"""Helpers for test_http_proxy.py (not a test by itself): a raw-socket
upstream that records every byte it receives and counts its connections,
with misbehaving paths, and a front that starts build/http-proxy before a
server so a suite can run through it (NSV_TEST_FRONT). Stdlib only.

Upstream paths (anything else answers 200 "ok" with keep-alive):
  /big?n=N[&chunked=1]   N bytes of a fixed pattern (Content-Length or chunked)
  /hop                   a response full of hop-by-hop headers
  /slowhead              waits 3 s before the head
  /die                   Content-Length 1000000, 1000 bytes, then close
  /diechunked            chunked, two chunks, then close (no last chunk)
  /badresp               two differing Content-Length lines
  /sink?wait=S           waits S seconds, then reads the body and answers its length and sha256
  /early413              answers 413 after 0.3 s without reading the body, and closes
"""
import hashlib
import os
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from nsvtest import BUILD, Server  # noqa: E402


_patterns = {}


def pattern(n):
    """n bytes of 0..255 repeated; kept, since large ones are slow to build
    on a busy machine (page faults) and every test asks for the same few."""
    if n not in _patterns:
        block = bytes(range(256)) * 4096  # 1 MiB
        _patterns[n] = (block * (n // len(block) + 1))[:n]
    return _patterns[n]


class Upstream:
    def __init__(self):
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(256)
        self.port = self.ls.getsockname()[1]
        self.lock = threading.Lock()
        self.conns = 0
        self.raw = {}       # bytes received per connection number (appended as they come)
        self.requests = []  # (head bytes, body bytes) of every complete request
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def received(self):
        with self.lock:
            return b"".join(b"".join(self.raw[k]) for k in sorted(self.raw))

    def reset(self):
        with self.lock:
            self.raw.clear()
            self.requests.clear()
            self.conns = 0

    def _accept(self):
        while not self.stopped:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            with self.lock:
                self.conns += 1
                self.serial = getattr(self, "serial", 0) + 1
                idx = self.serial
            threading.Thread(target=self._serve, args=(c, idx), daemon=True).start()

    def _recv(self, c, idx, buf):
        d = c.recv(65536)
        if d:
            with self.lock:
                self.raw.setdefault(idx, []).append(d)
        return d

    def _serve(self, c, idx):
        buf = b""
        c.settimeout(30)
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    d = self._recv(c, idx, buf)
                    if not d:
                        return
                    buf += d
                head, buf = buf.split(b"\r\n\r\n", 1)
                lines = head.split(b"\r\n")
                target = lines[0].split(b" ")[1].decode("latin1")
                hdrs = {}
                for l in lines[1:]:
                    k, _, v = l.partition(b":")
                    hdrs[k.strip().lower()] = v.strip()
                path, _, query = target.partition("?")
                q = dict(p.partition("=")[::2] for p in query.split("&") if p)
                if path == "/sink":
                    time.sleep(float(q.get("wait", "1")))
                if path == "/early413":  # refuses the body unread, as servers with a size limit do
                    time.sleep(0.3)
                    c.sendall(b"HTTP/1.1 413 Content Too Large\r\nConnection: close\r\nContent-Length: 9\r\n\r\ntoo large")
                    return
                body, buf, complete = self._body(c, idx, hdrs, buf)
                if not complete:
                    return
                with self.lock:
                    self.requests.append((head, body))
                if not self._answer(c, path, q, body):
                    return
        except (OSError, ValueError):
            return
        finally:
            c.close()

    def _body(self, c, idx, hdrs, buf):
        if b"content-length" in hdrs:
            n = int(hdrs[b"content-length"])
            h = hashlib.sha256()
            got = bytearray()
            while len(got) + len(buf) < n:
                got += buf
                buf = b""
                d = self._recv(c, idx, buf)
                if not d:
                    return bytes(got), b"", False
                buf = d
            take = n - len(got)
            got += buf[:take]
            return bytes(got), buf[take:], True
        if hdrs.get(b"transfer-encoding", b"").lower() == b"chunked":
            out = bytearray()
            while True:
                while b"\r\n" not in buf:
                    d = self._recv(c, idx, buf)
                    if not d:
                        return bytes(out), b"", False
                    buf += d
                line, buf = buf.split(b"\r\n", 1)
                size = int(line.split(b";")[0], 16)
                if size == 0:
                    while not buf.startswith(b"\r\n") and b"\r\n\r\n" not in buf:
                        d = self._recv(c, idx, buf)
                        if not d:
                            return bytes(out), b"", False
                        buf += d
                    buf = buf[2:] if buf.startswith(b"\r\n") else buf.split(b"\r\n\r\n", 1)[1]
                    return bytes(out), buf, True
                while len(buf) < size + 2:
                    d = self._recv(c, idx, buf)
                    if not d:
                        return bytes(out), b"", False
                    buf += d
                out += buf[:size]
                buf = buf[size + 2:]
        return b"", buf, True

    def _answer(self, c, path, q, body):
        if path == "/big":
            n = int(q.get("n", "0"))
            data = memoryview(pattern(n))
            if q.get("chunked"):
                c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                for i in range(0, n, 1 << 20):
                    piece = data[i:i + (1 << 20)]
                    c.sendall(b"%x\r\n" % len(piece))
                    c.sendall(piece)
                    c.sendall(b"\r\n")
                c.sendall(b"0\r\n\r\n")
            else:
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n)
                for i in range(0, n, 1 << 20):
                    c.sendall(data[i:i + (1 << 20)])
            return True
        if path == "/hop":
            c.sendall(b"HTTP/1.1 200 OK\r\nConnection: X-Secret, keep-alive\r\nX-Secret: s\r\n"
                      b"Keep-Alive: timeout=5\r\nProxy-Authenticate: Basic realm=x\r\nUpgrade: h2c\r\n"
                      b"Trailer: X-T\r\nProxy-Connection: keep-alive\r\nX-End: yes\r\nContent-Length: 3\r\n\r\nhop")
            return True
        if path == "/slowhead":
            time.sleep(3)
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nlate")
            return True
        if path == "/die":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n" + b"d" * 1000)
            time.sleep(0.2)
            return False
        if path == "/diechunked":
            c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n")
            time.sleep(0.2)
            return False
        if path == "/badresp":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!")
            return False
        if path == "/sink":
            text = b"%d %s" % (len(body), hashlib.sha256(body).hexdigest().encode())
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(text) + text)
            return True
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        return True

    def stop(self):
        self.stopped = True
        self.ls.close()


# For a proxy whose resident memory a suite bounds: AddressSanitizer's
# quarantine keeps freed blocks resident (up to 256 MiB by default), so on the
# ASan build a proxy that frees every buffer it is done with still looks like
# one that grows. With the quarantine off, RSS measures what the proxy holds;
# other builds ignore the variable.
RSS_ENV = {"ASAN_OPTIONS": ":".join(filter(None, [os.environ.get("ASAN_OPTIONS", ""),
                                                   "quarantine_size_mb=0"]))}


def proxy(to, *args, env=None):
    """build/http-proxy --listen 0 --to URL ARGS..., a started nsvtest.Server;
    NSV_PROXY_ARGS adds arguments to every proxy (e.g. "--workers 2");
    env adds to its environment (RSS_ENV for a proxy whose memory is bounded)."""
    extra = os.environ.get("NSV_PROXY_ARGS", "").split()
    return Server([os.path.join(BUILD, "http-proxy"), "--listen", "0", "--to", to] + list(args) + extra,
                  env=env)


class Front:
    """A server with build/http-proxy in front: port is the proxy's, proc the
    server's (a suite may signal it), stop() stops both and returns the
    server's exit status."""

    def __init__(self, server, *args):
        self.server = server
        self.proxy = proxy("http://127.0.0.1:%d" % server.port, *args)
        self.port = self.proxy.port
        self.proc = server.proc

    def alive(self):
        return self.server.alive() and self.proxy.alive()

    def stop(self, *a, **kw):
        rc = self.server.stop(*a, **kw)
        self.proxy.stop()
        return rc


def rss_kib(pid, field="VmRSS"):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def node_server(script):
    """node -e SCRIPT, which prints 'listening on PORT'."""
    return Server(["node", "-e", script])


if __name__ == "__main__":
    print("1..0 # SKIP helpers for test_http_proxy.py")
