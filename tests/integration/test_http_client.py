#!/usr/bin/env python3
"""The HTTP/1.1 client (nsv_http_request) through build/http-get against
real servers: our echo-server (plain, https, sharded client), nginx,
Python's http.server, and a raw-socket server with misbehaving modes (bad
framing, early close, huge heads, slow trickle, 1xx, 204/304 with a
body-looking tail, close-delimited bodies, HEAD, a pooled connection
dropped under a request). Bodies are compared byte for byte; pool reuse and
the per-origin cap are counted on the server side."""
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, Server, BUILD  # noqa

GET = os.path.join(BUILD, "http-get")
tmp = tempfile.mkdtemp(prefix="nsv-httpc-")


def pattern(n):
    block = bytes(range(256)) * 4096  # 1 MiB
    return (block * (n // len(block) + 1))[:n]


THREADS = os.environ.get("NSV_HTTPC_THREADS")  # a sharded client for every run (the threads variant)
W = int(THREADS or 1)  # each worker keeps its own pool; requests go to the workers in turn


def run(*args, timeout=60):
    extra = ["--threads", THREADS] if THREADS and "--threads" not in args else []
    p = subprocess.run([GET, "--summary"] + extra + list(args), capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace")


def lines(out):
    return [l for l in out.splitlines() if l.startswith("req ")]


# ---- the raw-socket server ----
stats = {"conns": 0, "open": 0, "max_open": 0, "uploads": []}
lock = threading.Lock()


def read_head(f):
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        b = f.read(1)
        if not b:
            return None
        head += b
    return head


def read_body(f, head):
    h = head.decode("latin-1").lower()
    if "transfer-encoding: chunked" in h:
        out = b""
        while True:
            size = int(f.readline().strip(), 16)
            if size == 0:
                f.readline()
                return out
            out += f.read(size)
            f.readline()
    for line in h.split("\r\n"):
        if line.startswith("content-length:"):
            return f.read(int(line.split(":")[1]))
    return b""


def handle(sock):
    with lock:
        stats["conns"] += 1
        stats["open"] += 1
        stats["max_open"] = max(stats["max_open"], stats["open"])
    f = sock.makefile("rb")
    try:
        served = 0
        while True:
            head = read_head(f)
            if head is None:
                return
            method, path = head.split(b" ")[:2]
            path = path.decode()
            body = read_body(f, head)
            if served and path.startswith("/dropnext"):
                return  # the pooled connection dies under the next request
            served += 1
            mode, _, arg = path[1:].partition("?")
            n = int(arg) if arg.isdigit() else 0
            send = sock.sendall
            if mode in ("cl", "dropnext"):
                data = pattern(n)
                send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n + (b"" if method == b"HEAD" else data))
            elif mode == "chunked":
                send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                data, off, k = pattern(n), 0, 1
                while off < n:
                    c = data[off:off + k]
                    send(b"%x\r\n" % len(c) + c + b"\r\n")
                    off += len(c)
                    k = k * 3 + 7 if k < 60000 else 1
                send(b"0\r\nX-Trailer: t\r\n\r\n")
            elif mode == "clte":
                send(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
            elif mode == "badchunk":
                send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n")
            elif mode == "twocl":
                send(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd")
            elif mode == "early":
                send(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789")
                return
            elif mode == "hugehead":
                send(b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 1000) for i in range(100)) +
                     b"Content-Length: 0\r\n\r\n")
            elif mode == "manyheaders":
                send(b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(150)) +
                     b"Content-Length: 0\r\n\r\n")
            elif mode == "slowhead":
                time.sleep(3)
                return
            elif mode == "trickle":
                send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc")
                time.sleep(3)
                return
            elif mode == "continue":
                send(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                     b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            elif mode in ("204", "304"):
                send(b"HTTP/1.1 %s X\r\nContent-Length: 5\r\n\r\nhello" % mode.encode())
            elif mode == "close":
                send(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + pattern(n))
                return
            elif mode == "101":
                send(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\nxx")
                return
            elif mode == "closeidle":
                send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                time.sleep(0.1)
                return  # closes the pooled connection while it is idle
            elif mode == "slow":
                time.sleep(0.2)
                send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            elif mode == "upload":
                with lock:
                    stats["uploads"].append(body)
                d = hashlib.sha256(body).hexdigest().encode()
                send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(d) + d)
            else:
                send(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
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
    # the previous client has exited: wait (bounded) until the server saw its sockets close
    for _ in range(100):
        with lock:
            if stats["open"] == 0:
                break
        time.sleep(0.02)
    with lock:
        stats.update(conns=0, max_open=stats["open"], uploads=[])


def body_of(i):
    with open(os.path.join(tmp, "out", str(i)), "rb") as f:
        return f.read()


os.makedirs(os.path.join(tmp, "out"))
OUT = os.path.join(tmp, "out")

# ---- bodies, byte-exact ----
big = 8 << 20
rc, out = run("--out", OUT, RAW + "/cl?%d" % big)
eq((rc, body_of(0) == pattern(big)), (0, True), "8 MiB Content-Length body byte-exact")
rc, out = run("--out", OUT, RAW + "/chunked?%d" % big)
eq((rc, body_of(0) == pattern(big)), (0, True), "8 MiB chunked body (chunk sizes 1..64 KiB) byte-exact")
rc, out = run("--out", OUT, RAW + "/close?%d" % (1 << 20))
eq((rc, body_of(0) == pattern(1 << 20)), (0, True), "close-delimited 1 MiB body byte-exact")
rc, out = run("--pause-ms", "300", "--out", OUT, RAW + "/cl?%d" % big)
eq((rc, body_of(0) == pattern(big)), (0, True), "paused 300 ms after the head: 8 MiB still byte-exact")

# ---- pool reuse and framing that forbids it ----
reset_stats()
rc, out = run("--repeat", "6", RAW + "/cl?1000")
eq((rc, stats["conns"]), (0, W), "6 sequential keep-alive requests share one connection per worker")
reset_stats()
rc, out = run("--repeat", "3", "--method", "HEAD", RAW + "/cl?1000")
ok(rc == 0 and all("bytes=0" in l for l in lines(out)) and stats["conns"] == min(W, 3),
   "HEAD: no body read despite Content-Length, connection reused", out)
reset_stats()
rc, out = run("--repeat", "3", "--set", "http_pool_idle_ms=0", RAW + "/cl?10")
eq((rc, stats["conns"]), (0, 3), "http_pool_idle_ms=0: a connection per request")
reset_stats()
rc, out = run("--repeat", "2", "--out", OUT, RAW + "/clte")
eq((rc, body_of(0), stats["conns"]), (0, b"hello", 2), "CL+TE: chunked wins, connection not reused")
for code in ("204", "304"):
    reset_stats()
    rc, out = run("--repeat", "2", RAW + "/" + code)
    ok(rc == 0 and all(("status=%s bytes=0" % code) in l for l in lines(out)) and stats["conns"] == 2,
       "%s with a body-looking tail: no body, tail not taken as the next response" % code, out)
rc, out = run("--out", OUT, RAW + "/continue")
ok(rc == 0 and "status=200 bytes=2" in out and body_of(0) == b"ok", "100 and 103 skipped, then 200", out)
rc, out = run(RAW + "/101")
ok(rc == 0 and "status=101 bytes=0" in out, "101: reported and ended", out)

# ---- retry on a pooled connection the server dropped ----
reset_stats()
rc, out = run("--repeat", str(W + 1), RAW + "/dropnext?5")
ok(rc == 0 and len(lines(out)) == W + 1 and stats["conns"] == W + 1, "GET retried once on a fresh connection", out)
reset_stats()
rc, out = run("--repeat", str(W + 1), "--method", "POST", "--data", "x", RAW + "/dropnext?5")
ok(rc == 1 and ("req %d error=NSV_ECLOSED" % W) in out, "POST not retried: NSV_ECLOSED", out)

reset_stats()
rc, out = run("--repeat", "2", "--gap-ms", "400", "--method", "POST", "--data", "x", RAW + "/closeidle")
ok(rc == 0 and len(lines(out)) == 2 and stats["conns"] == 2,
   "pooled connection closed by the server while idle: noticed, the POST goes on a new one", out)

# ---- per-origin cap ----
reset_stats()
rc, out = run("--parallel", "10", "--set", "http_conns_per_origin=2", RAW + "/slow")
ok(rc == 0 and len(lines(out)) == 10 and stats["max_open"] <= 2 * W and stats["conns"] == 2 * W,
   "10 requests, cap 2 per worker: all answered over 2 connections (max open %d)" % stats["max_open"], out)

# ---- errors ----
def err(args, code, name):
    rc, out = run(*args)
    ok(rc == 1 and ("error=" + code) in out, name, out)


err([RAW + "/badchunk"], "NSV_EPARSE", "bad chunk size: NSV_EPARSE")
err([RAW + "/twocl"], "NSV_EPARSE", "differing Content-Length values: NSV_EPARSE")
err([RAW + "/early"], "NSV_ECLOSED", "server closed mid-body: NSV_ECLOSED")
err([RAW + "/hugehead"], "NSV_ETOOBIG", "100 KB response head: NSV_ETOOBIG")
err(["--set", "http_max_headers=100", RAW + "/manyheaders"], "NSV_ETOOBIG", "151 header lines: NSV_ETOOBIG")
err(["--set", "http_max_body=1000", RAW + "/cl?5000"], "NSV_ETOOBIG", "Content-Length over http_max_body: NSV_ETOOBIG")
err(["--set", "http_max_body=1000", RAW + "/chunked?5000"], "NSV_ETOOBIG", "chunked body over http_max_body: NSV_ETOOBIG")
err(["--set", "http_max_body=1000", RAW + "/close?5000"], "NSV_ETOOBIG", "close-delimited body over http_max_body")
err(["--set", "http_head_timeout_ms=500", RAW + "/slowhead"], "NSV_ETIMEDOUT", "head timeout: NSV_ETIMEDOUT")
err(["--set", "http_read_timeout_ms=500", RAW + "/trickle"], "NSV_ETIMEDOUT", "read timeout mid-body: NSV_ETIMEDOUT")
err(["--set", "http_timeout_ms=500", RAW + "/slowhead"], "NSV_ETIMEDOUT", "whole-request timeout: NSV_ETIMEDOUT")
dead = socket.socket()
dead.bind(("127.0.0.1", 0))
err(["http://127.0.0.1:%d/" % dead.getsockname()[1]], "NSV_ECONNREFUSED", "nothing listening: NSV_ECONNREFUSED")
dead.close()
err(["http://no-such-host.invalid/"], "NSV_ENOTFOUND", "unknown name: NSV_ENOTFOUND")
err(["ftp://127.0.0.1/"], "NSV_EURL", "ftp:// URL: NSV_EURL")
err([RAW + "/a#frag"], "NSV_EURL", "URL with a fragment: NSV_EURL")
err(["--header", "Content-Length: 5", RAW + "/cl?1"], "NSV_EINVAL", "framing header from the host: NSV_EINVAL")
err(["--header", "Bad Name: x", RAW + "/cl?1"], "NSV_EINVAL", "malformed header line: NSV_EINVAL")
err(["--method", "G T", RAW + "/cl?1"], "NSV_EINVAL", "method not a token: NSV_EINVAL")
rc, out = run("--cancel-after-head", RAW + "/cl?%d" % big)
ok(rc == 0 and "cancelled" in out and "bytes=" not in out, "cancel after the head: no more events", out)

# ---- draining ----
rc, out = run("--drain", "5000", "--parallel", "3", RAW + "/slow")
ok(rc == 0 and len([l for l in lines(out) if "status=200" in l]) == 3 and "after drain: NSV_ESTOPPED" in out,
   "drain: requests in flight finish, a new one gets NSV_ESTOPPED", out)
rc, out = run("--drain", "300", RAW + "/slowhead")
ok(rc == 1 and "req 0 error=NSV_ESTOPPED" in out, "drain deadline: the request still in flight fails", out)

# ---- streamed request bodies ----
up = os.urandom(4 << 20)
with open(os.path.join(tmp, "up.bin"), "wb") as f:
    f.write(up)
for extra, name in (([], "chunked"), (["--stream-cl"], "declared Content-Length")):
    reset_stats()
    rc, out = run("--method", "POST", "--stream-file", os.path.join(tmp, "up.bin"), "--piece", "65536",
                  "--out", OUT, *extra, RAW + "/upload")
    ok(rc == 0 and body_of(0) == hashlib.sha256(up).hexdigest().encode() and stats["uploads"][0] == up,
       "4 MiB upload in 64 KiB pieces (%s) arrives byte-exact" % name, out)
rc, out = run("--method", "PUT", "--data-file", os.path.join(tmp, "up.bin"), "--out", OUT, RAW + "/upload")
ok(rc == 0 and body_of(0) == hashlib.sha256(up).hexdigest().encode(), "4 MiB body in one piece", out)

# ---- our echo-server, plain and sharded client ----
with Server([os.path.join(BUILD, "echo-server"), "--port", "0"]) as es:
    url = "http://127.0.0.1:%d/echo?x=1" % es.port
    rc, out = run("--parallel", "20", "--repeat", "3", url)
    ok(rc == 0 and len(lines(out)) == 60 and all("status=200" in l for l in lines(out)),
       "echo-server: 60 requests, 20 at a time", out)
    rc, out = run("--threads", "2", "--parallel", "20", "--repeat", "2", url)
    ok(rc == 0 and len(lines(out)) == 40 and all("status=200" in l for l in lines(out)),
       "sharded client (2 workers), requests from another thread: 40 answered", out)
    p = subprocess.run([GET, "--method", "POST", "--data", "hi there", url], capture_output=True, timeout=30)
    ok(p.returncode == 0 and p.stdout.startswith(b"HTTP 200 OK\n") and p.stdout.endswith(b"\n\nhi there") and
       b"\nContent-Length: 8\n" in p.stdout,
       "http-get prints status, headers and body", p.stdout[:400])

# ---- https against our TLS echo-server ----
def sh(*argv):
    subprocess.run(argv, check=True, capture_output=True, cwd=tmp)


sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
   "-keyout", "ca.key", "-out", "ca.crt", "-days", "30", "-subj", "/CN=ca")
sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
   "-keyout", "good.key", "-out", "good.csr", "-subj", "/CN=localhost")
with open(os.path.join(tmp, "good.ext"), "w") as f:
    f.write("subjectAltName=DNS:localhost\n")
sh("openssl", "x509", "-req", "-in", "good.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
   "-out", "good.crt", "-days", "30", "-extfile", "good.ext")
ca = "tls_client_ca_file=" + os.path.join(tmp, "ca.crt")
with Server([os.path.join(BUILD, "echo-server"), "--port", "0", "--cert", os.path.join(tmp, "good.crt"),
             "--key", os.path.join(tmp, "good.key")]) as ts:
    rc, out = run("--str", ca, "--repeat", "3", "https://localhost:%d/tls" % ts.port)
    ok(rc == 0 and len(lines(out)) == 3 and "status=200" in out, "https, verified against the right CA", out)
    err(["--str", ca, "https://127.0.0.1:%d/tls" % ts.port], "NSV_ETLS", "https, wrong host name: NSV_ETLS")
    err(["https://localhost:%d/tls" % ts.port], "NSV_ETLS", "https, CA not trusted: NSV_ETLS")

# ---- nginx and Python's http.server ----
www = os.path.join(tmp, "www")
os.makedirs(www)
with open(os.path.join(www, "big.bin"), "wb") as f:
    f.write(pattern(big))
nginx = shutil.which("nginx") or "/usr/sbin/nginx"
if os.path.exists(nginx):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    nport = s.getsockname()[1]
    s.close()
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write("daemon off; worker_processes 1; pid %s/nginx.pid; error_log %s/error.log;\n"
                "events { worker_connections 64; }\n"
                "http { access_log off; client_body_temp_path %s; proxy_temp_path %s; fastcgi_temp_path %s;"
                " uwsgi_temp_path %s; scgi_temp_path %s;\n"
                " server { listen 127.0.0.1:%d; root %s; location /chunk { chunked_transfer_encoding on; gzip on;"
                " gzip_types *; gzip_min_length 0; } } }\n" % ((tmp,) * 7 + (nport, www)))
    ng = subprocess.Popen([nginx, "-c", conf, "-p", tmp], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", nport), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    rc, out = run("--repeat", "3", "--out", OUT, "http://127.0.0.1:%d/big.bin" % nport)
    ok(rc == 0 and all(body_of(i) == pattern(big) for i in range(3)), "nginx: 8 MiB file 3 times byte-exact", out)
    rc, out = run("http://127.0.0.1:%d/missing" % nport)
    ok(rc == 0 and "status=404" in out, "nginx: 404 with its HTML body", out)
    ng.terminate()
    ng.wait(10)
else:
    ok(False, "nginx not installed (apt-get install nginx)")

with Server([sys.executable, "-u", "-c",
             "import http.server,functools,sys\n"
             "h=functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])\n"
             "s=http.server.ThreadingHTTPServer(('127.0.0.1',0),h)\n"
             "print('listening on %d' % s.server_port, flush=True)\n"
             "s.serve_forever()\n", www]) as ps:
    rc, out = run("--repeat", "2", "--out", OUT, "http://127.0.0.1:%d/big.bin" % ps.port)
    ok(rc == 0 and body_of(0) == pattern(big) and body_of(1) == pattern(big),
       "Python http.server (HTTP/1.0): 8 MiB byte-exact twice", out)

lsock.close()
shutil.rmtree(tmp, ignore_errors=True)
done()
