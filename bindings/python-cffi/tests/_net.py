"""Helpers of the raw TCP / TLS suites: example processes, ports, certificates."""
import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from _tap import PKG

EXAMPLES = os.path.join(PKG, "examples")


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = PKG + os.pathsep + e.get("PYTHONPATH", "")
    e["PYTHONUNBUFFERED"] = "1"  # examples print to a pipe that the test reads line by line
    return e


def free_port():
    """A port the kernel just handed out (for programs that take a fixed one)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, proc=None, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError("process exited with %s: %s" % (proc.returncode, proc.stderr.read()
                                                                 if proc.stderr else ""))
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nothing listens on port %d" % port)


class Proc:
    """A program run for a with-block, stopped by its PID."""

    def __init__(self, argv, stdin=None, listening_line=True):
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=stdin, env=env(),
                                  cwd=PKG)
        self.port = None
        if listening_line:
            line = self.p.stdout.readline().decode()
            if not line.startswith("listening on "):
                self.p.kill()
                raise RuntimeError("no 'listening on PORT' line: %r %r" % (line, self.p.stderr.read()))
            self.port = int(line.split()[2])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        if self.p.poll() is None:
            os.kill(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.p.pid, signal.SIGKILL)
                self.p.wait(10)
        for f in (self.p.stdout, self.p.stderr, self.p.stdin):
            if f is not None:
                f.close()


def example(name, subs, stdin=None):
    """Run examples/NAME with textual substitutions (addresses and ports
    only) from a temporary copy; the program's code is the example's."""
    with open(os.path.join(EXAMPLES, name)) as f:
        text = f.read()
    for a, b in subs:
        if a not in text:
            raise AssertionError("%r not in %s" % (a, name))
        text = text.replace(a, b)
    fd, path = tempfile.mkstemp(suffix=".py", prefix="ex_")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    p = Proc([sys.executable, path], stdin=stdin, listening_line=False)
    p.tmp = path
    return p


def echo_roundtrip(port, data, half_close=True, ctx=None, timeout=60):
    """Send data (then shut the write side), read until EOF or len(data)."""
    if ctx is not None:
        return asyncio.run(asyncio.wait_for(_tls_roundtrip(port, data, ctx), timeout))
    s = socket.create_connection(("127.0.0.1", port), 10)
    s.settimeout(timeout)
    err = []

    def w():
        try:
            s.sendall(data)
            if half_close:
                s.shutdown(socket.SHUT_WR)
        except OSError as e:
            err.append(e)
    t = threading.Thread(target=w, daemon=True)
    t.start()
    got = bytearray()
    while len(got) < len(data) or half_close:
        b = s.recv(1 << 16)
        if not b:
            break
        got += b
    t.join(timeout)
    s.close()
    if err:
        raise err[0]
    return bytes(got)


async def _tls_roundtrip(port, data, ctx):
    # An SSLSocket must not be read and written from two threads at once:
    # asyncio's TLS streams do both directions in one.
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")

    async def send():
        writer.write(data)
        await writer.drain()
    task = asyncio.ensure_future(send())
    got = await reader.readexactly(len(data)) if data else b""
    await task
    writer.close()
    return got


CERTS = None


def certs():
    """A CA, a server certificate for localhost, a client certificate, a
    certificate of another CA, an encrypted key: {name: path}."""
    global CERTS
    if CERTS is not None:
        return CERTS
    d = tempfile.mkdtemp(prefix="nsv_pycerts_")

    def sh(*argv):
        subprocess.run(argv, cwd=d, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    for ca in ("ca", "other"):
        sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-keyout", ca + ".key", "-out", ca + ".crt", "-days", "30", "-subj", "/CN=Test " + ca)

    def make(name, ca, subj, san=None):
        sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-keyout", name + ".key", "-out", name + ".csr", "-subj", subj)
        argv = ["openssl", "x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
                "-CAcreateserial", "-out", name + ".crt", "-days", "30"]
        if san:
            with open(os.path.join(d, name + ".ext"), "w") as f:
                f.write("subjectAltName=" + san + "\n")
            argv += ["-extfile", name + ".ext"]
        sh(*argv)

    make("srv", "ca", "/CN=localhost", "DNS:localhost,IP:127.0.0.1")
    make("alice", "ca", "/CN=alice/O=Example")
    make("mallory", "other", "/CN=mallory")
    # Traditional PEM encryption (DEK-Info), which every mbedTLS build reads.
    sh("openssl", "ec", "-in", "srv.key", "-aes128", "-passout", "pass:s3cret", "-out", "srv_enc.key")
    CERTS = {n: os.path.join(d, n) for n in os.listdir(d)}
    return CERTS


def s_client_echo(port, cafile, line, extra=()):
    """One line through `openssl s_client` (verifying the server against
    cafile); returns the line read back ("" if the handshake failed)."""
    p = subprocess.Popen(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-CAfile", cafile,
                          "-servername", "localhost", "-verify_return_error", "-quiet"] + list(extra),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    timer = threading.Timer(20, p.kill)
    timer.start()
    try:
        p.stdin.write(line)
        p.stdin.flush()
        got = p.stdout.readline()
    finally:
        timer.cancel()
        p.kill()
        p.wait(10)
        for f in (p.stdin, p.stdout, p.stderr):
            f.close()
    return got
