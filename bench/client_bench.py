#!/usr/bin/env python3
"""HTTP client throughput: the library's client (bench/client_bench.c, one
loop) beside curl's multi interface (curl --parallel --parallel-max C) and
Node's fetch (undici, C async loops), all issuing N keep-alive GET requests
with C in flight to the same build/echo-server (GET answers a ~90-byte JSON).

Method: the server runs under `taskset -c 1`, each client under
`taskset -c 0` (--server-cpus / --client-cpus). Each client gets a warm-up
first (nsv and Node in the same process, N/10 requests, untimed; curl pays
no JIT and its warm-up is a separate run). Then per round the three take
turns, the order rotated every round; req/s is N divided by the timed part
(nsv and Node time themselves; curl's time is its process wall time, so it
includes its start, about a millisecond). Medians over rounds are printed,
with the ratio of nsv to each other client. Usage:
  bench/client_bench.py [--out build] [--requests 20000] [--concurrency 1,16,64]
                        [--rounds 3] [--clients nsv,curl,node]"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

NODE_FETCH = r"""
const [url, n, c, warm] = process.argv.slice(1).map((v, i) => i ? +v : v);
async function run(total) {
  let started = 0, errors = 0;
  async function worker() {
    while (started < total) {
      started++;
      try { const r = await fetch(url); await r.arrayBuffer(); if (r.status !== 200) errors++; }
      catch (e) { errors++; }
    }
  }
  await Promise.all(Array.from({length: c}, worker));
  return errors;
}
(async () => {
  if (warm) await run(warm);
  const t0 = process.hrtime.bigint();
  const errors = await run(n);
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  console.log(`requests=${n} errors=${errors} seconds=${s.toFixed(3)} rps=${Math.round(n / s)}`);
  process.exit(errors ? 1 : 0);
})();
"""


def start_server(out, cpus):
    argv = ["taskset", "-c", cpus, os.path.join(out, "echo-server"), "--port", "0"]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    line = p.stdout.readline().decode()
    if not line.startswith("listening on "):
        p.kill()
        sys.exit("client_bench: echo-server did not start: %r" % line)
    return p, int(line.split()[2])


def parse(text):
    m = re.search(r"requests=(\d+) errors=(\d+) seconds=([\d.]+) rps=(\d+)", text)
    return (int(m.group(2)), float(m.group(4))) if m else None


def run_nsv(a, url, n, c):
    p = subprocess.run(["taskset", "-c", a.client_cpus, os.path.join(a.out, "bench", "client_bench"), url,
                        str(n), str(c), str(max(n // 10, c))], capture_output=True, timeout=600)
    return parse(p.stdout.decode()), p.stderr.decode()[-300:]


def run_node(a, url, n, c):
    p = subprocess.run(["taskset", "-c", a.client_cpus, "node", "-e", NODE_FETCH, url, str(n), str(c),
                        str(max(n // 10, c))], capture_output=True, timeout=600)
    return parse(p.stdout.decode()), p.stderr.decode()[-300:]


def run_curl(a, url, n, c, cfg):
    argv = ["taskset", "-c", a.client_cpus, "curl", "-s", "--parallel", "--parallel-max", str(c), "-K", cfg,
            "-w", "%{http_code}\n"]
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, timeout=600)
    dt = time.monotonic() - t0
    codes = p.stdout.decode().split()
    errors = sum(1 for x in codes if x != "200") + (n - len(codes))
    return (errors, n / dt), p.stderr.decode()[-300:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="build")
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--concurrency", default="1,16,64")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", default="nsv,curl,node")
    ap.add_argument("--server-cpus", default="1")
    ap.add_argument("--client-cpus", default="0")
    a = ap.parse_args()
    a.out = os.path.join(ROOT, a.out) if not os.path.isabs(a.out) else a.out
    clients = [x for x in a.clients.split(",") if x]
    for name, tool in (("curl", "curl"), ("node", "node")):
        if name in clients and not shutil.which(tool):
            print("client_bench: %s not found; skipped" % tool)
            clients.remove(name)
    if not os.access(os.path.join(a.out, "bench", "client_bench"), os.X_OK) and "nsv" in clients:
        sys.exit("client_bench: %s/bench/client_bench missing (make bench-client)" % a.out)
    srv, port = start_server(a.out, a.server_cpus)
    url = "http://127.0.0.1:%d/bench" % port
    tmp = tempfile.mkdtemp(prefix="nsv-client-bench-")
    results = {}
    try:
        for c in [int(x) for x in a.concurrency.split(",")]:
            n = a.requests
            cfg = os.path.join(tmp, "curl-%d.cfg" % n)
            if not os.path.exists(cfg):
                with open(cfg, "w") as f:
                    f.write(('url = "%s"\noutput = "/dev/null"\n' % url) * n)
            if "curl" in clients:  # warm-up: page cache, the server's first connections
                wcfg = os.path.join(tmp, "curl-warm.cfg")
                with open(wcfg, "w") as f:
                    f.write(('url = "%s"\noutput = "/dev/null"\n' % url) * max(n // 10, c))
                run_curl(a, url, max(n // 10, c), c, wcfg)
            runs = {k: [] for k in clients}
            for r in range(a.rounds):
                order = clients[r % len(clients):] + clients[:r % len(clients)]
                for k in order:
                    res, err = (run_nsv(a, url, n, c) if k == "nsv" else
                                run_node(a, url, n, c) if k == "node" else run_curl(a, url, n, c, cfg))
                    if res is None or res[0]:
                        print("client_bench: %s C=%d failed (%s): %s" % (k, c, res, err.strip()))
                    if res is not None:
                        runs[k].append(res[1])
            results[c] = {k: statistics.median(v) if v else None for k, v in runs.items()}
            print("C=%-3d " % c + "  ".join("%s %8.0f req/s" % (k, v) if v else "%s failed" % k
                                           for k, v in results[c].items()), flush=True)
    finally:
        srv.terminate()
        try:
            srv.wait(10)
        except subprocess.TimeoutExpired:
            srv.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    print("\nN=%d GET per run, median of %d rounds; server on cpu %s, clients on cpu %s"
          % (a.requests, a.rounds, a.server_cpus, a.client_cpus))
    head = "%-6s" % "C" + "".join("%14s" % ("%s req/s" % k) for k in clients)
    others = [k for k in clients if k != "nsv"]
    if "nsv" in clients:
        head += "".join("%14s" % ("nsv/%s" % k) for k in others)
    print(head)
    for c, row in results.items():
        line = "%-6d" % c + "".join("%14s" % ("%.0f" % row[k] if row[k] else "-") for k in clients)
        if "nsv" in clients:
            line += "".join("%14s" % ("%.2fx" % (row["nsv"] / row[k]) if row["nsv"] and row[k] else "-")
                            for k in others)
        print(line)


if __name__ == "__main__":
    main()
