#!/usr/bin/python3
"""HTTP/2 benchmark: h2load -c 20 -m 16 (20 connections x 16 streams), GET of
a small body, over h2c (prior knowledge, h2load's default for http://) and
h2 over TLS (ALPN), against nginx (one worker, http2), h2o (one thread) and
build/echo-server (one loop). See bench/METHOD.md "h2". Standard library only.

The server under test is pinned to CPU 0, h2load (-t1) to CPU 1. Each
server and transport is warmed for 1 s, then the servers take turns over
the rounds (the order flips every round); the table gives medians of req/s,
the server's CPU (utime + stime from /proc/PID/stat over the run, nginx's
master and worker) and req/s per server core, with ratios to nginx. A row
whose h2load did not get HTTP/2 (an echo-server built without nghttp2, or
a server that does not answer) prints "n/a". Over TLS every server uses the
same ECDSA P-256 certificate; h2load offers ECDHE-ECDSA-AES128-GCM-SHA256
for TLS 1.2 and P-256 only (--ciphers, --groups). nginx is held to TLS 1.2
(ssl_protocols) like echo-server (mbedTLS 2.28 has no TLS 1.3); h2o 2.2.5's
max-version does not stop TLS 1.3, so it runs TLS 1.3 with AES-128-GCM (the
same record cipher; 20 long connections make the handshake negligible). The
negotiated version and suite are printed (h2load ignores OPENSSL_CONF).

    bench/h2_bench.py [--out BUILD] [--quick] [--rounds N] [--duration S]
                      [--servers nginx,h2o,echo-server] [--transports h2c,h2]
                      [--clients 20] [--streams 16]
"""
import getpass
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxy_bench import (ROOT, free_port, wait_port, start_contract, stop, cpu_seconds, system_busy, NOISY,  # noqa
                         bench_args, rounds_secs)
from tls_handshake import BODY  # noqa: the same answer as echo-server's GET /hello
from nginx_head import NGINX_HEAD  # noqa: E402

CIPHER = "ECDHE-ECDSA-AES128-GCM-SHA256"
SERVERS = ["echo-server", "nginx", "h2o"]

NGINX_CONF = NGINX_HEAD + """  http2_max_concurrent_streams 128;
  keepalive_requests 1000000;
  server {{
    listen 127.0.0.1:{port} http2 backlog=4096;
    listen 127.0.0.1:{tport} ssl http2 backlog=4096;
    ssl_certificate {cert};
    ssl_certificate_key {key};
    ssl_protocols TLSv1.2;
    ssl_ecdh_curve prime256v1;
    location /hello {{ default_type application/json; return 200 '{body}'; }}
  }}
}}
"""

# h2o serves the same 93 bytes from a file (its cheapest fixed answer);
# no access log unless configured.
H2O_CONF = """user: {user}
num-threads: 1
pid-file: {dir}/h2o.pid
error-log: {dir}/error.log
listen:
  host: 127.0.0.1
  port: {port}
listen:
  host: 127.0.0.1
  port: {tport}
  ssl:
    certificate-file: {cert}
    key-file: {key}
    min-version: TLSv1.2
    ocsp-update-interval: 0
hosts:
  default:
    paths:
      /hello:
        file.file: {dir}/hello.json
        header.set: "content-type: application/json"
"""


def h2load(url, secs, clients, streams, cpus):
    """h2load -D secs; returns req/s, whether it spoke h2, and failures."""
    argv = ["taskset", "-c", cpus, "h2load", "-t1", "-c%d" % clients, "-m%d" % streams, "-D%d" % secs,
            "--ciphers=" + CIPHER, "--groups=P-256", url]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=secs + 30)
        out = r.stdout + r.stderr
    except subprocess.TimeoutExpired:
        out = ""
    m = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out)
    req = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, "
                    r"(\d+) errored, (\d+) timeout", out)
    proto = re.search(r"Application protocol: (\S+)", out)
    tls = re.search(r"TLS Protocol: TLSv(\S+)", out)
    cipher = re.search(r"^Cipher: (\S+)", out, re.M)
    st = re.search(r"status codes: (\d+) 2xx", out)
    ok2xx = int(st.group(1)) if st else 0
    h2 = bool(proto) and proto.group(1) in ("h2", "h2c")
    return {"rps": float(m.group(1)) if m and h2 and ok2xx else 0.0, "h2": h2 and ok2xx > 0,
            "ok": ok2xx, "failed": (int(req.group(5)) + int(req.group(6)) + int(req.group(7))) if req else 0,
            "proto": proto.group(1) if proto else "?", "tls": tls.group(1) if tls else "",
            "cipher": cipher.group(1) if cipher else ""}


def start_nginx(d, cert, key, cpus):
    port, tport = free_port(), free_port()
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(NGINX_CONF.format(dir=d, port=port, tport=tport, cert=cert, key=key, body=BODY))
    p = subprocess.Popen(["taskset", "-c", cpus, "nginx", "-p", d, "-c", os.path.join(d, "nginx.conf")],
                         stderr=subprocess.DEVNULL)
    if not wait_port(port) or not wait_port(tport):
        stop(p)
        raise RuntimeError("nginx did not start (%s)" % os.path.join(d, "error.log"))
    time.sleep(0.3)  # the worker
    kids = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
    return p, port, tport, [p.pid] + [int(k) for k in kids]


def start_h2o(d, cert, key, cpus):
    port, tport = free_port(), free_port()
    with open(os.path.join(d, "hello.json"), "w") as f:
        f.write(BODY)
    with open(os.path.join(d, "h2o.conf"), "w") as f:
        f.write(H2O_CONF.format(dir=d, port=port, tport=tport, cert=cert, key=key, user=getpass.getuser()))
    p = subprocess.Popen(["taskset", "-c", cpus, "h2o", "-c", os.path.join(d, "h2o.conf")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not wait_port(port) or not wait_port(tport):
        stop(p)
        raise RuntimeError("h2o did not start (%s)" % os.path.join(d, "error.log"))
    return p, port, tport, [p.pid]


def main():
    ap = bench_args()
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument("--transports", default="h2c,h2")
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--streams", type=int, default=16)
    args = ap.parse_args()
    rounds, secs = rounds_secs(args)
    build = args.out if os.path.isabs(args.out) else os.path.join(ROOT, args.out)
    echo_bin = os.path.join(build, "echo-server")
    want = [s for s in SERVERS if s in args.servers.split(",")]
    transports = [t for t in ("h2c", "h2") if t in args.transports.split(",")]
    missing = [t for t in ("h2load", "taskset", "openssl") if not shutil.which(t)]
    if missing:
        print("h2 bench: skipped, missing " + ", ".join(missing))
        return 0
    for name, tool in (("nginx", "nginx"), ("h2o", "h2o")):
        if name in want and not shutil.which(tool):
            print("h2 bench: %s not installed, left out" % name)
            want.remove(name)
    if "echo-server" in want and not os.path.exists(echo_bin):
        print("h2 bench: %s missing, left out" % echo_bin)
        want.remove("echo-server")
    ncpu = os.cpu_count() or 1
    scpu, ccpu = ("0", ",".join(str(c) for c in range(1, ncpu))) if ncpu > 1 else ("0", "0")
    tmp = tempfile.mkdtemp(prefix="nsv-h2-bench-")
    procs, results = [], {}
    try:
        cert, key = os.path.join(tmp, "c.pem"), os.path.join(tmp, "k.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost"],
                       check=True, capture_output=True)
        # (server, transport) -> (url, pids of the process serving it)
        targets = {}
        for name in want:
            d = os.path.join(tmp, name)
            os.makedirs(d)
            if name == "nginx":
                p, port, tport, pids = start_nginx(d, cert, key, scpu)
                procs.append(p)
                targets[(name, "h2c")] = ("http://127.0.0.1:%d/hello" % port, pids)
                targets[(name, "h2")] = ("https://127.0.0.1:%d/hello" % tport, pids)
            elif name == "h2o":
                p, port, tport, pids = start_h2o(d, cert, key, scpu)
                procs.append(p)
                targets[(name, "h2c")] = ("http://127.0.0.1:%d/hello" % port, pids)
                targets[(name, "h2")] = ("https://127.0.0.1:%d/hello" % tport, pids)
            else:  # echo-server serves plain or TLS: one process for each
                p, port = start_contract([echo_bin, "--port", "0"], scpu)
                procs.append(p)
                targets[(name, "h2c")] = ("http://127.0.0.1:%d/hello" % port, [p.pid])
                p, port = start_contract([echo_bin, "--port", "0", "--cert", cert, "--key", key], scpu)
                procs.append(p)
                targets[(name, "h2")] = ("https://127.0.0.1:%d/hello" % port, [p.pid])
        for tr in transports:
            names = [n for n in want if (n, tr) in targets]
            spoke = {}
            for n in names:  # warm, and find out who speaks HTTP/2 at all
                w = h2load(targets[(n, tr)][0], 1, args.clients, args.streams, ccpu)
                spoke[n] = w["h2"]
            live = [n for n in names if spoke[n]]
            runs = {n: [] for n in live}
            for r in range(rounds):
                for n in (live if r % 2 == 0 else list(reversed(live))):
                    url, pids = targets[(n, tr)]
                    c0, b0 = sum(cpu_seconds(p) for p in pids), system_busy()
                    w0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    t0 = time.time()
                    res = h2load(url, secs, args.clients, args.streams, ccpu)
                    wall = time.time() - t0
                    w1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    srv = sum(cpu_seconds(p) for p in pids) - c0
                    cli = (w1.ru_utime + w1.ru_stime) - (w0.ru_utime + w0.ru_stime)
                    res["cpu"] = srv / wall
                    res["others"] = max(0.0, (system_busy() - b0 - srv - cli) / wall)
                    runs[n].append(res)
            row = {}
            for n in names:
                if n not in live or not any(x["h2"] for x in runs[n]):
                    row[n] = None
                    continue
                rs = runs[n]
                rps = statistics.median(x["rps"] for x in rs)
                cpu = statistics.median(x["cpu"] for x in rs)
                row[n] = {"rps": rps, "cpu": cpu, "per_core": rps / cpu if cpu > 0 else None,
                          "failed": sum(x["failed"] for x in rs), "others": max(x["others"] for x in rs),
                          "proto": rs[0]["proto"] + (" " + rs[0]["tls"] if rs[0]["tls"] else ""),
                          "cipher": rs[0]["cipher"], "runs": [x["rps"] for x in rs]}
            base = row.get("nginx")
            for n in names:
                r = row[n]
                if r and base:
                    r["ratio"] = r["rps"] / base["rps"] if base["rps"] else None
                    r["ratio_per_core"] = r["per_core"] / base["per_core"] \
                        if r["per_core"] and base["per_core"] else None
            results[tr] = row
    finally:
        for p in procs:
            stop(p)
        shutil.rmtree(tmp, ignore_errors=True)

    print("h2 bench: %d round(s) of %d s, h2load -t1 -c%d -m%d, server on cpu %s, h2load on cpu %s"
          % (rounds, secs, args.clients, args.streams, scpu, ccpu))
    print("%-4s %-12s %6s %10s %8s %11s %9s %9s %7s  %s" % ("", "server", "proto", "req/s", "srv cpu", "req/s/core",
                                                            "x nginx", "x/core", "failed", "runs"))
    for tr, row in results.items():
        noisy = 0.0
        for n, r in row.items():
            if r is None:
                print("%-4s %-12s %6s %10s %8s %11s %9s %9s %7s  %s" % (tr, n, "n/a", "n/a", "-", "n/a", "-", "-",
                                                                        "-", "no HTTP/2 (h2load did not negotiate)"))
                continue
            noisy = max(noisy, r["others"])
            print("%-4s %-12s %6s %10.0f %8.2f %11.0f %9s %9s %7d  %s" % (
                tr, n, r["proto"], r["rps"], r["cpu"], r["per_core"] or 0,
                "%.2f" % r["ratio"] if r.get("ratio") else "-",
                "%.2f" % r["ratio_per_core"] if r.get("ratio_per_core") else "-",
                r["failed"], " ".join("%.0f" % x for x in r["runs"])))
        tls = ["%s %s" % (n, r["cipher"]) for n, r in row.items() if r and r["cipher"]]
        if tls:
            print("%-4s negotiated: %s" % (tr, ", ".join(tls)))
        if noisy > NOISY:
            print("%-4s BUSY MACHINE: other processes used up to %.0f%% of a core during a run; rerun"
                  % (tr, noisy * 100))
    with open(os.path.join(build, "h2-bench.json"), "w") as f:
        json.dump({"rounds": rounds, "duration_s": secs, "clients": args.clients, "streams": args.streams,
                   "cpus": ncpu, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
