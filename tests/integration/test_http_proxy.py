#!/usr/bin/env python3
"""build/http-proxy (examples/http_proxy.c) in front of real servers: our
echo-server, nginx, Python's http.server, a Node http server, and a
raw-socket upstream that records every byte it receives (proxy_upstream.py).
Hop-by-hop headers both ways, X-Forwarded-*/Forwarded, 502/504, an upstream
dying mid-body, request smuggling attempts (nothing the server side refuses
reaches the upstream; what passes is re-framed), streaming with backpressure
both ways (64 MiB through a slow reader and to a slow upstream, proxy memory
measured), upstream keep-alive reuse, WebSocket pass-through."""
import atexit
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

T0 = time.time()


def lap(name):
    if os.environ.get("NSV_TEST_LAPS"):
        print("# %.2fs %s" % (time.time() - T0, name))

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, echo_server, connect, read_response, request, closed_by_peer, Server  # noqa
from proxy_upstream import Upstream, proxy, pattern, rss_kib, node_server, RSS_ENV  # noqa

up = Upstream()
px = proxy("http://127.0.0.1:%d" % up.port, "--head-timeout-ms", "2000", "--max-body", str(80 << 20))
P = px.port
atexit.register(px.stop)  # also when a check raises: no proxy outlives the test


def last_head():
    return up.requests[-1][0].decode("latin1") if up.requests else ""


def head_lines(head):
    return [l for l in head.split("\r\n")[1:] if l]


def names(head):
    return [l.split(":", 1)[0].lower() for l in head_lines(head)]


# ---- request headers ---------------------------------------------------------
up.reset()
st, h, body = request(P, b"GET /h?q=1 HTTP/1.1\r\nHost: front.example:8080\r\n"
                         b"Connection: keep-alive, X-Private, TE\r\nX-Private: secret\r\nKeep-Alive: 300\r\n"
                         b"Proxy-Connection: keep-alive\r\nTE: trailers\r\nTrailer: X-T\r\nUpgrade: h2c\r\n"
                         b"Proxy-Authorization: Basic eDp5\r\nAuthorization: Bearer t\r\nX-Forwarded-For: 10.0.0.1\r\n"
                         b"X-Forwarded-Proto: https\r\nX-Forwarded-Host: spoofed\r\nForwarded: for=10.0.0.1\r\n"
                         b"Expect: 100-continue\r\nX-End: 1\r\n\r\n")
eq((st, body), (200, b"ok"), "GET through the proxy")
head = last_head()
eq(head.split("\r\n")[0], "GET /h?q=1 HTTP/1.1", "request line: path and query as sent")
got = names(head)
for n in ("connection", "x-private", "keep-alive", "proxy-connection", "te", "trailer", "upgrade",
          "proxy-authorization", "expect"):
    ok(n not in got, "request: %s not forwarded" % n, head)
ok("authorization" in got and "x-end" in got, "request: end-to-end headers forwarded", head)
hd = dict((l.split(":", 1)[0].lower(), l.split(":", 1)[1].strip()) for l in head_lines(head))
eq(hd.get("x-forwarded-for"), "10.0.0.1, 127.0.0.1", "X-Forwarded-For: client address appended")
eq(hd.get("x-forwarded-proto"), "http", "X-Forwarded-Proto set (the client's value replaced)")
eq(hd.get("x-forwarded-host"), "front.example:8080", "X-Forwarded-Host: the client's Host")
eq(hd.get("forwarded"), 'for=10.0.0.1, for=127.0.0.1;proto=http;host="front.example:8080"',
   "Forwarded: an element appended (RFC 7239)")
eq(hd.get("host"), "front.example:8080", "Host: the client's (the default, --host-header client)")
eq(got.count("host"), 1, "one Host line")
eq(got.count("x-forwarded-for"), 1, "one X-Forwarded-For line")
pu = proxy("http://127.0.0.1:%d" % up.port, "--host-header", "upstream")
st, h, body = request(pu.port, b"GET /h HTTP/1.1\r\nHost: front.example:8080\r\n\r\n")
hd = dict((l.split(":", 1)[0].lower(), l.split(":", 1)[1].strip()) for l in head_lines(last_head()))
eq((st, hd.get("host"), hd.get("x-forwarded-host")), (200, "127.0.0.1:%d" % up.port, "front.example:8080"),
   "--host-header upstream: the --to authority, the client's in X-Forwarded-Host")
eq(pu.stop(), 0, "that proxy exits 0")

lap("response headers")
# ---- response headers ----------------------------------------------------------
st, h, body = request(P, b"GET /hop HTTP/1.1\r\nHost: x\r\n\r\n")
eq((st, body), (200, b"hop"), "response through the proxy")
for n in ("x-secret", "keep-alive", "proxy-authenticate", "upgrade", "trailer", "proxy-connection"):
    ok(n not in h, "response: %s not forwarded" % n, h)
eq(h.get("x-end"), "yes", "response: end-to-end header kept")
ok(h.get("connection", "keep-alive") != "close", "response: the upstream's Connection is not the client's")

lap("keep-alive reuse")
# ---- keep-alive reuse upstream ------------------------------------------------------
up.reset()
for i in range(10):
    request(P, b"GET /ka%d HTTP/1.1\r\nHost: x\r\n\r\n" % i)
s = connect(P)
for i in range(10):
    s.sendall(b"GET /kb%d HTTP/1.1\r\nHost: x\r\n\r\n" % i)
    read_response(s)
s.close()
eq(len(up.requests), 20, "20 requests reached the upstream")
ok(up.conns <= 1, "20 requests, %d new upstream connection(s): the pool keeps them alive" % up.conns)

lap("normalised")
# ---- normalised framing -----------------------------------------------------------
up.reset()
st, h, body = request(P, b"POST /n HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                         b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n")
eq(st, 200, "chunked request with extension and trailer")
raw = up.received()
ok(b"ext=1" not in raw and b"X-Trailer" not in raw, "chunk extensions and trailers do not reach the upstream", raw)
ok(up.requests and up.requests[-1][1] == b"hello world", "the body arrives de-chunked and re-framed", raw)
up.reset()
request(P, b"POST /n HTTP/1.1\r\nHost: x\r\nContent-Length: 005\r\n\r\nabcde")
ok(b"\r\nContent-Length: 5\r\n" in up.received(), "Content-Length re-written by the proxy", up.received())

lap("smuggling")
# ---- smuggling: what the server side refuses never reaches the upstream ------------
attacks = [
    (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n", "CL + TE"),
    (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 6\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n", "TE + CL"),
    (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 40\r\n\r\nabcGET /smuggled HTTP/1.1\r\n\r\n", "two Content-Length values"),
    (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3,40\r\n\r\nabc", "Content-Length list"),
    (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\nabc", "signed Content-Length"),
    (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n", "unknown transfer coding"),
    (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n", "chunked not last"),
    (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n", "space before colon"),
    (b"POST / HTTP/1.1\r\nHost: x\r\nX: y\r\n Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "obs-fold"),
    (b"POST / HTTP/1.1\r\nHost: x\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "bare LF"),
    (b"GET / HTTP/1.1\r\nHost: x\r\nX: a\x00b\r\n\r\n", "NUL in a value"),
    (b"GET / HTTP/1.1\r\nHost: x\r\nX: a\rb\r\n\r\n", "bare CR in a value"),
    (b"GET / HTTP/1.1\r\nHost: x\r\nBad\x01Name: v\r\n\r\n", "control byte in a name"),
    (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "two Host lines"),
    (b"GET /a b HTTP/1.1\r\nHost: x\r\n\r\n", "space in the target"),
    (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[:-2] + b"Content-Length: 99999999999999999999\r\n\r\n", "huge Content-Length"),
]
for raw_req, name in attacks:
    up.reset()
    s = connect(P)
    s.sendall(raw_req)
    r = read_response(s)
    ok(r is not None and 400 <= r[0] < 600 and r[0] not in (502, 504), "%s: refused by the proxy (%s)" % (
        name, r[0] if r else None))
    s.close()
    eq(up.received(), b"", "%s: no byte reached the upstream" % name)

# Errors in the body come after the head went upstream: the upstream must see
# an unfinished request (its connection closes), never a complete one.
for first, second, name in [
    (b"POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
     b"zz\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n", "bad chunk size mid-body"),
    (b"POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
     b"5\r\nworldXX0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n", "chunk without its CRLF"),
]:
    up.reset()
    s = connect(P)
    s.sendall(first)
    time.sleep(0.3)  # the head and the first chunk go upstream
    s.sendall(second)
    r = read_response(s)
    ok(r is not None and r[0] == 400, "%s: 400" % name, r and r[:2])
    s.close()
    time.sleep(0.3)
    raw = up.received()
    ok(up.requests == [] and b"smuggled" not in raw, "%s: the upstream saw no complete request" % name, raw)

lap("upstream errors")
# ---- upstream errors ---------------------------------------------------------------
st, h, body = request(P, b"GET /badresp HTTP/1.1\r\nHost: x\r\n\r\n")
eq(st, 502, "malformed upstream response -> 502")
ok(len(body) < 200 and b"502" in body, "502 with a short body", body)
st, h, body = request(P, b"GET /slowhead HTTP/1.1\r\nHost: x\r\n\r\n")
eq(st, 504, "upstream head timeout -> 504")
s = connect(P)
s.sendall(b"GET /die HTTP/1.1\r\nHost: x\r\n\r\n")
r = read_response(s)
ok(r is not None and r[0] == 200 and len(r[2]) < 1000000, "upstream dies mid-body (Content-Length): body cut short",
   r and (r[0], len(r[2])))
ok(closed_by_peer(s), "... and the client connection is closed")
s.close()
s = connect(P, timeout=5)
s.sendall(b"GET /diechunked HTTP/1.1\r\nHost: x\r\n\r\n")
data = b""
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
except OSError:
    pass
s.close()
ok(data.startswith(b"HTTP/1.1 200") and b"hello" in data and not data.endswith(b"0\r\n\r\n"),
   "upstream dies mid-body (chunked): no last chunk, connection closed", data[-60:])

refused = socket.socket()
refused.bind(("127.0.0.1", 0))
dead_port = refused.getsockname()[1]
refused.close()
with proxy("http://127.0.0.1:%d" % dead_port) as p2:
    st, h, body = request(p2.port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    eq(st, 502, "connection refused -> 502")
    ok(b"ECONNREFUSED" in body, "the body names the failure", body)
    got = []
    for i in range(5):  # a client that sends all of a large body before reading
        try:
            got.append(request(p2.port, b"PUT /up HTTP/1.1\r\nHost: x\r\nContent-Length: 12000000\r\n\r\n"
                               + b"u" * 12000000)[0])
        except OSError as e:
            got.append(repr(e))
    eq(got, [502] * 5, "connection refused during an upload -> 502 reaches the client (5 tries)")
with proxy("http://no-such-host.invalid:80", "--connect-timeout-ms", "3000") as p3:
    st, h, body = request(p3.port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", timeout=10)
    ok(st in (502, 504), "unknown upstream name -> 502 (%s)" % st, body)

lap("streaming")
# ---- streaming with backpressure ------------------------------------------------------
BIG = 64 << 20
rss0 = rss_kib(px.proc.pid)
s = connect(P, timeout=30)
s.sendall(b"GET /big?n=%d HTTP/1.1\r\nHost: x\r\n\r\n" % BIG)
time.sleep(1.0)  # a reader that is late: the upstream is fast
rss_mid = rss_kib(px.proc.pid)
h = hashlib.sha256()
buf = b""
while b"\r\n\r\n" not in buf:
    buf += s.recv(65536)
head, buf = buf.split(b"\r\n\r\n", 1)
n = len(buf)
h.update(buf)
while n < BIG:
    d = s.recv(1 << 20)
    if not d:
        break
    n += len(d)
    h.update(d)
s.close()
lap("64 MiB read")
ok(b"Content-Length: %d" % BIG in head, "64 MiB response keeps its Content-Length", head)
eq((n, h.hexdigest()), (BIG, hashlib.sha256(pattern(BIG)).hexdigest()), "64 MiB through a late reader, byte exact")
grow = rss_mid - rss0
ok(grow < 24 << 10, "proxy memory while the reader waits: +%d KiB (64 MiB in flight)" % grow)

s = connect(P, timeout=30)
s.sendall(b"GET /big?n=%d&chunked=1 HTTP/1.1\r\nHost: x\r\n\r\n" % (4 << 20))
r = read_response(s)
s.close()
ok(r and r[1].get("transfer-encoding") == "chunked" and r[2] == pattern(4 << 20), "4 MiB chunked response streamed")

lap("4 MiB chunked")
# request body to an upstream that waits before reading
rss0 = rss_kib(px.proc.pid)
s = connect(P, timeout=60)
blob = pattern(BIG)
res = {}


def upload():
    try:
        s.sendall(b"POST /sink?wait=1.0 HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % BIG)
        s.sendall(blob)
    except OSError as e:
        res["err"] = e


t = threading.Thread(target=upload)
t.start()
time.sleep(0.8)
rss_mid = rss_kib(px.proc.pid)
r = read_response(s)
t.join(30)
s.close()
eq(r and r[2].decode(), "%d %s" % (BIG, hashlib.sha256(blob).hexdigest()), "64 MiB upload to a slow upstream, byte exact")
grow = rss_mid - rss0
ok(grow < 24 << 10, "proxy memory while the upstream does not read: +%d KiB" % grow)
del blob
lap("64 MiB upload")

lap("our echo-server")
# An upstream that refuses a large body unread while the proxy holds the
# client back: the client still gets the 413 whole (the rest of its body is
# read and dropped, not reset).
s = connect(P, timeout=20)
res = {}


def upload413():
    try:
        s.sendall(b"POST /early413 HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (8 << 20))
        s.sendall(pattern(8 << 20))
    except OSError as e:
        res["err"] = e


t = threading.Thread(target=upload413)
t.start()
try:
    r = read_response(s)
except OSError as e:
    r = ("error", repr(e), b"")
t.join(20)
s.close()
eq((r[0], r[2]) if r else None, (413, b"too large"), "upstream 413 during a blocked upload reaches the client whole")
ok("err" not in res, "... and the client could send its whole body (read and dropped)", res.get("err"))

lap("early 413")
# ---- our echo-server behind it ------------------------------------------------------
es = echo_server("--max-body", str(1 << 20))
atexit.register(es.stop)
with proxy("http://127.0.0.1:%d" % es.port) as pe:
    st, h, body = request(pe.port, b"GET /x/y?z=1 HTTP/1.1\r\nHost: x\r\n\r\n")
    j = json.loads(body)
    eq((j.pop("peer", None), type(j.pop("peer_port", None))), ("127.0.0.1", int), "echo-server: the proxy is its peer")
    eq(j, {"method": "GET", "path": "/x/y", "query": "z=1", "body_len": 0}, "echo-server: JSON")
    data = os.urandom(300000)
    out = subprocess.run(["curl", "-s", "--data-binary", "@-", "http://127.0.0.1:%d/echo" % pe.port],
                         input=data, capture_output=True, timeout=20)
    ok(out.stdout == data, "echo-server: curl POST 300 KB echoed")
    out = subprocess.run(["curl", "-s", "-H", "Transfer-Encoding: chunked", "--data-binary", "@-",
                          "http://127.0.0.1:%d/echo" % pe.port], input=data, capture_output=True, timeout=20)
    ok(out.stdout == data, "echo-server: chunked upload echoed")
    # echo-server answers 413 to the head and closes; the proxy answers the
    # client only once it has read (and dropped) the whole body, so a client
    # that sends everything before reading gets the 413, never a reset
    got = []
    for i in range(20):
        try:
            got.append(request(pe.port, b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n"
                               + b"x" * 2000000)[0])
        except OSError as e:
            got.append(repr(e))
    eq(got, [413] * 20, "echo-server's early 413 reaches a client still sending (20 tries)")
    s = connect(pe.port)
    s.sendall(b"".join(b"GET /p%d HTTP/1.1\r\nHost: x\r\n\r\n" % i for i in range(8)))
    paths = [json.loads(read_response(s)[2])["path"] for _ in range(8)]
    s.close()
    eq(paths, ["/p%d" % i for i in range(8)], "pipelined requests answered in order")
    st, h, body = request(pe.port, b"HEAD /hd HTTP/1.1\r\nHost: x\r\n\r\n", head_only=True)
    ok(st == 200 and int(h.get("content-length", "0")) > 0, "HEAD keeps the upstream's Content-Length", h)

    # WebSocket pass-through (the upstream side is nsv_ws_connect; a library
    # built without it answers NSV_ENOTSUP, and the proxy 502)
    key = b"dGhlIHNhbXBsZSBub25jZQ=="
    s = connect(pe.port)
    s.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n\r\n")
    r = read_response(s, head_only=True)
    s.close()
    if r and r[0] == 502:
        ok(True, "WebSocket upgrade: 502, this library has no WebSocket client (nsv_ws_connect)")
    else:
        eq(r and r[0], 101, "WebSocket upgrade passed through")
        try:
            import asyncio
            import websockets

            async def ws_checks():
                url = "ws://127.0.0.1:%d/ws" % pe.port
                async with websockets.connect(url, max_size=None, compression=None) as w:
                    await w.send("hello")
                    eq(await w.recv(), "hello", "ws: text relayed both ways")
                    blob2 = os.urandom(1 << 20)
                    await w.send(blob2)
                    eq(await w.recv() == blob2, True, "ws: 1 MiB binary relayed")
                    pong = await w.ping(b"p")
                    await asyncio.wait_for(pong, 5)
                    ok(True, "ws: ping answered")
                    await w.close(4001, "bye")
                    eq(w.close_code, 4001, "ws: close code relayed")
            asyncio.run(ws_checks())
        except ImportError:
            ok(True, "# SKIP python3-websockets missing")
    s = connect(pe.port)
    s.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Version: 13\r\n\r\n")
    r = read_response(s, head_only=True)
    s.close()
    eq(r and r[0], 400, "WebSocket handshake without a key -> 400 from the proxy")
eq(es.stop(), 0, "echo-server exits 0")

lap("nginx")
# ---- WebSocket: subprotocols and credentials reach the upstream ----------------------
def ws_upstream():
    """A python3-websockets server in a thread that picks "v2.chat" and
    records the handshake it got; returns (port, seen) or None."""
    try:
        import asyncio
        import websockets
    except ImportError:
        return None
    seen = {}
    ready = threading.Event()

    async def handler(ws, path=None):
        seen["headers"] = dict((k.lower(), v) for k, v in ws.request_headers.raw_items())
        seen["subprotocol"] = ws.subprotocol
        seen["path"] = path if path is not None else ws.path
        async for m in ws:
            await ws.send(m)

    async def main():
        async with websockets.serve(handler, "127.0.0.1", 0, subprotocols=["v2.chat"]) as server:
            seen["port"] = server.sockets[0].getsockname()[1]
            ready.set()
            await asyncio.Future()

    threading.Thread(target=lambda: asyncio.run(main()), daemon=True).start()
    ready.wait(10)
    return seen.get("port"), seen


wsu = ws_upstream()
if wsu and wsu[0]:
    import asyncio
    import websockets
    with proxy("http://127.0.0.1:%d" % wsu[0]) as pw:
        async def ws_meta():
            async with websockets.connect("ws://127.0.0.1:%d/room?x=1" % pw.port, subprotocols=["v1.chat", "v2.chat"],
                                          origin="http://app.example", compression=None,
                                          extra_headers={"Cookie": "sid=42", "Authorization": "Bearer tok"}) as w:
                await w.send("meta")
                return w.subprotocol, await w.recv()
        sub, echoed = asyncio.run(ws_meta())
        seen = wsu[1]
        hs = seen.get("headers", {})
        eq((sub, echoed), ("v2.chat", "meta"), "ws: the upstream's chosen subprotocol reaches the client")
        eq((hs.get("sec-websocket-protocol") or "").replace(" ", ""), "v1.chat,v2.chat",
           "ws: every offered subprotocol reaches the upstream")
        eq((hs.get("origin"), hs.get("cookie"), hs.get("authorization")), ("http://app.example", "sid=42", "Bearer tok"),
           "ws: Origin, Cookie and Authorization passed")
        eq(seen.get("path"), "/room?x=1", "ws: path and query passed")
        eq(hs.get("x-forwarded-for"), "127.0.0.1", "ws: X-Forwarded-For added")
        ok("sec-websocket-extensions" not in hs, "ws: no extension offered upstream (none is relayed)")
    s = connect(P)  # the recording upstream is no WebSocket server: its 200 is a refusal
    s.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    r = read_response(s, head_only=True)
    s.close()
    eq(r and r[0], 502, "ws: upstream refuses the upgrade -> 502")
else:
    ok(True, "# SKIP python3-websockets missing")

# ---- WebSocket backpressure: a fast client, an upstream that stalls ---------------------
try:
    import asyncio
    import websockets

    async def ws_slow_upstream():
        stall = asyncio.Event()
        n_msgs, size = 40, 1 << 20

        async def handler(w, path=None):
            await stall.wait()  # reads nothing until told
            got = 0
            while got < n_msgs * size:
                got += len(await w.recv())
            await w.send("got %d" % got)

        async with websockets.serve(handler, "127.0.0.1", 0, max_size=None, max_queue=1,
                                    compression=None) as server:
            uport = server.sockets[0].getsockname()[1]
            pw = proxy("http://127.0.0.1:%d" % uport, env=RSS_ENV)
            try:
                base = rss_kib(pw.proc.pid)
                async with websockets.connect("ws://127.0.0.1:%d/ws" % pw.port, max_size=None,
                                              compression=None) as c:
                    async def send_all():
                        for i in range(n_msgs):
                            await c.send(bytes([i]) * size)
                    sender = asyncio.ensure_future(send_all())
                    await asyncio.sleep(1.5)  # the proxy meets a full upstream and stops reading the client
                    peak = rss_kib(pw.proc.pid)
                    stall.set()
                    await asyncio.wait_for(sender, 30)
                    answer = await asyncio.wait_for(c.recv(), 30)
                return answer, peak - base
            finally:
                pw.stop()

    answer, growth = asyncio.run(ws_slow_upstream())
    eq(answer, "got %d" % (40 << 20), "WebSocket: 40 MiB from a fast client reach an upstream that stalled, in full")
    ok(growth < 24 * 1024, "WebSocket: the proxy grew %d KiB while the upstream stalled (the client is paused, "
       "not buffered)" % growth)
except ImportError:
    ok(True, "# SKIP python3-websockets missing")

# ---- an https:// upstream --------------------------------------------------------------
tmp = tempfile.mkdtemp(prefix="nsv-proxy-")
if shutil.which("openssl"):
    def sh(*argv):
        subprocess.run(argv, check=True, capture_output=True, cwd=tmp)
    for name in ("ca", "otherca"):
        sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-keyout", name + ".key", "-out", name + ".crt", "-days", "30", "-subj", "/CN=" + name)
    sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "srv.key",
       "-out", "srv.csr", "-subj", "/CN=localhost")
    with open(os.path.join(tmp, "srv.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost\n")
    sh("openssl", "x509", "-req", "-in", "srv.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
       "-out", "srv.crt", "-days", "30", "-extfile", "srv.ext")
    tes = echo_server("--cert", os.path.join(tmp, "srv.crt"), "--key", os.path.join(tmp, "srv.key"))
    atexit.register(tes.stop)
    to = "https://localhost:%d" % tes.port
    with proxy(to, "--ca", os.path.join(tmp, "ca.crt")) as pt:
        st, h, body = request(pt.port, b"GET /tls HTTP/1.1\r\nHost: x\r\n\r\n")
        ok(st == 200 and json.loads(body).get("sni") == "localhost", "https upstream: verified, SNI sent", body)
        try:
            import asyncio
            import websockets

            async def wss_echo():
                async with websockets.connect("ws://127.0.0.1:%d/ws" % pt.port, compression=None) as w:
                    await w.send("over wss")
                    return await w.recv()
            eq(asyncio.run(wss_echo()), "over wss", "WebSocket to an https upstream goes over wss://")
        except ImportError:
            ok(True, "# SKIP python3-websockets missing")
    with proxy(to, "--ca", os.path.join(tmp, "otherca.crt")) as pt:
        st, h, body = request(pt.port, b"GET /tls HTTP/1.1\r\nHost: x\r\n\r\n")
        ok(st == 502 and b"ETLS" in body, "https upstream with an unknown CA -> 502 (NSV_ETLS)", body)
    with proxy(to, "--insecure") as pt:
        st, h, body = request(pt.port, b"GET /tls HTTP/1.1\r\nHost: x\r\n\r\n")
        eq(st, 200, "https upstream with --insecure: not verified")
    tes.stop()
else:
    ok(True, "# SKIP openssl missing")

# ---- nginx, python3 http.server and node behind it ----------------------------------
www = os.path.join(tmp, "www")
os.makedirs(www)
page = os.urandom(200000)
with open(os.path.join(www, "f.bin"), "wb") as f:
    f.write(page)


def through(port, path=b"/f.bin", method=b"GET"):
    with proxy("http://127.0.0.1:%d" % port) as pp:
        return request(pp.port, method + b" " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n", timeout=10,
                       head_only=method == b"HEAD")


def free_port():
    t = socket.socket()
    t.bind(("127.0.0.1", 0))
    p = t.getsockname()[1]
    t.close()
    return p


if shutil.which("nginx"):
    nport = free_port()
    with open(os.path.join(tmp, "nginx.conf"), "w") as f:
        f.write("""worker_processes 1; daemon off; pid %s/nginx.pid; error_log %s/error.log;
events { worker_connections 64; }
http { access_log off; client_body_temp_path %s; proxy_temp_path %s; fastcgi_temp_path %s;
  uwsgi_temp_path %s; scgi_temp_path %s;
  server { listen 127.0.0.1:%d; root %s; location /chunk { return 200 "from nginx"; } } }
""" % ((tmp,) * 7 + (nport, www)))
    ng = subprocess.Popen(["nginx", "-p", tmp, "-c", os.path.join(tmp, "nginx.conf")], stderr=subprocess.PIPE)
    atexit.register(lambda: ng.poll() is None and ng.terminate())
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", nport), 0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    st, h, body = through(nport)
    eq((st, body == page), (200, True), "nginx: a 200 KB file through the proxy")
    ok(h.get("server", "").startswith("nginx"), "nginx: its Server header kept")
    st, h, body = through(nport, b"/nothing")
    eq(st, 404, "nginx: 404 passed on")
    ng.terminate()
    ng.wait(10)
else:
    ok(True, "# SKIP nginx missing")

with Server(["/usr/bin/python3", "-u", "-c",
             "import http.server,functools,sys\n"
             "h=functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])\n"
             "s=http.server.ThreadingHTTPServer(('127.0.0.1',0),h)\n"
             "print('listening on', s.server_address[1], flush=True)\ns.serve_forever()\n", www]) as py:
    st, h, body = through(py.port)
    eq((st, body == page), (200, True), "python3 http.server (HTTP/1.0 answers): file through the proxy")
    st, h, body = through(py.port, b"/f.bin", b"HEAD")
    eq((st, h.get("content-length")), (200, str(len(page))), "python3 http.server: HEAD keeps the length")

NODE = r"""
const http = require('http');
const s = http.createServer((q, r) => {
  if (q.url === '/echo') { r.writeHead(200, {'X-Node': '1'}); q.pipe(r); return; }
  r.setHeader('Connection', 'close, X-Drop'); r.setHeader('X-Drop', 'x');
  r.write('node '); r.end(q.headers['x-forwarded-for'] || '-');
});
s.listen(0, '127.0.0.1', () => console.log('listening on ' + s.address().port));
"""
if shutil.which("node"):
    with node_server(NODE) as nd:
        st, h, body = through(nd.port, b"/x")
        eq((st, body), (200, b"node 127.0.0.1"), "node: chunked answer through the proxy (X-Forwarded-For seen)")
        ok("x-drop" not in h, "node: a header its Connection names is dropped", h)
        with proxy("http://127.0.0.1:%d" % nd.port) as pp:
            data = os.urandom(2 << 20)
            out = subprocess.run(["curl", "-s", "--data-binary", "@-", "http://127.0.0.1:%d/echo" % pp.port],
                                 input=data, capture_output=True, timeout=20)
            ok(out.stdout == data, "node: 2 MiB streamed both ways (req.pipe(res))")
else:
    ok(True, "# SKIP node missing")

shutil.rmtree(tmp, ignore_errors=True)
ok(px.alive(), "proxy alive after all of it")
eq(px.stop(), 0, "SIGTERM drains the proxy, exit 0")
up.stop()
done()
