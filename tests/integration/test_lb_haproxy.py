#!/usr/bin/env python3
"""HAProxy (Debian's) in front of three echo-servers speaking the PROXY
protocol v2: the backends see the client's address from the header, and a
rolling restart under wrk load (each backend in turn: SIGTERM, it drains and
exits 0, a new process binds the same port with SO_REUSEPORT while the old
one drains) costs no request. HAProxy checks GET /readyz (503 once a backend
drains) every 200 ms and retries a request on a connection the backend
closes under it (retry-on conn-failure empty-response response-timeout, with
redispatch to another server)."""
import os
import re
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done  # noqa: E402
from lbtest import Echo, HAProxy, Proc, ask, echo_supports, free_port, have, who, wrk_argv, wrk_result  # noqa: E402

WRK_SECS = 8
tmp = tempfile.mkdtemp(prefix="nsv-lb-haproxy-")
procs = []


def cleanup():
    for p in procs:
        p.stop(signal.SIGKILL, 5)
    shutil.rmtree(tmp, ignore_errors=True)


def finish():
    cleanup()
    done()


if not have("haproxy") or not have("wrk"):
    ok(False, "haproxy and wrk installed (tools/install-deps.sh)")
    finish()
missing = echo_supports("--proxy-protocol", "--reuseport", "--drain-ms")
if missing:
    ok(False, "echo-server knows %s" % " ".join(missing))
    finish()

ports = []
while len(ports) < 4:
    p = free_port()
    if p not in ports:
        ports.append(p)
front, backs = ports[0], ports[1:]
ARGS = ["--proxy-protocol", "--reuseport", "--drain-ms", "3000"]

CFG = """global
    maxconn 512
    log stdout format raw local0 info
defaults
    mode http
    log global
    option httplog
    option dontlog-normal
    option dontlognull
    timeout connect 1s
    timeout client 10s
    timeout server 5s
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response response-timeout
frontend fe
    bind 127.0.0.1:%d
    default_backend be
backend be
    balance roundrobin
    option httpchk GET /readyz
%s
""" % (front, "\n".join("    server s%d 127.0.0.1:%d send-proxy-v2 check inter 200ms fall 1 rise 1" % (i + 1, p)
                        for i, p in enumerate(backs)))

try:
    backends = [Echo(*ARGS, port=p) for p in backs]
    procs += backends
    hap = HAProxy(CFG, tmp, front)
    procs.append(hap)
except RuntimeError as e:
    ok(False, "backends and haproxy start", str(e))
    finish()


def wait_all_up(timeout=5):
    """Every server UP in HAProxy's view: each got one check answered 200
    since start (a server starts UP; a failed check would log DOWN)."""
    time.sleep(0.7)  # three check intervals: a failing server has logged DOWN by now
    deadline = time.time() + timeout
    while time.time() < deadline:
        up = {}
        for l in hap.state_lines():
            for i in range(len(backs)):
                if "be/s%d " % (i + 1) in l:
                    up[i] = " is UP" in l
        if all(up.values()):
            return True
        time.sleep(0.1)
    return False


def peers(source, n=6):
    """(peer, peer_port, front) of n requests through HAProxy, each on its own
    connection (round robin: every backend twice), and what they should be:
    the client's own address and port, HAProxy's 127.0.0.1 as the front."""
    got, want = [], []
    for _ in range(n):
        mine, answers = ask(front, source)
        got.append(who(answers[0]))
        want.append((source, mine, "127.0.0.1"))
    return got, want


ok(wait_all_up(), "HAProxy's checks (PROXY v2 LOCAL + GET /readyz) keep every backend UP", hap.state_lines())
eq(*peers("127.0.0.2"), name="client bound to 127.0.0.2: every backend reports its address and port (the header's), "
   "front 127.0.0.1")
eq(*peers("127.0.0.1", 3), name="client on 127.0.0.1: its own port")

# ---- rolling restart under load ----
wrk = Proc(wrk_argv("http://127.0.0.1:%d/" % front, tmp, threads=2, conns=32, secs=WRK_SECS))
procs.append(wrk)
time.sleep(1)
exits, restarted, up_again = [], [], []
for i, port in enumerate(backs):
    old = backends[i]
    old.send(signal.SIGTERM)
    try:
        new = Echo(*ARGS, port=port)  # binds next to the draining one (SO_REUSEPORT)
    except RuntimeError as e:
        ok(False, "backend s%d restarted on port %d" % (i + 1, port), str(e))
        break
    procs.append(new)
    backends[i] = new
    exits.append(old.wait(10))
    restarted.append(wrk.alive())
    up_again.append(wait_all_up())
rc = wrk.wait(WRK_SECS + 15)
if rc is None:
    wrk.stop(signal.SIGKILL)
res = wrk_result("\n".join(wrk.lines()))
eq(exits, [0, 0, 0], "every old backend drained and exited 0")
eq(restarted, [True, True, True], "each restart happened while wrk ran")
eq(up_again, [True, True, True], "HAProxy saw every new backend UP before the next restart")
ok(res.get("requests", 0) > 0, "wrk made requests through HAProxy (%s)" % res.get("requests"), wrk.lines())
errs = {k: res.get(k) for k in ("connect", "read", "write", "timeout", "status")}
eq(errs, dict.fromkeys(errs, 0), "wrk: no socket error, no timeout, no non-2xx/3xx during the restarts")
# What the restarts looked like from HAProxy: its state changes, and the
# requests it logged as not normal (option dontlog-normal): the retried ones
# ("+N" retries in the log line: the connection was refused or the backend
# closed it before answering) and any that failed.
logged = [l for l in hap.lines() if " is UP" not in l and " is DOWN" not in l]  # those come on stderr too
retried = [l for l in logged if re.search(r"/\+?[1-9]\d* \d+/\d+ \"", l) and " 200 " in l]
print("# haproxy: %d requests answered 200 after a retry, %d other lines logged"
      % (len(retried), len(logged) - len(retried)))
for l in hap.state_lines() + [l for l in logged if l not in retried][:20] + retried[:3]:
    print("# haproxy: " + l)
eq([b.alive() for b in backends], [True] * 3, "the new backends run")
eq(*peers("127.0.0.2"), name="after the restarts: the new backends report the client's address and port")
eq([b.stop() for b in backends], [0, 0, 0], "the new backends drain and exit 0 on SIGTERM")
hap.stop()
finish()
