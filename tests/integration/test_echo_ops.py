#!/usr/bin/env python3
"""echo-server's operations flags: GET /metrics (Prometheus text), /healthz,
/readyz during a drain, --access-log in each format from curl requests
(pull and callback mode), --allow / --deny with 127.0.0.2 vs 127.0.0.1,
--proxy-protocol (a raw v1 and v2 header, curl --haproxy-protocol, a
connection without a header), the JSON's peer fields, --reuseport,
--listen-fd, systemd socket activation and --help."""
import json
import os
import queue
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, Server, BUILD, connect, read_response, request  # noqa

ECHO = os.path.join(BUILD, "echo-server")


class Echo(Server):
    """echo-server --port 0 ARGS; stdout lines after "listening on" queued."""

    def __init__(self, *args):
        Server.__init__(self, [ECHO, "--port", "0"] + list(args))
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in iter(self.proc.stdout.readline, b""):
            self.lines.put(line.decode("utf-8", "replace").rstrip("\n"))

    def take(self, n, seconds=5):
        out, deadline = [], time.monotonic() + seconds
        while len(out) < n and time.monotonic() < deadline:
            try:
                out.append(self.lines.get(timeout=max(0.01, deadline - time.monotonic())))
            except queue.Empty:
                break
        return out


def curl(*args, timeout=10):
    p = subprocess.run(["curl", "-sS", "--max-time", "5"] + list(args), capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def get(port, path, extra=b""):
    return request(port, b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n" + extra + b"\r\n")


# ---- /metrics, /healthz, /readyz, peer --------------------------------------
s = Echo("--drain-ms", "3000")
st, h, body = get(s.port, b"/metrics")
eq((st, h.get("content-type")), (200, "text/plain; version=0.0.4"), "GET /metrics: 200 Prometheus text 0.0.4")
text = body.decode()
sample = re.compile(r'^nanosrv_[a-z0-9_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? [0-9.e+-]+$|^[+-]Inf$')
comment = re.compile(r"^# (HELP nanosrv_[a-z0-9_]+ .+|TYPE nanosrv_[a-z0-9_]+ (counter|gauge|histogram))$")
bad = [l for l in text.splitlines() if not (sample.match(l) or comment.match(l) or
                                            re.match(r'^nanosrv_\w+\{le="\+Inf"\} \d+$', l))]
ok(text.endswith("\n") and not bad and "# TYPE" in text, "every /metrics line is a sample or a HELP/TYPE comment",
   bad[:5] or text[:300])
ok(re.search(r'_bucket\{le="\+Inf"\} \d+', text), "/metrics has a latency histogram", text[:300])


def accepted(t):
    """The connections-accepted counter of a /metrics text."""
    m = re.search(r"^(nanosrv_\w*accepted\w*_total) (\d+)$", t, re.M)
    return int(m.group(2)) if m else None


a0 = accepted(text)
for _ in range(3):
    get(s.port, b"/x")
a1 = accepted(get(s.port, b"/metrics")[2].decode())
ok(a0 is not None and a1 is not None and a1 - a0 == 4, "/metrics: accepted connections counted (3 + this one)",
   (a0, a1))
eq(get(s.port, b"/healthz")[::2], (200, b"ok"), "GET /healthz: 200 ok")
eq(get(s.port, b"/readyz")[::2], (200, b"ready"), "GET /readyz: 200 ready")

c = connect(s.port)
c.sendall(b"GET /p?q=1 HTTP/1.1\r\nHost: x\r\n\r\n")
st, h, body = read_response(c)
j = json.loads(body)
eq((j["path"], j["peer"], j["peer_port"]), ("/p", "127.0.0.1", c.getsockname()[1]),
   "JSON echo: peer and peer_port are the client's")
ok("front" not in j, "no front without a PROXY header", j)

# /readyz during a drain: a keep-alive connection inside a request when
# SIGTERM comes is kept, and its /readyz says 503 draining.
c.sendall(b"GET /readyz HTTP/1.1\r\n")  # the head is not complete yet
time.sleep(0.1)
s.proc.send_signal(signal.SIGTERM)
deadline, refused = time.monotonic() + 3, False
while time.monotonic() < deadline and not refused:
    try:
        socket.create_connection(("127.0.0.1", s.port), timeout=1).close()
        time.sleep(0.02)
    except OSError:
        refused = True
ok(refused, "SIGTERM: the listener is closed")
c.sendall(b"Host: x\r\n\r\n")
st, h, body = read_response(c)
eq((st, body, h.get("connection")), (503, b"draining", "close"), "GET /readyz while draining: 503 draining, close")
eq(s.stop(timeout=10), 0, "drained, exit status 0")

# ---- access log ---------------------------------------------------------------
UA, REF = 'agent/1.0 "q"', "http://ref.example/p"
W = "%{size_header} %{size_download} %{size_request} %{size_upload}"


def sizes(out):
    return [int(x) for x in out.split()[-4:]]


for fmt in ("common", "combined", "json"):
    s = Echo("--access-log", fmt)
    rc, out, err = curl("-A", UA, "-e", REF, "-o", "/dev/null", "-w", W, "http://127.0.0.1:%d/a?b=1" % s.port)
    # a POST from a raw socket: the exact bytes each way are known
    raw = (b"POST /echo HTTP/1.1\r\nHost: x\r\nUser-Agent: " + UA.encode() +
           b"\r\nContent-Length: 10\r\nConnection: close\r\n\r\n0123456789")
    c = connect(s.port)
    c.sendall(raw)
    answer = b""
    while True:
        d = c.recv(65536)
        if not d:
            break
        answer += d
    c.close()
    rc2 = 0 if answer.endswith(b"\r\n\r\n0123456789") else 1
    lines = s.take(2)
    ok(rc == 0 and rc2 == 0 and len(lines) == 2, "--access-log %s: one line per request" % fmt, (err, lines))
    if len(lines) == 2 and rc == 0 and rc2 == 0:
        hdr, dl, req, up = sizes(out)
        if fmt == "json":
            try:
                r1, r2 = json.loads(lines[0]), json.loads(lines[1])
            except ValueError:
                r1 = r2 = {}
            ok(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", r1.get("time", "")), "json: time ISO 8601 UTC, ms",
               lines[0])
            eq({k: r1.get(k) for k in ("peer", "method", "target", "status", "user_agent", "referer")},
               {"peer": "127.0.0.1", "method": "GET", "target": "/a?b=1", "status": 200, "user_agent": UA,
                "referer": REF}, "json: request fields (the quote in the agent escaped)")
            eq((r1.get("bytes_out"), r1.get("bytes_in")), (hdr + dl, req + up), "json: bytes_out and bytes_in as curl counted")
            ok(isinstance(r1.get("port"), int) and r1["port"] > 0 and isinstance(r1.get("duration_ms"), float),
               "json: port and duration_ms", lines[0])
            eq((r2.get("method"), r2.get("target"), r2.get("bytes_in"), r2.get("bytes_out"), r2.get("referer")),
               ("POST", "/echo", len(raw), len(answer), ""), "json: a POST, bytes_in and bytes_out exact")
        else:
            want = (r'^127\.0\.0\.1 - - \[\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\] '
                    r'"GET /a\?b=1 HTTP/1\.1" 200 %d' % (hdr + dl))
            if fmt == "combined":
                want += r' "%s" "agent/1\.0 \\x22q\\x22"' % re.escape(REF)
            ok(re.match(want + "$", lines[0]), "%s: the line of a GET (bytes_out = head + body)" % fmt,
               "%s\n%s" % (lines[0], want))
            want2 = r'^127\.0\.0\.1 - - \[[^]]+\] "POST /echo HTTP/1\.1" 200 %d' % len(answer)
            if fmt == "combined":
                want2 += r' "-" "agent/1\.0 \\x22q\\x22"'
            ok(re.match(want2 + "$", lines[1]), "%s: the line of a POST" % fmt, lines[1])
    # escaping: obs-text bytes (valid UTF-8 and not), a tab, a quote
    st, _, _ = request(s.port, b"GET /e%22x HTTP/1.0\r\nUser-Agent: \xc3\xa9\xff\t\"z\r\n\r\n")
    line = s.take(1)
    if fmt == "json":
        r3 = json.loads(line[0]) if line else {}
        eq((st, r3.get("user_agent"), r3.get("target")), (200, "\u00e9\u00ff\t\"z", "/e%22x"),
           "json: UTF-8 kept, a stray byte as \\u00ff, tab and quote escaped")
    else:
        want = r'"GET /e%22x HTTP/1\.0" 200 \d+' + (r' "-" "\\xC3\\xA9\\xFF\\x09\\x22z"' if fmt == "combined" else "")
        ok(st == 200 and line and re.search(want + "$", line[0]),
           "%s: HTTP/1.0, bytes outside 0x20..0x7e and quotes as \\xHH" % fmt, line)
    eq(s.stop(), 0, "--access-log %s: exit status 0" % fmt)

# callback mode (worker threads): the lines come from a timer
s = Echo("--access-log", "common", "--threads", "2")
rcs = [curl("-o", "/dev/null", "http://127.0.0.1:%d/t%d" % (s.port, i))[0] for i in range(3)]
lines = s.take(3)
eq((rcs, sorted(re.sub(r".*\"GET (/t\d) .*", r"\1", l) for l in lines)), ([0] * 3, ["/t0", "/t1", "/t2"]),
   "--access-log with --threads 2 (callback mode): every request logged")
eq(s.stop(), 0, "callback mode: exit status 0")

# ---- address lists --------------------------------------------------------------
for flag, val in (("--allow", "127.0.0.1"), ("--deny", "127.0.0.2/32, 10.0.0.0/8")):
    s = Echo(flag, val, "--access-log", "common")
    url = "http://127.0.0.1:%d/acl" % s.port
    rc_in, out_in, _ = curl(url)
    rc_out, out_out, err_out = curl("--interface", "127.0.0.2", url)
    ok(rc_in == 0 and json.loads(out_in)["peer"] == "127.0.0.1", "%s %s: 127.0.0.1 served" % (flag, val), out_in)
    ok(rc_out in (52, 56) and out_out == "", "%s %s: 127.0.0.2 closed without an answer (curl %d)" %
       (flag, val, rc_out), err_out)
    lines = s.take(2, seconds=1)
    eq(len(lines), 1, "%s: only the served request is in the access log" % flag)
    eq(s.stop(), 0, "%s: exit status 0" % flag)
p = subprocess.run([ECHO, "--port", "0", "--allow", "10.0.0.1/8"], capture_output=True, timeout=10)
ok(p.returncode == 2 and b"10.0.0.1/8" in p.stderr, "a bad --allow list: exit 2, the library's detail", p.stderr)

# ---- PROXY protocol -------------------------------------------------------------
s = Echo("--proxy-protocol", "--access-log", "json")
st, h, body = request(s.port, b"PROXY TCP4 203.0.113.7 127.0.0.1 51234 8080\r\nGET /v1 HTTP/1.1\r\nHost: x\r\n\r\n")
j = json.loads(body) if st == 200 else {}
eq((j.get("peer"), j.get("peer_port"), j.get("front")), ("203.0.113.7", 51234, "127.0.0.1"),
   "PROXY v1 header: peer from the header, front is the connecting address")
v2 = (b"\r\n\r\n\x00\r\nQUIT\n" + b"\x21\x11" + struct.pack(">H", 12) + socket.inet_aton("198.51.100.9") +
      socket.inet_aton("127.0.0.1") + struct.pack(">HH", 40000, 80))
st, h, body = request(s.port, v2 + b"GET /v2 HTTP/1.1\r\nHost: x\r\n\r\n")
j = json.loads(body) if st == 200 else {}
eq((j.get("peer"), j.get("peer_port"), j.get("front")), ("198.51.100.9", 40000, "127.0.0.1"), "PROXY v2 header")
rc, out, err = curl("--haproxy-protocol", "http://127.0.0.1:%d/curl" % s.port)
j = json.loads(out) if rc == 0 else {}
eq((j.get("path"), j.get("peer"), j.get("front")), ("/curl", "127.0.0.1", "127.0.0.1"),
   "curl --haproxy-protocol: served, flagged as proxied")
c = connect(s.port)
c.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
got = b""
try:
    c.settimeout(3)
    while True:
        d = c.recv(4096)
        if not d:
            break
        got += d
except (ConnectionResetError, socket.timeout) as e:
    got = got if isinstance(e, ConnectionResetError) else b"(no close)"
eq(got, b"", "no PROXY header: closed without an answer")
c.close()
lines = s.take(3)
eq([json.loads(l)["peer"] for l in lines], ["203.0.113.7", "198.51.100.9", "127.0.0.1"],
   "access log: the client addresses of the headers")
eq(s.stop(), 0, "--proxy-protocol: exit status 0")
s = Echo("--proxy-protocol", "--proxy-from", "127.0.0.2")
rc, out, err = curl("--haproxy-protocol", "http://127.0.0.1:%d/" % s.port)
ok(rc in (52, 55, 56) and out == "", "--proxy-from 127.0.0.2: a front at 127.0.0.1 is refused (curl %d)" % rc, err)
rc, out, err = curl("--haproxy-protocol", "--interface", "127.0.0.2", "http://127.0.0.1:%d/" % s.port)
ok(rc == 0 and json.loads(out).get("front") == "127.0.0.2", "--proxy-from 127.0.0.2: that front is served", out or err)
eq(s.stop(), 0, "--proxy-from: exit status 0")

# ---- sockets: --reuseport, --listen-fd, systemd activation ---------------------
a = Echo("--reuseport")
try:
    b = Server([ECHO, "--port", str(a.port), "--reuseport"])
    ok(True, "--reuseport: a second process binds the same port")
    eq(b.stop(), 0, "second --reuseport process: exit status 0")
except RuntimeError as e:
    ok(False, "--reuseport: a second process binds the same port", e)
eq(a.stop(), 0, "--reuseport: exit status 0")


def start_with(cmd, fd):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(fd,))
    r, _, _ = select.select([p.stdout], [], [], 10)
    return p, (p.stdout.readline().decode().strip() if r else "")


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        return p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        return p.wait()


for how in ("--listen-fd", "LISTEN_FDS"):
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    port, fd = ls.getsockname()[1], ls.fileno()
    if how == "--listen-fd":
        cmd = [ECHO, "--listen-fd", str(fd)]
    else:
        cmd = ["sh", "-c", "exec 3<&%d %d<&-; export LISTEN_PID=$$ LISTEN_FDS=1; exec %s" % (fd, fd, ECHO)]
    p, line = start_with(cmd, fd)
    ls.close()
    eq(line, "listening on %d" % port, "%s: listening on the passed socket's port" % how)
    st, h, body = get(port, b"/fd") if line else (None, {}, b"")
    eq((st, json.loads(body)["path"] if st == 200 else None), (200, "/fd"), "%s: served" % how)
    eq(stop(p), 0, "%s: exit status 0" % how)

p = subprocess.run([ECHO, "--help"], capture_output=True, timeout=10)
ok(p.returncode == 0 and b"--proxy-protocol" in p.stdout and b"--access-log" in p.stdout, "--help: usage, exit 0")
p = subprocess.run([ECHO, "--access-log", "xml"], capture_output=True, timeout=10)
eq(p.returncode, 2, "--access-log with an unknown format: exit 2")
done()
