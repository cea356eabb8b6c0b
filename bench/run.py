#!/usr/bin/python3
"""Macro-benchmark orchestrator: starts each server pinned to one core, drives
it from the other core, interleaves servers round-robin over several rounds,
and writes a terminal table, build/bench-results.json and
build/bench-report.html. Standard library only. See bench/METHOD.md.

    bench/run.py [--quick] [--cases a,b] [--servers x,y] [--rounds N] [--duration S]
"""
import argparse
import http.client
import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
NOISY = 10  # % of a core used by other processes during a run that makes it "noisy"
ROUTE_PATH = "/dummy/{i}/x"  # echo-server --routes N registers GET /dummy/<i>/:id
# A query that echo-server's JSON answer repeats: about 4 KiB of JSON.
JSON_4K_PATH = "/items?" + "&".join(f"item{i}=value-{i * 37 % 1000}" for i in range(240))
# Files for the static cases, the same for every server (echo-server --static,
# nginx alias). A fixed mtime makes the ETag known in advance: both servers
# write it as "mtime-size" in hex, so one If-None-Match fits both.
STATIC_DIR = os.path.join(ROOT, "build", "bench-static")
STATIC_MTIME = 1700000000
STATIC_SMALL = 1024
STATIC_BIG = 64 << 20
STATIC_ETAG = '"%x-%x"' % (STATIC_MTIME, STATIC_SMALL)


def ensure_static():
    """Writes the static cases' files once (1 KiB CSS, 64 MiB binary)."""
    os.makedirs(STATIC_DIR, exist_ok=True)
    for name, size in (("small.css", STATIC_SMALL), ("big.bin", STATIC_BIG)):
        path = os.path.join(STATIC_DIR, name)
        if not os.path.exists(path) or os.path.getsize(path) != size:
            with open(path, "wb") as f:
                block = (b"body{margin:0}\n" * 4096)[: 1 << 16] if size < (1 << 16) else os.urandom(1 << 20)
                left = size
                while left:
                    piece = block[: min(left, len(block))]
                    f.write(piece)
                    left -= len(piece)
        os.utime(path, (STATIC_MTIME, STATIC_MTIME))


NGX_REF = os.path.join(ROOT, "tools", "ngx-lua-ref.sh")
RESTY_ECHO = "bench/peers/resty_echo.lua"


def ngx_ref_fetch():
    """Unpacks the nginx+lua reference once (a no-op when done); why not, or None."""
    try:
        r = subprocess.run([NGX_REF, "fetch"], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{NGX_REF} fetch: {e}"
    return None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["fetch failed"])[-1]


def ngx_ref_env():
    """LD_LIBRARY_PATH at the unpacked OpenResty LuaJIT (as the script prints it)."""
    return {"LD_LIBRARY_PATH": os.path.join(ROOT, "build", "ngx-lua-ref", "usr", "lib", "x86_64-linux-gnu")}


def ngx_ref_conf(dirname, port):
    subprocess.run([NGX_REF, "conf", dirname, os.path.join(ROOT, RESTY_ECHO), str(port)], check=True,
                   timeout=30)


class Server:
    """One server configuration. argv may use {port} and {dir}; contract
    servers get --port 0 and announce "listening on PORT" on stdout."""

    def __init__(self, name, argv, caps, quick=False, contract=True, needs=(),
                 conf=None, warm=False, cwd=ROOT, hint="", env=None, modules=(), probe=None,
                 alias=None, setup=None, prepare=None):
        self.name, self.argv, self.caps, self.quick = name, argv, set(caps), quick
        self.contract, self.needs, self.conf, self.warm, self.cwd = contract, needs, conf, warm, cwd
        self.hint, self.env, self.modules = hint, env or {}, modules
        # probe(case): why this server cannot run that case (None: it can).
        self.probe = probe
        # alias: a short name for --servers. setup(): fetches what the server
        # needs, returns why it cannot run (None: it can); asked once.
        # prepare(dir, port): writes its configuration before each start.
        self.alias, self.setup, self.prepare = alias, setup, prepare
        self._setup_why = None

    def missing(self):
        for m in self.modules:  # Python packages the server or the app imports (Debian's python3)
            if not python_has(m):
                return "no Python module " + m + " (Debian python3-" + m.replace("_", "-") + ")"
        for n in self.needs:
            if os.path.isabs(n) or "/" in n:
                path = n if os.path.isabs(n) else os.path.join(ROOT, n)
                if not os.path.exists(path):
                    return "missing " + n + self.hint
            elif not shutil.which(n):
                return "no " + n + " in PATH"
        if self.setup:
            if self._setup_why is None:
                self._setup_why = self.setup() or ""
            return self._setup_why or None
        return None


class Case:
    """One measurement. kind: wrk | ws | rss. need: the capability a server
    must have. args: extra server flags. baseline: (server, case) whose
    median is the ratio's denominator; None case means this case."""

    def __init__(self, cid, title, kind="wrk", need="http", conns=50, path="/", script=None,
                 headers=(), args=(), size=0, hold=0, baseline=("ceiling", None), quick=False,
                 expect_non2xx=False, upload=0, app=None, goal=None, ratio_key=None):
        self.id, self.title, self.kind, self.need, self.conns = cid, title, kind, need, conns
        self.path, self.script, self.headers, self.args, self.size = path, script, headers, args, size
        self.hold, self.baseline, self.quick, self.expect_non2xx = hold, baseline, quick, expect_non2xx
        self.upload = upload
        # Python app cases: the app (MODULE:ATTR in tests/apps) each server runs,
        # the ratio's metric (req/s/core: the goals are per server core) and the
        # goal that nanosrv rows are held to (printed beside their ratio).
        self.app, self.goal, self.ratio_key = app, goal, ratio_key


# Capabilities: http (GET and POST; ceiling and nginx read a POST body but answer
# their canned 2 bytes), busy (--busy-us), routes (--routes), ws (/ws echo).
# The bindings' echo examples follow the same contract as echo-server.
ECHO = {"http", "busy", "routes", "ws", "static"}
# echo-server also parses POST /upload (multipart) as it streams in, and has --gzip
ECHO_C = ECHO | {"upload", "gzip"}
SERVERS = [
    Server("ceiling", ["build/bench/ceiling"], {"http"}, quick=True, needs=["build/bench/ceiling"]),
    Server("echo-server", ["build/echo-server"], ECHO_C, quick=True, needs=["build/echo-server"], alias="c"),
    Server("echo-server -t2", ["build/echo-server", "--threads", "2"], ECHO_C, quick=True,
           needs=["build/echo-server"]),
    Server("echo-server -t2 handoff", ["build/echo-server", "--threads", "2", "--accept", "handoff"], ECHO,
           needs=["build/echo-server"]),
    Server("lua echo", ["luajit", "bindings/lua/examples/echo.lua"], ECHO, quick=True, warm=True,
           needs=["luajit", "bindings/lua/examples/echo.lua"], alias="lua"),
    # The OpenResty-style runner with the echo contract as a content handler
    # file; nginx+lua below runs the same file.
    Server("resty", ["luajit", "bindings/lua/examples/resty.lua", "--port", "{port}", RESTY_ECHO], {"http"},
           contract=False, warm=True, needs=["luajit", "bindings/lua/examples/resty.lua", RESTY_ECHO]),
    Server("python echo", ["/usr/bin/python3", "bindings/python-cffi/examples/echo.py"], ECHO,
           quick=True, needs=["bindings/python-cffi/examples/echo.py"]),
    Server("node echo koffi", ["node", "bindings/node-ffi/examples/echo.js", "--backend", "koffi"],
           ECHO, quick=True, warm=True, needs=["node", "bindings/node-ffi/examples/echo.js"]),
    Server("node echo ffi-napi", ["node", "bindings/node-ffi/examples/echo.js", "--backend", "ffi-napi"],
           ECHO, warm=True, needs=["node", "bindings/node-ffi/examples/echo.js"]),
    Server("nginx", ["nginx", "-p", "{dir}", "-c", "{dir}/nginx.conf"], {"http", "static"}, quick=True,
           contract=False, conf="bench/peers/nginx.conf.in", needs=["nginx"]),
    # lua-nginx-module on OpenResty's LuaJIT, unpacked beside Debian's luajit
    # by tools/ngx-lua-ref.sh (bench/METHOD.md); run here in the foreground
    # so that it is pinned and its CPU time counted like the others.
    Server("nginx+lua", ["nginx", "-p", "{dir}", "-c", "{dir}/nginx.conf", "-e", "{dir}/error.log",
                         "-g", "daemon off;"], {"http"},
           contract=False, warm=True, needs=["nginx", RESTY_ECHO], env=ngx_ref_env(),
           setup=ngx_ref_fetch, prepare=ngx_ref_conf),
    Server("libmicrohttpd", ["build/bench/mhd_server"], {"http"},
           needs=["build/bench/mhd_server"]),
    Server("libmicrohttpd poll", ["build/bench/mhd_server", "--poll"], {"http"},
           needs=["build/bench/mhd_server"]),
    Server("node http", ["node", "bench/peers/node_http.js"], {"http", "ws"}, warm=True,
           needs=["node"]),
    Server("gunicorn+flask", ["gunicorn", "-w", "1", "-k", "gthread", "--threads", "4",
                              "--worker-connections", "12000", "--keep-alive", "300",
                              "--backlog", "4096", "-b", "127.0.0.1:{port}", "flask_app:app"],
           {"http"}, contract=False, cwd=os.path.join(BENCH, "peers"), needs=["gunicorn"]),
    Server("uvicorn", ["uvicorn", "--port", "{port}", "--no-access-log", "--log-level", "warning",
                       "--timeout-keep-alive", "300", "--backlog", "4096", "asgi_app:app"],
           {"http", "ws"}, contract=False, cwd=os.path.join(BENCH, "peers"),
           needs=["uvicorn"]),
]

# The Python app servers (bench/METHOD.md "Python apps"): the framework
# suites' apps in bindings/python-cffi/tests/apps under nanosrv's server
# command, uvicorn (uvloop + httptools), hypercorn (uvloop) and gunicorn,
# each with one worker process and with two. Debian's python3 runs all of
# them; {app} is the case's app.
PY = "/usr/bin/python3"
APPS = os.path.join(ROOT, "bindings", "python-cffi", "tests", "apps")
PY_ENV = {"PYTHONPATH": os.pathsep.join([APPS, os.path.join(ROOT, "bindings", "python-cffi")])}
ASGI_MODS = ("fastapi", "starlette", "multipart")
WSGI_MODS = ("flask", "django")


def _py_servers():
    out = []
    for w in (1, 2):
        tag = "" if w == 1 else " -w2"
        out += [
            Server("py nanosrv" + tag, [PY, "-m", "nanosrv", "{app}", "--interface", "asgi", "--host", "127.0.0.1",
                                        "--workers", str(w), "--no-access-log", "--log-level", "warning"],
                   {"asgi-app", "asgi-ws"}, env=PY_ENV, cwd=APPS, warm=True, modules=ASGI_MODS,
                   needs=["bindings/python-cffi/nanosrv/__main__.py"]),
            Server("py uvicorn" + tag, [PY, "-m", "uvicorn", "{app}", "--host", "127.0.0.1", "--port", "{port}",
                                        "--workers", str(w), "--loop", "uvloop", "--http", "httptools",
                                        "--no-access-log", "--log-level", "warning", "--timeout-keep-alive", "300",
                                        "--backlog", "4096"],
                   {"asgi-app", "asgi-ws"}, contract=False, env=PY_ENV, cwd=APPS, warm=True,
                   modules=ASGI_MODS + ("uvicorn", "uvloop", "httptools", "websockets")),
            Server("py hypercorn" + tag, [PY, "-m", "hypercorn", "{app}", "-b", "127.0.0.1:{port}", "-w", str(w),
                                          "-k", "uvloop", "--keep-alive", "300", "--backlog", "4096",
                                          "--log-level", "warning"],
                   {"asgi-app", "asgi-ws"}, contract=False, env=PY_ENV, cwd=APPS, warm=True,
                   modules=ASGI_MODS + ("hypercorn", "uvloop")),
            Server("py nanosrv wsgi" + tag, [PY, "-m", "nanosrv", "{app}", "--interface", "wsgi", "--host",
                                             "127.0.0.1", "--workers", str(w), "--threads", "4",
                                             "--no-access-log", "--log-level", "warning"],
                   {"wsgi-app"}, env=PY_ENV, cwd=APPS, warm=True, modules=WSGI_MODS,
                   needs=["bindings/python-cffi/nanosrv/__main__.py"]),
            Server("py gunicorn sync" + tag, [PY, "-m", "gunicorn", "{app}", "-b", "127.0.0.1:{port}", "-w", str(w),
                                              "-k", "sync", "--backlog", "4096", "--log-level", "warning"],
                   {"wsgi-app"}, contract=False, env=PY_ENV, cwd=APPS, warm=True, modules=WSGI_MODS + ("gunicorn",)),
            Server("py gunicorn gthread" + tag, [PY, "-m", "gunicorn", "{app}", "-b", "127.0.0.1:{port}", "-w",
                                                 str(w), "-k", "gthread", "--threads", "4", "--worker-connections",
                                                 "12000", "--keep-alive", "300", "--backlog", "4096",
                                                 "--log-level", "warning"],
                   {"wsgi-app"}, contract=False, env=PY_ENV, cwd=APPS, warm=True, modules=WSGI_MODS + ("gunicorn",)),
        ]
    return out


SERVERS += _py_servers()

# The Node app servers (bench/METHOD.md "Node apps"): bench/node/app.js runs
# the case's app ({app}: express, fastify, hono, native) on nanosrv or on
# node:http, with the frameworks of bindings/node-ffi/node_modules.
NODE_PKG = os.path.join(ROOT, "bindings", "node-ffi")
NODE_FRAMEWORKS = {"express": "express", "fastify": "fastify", "hono": "hono", "native": None}
_NODE_SERVE = {}


def node_has_serve():
    """Whether require('nanosrv') has serve({ fetch }) (asked once)."""
    if "ok" not in _NODE_SERVE:
        code = "process.exit(typeof require(process.argv[1]).serve === 'function' ? 0 : 1)"
        try:
            _NODE_SERVE["ok"] = subprocess.run(["node", "-e", code, NODE_PKG], capture_output=True,
                                               timeout=30).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _NODE_SERVE["ok"] = False
    return _NODE_SERVE["ok"]


def node_app_probe(on):
    def probe(case):
        pkgs = ["koffi"] + ([NODE_FRAMEWORKS[case.app]] if NODE_FRAMEWORKS.get(case.app) else [])
        for pkg in pkgs:
            if not os.path.isdir(os.path.join(NODE_PKG, "node_modules", pkg)):
                return f"no {pkg} in bindings/node-ffi/node_modules (run bindings/node-ffi/install.sh)"
        if on == "nanosrv" and case.app == "hono" and not node_has_serve():
            return "require('nanosrv') has no serve({ fetch })"
        return None
    return probe


SERVERS += [
    Server("node nanosrv", ["node", "bench/node/app.js", "{app}", "--on", "nanosrv"], {"node-app"}, warm=True,
           needs=["node", "bench/node/app.js"], probe=node_app_probe("nanosrv")),
    Server("node node:http", ["node", "bench/node/app.js", "{app}", "--on", "node"], {"node-app"}, warm=True,
           needs=["node", "bench/node/app.js"], probe=node_app_probe("node")),
]

WS_BASE = ("node http", None)
CASES = [
    Case("get-50", "GET keep-alive, 50 conns", quick=True),
    # The resty comparison's cases (COMPARE below): small answer, and a ~4 KiB one.
    Case("1x64", "GET keep-alive, 64 conns (wrk -t1 -c64)", conns=64),
    Case("json-64", "GET, ~4 KiB JSON answer, 64 conns", conns=64, path=JSON_4K_PATH),
    Case("get-256", "GET keep-alive, 256 conns", conns=256),
    Case("pipeline-16", "GET pipelined 16 deep, 50 conns", script="pipeline.lua", quick=True),
    Case("post-4k", "POST /echo 4 KiB body, 50 conns", script="post4k.lua", quick=True),
    Case("close", "GET, Connection: close each request", headers=["Connection: close"], quick=True),
] + [
    Case(f"busy-{us}", f"busy handler {us} us, 50 conns", need="busy", args=["--busy-us", str(us)],
         baseline=("echo-server", None)) for us in (0, 10, 50, 100, 500)
] + [
    Case(f"routes-{n}-{hm}", f"{n} routes, {'hit' if hm == 'hit' else '404'}", need="routes",
         args=["--routes", str(n)], path=ROUTE_PATH.format(i=n // 2) if hm == "hit" else "/no/such/route",
         baseline=("echo-server", "routes-5-hit"), expect_non2xx=hm == "miss")
    for n in (5, 1000, 10000) for hm in ("hit", "miss")
] + [
    Case("ws-64", "WebSocket echo 64 B, 50 conns", kind="ws", need="ws", size=64, baseline=WS_BASE),
    Case("ws-64k", "WebSocket echo 64 KiB, 50 conns", kind="ws", need="ws", size=65536,
         baseline=WS_BASE),
    Case("json-4k", "GET, ~4 KiB JSON answer, 50 conns", need="gzip", path=JSON_4K_PATH,
         headers=["Accept-Encoding: gzip"], baseline=("echo-server", None)),
    Case("json-4k-gzip", "GET, ~4 KiB JSON answer gzipped (--gzip 1024), 50 conns", need="gzip",
         path=JSON_4K_PATH, headers=["Accept-Encoding: gzip"], args=["--gzip", "1024"],
         baseline=("echo-server", "json-4k")),
    Case("static-1k", "static 1 KiB file, 50 conns", need="static", path="/static/small.css",
         args=["--static", STATIC_DIR], baseline=("nginx", None)),
    Case("static-304", "static If-None-Match -> 304, 50 conns", need="static", path="/static/small.css",
         headers=["If-None-Match: " + STATIC_ETAG], args=["--static", STATIC_DIR], baseline=("nginx", None),
         expect_non2xx=True),
    Case("static-64m", "static 64 MiB file, 4 conns (MiB/s = req/s x 64)", need="static", conns=4,
         path="/static/big.bin", args=["--static", STATIC_DIR], baseline=("nginx", None)),
    Case("rss-idle", "RSS idle", kind="rss", quick=True),
    Case("rss-10k", "RSS with 10,000 idle keep-alive conns", kind="rss", hold=10000),
    Case("rss-upload", "peak RSS growth, 100 MiB multipart POST /upload", kind="rss", need="upload",
         upload=100 << 20, args=["--max-body", str(200 << 20)], baseline=("echo-server", None)),
]

# The Python app cases: the same route of the same app under every server
# of its interface; the ratio is req/s per server core against the named
# baseline, and nanosrv rows show the goal beside it.
ASGI_BASE, WSGI_BASE = "py uvicorn", "py gunicorn gthread"
for _app, _mod in (("fastapi", "fastapi_app:app"), ("starlette", "starlette_app:bench_app")):
    CASES += [
        Case(f"{_app}-plaintext", f"{_app} GET /plaintext, 50 conns", need="asgi-app", path="/plaintext",
             app=_mod, baseline=(ASGI_BASE, None), goal=2.0, ratio_key="rps_per_core"),
        Case(f"{_app}-json", f"{_app} GET /json, 50 conns", need="asgi-app", path="/json",
             app=_mod, baseline=(ASGI_BASE, None), goal=2.0, ratio_key="rps_per_core"),
        Case(f"{_app}-param", f"{_app} GET /users/{{user_id}} (path param), 50 conns", need="asgi-app",
             path="/users/12345", app=_mod, baseline=(ASGI_BASE, None), goal=2.0, ratio_key="rps_per_core"),
        Case(f"{_app}-ws", f"{_app} WebSocket echo 64 B on /ws, 50 conns", kind="ws", need="asgi-ws", size=64,
             app=_mod, baseline=(ASGI_BASE, None), goal=2.0, ratio_key="rps_per_core"),
    ]
for _app, _mod, _json, _param in (("flask", "flask_app:app", "/json", "/users/12345"),
                                  ("django", "django_wsgi_app:app", "/hello/bench/", "/articles/2024/bench/")):
    CASES += [
        Case(f"{_app}-plaintext", f"{_app} (WSGI) GET /plaintext, 50 conns", need="wsgi-app", path="/plaintext",
             app=_mod, baseline=(WSGI_BASE, None), goal=3.0, ratio_key="rps_per_core"),
        Case(f"{_app}-json", f"{_app} (WSGI) GET {_json} (JSON), 50 conns", need="wsgi-app", path=_json,
             app=_mod, baseline=(WSGI_BASE, None), goal=3.0, ratio_key="rps_per_core"),
        Case(f"{_app}-param", f"{_app} (WSGI) GET {_param} (path params), 50 conns", need="wsgi-app",
             path=_param, app=_mod, baseline=(WSGI_BASE, None), goal=3.0, ratio_key="rps_per_core"),
    ]

# The Node app cases: the same app on nanosrv (nanosrv/http, serve({ fetch })
# for Hono, the native API for "native") and on node:http; req/s per server
# core against node:http, with the goal beside the nanosrv row.
NODE_BASE = "node node:http"
for _app, _title, _goal in (("express", "Express 4", 1.5), ("fastify", "Fastify 5 (serverFactory)", 1.5),
                            ("hono", "Hono 4 (fetch)", 2.0), ("native", "native API", 2.5)):
    for _route, _path in (("plaintext", "/plaintext"), ("json", "/json"), ("param", "/users/12345")):
        CASES.append(Case(f"node-{_app}-{_route}", f"{_title} GET {_path}, 50 conns", need="node-app",
                          path=_path, app=_app, baseline=(NODE_BASE, None), goal=_goal,
                          ratio_key="rps_per_core"))


_PY_MODULES = {}


def python_has(module):
    """Whether Debian's python3 imports `module` (asked once per module)."""
    if module not in _PY_MODULES:
        _PY_MODULES[module] = subprocess.run([PY, "-c", "import " + module], capture_output=True).returncode == 0
    return _PY_MODULES[module]


# ---------------------------------------------------------------- processes

def raise_nofile():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class Running:
    """A started server: its own process group, so stopping it by PID also
    reaches workers it forked (nginx, gunicorn)."""

    def __init__(self, srv, args, cpus, logdir, app=None):
        self.srv, self.proc = srv, None
        tag = re.sub(r"[^a-z0-9]+", "-", srv.name.lower())
        self.dir = os.path.join(logdir, tag)
        os.makedirs(self.dir, exist_ok=True)
        port = 0 if srv.contract else free_port()
        if srv.conf:
            with open(os.path.join(ROOT, srv.conf)) as f:
                conf = f.read()
            conf = conf.replace("@PORT@", str(port)).replace("@DIR@", self.dir).replace("@STATIC@", STATIC_DIR)
            with open(os.path.join(self.dir, "nginx.conf"), "w") as f:
                f.write(conf)
        if srv.prepare:
            srv.prepare(self.dir, port)
        # A case's arguments are echo-contract flags (--static, --busy-us, ...).
        argv = [a.format(port=port, dir=self.dir, app=app) for a in srv.argv] + (list(args) if srv.contract else [])
        if srv.contract:
            argv += ["--port", "0"]
        self.out_path = os.path.join(self.dir, "stdout.log")
        with open(self.out_path, "w") as out, open(os.path.join(self.dir, "stderr.log"), "a") as err:
            env = dict(os.environ, **srv.env) if srv.env else None
            self.proc = subprocess.Popen(["taskset", "-c", cpus] + argv, cwd=srv.cwd, stdout=out,
                                         stderr=err, stdin=subprocess.DEVNULL, env=env,
                                         preexec_fn=raise_nofile, start_new_session=True)
        self.port = self._wait_ready(port)

    def _wait_ready(self, port, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"exited with {self.proc.returncode} (see {self.dir}/stderr.log)")
            if self.srv.contract:
                with open(self.out_path) as f:
                    m = re.search(r"listening on (\d+)", f.read())
                if m and port_open(int(m.group(1))):
                    return int(m.group(1))
            elif port_open(port):
                return port
            time.sleep(0.02)
        raise RuntimeError(f"not ready after {timeout}s (see {self.dir})")

    def pids(self):
        """The server and all its descendants (workers, threads count once)."""
        kids = {}
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as f:
                        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                    kids.setdefault(ppid, []).append(int(d))
                except (OSError, IndexError, ValueError):
                    pass
        out, todo = [], [self.proc.pid]
        while todo:
            p = todo.pop()
            out.append(p)
            todo += kids.get(p, [])
        return out

    def cpu_seconds(self):
        total = 0
        for p in self.pids():
            try:
                with open(f"/proc/{p}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])  # utime + stime
            except (OSError, IndexError):
                pass
        return total / os.sysconf("SC_CLK_TCK")

    def rss_kib(self):
        """Sum over the process tree: pages shared by nginx or gunicorn
        master and worker are counted twice, which slightly overstates them."""
        total = 0
        for p in self.pids():
            try:
                with open(f"/proc/{p}/status") as f:
                    m = re.search(r"VmRSS:\s+(\d+)", f.read())
                total += int(m.group(1)) if m else 0
            except OSError:
                pass
        return total

    def hwm_kib(self):
        """Peak RSS (VmHWM), summed over the process tree like rss_kib."""
        total = 0
        for p in self.pids():
            try:
                with open(f"/proc/{p}/status") as f:
                    m = re.search(r"VmHWM:\s+(\d+)", f.read())
                total += int(m.group(1)) if m else 0
            except OSError:
                pass
        return total

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 3), (signal.SIGKILL, 3)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                pass


# ---------------------------------------------------------------- load runs

UNIT = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}


def ms(text):
    m = re.match(r"([\d.]+)(us|ms|s|m)$", text)
    return float(m.group(1)) * UNIT[m.group(2)] if m else None


def parse_wrk(out):
    r = {"errors": {"connect": 0, "read": 0, "write": 0, "timeout": 0, "non2xx": 0}}
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+)", out)
    if not m:
        raise RuntimeError("unparsable wrk output: " + out[-300:])
    r["requests"] = int(m.group(1))
    r["rps"] = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    for pct, key in (("50", "p50_ms"), ("99", "p99_ms")):
        m = re.search(rf"^\s+{pct}%\s+(\S+)", out, re.M)
        r[key] = (ms(m.group(1)) or None) if m else None  # wrk prints 0 when it has no samples
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m:
        for k, v in zip(("connect", "read", "write", "timeout"), m.groups()):
            r["errors"][k] = int(v)
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if m:
        r["errors"]["non2xx"] = int(m.group(1))
    return r


def load_wrk(case, port, secs, cpus):
    argv = ["taskset", "-c", cpus, "wrk", "-t1", f"-c{case.conns}", f"-d{secs}s", "--latency"]
    if case.script:
        argv += ["-s", os.path.join(BENCH, case.script)]
    for h in case.headers:
        argv += ["-H", h]
    out = subprocess.run(argv + [f"http://127.0.0.1:{port}{case.path}"], capture_output=True,
                         text=True, timeout=secs + 30, preexec_fn=raise_nofile)
    if out.returncode:
        raise RuntimeError("wrk failed: " + out.stderr.strip()[-300:])
    r = parse_wrk(out.stdout)
    if r["requests"] == 0:
        r["errors"]["no_responses"] = 1
    if case.expect_non2xx:  # a 404 is the point of the case, not a failure
        r["non2xx_expected"] = r["errors"].pop("non2xx")
    return r


def load_ws(case, port, secs, cpus, bindir):
    argv = ["taskset", "-c", cpus, os.path.join(bindir, "ws_load"), "--port", str(port),
            "--conns", str(case.conns), "--size", str(case.size), "--duration", str(secs)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=secs * 2 + 30)
    if out.returncode:
        raise RuntimeError("ws_load failed: " + out.stderr.strip()[-300:])
    j = json.loads(out.stdout)
    return {"requests": j["msgs"], "rps": j["msgs_per_s"], "p50_ms": j["p50_us"] / 1e3,
            "p99_ms": j["p99_us"] / 1e3,
            "errors": {"ws": j["errors"] + (1 if j["msgs"] == 0 else 0)}}


def one_request(port):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
        while s.recv(65536):
            pass


def upload_multipart(port, size):
    """POST /upload of one file part of `size` bytes, sent 1 MiB at a time;
    returns (status, the part sizes the server counted)."""
    boundary = "----nsvbench" + os.urandom(8).hex()
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\n"
            f"Content-Type: application/octet-stream\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    block = os.urandom(1 << 20)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        c.putrequest("POST", "/upload")
        c.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
        c.putheader("Content-Length", str(len(head) + size + len(tail)))
        c.endheaders()
        c.send(head)
        for i in range(0, size, len(block)):
            c.send(block[:min(len(block), size - i)])
        c.send(tail)
        r = c.getresponse()
        body = r.read()
    finally:
        c.close()
    try:
        sizes = [p.get("size") for p in json.loads(body)]
    except ValueError:
        sizes = []
    return r.status, sizes


def measure_rss(case, run, cpus):
    """RSS after one request (allocations made lazily on first use count),
    optionally with `hold` idle keep-alive connections open. An upload case
    reports the growth of the peak RSS (VmHWM) over the upload instead."""
    one_request(run.port)
    time.sleep(0.3)
    r = {"errors": {}}
    if case.upload:
        before = run.hwm_kib()
        status, sizes = upload_multipart(run.port, case.upload)
        r["rss_kib"] = max(0, run.hwm_kib() - before)
        if status != 200 or sizes != [case.upload]:
            r["errors"]["bad_upload"] = 1
        if not run.alive():
            r["errors"]["server_died"] = 1
        return r
    if not case.hold:
        r["rss_kib"] = run.rss_kib()
        return r
    hold = subprocess.Popen(["taskset", "-c", cpus, sys.executable,
                             os.path.join(BENCH, "conn_hold.py"), "--port", str(run.port),
                             "--count", str(case.hold)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = hold.stdout.readline()
        held = int(line.split()[1]) if line.startswith("held") else 0
        time.sleep(0.5)
        alive = run.alive()
        r["rss_kib"] = run.rss_kib()
        r["held"] = held
        r["errors"]["not_held"] = case.hold - held
        if not alive:
            r["errors"]["server_died"] = 1
    finally:
        hold.stdin.close()
        try:
            hold.wait(10)
        except subprocess.TimeoutExpired:
            hold.kill()
    return r


def cpu_list(spec):
    out = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def busy_seconds(cpus):
    """Non-idle time of the given CPUs, from /proc/stat."""
    total = 0
    with open("/proc/stat") as f:
        for line in f:
            name, *vals = line.split()
            if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
                v = [int(x) for x in vals[:8]]
                total += sum(v) - v[3] - v[4]  # minus idle and iowait
    return total / os.sysconf("SC_CLK_TCK")


def children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed_run(case, run, secs, cpus, bindir, server_cpus):
    """One load run. Besides the load tool's numbers it records the server's
    CPU time, and the CPU that other processes took from the two benchmark
    cores (a busy machine makes every number here unreliable)."""
    both = cpu_list(cpus) + cpu_list(server_cpus)
    c0, b0, k0, t0 = run.cpu_seconds(), busy_seconds(both), children_cpu(), time.monotonic()
    r = load_ws(case, run.port, secs, cpus, bindir) if case.kind == "ws" else \
        load_wrk(case, run.port, secs, cpus)
    wall = time.monotonic() - t0
    cpu = run.cpu_seconds() - c0
    other = busy_seconds(both) - b0 - cpu - (children_cpu() - k0)
    r["other_cpu_pct"] = round(max(0.0, 100 * other / wall), 1) if wall else None
    r["server_cpu_s"] = round(cpu, 3)
    r["server_core_pct"] = round(100 * cpu / wall, 1) if wall else None
    r["rps_per_core"] = r["requests"] / cpu if cpu > 0 else None
    if not run.alive():
        r["errors"]["server_died"] = 1
    return r


# ---------------------------------------------------------------- aggregation

def median_of(runs, key):
    vals = [r[key] for r in runs if r.get(key) is not None]
    return (statistics.median(vals), min(vals), max(vals)) if vals else (None, None, None)


def summarize(runs):
    s = {}
    for key in ("rps", "rps_per_core", "p50_ms", "p99_ms", "rss_kib", "server_core_pct",
                "other_cpu_pct"):
        med, lo, hi = median_of(runs, key)
        if med is not None:
            s[key], s[key + "_min"], s[key + "_max"] = med, lo, hi
    errs = {}
    for r in runs:
        for k, v in r.get("errors", {}).items():
            errs[k] = errs.get(k, 0) + v
    s["errors"] = {k: v for k, v in errs.items() if v}
    return s


def metric(case):
    return "rss_kib" if case.kind == "rss" else "rps"


def add_ratios(results, cases):
    by = {(r["case"], r["server"]): r for r in results}
    for r in results:
        case = cases[r["case"]]
        bserver, bcase = case.baseline
        base = by.get((bcase or case.id, bserver))
        r["baseline"] = f"{bserver} @ {bcase or case.id}"
        key = case.ratio_key or metric(case)
        if r.get("summary", {}).get(key) and base and base.get("summary", {}).get(key):
            r["ratio"] = r["summary"][key] / base["summary"][key]
            if case.goal and "nanosrv" in r["server"]:
                r["goal"] = case.goal
                r["goal_met"] = r["ratio"] >= case.goal


# Per-core ratios of one server to several others in the same case, beside
# a goal: the OpenResty-style runner against the C echo-server, the plain Lua
# echo and the real lua-nginx-module (bench/METHOD.md "resty").
COMPARE = [("resty", [("echo-server", 0.9), ("lua echo", None), ("nginx+lua", None)])]


def comparisons(results):
    by = {(r["case"], r["server"]): r.get("summary", {}).get("rps_per_core") for r in results
          if r["status"] == "ok"}
    out = []
    for who, others in COMPARE:
        for case in dict.fromkeys(r["case"] for r in results):
            mine = by.get((case, who))
            if not mine:
                continue
            for other, goal in others:
                theirs = by.get((case, other))
                if theirs:
                    c = {"case": case, "server": who, "vs": other, "ratio": mine / theirs}
                    if goal:
                        c["goal"], c["goal_met"] = goal, mine / theirs >= goal
                    out.append(c)
    return out


def print_comparisons(comps, out=sys.stdout):
    if not comps:
        return
    print("\n== per-core ratios (req/s/core)", file=out)
    for c in comps:
        goal = f"  (goal >= {c['goal']:g}x: {'met' if c['goal_met'] else 'MISSED'})" if "goal" in c else ""
        print(f"  {c['case']:14} {c['server']:8} vs {c['vs']:12} {c['ratio']:6.2f}x{goal}", file=out)


# ---------------------------------------------------------------- output

def fmt_num(v, digits=0):
    if v is None:
        return "-"
    return f"{v:,.{digits}f}"


def fmt_ms(v):
    if v is None:
        return "-"
    return f"{v * 1000:.0f}us" if v < 1 else f"{v:.2f}ms"


def row_cells(case, r):
    s = r.get("summary", {})
    if r["status"] != "ok":
        return [case.id, r["server"], r["status"].upper() + ": " + r.get("reason", "")]
    err = ", ".join(f"{k}={v}" for k, v in s["errors"].items()) or "0"
    ratio = f"{r['ratio']:.2f}x" if r.get("ratio") else "-"
    if r.get("goal"):
        ratio += f" (goal >= {r['goal']:g}x: {'met' if r['goal_met'] else 'MISSED'})"
    if case.kind == "rss":
        return [case.id, r["server"], f"{s['rss_kib'] / 1024:.1f} MiB",
                f"{s['rss_kib_min'] / 1024:.1f}-{s['rss_kib_max'] / 1024:.1f}", "-", "-", "-", "-",
                err, ratio]
    spread = f"±{50 * (s['rps_max'] - s['rps_min']) / s['rps']:.0f}%" if s.get("rps") else "-"
    return [case.id, r["server"], fmt_num(s.get("rps")), spread, fmt_num(s.get("rps_per_core")),
            fmt_num(s.get("server_core_pct")) + "%", fmt_ms(s.get("p50_ms")),
            fmt_ms(s.get("p99_ms")), err, ratio]


HEAD = ["case", "server", "req/s", "spread", "req/s/core", "srv cpu", "p50", "p99", "errors",
        "vs baseline"]


def print_table(results, cases, out=sys.stdout):
    rows = [HEAD] + [row_cells(cases[r["case"]], r) for r in results]
    full = [r for r in rows if len(r) == len(HEAD)]
    width = [max(len(r[i]) for r in full) for i in range(len(HEAD))]
    last = None
    for i, row in enumerate(rows):
        if i and row[0] != last:
            c = cases[row[0]]
            base = c.baseline
            what = "req/s/core ratio" if c.ratio_key == "rps_per_core" else "ratio"
            print(f"\n== {c.id}: {c.title}  ({what} vs {base[0]} @ {base[1] or c.id})", file=out)
        last = row[0] if i else None
        if len(row) < len(HEAD):
            print(f"{'':{width[0]}}  {row[1]:{width[1]}}  {row[2]}", file=out)
        else:
            cells = [row[0] if i == 0 else ""] + row[1:]
            print("  ".join(c.rjust(width[j]) if j >= 2 else c.ljust(width[j])
                            for j, c in enumerate(cells)), file=out)
    bad = [r for r in results if r.get("summary", {}).get("errors")]
    if bad:
        print("\n!!!!!! RUNS WITH ERRORS: results below are not trustworthy !!!!!!", file=out)
        for r in bad:
            print(f"!!  {r['case']:14} {r['server']:20} {r['summary']['errors']}", file=out)
    noisy = [r for r in results if r.get("summary", {}).get("other_cpu_pct", 0) > NOISY]
    if noisy:
        print(f"\n!!!!!! BUSY MACHINE: other processes used > {NOISY}% of a core on the benchmark "
              f"CPUs during {len(noisy)} of {len(results)} rows (median up to "
              f"{max(r['summary']['other_cpu_pct'] for r in noisy):.0f}%); treat those numbers "
              "as unreliable !!!!!!", file=out)
    failed = [r for r in results if r["status"] == "failed"]
    if failed:
        print("\n!!!!!! FAILED: " + ", ".join(f"{r['server']} @ {r['case']}" for r in failed),
              file=out)


def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def svg_chart(case, rows):
    """Horizontal bars (median) with a min-max whisker; baseline bar in grey."""
    key = metric(case)
    rows = [r for r in rows if r.get("summary", {}).get(key)]
    if not rows:
        return ""
    scale = 1 / 1024 if key == "rss_kib" else 1
    unit = "MiB" if key == "rss_kib" else ("msgs/s" if case.kind == "ws" else "req/s")
    top = max(r["summary"][key + "_max"] for r in rows) * scale or 1
    lw, bw, bh, gap = 170, 430, 18, 6
    h = len(rows) * (bh + gap) + 24
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{lw + bw + 130}" height="{h}" '
             f'role="img" aria-label="{esc(case.title)}">']
    for i, r in enumerate(rows):
        s, y = r["summary"], i * (bh + gap) + 4
        med, lo, hi = (s[key] * scale, s[key + "_min"] * scale, s[key + "_max"] * scale)
        color = "#c0392b" if s["errors"] else ("#999" if r["server"] == case.baseline[0] else "#2e6da4")
        x = lambda v: lw + bw * v / top  # noqa: E731
        label = f"{med:,.1f}" if key == "rss_kib" else f"{med:,.0f}"
        if r.get("ratio"):
            label += f"  ({r['ratio']:.2f}x)"
        if s["errors"]:
            label += "  ERRORS"
        parts += [f'<text x="{lw - 6}" y="{y + 13}" text-anchor="end">{esc(r["server"])}</text>',
                  f'<rect x="{lw}" y="{y}" width="{x(med) - lw:.1f}" height="{bh}" fill="{color}"/>',
                  f'<line x1="{x(lo):.1f}" x2="{x(hi):.1f}" y1="{y + bh / 2}" y2="{y + bh / 2}" '
                  f'stroke="#000" stroke-width="1.5"/>',
                  f'<text x="{x(hi) + 5:.1f}" y="{y + 13}">{esc(label)}</text>']
    parts.append(f'<text x="{lw}" y="{h - 4}" fill="#666">{unit}, median of rounds; '
                 f'whisker = min-max</text></svg>')
    return "\n".join(parts)


def write_html(path, meta, results, cases):
    css = ("body{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:1100px}"
           "svg{font:12px system-ui,sans-serif}table{border-collapse:collapse;margin:.5em 0 2em}"
           "td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}"
           "td:nth-child(-n+1),th:nth-child(-n+1){text-align:left}.err{color:#c0392b;font-weight:bold}"
           ".skip{color:#888}")
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>libnanosrv bench</title>"
           f"<style>{css}</style></head><body><h1>libnanosrv benchmark</h1>",
           f"<p>{esc(meta['date'])} · {esc(meta['cpu'])} · kernel {esc(meta['kernel'])} · "
           f"{meta['rounds']} rounds × {meta['duration_s']} s · server on CPU {meta['server_cpus']}, "
           f"load on CPU {meta['client_cpus']}{' · QUICK' if meta['quick'] else ''}</p>"]
    bad = [r for r in results if r.get("summary", {}).get("errors") or r["status"] == "failed"]
    if bad:
        out.append("<p class='err'>Runs with errors or failures: " + esc(", ".join(
            f"{r['server']} @ {r['case']}" for r in bad)) + "</p>")
    noisy = [r for r in results if r.get("summary", {}).get("other_cpu_pct", 0) > NOISY]
    if noisy:
        out.append(f"<p class='err'>Busy machine: other processes used more than {NOISY}% of a core "
                   "on the benchmark CPUs during: " + esc(", ".join(
                       f"{r['server']} @ {r['case']}" for r in noisy)) + "</p>")
    for cid, case in cases.items():
        rows = [r for r in results if r["case"] == cid]
        if not rows:
            continue
        what = "req/s/core ratio" if case.ratio_key == "rps_per_core" else "ratio"
        out.append(f"<h2>{esc(case.title)} <small>({cid}, {what} vs "
                   f"{esc(case.baseline[0])} @ {esc(case.baseline[1] or cid)})</small></h2>")
        out.append(svg_chart(case, rows))
        out.append("<table><tr>" + "".join(f"<th>{h}</th>" for h in HEAD[1:]) + "</tr>")
        for r in rows:
            cells = row_cells(case, r)[1:]
            cls = "skip" if r["status"] != "ok" else ("err" if r["summary"]["errors"] else "")
            if len(cells) < len(HEAD) - 1:
                out.append(f"<tr class='{cls}'><td>{esc(cells[0])}</td>"
                           f"<td colspan='{len(HEAD) - 2}' style='text-align:left'>{esc(cells[1])}</td></tr>")
            else:
                out.append(f"<tr class='{cls}'>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
        out.append("</table>")
    out.append("<p>How to read this: bench/METHOD.md.</p></body></html>")
    with open(path, "w") as f:
        f.write("\n".join(out))


# ---------------------------------------------------------------- main

def machine_meta(args, rounds, secs):
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = re.search(r"model name\s*:\s*(.*)", f.read()).group(1)
    except (OSError, AttributeError):
        pass
    return {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "cpu": cpu, "ncpu": os.cpu_count(),
            "kernel": os.uname().release, "quick": args.quick, "rounds": rounds,
            "duration_s": secs, "server_cpus": args.server_cpus, "client_cpus": args.client_cpus}


def run_case(case, servers, rounds, secs, args, results, live):
    """All applicable servers of one case, interleaved round-robin. wrk and
    ws cases reuse one process per server across rounds (warmed once);
    RSS cases start a fresh process each round."""
    order = [s for s in servers if case.need in s.caps]
    recs = {}
    for s in order:
        recs[s.name] = {"case": case.id, "server": s.name, "status": "ok", "runs": []}
        why = s.missing() or (s.probe(case) if s.probe else None)
        if why:
            recs[s.name].update(status="skipped", reason=why)
    active = [s for s in order if recs[s.name]["status"] == "ok"]
    try:
        if case.kind != "rss":
            for s in list(active):
                try:
                    live[s.name] = Running(s, case.args, args.server_cpus, args.logdir, case.app)
                    if s.warm:  # let JITs (V8, LuaJIT) compile the hot path first
                        timed_run(case, live[s.name], 1, args.client_cpus, args.bindir, args.server_cpus)
                except Exception as e:  # noqa: BLE001 - report, keep benchmarking others
                    recs[s.name].update(status="failed", reason=str(e))
                    active.remove(s)
        for rnd in range(rounds):
            # Rotate the order each round so no server always runs first.
            for s in active[rnd % len(active):] + active[:rnd % len(active)] if active else []:
                rec = recs[s.name]
                if rec["status"] != "ok":
                    continue
                try:
                    if case.kind == "rss":
                        run = Running(s, case.args, args.server_cpus, args.logdir, case.app)
                        live[s.name] = run
                        try:
                            r = measure_rss(case, run, args.client_cpus)
                        finally:
                            run.stop()
                            del live[s.name]
                    else:
                        r = timed_run(case, live[s.name], secs, args.client_cpus, args.bindir,
                                      args.server_cpus)
                    rec["runs"].append(r)
                    print(f"  {case.id:14} round {rnd + 1}/{rounds}  {s.name:20} "
                          f"{progress(case, r)}", flush=True)
                except Exception as e:  # noqa: BLE001
                    rec.update(status="failed", reason=str(e))
    finally:
        for name in list(live):
            live.pop(name).stop()
    for rec in recs.values():
        if rec["runs"]:
            rec["summary"] = summarize(rec["runs"])
        elif rec["status"] == "ok":
            rec.update(status="failed", reason="no runs")
        results.append(rec)


def progress(case, r):
    errs = {k: v for k, v in r["errors"].items() if v}
    tail = f"  ERRORS {errs}" if errs else ""
    if case.kind == "rss":
        return f"{r['rss_kib'] / 1024:8.1f} MiB{tail}"
    noisy = f"  (other processes {r['other_cpu_pct']}% of a core)" if r["other_cpu_pct"] > NOISY else ""
    return f"{r['rps']:12,.0f}/s  srv cpu {r['server_core_pct']}%{tail}{noisy}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="quick subset: 3 rounds of 3 s")
    ap.add_argument("--cases", help="comma-separated case ids (default: all or the quick set)")
    ap.add_argument("--servers", help="comma-separated server names")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--duration", type=int, help="seconds per run (wrk takes whole seconds)")
    ap.add_argument("--budget", type=float,
                    help="shorten runs so the whole benchmark fits this many seconds")
    ap.add_argument("--server-cpus", default="1")
    ap.add_argument("--client-cpus", default="0")
    ap.add_argument("--out", default=os.path.join(ROOT, "build"))
    ap.add_argument("--list", action="store_true", help="list cases and servers")
    args = ap.parse_args()
    if args.list:
        for c in CASES:
            print(f"case   {c.id:24} {'quick ' if c.quick else '      '}{c.title}")
        for s in SERVERS:
            name = s.name + (f" ({s.alias})" if s.alias else "")
            print(f"server {name:24} {'quick ' if s.quick else '      '}{s.missing() or 'ok'}")
        return 0
    rounds = args.rounds or 3
    secs = args.duration or (3 if args.quick else 5)
    budget = args.budget or (175 if args.quick else None)
    args.out = os.path.abspath(args.out)
    args.bindir = os.path.join(ROOT, "build", "bench")  # the load tools are built there
    args.logdir = os.path.join(args.out, "bench", "logs")
    os.makedirs(args.logdir, exist_ok=True)
    raise_nofile()
    # The bindings' examples load the library just built, not an installed one.
    # (--out only moves the results: the library stays in the build directory.)
    build = os.path.join(ROOT, "build")
    os.environ.setdefault("NANOSRV_LIBRARY", os.path.join(build, "libnanosrv.so.1"))
    os.environ["LD_LIBRARY_PATH"] = ":".join(filter(None, [build, os.environ.get("LD_LIBRARY_PATH")]))

    pick = lambda items, want, *flags: (  # noqa: E731
        [i for i in items if any(getattr(i, f) in want.split(",") for f in flags)] if want else None)
    unknown = [w for want, names in ((args.cases, {c.id for c in CASES}),
                                     (args.servers, {n for s in SERVERS for n in (s.name, s.alias) if n}))
               for w in (want.split(",") if want else []) if w not in names]
    if unknown:
        print("unknown case or server: " + ", ".join(unknown) + " (see --list)", file=sys.stderr)
        return 2
    cases = pick(CASES, args.cases, "id") or [c for c in CASES if c.quick or not args.quick]
    servers = pick(SERVERS, args.servers, "name", "alias") or [s for s in SERVERS if s.quick or not args.quick]
    if any(c.need == "static" for c in cases):
        ensure_static()
    timed = sum(1 for c in cases if c.kind != "rss" for s in servers
                if c.need in s.caps and not s.missing()) * rounds
    if budget and timed:
        fixed = 8 + sum(1 for c in cases if c.kind == "rss" for s in servers
                         if not s.missing()) * rounds * 0.7
        fixed += sum(1 for c in cases if c.kind != "rss" for s in servers if s.warm and not s.missing())
        fit = max(1, int((budget - fixed) / timed - 0.25))  # ~0.25 s overhead a run
        if fit < secs:
            print(f"note: {timed} timed runs; shortening each from {secs} s to {fit} s "
                  f"to stay within {budget:.0f} s")
            secs = fit
    meta = machine_meta(args, rounds, secs)
    print(f"bench: {len(cases)} cases x {len(servers)} servers, {rounds} rounds of {secs} s, "
          f"server CPU {args.server_cpus}, load CPU {args.client_cpus}", flush=True)

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    results, live, t0 = [], {}, time.monotonic()
    try:
        for case in cases:
            run_case(case, servers, rounds, secs, args, results, live)
    except KeyboardInterrupt:
        print("\ninterrupted: reporting what was measured", file=sys.stderr)
    finally:
        for name in list(live):
            live.pop(name).stop()
    meta["elapsed_s"] = round(time.monotonic() - t0, 1)
    by_id = {c.id: c for c in cases}
    add_ratios(results, by_id)
    comps = comparisons(results)
    print_table(results, by_id)
    print_comparisons(comps)
    with open(os.path.join(args.out, "bench-results.json"), "w") as f:
        json.dump({"meta": meta, "cases": [{"id": c.id, "title": c.title, "kind": c.kind,
                                            "baseline": {"server": c.baseline[0],
                                                         "case": c.baseline[1] or c.id}}
                                           for c in cases],
                   "results": results, "comparisons": comps}, f, indent=1)
    write_html(os.path.join(args.out, "bench-report.html"), meta, results, by_id)
    print(f"\n{meta['elapsed_s']} s; wrote {args.out}/bench-results.json and "
          f"{args.out}/bench-report.html")
    return 1 if any(r["status"] == "failed" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
