#!/usr/bin/env python3
"""gzip of replies (NSV_OPT_GZIP_MIN_SIZE, _LEVEL, _TYPES) seen by real
clients: curl --compressed and Python http.client with gzip/zlib.

The host is this script, driving libnanosrv through cffi on a thread of its
own: each request's query says what to answer (status, header block, body
size, streamed or not), so every rule is checked against the bytes a client
receives. Runs on a plain server and on a sharded one (replies from the
polling thread, another thread than the workers'). Every loop is bounded in
count and time."""
import gzip
import http.client
import os
import queue
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python-cffi"))
from nsvtest import ok, eq, done  # noqa

# The host runs in this interpreter, which cannot load a sanitizer build of
# the library (the runtime must come first); gzip.c is the sanitizer test.
if os.environ.get("SAN"):
    print("1..0 # SKIP in-process host; the %s run covers gzip with tests/integration/gzip.c" % os.environ["SAN"])
    sys.exit(0)

from nanosrv._ffi import ffi, lib  # noqa

MIN = 256
# Compressible and not too regular: JSON-like text of any length.
TEXT = b"".join(b'{"id":%d,"name":"item %d","tags":["a","b"]},' % (i, i * 7) for i in range(4000))

RND = random.Random(7).randbytes(1 << 16)


def body_of(n):
    return (TEXT * (n // len(TEXT) + 1))[:n]


class Host:
    """A server answering as each request's query asks:
    s=STATUS, h=HEADER BLOCK (CRLF-separated, url-encoded), n=BODY SIZE,
    chunks=K (streamed: K chunks of n bytes, each sent when the test says so
    through .go, or all at once with auto=1)."""

    def __init__(self, workers=None, min_size=MIN, types=None, static=None):
        self.srv = lib.nsv_server_new() if workers is None else lib.nsv_server_new_sharded(workers)
        assert self.srv != ffi.NULL
        r = lib.nsv_set_int(self.srv, lib.NSV_OPT_GZIP_MIN_SIZE, min_size)
        assert r == 0, ffi.string(lib.nsv_last_error_detail(self.srv))
        if types is not None:
            assert lib.nsv_set_str(self.srv, lib.NSV_OPT_GZIP_TYPES, types, len(types)) == 0
        if static is not None:  # before the host thread polls: setup stays on one thread
            r = lib.nsv_serve_dir(self.srv, b"/static/", 8, static.encode(), len(static), ffi.NULL, 0,
                                  lib.NSV_STATIC_PRECOMPRESSED)
            assert r == 0, ffi.string(lib.nsv_last_error_detail(self.srv))
        url = b"http://127.0.0.1:0"
        lid = lib.nsv_listen(self.srv, url, len(url))
        assert lid >= 0, ffi.string(lib.nsv_last_error_detail(self.srv))
        self.port = lib.nsv_listener_port(self.srv, lid)
        self.go = queue.Queue()  # chunks the test lets the streamed reply send
        self.streams = {}        # conn -> [chunk data, chunks left]
        self.stop = False
        self.errors = []
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def answer(self, ev, arena):
        q = urllib.parse.parse_qs(bytes(ffi.buffer(arena + ev.query_off, ev.query_len)).decode(),
                                  keep_blank_values=True)
        status = int(q.get("s", ["200"])[0])
        hdrs = q.get("h", [""])[0].encode("latin-1")
        n = int(q.get("n", ["0"])[0])
        body = RND[:n] if "rnd" in q else body_of(n)
        if "cl" in q:  # the whole body: all the chunks of a stream
            hdrs += b"Content-Length: %d\r\n" % (n * int(q.get("chunks", ["1"])[0]))
        if "chunks" in q:
            r = lib.nsv_reply_start(self.srv, ev.conn, status, hdrs, len(hdrs))
            if r != 0:
                self.errors.append(ffi.string(lib.nsv_last_error_detail(self.srv)))
                return
            k = int(q["chunks"][0])
            self.streams[ev.conn] = [body, k]
            if "auto" in q:
                for _ in range(k):
                    self.go.put(ev.conn)
            return
        r = lib.nsv_reply(self.srv, ev.conn, status, hdrs, len(hdrs), body, len(body))
        if r != 0:
            self.errors.append(ffi.string(lib.nsv_last_error_detail(self.srv)))

    def pump(self):
        for _ in range(1000):
            try:
                conn = self.go.get_nowait()
            except queue.Empty:
                return
            st = self.streams.get(conn)
            if not st:
                continue
            lib.nsv_send_chunk(self.srv, conn, st[0], len(st[0]))
            st[1] -= 1
            if st[1] == 0:
                lib.nsv_reply_end(self.srv, conn)
                del self.streams[conn]

    def run(self):
        evs = ffi.new("nsv_event[64]")
        cap = 1 << 20
        arena = ffi.new("char[]", cap)
        while not self.stop:
            self.pump()
            n = lib.nsv_poll(self.srv, evs, 64, arena, cap, 10)
            for i in range(max(n, 0)):
                ev = evs[i]
                if ev.type == lib.NSV_EV_REQUEST:
                    self.answer(ev, arena)
                elif ev.type == lib.NSV_EV_CLOSE:
                    self.streams.pop(ev.conn, None)

    def close(self):
        self.stop = True
        self.t.join(10)
        lib.nsv_server_free(self.srv)


def url(s=200, h="", n=0, **kw):
    q = {"s": s, "h": h, "n": n}
    q.update(kw)
    return "/r?" + urllib.parse.urlencode(q)


def get(port, path, ae="gzip", method="GET", extra=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    hd = dict(extra or {})
    if ae is not None:
        hd["Accept-Encoding"] = ae
    c.request(method, path, headers=hd)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r, data


def gunzip(data):
    return gzip.decompress(data)


JSON = "Content-Type: application/json\r\n"


def rules(port, label):
    # accepted: compressed, Vary, the length is the compressed one
    r, d = get(port, url(h=JSON, n=4096))
    eq(r.getheader("Content-Encoding"), "gzip", f"{label}: Accept-Encoding: gzip gets gzip")
    eq(r.getheader("Vary"), "Accept-Encoding", f"{label}: Vary: Accept-Encoding on it")
    eq(int(r.getheader("Content-Length")), len(d), f"{label}: Content-Length is the compressed length")
    ok(len(d) < 4096, f"{label}: the compressed body is smaller ({len(d)} bytes)")
    eq(gunzip(d), body_of(4096), f"{label}: it decompresses to the body")
    # what clients send
    for ae, want, what in [("gzip;q=0", None, "gzip;q=0 refuses"),
                           ("gzip; q=0.000", None, "gzip; q=0.000 refuses"),
                           ("*", "gzip", "* accepts"),
                           ("*;q=0", None, "*;q=0 refuses"),
                           ("br, *;q=0.1", "gzip", "*;q=0.1 accepts"),
                           ("gzip;q=0, *", None, "gzip;q=0 beats *"),
                           ("identity", None, "identity only"),
                           ("", None, "an empty Accept-Encoding"),
                           (None, None, "no Accept-Encoding"),
                           ("deflate, GZIP;q=0.5", "gzip", "GZIP;q=0.5 (any case) accepts"),
                           ("x-gzip", "gzip", "x-gzip accepts"),
                           ("gzip;q=1.0, identity;q=0", "gzip", "identity;q=0 with gzip"),
                           ("gzip;q=2", None, "a malformed weight is not an acceptance")]:
        r, d = get(port, url(h=JSON, n=4096), ae=ae)
        eq(r.getheader("Content-Encoding"), want, f"{label}: {what}")
        if want is None:
            eq(d, body_of(4096), f"{label}: {what}: the body as it is")
            eq(r.getheader("Vary"), "Accept-Encoding", f"{label}: {what}: still Vary (caches)")
    # min size
    r, d = get(port, url(h=JSON, n=MIN - 1))
    eq((r.getheader("Content-Encoding"), d), (None, body_of(MIN - 1)), f"{label}: below the min size: as it is")
    eq(r.getheader("Vary"), "Accept-Encoding", f"{label}: below the min size: Vary")
    r, d = get(port, url(h=JSON, n=MIN))
    eq(r.getheader("Content-Encoding"), "gzip", f"{label}: at the min size: gzip")
    # types
    for ct, want in [("text/html; charset=utf-8", "gzip"), ("TEXT/PLAIN", "gzip"), ("image/svg+xml", "gzip"),
                     ("application/octet-stream", None), ("image/png", None), ("text/event-stream", None),
                     ("application/jsonx", None)]:
        r, d = get(port, url(h=f"Content-Type: {ct}\r\n", n=4096))
        eq(r.getheader("Content-Encoding"), want, f"{label}: Content-Type {ct}: {want or 'not compressed'}")
        if want is None:
            eq(r.getheader("Vary"), None, f"{label}: Content-Type {ct}: no Vary added")
    r, d = get(port, url(h="", n=4096))
    eq((r.getheader("Content-Encoding"), r.getheader("Vary")), (None, None), f"{label}: no Content-Type: untouched")
    # the host's own encoding
    r, d = get(port, url(h=JSON + "Content-Encoding: br\r\n", n=4096))
    eq((r.getheader("Content-Encoding"), d), ("br", body_of(4096)), f"{label}: host Content-Encoding: untouched")
    # ranges and bodiless statuses
    r, d = get(port, url(s=206, h=JSON + "Content-Range: bytes 0-4095/9000\r\n", n=4096))
    eq((r.status, r.getheader("Content-Encoding"), d), (206, None, body_of(4096)), f"{label}: 206: not compressed")
    r, d = get(port, url(h=JSON + "Content-Range: bytes 0-4095/4096\r\n", n=4096))
    eq(r.getheader("Content-Encoding"), None, f"{label}: Content-Range on a 200: not compressed")
    r, d = get(port, url(s=204, h=JSON, n=0))
    eq((r.status, r.getheader("Content-Encoding"), d), (204, None, b""), f"{label}: 204: no encoding")
    r, d = get(port, url(s=304, h=JSON + 'ETag: "v1"\r\n', n=0))
    eq((r.status, r.getheader("Content-Encoding"), r.getheader("ETag"), r.getheader("Vary")),
       (304, None, '"v1"', "Accept-Encoding"), f"{label}: 304: no encoding, ETag as it is, Vary")
    # HEAD: the headers of the uncompressed answer
    r, d = get(port, url(h=JSON, n=4096), method="HEAD")
    eq((r.getheader("Content-Encoding"), r.getheader("Content-Length"), r.getheader("Vary"), d),
       (None, "4096", "Accept-Encoding", b""), f"{label}: HEAD: uncompressed headers, Vary")
    # Vary merge
    r, d = get(port, url(h=JSON + "Vary: Origin\r\n", n=4096))
    eq(r.getheader("Vary"), "Origin, Accept-Encoding", f"{label}: host Vary extended")
    eq(len(r.headers.get_all("Vary")), 1, f"{label}: one Vary line")
    r, d = get(port, url(h=JSON + "Vary: accept-encoding, Cookie\r\n", n=4096))
    eq(r.getheader("Vary"), "accept-encoding, Cookie", f"{label}: a Vary naming it already stays")
    r, d = get(port, url(h=JSON + "Vary: *\r\n", n=4096))
    eq(r.getheader("Vary"), "*", f"{label}: Vary: * stays")
    r, d = get(port, url(h=JSON + "Vary: Origin\r\n", n=10))
    eq(r.getheader("Vary"), "Origin, Accept-Encoding", f"{label}: host Vary extended on an uncompressed answer")
    # ETag
    r, d = get(port, url(h=JSON + 'ETag: "abc"\r\n', n=4096))
    eq(r.getheader("ETag"), 'W/"abc"', f"{label}: a strong ETag becomes weak")
    r, d = get(port, url(h=JSON + 'ETag: W/"abc"\r\n', n=4096))
    eq(r.getheader("ETag"), 'W/"abc"', f"{label}: a weak ETag stays")
    r, d = get(port, url(h=JSON + 'ETag: "abc"\r\n', n=4096), ae=None)
    eq(r.getheader("ETag"), '"abc"', f"{label}: uncompressed: the ETag stays strong")
    # the host's Content-Length is replaced
    r, d = get(port, url(h=JSON, n=4096, cl=1))
    eq((r.getheader("Content-Encoding"), int(r.getheader("Content-Length")), gunzip(d)),
       ("gzip", len(d), body_of(4096)), f"{label}: host Content-Length replaced by the compressed length")
    # random bytes do not shrink: sent as they are
    r, d = get(port, url(h="Content-Type: application/xml\r\n", n=4096, rnd=1))
    eq((r.getheader("Content-Encoding"), d, r.getheader("Vary")), (None, RND[:4096], "Accept-Encoding"),
       f"{label}: a body that does not shrink is sent as it is")


def read_resp(f):
    """One response off a buffered socket reader: (status, headers, body)."""
    status = int(f.readline().split()[1])
    hd = {}
    for _ in range(100):
        line = f.readline()
        if line in (b"\r\n", b""):
            break
        k, _, v = line.decode("latin-1").partition(":")
        hd[k.strip().lower()] = v.strip()
    if "content-length" in hd:
        return status, hd, f.read(int(hd["content-length"]))
    body = b""
    for _ in range(100000):
        piece = read_chunk(f)
        if not piece:
            break
        body += piece
    return status, hd, body


def keepalive_pipeline(port, label):
    # keep-alive after a compressed reply, then pipelined requests in order
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    bodies = []
    for n in (4096, 10, 5000):
        c.request("GET", url(h=JSON, n=n), headers={"Accept-Encoding": "gzip"})
        r = c.getresponse()
        d = r.read()
        bodies.append(gunzip(d) if r.getheader("Content-Encoding") == "gzip" else d)
    c.close()
    eq(bodies, [body_of(4096), body_of(10), body_of(5000)], f"{label}: three replies on one keep-alive connection")
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    sizes = [3000, 100, 7000, 4096]
    req = b"".join(b"GET %s HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n" % url(h=JSON, n=n).encode()
                   for n in sizes)
    s.sendall(req)
    f = s.makefile("rb")
    got = []
    for _ in sizes:
        st, hd, d = read_resp(f)
        got.append(gunzip(d) if hd.get("content-encoding") == "gzip" else d)
    s.close()
    eq(got, [body_of(n) for n in sizes], f"{label}: pipelined compressed replies in order")


def read_chunk(f):
    line = f.readline()
    size = int(line.split(b";")[0], 16)
    data = f.read(size)
    f.read(2)
    return data


def streamed(port, host, label):
    # Each chunk is decodable when it arrives: the host sends the next one only
    # after the client decoded the last.
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n"
              % url(h="Content-Type: text/plain\r\n", n=1000, chunks=5).encode())
    f = s.makefile("rb")
    head = b""
    for _ in range(50):
        line = f.readline()
        head += line
        if line in (b"\r\n", b""):
            break
    ok(b"Content-Encoding: gzip\r\n" in head and b"Transfer-Encoding: chunked\r\n" in head
       and b"Vary: Accept-Encoding\r\n" in head, f"{label}: streamed reply: gzip, chunked, Vary", head)
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    conn = None
    for _ in range(200):
        conn = next(iter(host.streams), None)
        if conn is not None:
            break
        time.sleep(0.01)
    text = b""
    each = []
    for i in range(5):
        host.go.put(conn)
        out = b""
        for _ in range(20):  # a chunk may come in more than one HTTP chunk
            out += d.decompress(read_chunk(f))
            if len(out) >= 1000:
                break
        each.append(out == body_of(1000))
        text += out
    ok(all(each), f"{label}: every streamed chunk decodes on arrival", each)
    tail = d.decompress(read_chunk(f))
    last = read_chunk(f)
    ok(d.eof and tail == b"" and last == b"", f"{label}: the gzip member and the body end at reply_end")
    eq(text, body_of(1000) * 5, f"{label}: the streamed text")
    # keep-alive after it
    s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % url(h=JSON, n=20).encode())
    eq(read_resp(f)[2], body_of(20), f"{label}: the connection serves the next request")
    s.close()
    # fixed-length stream: not compressed
    r, d2 = get(port, url(h="Content-Type: text/plain\r\n", n=1000, chunks=2, auto=1, cl=1))
    eq((r.getheader("Content-Encoding"), d2), (None, body_of(1000) * 2),
       f"{label}: a fixed-length stream is not compressed")
    # curl --compressed on a big stream
    p = subprocess.run(["curl", "-sS", "--compressed", "-D", "-", "-o", "/tmp/nsv_gzip_curl.%d" % os.getpid(),
                        "http://127.0.0.1:%d%s" % (port, url(h="Content-Type: text/html\r\n", n=65536,
                                                                chunks=20, auto=1))],
                       capture_output=True, timeout=30)
    with open("/tmp/nsv_gzip_curl.%d" % os.getpid(), "rb") as fh:
        got = fh.read()
    os.unlink("/tmp/nsv_gzip_curl.%d" % os.getpid())
    ok(p.returncode == 0 and b"content-encoding: gzip" in p.stdout.lower() and got == body_of(65536) * 20,
       f"{label}: curl --compressed reads a 1.3 MB compressed stream", p.stderr)
    # a client leaving in the middle of a compressed stream; the server goes on
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n"
              % url(h="Content-Type: text/plain\r\n", n=1000, chunks=1000000).encode())
    s.recv(100)
    s.close()
    r, d = get(port, url(h=JSON, n=4096))
    eq(gunzip(d), body_of(4096), f"{label}: healthy after a client left mid-stream")


def curl_cases(port, label):
    p = subprocess.run(["curl", "-sS", "--compressed", "-D", "-", "http://127.0.0.1:%d%s" % (port, url(h=JSON, n=8000))],
                       capture_output=True, timeout=30)
    head, _, body = p.stdout.partition(b"\r\n\r\n")
    ok(p.returncode == 0 and b"content-encoding: gzip" in head.lower() and body == body_of(8000),
       f"{label}: curl --compressed", p.stderr)
    p = subprocess.run(["curl", "-sS", "-D", "-", "http://127.0.0.1:%d%s" % (port, url(h=JSON, n=8000))],
                       capture_output=True, timeout=30)
    head, _, body = p.stdout.partition(b"\r\n\r\n")
    ok(p.returncode == 0 and b"content-encoding" not in head.lower() and body == body_of(8000),
       f"{label}: curl without --compressed gets the body as it is", p.stderr)


def main():
    for workers, label in ((None, "plain"), (2, "sharded")):
        host = Host(workers)
        try:
            rules(host.port, label)
            keepalive_pipeline(host.port, label)
            streamed(host.port, host, label)
            curl_cases(host.port, label)
            eq(host.errors, [], f"{label}: every reply call succeeded")
        finally:
            host.close()
    # a custom type list: wildcard, parameters, the event stream
    host = Host(None, types=b"text/, application/vnd.x+json; charset=utf-8 ,text/event-stream")
    try:
        for ct, want in [("text/csv", "gzip"), ("application/vnd.x+json", "gzip"), ("application/json", None)]:
            r, d = get(host.port, url(h=f"Content-Type: {ct}\r\n", n=4096))
            eq(r.getheader("Content-Encoding"), want, f"custom list: {ct}: {want or 'not compressed'}")
        r, d = get(host.port, url(h="Content-Type: text/event-stream\r\n", n=500, chunks=3, auto=1))
        eq((r.getheader("Content-Encoding"), gunzip(d)), ("gzip", body_of(500) * 3),
           "custom list: an event stream is compressed when listed")
    finally:
        host.close()
    # static files are never compressed on the fly; a precompressed one is sent as it is
    d = tempfile.mkdtemp()
    try:
        css = b"body { margin: 0; padding: 0 }\n" * 400
        for name, data in (("plain.css", css), ("pre.css", css), ("pre.css.gz", gzip.compress(css))):
            with open(os.path.join(d, name), "wb") as fh:
                fh.write(data)
        host = Host(None, static=d)
        try:
            r, body = get(host.port, "/static/plain.css")
            eq((r.getheader("Content-Encoding"), body), (None, css), "static: a file is not compressed on the fly")
            r, body = get(host.port, "/static/pre.css")
            eq((r.getheader("Content-Encoding"), gunzip(body)), ("gzip", css),
               "static: a precompressed file is sent once compressed, not twice")
        finally:
            host.close()
    finally:
        shutil.rmtree(d)
    # option checks
    srv = lib.nsv_server_new()
    eq(lib.nsv_set_int(srv, lib.NSV_OPT_GZIP_LEVEL, 0), lib.NSV_ERANGE, "level 0 refused")
    eq(lib.nsv_set_int(srv, lib.NSV_OPT_GZIP_LEVEL, 10), lib.NSV_ERANGE, "level 10 refused")
    eq(lib.nsv_get_int(srv, lib.NSV_OPT_GZIP_LEVEL), 6, "level defaults to 6")
    eq(lib.nsv_get_int(srv, lib.NSV_OPT_GZIP_MIN_SIZE), 0, "min size defaults to 0 (off)")
    for bad in (b"text", b"/html", b"text/html/x", b"te xt/html", b"text/h\x01"):
        eq(lib.nsv_set_str(srv, lib.NSV_OPT_GZIP_TYPES, bad, len(bad)), lib.NSV_EINVAL, f"types {bad!r} refused")
    eq(lib.nsv_opt_by_name(b"gzip_types", 10), lib.NSV_OPT_GZIP_TYPES, "nsv_opt_by_name(gzip_types)")
    eq(lib.nsv_opt_by_name(b"NSV_OPT_GZIP_MIN_SIZE", 21), lib.NSV_OPT_GZIP_MIN_SIZE, "nsv_opt_by_name(min size)")
    lib.nsv_server_free(srv)
    done()


main()
