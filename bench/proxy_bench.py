#!/usr/bin/python3
"""Reverse-proxy benchmark: build/http-proxy against nginx proxy_pass with
upstream keepalive, both in front of the same build/echo-server, each proxy
pinned to its own core (taskset), wrk as the client; the two proxies take
turns over several rounds and the medians give the ratio. Standard library
only. See bench/METHOD.md "proxy".

    bench/proxy_bench.py [--out BUILD] [--quick] [--rounds N] [--duration S] [--conns N]
"""
import argparse
import json
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from nginx_head import NGINX_HEAD  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
NOISY = 0.10  # cores used by other processes during a run that make it "noisy" (as bench/run.py)

# (id, wrk path, wrk script): a small GET answered with echo-server's JSON
# (about 60 bytes), and a 4 KiB POST echoed back (streamed both ways).
CASES = [("get", "/hello", None), ("post-4k", "/echo", "post4k.lua")]

NGINX_CONF = NGINX_HEAD + """  upstream up {{ server 127.0.0.1:{up}; keepalive 256; }}
  server {{
    listen 127.0.0.1:{port} backlog=4096;
    location / {{
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-Host $host;
      proxy_set_header Forwarded "for=$remote_addr;proto=$scheme;host=\\"$http_host\\"";
    }}
  }}
}}
"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def start_contract(argv, cpus):
    """A program that prints 'listening on PORT'; returns (proc, port)."""
    p = subprocess.Popen(["taskset", "-c", cpus] + argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = p.stdout.readline().decode()
    if not line.startswith("listening on "):
        p.kill()
        raise RuntimeError("%s did not start" % argv[0])
    return p, int(line.split()[2])


def stop(p):
    if p and p.poll() is None:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def system_busy():
    """CPU seconds the whole machine spent busy so far (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def wrk(port, path, script, secs, conns, cpus):
    argv = ["taskset", "-c", cpus, "wrk", "-t1", "-c%d" % conns, "-d%ds" % secs, "--latency"]
    if script:
        argv += ["-s", os.path.join(BENCH, script)]
    out = subprocess.run(argv + ["http://127.0.0.1:%d%s" % (port, path)], capture_output=True, text=True,
                         timeout=secs + 30).stdout
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    errs = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.M)
    return {"rps": float(m.group(1)) if m else 0.0,
            "errors": (int(errs.group(1)) if errs else 0) + (sum(map(int, sock.groups())) if sock else 0),
            "p99": p99.group(1) if p99 else "?"}


def bench_args():
    """The options every side-by-side benchmark takes: --out (the build),
    --quick (one short round), --rounds and --duration."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "build"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--duration", type=int)
    return ap


def rounds_secs(args, quick_s=3, secs=5):
    """Rounds and seconds per run from bench_args' options (3 rounds of secs
    by default, --quick 1 of quick_s)."""
    return args.rounds or (1 if args.quick else 3), args.duration or (quick_s if args.quick else secs)


def main():
    ap = bench_args()
    ap.add_argument("--conns", type=int, default=50)
    args = ap.parse_args()
    rounds, secs = rounds_secs(args)
    build = args.out if os.path.isabs(args.out) else os.path.join(ROOT, args.out)
    proxy_bin = os.path.join(build, "http-proxy")
    echo_bin = os.path.join(build, "echo-server")
    missing = [p for p in (proxy_bin, echo_bin) if not os.path.exists(p)] + \
              [t for t in ("nginx", "wrk", "taskset") if not shutil.which(t)]
    if missing:
        print("proxy bench: skipped, missing " + ", ".join(missing))
        return 0
    ncpu = os.cpu_count() or 1
    # The proxy under test gets core 0 to itself; the upstream and wrk share
    # the rest (one core each when there are three or more).
    pcpu, ucpu, lcpu = ("0", "1", ",".join(str(c) for c in range(2, ncpu))) if ncpu >= 3 else \
        ("0", "1" if ncpu > 1 else "0", "1" if ncpu > 1 else "0")
    tmp = tempfile.mkdtemp(prefix="nsv-proxy-bench-")
    echo = nginx = proxy = None
    results = {}
    try:
        echo, up = start_contract([echo_bin, "--port", "0"], ucpu)
        proxy, pport = start_contract([proxy_bin, "--listen", "0", "--to", "http://127.0.0.1:%d" % up], pcpu)
        nport = free_port()
        with open(os.path.join(tmp, "nginx.conf"), "w") as f:
            f.write(NGINX_CONF.format(dir=tmp, up=up, port=nport))
        nginx = subprocess.Popen(["taskset", "-c", pcpu, "nginx", "-p", tmp, "-c", os.path.join(tmp, "nginx.conf")],
                                 stderr=subprocess.DEVNULL)
        if not wait_port(nport):
            raise RuntimeError("nginx did not start")
        # nginx -c runs a master and one worker; the worker does the work
        time.sleep(0.3)
        servers = {"http-proxy": (pport, [proxy.pid]), "nginx": (nport, [nginx.pid])}
        kids = subprocess.run(["pgrep", "-P", str(nginx.pid)], capture_output=True, text=True).stdout.split()
        servers["nginx"][1].extend(int(k) for k in kids)
        for cid, path, script in CASES:
            for name, (port, _) in servers.items():  # warm both (pools, caches)
                wrk(port, path, script, 1, args.conns, lcpu)
            runs = {name: [] for name in servers}
            for r in range(rounds):
                order = list(servers) if r % 2 == 0 else list(reversed(servers))
                for name in order:
                    port, pids = servers[name]
                    ours = pids + [echo.pid]
                    c0 = sum(cpu_seconds(p) for p in pids)
                    o0, b0 = sum(cpu_seconds(p) for p in ours), system_busy()
                    w0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    res = wrk(port, path, script, secs, args.conns, lcpu)
                    w1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    res["cpu"] = (sum(cpu_seconds(p) for p in pids) - c0) / secs
                    used = sum(cpu_seconds(p) for p in ours) - o0 + (w1.ru_utime + w1.ru_stime) - \
                        (w0.ru_utime + w0.ru_stime)
                    res["others"] = max(0.0, (system_busy() - b0 - used) / secs)  # cores used by the rest
                    runs[name].append(res)
            row = {}
            for name, rs in runs.items():
                row[name] = {"rps": statistics.median(x["rps"] for x in rs),
                             "cpu": statistics.median(x["cpu"] for x in rs),
                             "errors": sum(x["errors"] for x in rs), "p99": rs[len(rs) // 2]["p99"],
                             "others": max(x["others"] for x in rs),
                             "runs": [x["rps"] for x in rs]}
            for name in servers:  # requests per second of the proxy's own CPU time
                r = row[name]
                r["per_core"] = r["rps"] / r["cpu"] if r["cpu"] > 0 else None
            n = row["nginx"]["rps"]
            row["ratio"] = row["http-proxy"]["rps"] / n if n else None
            nc = row["nginx"]["per_core"]
            row["ratio_per_core"] = row["http-proxy"]["per_core"] / nc if nc and row["http-proxy"]["per_core"] else None
            results[cid] = row
    finally:
        stop(proxy)
        stop(nginx)
        stop(echo)
        shutil.rmtree(tmp, ignore_errors=True)
    print("proxy bench: %d round(s) of %d s, %d connections, proxy on cpu %s, upstream on %s, wrk on %s"
          % (rounds, secs, args.conns, pcpu, ucpu, lcpu))
    print("%-8s %-11s %10s %9s %11s %9s %7s  %s" % ("case", "proxy", "req/s", "proxy cpu", "req/s/core", "p99",
                                                     "errors", "runs"))
    for cid, row in results.items():
        for name in ("http-proxy", "nginx"):
            r = row[name]
            print("%-8s %-11s %10.0f %9.2f %11.0f %9s %7d  %s" % (
                cid, name, r["rps"], r["cpu"], r["per_core"] or 0, r["p99"], r["errors"],
                " ".join("%.0f" % x for x in r["runs"])))
        print("%-8s http-proxy / nginx: %.2fx req/s, %.2fx req/s per proxy core" % (
            cid, row["ratio"] or 0, row["ratio_per_core"] or 0))
        noisy = max(row[n]["others"] for n in ("http-proxy", "nginx"))
        if noisy > NOISY:
            print("%-8s BUSY MACHINE: other processes used up to %.0f%% of a core during a run; rerun"
                  % (cid, noisy * 100))
    with open(os.path.join(build, "proxy-bench.json"), "w") as f:
        json.dump({"rounds": rounds, "duration_s": secs, "conns": args.conns, "cpus": os.cpu_count(),
                   "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
