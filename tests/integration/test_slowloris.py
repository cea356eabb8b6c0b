#!/usr/bin/env python3
"""Shedding and address lists under attack. echo-server --max-conns 200
while 300 slowloris connections hold request heads open (a partial head,
then one byte every 300 ms; closed ones come back after 250 ms): a normal
client's 20 sequential requests are all answered 200 (10 on fresh
connections, which need no retry; 10 on one keep-alive connection, which
may be the idle one closed for room, so each of those may be retried once,
and only when the server closed it before any byte of the answer).
/metrics then shows evictions, no refusal and at most 200 connections
open. Connections that never send a byte (plain, or on a --proxy-protocol
listener before the header) are closed for room the same way. Then
--allow 127.0.0.1: a client from 127.0.0.2 is closed at accept without a
byte and leaves no access-log line; 127.0.0.1 is served and logged; --deny
the same way."""
import os
import selectors
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, read_response  # noqa: E402
from lbtest import Echo, echo_supports, get, metric, silent_close  # noqa: E402

ATTACKERS = 300
MAX_CONNS = 200
BYTE_EVERY = 0.3
COMEBACK = 0.25
procs = []


def finish():
    for p in procs:
        p.stop(signal.SIGKILL, 5)
    done()


missing = echo_supports("--max-conns", "--allow", "--deny", "--access-log")
if missing:
    ok(False, "echo-server knows %s" % " ".join(missing))
    finish()


class Slowloris(threading.Thread):
    """ATTACKERS connections in one selector loop, each inside an unfinished
    request head, sending one more byte every BYTE_EVERY s; a connection the
    server closes is counted and replaced after COMEBACK s. Bounded: stops
    at stop() or after max_s, and opens at most max_opens connections."""

    def __init__(self, port, max_s=30, max_opens=5000):
        super().__init__(daemon=True)
        self.port, self.max_s, self.max_opens = port, max_s, max_opens
        self.halt = threading.Event()
        self.opens = self.closed_by_server = self.answered = 0
        self.full = threading.Event()  # ATTACKERS connections opened once

    def stop(self):
        self.halt.set()
        self.join(10)

    def run(self):
        sel = selectors.DefaultSelector()
        conns = {}  # socket -> time of its next byte
        comeback = []  # times at which a replacement may open
        end = time.time() + self.max_s

        def open_one():
            # connected and the partial head sent at once, as a slowloris
            # does; then one byte every BYTE_EVERY s
            s = socket.socket()
            s.settimeout(2)
            self.opens += 1
            try:
                s.connect(("127.0.0.1", self.port))
                s.sendall(b"GET /slow HTTP/1.1\r\nHost: t\r\nX-Slow: ")
            except OSError:
                s.close()
                self.closed_by_server += 1
                comeback.append(time.time() + COMEBACK)
                return
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
            conns[s] = time.time() + BYTE_EVERY

        def drop(s):
            sel.unregister(s)
            del conns[s]
            s.close()
            comeback.append(time.time() + COMEBACK)

        for _ in range(ATTACKERS):
            open_one()
        self.full.set()
        while not self.halt.is_set() and time.time() < end:
            now = time.time()
            for s, due in list(conns.items()):
                if due > now:
                    continue
                try:
                    s.send(b"a")
                    conns[s] = now + BYTE_EVERY
                except BlockingIOError:
                    pass
                except OSError:
                    self.closed_by_server += 1
                    drop(s)
            for key, _ in sel.select(0.02):
                s = key.fileobj
                try:
                    d = s.recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    d = b""
                if d:
                    self.answered += 1  # the server answered a head never finished: counted, not expected
                self.closed_by_server += 1
                drop(s)
            while comeback and comeback[0] <= now and self.opens < self.max_opens:
                comeback.pop(0)
                open_one()
        for s in list(conns):
            sel.unregister(s)
            s.close()


def fresh_get(port, path):
    """GET on a new connection, no retry: (status or None, error)."""
    try:
        st, _ = get(port, path)
        return st, None
    except OSError as e:
        return None, repr(e)


class KeepAlive:
    """One keep-alive connection; a request on it is sent again, once, only
    if the server closed the connection before any byte of the answer."""

    def __init__(self, port):
        self.port, self.sock, self.retries = port, None, 0

    def request(self, path):
        for attempt in range(2):
            if self.sock is None:
                self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            try:
                self.sock.sendall(b"GET %s HTTP/1.1\r\nHost: t\r\n\r\n" % path.encode())
                r = read_response(self.sock)
            except (ConnectionResetError, BrokenPipeError):
                r = None
            except OSError as e:
                return None, repr(e)
            if r is not None and r[0] != "partial":
                return r[0], None
            self.sock.close()
            self.sock = None
            if r is not None:
                return None, "closed after part of an answer: %r" % (r[2][:100],)
            if attempt == 0:
                self.retries += 1
        return None, "closed before any byte, twice"


# ---- shedding ----
srv = Echo("--max-conns", MAX_CONNS)
procs.append(srv)
att = Slowloris(srv.port)
att.start()
att.full.wait(10)
t0 = time.time()
while time.time() - t0 < 10 and att.closed_by_server < ATTACKERS - MAX_CONNS:
    time.sleep(0.05)  # the server has filled up and begun closing attackers for room
ok(att.closed_by_server >= ATTACKERS - MAX_CONNS,
   "300 slowloris connections against --max-conns 200: the server closes the excess (%d closed)" % att.closed_by_server)
fresh, kept = [], []
ka = KeepAlive(srv.port)
for i in range(10):
    fresh.append(fresh_get(srv.port, "/fresh/%d" % i))
    kept.append(ka.request("/kept/%d" % i))
    time.sleep(0.1)  # the attackers keep coming back meanwhile
if ka.sock:
    ka.sock.close()
status, body = get(srv.port, "/metrics")
text = body.decode(errors="replace")
att.stop()
eq(fresh, [(200, None)] * 10, "under attack: 10 requests on fresh connections all answered 200, none retried")
eq(kept, [(200, None)] * 10, "under attack: 10 requests on a keep-alive connection answered 200 (%d retried after a "
   "close before any byte)" % ka.retries)
print("# keep-alive requests retried: %d of 10; attacker connections opened %d, closed by the server %d "
      "(%d of them after an answer)" % (ka.retries, att.opens, att.closed_by_server, att.answered))
eq(status, 200, "GET /metrics during the attack")
ev = metric(text, "nanosrv_connections_evicted_total", "nanosrv_conns_evicted_total")
ok(ev is not None and ev > 0, "/metrics: nanosrv_connections_evicted_total %s > 0" % ev, text[:1500])
refused = metric(text, "nanosrv_connections_refused_total", "nanosrv_conns_refused_total")
eq(refused, 0.0, "/metrics: no connection refused while a slowloris could be closed for room")
active = metric(text, "nanosrv_connections_active", "nanosrv_conns_active")
ok(active is not None and active <= MAX_CONNS, "/metrics: at most 200 connections open (%s)" % active)
ok(srv.alive(), "the server survived the attack")
eq(srv.stop(), 0, "and exits 0 on SIGTERM")

# ---- connections that never send a byte ----
# The simplest hold: connect and send nothing. Such a connection is inside
# its first request head from accept (its request deadline runs), so it is
# closed for room like a slowloris; so is one that has not sent the PROXY
# header a --proxy-protocol listener waits for.
SILENT = 50


def count_closed(socks, wait_s):
    """How many of socks the server has closed (EOF or reset) within wait_s."""
    sel = selectors.DefaultSelector()
    for q in socks:
        q.setblocking(False)
        sel.register(q, selectors.EVENT_READ)
    closed, deadline = set(), time.time() + wait_s
    while time.time() < deadline and len(closed) < len(socks):
        for key, _ in sel.select(max(0.0, deadline - time.time())):
            try:
                if key.fileobj.recv(4096):
                    continue  # an answer to nothing: not a close
            except BlockingIOError:
                continue
            except OSError:
                pass
            closed.add(key.fileobj)
            sel.unregister(key.fileobj)
    sel.close()
    return len(closed)

for args, prefix, name in (([], b"", "plain"),
                           (["--proxy-protocol"], b"PROXY TCP4 192.0.2.1 127.0.0.1 1000 80\r\n",
                            "--proxy-protocol, waiting for the header")):
    srv = Echo("--max-conns", SILENT, *args)
    procs.append(srv)
    quiet = [socket.create_connection(("127.0.0.1", srv.port), timeout=5) for _ in range(SILENT)]
    time.sleep(0.2)  # all accepted: the server is at max-conns
    answers = []
    # All three open at once: a client closed before the next connects would
    # free room itself (or be the idle one closed first).
    news = [socket.create_connection(("127.0.0.1", srv.port), timeout=5) for i in range(3)]
    for i, s in enumerate(news):
        s.sendall(prefix + b"GET /after-silent/%d HTTP/1.1\r\nHost: t\r\n\r\n" % i)
    for s in news:
        try:
            r = read_response(s)
        except OSError as e:
            r = (repr(e),)
        answers.append(r[0] if r else None)
        s.close()
    closed = count_closed(quiet, 1.0)
    for q in quiet:
        q.close()
    eq(answers, [200] * 3, "%s: %d connections that sent nothing, at --max-conns %d: 3 new requests answered 200"
       % (name, SILENT, SILENT))
    eq(closed, 3, "%s: 3 of the silent connections closed for room" % name)
    eq(srv.stop(), 0, "%s: exits 0 on SIGTERM" % name)


# ---- address lists ----
def from_addr(port, source):
    """A request from source: ('closed', bytes) when shut without an answer."""
    s = socket.socket()
    s.bind((source, 0))
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    try:
        s.sendall(b"GET /from/%s HTTP/1.1\r\nHost: t\r\n\r\n" % source.encode())
    except OSError:
        pass  # a reset already: also a refusal
    r = silent_close(s, 5)
    s.close()
    return r


for flag, cidrs in (("--allow", "127.0.0.1"), ("--deny", "127.0.0.2")):
    srv = Echo(flag, cidrs, "--access-log", "common")
    procs.append(srv)
    eq(from_addr(srv.port, "127.0.0.2"), ("closed", b""), "%s %s: a client from 127.0.0.2 is closed without a byte"
       % (flag, cidrs))
    st, _ = get(srv.port, "/from/127.0.0.1")
    eq(st, 200, "%s %s: 127.0.0.1 is served" % (flag, cidrs))
    st, body = get(srv.port, "/metrics")
    n = metric(body.decode(errors="replace"), "nanosrv_connections_denied_total", "nanosrv_conns_denied_total")
    eq(n, 1.0, "%s: nanosrv_connections_denied_total 1" % flag)
    logged = srv.wait_line(lambda l: "/metrics" in l, timeout=5, start=srv.first_log)
    log = srv.log()
    ok(logged is not None and any("/from/127.0.0.1" in l and l.startswith("127.0.0.1 ") for l in log),
       "%s: the access log has 127.0.0.1's request" % flag, log)
    ok(not any("127.0.0.2" in l for l in log), "%s: and nothing of 127.0.0.2" % flag, log)
    eq(srv.stop(), 0, "%s: exits 0 on SIGTERM" % flag)
finish()
