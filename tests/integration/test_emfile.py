#!/usr/bin/env python3
"""EMFILE on accept: echo-server runs with RLIMIT_NOFILE lowered to 40. Once
its descriptors run out it keeps serving the connections it has, does not
spin (CPU time measured from /proc), and accepts the waiting clients as soon
as descriptors free up."""
import os
import resource
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, Server, BUILD, connect, read_response  # noqa

GET = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
LIMIT = 40


def low_nofile():
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


class LimitedServer(Server):
    def __init__(self, argv):
        import subprocess
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     preexec_fn=low_nofile)
        line = self.proc.stdout.readline().decode()
        self.port = int(line.split()[2]) if line.startswith("listening on ") else None
        if self.port is None:
            self.stop()
            raise RuntimeError("server did not start")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def served(s, timeout):
    s.settimeout(timeout)
    try:
        r = read_response(s)
        return r is not None and r[0] == 200
    except OSError:
        return False


with LimitedServer([os.path.join(BUILD, "echo-server"), "--port", "0"]) as srv:
    held, waiting = [], []
    for i in range(LIMIT + 20):
        s = connect(srv.port)
        s.sendall(GET)
        (held if served(s, 0.5 if not waiting else 0.05) else waiting).append(s)
        if len(waiting) >= 10:
            break
    ok(len(waiting) >= 10 and len(held) < LIMIT,
       "descriptors ran out: %d connections served, %d waiting" % (len(held), len(waiting)))
    ok(srv.alive(), "server alive at the descriptor limit")

    for s in held:
        s.sendall(GET)
    eq(sum(served(s, 2) for s in held), len(held), "existing connections keep being served")

    c0 = cpu_seconds(srv.proc.pid)
    t0 = time.time()
    time.sleep(2.0)
    cpu = cpu_seconds(srv.proc.pid) - c0
    wall = time.time() - t0
    ok(cpu < 0.2 * wall, "no spinning while out of descriptors: %.2f s CPU in %.1f s" % (cpu, wall))
    eq(sum(served(s, 0.01) for s in waiting), 0, "waiting clients not served while out of descriptors")

    for s in held:  # every connection gone: the loop has nothing else to wake it
        s.close()
    t0 = time.time()
    n = sum(served(s, 2) for s in waiting)
    took = time.time() - t0
    eq(n, len(waiting), "waiting clients served once descriptors free up")
    ok(took < 1.0, "accepting again within %.0f ms" % (took * 1000))

    for s in held + waiting:
        s.close()
    time.sleep(0.3)
    # Every descriptor freed: new clients are served at once even with no
    # connection left open.
    s = connect(srv.port)
    s.sendall(GET)
    ok(served(s, 1), "a new client is served after the flood")
    s.close()
    ok(srv.alive(), "server alive")

done()
