#!/usr/bin/env python3
"""HTTP/2 through echo-server with real clients: curl (h2 over TLS by ALPN,
h2c with prior knowledge, h2c by Upgrade), nghttp, h2load, and Python's h2
state machine for exact frames (concurrent interleaved streams, request
bodies with and without content-length, trailers, flow control both ways,
multi-MiB replies paced by the client's window). Statuses and bodies are
compared with the same server's HTTP/1.1 answers; --no-http2 turns it off.
Certificates are made with the openssl command in a temporary directory."""
import hashlib
import json
import os
import random
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, Server, BUILD, skip_without_http2, metrics  # noqa: E402

ECHO = os.path.join(BUILD, "echo-server")


skip_without_http2()
try:
    import h2.config
    import h2.connection
    import h2.events
    import h2.exceptions
    import h2.settings
except ImportError:
    print("1..0 # SKIP python3-h2 not installed")
    sys.exit(0)
for tool in ("curl", "nghttp", "h2load", "openssl"):
    if not shutil.which(tool):
        print("1..0 # SKIP %s not installed (nghttp2-client, curl, openssl)" % tool)
        sys.exit(0)

D = tempfile.mkdtemp(prefix="nsv-h2-")
WWW = os.path.join(D, "www")
os.mkdir(WWW)
BIG = random.Random(7).randbytes(3 << 20)
with open(os.path.join(WWW, "big.bin"), "wb") as f:
    f.write(BIG)


def sh(*argv):
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=D)


def p(name):
    return os.path.join(D, name)


sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
   "-keyout", "ca.key", "-out", "ca.crt", "-days", "30", "-subj", "/CN=nanosrv h2 test CA")
sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
   "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=localhost")
with open(p("srv.ext"), "w") as f:
    f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
sh("openssl", "x509", "-req", "-in", "srv.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
   "-out", "srv.crt", "-days", "30", "-extfile", "srv.ext")


def server(*args, tls=False):
    argv = [ECHO, "--port", "0", "--static", WWW] + list(args)
    if tls:
        argv += ["--cert", p("srv.crt"), "--key", p("srv.key")]
    t = os.environ.get("NSV_THREADS")
    if t:
        argv += ["--threads", t]
    return Server(argv)


def curl(url, *args, tls=False):
    """(exit code, status, http version, body, response head) of one curl run."""
    head = p("head.txt")
    argv = ["curl", "-sS", "--max-time", "20", "-o", p("body.bin"), "-D", head,
            "-w", "%{http_code} %{http_version}"]
    if tls:
        argv += ["--cacert", p("ca.crt")]
    r = subprocess.run(argv + list(args) + [url], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    st, ver = (r.stdout.decode().split() + ["0", "0"])[:2]
    body = open(p("body.bin"), "rb").read() if os.path.exists(p("body.bin")) else b""
    hd = open(head, "rb").read().decode("latin1") if os.path.exists(head) else ""
    for f in (p("body.bin"), head):
        if os.path.exists(f):
            os.unlink(f)
    return r.returncode, int(st), ver, body, hd


def strip_peer(body):
    """The JSON description without the client's port (each connection has its own)."""
    try:
        j = json.loads(body)
    except ValueError:
        return body
    j.pop("peer_port", None)
    return j


def header_names(head):
    """Lower-case field names of the last response head curl dumped."""
    blocks = [b for b in head.replace("\r\n", "\n").split("\n\n") if b.strip()]
    last = blocks[-1].split("\n")[1:] if blocks else []
    return [l.split(":", 1)[0].strip().lower() for l in last if ":" in l]


CONN_SPECIFIC = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"}


class H2:
    """A client connection driven by python3-h2. Every stream's answer lands in
    self.st[sid]: status, headers, data, ended, reset (error code), trailers.
    Request bodies queued by send_body go out as the server's windows allow;
    received DATA is acknowledged (WINDOW_UPDATE) only when ack is true."""

    def __init__(self, port, tls=False, settings=None, ack=True, timeout=10):
        raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.alpn = None
        if tls:
            ctx = ssl.create_default_context(cafile=p("ca.crt"))
            ctx.set_alpn_protocols(["h2"])
            raw = ctx.wrap_socket(raw, server_hostname="localhost")
            self.alpn = raw.selected_alpn_protocol()
        self.sock = raw
        self.port, self.tls = port, tls
        self.c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.c.initiate_connection()
        if settings:
            self.c.update_settings(settings)
        self.ack = ack
        self.st = {}
        self.out = {}  # sid -> [memoryview, end_stream, trailers]
        self.terminated = None
        self.events = []
        self.flush()

    def flush(self):
        d = self.c.data_to_send()
        if d:
            self.sock.sendall(d)

    def request(self, method, path, body=None, headers=(), content_length=True, end=True, trailers=None):
        sid = self.c.get_next_available_stream_id()
        hd = [(":method", method), (":path", path), (":scheme", "http"), (":authority", "localhost")]
        if body is not None and content_length:
            hd.append(("content-length", str(len(body))))
        hd += list(headers)
        self.st[sid] = {"status": None, "headers": [], "data": bytearray(), "ended": False, "reset": None,
                        "trailers": None}
        self.c.send_headers(sid, hd, end_stream=body is None and trailers is None and end)
        if body is not None or trailers:
            self.out[sid] = [memoryview(body or b""), end, trailers]
            self._push()
        self.flush()
        return sid

    def _push(self):
        """Round robin, one frame per stream per pass, so bodies interleave."""
        moved = True
        while moved:
            moved = False
            for sid in list(self.out):
                buf, end, trailers = self.out[sid]
                if self.st[sid]["reset"] is not None:
                    del self.out[sid]
                    continue
                try:
                    if len(buf):
                        n = min(len(buf), self.c.local_flow_control_window(sid), self.c.max_outbound_frame_size,
                                16384)
                        if n <= 0:
                            continue
                        self.c.send_data(sid, bytes(buf[:n]))
                        buf = self.out[sid][0] = buf[n:]
                        moved = True
                    if not len(buf):
                        del self.out[sid]
                        if trailers:
                            self.c.send_headers(sid, trailers, end_stream=True)
                        elif end:
                            self.c.end_stream(sid)
                except h2.exceptions.StreamClosedError:  # the server ended it (a 413 mid-upload)
                    self.out.pop(sid, None)

    def step(self, timeout=1.0):
        """One read; False at EOF or timeout."""
        self.sock.settimeout(timeout)
        try:
            d = self.sock.recv(1 << 20)
        except socket.timeout:
            return False
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError, OSError):
            d = b""
        if not d:
            self.terminated = self.terminated or "eof"
            return False
        try:
            evs = self.c.receive_data(d)
        except h2.exceptions.ProtocolError as e:  # the server broke the protocol: a failure to report
            self.terminated = "client saw a protocol error: %r" % e
            return False
        for ev in evs:
            self.events.append(ev)
            s = self.st.get(getattr(ev, "stream_id", None))
            if isinstance(ev, h2.events.ResponseReceived):
                s["status"] = int(dict(ev.headers)[":status"])
                s["headers"] = ev.headers
            elif isinstance(ev, h2.events.DataReceived):
                s["data"] += ev.data
                if self.ack and ev.flow_controlled_length:
                    self.c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.TrailersReceived):
                s["trailers"] = ev.headers
            elif isinstance(ev, h2.events.StreamEnded):
                s["ended"] = True
            elif isinstance(ev, h2.events.StreamReset):
                if s is not None:
                    s["reset"] = ev.error_code
            elif isinstance(ev, h2.events.ConnectionTerminated):
                self.terminated = ev
        self._push()
        self.flush()
        return True

    def run(self, until, limit=15):
        t = time.time() + limit
        while not until() and time.time() < t and not self.terminated:
            self.step(0.5)
        return until()

    def done(self, *sids):
        return lambda: all(self.st[s]["ended"] or self.st[s]["reset"] is not None for s in sids)

    def again(self):
        """This connection, or a new one if the server ended it (so one failure
        does not hide what the later checks would find)."""
        if not self.terminated:
            return self
        self.close()
        return H2(self.port, self.tls)

    def close(self):
        try:
            self.c.close_connection()
            self.flush()
        except Exception:
            pass
        self.sock.close()


# ---- h2c on the plain port: curl, nghttp, h2load ----
with server("--max-body", str(16 << 20), "--gzip", "200") as srv:
    port = srv.port
    base = "http://127.0.0.1:%d" % port
    rc, st, ver, body, head = curl(base + "/hello?x=1", "--http2-prior-knowledge")
    eq((rc, st, ver), (0, 200, "2"), "curl --http2-prior-knowledge: 200 over HTTP/2")
    rc1, st1, ver1, body1, _ = curl(base + "/hello?x=1", "--http1.1")
    eq((st1, ver1), (200, "1.1"), "the same server still answers HTTP/1.1")
    eq(strip_peer(body), strip_peer(body1), "same JSON description over HTTP/2 and HTTP/1.1")
    bad = [h for h in header_names(head) if h in CONN_SPECIFIC]
    eq(bad, [], "no connection-specific header in the HTTP/2 response")

    payload = random.Random(1).randbytes(300 * 1024)
    with open(p("payload.bin"), "wb") as f:
        f.write(payload)
    rc, st, ver, body, _ = curl(base + "/echo", "--http2-prior-knowledge", "--data-binary", "@" + p("payload.bin"),
                                "-H", "Content-Type: application/octet-stream")
    ok((rc, st, ver) == (0, 200, "2") and body == payload, "POST /echo 300 KiB over h2c: echoed byte for byte",
       "rc %d status %d version %s, %d bytes back" % (rc, st, ver, len(body)))
    rc, st, ver, body, _ = curl(base + "/echo", "--http2-prior-knowledge", "-X", "PUT", "--data-binary", "hello")
    eq((st, body), (200, b"hello"), "PUT /echo over h2c")

    rc, st, ver, body, head = curl(base + "/sse?n=5", "--http2-prior-knowledge")
    _, st1, _, body1, head1 = curl(base + "/sse?n=5", "--http1.1")
    ok(st == 200 and ver == "2" and body == body1 and b"data: 4" in body,
       "streamed reply (/sse?n=5) over h2c: same events as HTTP/1.1", "%r %r\n%r" % (st, body, body1))
    ok("transfer-encoding" in header_names(head1) and "transfer-encoding" not in header_names(head),
       "chunked framing over HTTP/1.1 only, none in the HTTP/2 head", head)

    rc, st, ver, body, _ = curl(base + "/healthz", "--http2")
    eq((rc, st, ver, body), (0, 200, "2", b"ok"), "curl --http2 on http://: Upgrade: h2c switches to HTTP/2")
    rc, st, ver, body, _ = curl(base + "/echo", "--http2", "--data-binary", "upgrade-body")
    eq((rc, st, body), (0, 200, b"upgrade-body"), "curl --http2 POST with a body (no upgrade for it): echoed")

    r = subprocess.run(["nghttp", "-nv", base + "/healthz"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=20)
    out = r.stdout.decode(errors="replace")
    ok(r.returncode == 0 and ":status: 200" in out and "recv SETTINGS frame" in out
       and "SETTINGS_MAX_CONCURRENT_STREAMS" in out, "nghttp -nv (prior knowledge): SETTINGS and :status 200", out)
    r = subprocess.run(["nghttp", "-nvu", base + "/healthz"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=20)
    out = r.stdout.decode(errors="replace")
    ok(r.returncode == 0 and "HTTP Upgrade success" in out and ":status: 200" in out,
       "nghttp -nvu: HTTP Upgrade success", out[-2000:])

    r = subprocess.run(["h2load", "-n", "2000", "-c", "4", "-m", "8", base + "/healthz"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    out = r.stdout.decode(errors="replace")
    ok(r.returncode == 0 and "2000 succeeded, 0 failed, 0 errored" in out and "status codes: 2000 2xx" in out,
       "h2load -n 2000 -c 4 -m 8: every request 2xx", out[-1500:])
    r = subprocess.run(["h2load", "-n", "400", "-c", "2", "-m", "10", "-d", p("payload.bin"), base + "/echo"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    out = r.stdout.decode(errors="replace")
    ok(r.returncode == 0 and "400 succeeded" in out and "status codes: 400 2xx" in out,
       "h2load 400 POSTs of 300 KiB with 10 streams per connection: every request 2xx", out[-1500:])

    # ---- exact frames with python3-h2 ----
    c = H2(port)
    rnd = random.Random(2)
    bodies = {}
    for i in range(80):
        b = rnd.randbytes(rnd.randrange(0, 70000))
        sid = c.request("POST", "/echo", b, content_length=i % 2 == 0)
        bodies[sid] = b
    g = c.request("GET", "/hello/concurrent?q=1")
    ok(c.run(c.done(g, *bodies)), "81 concurrent streams on one connection all ended")
    good = [sid for sid, b in bodies.items() if c.st[sid]["status"] == 200 and bytes(c.st[sid]["data"]) == b]
    eq(len(good), 80, "80 interleaved POST /echo bodies (half without content-length) echoed on their own streams")
    try:
        j = json.loads(bytes(c.st[g]["data"]))
    except ValueError:
        j = {}
    eq((c.st[g]["status"], j.get("path"), j.get("query")), (200, "/hello/concurrent", "q=1"),
       "GET between them: its own JSON")
    hdrs = dict(c.st[g]["headers"])
    ok(not set(hdrs) & CONN_SPECIFIC and "content-type" in hdrs, "h2 response fields: no connection-specific ones",
       hdrs)

    sid = c.request("POST", "/echo", b"part one, part two", content_length=False,
                    trailers=[("x-checksum", "abc")])
    ok(c.run(c.done(sid)) and c.st[sid]["status"] == 200 and bytes(c.st[sid]["data"]) == b"part one, part two",
       "request body followed by trailers: echoed", (c.st[sid], c.terminated))
    c = c.again()
    sid = c.request("POST", "/echo", b"")
    ok(c.run(c.done(sid)) and c.st[sid]["status"] == 200 and c.st[sid]["data"] == b"", "empty POST body",
       c.st[sid])
    sid = c.request("GET", "/static/missing")
    eq((c.run(c.done(sid)), c.st[sid]["status"]), (True, 404), "404 on a stream")
    sid = c.request("GET", "/healthz", headers=[("cookie", "a=1"), ("cookie", "b=2")])
    eq((c.run(c.done(sid)), c.st[sid]["status"], bytes(c.st[sid]["data"])), (True, 200, b"ok"),
       "split cookie fields accepted")
    c = c.again()

    # Flow control, the client's side: 4 MiB up (the server's windows pace
    # us) and back down through our 64 KiB default window, acknowledged as read.
    big = rnd.randbytes(4 << 20)
    sid = c.request("POST", "/echo", big)
    ok(c.run(c.done(sid), limit=25), "4 MiB POST /echo ended")
    got = bytes(c.st[sid]["data"])
    ok(c.st[sid]["status"] == 200 and hashlib.sha256(got).digest() == hashlib.sha256(big).digest(),
       "4 MiB echoed under flow control (h2 raises if a window is overrun)", "%d bytes" % len(got))
    sid = c.request("GET", "/sse?n=50000")
    ok(c.run(c.done(sid), limit=25), "streamed reply of 50000 events ended")
    txt = bytes(c.st[sid]["data"])
    ok(txt.count(b"data: ") == 50000 and b"data: 49999\n" in txt, "all 50000 events, in one stream",
       "%d events" % txt.count(b"data: "))
    sid = c.request("GET", "/static/big.bin")
    ok(c.run(c.done(sid), limit=25) and bytes(c.st[sid]["data"]) == BIG, "3 MiB file (nsv_reply_file) over h2",
       "%d bytes" % len(c.st[sid]["data"]))
    ok(c.terminated is None, "the connection carried all of it", c.terminated)
    c.close()

    # The client's window paces the server: 16 KiB per stream and no update
    # means 16 KiB and not a byte more, then the rest once we open it.
    c = H2(port, settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 16384}, ack=False)
    c.run(lambda: any(isinstance(e, h2.events.SettingsAcknowledged) for e in c.events), limit=5)
    sid = c.request("GET", "/static/big.bin")
    c.run(lambda: len(c.st[sid]["data"]) >= 16384, limit=10)
    t = time.time() + 1.0
    while time.time() < t and c.step(0.2):
        pass
    eq(len(c.st[sid]["data"]), 16384, "with a 16 KiB window and no WINDOW_UPDATE the server sent exactly 16 KiB")
    c.ack = True
    c.c.acknowledge_received_data(16384, sid)
    c.flush()
    ok(c.run(c.done(sid), limit=25) and bytes(c.st[sid]["data"]) == BIG,
       "window updates let the rest of the 3 MiB through", "%d bytes" % len(c.st[sid]["data"]))
    c.close()

    # Range and status through h2 compared with HTTP/1.1
    _, st, ver, body, _ = curl(base + "/static/big.bin", "--http2-prior-knowledge", "-r", "100-199")
    _, st1, _, body1, _ = curl(base + "/static/big.bin", "--http1.1", "-r", "100-199")
    ok(st == st1 == 206 and body == body1 == BIG[100:200] and ver == "2", "Range over h2 like HTTP/1.1: 206",
       (st, st1, ver))
    _, st, _, body, _ = curl(base + "/static/big.bin", "--http2-prior-knowledge")
    ok(st == 200 and body == BIG, "curl h2c: the 3 MiB file")
    _, st, _, _, _ = curl(base + "/static/missing", "--http2-prior-knowledge")
    _, st1, _, _, _ = curl(base + "/static/missing", "--http1.1")
    eq((st, st1), (404, 404), "404 over h2 and HTTP/1.1")
    ws = ["-H", "Upgrade: websocket", "-H", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
          "-H", "Sec-WebSocket-Version: 13"]
    _, st, ver, _, _ = curl(base + "/ws", "--http2-prior-knowledge", *ws)
    _, st1, _, _, _ = curl(base + "/ws", "--http1.1")
    eq((st, ver, st1), (426, "2", 426), "WebSocket route on a stream: 426, as a plain GET /ws over HTTP/1.1")
    q = "/gz?" + "&".join("k%d=v%d" % (i, i) for i in range(60))
    _, st, ver, body, head = curl(base + q, "--http2-prior-knowledge", "--compressed")
    _, st1, _, body1, head1 = curl(base + q, "--http1.1", "--compressed")
    ok(st == 200 and ver == "2" and "content-encoding: gzip" in head.lower() and strip_peer(body) == strip_peer(body1)
       and "content-encoding: gzip" in head1.lower(), "gzip reply over h2 (--gzip 200): same JSON once decoded", head)
    c = H2(port)
    sid = c.request("HEAD", "/healthz")
    c.run(c.done(sid))
    eq((c.st[sid]["status"], dict(c.st[sid]["headers"]).get("content-length"), bytes(c.st[sid]["data"])),
       (200, "2", b""), "HEAD over h2: the GET's content-length, no DATA")
    c.close()

    m = {k: v for k, v in metrics(port).items() if k.startswith("nanosrv_http2_")}
    if "nanosrv_http2_connections_total" in m:
        ok(m["nanosrv_http2_connections_total"] >= 10, "http2_connections counts the h2 connections", m)
        ok(m.get("nanosrv_http2_streams_total", 0) >= 2000, "http2_streams counts the streams", m)
        eq(m.get("nanosrv_http2_abuse_total", 0), 0, "http2_abuse stays 0 for well-behaved clients")
    else:
        ok(True, "# SKIP /metrics has no nanosrv_http2_* metrics")
    ok(srv.alive(), "server alive after the h2c run")

# ---- limits: statuses over h2 match HTTP/1.1 ----
with server("--max-body", "1000", "--max-header-bytes", "2048") as srv:
    base = "http://127.0.0.1:%d" % srv.port
    # (python3-h2 here, not curl: the server may end the stream with
    # RST_STREAM NO_ERROR after its answer, RFC 9113 8.1, which curl 7.88
    # reports as a framing error when it races the end of its upload)
    c = H2(srv.port)
    sid = c.request("POST", "/echo", b"x" * 5000)
    c.run(c.done(sid))
    _, st1, _, _, _ = curl(base + "/echo", "--http1.1", "--data-binary", "x" * 5000)
    eq((c.st[sid]["status"], st1), (413, 413), "body over --max-body: 413 over h2 as over HTTP/1.1")
    c.close()
    _, st, _, body, _ = curl(base + "/echo", "--http2-prior-knowledge", "--data-binary", "y" * 900)
    eq((st, body), (200, b"y" * 900), "a body under the limit still passes")
    c = H2(srv.port)
    sid = c.request("POST", "/echo", b"z" * 5000, content_length=False)
    c.run(c.done(sid))
    ok(c.st[sid]["status"] == 413 or c.st[sid]["reset"] is not None,
       "body over the limit without content-length: 413 (or the stream reset)", c.st[sid])
    sid2 = c.request("GET", "/healthz")
    ok(c.run(c.done(sid2)) and c.st[sid2]["status"] == 200, "the connection goes on after it", c.terminated)
    # 3 MiB announced and sent: more than the stream's window, so the 413
    # comes while we are still sending; the stream must end, not stall
    sid = c.request("POST", "/echo", BIG)
    c.run(lambda: c.st[sid]["status"] is not None and (c.st[sid]["ended"] or c.st[sid]["reset"] is not None))
    eq((c.st[sid]["status"], c.st[sid]["ended"] or c.st[sid]["reset"] is not None), (413, True),
       "3 MiB body over --max-body: 413 while the upload is under way, then the stream ends")
    c = c.again()
    sid2 = c.request("GET", "/healthz")
    ok(c.run(c.done(sid2)) and c.st[sid2]["status"] == 200, "and the connection goes on", c.terminated)
    c.close()
    big_hdr = "X-Big: " + "a" * 4000
    _, st, _, _, _ = curl(base + "/hello", "--http2-prior-knowledge", "-H", big_hdr)
    _, st1, _, _, _ = curl(base + "/hello", "--http1.1", "-H", big_hdr)
    eq((st, st1), (431, 431), "header list over --max-header-bytes: 431 over h2 as over HTTP/1.1")
    many = []
    for i in range(150):
        many += ["-H", "X-H%d: v" % i]
    _, st, _, _, _ = curl(base + "/hello", "--http2-prior-knowledge", *many)
    _, st1, _, _, _ = curl(base + "/hello", "--http1.1", *many)
    eq((st, st1), (431, 431), "150 header fields (over max_headers): 431 over h2 as over HTTP/1.1")
    # a malformed request: content-length says 10, the body has 3 bytes
    c = H2(srv.port)
    c.c.config.validate_outbound_headers = False
    sid = c.c.get_next_available_stream_id()
    c.st[sid] = {"status": None, "headers": [], "data": bytearray(), "ended": False, "reset": None, "trailers": None}
    c.c.send_headers(sid, [(":method", "POST"), (":path", "/echo"), (":scheme", "http"), (":authority", "x"),
                           ("content-length", "10")])
    c.c.send_data(sid, b"abc", end_stream=True)
    c.flush()
    c.run(c.done(sid))
    ok(c.st[sid]["status"] == 400 or c.st[sid]["reset"] is not None,
       "content-length larger than the body: 400 or RST_STREAM, never an answer from the host", c.st[sid])
    sid2 = c.request("GET", "/healthz")
    ok(c.run(c.done(sid2)) and c.st[sid2]["status"] == 200, "the connection goes on after a bad request")
    # malformed requests (RFC 9113 8.1.1): each a stream error or a 400, none reaches the host
    c.c.config.normalize_outbound_headers = False
    bad = {"space in :path": [(":path", "/a b")], "no :path": [(":path", None)], "empty :method": [(":method", "")],
           "two Host fields": [("host", "a"), ("host", "b")], "Connection field": [("connection", "keep-alive")],
           "Transfer-Encoding field": [("transfer-encoding", "chunked")], "uppercase name": [("X-Up", "1")],
           "content-length not a number": [("content-length", "abc")]}
    verdicts = {}
    for name, extra in bad.items():
        hd = {":method": "GET", ":path": "/x", ":scheme": "http", ":authority": "x"}
        for k, v in extra:
            if k.startswith(":"):
                hd[k] = v
        fields = [(k, v) for k, v in hd.items() if v is not None] + [(k, v) for k, v in extra if not k.startswith(":")]
        sid = c.c.get_next_available_stream_id()
        c.st[sid] = {"status": None, "headers": [], "data": bytearray(), "ended": False, "reset": None,
                     "trailers": None}
        c.c.send_headers(sid, fields, end_stream=True)
        c.flush()
        c.run(c.done(sid), limit=5)
        verdicts[name] = (c.st[sid]["status"], c.st[sid]["reset"])
        if c.terminated:
            break
    ok(all(st == 400 or (st is None and rs is not None) for st, rs in verdicts.values()) and len(verdicts) == len(bad),
       "8 malformed requests: each 400 or RST_STREAM, never answered by the host", verdicts)
    sid2 = c.request("GET", "/healthz")
    ok(c.run(c.done(sid2)) and c.st[sid2]["status"] == 200, "the connection goes on after them", c.terminated)
    c.close()
    ok(srv.alive(), "server alive after the limits")

# ---- h2 over TLS by ALPN ----
with server(tls=True) as srv:
    port = srv.port
    url = "https://localhost:%d" % port
    res = "localhost:%d:127.0.0.1" % port
    rc, st, ver, body, head = curl(url + "/hello?t=1", "--http2", "--resolve", res, tls=True)
    eq((rc, st, ver), (0, 200, "2"), "curl --http2 on https: ALPN h2")
    _, st1, ver1, body1, _ = curl(url + "/hello?t=1", "--http1.1", "--resolve", res, tls=True)
    eq((st1, ver1), (200, "1.1"), "ALPN http/1.1 still served")
    eq(strip_peer(body), strip_peer(body1), "same JSON (with the SNI) over h2 and HTTP/1.1 on TLS")
    try:
        sni = json.loads(body).get("sni")
    except ValueError:
        sni = None
    eq(sni, "localhost", "the SNI reaches the stream's request")
    rc, st, ver, body, _ = curl(url + "/echo", "--http2", "--resolve", res, "--data-binary", "@" + p("payload.bin"),
                                tls=True)
    ok(st == 200 and ver == "2" and body == payload, "POST /echo 300 KiB over h2 on TLS")
    c = H2(port, tls=True)
    eq(c.alpn, "h2", "Python ssl: ALPN selects h2")
    sids = [c.request("POST", "/echo", bytes([i]) * (i * 1000)) for i in range(1, 21)]
    ok(c.run(c.done(*sids)) and all(bytes(c.st[s]["data"]) == bytes([i + 1]) * ((i + 1) * 1000)
                                    for i, s in enumerate(sids)), "20 concurrent streams over TLS echoed")
    sid = c.request("GET", "/static/big.bin")
    ok(c.run(c.done(sid), limit=25) and bytes(c.st[sid]["data"]) == BIG, "3 MiB file over h2 on TLS")
    c.close()
    r = subprocess.run(["nghttp", "-nv", url + "/healthz"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=20)
    out = r.stdout.decode(errors="replace")
    ok(r.returncode == 0 and "negotiated protocol: h2" in out and ":status: 200" in out, "nghttp -nv over TLS", out)
    r = subprocess.run(["h2load", "-n", "1000", "-c", "4", "-m", "8", url + "/healthz"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    out = r.stdout.decode(errors="replace")
    ok(r.returncode == 0 and "1000 succeeded" in out and "status codes: 1000 2xx" in out
       and "Application protocol: h2" in out, "h2load over TLS: every request 2xx", out[-1500:])
    ok(srv.alive(), "TLS server alive")

# ---- a sharded server (worker threads answer in callback mode, or --pull) ----
for mode in ("--callback", "--pull"):
    argv = [ECHO, "--port", "0", "--threads", "2", mode]
    with Server(argv) as srv:
        c = H2(srv.port)
        rnd = random.Random(3)
        bodies = {}
        for i in range(30):
            b = rnd.randbytes(rnd.randrange(0, 100000))
            bodies[c.request("POST", "/echo", b, content_length=i % 2 == 0)] = b
        ok(c.run(c.done(*bodies)) and all(c.st[s]["status"] == 200 and bytes(c.st[s]["data"]) == b
                                          for s, b in bodies.items()),
           "--threads 2 %s: 30 concurrent POST /echo streams echoed" % mode)
        c.close()
        r = subprocess.run(["h2load", "-n", "1000", "-c", "4", "-m", "16", "http://127.0.0.1:%d/healthz" % srv.port],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
        out = r.stdout.decode(errors="replace")
        ok(r.returncode == 0 and "status codes: 1000 2xx" in out, "--threads 2 %s: h2load 1000 requests 2xx" % mode,
           out[-1000:])

# ---- the access log names the protocol ----
with server("--access-log", "common") as srv:
    base = "http://127.0.0.1:%d" % srv.port
    curl(base + "/logged/h2", "--http2-prior-knowledge")
    curl(base + "/logged/h1", "--http1.1")
    srv.stop()
    log = srv.proc.stdout.read().decode(errors="replace")
    ok('"GET /logged/h2 HTTP/2.0" 200' in log and '"GET /logged/h1 HTTP/1.1" 200' in log,
       "access log: HTTP/2.0 for the stream, HTTP/1.1 for the other", log)

# ---- --no-http2 ----
with server("--no-http2") as srv:
    base = "http://127.0.0.1:%d" % srv.port
    rc, st, ver, _, _ = curl(base + "/healthz", "--http2")
    eq((rc, st, ver), (0, 200, "1.1"), "--no-http2: Upgrade: h2c ignored, HTTP/1.1 answer")
    c = H2(srv.port)
    c.run(lambda: False, limit=2)
    ok(not any(isinstance(e, h2.events.RemoteSettingsChanged) for e in c.events),
       "--no-http2: the client preface gets no SETTINGS")
    c.close()
with server("--no-http2", tls=True) as srv:
    rc, st, ver, _, _ = curl("https://localhost:%d/healthz" % srv.port, "--http2", "--resolve",
                             "localhost:%d:127.0.0.1" % srv.port, tls=True)
    eq((rc, st, ver), (0, 200, "1.1"), "--no-http2 on TLS: ALPN does not offer h2")

shutil.rmtree(D, ignore_errors=True)
done()
