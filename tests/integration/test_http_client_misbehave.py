#!/usr/bin/env python3
"""The HTTP client (build/http-get) against a raw-socket server that
misbehaves on purpose: early answers to uploads (413/401 while the body is
still being sent, with a reset or a lingering close), bad framing, early
closes, oversized and malformed heads, trickled heads and bodies against the
three timeouts, bytes after bodiless responses, interim and unrequested 101
responses, chunked trailers past the caps, and pooled connections the server
drops. Also the server's own chunked request decoder against the same
trailer caps. Each case names what the client must report."""
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, Server, BUILD  # noqa

GET = os.path.join(BUILD, "http-get")
tmp = tempfile.mkdtemp(prefix="nsv-httpc-bad-")


def run(*args, timeout=30):
    p = subprocess.run([GET, "--summary"] + list(args), capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace")


def lines(out):
    return [l for l in out.splitlines() if l.startswith("req ")]


stats = {"conns": 0, "open": 0, "got": []}
lock = threading.Lock()

# Canned answers: the whole byte string is sent, then the connection closes
# when the mode's name ends in "!" (close), else it stays for the next request.
CANNED = {
    "nocrlf!": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
    "nolast!": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
    "clte": b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "twocl": b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
    "badsize": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n",
    "hugesize": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nx\r\n0\r\n\r\n",
    "beforehead!": b"",
    "midhead!": b"HTTP/1.1 200 OK\r\nContent-Le",
    "midbody!": b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789",
    "midchunk!": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n64\r\n0123456789",
    "closebody!": b"HTTP/1.0 200 OK\r\n\r\nall of it",
    "hugehead": b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 1000) for i in range(100)) +
                b"Content-Length: 0\r\n\r\n",
    "manyheaders": b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(150)) +
                   b"Content-Length: 0\r\n\r\n",
    "204tail": b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello",
    "headtail": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
    "interim": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n"
               b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    "interim17": b"HTTP/1.1 100 Continue\r\n\r\n" * 17 + b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    "101!": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: upgrade\r\n\r\nxx",
    "junk1!": b"HTTP/1.1 2OO OK\r\nContent-Length: 0\r\n\r\n",
    "junk2!": b"HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n",
    "junk3!": b"ICY 200 OK\r\nContent-Length: 0\r\n\r\n",
    "junk4!": b"\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    "junk5!": b"hello world\r\n\r\n",
    "junk6!": b"HTTP/1.1 200 OK\nContent-Length: 0\n\n",
    "obsfold!": b"HTTP/1.1 200 OK\r\nX-A: one\r\n two\r\nContent-Length: 0\r\n\r\n",
    "nul!": b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 0\r\n\r\n",
    "cr!": b"HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 0\r\n\r\n",
    "spacename!": b"HTTP/1.1 200 OK\r\nX-A : a\r\nContent-Length: 0\r\n\r\n",
    "trailers": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n" +
                b"".join(b"X-T%d: v\r\n" % i for i in range(20)) + b"\r\n",
    "manytrailers!": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n" +
                     b"".join(b"X-T%d: v\r\n" % i for i in range(101)) + b"\r\n",
    "bigtrailers!": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n" +
                    b"".join(b"X-T%d: %s\r\n" % (i, b"v" * 4000) for i in range(40)) + b"\r\n",
}


def read_head(f):
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        b = f.read(1)
        if not b:
            return None
        head += b
    return head


def content_length(head):
    for l in head.decode("latin-1").lower().split("\r\n"):
        if l.startswith("content-length:"):
            return int(l.split(":")[1])
    return None


def read_body(f, head):
    if b"chunked" in head.lower():
        out = bytearray()
        while True:
            size = int(f.readline().strip(), 16)
            if size == 0:
                f.readline()
                return bytes(out)
            out += f.read(size)
            f.readline()
    return f.read(content_length(head) or 0)


def drain(sock):
    """Read and count what the client still sends after an early answer."""
    n = 0
    sock.settimeout(5)
    try:
        while True:
            b = sock.recv(1 << 16)
            if not b:
                break
            n += len(b)
    except OSError:
        pass
    return n


def handle(sock):
    with lock:
        stats["conns"] += 1
        stats["open"] += 1
    f = sock.makefile("rb")
    served = 0
    try:
        while True:
            head = read_head(f)
            if head is None:
                return
            method, path = head.split(b" ")[:2]
            mode, _, arg = path.decode()[1:].partition("?")
            served += 1
            if mode.startswith("early"):
                # /early413-rst?K: the first K requests of a connection are read
                # whole and answered 200; then 413 (or 401) before the body.
                k = int(arg or 0)
                if served <= k:
                    read_body(f, head)
                    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    continue
                close = b"" if "401ka" in mode else b"Connection: close\r\n"
                status = b"401 Unauthorized" if "401" in mode else b"413 Content Too Large"
                sock.sendall(b"HTTP/1.1 " + status + b"\r\n" + close + b"Content-Length: 7\r\n\r\nno body")
                if mode.endswith("rst"):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    return  # closing with unread input: a reset
                sock.shutdown(socket.SHUT_WR)
                n = drain(sock)
                with lock:
                    stats["got"].append(n)
                return
            if served > 1 and mode == "dropnext":
                return  # the pooled connection dies under the next request
            read_body(f, head)
            if mode == "dropnext":
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            elif mode in CANNED or mode + "!" in CANNED:
                key = mode if mode in CANNED else mode + "!"
                sock.sendall(CANNED[key])
                if key.endswith("!"):
                    return
            elif mode == "tricklehead":  # one head byte per 100 ms
                for b in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok":
                    sock.sendall(bytes([b]))
                    time.sleep(0.1)
            elif mode == "tricklebody":  # head at once, then a body byte per 100 ms
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n")
                for b in b"hello world!":
                    time.sleep(0.1)
                    sock.sendall(bytes([b]))
            elif mode in ("rstlater", "finlater"):  # head, a pause, the body, then a reset or a FIN
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 50000\r\n\r\n")
                time.sleep(0.3)
                sock.sendall(b"z" * 50000)
                if mode == "rstlater":
                    time.sleep(0.05)
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                return
            elif mode == "silent":
                time.sleep(3)
                return
            else:
                sock.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    except (OSError, ValueError):
        pass
    finally:
        with lock:
            stats["open"] -= 1
        try:
            f.close()
            sock.close()
        except OSError:
            pass


lsock = socket.socket()
lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
lsock.bind(("127.0.0.1", 0))
lsock.listen(128)
RAW = "http://127.0.0.1:%d" % lsock.getsockname()[1]


def acceptor():
    while True:
        try:
            s, _ = lsock.accept()
        except OSError:
            return
        threading.Thread(target=handle, args=(s,), daemon=True).start()


threading.Thread(target=acceptor, daemon=True).start()


def reset_stats():
    for _ in range(100):  # the previous client exited: wait (bounded) for its sockets to close
        with lock:
            if stats["open"] == 0:
                break
        time.sleep(0.02)
    with lock:
        stats.update(conns=0, got=[])


def err(args, code, name, why=None):
    rc, out = run(*args)
    ok(rc == 1 and ("error=" + code) in out and (why is None or why in out) and "bytes=" not in out, name, out)


# ---- an early answer while the request body is still going out ----
BIG = 16 << 20  # more than loopback socket buffers hold, so the client is still sending
big = os.path.join(tmp, "big.bin")
with open(big, "wb") as f:
    f.write(os.urandom(1 << 20) * (BIG >> 20))
bodies = (("one piece", ["--data-file", big]),
          ("streamed, Content-Length", ["--stream-file", big, "--stream-cl", "--piece", "262144"]),
          ("streamed, chunked", ["--stream-file", big, "--piece", "262144"]))
for close in ("rst", "linger"):
    for fresh in (True, False):
        for bname, body in bodies:
            reset_stats()
            url = RAW + "/early413-%s?%d" % (close, 0 if fresh else 1)
            # reused: a GET first (--warm) is answered, then the upload on that connection meets
            # the early answer
            rc, out = run("--method", "POST", *body, *([] if fresh else ["--warm"]), url)
            want = "req %d status=413 bytes=7 keepalive=0" % (0 if fresh else 1)
            ok(rc == 0 and want in out and (fresh or stats["conns"] == 1),
               "early 413 (%s) on a %s connection, %s body: the response, not NSV_ECLOSED" %
               ("reset" if close == "rst" else "lingering close", "fresh" if fresh else "reused", bname), out)
            if close == "linger":
                with lock:
                    got = list(stats["got"])
                ok(len(got) == 1 and got[0] < BIG // 2,
                   "... and the client stopped sending the body (%s of %d bytes after the answer)" %
                   (got[0] if got else "?", BIG))

reset_stats()
rc, out = run("--repeat", "2", "--method", "PUT", "--data-file", big, RAW + "/early401ka")
ok(rc == 0 and lines(out) == ["req 0 status=401 bytes=7 keepalive=0", "req 1 status=401 bytes=7 keepalive=0"]
   and stats["conns"] == 2, "early 401 without Connection: close: body stopped, connection not reused", out)

# ---- framing ----
reset_stats()
rc, out = run("--repeat", "2", RAW + "/clte")
ok(rc == 0 and all("status=200 bytes=5 keepalive=0" in l for l in lines(out)) and stats["conns"] == 2,
   "CL+TE: chunked wins, connection not reused", out)
err([RAW + "/twocl"], "NSV_EPARSE", "two different Content-Length values: NSV_EPARSE")
err([RAW + "/badsize"], "NSV_EPARSE", "negative chunk size: NSV_EPARSE")
err([RAW + "/hugesize"], "NSV_EPARSE", "chunk size past 60 bits: NSV_EPARSE")
err([RAW + "/nocrlf"], "NSV_EPARSE", "chunk data without its CRLF: NSV_EPARSE")
err([RAW + "/nolast"], "NSV_ECLOSED", "close before the last chunk: NSV_ECLOSED, not a short body")

# ---- early close ----
err([RAW + "/beforehead"], "NSV_ECLOSED", "close before any response byte: NSV_ECLOSED")
err([RAW + "/midhead"], "NSV_ECLOSED", "close in the middle of the head: NSV_ECLOSED", "was complete")
err([RAW + "/midbody"], "NSV_ECLOSED", "close 10 bytes into a 100-byte body: NSV_ECLOSED", "body ended")
err([RAW + "/midchunk"], "NSV_ECLOSED", "close inside a chunk: NSV_ECLOSED")
rc, out = run(RAW + "/closebody")
ok(rc == 0 and "status=200 bytes=9 keepalive=0" in out, "HTTP/1.0 body delimited by the close: complete", out)

# ---- heads ----
err([RAW + "/hugehead"], "NSV_ETOOBIG", "100 KB head: NSV_ETOOBIG")
err(["--set", "http_max_head_bytes=4096", RAW + "/manyheaders"], "NSV_ETOOBIG", "head over http_max_head_bytes")
err([RAW + "/manyheaders"], "NSV_ETOOBIG", "151 header lines (default cap 100): NSV_ETOOBIG")
for j in range(1, 7):
    err([RAW + "/junk%d" % j], "NSV_EPARSE", "status line junk %r: NSV_EPARSE" % CANNED["junk%d!" % j][:20])
err([RAW + "/obsfold"], "NSV_EPARSE", "obs-fold in a header: NSV_EPARSE")
err([RAW + "/nul"], "NSV_EPARSE", "NUL in a header value: NSV_EPARSE")
err([RAW + "/cr"], "NSV_EPARSE", "bare CR in a header value: NSV_EPARSE")
err([RAW + "/spacename"], "NSV_EPARSE", "space before the colon: NSV_EPARSE")

# ---- timeouts ----
err(["--set", "http_head_timeout_ms=500", RAW + "/tricklehead"], "NSV_ETIMEDOUT",
    "head trickled over 4 s, head timeout 0.5 s: the head must be whole in time", "response head")
rc, out = run("--set", "http_read_timeout_ms=1000", RAW + "/tricklebody")
ok(rc == 0 and "status=200 bytes=12" in out, "body trickled a byte per 0.1 s: the read timeout (1 s) is idle time", out)
err(["--set", "http_timeout_ms=500", RAW + "/tricklebody"], "NSV_ETIMEDOUT",
    "the same body, whole-request timeout 0.5 s: NSV_ETIMEDOUT", "http_timeout_ms")
err(["--set", "http_head_timeout_ms=300", RAW + "/silent"], "NSV_ETIMEDOUT", "silent server: head timeout")

# ---- the server ends the connection while the host has paused the response ----
rc, out = run("--pause-ms", "600", RAW + "/finlater")
ok(rc == 0 and "status=200 bytes=50000" in out, "paused, body and FIN arrive: complete after the resume", out)
rc, out = run("--pause-ms", "600", RAW + "/rstlater")
ok(rc == 0 and "status=200 bytes=50000" in out,
   "paused, body then a reset arrive: what came before the reset is delivered after the resume", out)

# ---- bodiless responses, interim responses, 101 ----
reset_stats()
rc, out = run("--repeat", "2", RAW + "/204tail")
ok(rc == 0 and len(lines(out)) == 2 and all("status=204 bytes=0" in l for l in lines(out)) and stats["conns"] == 2,
   "204 then stray bytes: no body, stray bytes end the connection", out)
reset_stats()
rc, out = run("--repeat", "2", "--method", "HEAD", RAW + "/headtail")
ok(rc == 0 and len(lines(out)) == 2 and all("status=200 bytes=0" in l for l in lines(out)) and stats["conns"] == 2,
   "HEAD answered with a body: not read as one, connection not reused", out)
rc, out = run(RAW + "/interim")
ok(rc == 0 and "status=200 bytes=2" in out, "100, 102 and 103 skipped, then the 200", out)
err([RAW + "/interim17"], "NSV_EPARSE", "17 interim responses: NSV_EPARSE")
reset_stats()
rc, out = run("--repeat", "2", RAW + "/101")
ok(rc == 0 and all("status=101 bytes=0 keepalive=0" in l for l in lines(out)) and stats["conns"] == 2,
   "unrequested 101: reported, ends the request, connection closed", out)

# ---- chunked trailers ----
rc, out = run("--repeat", "2", RAW + "/trailers")
ok(rc == 0 and all("status=200 bytes=2 keepalive=1" in l for l in lines(out)), "20 trailer lines: read and dropped", out)
err([RAW + "/manytrailers"], "NSV_EPARSE", "101 trailer lines (1 KB): NSV_EPARSE (line cap 100)")
err([RAW + "/bigtrailers"], "NSV_EPARSE", "40 trailer lines of 4 KB: NSV_EPARSE (byte cap 16 KiB)")

# ---- pooled connections the server drops ----
reset_stats()
rc, out = run("--repeat", "2", RAW + "/dropnext")
ok(rc == 0 and len(lines(out)) == 2 and stats["conns"] == 2, "GET on a pooled connection that died: retried once", out)
reset_stats()
rc, out = run("--repeat", "2", "--method", "POST", "--data", "x", RAW + "/dropnext")
ok(rc == 1 and "req 1 error=NSV_ECLOSED" in out and stats["conns"] == 1, "POST on it: NSV_ECLOSED, not retried", out)


# ---- the server's chunked request decoder: the same trailer caps ----
def raw_request(port, data):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(data)
    got = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
    except OSError:
        pass
    s.close()
    return got


with Server([os.path.join(BUILD, "echo-server"), "--port", "0"]) as es:
    req = b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\nok\r\n0\r\n"
    got = raw_request(es.port, req + b"".join(b"X-T%d: v\r\n" % i for i in range(20)) + b"\r\n")
    ok(got.startswith(b"HTTP/1.1 200") and got.endswith(b"ok"), "server: 20 trailer lines accepted", got[:200])
    got = raw_request(es.port, req + b"".join(b"X-T%d: v\r\n" % i for i in range(100)) + b"\r\n")
    ok(got.startswith(b"HTTP/1.1 200"), "server: 100 trailer lines accepted", got[:200])
    got = raw_request(es.port, req + b"".join(b"X-T%d: v\r\n" % i for i in range(101)) + b"\r\n")
    ok(got.startswith(b"HTTP/1.1 400"), "server: 101 trailer lines: 400", got[:200])
    got = raw_request(es.port, req + b"".join(b"X-T%d: %s\r\n" % (i, b"v" * 4000) for i in range(40)) + b"\r\n")
    ok(got.startswith(b"HTTP/1.1 400"), "server: 40 trailer lines of 4 KB: 400", got[:200])

lsock.close()
os.unlink(big)
os.rmdir(tmp)
done()
