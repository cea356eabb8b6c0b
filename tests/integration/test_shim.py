#!/usr/bin/env python3
"""EINTR, EAGAIN and short reads/writes everywhere: echo-server runs with
tests/shim (LD_PRELOAD) making its send, recv and accept4 fail or come up
short on a steady schedule. Every answer must still be complete and exact:
requests, large bodies both ways, pipelining, chunked uploads, WebSocket."""
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, Server, BUILD, connect, read_response, ws_frame, ws_read_frame  # noqa

SHIM = os.path.join(BUILD, "tests", "shim", "libnsvshim.so")


def scenario(port, tag):
    st, _, body = (lambda s: (s.sendall(b"GET /a?b=c HTTP/1.1\r\nHost: x\r\n\r\n"), read_response(s))[1])(connect(port))
    eq(st, 200, tag + ": GET")
    blob = bytes(range(256)) * 1024  # 256 KiB both ways
    s = connect(port, timeout=20)
    s.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(blob) + blob)
    r = read_response(s)
    ok(r and r[0] == 200 and r[2] == blob, tag + ": 256 KiB body echoed exactly")
    # pipelined requests with bodies, read back in order
    reqs = b"".join(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(b"%d" % i * 50), b"%d" % i * 50)
                    for i in range(200))
    s.sendall(reqs)
    got = [read_response(s) for _ in range(200)]
    ok(all(g and g[0] == 200 and g[2] == b"%d" % i * 50 for i, g in enumerate(got)),
       tag + ": 200 pipelined requests answered in order")
    chunks = b"".join(b"%x\r\n%s\r\n" % (n, b"k" * n) for n in (1, 100, 5000, 70000)) + b"0\r\n\r\n"
    s.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks)
    r = read_response(s)
    ok(r and r[2] == b"k" * 75101, tag + ": chunked upload decoded exactly")
    s.close()
    w = connect(port, timeout=20)
    w.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        head += w.recv(1)
    ok(head.startswith(b"HTTP/1.1 101 "), tag + ": WebSocket upgrade")
    msgs = [b"", b"x", bytes(range(200)), os.urandom(70000), b"t" * 300000]
    w.sendall(b"".join(ws_frame(2, m) for m in msgs))
    back = []
    try:
        for _ in msgs:
            back.append(ws_read_frame(w))
    except OSError as e:
        back.append(repr(e))
    ok(back == [(2, m) for m in msgs], tag + ": WebSocket messages up to 300 KB echoed exactly",
       [b if b is None or isinstance(b, str) else (b[0], len(b[1] or b""), (b[1] or b"")[:8] if b[0] == 8 else b"") for b in back])
    w.close()


def run(tag, *args):
    env = {"LD_PRELOAD": SHIM,
           "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"}
    with Server([os.path.join(BUILD, "echo-server"), "--port", "0"] + list(args), env=env) as srv:
        conns = []
        for i in range(50):  # accept4 fails with EINTR/EAGAIN along the way
            s = connect(srv.port)
            s.sendall(b"GET /%d HTTP/1.1\r\nHost: x\r\n\r\n" % i)
            conns.append(s)
        eq(sum((read_response(s) or [0])[0] == 200 for s in conns), 50, tag + ": 50 connections accepted and served")
        for s in conns:
            s.close()
        scenario(srv.port, tag)
        eq(srv.stop(), 0, tag + ": clean exit")


ok(os.path.exists(SHIM), "shim built")
run("shim")
run("shim, 2 workers", "--threads", "2")
done()
