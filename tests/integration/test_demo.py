#!/usr/bin/env python3
"""The `make run` demo: its page and assets from examples/demo/www (ETag,
304), the API route, stream and echo, POST /upload (JSON per part, from
curl and http.client), the SSE clock (events, HEAD, the stream ended on
HANGUP), GET /metrics, and the --www flag from another working directory."""
import hashlib
import http.client
import json
import os
import re
import select
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, Server, BUILD, ROOT, connect, read_response  # noqa

DEMO = os.path.join(BUILD, "demo")
WWW = os.path.join(ROOT, "examples", "demo", "www")

srv = Server([DEMO, "--port", "0"])
base = "http://127.0.0.1:%d" % srv.port
page = urllib.request.urlopen(base + "/", timeout=5).read()
ok(b"<h1>libnanosrv</h1>" in page, "index page")
with open(os.path.join(WWW, "index.html"), "rb") as f:
    eq(page, f.read(), "/ is examples/demo/www/index.html byte for byte")
j = json.loads(urllib.request.urlopen(base + "/api/users/42?fields=name", timeout=5).read())
eq((j["id"], j["query"]), ("42", "fields=name"), "route param and query")
eq(urllib.request.urlopen(base + "/stream", timeout=5).read().count(b"chunk"), 5, "chunked stream")
r = urllib.request.urlopen(urllib.request.Request(base + "/echo", data=b"demo body"), timeout=5)
eq(r.read(), b"demo body", "echo")
try:
    urllib.request.urlopen(base + "/nope", timeout=5)
    ok(False, "404")
except urllib.error.HTTPError as e:
    eq(e.code, 404, "unknown path -> 404")

# Static assets: type, ETag, no-cache, and 304 on revalidation.
c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
for name, ctype in (("style.css", "text/css"), ("app.js", "text/javascript"), ("icon.svg", "image/svg+xml")):
    c.request("GET", "/" + name)
    r = c.getresponse()
    body = r.read()
    with open(os.path.join(WWW, name), "rb") as f:
        eq((r.status, body), (200, f.read()), "%s served" % name)
    eq(r.getheader("Content-Type", "").split(";")[0], ctype, "%s Content-Type" % name)
    eq(r.getheader("Cache-Control"), "no-cache", "%s Cache-Control: no-cache (revalidate)" % name)
    etag = r.getheader("ETag")
    ok(etag, "%s has an ETag" % name)
    c.request("GET", "/" + name, headers={"If-None-Match": etag or '"none"'})
    r = c.getresponse()
    eq((r.status, r.read()), (304, b""), "%s: If-None-Match -> 304, no body" % name)

# Upload: curl -F, one file part and one plain field.
tmp = tempfile.mkdtemp(prefix="nsv-demo-")
blob = os.urandom((2 << 20) + 12345)
path = os.path.join(tmp, "blob.bin")
with open(path, "wb") as f:
    f.write(blob)
out = subprocess.run(["curl", "-sS", "--max-time", "30", "-F", "file=@" + path, "-F", "note=hi",
                      base + "/upload"], capture_output=True, timeout=60)
try:
    parts = json.loads(out.stdout)
except ValueError:
    parts = None
ok(isinstance(parts, list) and len(parts) == 2, "curl -F upload: JSON with two parts", out.stdout[:300])
if isinstance(parts, list) and len(parts) == 2:
    eq((parts[0]["name"], parts[0]["filename"], parts[0]["size"], parts[0]["sha256"]),
       ("file", "blob.bin", len(blob), hashlib.sha256(blob).hexdigest()), "upload: the file part")
    eq((parts[1]["name"], parts[1]["filename"], parts[1]["size"], parts[1]["sha256"]),
       ("note", None, 2, hashlib.sha256(b"hi").hexdigest()), "upload: the plain field")

# Upload from http.client, a hand-made body; then the errors.
body = (b"--XyZ\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a \\\"q\\\".txt\"\r\n"
        b"Content-Type: text/plain\r\n\r\nhello upload\r\n--XyZ--\r\n")
c.request("POST", "/upload", body=body, headers={"Content-Type": "multipart/form-data; boundary=XyZ"})
r = c.getresponse()
got = json.loads(r.read())
eq((r.status, got[0]["size"], got[0]["sha256"], got[0]["content_type"]),
   (200, 12, hashlib.sha256(b"hello upload").hexdigest(), "text/plain"), "http.client upload")
c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
c.request("POST", "/upload", body=b"plain", headers={"Content-Type": "text/plain"})
r = c.getresponse()
eq((r.status, r.read()), (415, b"not multipart/form-data\n"), "upload of a non-multipart body -> 415")
c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
c.request("POST", "/upload", body=b"--XyZ\r\nno headers end", headers={"Content-Type":
                                                                         "multipart/form-data; boundary=XyZ"})
r = c.getresponse()
eq(r.status, 400, "truncated multipart body -> 400")
r.read()


# The SSE clock: two events a second apart (bounded reads), text/event-stream.
def read_events(sock, n, deadline):
    """Reads the response head and n events from a raw socket."""
    buf = b""
    while buf.count(b"\n\n") < n and time.monotonic() < deadline:
        chunk = sock.recv(4096)
        if not chunk:
            break
        buf += chunk
    return buf


s = connect(srv.port)
s.sendall(b"GET /clock HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
raw = read_events(s, 2, time.monotonic() + 10)
head = raw.split(b"\r\n\r\n", 1)[0].decode("latin1").lower()
ok(head.startswith("http/1.1 200") and "content-type: text/event-stream" in head and
   "cache-control: no-cache" in head, "GET /clock: 200 text/event-stream, no-cache", head)
times = [l[6:] for l in raw.split(b"\n") if l.startswith(b"data: ")]
ok(len(times) >= 2 and times[0] != times[1] and all(t.endswith(b" UTC") for t in times),
   "two clock events with different times", times)
# The client ends its side: the server ends the stream (final chunk) and closes.
s.shutdown(socket.SHUT_WR)
rest, deadline = b"", time.monotonic() + 10
while time.monotonic() < deadline:
    chunk = s.recv(4096)
    if not chunk:
        break
    rest += chunk
ok((raw + rest).endswith(b"0\r\n\r\n"), "HANGUP ends the clock stream with the last chunk", rest[-80:])
s.close()
s = connect(srv.port)
s.sendall(b"HEAD /clock HTTP/1.1\r\nHost: x\r\n\r\n")
st, hdrs, body = read_response(s, head_only=True)
eq((st, hdrs.get("content-type")), (200, "text/event-stream"), "HEAD /clock: the headers")
s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
eq(read_response(s)[2], b'{"ok":true}\n', "HEAD /clock ended: the connection serves the next request")
s.close()
# Many clock clients that vanish: the demo drops them and keeps ticking for the rest.
gone = [connect(srv.port) for _ in range(20)]
for g in gone:
    g.sendall(b"GET /clock HTTP/1.1\r\nHost: x\r\n\r\n")
for g in gone:
    g.recv(4096)
    g.close()
s = connect(srv.port)
s.sendall(b"GET /clock HTTP/1.1\r\nHost: x\r\n\r\n")
eq(len([l for l in read_events(s, 2, time.monotonic() + 10).split(b"\n") if l.startswith(b"data: ")]), 2,
   "after 20 clients left, a new clock still ticks")
s.close()
# GET /metrics: the Prometheus text; the requests above are counted.
r = urllib.request.urlopen(base + "/metrics", timeout=5)
text = r.read().decode()
eq(r.headers.get("Content-Type"), "text/plain; version=0.0.4", "GET /metrics: Prometheus text 0.0.4")
accepted = re.search(r"^nanosrv_\w*accepted\w*_total (\d+)$", text, re.M)
ok("# TYPE nanosrv_" in text and accepted and int(accepted.group(1)) > 20,
   "/metrics: HELP/TYPE lines and the connections accepted so far", text[:300])
eq(srv.stop(), 0, "demo exits 0 on SIGTERM")



def start_in(cwd, args):
    """Starts the demo in cwd; (process, port or None), waiting at most 10 s."""
    p = subprocess.Popen([os.path.abspath(DEMO), "--port", "0"] + args, cwd=cwd, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    out, deadline = b"", time.monotonic() + 10
    while b"\n" not in out and time.monotonic() < deadline:
        if select.select([p.stdout], [], [], 0.5)[0]:
            chunk = os.read(p.stdout.fileno(), 256)
            if not chunk:
                break
            out += chunk
    line = out.split(b"\n")[0].decode()
    return p, int(line.split()[2]) if line.startswith("listening on ") else None


def stop(p):
    p.terminate()
    try:
        return p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        return p.wait()


# --www DIR, started from another working directory; and a missing DIR.
with open(os.path.join(tmp, "index.html"), "w") as f:
    f.write("<h1>other</h1>\n")
p, port = start_in("/", ["--www", tmp])
ok(port, "demo --www DIR starts from /")
if port:
    eq(urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=5).read(), b"<h1>other</h1>\n",
       "--www DIR serves that directory")
eq(stop(p), 0, "demo --www exits 0 on SIGTERM")
p, port = start_in("/", [])
if ok(port, "demo started from / finds its page (path from the build)"):
    eq(urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=5).read(), page, "the same page")
stop(p)
r = subprocess.run([DEMO, "--port", "0", "--www", os.path.join(tmp, "missing")], capture_output=True, timeout=10)
ok(r.returncode == 1 and b"--www" in r.stderr, "a missing --www DIR: exit 1 with a hint", r.stderr)
r = subprocess.run([DEMO, "--bogus"], capture_output=True, timeout=10)
ok(r.returncode == 2 and b"usage" in r.stderr, "an unknown flag: usage, exit 2", r.stderr)
for name in os.listdir(tmp):
    os.unlink(os.path.join(tmp, name))
os.rmdir(tmp)
done()
