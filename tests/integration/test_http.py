#!/usr/bin/env python3
"""HTTP/1.1 behaviour of echo-server over real sockets and curl: framing,
keep-alive, pipelining, chunked bodies, every error status and limit."""
import json
import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, echo_server, connect, read_response, request, closed_by_peer  # noqa

srv = echo_server("--max-body", "65536", "--request-timeout-ms", "1500", "--idle-timeout-ms", "3000")
if os.environ.get("NSV_TEST_FRONT"):  # the suite through build/http-proxy (tests/long/proxy_suites.sh)
    from proxy_upstream import Front
    srv = Front(srv, "--max-body", "65536", "--request-timeout-ms", "1500", "--idle-timeout-ms", "3000")
P = srv.port


def get(path, extra=b""):
    return request(P, b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n" + extra + b"\r\n")


# --- basics -----------------------------------------------------------------
st, h, body = get(b"/hello/world?a=1&b=%20")
eq(st, 200, "GET answers 200")
j = json.loads(body)
eq((j.pop("peer", None), type(j.pop("peer_port", None))), ("127.0.0.1", int), "JSON names the client: peer, peer_port")
eq(j, {"method": "GET", "path": "/hello/world", "query": "a=1&b=%20", "body_len": 0},
   "JSON contract: method, path (raw), query, body_len")
eq(h.get("content-type"), "application/json", "JSON content type")
ok("date" in h and h["date"].endswith("GMT"), "Date header added")
eq(h.get("content-length"), str(len(body)), "Content-Length added")

st, h, body = request(P, b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world")
eq((st, body), (200, b"hello world"), "POST /echo echoes the body")
blob = bytes(range(256)) * 200
st, h, body = request(P, b"PUT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(blob) + blob)
eq((st, body == blob), (200, True), "PUT /echo echoes 51200 binary bytes exactly")
st, h, body = request(P, b"POST /other HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
eq(json.loads(body)["body_len"], 3, "POST elsewhere reports body_len")

# curl as a real client
out = subprocess.run(["curl", "-s", "--data-binary", "curl body", "http://127.0.0.1:%d/echo" % P],
                     capture_output=True, timeout=10)
eq(out.stdout, b"curl body", "curl POST /echo")
out = subprocess.run(["curl", "-s", "-H", "Transfer-Encoding: chunked", "--data-binary", "chunky",
                      "http://127.0.0.1:%d/echo" % P], capture_output=True, timeout=10)
eq(out.stdout, b"chunky", "curl chunked upload de-chunked")
out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-I",
                      "http://127.0.0.1:%d/x" % P], capture_output=True, timeout=10)
eq(out.stdout, b"200", "curl HEAD")
out = subprocess.run(["curl", "-s", "-g", "http://[::1]:%d/v6" % P], capture_output=True, timeout=10)
ok(out.returncode != 0 or b"/v6" in out.stdout, "IPv4 listener does not crash on v6 attempt")

# --- keep-alive and pipelining ------------------------------------------------
s = connect(P)
for i in range(5):
    s.sendall(b"GET /k%d HTTP/1.1\r\nHost: x\r\n\r\n" % i)
    st, h, body = read_response(s)
    ok(st == 200 and json.loads(body)["path"] == "/k%d" % i, "keep-alive request %d on one connection" % i)
s.close()

s = connect(P)
s.sendall(b"".join(b"GET /p%d HTTP/1.1\r\nHost: x\r\n\r\n" % i for i in range(16)))
paths = []
for i in range(16):
    r = read_response(s)
    paths.append(json.loads(r[2])["path"] if r else None)
eq(paths, ["/p%d" % i for i in range(16)], "16 pipelined requests answered in order")
s.close()

s = connect(P)
req = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nabcde"
for b in req:
    s.sendall(bytes([b]))
    time.sleep(0.001)
r = read_response(s)
eq((r[0], r[2]), (200, b"abcde"), "request split byte by byte")
s.close()

st, h, body = request(P, b"GET /ten HTTP/1.0\r\n\r\n")
eq((st, h.get("connection")), (200, "close"), "HTTP/1.0 without keep-alive closes")
s = connect(P)
s.sendall(b"GET /ka HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
st, h, body = read_response(s)
eq(h.get("connection"), "keep-alive", "HTTP/1.0 keep-alive honoured")
s.sendall(b"GET /ka2 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
ok(read_response(s)[0] == 200, "second HTTP/1.0 keep-alive request")
s.close()
s = connect(P)
s.sendall(b"GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
st, h, body = read_response(s)
eq(h.get("connection"), "close", "Connection: close echoed")
ok(closed_by_peer(s), "server closes after Connection: close")
s.close()

# --- bodies -----------------------------------------------------------------
chunked = b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" \
          b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: yes\r\n\r\n"
st, h, body = request(P, chunked)
eq((st, body), (200, b"hello world"), "chunked body with extension and trailer")
s = connect(P)
for b in chunked:
    s.sendall(bytes([b]))
r = read_response(s)
eq(r[2], b"hello world", "chunked body byte by byte")
s.close()

s = connect(P)
s.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
st, h, body = read_response(s)
eq(st, 100, "Expect: 100-continue gets 100 before the body")
s.sendall(b"data")
st, h, body = read_response(s)
eq((st, body), (200, b"data"), "then the final response")
s.close()

st, h, body = request(P, b"HEAD /head HTTP/1.1\r\nHost: x\r\n\r\n", head_only=True)
ok(st == 200 and int(h["content-length"]) > 0, "HEAD gets headers with Content-Length")
s = connect(P)
s.sendall(b"HEAD /h HTTP/1.1\r\nHost: x\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n")
read_response(s, head_only=True)
st, h, body = read_response(s)
eq(json.loads(body)["path"], "/after", "HEAD response carries no body bytes")
s.close()

st, h, body = request(P, b"GET http://example.com:8080/abs/path?q=1 HTTP/1.1\r\nHost: example.com\r\n\r\n")
j = json.loads(body)
eq((j["path"], j["query"]), ("/abs/path", "q=1"), "absolute-form request target")

# --- errors: strict framing ---------------------------------------------------
bad = [
    (b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "CL with TE"),
    (b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400, "differing duplicate CL"),
    (b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400, "negative CL"),
    (b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "bad chunk size"),
    (b"GET / HTTP/1.1\nHost: x\r\n\r\n", 400, "bare LF in head"),
    (b"GET / HTTP/1.1\r\nHost: x\r\nA: b\rc\r\n\r\n", 400, "bare CR in header"),
    (b"GET / HTTP/1.1\r\nHost: x\r\nA: b\r\n folded\r\n\r\n", 400, "obs-fold"),
    (b"GET / HTTP/1.1\r\nHost: x\r\nBad(Name: v\r\n\r\n", 400, "invalid token char in name"),
    (b"GET / HTTP/1.1\r\nHost: x\r\nName : v\r\n\r\n", 400, "whitespace before colon"),
    (b"GET / HTTP/1.1\r\n\r\n", 400, "HTTP/1.1 without Host"),
    (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "two Host headers"),
    (b"G(T / HTTP/1.1\r\nHost: x\r\n\r\n", 400, "invalid method token"),
    (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "unsupported transfer coding"),
    (b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505, "unsupported version"),
    (b"GET / HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 20000 + b"\r\n\r\n", 431, "header block over 16 KiB"),
    (b"GET / HTTP/1.1\r\nHost: x\r\n" + b"".join(b"H%d: v\r\n" % i for i in range(150)) + b"\r\n", 431, "more than 100 headers"),
    (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414, "URI over 8 KiB"),
    (b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n", 413, "Content-Length over max body (413 before the body)"),
]
for raw, want, name in bad:
    s = connect(P)
    s.sendall(raw)
    r = read_response(s)
    ok(r is not None and r[0] == want and r[1].get("connection") == "close", "%s -> %d" % (name, want),
       "got %r" % (r[:2] if r else r,))
    ok(closed_by_peer(s), "%s: connection closed" % name)
    s.close()

s = connect(P)
s.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
try:
    for i in range(20):
        s.sendall(b"1000\r\n" + b"x" * 4096 + b"\r\n")
except OSError:
    pass
r = read_response(s)
eq(r[0] if r else None, 413, "chunked body over max body -> 413 while de-chunking")
s.close()

s = connect(P)
s.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n")
t0 = time.time()
r = read_response(s)
dt = time.time() - t0
eq(r[0] if r else None, 408, "incomplete request -> 408 after the request deadline")
ok(1.0 < dt < 4.0, "408 came after the deadline (%.2fs, deadline 1.5s)" % dt)
s.close()

s = connect(P)
s.sendall(b"GET /i HTTP/1.1\r\nHost: x\r\n\r\n")
read_response(s)
ok(not closed_by_peer(s, 1.5), "idle keep-alive connection still open before the idle timeout")
ok(closed_by_peer(s, 3.0), "idle keep-alive connection closed after the idle timeout")
s.close()

# --- many clients ---------------------------------------------------------------
results = []
def client(i):
    try:
        c = connect(P, timeout=10)
        good = 0
        for k in range(5):
            c.sendall(b"GET /c%d/%d HTTP/1.1\r\nHost: x\r\n\r\n" % (i, k))
            st, h, body = read_response(c)
            if st == 200 and json.loads(body)["path"] == "/c%d/%d" % (i, k):
                good += 1
        c.close()
        results.append(good)
    except Exception as e:  # noqa
        results.append(repr(e))
threads = [threading.Thread(target=client, args=(i,)) for i in range(200)]
for t in threads:
    t.start()
for t in threads:
    t.join(30)
eq(sum(r for r in results if isinstance(r, int)), 1000, "200 concurrent keep-alive clients x 5 requests")

# garbage must not kill it
s = connect(P)
s.sendall(os.urandom(3000))
r = read_response(s)
ok(r is None or r[0] == 400, "random bytes -> 400 or close")
s.close()
ok(get(b"/still-alive")[0] == 200, "server still serving")
ok(srv.alive(), "server process alive")
eq(srv.stop(), 0, "SIGTERM drains and exits 0")
done()
