"""Helpers for the tests with real fronts (HAProxy, nginx) and many clients:
fixed free ports, processes whose output is read in the background (so a
chatty access log never blocks them), HAProxy and nginx in the foreground
from a config in a temp dir, wrk with a script that prints every error
count, PROXY protocol headers made by hand, requests from a chosen source
address. Stdlib only; every wait is bounded."""
import http.client
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time

from nsvtest import BUILD, ROOT, read_response

ECHO = os.path.join(BUILD, "echo-server")
NGINX_MODULES = "/usr/lib/nginx/modules"


def free_port(host="127.0.0.1"):
    """A port nobody listens on now (bound to 0 and closed): for servers that
    must come back on the same port, which --port 0 cannot give."""
    s = socket.socket()
    s.bind((host, 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, host="127.0.0.1", timeout=10):
    """True once something accepts on port, within timeout."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


class Proc:
    """A child in its own process group; stdout and stderr lines are
    collected by threads (out, err) so the child never blocks on a full pipe."""

    def __init__(self, argv, cwd=ROOT, env=None):
        e = dict(os.environ)
        if env:
            e.update(env)
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                                     env=e, start_new_session=True)
        self.pid = self.proc.pid
        self.out, self.err = [], []
        self.cond = threading.Condition()
        self.threads = [threading.Thread(target=self._read, args=(f, l), daemon=True)
                        for f, l in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for t in self.threads:
            t.start()

    def _read(self, f, lines):
        for raw in iter(f.readline, b""):
            with self.cond:
                lines.append(raw.decode(errors="replace").rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            lines.append(None)  # EOF marker
            self.cond.notify_all()

    def wait_line(self, pred, timeout=10, stream="out", start=0):
        """Index of the first line (from start) for which pred(line) holds,
        or None at EOF or timeout."""
        lines = self.out if stream == "out" else self.err
        deadline = time.time() + timeout
        i = start
        with self.cond:
            while True:
                while i < len(lines):
                    if lines[i] is None:
                        return None
                    if pred(lines[i]):
                        return i
                    i += 1
                left = deadline - time.time()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def lines(self, stream="out"):
        with self.cond:
            return [l for l in (self.out if stream == "out" else self.err) if l is not None]

    def alive(self):
        return self.proc.poll() is None

    def send(self, sig):
        if self.proc.poll() is None:
            os.kill(self.pid, sig)

    def wait(self, timeout):
        """Exit status, or None if still running after timeout."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, sig=signal.SIGTERM, timeout=10):
        """Stops it by PID (then its group with SIGKILL if it lingers); the
        exit status as Popen reports it (negative for a signal)."""
        if self.proc.poll() is None:
            os.kill(self.pid, sig)
            if self.wait(timeout) is None:
                try:
                    os.killpg(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        for t in self.threads:
            t.join(2)
        return self.proc.returncode


class Echo(Proc):
    """build/echo-server ARGS...; port is what it printed ("listening on P")."""

    def __init__(self, *args, port=0, timeout=10):
        super().__init__([ECHO, "--port", str(port)] + [str(a) for a in args])
        i = self.wait_line(lambda l: l.startswith("listening on "), timeout)
        if i is None:
            err = "\n".join(self.lines("err"))[:2000]
            self.stop(signal.SIGKILL)
            raise RuntimeError("echo-server %s did not start: %s" % (" ".join(map(str, args)), err))
        self.port = int(self.out[i].split()[2])
        self.first_log = i + 1  # access-log lines follow the listening line

    def log(self):
        return self.lines()[self.first_log:]


def echo_supports(*flags):
    """The flags among these that build/echo-server does not know (its usage
    text lists every flag), so a test can say what is missing instead of
    failing on a start error."""
    try:
        p = subprocess.run([ECHO, "--no-such-flag"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return list(flags)
    usage = (p.stdout + p.stderr).decode(errors="replace")
    return [f for f in flags if f not in usage]


class HAProxy(Proc):
    """haproxy -db (foreground, no daemon) -f CFG written into tmp; waits
    until the frontend port accepts. State changes of servers ("Server be/s1
    is DOWN", "... is UP") come on stderr in this mode."""

    def __init__(self, cfg, tmp, port, timeout=10):
        path = os.path.join(tmp, "haproxy.cfg")
        with open(path, "w") as f:
            f.write(cfg)
        check = subprocess.run(["haproxy", "-c", "-q", "-f", path], capture_output=True, timeout=30)
        if check.returncode != 0:
            raise RuntimeError("haproxy config refused: %s" % check.stderr.decode(errors="replace")[:2000])
        super().__init__(["haproxy", "-db", "-f", path], cwd=tmp)
        self.port = port
        if not wait_port(port, timeout=timeout):
            err = "\n".join(self.lines("err"))[:2000]
            self.stop(signal.SIGKILL)
            raise RuntimeError("haproxy did not listen on %d: %s" % (port, err))

    def state_lines(self):
        return [l for l in self.lines("err") if " is UP" in l or " is DOWN" in l]


def nginx_conf(tmp, body, modules=("stream",)):
    """A whole nginx.conf for a foreground nginx with its files in tmp; body
    holds the http { } and stream { } blocks."""
    loads = "".join("load_module %s/ngx_%s_module.so;\n" % (NGINX_MODULES, m) for m in modules)
    return (loads + "daemon off; master_process off; worker_processes 1;\n"
            "pid %s/nginx.pid; error_log %s/error.log info;\n"
            "events { worker_connections 256; }\n" % (tmp, tmp) + body)


def nginx_http_paths(tmp):
    """The temp-path directives an http { } block needs to stay inside tmp."""
    return "".join(" %s %s/%s;" % (d, tmp, d.split("_")[0])
                   for d in ("client_body_temp_path", "proxy_temp_path", "fastcgi_temp_path",
                             "uwsgi_temp_path", "scgi_temp_path"))


class Nginx(Proc):
    def __init__(self, conf, tmp, ports, timeout=10):
        path = os.path.join(tmp, "nginx.conf")
        with open(path, "w") as f:
            f.write(conf)
        # -e: the error log before the config is read (else the packaged path)
        super().__init__(["nginx", "-p", tmp, "-e", os.path.join(tmp, "error.log"), "-c", path], cwd=tmp)
        for p in ports:
            if not wait_port(p, timeout=timeout):
                err = "\n".join(self.lines("err"))[:2000]
                self.stop(signal.SIGKILL)
                raise RuntimeError("nginx did not listen on %d: %s %s" % (p, err, tail(os.path.join(tmp, "error.log"))))


def tail(path, n=20):
    try:
        with open(path, errors="replace") as f:
            return "\n".join(f.read().splitlines()[-n:])
    except OSError:
        return ""


# wrk prints "Non-2xx or 3xx responses" and "Socket errors" only when they
# are not zero; this script prints every count on one line, always.
WRK_DONE = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("WRKRESULT requests=%d connect=%d read=%d write=%d status=%d timeout=%d\\n",
    summary.requests, e.connect, e.read, e.write, e.status, e.timeout))
end
"""


def wrk_argv(url, tmp, threads=2, conns=32, secs=8, timeout_s=5):
    script = os.path.join(tmp, "count.lua")
    with open(script, "w") as f:
        f.write(WRK_DONE)
    return ["wrk", "-t%d" % threads, "-c%d" % conns, "-d%ds" % secs, "--timeout", "%ds" % timeout_s,
            "-s", script, url]


def wrk_result(out):
    """The counts of the WRKRESULT line and Requests/sec, from wrk's output."""
    res = {}
    for line in out.splitlines():
        if line.startswith("WRKRESULT"):
            res.update({k: int(v) for k, v in (kv.split("=") for kv in line.split()[1:])})
        elif line.startswith("Requests/sec:"):
            res["rps"] = float(line.split()[1])
    return res


def get(port, path="/", source=None, host="127.0.0.1", timeout=5, headers=None):
    """One GET on a new connection from source (an address like "127.0.0.2"):
    (status, body bytes). Raises on a connection closed without an answer."""
    c = http.client.HTTPConnection(host, port, timeout=timeout,
                                   source_address=(source, 0) if source else None)
    try:
        c.request("GET", path, headers=headers or {})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def get_json(port, path="/", source=None, timeout=5):
    st, body = get(port, path, source=source, timeout=timeout)
    try:
        return st, json.loads(body)
    except ValueError:
        return st, {"_raw": body[:200]}


def raw_get(port, path, source="127.0.0.1", prefix=b""):
    """One GET on a new connection from source, prefix first: (status, body),
    (None, b"") when closed without an answer."""
    s = socket.socket()
    s.settimeout(5)
    try:
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(prefix + b"GET %s HTTP/1.1\r\nHost: t\r\n\r\n" % path.encode())
        r = read_response(s)
        return (r[0], r[2]) if r else (None, b"")
    except OSError as e:
        return None, repr(e).encode()
    finally:
        s.close()


def ask(port, source="127.0.0.1", n=1, prefix=b""):
    """n GETs on one connection from source (prefix first: a hand-made
    header); the client's port and the JSON answers (None where closed)."""
    s = socket.socket()
    s.settimeout(5)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    mine = s.getsockname()[1]
    answers = []
    try:
        if prefix:
            s.sendall(prefix)
        for i in range(n):
            s.sendall(b"GET /who/%d HTTP/1.1\r\nHost: t\r\n\r\n" % i)
            r = read_response(s)
            try:
                answers.append(json.loads(r[2]) if r and r[0] == 200 else None)
            except ValueError:
                answers.append({"_raw": r[2][:200]})
    except (ConnectionResetError, BrokenPipeError):
        # Closed without an answer, by a reset: a front (nginx) that relays a
        # refused upstream resets its client when the request was still unread.
        answers.append(None)
    except OSError as e:
        answers.append(repr(e))
    finally:
        s.close()
    return mine, answers


def who(j):
    """(peer, peer_port, front) of a JSON echo, or j itself when not one."""
    return (j.get("peer"), j.get("peer_port"), j.get("front")) if isinstance(j, dict) else j


def silent_close(sock, timeout=5):
    """('closed', bytes read) if the peer closes (EOF or reset) within
    timeout, ('open', bytes) otherwise."""
    sock.settimeout(timeout)
    got = b""
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            d = sock.recv(65536)
            if not d:
                return "closed", got
            got += d
    except (ConnectionResetError, BrokenPipeError):
        return "closed", got
    except socket.timeout:
        pass
    return "open", got


def metric(text, *names):
    """Value of the first of names present as a sample without labels in a
    Prometheus exposition, or None. Several names: the exposition's names
    are not part of the C contract, so a test may accept more than one."""
    for name in names:
        for line in text.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{}"):
                try:
                    return float(line.split()[-1])
                except ValueError:
                    return None
    return None


def proxy_v1(src, sport, dst, dport):
    fam = "TCP6" if ":" in src else "TCP4"
    return ("PROXY %s %s %s %d %d\r\n" % (fam, src, dst, sport, dport)).encode()


PROXY_V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"


def proxy_v2(src, sport, dst, dport, tlvs=b"", local=False):
    """A v2 header: PROXY (or LOCAL) over TCP, IPv4 or IPv6 by the address."""
    if ":" in src:
        fam, addrs = 0x21, socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst)
    else:
        fam, addrs = 0x11, socket.inet_aton(src) + socket.inet_aton(dst)
    body = addrs + struct.pack(">HH", sport, dport) + tlvs
    return PROXY_V2_SIG + bytes([0x20 if local else 0x21, fam]) + struct.pack(">H", len(body)) + body


def have(tool):
    return shutil.which(tool) is not None
