#!/usr/bin/env python3
"""Static files through echo-server --static DIR (mounted at /static/ with
NSV_STATIC_PRECOMPRESSED): curl and http.client for types, validators and
304, ranges, HEAD, precompressed variants, 301/405/404; raw request lines
over a socket for the path attacks (curl would normalise them); a 64 MiB
file (sha256) while other clients are answered; a slow reader's server
RSS; https; a sharded server. Every loop is bounded in count and time."""
import hashlib
import http.client
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, echo_server, connect, read_response  # noqa

D = tempfile.mkdtemp(prefix="nsv-static-")
ROOT = os.path.join(D, "www")
OUTSIDE = os.path.join(D, "secret.txt")
BIG = 64 << 20


def write(rel, data):
    p = os.path.join(ROOT, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(data)
    return p


def setup():
    os.makedirs(ROOT)
    with open(OUTSIDE, "w") as f:
        f.write("outside the root\n")
    write("index.html", b"<h1>home</h1>\n")
    write("docs/index.html", b"<h1>docs</h1>\n")
    write("nodir/a.txt", b"a\n")
    for name, data in [("a.css", b"body{}\n"), ("app.js", b"1;\n"), ("m.mjs", b"export{}\n"),
                       ("d.json", b"{}\n"), ("i.svg", b"<svg/>\n"), ("p.png", b"\x89PNG"),
                       ("j.jpg", b"\xff\xd8"), ("w.webp", b"RIFF"), ("x.avif", b"av"), ("g.gif", b"GIF8"),
                       ("f.ico", b"\0\0"), ("f.woff2", b"wOF2"), ("m.wasm", b"\0asm"), ("t.txt", b"text\n"),
                       ("x.xml", b"<a/>"), ("d.pdf", b"%PDF"), ("v.mp4", b"\0"), ("v.webm", b"\0"),
                       ("s.map", b"{}"), ("c.csv", b"a,b\n"), ("r.md", b"# r\n"), ("blob.unknownext", b"?"),
                       ("UPPER.HTML", b"<p>\n"), ("sp ace.txt", b"space\n"), ("caf\u00e9.txt".encode().decode(), b"cafe\n")]:
        write(name, data)
    write("digits.txt", b"0123456789")
    write("big.bin", b"")  # replaced below
    write("comp.js", b"console.log('plain')\n" * 20)
    write("comp.js.br", b"BROTLI-BYTES")
    write("comp.js.gz", b"GZIP-BYTES")
    write("onlygz.css", b"p{}\n" * 30)
    write("onlygz.css.gz", b"GZ-CSS")
    write(".env", b"SECRET=1\n")
    os.symlink(OUTSIDE, os.path.join(ROOT, "escape.txt"))
    os.symlink("/etc", os.path.join(ROOT, "etcdir"))
    os.symlink("a.css", os.path.join(ROOT, "inside.css"))
    os.symlink(os.path.join(ROOT, "t.txt"), os.path.join(ROOT, "abs_inside.txt"))
    os.symlink("../secret.txt", os.path.join(ROOT, "dotdot.txt"))
    block = os.urandom(1 << 20)
    h = hashlib.sha256()
    with open(os.path.join(ROOT, "big.bin"), "wb") as f:
        for i in range(BIG >> 20):
            piece = block[i:] + block[:i]
            f.write(piece)
            h.update(piece)
    return h.hexdigest()


BIG_SHA = setup()


def get(port, path, headers=None, method="GET", tls=False):
    if tls:
        ctx = ssl.create_default_context(cafile=os.path.join(D, "ca.crt"))
        c = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=ctx)
    else:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request(method, path, headers=headers or {})
    r = c.getresponse()
    body = r.read()
    hdrs = {k.lower(): v for k, v in r.getheaders()}
    c.close()
    return r.status, hdrs, body


def raw(port, line, extra=""):
    """One raw request line (not normalised by a client); the status."""
    s = connect(port)
    s.sendall((line + "\r\nHost: x\r\n" + extra + "Connection: close\r\n\r\n").encode("latin1"))
    r = read_response(s)
    s.close()
    return r[0] if r else None


def types(port):
    want = {"a.css": "text/css; charset=utf-8", "app.js": "text/javascript; charset=utf-8",
            "m.mjs": "text/javascript; charset=utf-8", "d.json": "application/json",
            "i.svg": "image/svg+xml", "p.png": "image/png", "j.jpg": "image/jpeg", "w.webp": "image/webp",
            "x.avif": "image/avif", "g.gif": "image/gif", "f.ico": "image/x-icon", "f.woff2": "font/woff2",
            "m.wasm": "application/wasm", "t.txt": "text/plain; charset=utf-8", "x.xml": "application/xml",
            "d.pdf": "application/pdf", "v.mp4": "video/mp4", "v.webm": "video/webm",
            "s.map": "application/json", "c.csv": "text/csv; charset=utf-8", "r.md": "text/markdown; charset=utf-8",
            "blob.unknownext": "application/octet-stream", "UPPER.HTML": "text/html; charset=utf-8"}
    for name, t in want.items():
        st, h, body = get(port, "/static/" + name)
        with open(os.path.join(ROOT, name), "rb") as f:
            content = f.read()
        ok(st == 200 and h.get("content-type") == t and body == content, f"{name}: 200 {t}",
           f"{st} {h.get('content-type')}")
    st, h, body = get(port, "/static/sp%20ace.txt")
    eq((st, body), (200, b"space\n"), "percent-encoded space decoded once")
    st, h, body = get(port, "/static/caf%C3%A9.txt")
    eq((st, body), (200, b"cafe\n"), "UTF-8 name")


def validators(port):
    st, h, body = get(port, "/static/a.css")
    etag, lm = h.get("etag", ""), h.get("last-modified", "")
    ok(etag.startswith('"') and etag.endswith('"') and not etag.startswith("W/"), "strong ETag", etag)
    s = os.stat(os.path.join(ROOT, "a.css"))
    eq(etag, '"%x-%x"' % (int(s.st_mtime), s.st_size), "ETag is mtime-size in hex (as nginx)")
    ok(lm.endswith(" GMT") and len(lm) == 29, "Last-Modified is an IMF-fixdate", lm)
    eq(h.get("accept-ranges"), "bytes", "Accept-Ranges: bytes")
    eq(get(port, "/static/a.css", {"If-None-Match": etag})[0], 304, "If-None-Match: the tag -> 304")
    st, h304, b304 = get(port, "/static/a.css", {"If-None-Match": '"zzz", W/' + etag})
    eq((st, b304), (304, b""), "If-None-Match list with a weak form of the tag -> 304 (weak comparison)")
    eq(h304.get("etag"), etag, "304 carries the ETag")
    eq(get(port, "/static/a.css", {"If-None-Match": "*"})[0], 304, "If-None-Match: * -> 304")
    eq(get(port, "/static/a.css", {"If-None-Match": '"other"'})[0], 200, "another tag -> 200")
    eq(get(port, "/static/a.css", {"If-Modified-Since": lm})[0], 304, "If-Modified-Since = Last-Modified -> 304")
    eq(get(port, "/static/a.css", {"If-Modified-Since": "Sun, 06 Nov 1994 08:49:37 GMT"})[0], 200,
       "If-Modified-Since in the past -> 200")
    eq(get(port, "/static/a.css", {"If-Modified-Since": "garbage"})[0], 200, "unparseable date ignored")
    eq(get(port, "/static/a.css", {"If-None-Match": '"other"', "If-Modified-Since": lm})[0], 200,
       "If-None-Match wins over If-Modified-Since")
    out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "If-None-Match: " + etag,
                          f"http://127.0.0.1:{port}/static/a.css"], capture_output=True, timeout=30)
    eq(out.stdout, b"304", "curl with If-None-Match -> 304")


def ranges(port):
    st, h, b = get(port, "/static/digits.txt", {"Range": "bytes=2-4"})
    eq((st, b, h.get("content-range"), h.get("content-length")), (206, b"234", "bytes 2-4/10", "3"), "range 2-4 -> 206")
    st, h, b = get(port, "/static/digits.txt", {"Range": "bytes=-3"})
    eq((st, b, h.get("content-range")), (206, b"789", "bytes 7-9/10"), "suffix range -> last 3")
    st, h, b = get(port, "/static/digits.txt", {"Range": "bytes=6-"})
    eq((st, b, h.get("content-range")), (206, b"6789", "bytes 6-9/10"), "open range -> to the end")
    st, h, b = get(port, "/static/digits.txt", {"Range": "bytes=8-100"})
    eq((st, b), (206, b"89"), "range past the end is cut at the end")
    st, h, b = get(port, "/static/digits.txt", {"Range": "bytes=10-"})
    eq((st, h.get("content-range")), (416, "bytes */10"), "unsatisfiable -> 416 with bytes */SIZE")
    st, h, b = get(port, "/static/digits.txt", {"Range": "bytes=-0"})
    eq(st, 416, "empty suffix -> 416")
    st, h, b = get(port, "/static/digits.txt", {"Range": "bytes=0-1,4-5"})
    eq((st, b), (200, b"0123456789"), "multiple ranges -> the whole file 200")
    st, h, b = get(port, "/static/digits.txt", {"Range": "items=0-1"})
    eq((st, b), (200, b"0123456789"), "another unit -> 200")
    st, h, b = get(port, "/static/digits.txt", {"Range": "bytes=5-2"})
    eq(st, 200, "invalid range (last < first) ignored")
    etag = get(port, "/static/digits.txt")[1]["etag"]
    lm = get(port, "/static/digits.txt")[1]["last-modified"]
    eq(get(port, "/static/digits.txt", {"Range": "bytes=0-0", "If-Range": etag})[0], 206, "If-Range matching tag -> 206")
    eq(get(port, "/static/digits.txt", {"Range": "bytes=0-0", "If-Range": '"old"'})[:3:2], (200, b"0123456789"),
       "If-Range other tag -> whole file 200")
    eq(get(port, "/static/digits.txt", {"Range": "bytes=0-0", "If-Range": lm})[0], 206, "If-Range matching date -> 206")
    eq(get(port, "/static/digits.txt", {"Range": "bytes=0-0", "If-Range": "Sun, 06 Nov 1994 08:49:37 GMT"})[0], 200,
       "If-Range older date -> 200")
    eq(get(port, "/static/digits.txt", {"Range": "bytes=0-0", "If-Range": "W/" + etag})[0], 200,
       "If-Range weak tag never matches -> 200")
    out = subprocess.run(["curl", "-s", "-r", "3-5", f"http://127.0.0.1:{port}/static/digits.txt"],
                         capture_output=True, timeout=30)
    eq(out.stdout, b"345", "curl -r 3-5")
    # a large range out of the sendfile path
    st, h, b = get(port, "/static/big.bin", {"Range": "bytes=1000000-3999999"})
    with open(os.path.join(ROOT, "big.bin"), "rb") as f:
        f.seek(1000000)
        want = f.read(3000000)
    eq((st, len(b), b == want), (206, 3000000, True), "3 MB range of the big file")


def head_and_methods(port):
    st, h, b = get(port, "/static/digits.txt", method="HEAD")
    eq((st, h.get("content-length"), b), (200, "10", b""), "HEAD: length, no body")
    st, h, b = get(port, "/static/big.bin", method="HEAD")
    eq((st, h.get("content-length"), b), (200, str(BIG), b""), "HEAD of the big file")
    st, h, b = get(port, "/static/digits.txt", method="POST")
    eq((st, h.get("allow")), (405, "GET, HEAD"), "POST -> 405 with Allow")
    eq(get(port, "/static/digits.txt", method="DELETE")[0], 405, "DELETE -> 405")
    st, h, b = get(port, "/static/")
    eq((st, b), (200, b"<h1>home</h1>\n"), "the mount's root -> index.html")
    st, h, b = get(port, "/static/docs/")
    eq((st, b, h.get("content-type")), (200, b"<h1>docs</h1>\n", "text/html; charset=utf-8"), "dir/ -> index.html")
    st, h, b = get(port, "/static/docs?x=1")
    eq((st, h.get("location")), (301, "/static/docs/?x=1"), "dir without slash -> 301 to the slash form, query kept")
    st, h, b = get(port, "/static")
    eq((st, h.get("location")), (301, "/static/"), "the bare prefix -> 301")
    eq(get(port, "/static/nodir/")[0], 404, "directory without index.html -> 404 (no listing)")
    eq(get(port, "/static/missing.txt")[0], 404, "missing -> 404")
    eq(get(port, "/static/.env")[0], 404, "dot file -> 404")
    st, h, b = get(port, "/nothere")
    eq(st, 200, "other paths still go to the routes (echo JSON)")
    # keep-alive continues after files; pipelined requests after a big file come out in order
    s = connect(port, timeout=30)
    s.sendall(b"GET /static/big.bin HTTP/1.1\r\nHost: x\r\n\r\nGET /static/digits.txt HTTP/1.1\r\nHost: x\r\n\r\n"
              b"GET /static/t.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    r1, r2, r3 = read_response(s), read_response(s), read_response(s)
    s.close()
    ok(r1 and r1[0] == 200 and hashlib.sha256(r1[2]).hexdigest() == BIG_SHA, "pipelined: the big file first, whole")
    eq((r2[0], r2[2]) if r2 else None, (200, b"0123456789"), "pipelined: the second answer after it")
    eq((r3[0], r3[2]) if r3 else None, (200, b"text\n"), "pipelined: the third in order")


def precompressed(port):
    st, h, b = get(port, "/static/comp.js", {"Accept-Encoding": "gzip, br"})
    eq((st, b, h.get("content-encoding"), h.get("vary")), (200, b"BROTLI-BYTES", "br", "Accept-Encoding"),
       "br preferred when both accepted")
    eq(h.get("content-type"), "text/javascript; charset=utf-8", "the type of the original name")
    br_tag = h.get("etag")
    st, h, b = get(port, "/static/comp.js", {"Accept-Encoding": "gzip;q=1.0, br;q=0.5"})
    eq((b, h.get("content-encoding")), (b"GZIP-BYTES", "gzip"), "q-values: gzip weighted higher")
    ok(h.get("etag") != br_tag, "each variant has its own ETag")
    st, h, b = get(port, "/static/comp.js", {"Accept-Encoding": "br;q=0, gzip"})
    eq(h.get("content-encoding"), "gzip", "br;q=0 refuses br")
    st, h, b = get(port, "/static/comp.js", {"Accept-Encoding": "identity"})
    eq((h.get("content-encoding"), h.get("vary"), b[:7]), (None, "Accept-Encoding", b"console"),
       "identity only: the plain file, still Vary")
    st, h, b = get(port, "/static/comp.js")
    eq(h.get("content-encoding"), None, "no Accept-Encoding: the plain file")
    st, h, b = get(port, "/static/onlygz.css", {"Accept-Encoding": "br, gzip"})
    eq((b, h.get("content-encoding")), (b"GZ-CSS", "gzip"), "only .gz present: gzip")
    st, h, b = get(port, "/static/comp.js", {"Accept-Encoding": "*"})
    eq(h.get("content-encoding"), "br", "* accepts br")
    eq(get(port, "/static/comp.js", {"Accept-Encoding": "br", "If-None-Match": br_tag})[0], 304,
       "the br variant's ETag validates it")


def attacks(port):
    bad = ["/static/../secret.txt", "/static/%2e%2e/secret.txt", "/static/%2E%2E/secret.txt",
           "/static/.%2e/secret.txt", "/static/docs/../../secret.txt", "/static/..%2fsecret.txt",
           "/static/docs%2f..%2f..%2fsecret.txt", "/static/..%5csecret.txt", "/static/..\\secret.txt",
           "/static/a.css%00.txt", "/static/%00", "/static/%c0%ae%c0%ae/secret.txt", "/static/%c0%afetc/passwd",
           "/static/%e0%80%ae%e0%80%ae/secret.txt", "/static/escape.txt", "/static/etcdir/passwd",
           "/static/dotdot.txt", "/static/%252e%252e/secret.txt", "/static/%01", "/static/%7f",
           "/static/%zz", "/static/%2", "/static//..//secret.txt", "/static/.%2E/.%2E/secret.txt",
           "/static/%2e%2e%2f%2e%2e%2fetc/passwd"]
    for path in bad:
        st = raw(port, f"GET {path} HTTP/1.1")
        ok(st in (400, 404), f"raw {path!r} refused ({st})")
    eq(raw(port, "GET /static//a.css HTTP/1.1"), 200, "doubled slash is one (safely)")
    eq(raw(port, "GET /static/./a.css HTTP/1.1"), 200, "a '.' segment is dropped")
    eq(raw(port, "GET /static/inside.css HTTP/1.1"), 200, "a relative symlink staying inside is served")
    eq(raw(port, "GET /static/abs_inside.txt HTTP/1.1"), 200, "an absolute symlink staying inside is served")
    # the server is still fine
    eq(get(port, "/static/a.css")[0], 200, "server alive after the attacks")


def big_concurrent(port):
    result = {}
    smalls_done = threading.Event()

    def fetch_big():
        h = hashlib.sha256()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        c.request("GET", "/static/big.bin")
        r = c.getresponse()
        n = 0
        while True:
            piece = r.read(1 << 20)
            if not piece:
                break
            h.update(piece)
            n += len(piece)
            if n == (8 << 20):  # stop reading mid-way until the others are answered
                result["mid"] = True
                smalls_done.wait(60)
        result["sha"] = h.hexdigest()
        result["n"] = n
        c.close()

    t = threading.Thread(target=fetch_big)
    t.start()
    small_ok = 0
    deadline = time.time() + 60
    while "mid" not in result and time.time() < deadline:
        time.sleep(0.01)
    for _ in range(20):
        if get(port, "/static/digits.txt")[2] == b"0123456789":
            small_ok += 1
    still_sending = t.is_alive()
    smalls_done.set()
    t.join(120)
    eq((result.get("n"), result.get("sha")), (BIG, BIG_SHA), "64 MiB file, sha256 matches")
    eq(small_ok, 20, "20 other requests answered meanwhile")
    ok(still_sending, "they were answered while the big file was still going out")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def slow_reader(srv):
    port = srv.port
    before = rss_kib(srv.proc.pid)
    socks = []
    for _ in range(8):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b"GET /static/big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        s.recv(1000)
        socks.append(s)
    time.sleep(0.5)
    after = rss_kib(srv.proc.pid)
    ok(after - before < 8 * 1024, f"8 slow readers of a 64 MiB file: server RSS +{after - before} KiB (< 8 MiB)")
    eq(get(port, "/static/digits.txt")[0], 200, "others still served while the slow readers stall")
    for s in socks:
        s.close()


def tls_run():
    def sh(*argv):
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=D)
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", "ca.key", "-out", "ca.crt", "-days", "30", "-subj", "/CN=static test CA")
    sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=localhost")
    with open(os.path.join(D, "srv.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    sh("openssl", "x509", "-req", "-in", "srv.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
       "-out", "srv.crt", "-days", "30", "-extfile", "srv.ext")
    with echo_server("--static", ROOT, "--cert", os.path.join(D, "srv.crt"), "--key", os.path.join(D, "srv.key")) as srv:
        st, h, b = get(srv.port, "/static/big.bin", tls=True)
        eq((st, len(b), hashlib.sha256(b).hexdigest()), (200, BIG, BIG_SHA), "https: 64 MiB file (pread + TLS write)")
        st, h, b = get(srv.port, "/static/digits.txt", {"Range": "bytes=-4"}, tls=True)
        eq((st, b), (206, b"6789"), "https: a range")
        st, h, b = get(srv.port, "/static/big.bin", {"Range": "bytes=100000-299999"}, tls=True)
        with open(os.path.join(ROOT, "big.bin"), "rb") as f:
            f.seek(100000)
            want = f.read(200000)
        eq((st, b == want), (206, True), "https: a 200 KB range of the big file")
        out = subprocess.run(["curl", "-s", "--cacert", os.path.join(D, "ca.crt"),
                              f"https://localhost:{srv.port}/static/a.css"], capture_output=True, timeout=30)
        eq(out.stdout, b"body{}\n", "curl over https")


with echo_server("--static", ROOT) as srv:
    types(srv.port)
    validators(srv.port)
    ranges(srv.port)
    head_and_methods(srv.port)
    precompressed(srv.port)
    attacks(srv.port)
    big_concurrent(srv.port)
    slow_reader(srv)
    ok(srv.alive(), "single loop: server alive at the end")

with echo_server("--static", ROOT, threads=2) as srv:
    eq(get(srv.port, "/static/digits.txt", {"Range": "bytes=1-2"})[:3:2], (206, b"12"), "sharded: a range")
    eq(raw(srv.port, "GET /static/%2e%2e/secret.txt HTTP/1.1"), 404, "sharded: traversal refused")
    big_concurrent(srv.port)
    ok(srv.alive(), "sharded: server alive at the end")

tls_run()
done()
