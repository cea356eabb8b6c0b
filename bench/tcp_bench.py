#!/usr/bin/env python3
"""Raw TCP echo benchmark, the cases of py-netty's table (1 conn x 64 B,
16 conns x 64 KiB, 32/128/256/512 conns x 1 KiB; each connection keeps one
message in flight): C tcp-echo, a Python asyncio echo server and a node:net
echo server as baselines, and each binding's examples/tcp_echo.<ext>.
Each server is pinned to one core, tcp_load to the other; servers take
turns within a round, the order rotated every round, a fresh process per
run (JIT ones after a 1 s warm-up load); medians of msgs/s, MB/s, latency.
Each binding's ratio is against its baseline, with the goal beside it:
Python >= 3x asyncio, Node >= 2x node:net, Lua >= 0.9x C.
A server whose program or interpreter is missing, or that does not start,
is skipped with a note. Usage:
  bench/tcp_bench.py [--rounds 3] [--duration 3] [--out build]
                     [--servers c,asyncio,...] [--cases 1x64,16x64k,...]"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = [("1x64", "1 conn 64 B", 1, 64), ("16x64k", "16 conns 64 KiB", 16, 65536),
         ("32x1k", "32 conns 1 KiB", 32, 1024), ("128x1k", "128 conns 1 KiB", 128, 1024),
         ("256x1k", "256 conns 1 KiB", 256, 1024), ("512x1k", "512 conns 1 KiB", 512, 1024)]

# id, label, argv ({out}: the build directory), JIT warm-up, baseline id, goal ratio
SERVERS = [
    ("c", "C tcp-echo", ["{out}/tcp-echo"], False, None, None),
    ("asyncio", "python asyncio", ["/usr/bin/python3", "bench/peers/asyncio_echo.py"], False, None, None),
    ("node-net", "node:net", ["node", "bench/peers/node_net_echo.js"], True, None, None),
    ("python", "python tcp_echo", ["/usr/bin/python3", "bindings/python-cffi/examples/tcp_echo.py"], False,
     "asyncio", 3.0),
    ("node", "node tcp_echo", ["node", "bindings/node-ffi/examples/tcp_echo.js"], True, "node-net", 2.0),
    ("lua", "lua tcp_echo", ["luajit", "bindings/lua/examples/tcp_echo.lua"], True, "c", 0.9),
]


def missing(argv):
    """Why the server cannot run here, or None."""
    exe = argv[0]
    if not (os.path.isfile(exe) if os.sep in exe else shutil.which(exe)):
        return "%s not found" % exe
    for arg in argv[1:]:
        if arg.endswith((".py", ".js", ".lua")) and not os.path.isfile(os.path.join(ROOT, arg)):
            return "%s does not exist yet" % arg
    return None


def start(argv):
    """Start a server in its own process group; (process, port), or raise."""
    p = subprocess.Popen(["taskset", "-c", "1"] + argv + ["--port", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=ROOT, start_new_session=True)
    line = p.stdout.readline().decode(errors="replace")
    if not line.startswith("listening on "):
        stop(p)
        err = p.stderr.read().decode(errors="replace").strip().splitlines()
        raise RuntimeError("did not print 'listening on PORT'%s" % (": " + err[-1] if err else ""))
    return p, int(line.split()[2])


def stop(p):
    """SIGTERM to the server's group, SIGKILL if it lingers (stopped by PID)."""
    for sig, wait in ((signal.SIGTERM, 3), (signal.SIGKILL, 10)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            break
        try:
            p.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue


def load(tool, port, conns, size, duration):
    out = subprocess.run(["taskset", "-c", "0", tool, "--port", str(port), "--conns", str(conns), "--size",
                          str(size), "--duration", str(duration)], capture_output=True, timeout=duration + 30).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "build"))
    ap.add_argument("--servers", default=",".join(s[0] for s in SERVERS))
    ap.add_argument("--cases", default=",".join(c[0] for c in CASES))
    a = ap.parse_args()
    out = os.path.abspath(a.out)
    os.environ.setdefault("NANOSRV_LIBRARY", os.path.join(out, "libnanosrv.so.1"))
    tool = os.path.join(out, "bench", "tcp_load")
    want = a.servers.split(",")
    cases = [c for c in CASES if c[0] in a.cases.split(",")]
    servers = []
    for sid, label, argv, warm, base, goal in SERVERS:
        if sid not in want:
            continue
        argv = [x.replace("{out}", out) for x in argv]
        why = missing(argv)
        if why:
            print("tcp bench: skipping %s: %s" % (label, why), flush=True)
            continue
        servers.append((sid, label, argv, warm, base, goal))
    res, broken = {}, set()
    for cid, cname, conns, size in cases:
        for rnd in range(a.rounds):
            k = rnd % max(len(servers), 1)
            for sid, label, argv, warm, _, _ in servers[k:] + servers[:k]:
                if sid in broken:
                    continue
                try:
                    p, port = start(argv)
                except (RuntimeError, OSError) as e:
                    print("tcp bench: skipping %s: %s" % (label, e), flush=True)
                    broken.add(sid)
                    continue
                try:
                    if warm:
                        load(tool, port, conns, size, 1)
                    j = load(tool, port, conns, size, a.duration)
                except (subprocess.TimeoutExpired, ValueError) as e:
                    print("tcp bench: %s failed in %s: %s" % (label, cname, e), flush=True)
                    continue
                finally:
                    stop(p)
                res.setdefault((cid, sid), []).append(j)
                print("  %-16s round %d  %-16s %10.0f msgs/s%s" % (cname, rnd + 1, label, j["msgs_per_s"],
                      "  %d errors" % j["errors"] if j["errors"] else ""), flush=True)
    print("\n%-16s %-16s %12s %9s %8s %8s %6s  %s" % ("case", "server", "msgs/s", "MB/s", "p50", "p99", "errors",
                                                     "ratio to baseline (goal)"))
    table = []
    for cid, cname, conns, size in cases:
        med = {}
        for sid, label, argv, warm, base, goal in servers:
            runs = res.get((cid, sid))
            if not runs:
                continue
            med[sid] = statistics.median(r["msgs_per_s"] for r in runs)
            row = dict(case=cname, server=label, conns=conns, size=size, msgs_per_s=med[sid],
                       mbytes_per_s=statistics.median(r["mbytes_per_s"] for r in runs),
                       p50_us=statistics.median(r["p50_us"] for r in runs),
                       p99_us=statistics.median(r["p99_us"] for r in runs),
                       errors=sum(r["errors"] for r in runs), runs=len(runs))
            note = ""
            if base and med.get(base):
                row.update(baseline=dict(SERVERS_BY_ID)[base], ratio=med[sid] / med[base], goal=goal)
                note = "%.2fx %s (goal %.1fx: %s)" % (row["ratio"], row["baseline"], goal,
                                                     "met" if row["ratio"] >= goal else "NOT met")
            table.append(row)
            print("%-16s %-16s %12.0f %9.1f %6.0fus %6.0fus %6d  %s%s" % (
                cname, label, row["msgs_per_s"], row["mbytes_per_s"], row["p50_us"], row["p99_us"], row["errors"],
                note, "  ERRORS!" if row["errors"] else ""))
    with open(os.path.join(out, "bench-tcp.json"), "w") as f:
        json.dump(table, f, indent=1)
    return 0


SERVERS_BY_ID = [(s[0], s[1]) for s in SERVERS]

if __name__ == "__main__":
    sys.exit(main())
