#!/usr/bin/env python3
"""The HTTP client (build/http-get) against real servers: nginx (static
files, gzip re-chunked, a chunked upstream through proxy_pass, keep-alive
reuse counted by nginx itself, HEAD, 413 from client_max_body_size while the
body is still being sent), Python's http.server (HTTP/1.0, a body delimited
by the close) and a Node http server (chunked, trailers, keep-alive, uploads
echoed, an early 413). Bodies are compared byte for byte."""
import gzip
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, Server, BUILD  # noqa

GET = os.path.join(BUILD, "http-get")
tmp = tempfile.mkdtemp(prefix="nsv-httpc-real-")
OUT = os.path.join(tmp, "out")
os.makedirs(OUT)
www = os.path.join(tmp, "www")
os.makedirs(www)


def run(*args, timeout=30):
    p = subprocess.run([GET, "--summary"] + list(args), capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace")


def lines(out):
    return [l for l in out.splitlines() if l.startswith("req ")]


def body_of(i):
    with open(os.path.join(OUT, str(i)), "rb") as f:
        return f.read()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.025)
    return False


data = os.urandom(1 << 20) * 3 + b"tail"  # 3 MiB and a bit
with open(os.path.join(www, "file.bin"), "wb") as f:
    f.write(data)
text = b"".join(b"line %d of a text that compresses well\n" % i for i in range(20000))
with open(os.path.join(www, "text.txt"), "wb") as f:
    f.write(text)
up = os.path.join(tmp, "up.bin")
with open(up, "wb") as f:
    f.write(os.urandom(1 << 20) * 4)
up_sha = hashlib.sha256(open(up, "rb").read()).hexdigest()

# ---- Node: chunked, trailers, keep-alive, uploads ----
NODE = r"""
const http = require('http'), crypto = require('crypto');
let sockets = 0;
const srv = http.createServer((req, res) => {
  const u = new URL(req.url, 'http://x');
  if (u.pathname === '/chunked') {            // many writes, no length: chunked
    const n = +u.searchParams.get('n'); let i = 0;
    const more = () => { while (i < n) { if (!res.write('piece ' + i++ + '\n')) return res.once('drain', more); } res.end(); };
    return more();
  }
  if (u.pathname === '/trailers') {
    res.writeHead(200, {'Trailer': 'X-Checksum'});
    res.write('abc'); res.write('def');
    res.addTrailers({'X-Checksum': 'c0ffee'});
    return res.end();
  }
  if (u.pathname === '/stats') return res.end(JSON.stringify({sockets}));
  if (u.pathname === '/sha') {
    const h = crypto.createHash('sha256'); let n = 0;
    req.on('data', d => { h.update(d); n += d.length; });
    return req.on('end', () => res.end(h.digest('hex') + ' ' + n));
  }
  if (u.pathname === '/early413') {
    res.writeHead(413, {'Connection': 'close'}); return res.end('too big');
  }
  res.writeHead(404); res.end();
});
srv.on('connection', () => sockets++);
srv.keepAliveTimeout = 30000;
srv.listen(0, '127.0.0.1', () => console.log('listening on ' + srv.address().port));
"""

node = shutil.which("node")
ns = Server([node, "-e", NODE]) if node else None  # also nginx's upstream below
if ns:
    if True:
        base = "http://127.0.0.1:%d" % ns.port
        want = b"".join(b"piece %d\n" % i for i in range(50000))
        rc, out = run("--repeat", "3", "--out", OUT, base + "/chunked?n=50000")
        ok(rc == 0 and all(body_of(i) == want for i in range(3)) and
           all("keepalive=1" in l for l in lines(out)), "node: 50000 chunked writes 3 times, byte-exact", out)
        rc, out = run("--out", OUT, base + "/trailers")
        ok(rc == 0 and body_of(0) == b"abcdef" and "keepalive=1" in out, "node: chunked body with trailers", out)
        rc, out = run("--out", OUT, base + "/stats")
        ok(rc == 0 and body_of(0).startswith(b'{"sockets":'), "node: /stats answered", out)
        sockets_before = int(body_of(0).split(b":")[1].rstrip(b"}"))
        rc, out = run("--repeat", "6", "--out", OUT, base + "/stats")
        after = int(body_of(5).split(b":")[1].rstrip(b"}"))
        eq((rc, after - sockets_before), (0, 1), "node: 6 sequential requests on one kept-alive connection")
        for extra, name in (([], "chunked"), (["--stream-cl"], "Content-Length")):
            rc, out = run("--method", "POST", "--stream-file", up, "--piece", "65536", "--out", OUT, *extra,
                          base + "/sha")
            ok(rc == 0 and body_of(0) == ("%s %d" % (up_sha, 4 << 20)).encode(),
               "node: 4 MiB streamed upload (%s) arrives whole" % name, out)
        rc, out = run("--method", "PUT", "--data-file", up, "--out", OUT, base + "/sha")
        ok(rc == 0 and body_of(0) == ("%s %d" % (up_sha, 4 << 20)).encode(), "node: 4 MiB body in one piece", out)
        rc, out = run("--method", "POST", "--data-file", up, "--warm", base + "/early413")
        ok(rc == 0 and "req 1 status=413 bytes=7 keepalive=0" in out,
           "node: 413 before the 4 MiB body was read, on a reused connection: the response", out)
else:
    ok(False, "node not installed")

# ---- nginx ----
nginx = shutil.which("nginx") or "/usr/sbin/nginx"
if os.path.exists(nginx):
    nport = free_port()
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write("daemon off; worker_processes 1; pid %s/nginx.pid; error_log %s/error.log;\n"
                "events { worker_connections 64; }\n"
                "http { log_format c '$connection $connection_requests $status';"
                " access_log %s/access.log c; client_body_temp_path %s; proxy_temp_path %s;"
                " fastcgi_temp_path %s; uwsgi_temp_path %s; scgi_temp_path %s; keepalive_requests 1000;\n"
                " server { listen 127.0.0.1:%d; root %s;\n"
                "  location /gz/ { alias %s/; gzip on; gzip_types *; gzip_min_length 0; }\n"
                "  location /small { client_max_body_size 1k; return 200 'fits'; }\n"
                "  location /node/ { proxy_pass http://127.0.0.1:%d/; proxy_http_version 1.1; proxy_buffering off; }\n"
                " } }\n" % ((tmp,) * 8 + (nport, www, www, ns.port if ns else free_port())))
    ng = subprocess.Popen([nginx, "-c", conf, "-p", tmp], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        ok(wait_port(nport), "nginx started")
        base = "http://127.0.0.1:%d" % nport

        def access():
            with open(os.path.join(tmp, "access.log")) as f:
                return [l.split() for l in f.read().splitlines()]

        rc, out = run("--repeat", "4", "--out", OUT, base + "/file.bin")
        log = access()
        ok(rc == 0 and all(body_of(i) == data for i in range(4)) and len(log) == 4 and
           len({l[0] for l in log}) == 1 and [l[1] for l in log] == ["1", "2", "3", "4"],
           "nginx: 3 MiB file 4 times byte-exact on one connection (nginx's $connection_requests)", out)
        rc, out = run("--repeat", "3", "--method", "HEAD", base + "/file.bin")
        log = access()[4:]
        ok(rc == 0 and all("status=200 bytes=0 keepalive=1" in l for l in lines(out)) and
           len({l[0] for l in log}) == 1, "nginx: HEAD, Content-Length not read as a body, connection reused", out)
        rc, out = run("--header", "Accept-Encoding: gzip", "--repeat", "2", "--out", OUT, base + "/gz/text.txt")
        ok(rc == 0 and gzip.decompress(body_of(0)) == text and gzip.decompress(body_of(1)) == text and
           all("keepalive=1" in l for l in lines(out)), "nginx: gzip of a text file (chunked), twice", out)
        rc, out = run(base + "/missing")
        ok(rc == 0 and "status=404" in out, "nginx: 404 with its HTML body", out)
        rc, out = run("--method", "POST", "--data", "x" * 100, base + "/small")
        ok(rc == 0 and "status=200 bytes=4" in out, "nginx: a body under client_max_body_size", out)
        for extra, name in ((["--data-file", up], "one piece"), (["--stream-file", up, "--stream-cl"], "streamed")):
            for warm in ([], ["--warm"]):
                rc, out = run("--method", "POST", *extra, *warm, base + "/small")
                ok(rc == 0 and ("req %d status=413" % len(warm)) in out and "keepalive=0" in lines(out)[-1],
                   "nginx: 413 from client_max_body_size, 4 MiB %s body, %s connection" %
                   (name, "reused" if warm else "fresh"), out)
        # chunked: nginx cannot know the size first; `return` answers at once and discards the body
        rc, out = run("--method", "POST", "--stream-file", up, "--warm", base + "/small")
        ok(rc == 0 and "req 1 status=200 bytes=4" in out,
           "nginx: 200 before an 4 MiB chunked body was read: the response, the body still sent", out)
        if ns:
            want = b"".join(b"piece %d\n" % i for i in range(20000))
            rc, out = run("--repeat", "2", "--out", OUT, base + "/node/chunked?n=20000")
            ok(rc == 0 and body_of(0) == want and body_of(1) == want,
               "nginx proxying node's chunked body (re-chunked, unbuffered): byte-exact", out)
    finally:
        ng.terminate()
        ng.wait(10)
else:
    ok(False, "nginx not installed")

# ---- Python's http.server: HTTP/1.0, and a body that ends with the close ----
PY = r"""
import http.server, functools, sys
class H(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        if self.path == '/nolen':            # no Content-Length: the close ends the body
            self.send_response(200)
            self.end_headers()
            for i in range(1000):
                self.wfile.write(b'row %d\n' % i)
            return
        super().do_GET()
    def log_message(self, *a):
        pass
h = functools.partial(H, directory=sys.argv[1])
s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), h)
print('listening on %d' % s.server_port, flush=True)
s.serve_forever()
"""
with Server([sys.executable, "-u", "-c", PY, www]) as ps:
    base = "http://127.0.0.1:%d" % ps.port
    rc, out = run("--repeat", "2", "--out", OUT, base + "/file.bin")
    ok(rc == 0 and body_of(0) == data and body_of(1) == data and all("keepalive=0" in l for l in lines(out)),
       "http.server (HTTP/1.0): 3 MiB file twice, a connection each", out)
    rc, out = run("--out", OUT, base + "/nolen")
    ok(rc == 0 and body_of(0) == b"".join(b"row %d\n" % i for i in range(1000)),
       "http.server: body without a length, delimited by the close", out)
    rc, out = run(base + "/nothing-here")
    ok(rc == 0 and "status=404" in out, "http.server: 404", out)

if ns:
    ns.stop()
shutil.rmtree(tmp, ignore_errors=True)
done()
