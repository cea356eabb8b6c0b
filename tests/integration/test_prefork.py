#!/usr/bin/env python3
"""build/prefork (examples/prefork.c): one socket, N workers. Requests
spread over the workers; a killed worker is replaced; SIGHUP replaces every
worker one at a time under a load loop with no failed request; SIGTERM
drains and exits 0; a socket passed as by systemd (LISTEN_FDS) is served."""
import http.client
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, Server, BUILD  # noqa

PREFORK = os.path.join(BUILD, "prefork")


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return sorted(int(x) for x in f.read().split())
    except OSError:
        return []


def get(port, timeout=5):
    """GET / on a new connection (Connection: close): (status, body)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", "/", headers={"Connection": "close"})
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def read_line(proc, seconds):
    """The first stdout line of proc, "" if none comes in time."""
    r, _, _ = select.select([proc.stdout], [], [], seconds)
    return proc.stdout.readline().decode().strip() if r else ""


def wait_for(cond, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


srv = Server([PREFORK, "--workers", "3", "--port", "0", "--drain-ms", "2000"])
sup = srv.proc.pid
first = children(sup)
eq(len(first), 3, "three workers started")

# Requests from 6 threads at once: answered by the workers, more than one.
seen, errors, lock = set(), [], threading.Lock()


def burst(n):
    for _ in range(n):
        try:
            st, body = get(srv.port)
            with lock:
                if st == 200 and body.startswith("worker "):
                    seen.add(int(body.split()[1]))
                else:
                    errors.append((st, body))
        except OSError as e:
            with lock:
                errors.append(repr(e))


ts = [threading.Thread(target=burst, args=(15,)) for _ in range(6)]
for t in ts:
    t.start()
for t in ts:
    t.join(30)
eq(errors, [], "90 requests from 6 threads all answered")
ok(len(seen) >= 2 and seen <= set(first), "answered by %d of the 3 workers (the supervisor's children)" % len(seen),
   (seen, first))

# A worker killed outright is replaced.
victim = first[0]
os.kill(victim, signal.SIGKILL)
ok(wait_for(lambda: len(children(sup)) == 3 and victim not in children(sup), 5),
   "a killed worker is replaced (three workers again)", children(sup))
eq(get(srv.port)[0], 200, "served after the replacement")

# SIGHUP under load: every worker replaced, no request fails.
before = children(sup)
stop, counts, failures = threading.Event(), [0], []


def load():
    while not stop.is_set():
        try:
            st, body = get(srv.port)
            if st != 200:
                failures.append(st)
            else:
                with lock:
                    counts[0] += 1
        except OSError as e:
            failures.append(repr(e))


ts = [threading.Thread(target=load) for _ in range(2)]
for t in ts:
    t.start()
time.sleep(0.3)
os.kill(sup, signal.SIGHUP)
replaced = wait_for(lambda: len(children(sup)) == 3 and not set(children(sup)) & set(before), 10)
time.sleep(0.3)  # keep the load on the new workers for a moment
stop.set()
for t in ts:
    t.join(10)
ok(replaced, "SIGHUP: three new workers, none of the old ones left", (before, children(sup)))
eq(failures, [], "SIGHUP under a load loop: no failed request (%d answered)" % counts[0])
ok(counts[0] > 0, "the load loop made requests")
pids = set()
for _ in range(12):
    pids.add(int(get(srv.port)[1].split()[1]))
ok(pids <= set(children(sup)), "answers come from the new workers", (pids, children(sup)))

# SIGTERM: the workers drain, the supervisor exits 0, the port is closed.
workers = children(sup)
eq(srv.stop(signal.SIGTERM, timeout=10), 0, "SIGTERM: exit status 0")
ok(all(not os.path.exists("/proc/%d" % p) or open("/proc/%d/stat" % p).read().split()[2] == "Z"
       for p in workers), "no worker left running")
try:
    get(srv.port, timeout=2)
    ok(False, "port closed after SIGTERM")
except OSError:
    ok(True, "port closed after SIGTERM")

# A socket passed as systemd does (descriptor 3, LISTEN_PID, LISTEN_FDS).
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(64)
port = ls.getsockname()[1]
fd = ls.fileno()
cmd = "exec 3<&%d %d<&-; export LISTEN_PID=$$ LISTEN_FDS=1; exec %s --workers 2 --drain-ms 1000" % (fd, fd, PREFORK)
act = subprocess.Popen(["sh", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(fd,))
ls.close()  # the server holds its own copy now
line = read_line(act, 10)
ok(line == "listening on %d" % port, "socket activation: listening on the passed socket's port", line)
if line.startswith("listening on"):
    st, body = get(port)
    ok(st == 200 and body.startswith("worker "), "socket activation: served by a worker", (st, body))
act.send_signal(signal.SIGTERM)
try:
    eq(act.wait(10), 0, "socket activation: SIGTERM exit status 0")
except subprocess.TimeoutExpired:
    act.kill()
    act.wait()
    ok(False, "socket activation: SIGTERM exit status 0")
done()
