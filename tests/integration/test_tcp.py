#!/usr/bin/env python3
"""Raw TCP through tcp-echo and tcp-proxy: random payloads from 1 byte to
8 MiB over many connections with every byte checked, half-close, and a slow
reader behind the proxy with the proxy's memory bounded."""
import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, Server, BUILD  # noqa

threads = os.environ.get("NSV_THREADS")
echo = Server([os.path.join(BUILD, "tcp-echo"), "--port", "0"] + (["--threads", threads] if threads else []))
proxy = Server([os.path.join(BUILD, "tcp-proxy"), "--listen", "0", "--to", "127.0.0.1:%d" % echo.port])


def roundtrip(port, data, results, idx):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=20)
        def writer():
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)  # half-close: the echo must still answer everything
        t = threading.Thread(target=writer)
        t.start()
        chunks = []
        while True:
            d = s.recv(1 << 20)
            if not d:
                break
            chunks.append(d)
        t.join()
        s.close()
        results[idx] = b"".join(chunks) == data
    except Exception as e:  # noqa
        results[idx] = repr(e)


sizes = [1, 2, 100, 1000, 4096, 65535, 65536, 65537, 300000, 1 << 20, 8 << 20]
for name, port in (("tcp-echo", echo.port), ("tcp-proxy -> tcp-echo", proxy.port)):
    payloads = [os.urandom(n) for n in sizes] + [os.urandom(n) for n in [1000] * 20 + [70000] * 5]
    results = [None] * len(payloads)
    ths = [threading.Thread(target=roundtrip, args=(port, p, results, i)) for i, p in enumerate(payloads)]
    for t in ths:
        t.start()
    for t in ths:
        t.join(60)
    eq([r for r in results if r is not True], [], "%s: %d connections, 1 B to 8 MiB, every byte checked" % (name, len(payloads)))

# 16 connections x 64 KiB message rate sanity: many small writes interleaved with reads
s = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
for i in range(200):
    msg = b"line %d\n" % i
    s.sendall(msg)
    got = b""
    while len(got) < len(msg):
        got += s.recv(100)
    if got != msg:
        break
eq(i, 199, "200 request/response round trips through the proxy")
s.close()


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# Slow reader behind the proxy: the client sends 64 MiB and reads nothing
# for a while; the echo server's output to the proxy and the proxy's output
# to the client fill; pausing must keep the proxy's memory bounded.
before = rss_kb(proxy.proc.pid)
s = socket.create_connection(("127.0.0.1", proxy.port), timeout=30)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
sent = [0]
stop = [False]
blob = os.urandom(1 << 16)
def pump():
    s.settimeout(0.2)
    while not stop[0] and sent[0] < (64 << 20):
        try:
            sent[0] += s.send(blob)
        except socket.timeout:
            continue
        except OSError:
            break
t = threading.Thread(target=pump)
t.start()
time.sleep(2.0)
peak = rss_kb(proxy.proc.pid)
stalled_at = sent[0]
ok(stalled_at < (64 << 20), "sender stalled (%.1f MiB accepted) while nobody reads" % (stalled_at / 1048576.0))
ok(peak - before < 16 * 1024, "proxy RSS grew %d KiB (< 16 MiB) with a stalled reader" % (peak - before))
# Now read everything: the data must come back complete and in order.
stop[0] = True
t.join(5)
s.settimeout(10)
s.shutdown(socket.SHUT_WR)
total = 0
expect = sent[0]
good = True
while total < expect:
    d = s.recv(1 << 20)
    if not d:
        break
    for k in range(0, len(d), 4096):  # spot-check alignment with the repeated blob
        off = (total + k) % len(blob)
        seg = d[k:k + 64]
        if seg != (blob + blob)[off:off + len(seg)]:
            good = False
            break
    total += len(d)
eq(total, expect, "after the stall every byte arrives (%d)" % expect)
ok(good, "bytes in order")
s.close()

ok(echo.alive() and proxy.alive(), "both servers alive")
eq(proxy.stop(), 0, "proxy exits 0 on SIGTERM")
eq(echo.stop(), 0, "echo exits 0 on SIGTERM")
done()
