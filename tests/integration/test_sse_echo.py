#!/usr/bin/env python3
"""echo-server GET /sse?n=N: N server-sent events with data "0" .. "N-1",
then the end of the reply. Real clients: curl -N, and Python reading the
stream through http.client (events parsed as EventSource does). N=0, a
malformed or missing n (400), N over the cap (400), 100000 events to a
reader that takes small pieces through a small receive buffer (none lost,
in order, the server's memory bounded by the output cap), and clients
leaving mid-stream (the server stays healthy). Single loop and two workers.
Every loop is bounded in count and time."""
import http.client
import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, echo_server  # noqa


def parse_events(text):
    """data of each dispatched event (WHATWG: blank line dispatches)."""
    out, data = [], []
    for line in text.split("\n"):
        if line == "":
            if data:
                out.append("\n".join(data))
            data = []
        elif line.startswith("data:"):
            v = line[5:]
            data.append(v[1:] if v.startswith(" ") else v)
    return out


def vm(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r, body


def slow_reader(port, n):
    """Reads the stream 512 bytes at a time through a 4 KiB receive buffer."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(30)
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET /sse?n=%d HTTP/1.1\r\nHost: x\r\n\r\n" % n)
    raw = b""
    for _ in range(200000):
        piece = s.recv(512)
        if not piece:
            break
        raw += piece
        if raw.endswith(b"\r\n0\r\n\r\n"):
            break
    s.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    text, i = b"", 0
    for _ in range(1000000):  # de-chunk
        j = body.index(b"\r\n", i)
        size = int(body[i:j], 16)
        if size == 0:
            break
        text += body[j + 2:j + 2 + size]
        i = j + 2 + size + 2
    return head, text.decode()


def leave_mid_stream(port, n):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /sse?n=%d HTTP/1.1\r\nHost: x\r\n\r\n" % n)
    got = s.recv(4096)
    s.close()
    return got


def run(label, threads):
    with echo_server(threads=threads) as srv:
        port = srv.port
        p = subprocess.run(["curl", "-sS", "-N", "-D", "-", f"http://127.0.0.1:{port}/sse?n=5"],
                           capture_output=True, timeout=30)
        head, _, body = p.stdout.partition(b"\r\n\r\n")
        ok(p.returncode == 0 and b"content-type: text/event-stream" in head.lower(),
           f"{label}: curl -N: text/event-stream", p.stderr)
        eq(parse_events(body.decode()), [str(i) for i in range(5)], f"{label}: curl -N: events 0..4")
        r, body = get(port, "/sse?n=0")
        eq((r.status, r.getheader("Content-Type"), body), (200, "text/event-stream", b""),
           f"{label}: n=0: an empty stream that ends")
        r, body = get(port, "/sse?n=1000")
        eq(parse_events(body.decode()), [str(i) for i in range(1000)], f"{label}: http.client: 1000 events")
        for q in ("", "?n=", "?n=abc", "?n=-1", "?n=1e3", "?m=3", "?n=10000001", "?n=99999999999999999999"):
            r, body = get(port, "/sse" + q)
            eq(r.status, 400, f"{label}: /sse{q}: 400")
        r, body = get(port, "/sse?x=1&n=3")
        eq(parse_events(body.decode()), ["0", "1", "2"], f"{label}: n among other parameters")
        hwm0 = vm(srv.proc.pid, "VmHWM")
        head, text = slow_reader(port, 100000)
        ev = parse_events(text)
        eq(len(ev), 100000, f"{label}: slow reader: 100000 events")
        ok(ev == [str(i) for i in range(100000)], f"{label}: slow reader: none lost, in order")
        grew = vm(srv.proc.pid, "VmHWM") - hwm0
        # the stream is about 1.4 MB; pacing keeps at most the 4 MiB output cap queued
        ok(grew < 32 * 1024, f"{label}: slow reader: peak RSS grew {grew} KiB (< 32 MiB)")
        got = leave_mid_stream(port, 10000000)
        ok(got.startswith(b"HTTP/1.1 200"), f"{label}: a client leaves a ten-million-event stream")
        for _ in range(5):
            leave_mid_stream(port, 1000000)
        r, body = get(port, "/sse?n=3")
        eq(parse_events(body.decode()), ["0", "1", "2"], f"{label}: healthy after clients left mid-stream")
        r, body = get(port, "/hello")
        eq(r.status, 200, f"{label}: other routes still answer")
        ok(srv.alive(), f"{label}: server alive")
        eq(srv.stop(), 0, f"{label}: drains and exits 0")


run("single loop", None)
run("two workers", 2)
done()
