#!/usr/bin/env python3
"""TLS session resumption through echo-server --cert/--key: openssl s_client
-reconnect with session tickets and with the session cache alone
(-no_ticket), Python's ssl module reusing a session on a single-loop and a
sharded server (every worker resumes what another issued), and the metrics
that count resumed handshakes."""
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, Server, BUILD  # noqa

ECHO = os.path.join(BUILD, "echo-server")
D = tempfile.mkdtemp(prefix="nsv-tlsr-")
subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", "k.pem", "-out", "c.pem", "-days", "2", "-subj", "/CN=localhost"],
               check=True, capture_output=True, cwd=D)


def reconnect(port, *extra):
    """openssl s_client -reconnect: one full handshake, then five reconnects
    offering the session. Returns (new, reused) counts."""
    r = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-reconnect", "-tls1_2"]
                       + list(extra), input=b"", capture_output=True, timeout=30)
    lines = r.stdout.decode(errors="replace").splitlines()
    return (sum(1 for x in lines if x.startswith("New,")), sum(1 for x in lines if x.startswith("Reused,")))


def handshake(port, ctx, session=None):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost", session=session) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            buf = b""
            while True:
                d = s.recv(65536)
                if not d:
                    break
                buf += d
            return s.session, s.session_reused, buf.split(b" ", 2)[1] if buf else b""


def metric(port, name):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    body = urllib.request.urlopen("https://127.0.0.1:%d/metrics" % port, context=ctx, timeout=10).read().decode()
    for line in body.splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    return None


ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.maximum_version = ssl.TLSVersion.TLSv1_2  # the library's mbedTLS 2.28 speaks TLS 1.2

for label, extra in (("single loop", []), ("sharded, 2 workers", ["--threads", "2"])):
    srv = Server([ECHO, "--port", "0", "--cert", os.path.join(D, "c.pem"), "--key", os.path.join(D, "k.pem")]
                 + extra)
    try:
        if shutil.which("openssl"):
            eq(reconnect(srv.port), (1, 5), "%s: s_client -reconnect with tickets: 1 new, 5 reused" % label)
            eq(reconnect(srv.port, "-no_ticket"), (1, 5),
               "%s: s_client -reconnect without tickets: the session cache resumes (1 new, 5 reused)" % label)
        sess, reused, st = handshake(srv.port, ctx)
        ok(not reused and st == b"200", "%s: Python ssl: first handshake is full, answer 200" % label)
        results = [handshake(srv.port, ctx, sess) for _ in range(8)]
        eq([(r[1], r[2]) for r in results], [(True, b"200")] * 8,
           "%s: Python ssl: 8 connections offering the session all resume (on every worker), answer 200"
           % label)
        eq(metric(srv.port, "nanosrv_tls_resumed_total"), 18,
           "%s: nanosrv_tls_resumed_total counts the 18 resumed handshakes" % label)
        eq(metric(srv.port, "nanosrv_tls_handshakes_total"), 23,
           "%s: nanosrv_tls_handshakes_total counts all 23 (12 s_client, 9 Python, 2 /metrics reads)"
           % label)
    finally:
        srv.stop()

shutil.rmtree(D, ignore_errors=True)
done()
