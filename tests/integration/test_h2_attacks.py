#!/usr/bin/env python3
"""HTTP/2 defences of echo-server, with hand-made frames on raw sockets:
streams over SETTINGS_MAX_CONCURRENT_STREAMS, rapid reset, CONTINUATION
floods, an HPACK bomb, PING and SETTINGS floods from a client that reads
nothing, a zero-window stall on a big reply, many unfinished request bodies
on one connection, and bad prefaces. Each attack
must end in the answer the protocol prescribes while the server's memory
stays bounded and other clients are served. Every loop is bounded in count
and time; nothing measures speed."""
import os
import shutil
import socket
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, Server, BUILD, skip_without_http2, metrics, rss_kib  # noqa: E402

ECHO = os.path.join(BUILD, "echo-server")


skip_without_http2()

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIO = 1, 1, 4, 8, 0x20
NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR = 0, 1, 2, 3
FRAME_SIZE_ERROR, REFUSED_STREAM, CANCEL, COMPRESSION_ERROR, ENHANCE_YOUR_CALM = 6, 7, 8, 9, 11
INITIAL_WINDOW_SIZE = 4

D = tempfile.mkdtemp(prefix="nsv-h2a-")
with open(os.path.join(D, "huge.bin"), "wb") as f:
    f.truncate(256 << 20)  # sparse: costs no disk, reads as zeros


def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload


def settings(*pairs, ack=False):
    return frame(SETTINGS, ACK if ack else 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


def hpack_int(v, prefix, first=0):
    """HPACK integer with an N-bit prefix (RFC 7541 5.1)."""
    lim = (1 << prefix) - 1
    if v < lim:
        return bytes([first | v])
    out = [first | lim]
    v -= lim
    while v >= 128:
        out.append(v % 128 + 128)
        v //= 128
    out.append(v)
    return bytes(out)


def lit(name, value, index=False):
    """Literal field with a new name, with or without incremental indexing."""
    n, v = name.encode(), value.encode() if isinstance(value, str) else value
    return (b"\x40" if index else b"\x00") + hpack_int(len(n), 7) + n + hpack_int(len(v), 7) + v


def req_block(method="GET", path="/healthz", extra=b""):
    """A request header block, no dynamic table use (unless extra adds to it)."""
    return lit(":method", method) + lit(":scheme", "http") + lit(":path", path) + lit(":authority", "x") + extra


class Raw:
    """A raw HTTP/2 client connection: frames out, frames in, nothing automatic
    except what the calls say."""

    def __init__(self, port, rcvbuf=None, preface=True, window=None):
        self.s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.s.settimeout(10)
        self.s.connect(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.frames = []
        self.eof = False
        if preface:
            init = settings((INITIAL_WINDOW_SIZE, window)) if window is not None else settings()
            self.s.sendall(PREFACE + init)

    def send(self, data):
        try:
            self.s.sendall(data)
            return True
        except (BrokenPipeError, ConnectionResetError, socket.timeout, OSError):
            return False

    def read(self, timeout=0.5):
        """Reads what arrives within timeout; returns the frames it completed."""
        self.s.settimeout(timeout)
        try:
            d = self.s.recv(1 << 20)
        except socket.timeout:
            return []
        except (ConnectionResetError, OSError):
            d = b""
        if not d:
            self.eof = True
            return []
        self.buf += d
        got = []
        while len(self.buf) >= 9:
            n = int.from_bytes(self.buf[:3], "big")
            if len(self.buf) < 9 + n:
                break
            t, fl, sid = self.buf[3], self.buf[4], int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
            got.append((t, fl, sid, self.buf[9:9 + n]))
            self.buf = self.buf[9 + n:]
        self.frames += got
        return got

    def until(self, cond, limit=10):
        t = time.time() + limit
        while time.time() < t and not self.eof and not cond():
            self.read(0.3)
        return cond()

    def handshake(self):
        """Waits for the server's SETTINGS and acknowledges them."""
        r = self.until(lambda: any(f[0] == SETTINGS and not f[1] & ACK for f in self.frames), 5)
        self.send(settings(ack=True))
        return r

    def goaway(self):
        """Error code of the server's GOAWAY, or None."""
        for t, fl, sid, p in self.frames:
            if t == GOAWAY and len(p) >= 8:
                return int.from_bytes(p[4:8], "big")
        return None

    def closed(self, limit=10):
        """True once the server closed the connection (EOF or reset) within limit."""
        return self.until(lambda: self.eof, limit)

    def resets(self):
        return {sid: int.from_bytes(p[:4], "big") for t, fl, sid, p in self.frames if t == RST_STREAM}

    def status(self, sid):
        """:status of the first HEADERS on sid (the server's HPACK: static table
        or a literal, enough for the statuses we look for), or None."""
        for t, fl, s, p in self.frames:
            if t == HEADERS and s == sid:
                statics = {0x88: 200, 0x89: 204, 0x8a: 206, 0x8b: 304, 0x8c: 400, 0x8d: 404, 0x8e: 500}
                if p and p[0] in statics:
                    return statics[p[0]]
                for code in (b"431", b"413", b"408", b"400", b"200", b"503"):
                    if code in p[:16]:
                        return int(code)
                return "?"
        return None

    def close(self):
        self.s.close()


def abuse(port):
    """NSV_M_H2_ABUSE as /metrics shows it, or None without that metric."""
    return metrics(port).get("nanosrv_http2_abuse_total")


def counted(port, before, name):
    """The defence's close was counted in NSV_M_H2_ABUSE (skipped without the metric)."""
    now = abuse(port)
    if before is None or now is None:
        return ok(True, "# SKIP %s: /metrics has no nanosrv_http2_abuse_total" % name)
    return ok(now - before >= 1, "%s: counted in NSV_M_H2_ABUSE (%+d)" % (name, now - before))


def healthy(port, name):
    """A fresh, well-behaved h2c client is still served."""
    c = Raw(port)
    c.handshake()
    c.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, req_block()))
    got = c.until(lambda: c.status(1) is not None, 5)
    c.close()
    return ok(got and c.status(1) == 200, name + ": another client is served meanwhile", c.frames[:6])


def uploads(port, n, size, finish, limit=10):
    """n POST /echo streams on one connection (python3-h2 keeps the flow
    control), each declaring 1000000 body bytes and sending `size` of them,
    the rest too and END_STREAM if finish. Returns (sock, conn, resets
    {sid: code}, answers {sid: [status, body bytes, ended]})."""
    import h2.config
    import h2.connection
    import h2.events
    import h2.exceptions
    total = 1000000
    sk = socket.create_connection(("127.0.0.1", port))
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    sids = [1 + 2 * i for i in range(n)]
    for sid in sids:
        conn.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", "/echo"), (":authority", "x"),
                                ("content-length", str(total))])
    sk.sendall(conn.data_to_send())
    goal = total if finish else size
    sent = dict.fromkeys(sids, 0)
    resets, answers = {}, {}
    chunk = b"u" * 16384
    t_end = time.time() + limit
    while time.time() < t_end:
        for sid in sids:
            while sid not in resets and sent[sid] < goal:
                k = min(goal - sent[sid], conn.local_flow_control_window(sid), len(chunk))
                if k <= 0:
                    break
                try:
                    conn.send_data(sid, chunk[:k], end_stream=sent[sid] + k == total)
                except h2.exceptions.StreamClosedError:
                    resets.setdefault(sid, -1)
                    break
                sent[sid] += k
        out = conn.data_to_send()
        if out:
            sk.sendall(out)
        pending = [sid for sid in sids if sid not in resets and (sent[sid] < goal or (finish and
                   not answers.get(sid, [0, 0, False])[2]))]
        if not pending:
            break
        sk.settimeout(0.05)
        try:
            data = sk.recv(1 << 20)
        except socket.timeout:
            continue
        if not data:
            break
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.StreamReset):
                resets[ev.stream_id] = ev.error_code
            elif isinstance(ev, h2.events.ResponseReceived):
                answers[ev.stream_id] = [int(dict(ev.headers)[":status"]), 0, False]
            elif isinstance(ev, h2.events.DataReceived):
                answers.setdefault(ev.stream_id, [0, 0, False])[1] += len(ev.data)
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                answers.setdefault(ev.stream_id, [0, 0, False])[2] = True
        out = conn.data_to_send()
        if out:
            sk.sendall(out)
    return sk, conn, resets, answers


argv = [ECHO, "--port", "0", "--static", D, "--idle-timeout-ms", "2000", "--request-timeout-ms", "3000"]
if os.environ.get("NSV_THREADS"):
    argv += ["--threads", os.environ["NSV_THREADS"]]
# Sanitizer builds keep freed memory in quarantine: turn it off so RSS
# reflects what the server holds.
with Server(argv, env={"ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=0"}) as srv:
    port = srv.port
    pid = srv.proc.pid
    healthy(port, "baseline")
    rss0 = rss_kib(pid)

    # ---- more streams than SETTINGS_MAX_CONCURRENT_STREAMS (100) ----
    c = Raw(port)
    ok(c.handshake(), "server SETTINGS received")
    sv = {}
    for t, fl, sid, p in c.frames:
        if t == SETTINGS and not fl & ACK:
            for i in range(0, len(p) - 5, 6):
                k, v = struct.unpack(">HI", p[i:i + 6])
                sv[k] = v
    eq(sv.get(3), 100, "SETTINGS_MAX_CONCURRENT_STREAMS is 100")
    c.until(lambda: any(f[0] == SETTINGS and f[1] & ACK for f in c.frames), 3)
    # each stream waits for a 10-byte body that never comes, so all stay open
    body_wait = lit("content-length", "10")
    burst = b"".join(frame(HEADERS, END_HEADERS, 2 * i + 1, req_block("POST", "/echo", body_wait))
                     for i in range(120))
    c.send(burst)
    extra = set(range(201, 241, 2))
    c.until(lambda: extra <= set(c.resets()) or c.goaway() is not None, 5)
    rs = c.resets()
    refused = [s for s in extra if rs.get(s) in (REFUSED_STREAM, PROTOCOL_ERROR)]
    ok(len(refused) == 20 or c.goaway() in (PROTOCOL_ERROR, REFUSED_STREAM),
       "the 20 streams past 100 get RST_STREAM REFUSED_STREAM (or PROTOCOL_ERROR)", (sorted(rs.items())[:30], c.goaway()))
    eq([s for s in rs if s < 201], [], "none of the first 100 is reset")
    if c.goaway() is None and not c.eof:
        c.send(frame(DATA, END_STREAM, 1, b"0123456789"))
        ok(c.until(lambda: c.status(1) is not None, 5) and c.status(1) == 200,
           "an admitted stream still completes", c.frames[-5:])
    c.close()
    healthy(port, "max streams")

    # ---- rapid reset: HEADERS + RST_STREAM, over and over ----
    a0 = abuse(port)
    c = Raw(port)
    c.handshake()
    sid, sent = 1, 0
    t_end = time.time() + 5
    while sent < 20000 and time.time() < t_end and c.goaway() is None and not c.eof:
        batch = b""
        for _ in range(100):
            batch += frame(HEADERS, END_HEADERS, sid, req_block("POST", "/echo", body_wait))
            batch += frame(RST_STREAM, 0, sid, struct.pack(">I", CANCEL))
            sid += 2
        sent += 100
        if not c.send(batch):
            break
        c.read(0.05)
    c.until(lambda: c.goaway() is not None or c.eof, 5)
    eq(c.goaway(), ENHANCE_YOUR_CALM, "rapid reset: GOAWAY ENHANCE_YOUR_CALM")
    ok(sent <= 2000, "it came within the first 2000 resets (limit 200), after %d" % sent)
    ok(c.closed(5), "rapid reset: connection closed")
    c.close()
    counted(port, a0, "rapid reset")
    healthy(port, "rapid reset")

    # ---- CONTINUATION flood: a header block that never ends ----
    for name, piece in (("small fields", lit("x-c", "v" * 20)), ("empty frames", b"")):
        a0 = abuse(port)
        c = Raw(port)
        c.handshake()
        c.send(frame(HEADERS, 0, 1, req_block()))
        n = 0
        t_end = time.time() + 5
        while n < 100000 and time.time() < t_end and not c.eof and c.goaway() is None:
            if not c.send(b"".join(frame(CONTINUATION, 0, 1, piece) for _ in range(200))):
                break
            n += 200
            c.read(0.02)
        c.until(lambda: c.goaway() is not None or c.eof, 5)
        ok(c.goaway() is not None and c.closed(5), "CONTINUATION flood (%s): GOAWAY and close" % name,
           "goaway %r eof %r after %d frames" % (c.goaway(), c.eof, n))
        ok(n <= 2000, "CONTINUATION flood (%s) stopped early (%d frames sent)" % (name, n))
        c.close()
        counted(port, a0, "CONTINUATION flood (%s)" % name)
    healthy(port, "CONTINUATION flood")

    # ---- HPACK bomb: one 4000-byte field in the dynamic table, referenced 3000 times ----
    rss_before = rss_kib(pid)
    conns = []
    for k in range(10):
        c = Raw(port)
        c.handshake()
        bomb = lit("x-bomb", "b" * 4000, index=True) + b"\xbe" * 3000  # 0xbe: dynamic entry 62
        c.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, req_block(extra=bomb)))
        conns.append(c)
    verdicts = []
    for c in conns:
        c.until(lambda: c.status(1) is not None or 1 in c.resets() or c.goaway() is not None or c.eof, 5)
        verdicts.append((c.status(1), c.resets().get(1), c.goaway(), c.eof))
    good = [v for v in verdicts if v[0] == 431 or v[1] is not None or v[2] is not None]
    eq(len(good), 10, "HPACK bomb (12 MB decoded): 431, RST_STREAM or GOAWAY on each of 10 connections")
    ok(not [v for v in verdicts if v[0] == 200], "never answered as a normal request", verdicts)
    grown = rss_kib(pid) - rss_before
    ok(grown < 32 * 1024, "HPACK bomb: server RSS grew %d KiB (< 32 MiB for 120 MB of decoded fields)" % grown)
    for c in conns:
        c.close()
    healthy(port, "HPACK bomb")

    # ---- PING and SETTINGS floods from a client that reads nothing ----
    for name, unit in (("PING", frame(PING, 0, 0, b"12345678")), ("SETTINGS", settings())):
        rss_before = rss_kib(pid)
        a0 = abuse(port)
        c = Raw(port, rcvbuf=4096)
        c.s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
        c.handshake()
        c.s.settimeout(2)
        sent = 0
        t_end = time.time() + 6
        batch = unit * 1000
        while sent < 2000000 and time.time() < t_end:
            if not c.send(batch):
                break
            sent += 1000
        t_close = time.time()
        # only now read: the acks that were queued, then the GOAWAY and the close
        closed = c.until(lambda: c.eof, 4)
        acks = sum(1 for f in c.frames if f[0] in (PING, SETTINGS) and f[1] & ACK)
        # The server may stop reading (the client's sends then block) or close;
        # what it must not do is go on taking the flood once it has decided.
        ok(sent < 2000000, "%s flood: the server stops taking it (%d frames, %d MB, went in within %.1f s)"
           % (name, sent, sent * len(unit) >> 20, t_close - (t_end - 6)))
        ok(closed, "%s flood: connection closed once we read (%d acks read before it)" % (name, acks))
        ok(c.goaway() in (ENHANCE_YOUR_CALM, None), "%s flood: GOAWAY ENHANCE_YOUR_CALM or none" % name,
           c.goaway())
        grown = rss_kib(pid) - rss_before
        ok(grown < 32 * 1024, "%s flood: server RSS grew %d KiB (< 32 MiB)" % (name, grown))
        c.close()
        counted(port, a0, "%s flood" % name)
    a0 = abuse(port)
    c = Raw(port)
    c.handshake()
    c.send(settings(*[(0x4000 + i, i) for i in range(100)]))  # 100 entries in one frame (unknown ids)
    c.until(lambda: c.goaway() is not None or c.eof, 5)
    ok(c.goaway() == ENHANCE_YOUR_CALM and c.closed(5), "SETTINGS frame with 100 entries: GOAWAY ENHANCE_YOUR_CALM",
       (c.goaway(), c.eof))
    c.close()
    counted(port, a0, "SETTINGS frame with 100 entries")
    healthy(port, "control floods")

    # ---- zero window: the client asks for 256 MiB and opens no window ----
    rss_before = rss_kib(pid)
    stalls = []
    for path in ("/static/huge.bin", "/sse?n=10000000"):
        c = Raw(port, window=0)
        c.handshake()
        c.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, req_block("GET", path)))
        c.until(lambda: c.status(1) is not None, 5)
        stalls.append((path, c))
        eq(c.status(1), 200, "zero window, %s: the response head is sent (HEADERS are not flow-controlled)" % path)
    time.sleep(1.0)
    grown = rss_kib(pid) - rss_before
    ok(grown < 32 * 1024, "zero window: server RSS grew %d KiB while two big replies wait (< 32 MiB)" % grown)
    queued = metrics(port).get("nanosrv_output_queued_bytes")
    ok(queued is not None and queued < 16 << 20,
       "zero window: output queued for them stays bounded (%r bytes < 16 MiB)" % queued)
    for path, c in stalls:
        data = sum(len(f[3]) for f in c.frames if f[0] == DATA)
        eq(data, 0, "zero window, %s: no DATA sent" % path)
        t0 = time.time()
        ended = c.until(lambda: c.eof or c.goaway() is not None or 1 in c.resets(), 6)
        ok(ended, "zero window, %s: ended by the idle timeout (%.1f s more)" % (path, time.time() - t0),
           c.frames[-3:])
        c.close()
    healthy(port, "zero window")

    # ---- a reader that stops: windows wide open, the socket never read ----
    rss_before = rss_kib(pid)
    c = Raw(port, rcvbuf=4096, window=0x7FFFFFFF)
    c.handshake()
    c.send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 0x7FFFFFFF - 65535)))
    c.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, req_block("GET", "/static/huge.bin")) +
           frame(HEADERS, END_HEADERS | END_STREAM, 3, req_block("GET", "/sse?n=10000000")))
    time.sleep(2.0)
    grown = rss_kib(pid) - rss_before
    queued = metrics(port).get("nanosrv_output_queued_bytes")
    ok(grown < 32 * 1024, "stalled reader, 256 MiB file and 10M events asked: server RSS grew %d KiB (< 32 MiB)" % grown)
    ok(queued is not None and queued < 16 << 20, "stalled reader: output queued stays bounded (%r bytes)" % queued)
    healthy(port, "stalled reader")
    c.close()

    # ---- slowloris over h2 (idle timeout 2 s, request timeout 3 s) ----
    c = Raw(port)
    c.handshake()
    t0 = time.time()
    c.send(frame(HEADERS, 0, 1, req_block()))  # a header block that never ends
    ok(c.closed(8), "header block never ended: connection closed by the timeouts (%.1f s)" % (time.time() - t0),
       (c.goaway(), c.eof))
    c.close()
    for name, unit in (("a body byte", lambda: frame(DATA, 0, 1, b"x")),
                       ("a PING", lambda: frame(PING, 0, 0, b"pingping"))):
        c = Raw(port)
        c.handshake()
        t0 = time.time()
        c.send(frame(HEADERS, END_HEADERS, 1, req_block("POST", "/echo", lit("content-length", "100"))))
        while time.time() - t0 < 8 and not c.eof and 1 not in c.resets() and c.status(1) is None:
            c.send(unit())
            c.read(0.3)
        ok(c.status(1) == 408 or 1 in c.resets() or c.eof,
           "100-byte body, %s every 0.3 s: 408, stream reset or close by the request timeout (%.1f s)"
           % (name, time.time() - t0), (c.status(1), c.resets(), c.eof))
        c.close()
    healthy(port, "slowloris over h2")

    # ---- request bodies buffered for the host (NSV_OPT_H2_BODY_BUFFER, 8 MiB) ----
    # 40 streams each send 900 KB of a 1 MB body that is not streamed and
    # never finish: without a bound the connection would hold 36 MB (100
    # streams x max_body at most), as many HTTP/1.1 connections would.
    rss_before = rss_kib(pid)
    sk, conn, resets, answers = uploads(port, 40, 900000, False, limit=6)
    time.sleep(0.3)
    grown = rss_kib(pid) - rss_before
    refused = sorted(sid for sid, code in resets.items() if code == REFUSED_STREAM)
    ok(grown < 20 * 1024, "40 unfinished 900 KB bodies on one connection: server RSS grew %d KiB (< 20 MiB)" % grown)
    ok(len(refused) >= 20 and len(resets) == len(refused),
       "the newest streams past the buffer are refused with REFUSED_STREAM (%d refused, resets %r)"
       % (len(refused), sorted(set(resets.values()))))
    ok(1 not in resets, "the oldest stream is never refused")
    sk.close()
    healthy(port, "body buffer")
    # A client within the budget is served as before: 6 bodies of 1 MB
    # (under the 8 MiB budget) all answered in full.
    sk, conn, resets, answers = uploads(port, 6, 0, True, limit=10)
    good = [sid for sid in range(1, 12, 2) if answers.get(sid) == [200, 1000000, True]]
    eq((len(good), resets), (6, {}), "6 concurrent 1 MB uploads under the budget: all echoed in full, none refused")
    sk.close()

    # ---- bad prefaces ----
    c = Raw(port, preface=False)
    c.send(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n" + settings())
    gone = c.closed(5)
    first = c.buf[:12] if c.buf else b"".join(f[3] for f in c.frames)[:12]
    ok(gone and (c.goaway() == PROTOCOL_ERROR or c.buf.startswith(b"HTTP/1.1 4") or c.buf.startswith(b"HTTP/1.1 5")),
       "broken preface: GOAWAY PROTOCOL_ERROR (or an HTTP/1.1 error) and close", (c.goaway(), first, c.eof))
    c.close()
    c = Raw(port, preface=False)
    c.send(PREFACE + frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1000)))
    c.until(lambda: c.goaway() is not None or c.eof, 5)
    ok(c.goaway() == PROTOCOL_ERROR and c.closed(5), "preface not followed by SETTINGS: GOAWAY PROTOCOL_ERROR",
       (c.goaway(), c.eof))
    c.close()
    c = Raw(port)
    c.handshake()
    c.send(frame(SETTINGS, 0, 1, b""))
    c.until(lambda: c.goaway() is not None or c.eof, 5)
    ok(c.goaway() == PROTOCOL_ERROR and c.closed(5), "SETTINGS on a stream: GOAWAY PROTOCOL_ERROR", (c.goaway(), c.eof))
    c.close()
    c = Raw(port)
    c.handshake()
    c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + os.urandom(2000))
    c.until(lambda: c.goaway() is not None or c.eof, 5)
    ok(c.goaway() in (PROTOCOL_ERROR, FRAME_SIZE_ERROR) and c.closed(5),
       "garbage after the preface: GOAWAY PROTOCOL_ERROR or FRAME_SIZE_ERROR and close", (c.goaway(), c.eof))
    c.close()
    healthy(port, "bad prefaces")

    grown = rss_kib(pid) - rss0
    ok(grown < 64 * 1024, "server RSS after every attack: +%d KiB (< 64 MiB)" % grown)
    ok(srv.alive(), "server alive after every attack")

shutil.rmtree(D, ignore_errors=True)
done()
