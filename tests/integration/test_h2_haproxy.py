#!/usr/bin/env python3
"""HAProxy (Debian's) in front of echo-server, speaking HTTP/2 to it: the
backend line says `proto h2`, so HAProxy opens h2c (prior knowledge)
connections and multiplexes its clients' HTTP/1.1 requests over them as
streams. Answers must be what the same requests get from echo-server
directly (status, body, the echo of a POST body), and echo-server's access
log must show the requests arrived as HTTP/2.0."""
import http.client
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, skip_without_http2  # noqa: E402
from lbtest import Echo, HAProxy, free_port, have  # noqa: E402

skip_without_http2()

tmp = tempfile.mkdtemp(prefix="nsv-h2-haproxy-")
procs = []


def finish():
    for p in procs:
        p.stop(signal.SIGKILL, 5)
    shutil.rmtree(tmp, ignore_errors=True)
    done()


def request(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request(method, path, body=body)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


if not have("haproxy"):
    ok(False, "haproxy installed (tools/install-deps.sh)")
    finish()

echo = Echo("--access-log", "common")
procs.append(echo)
front = free_port()
CFG = """global
    maxconn 256
defaults
    mode http
    timeout connect 5s
    timeout client 10s
    timeout server 10s
frontend fe
    bind 127.0.0.1:%d
    default_backend be
backend be
    http-reuse always
    server s1 127.0.0.1:%d proto h2
""" % (front, echo.port)
hap = HAProxy(CFG, tmp, front)
procs.append(hap)

# the same requests, direct (HTTP/1.1) and through HAProxy (HTTP/2 to echo-server)
cases = [("GET", "/hello?x=1", None), ("POST", "/echo", b"a body to echo back"),
         ("PUT", "/echo", os.urandom(300000)), ("GET", "/missing/path", None)]
for method, path, body in cases:
    direct = request(echo.port, method, path, body)
    via = request(front, method, path, body)
    eq(via[0], direct[0], "%s %s: same status through HAProxy over h2 (%d)" % (method, path, via[0]))
    if path.startswith("/echo"):
        ok(via[1] == body, "%s %s: the body comes back whole (%d bytes)" % (method, path, len(via[1])))
    elif via[0] == 200:
        a, b = json.loads(via[1]), json.loads(direct[1])
        eq((a["method"], a["path"], a["query"]), (b["method"], b["path"], b["query"]),
           "%s %s: the same request reached the host" % (method, path))

# many clients at once share HAProxy's h2 connections as streams
errors = []


def client(i):
    try:
        st, b = request(front, "POST", "/echo", b"client %d" % i)
        if st != 200 or b != b"client %d" % i:
            errors.append((i, st, b[:40]))
    except Exception as e:  # noqa: BLE001 (reported below)
        errors.append((i, repr(e)))


threads = [threading.Thread(target=client, args=(i,)) for i in range(40)]
for t in threads:
    t.start()
for t in threads:
    t.join(30)
eq(errors, [], "40 concurrent clients through HAProxy: every answer right")

# echo-server writes its access log from a timer: wait for the lines (bounded)
deadline = time.monotonic() + 10
while True:
    log = echo.log()
    h2_lines = [l for l in log if " HTTP/2.0\"" in l]
    h1_lines = [l for l in log if " HTTP/1.1\"" in l]
    if (len(h2_lines) >= 44 and len(h1_lines) >= 4) or time.monotonic() > deadline:
        break
    time.sleep(0.1)
ok(len(h2_lines) >= 44, "echo-server logged the proxied requests as HTTP/2.0 (%d lines)" % len(h2_lines))
ok(len(h1_lines) >= 4, "and the direct ones as HTTP/1.1 (%d lines)" % len(h1_lines))
finish()
