#!/usr/bin/env python3
"""Raw TCP echo benchmark, the cases of py-netty's table: tcp-echo against a
Python asyncio echo server, each pinned to one core, tcp_load on the other,
servers interleaved over rounds; median msgs/s, MB/s and latency.
Usage: bench/tcp_bench.py [--rounds 3] [--duration 3] [--out build]"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = [("1 conn 64 B", 1, 64), ("16 conns 64 KiB", 16, 65536), ("32 conns 1 KiB", 32, 1024),
         ("128 conns 1 KiB", 128, 1024), ("256 conns 1 KiB", 256, 1024), ("512 conns 1 KiB", 512, 1024)]


def start(argv):
    p = subprocess.Popen(["taskset", "-c", "1"] + argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT)
    line = p.stdout.readline().decode()
    if not line.startswith("listening on "):
        p.kill()
        raise RuntimeError("%s did not start" % argv[0])
    return p, int(line.split()[2])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "build"))
    a = ap.parse_args()
    load = os.path.join(a.out, "bench", "tcp_load")
    servers = [("tcp-echo", [os.path.join(a.out, "tcp-echo"), "--port", "0"]),
               ("python asyncio", ["/usr/bin/python3", os.path.join(ROOT, "bench", "peers", "asyncio_echo.py"),
                                   "--port", "0"])]
    res = {}
    for name, conns, size in CASES:
        for rnd in range(a.rounds):
            for sname, argv in servers:
                p, port = start(argv)
                try:
                    out = subprocess.run(["taskset", "-c", "0", load, "--port", str(port), "--conns", str(conns),
                                          "--size", str(size), "--duration", str(a.duration)],
                                         capture_output=True, timeout=a.duration + 30).stdout
                    j = json.loads(out)
                finally:
                    p.kill()
                    p.wait()
                res.setdefault((name, sname), []).append(j)
                print("  %-18s round %d  %-15s %10.0f msgs/s" % (name, rnd + 1, sname, j["msgs_per_s"]), flush=True)
    print("\n%-18s %-15s %12s %10s %9s %9s %7s %8s" % ("case", "server", "msgs/s", "MB/s", "p50", "p99", "errors", "ratio"))
    table = []
    for name, conns, size in CASES:
        base = None
        for sname, _ in reversed(servers):
            runs = res[(name, sname)]
            m = statistics.median(r["msgs_per_s"] for r in runs)
            mb = statistics.median(r["mbytes_per_s"] for r in runs)
            p50 = statistics.median(r["p50_us"] for r in runs)
            p99 = statistics.median(r["p99_us"] for r in runs)
            err = sum(r["errors"] for r in runs)
            base = base or m
            row = dict(case=name, server=sname, msgs_per_s=m, mbytes_per_s=mb, p50_us=p50, p99_us=p99,
                       errors=err, ratio=m / base if base else 0)
            table.append(row)
        for row in reversed(table[-len(servers):]):
            print("%-18s %-15s %12.0f %10.1f %7.0fus %7.0fus %7d %7.2fx%s" % (
                row["case"], row["server"], row["msgs_per_s"], row["mbytes_per_s"], row["p50_us"], row["p99_us"],
                row["errors"], row["ratio"], "  ERRORS!" if row["errors"] else ""))
    with open(os.path.join(a.out, "bench-tcp.json"), "w") as f:
        json.dump(table, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
