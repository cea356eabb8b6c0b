#!/usr/bin/python3
"""TLS handshake cost: build/echo-server (one loop) against nginx (one
worker) on the same certificate, ECDSA P-256 and RSA-2048, TLS 1.2.
See bench/METHOD.md "tls". Standard library only.

Every client runs with OPENSSL_CONF pointing at a file that pins TLS 1.2, the
cipher suite (ECDHE-ECDSA-AES128-GCM-SHA256 or ECDHE-RSA-AES128-GCM-SHA256)
and the ECDHE group P-256 (--group), so both servers do the same work; nginx
is also configured to that suite and group list. Before measuring, s_client checks what
each server negotiates (pinned and with OpenSSL's default offer).

Modes, each a number of handshakes (connections) per second:
  new      openssl s_time -new: one client, a full handshake per connection
  reuse    openssl s_time -reuse: one client, every connection resumes
  new-xP   P s_time -new clients at once (full handshakes under load)
  wrk      wrk -c C -H 'Connection: close' GET /hello: a request per
           connection; wrk keeps its session across reconnects (SSL_clear),
           so these connections resume (echo-server's share is printed)
The server is pinned to CPU 0 and the clients to CPU 1 (taskset). Server CPU
time (utime + stime from /proc/PID/stat, nginx's master and worker) gives
handshakes per second of server CPU ("per core"), which does not depend on
how fast the client side is. Rounds alternate the server order; medians.

    bench/tls_handshake.py [--out BUILD] [--quick] [--rounds N] [--duration S]
                           [--certs ecdsa,rsa] [--modes new,reuse,new-x4,wrk]
                           [--parallel P] [--conns C] [--group P-256|X25519:P-256]
"""
import json
import os
import re
import resource
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxy_bench import (ROOT, free_port, wait_port, start_contract, stop, cpu_seconds, system_busy, NOISY,  # noqa
                         bench_args, rounds_secs)
from nginx_head import NGINX_HEAD  # noqa: E402

# (id, openssl req -newkey argument, cipher suite in OpenSSL's names)
CERTS = [("ecdsa", ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"], "ECDHE-ECDSA-AES128-GCM-SHA256"),
         ("rsa", ["-newkey", "rsa:2048"], "ECDHE-RSA-AES128-GCM-SHA256")]
GROUP = "P-256"
# nginx answers what echo-server's GET /hello answers (93 bytes of JSON)
BODY = '{"method":"GET","path":"/hello","query":"","body_len":0,"peer":"127.0.0.1","peer_port":55646}'

OSSL_CONF = """openssl_conf = nsv_bench
[nsv_bench]
ssl_conf = nsv_ssl
[nsv_ssl]
system_default = nsv_sys
[nsv_sys]
MinProtocol = TLSv1.2
MaxProtocol = TLSv1.2
CipherString = {cipher}
Groups = {group}
"""

NGINX_CONF = NGINX_HEAD + """  server {{
    listen 127.0.0.1:{port} ssl backlog=4096;
    ssl_certificate {cert};
    ssl_certificate_key {key};
    ssl_protocols TLSv1.2;
    ssl_ciphers {cipher};
    ssl_ecdh_curve {group};
    ssl_session_cache shared:SSL:10m;
    ssl_session_tickets on;
    location / {{ default_type application/json; return 200 '{body}'; }}
  }}
}}
"""


def client_env(conf):
    env = dict(os.environ)
    if conf:
        env["OPENSSL_CONF"] = conf
    return env


def negotiated(port, conf, cipher=None):
    """(protocol, cipher, server temp key) that s_client gets, and whether a
    -reconnect resumes ('Reused' lines of the 5 reconnects)."""
    argv = ["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-reconnect"]
    if cipher:
        argv += ["-tls1_2", "-cipher", cipher]
    r = subprocess.run(argv, input=b"", capture_output=True, timeout=30, env=client_env(conf))
    out = r.stdout.decode(errors="replace")
    m = re.search(r"^New, (\S+), Cipher is (\S+)", out, re.M)
    k = re.search(r"^Server Temp Key: (.*)$", out, re.M)
    return {"proto": m.group(1) if m else "?", "cipher": m.group(2) if m else "?",
            "key": k.group(1).strip() if k else "?", "reused": len(re.findall(r"^Reused,", out, re.M))}


def s_time(port, mode, secs, cpus, conf, cipher, parallel=1):
    """Sum of connections of `parallel` s_time clients over their wall time."""
    argv = ["taskset", "-c", cpus, "openssl", "s_time", "-connect", "127.0.0.1:%d" % port, "-" + mode,
            "-time", str(secs), "-tls1_2", "-cipher", cipher]
    t0 = time.time()
    ps = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=client_env(conf))
          for _ in range(parallel)]
    n = 0
    for p in ps:
        out = p.communicate(timeout=secs + 30)[0].decode(errors="replace")
        m = re.findall(r"^(\d+) connections in [\d.]+s;", out, re.M)
        n += int(m[-1]) if m else 0
    wall = time.time() - t0
    return {"rate": n / wall, "n": n, "wall": wall}


def wrk_close(port, secs, conns, cpus, conf):
    argv = ["taskset", "-c", cpus, "wrk", "-t1", "-c%d" % conns, "-d%ds" % secs, "-H", "Connection: close",
            "https://127.0.0.1:%d/hello" % port]
    t0 = time.time()
    out = subprocess.run(argv, capture_output=True, text=True, timeout=secs + 30, env=client_env(conf)).stdout
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    return {"rate": float(m.group(1)) if m else 0.0, "wall": time.time() - t0,
            "errors": sum(map(int, sock.groups())) if sock else 0}


def metric(port, name):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        body = urllib.request.urlopen("https://127.0.0.1:%d/metrics" % port, context=ctx, timeout=10).read()
    except OSError:
        return None
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    return None


def start_nginx(tmp, cid, cert, key, cipher, group, cpus):
    d = os.path.join(tmp, "nginx-" + cid)
    os.makedirs(d)
    port = free_port()
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(NGINX_CONF.format(dir=d, port=port, cert=cert, key=key, cipher=cipher, group=group, body=BODY))
    p = subprocess.Popen(["taskset", "-c", cpus, "nginx", "-p", d, "-c", os.path.join(d, "nginx.conf")],
                         stderr=subprocess.DEVNULL)
    if not wait_port(port):
        stop(p)
        raise RuntimeError("nginx did not start (%s)" % os.path.join(d, "error.log"))
    time.sleep(0.3)  # the worker
    kids = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
    return p, port, [p.pid] + [int(k) for k in kids]


def main():
    ap = bench_args()
    ap.add_argument("--certs", default="ecdsa,rsa")
    ap.add_argument("--parallel", type=int, default=4, help="s_time clients at once in mode new-xP")
    ap.add_argument("--modes", help="default new,reuse,new-xP,wrk")
    ap.add_argument("--conns", type=int, default=50, help="wrk connections")
    ap.add_argument("--group", default=GROUP, help="ECDHE groups the clients offer, in order (nginx gets the "
                    "same list); an ECDSA P-256 certificate needs P-256 among them")
    args = ap.parse_args()
    rounds, secs = rounds_secs(args, 2, 4)
    par_mode = "new-x%d" % args.parallel
    modes = (args.modes or "new,reuse,%s,wrk" % par_mode).split(",")
    build = args.out if os.path.isabs(args.out) else os.path.join(ROOT, args.out)
    echo_bin = os.path.join(build, "echo-server")
    missing = [p for p in (echo_bin,) if not os.path.exists(p)] + \
              [t for t in ("nginx", "openssl", "taskset") + (("wrk",) if "wrk" in modes else ()) if not shutil.which(t)]
    if missing:
        print("tls bench: skipped, missing " + ", ".join(missing))
        return 0
    ncpu = os.cpu_count() or 1
    scpu, ccpu = ("0", ",".join(str(c) for c in range(1, ncpu))) if ncpu > 1 else ("0", "0")
    tmp = tempfile.mkdtemp(prefix="nsv-tls-bench-")
    results, checks = {}, {}
    procs = []
    try:
        for cid, newkey, cipher in CERTS:
            if cid not in args.certs.split(","):
                continue
            cert, key = os.path.join(tmp, cid + ".crt"), os.path.join(tmp, cid + ".key")
            subprocess.run(["openssl", "req", "-x509"] + newkey + ["-nodes", "-keyout", key, "-out", cert,
                            "-days", "2", "-subj", "/CN=localhost"], check=True, capture_output=True)
            conf = os.path.join(tmp, cid + ".cnf")
            with open(conf, "w") as f:
                f.write(OSSL_CONF.format(cipher=cipher, group=args.group))
            echo, eport = start_contract([echo_bin, "--port", "0", "--cert", cert, "--key", key], scpu)
            procs.append(echo)
            ngx, nport, npids = start_nginx(tmp, cid, cert, key, cipher, args.group, scpu)
            procs.append(ngx)
            servers = {"echo-server": (eport, [echo.pid]), "nginx": (nport, npids)}
            checks[cid] = {name: {"pinned": negotiated(port, conf, cipher), "default": negotiated(port, None)}
                           for name, (port, _) in servers.items()}
            for name, (port, _) in servers.items():  # warm (caches, the first ticket key)
                s_time(port, "new", 1, ccpu, conf, cipher)
            runs = {(m, name): [] for m in modes for name in servers}
            for r in range(rounds):
                for mode in modes:
                    order = list(servers) if r % 2 == 0 else list(reversed(servers))
                    for name in order:
                        port, pids = servers[name]
                        res0 = metric(port, "nanosrv_tls_resumed_total") if name == "echo-server" else None
                        hs0 = metric(port, "nanosrv_tls_handshakes_total") if name == "echo-server" else None
                        c0, b0 = sum(cpu_seconds(p) for p in pids), system_busy()
                        w0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                        t0 = time.time()
                        if mode == "wrk":
                            res = wrk_close(port, secs, args.conns, ccpu, conf)
                        elif mode.startswith("new-x"):
                            res = s_time(port, "new", secs, ccpu, conf, cipher, int(mode[5:]))
                        else:
                            res = s_time(port, mode, secs, ccpu, conf, cipher)
                        wall = time.time() - t0
                        w1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                        srv = sum(cpu_seconds(p) for p in pids) - c0
                        cli = (w1.ru_utime + w1.ru_stime) - (w0.ru_utime + w0.ru_stime)
                        res["cpu"] = srv / wall
                        res["client_cpu"] = cli / wall
                        # cores the rest of the machine used meanwhile (neither server nor client)
                        res["others"] = max(0.0, (system_busy() - b0 - srv - cli) / wall)
                        if res0 is not None:
                            res1 = metric(port, "nanosrv_tls_resumed_total")
                            hs1 = metric(port, "nanosrv_tls_handshakes_total")
                            # each metric() read is one full handshake of its own
                            if None not in (res1, hs1) and hs1 - hs0 > 2:
                                res["resumed"] = (res1 - res0) / (hs1 - hs0 - 2)
                        runs[(mode, name)].append(res)
            for mode in modes:
                row = {}
                for name in servers:
                    rs = runs[(mode, name)]
                    rate = statistics.median(x["rate"] for x in rs)
                    cpu = statistics.median(x["cpu"] for x in rs)
                    row[name] = {"rate": rate, "cpu": cpu, "per_core": rate / cpu if cpu > 0 else None,
                                 "client_cpu": statistics.median(x["client_cpu"] for x in rs),
                                 "runs": [x["rate"] for x in rs], "others": max(x["others"] for x in rs),
                                 "errors": sum(x.get("errors", 0) for x in rs)}
                    if any("resumed" in x for x in rs):
                        row[name]["resumed"] = statistics.median(x["resumed"] for x in rs if "resumed" in x)
                e, n = row["echo-server"], row["nginx"]
                row["ratio"] = e["rate"] / n["rate"] if n["rate"] else None
                row["ratio_per_core"] = e["per_core"] / n["per_core"] if e["per_core"] and n["per_core"] else None
                results["%s/%s" % (cid, mode)] = row
            for p in (echo, ngx):
                stop(p)
    finally:
        for p in procs:
            stop(p)
        shutil.rmtree(tmp, ignore_errors=True)

    print("tls bench: %d round(s) of %d s, server on cpu %s, clients on cpu %s, TLS 1.2, groups %s"
          % (rounds, secs, scpu, ccpu, args.group))
    for cid, c in checks.items():
        for name, v in c.items():
            p, d = v["pinned"], v["default"]
            print("  %-6s %-11s pinned: %s %s (%s), reconnect reused %d/5; OpenSSL's default offer gets %s %s"
                  % (cid, name, p["proto"], p["cipher"], p["key"], p["reused"], d["proto"], d["cipher"]))
    print("%-13s %-11s %10s %8s %8s %12s %8s  %s" % ("cert/mode", "server", "conn/s", "srv cpu", "cli cpu",
                                                       "conn/s/core", "resumed", "runs"))
    for k, row in results.items():
        for name in ("echo-server", "nginx"):
            r = row[name]
            print("%-13s %-11s %10.0f %8.2f %8.2f %12.0f %8s  %s%s" % (
                k, name, r["rate"], r["cpu"], r["client_cpu"], r["per_core"] or 0,
                "%.0f%%" % (100 * r["resumed"]) if "resumed" in r else "-",
                " ".join("%.0f" % x for x in r["runs"]), "  errors %d" % r["errors"] if r["errors"] else ""))
        print("%-13s echo-server / nginx: %.2fx conn/s, %.2fx conn/s per server core" % (
            k, row["ratio"] or 0, row["ratio_per_core"] or 0))
        busy = max(row[n]["others"] for n in ("echo-server", "nginx"))
        if busy > NOISY:
            print("%-13s BUSY MACHINE: other processes used up to %.0f%% of a core during a run; rerun"
                  % (k, busy * 100))
    with open(os.path.join(build, "tls-bench.json"), "w") as f:
        json.dump({"rounds": rounds, "duration_s": secs, "cpus": ncpu, "group": args.group, "checks": checks,
                   "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
