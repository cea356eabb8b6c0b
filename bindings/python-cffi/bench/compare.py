#!/usr/bin/python3
"""Requests per second per server core: echo.py against echo-server (C), a
Flask app under gunicorn, an ASGI app under uvicorn, the WSGI adapter, and
the same ASGI and Flask apps under `python3 -m nanosrv`.

Each server runs pinned to CPU 1 (taskset -c 1), wrk pinned to CPU 0. The
server's CPU time (utime+stime from /proc/PID/stat, children included for
pre-forking servers) is read before and after each wrk run, so the result
is independent of how much CPU other processes left to the server.

    bench/compare.py [--rounds 3] [--duration 5] [--only name,name]
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(PKG))
LIB = os.environ.get("NANOSRV_LIBRARY") or os.path.join(ROOT, "build", "libnanosrv.so.1")
os.environ["NANOSRV_LIBRARY"] = LIB
BUILD = os.path.dirname(LIB)
TICK = os.sysconf("SC_CLK_TCK")
PY = "/usr/bin/python3"


def servers(port):
    env_py = dict(os.environ, PYTHONPATH=PKG + ":" + HERE)
    return {
        "echo-server (C)": ([os.path.join(BUILD, "echo-server"), "--port", str(port)], None),
        "echo.py (nanosrv cffi)": ([PY, os.path.join(PKG, "examples", "echo.py"), "--port", str(port)], env_py),
        "Flask under nanosrv.wsgi": ([PY, os.path.join(HERE, "apps.py"), "nanosrv-wsgi", str(port)], env_py),
        "Flask under gunicorn (sync, 1 worker)": (["gunicorn", "-w", "1", "-b", "127.0.0.1:%d" % port,
                                                   "--log-level", "warning", "apps:flask_app"], env_py),
        "ASGI app under uvicorn": ([PY, "-m", "uvicorn", "--port", str(port), "--log-level", "warning",
                                    "--no-access-log", "apps:asgi_app"], env_py),
        # The same two apps under nanosrv's server command (nanosrv.asgi, nanosrv.wsgi with threads)
        "ASGI app under python3 -m nanosrv": ([PY, "-m", "nanosrv", "apps:asgi_app", "--interface", "asgi",
                                               "--port", str(port), "--log-level", "warning",
                                               "--no-access-log"], env_py),
        "Flask under python3 -m nanosrv --interface wsgi": ([PY, "-m", "nanosrv", "apps:flask_app", "--interface",
                                                             "wsgi", "--port", str(port), "--log-level", "warning",
                                                             "--no-access-log"], env_py),
        "aiohttp": ([PY, os.path.join(HERE, "apps.py"), "aiohttp", str(port)], env_py),
    }


def cpu_ticks(pid):
    """utime+stime of pid and its threads, plus those of its live children."""
    total = 0
    pids = [pid]
    try:
        pids += [int(p) for p in open("/proc/%d/task/%d/children" % (pid, pid)).read().split()]
    except OSError:
        pass
    for p in pids:
        try:
            f = open("/proc/%d/stat" % p).read().rsplit(")", 1)[1].split()
            total += int(f[11]) + int(f[12])
        except OSError:
            pass
    return total


def wait_ready(port, proc, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError("server exited with %s" % proc.returncode)
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=1).read()
            return
        except Exception:
            time.sleep(0.1)
    raise RuntimeError("server not ready")


def run_one(name, cmd, env, port, duration, conns):
    proc = subprocess.Popen(["taskset", "-c", "1"] + cmd, env=env, cwd=HERE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, proc)
        subprocess.run(["taskset", "-c", "0", "wrk", "-t1", "-c%d" % conns, "-d1s",
                        "http://127.0.0.1:%d/" % port], capture_output=True)  # warm-up
        t0 = cpu_ticks(proc.pid)
        out = subprocess.run(["taskset", "-c", "0", "wrk", "-t1", "-c%d" % conns, "-d%ds" % duration,
                              "http://127.0.0.1:%d/" % port], capture_output=True, text=True).stdout
        cpu = (cpu_ticks(proc.pid) - t0) / TICK
        reqs = int(re.search(r"(\d+) requests in", out).group(1))
        rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
        errors = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: .*", out)
        return rps, (reqs / cpu if cpu else 0.0), cpu, errors.group(0) if errors else ""
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--conns", type=int, default=50)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    port = 18900
    table = servers(port)
    names = [n for n in table if not a.only or any(k in n for k in a.only.split(","))]
    results = {n: [] for n in names}
    print("load before:", os.getloadavg())
    for r in range(a.rounds):
        for n in names:
            cmd, env = table[n]
            try:
                res = run_one(n, cmd, env, port, a.duration, a.conns)
            except Exception as e:
                print("  %-40s round %d: %s" % (n, r + 1, e))
                continue
            results[n].append(res)
            print("  %-40s round %d: %9.0f req/s  %9.0f req/s/core  cpu %.2fs %s" % ((n, r + 1) + res))
            sys.stdout.flush()
    print("load after:", os.getloadavg())
    base = None
    print("\n| server | req/s (wall, median) | req/s per server core (median) | vs C |")
    print("|---|---:|---:|---:|")
    for n in names:
        if not results[n]:
            continue
        rps = sorted(x[0] for x in results[n])[len(results[n]) // 2]
        per = sorted(x[1] for x in results[n])[len(results[n]) // 2]
        base = base or per
        print("| %s | %.0f | %.0f | %.2f |" % (n, rps, per, per / base))


if __name__ == "__main__":
    main()
