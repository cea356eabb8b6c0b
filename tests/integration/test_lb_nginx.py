#!/usr/bin/env python3
"""nginx (Debian's, with its stream module) as a front. A TCP front
(stream { proxy_pass; proxy_protocol on; }, which sends the PROXY protocol
v1) before an echo-server --proxy-protocol: the JSON echo names the client's
address and port, on every request of a keep-alive connection. An HTTP
front (proxy_pass, no PROXY header) before a plain listener: the echo names
nginx's address. A connection to a --proxy-protocol listener without the
header, with a malformed one, or from a front outside --proxy-from is closed
with nothing answered. Hand-made v1 and v2 headers (IPv4, IPv6) name their
client."""
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, connect, read_response  # noqa: E402
from lbtest import (Echo, Nginx, NGINX_MODULES, ask, echo_supports, free_port, get_json, have, metric,  # noqa: E402
                    nginx_conf, nginx_http_paths, proxy_v1, proxy_v2, raw_get, silent_close, tail, who)

tmp = tempfile.mkdtemp(prefix="nsv-lb-nginx-")
procs = []


def finish():
    for p in procs:
        p.stop(signal.SIGKILL, 5)
    shutil.rmtree(tmp, ignore_errors=True)
    done()


if not have("nginx") or not os.path.exists(os.path.join(NGINX_MODULES, "ngx_stream_module.so")):
    ok(False, "nginx and its stream module installed (tools/install-deps.sh)")
    finish()
missing = echo_supports("--proxy-protocol", "--proxy-from")
if missing:
    ok(False, "echo-server knows %s" % " ".join(missing))
    finish()

key, crt = os.path.join(tmp, "srv.key"), os.path.join(tmp, "srv.crt")
subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", key, "-out", crt, "-days", "30", "-subj", "/CN=localhost",
                "-addext", "subjectAltName=DNS:localhost"], check=True, capture_output=True, timeout=60)
try:
    pp = Echo("--proxy-protocol")                                # behind the stream front
    tls = Echo("--proxy-protocol", "--cert", crt, "--key", key)  # TLS passed through the stream front
    plain = Echo()                                               # behind the http front
    strict = Echo("--proxy-protocol", "--proxy-from", "127.0.0.2")  # nginx (127.0.0.1) is not a front it trusts
    procs += [pp, plain, strict, tls]
    S, H, X, T = free_port(), free_port(), free_port(), free_port()
    conf = nginx_conf(tmp, """
stream {
  server { listen 127.0.0.1:%d; proxy_pass 127.0.0.1:%d; proxy_protocol on; }
  server { listen 127.0.0.1:%d; proxy_pass 127.0.0.1:%d; proxy_protocol on; }
  server { listen 127.0.0.1:%d; proxy_pass 127.0.0.1:%d; proxy_protocol on; }
}
http {
  access_log off;%s
  server { listen 127.0.0.1:%d; location / { proxy_pass http://127.0.0.1:%d; } }
}
""" % (S, pp.port, X, strict.port, T, tls.port, nginx_http_paths(tmp), H, plain.port))
    ng = Nginx(conf, tmp, [S, H, X, T])
    procs.append(ng)
except RuntimeError as e:
    ok(False, "echo-servers and nginx start", str(e))
    finish()


# ---- the stream front: PROXY v1 from nginx ----
mine, got = ask(S, "127.0.0.2", n=3)
eq([who(j) for j in got], [("127.0.0.2", mine, "127.0.0.1")] * 3,
   "TCP front with proxy_protocol: 3 requests on one connection name the client (127.0.0.2:port), front nginx")
mine, got = ask(S, "127.0.0.1")
eq([who(j) for j in got], [("127.0.0.1", mine, "127.0.0.1")], "TCP front, client on 127.0.0.1: its own port")

# ---- TLS passed through the stream front: the header comes before the handshake ----
def tls_get(port, source):
    ctx = ssl.create_default_context(cafile=crt)
    raw = socket.socket()
    raw.settimeout(5)
    raw.bind((source, 0))
    raw.connect(("127.0.0.1", port))
    mine = raw.getsockname()[1]
    try:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(b"GET /tls HTTP/1.1\r\nHost: localhost\r\n\r\n")
            r = read_response(s)
            return mine, json.loads(r[2]) if r and r[0] == 200 else r
    except (OSError, ValueError) as e:
        return mine, repr(e)


mine, j = tls_get(T, "127.0.0.2")
ok(isinstance(j, dict) and who(j) == ("127.0.0.2", mine, "127.0.0.1") and j.get("sni") == "localhost",
   "TLS through the TCP front: the PROXY header, then the handshake (SNI localhost), client 127.0.0.2:port", j)

# ---- the http front: no PROXY, a plain listener sees nginx ----
st, j = get_json(H, "/via-http", source="127.0.0.2")
ok(st == 200 and j.get("peer") == "127.0.0.1" and "front" not in j,
   "HTTP front (proxy_pass, no PROXY) before a plain listener: peer is nginx's 127.0.0.1", (st, j))

# ---- refused: no header, a broken one, an untrusted front ----
s = connect(pp.port)
s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
eq(silent_close(s), ("closed", b""), "--proxy-protocol listener, request without a header: closed, nothing answered")
s.close()
s = connect(pp.port)
s.sendall(b"PROXY TCP4 300.1.1.1 127.0.0.1 1 2\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n")
eq(silent_close(s), ("closed", b""), "a malformed v1 header (address 300.1.1.1): closed, nothing answered")
s.close()
mine, got = ask(X, "127.0.0.2")
eq(got[:1], [None], "--proxy-from 127.0.0.2: nginx's connection from 127.0.0.1 closed, nothing answered")
mine, got = ask(strict.port, "127.0.0.2", prefix=proxy_v1("192.0.2.9", 4242, "127.0.0.1", strict.port))
eq([who(j) for j in got], [("192.0.2.9", 4242, "127.0.0.2")], "--proxy-from 127.0.0.2: a front on 127.0.0.2 is served")
st, j = get_json(S, "/served-after-refusals")
eq(st, 200, "the PROXY listener still serves through nginx after the refusals")

# ---- hand-made headers, as other fronts send them ----
cases = [
    ("v1 TCP6", proxy_v1("2001:db8::7", 5000, "::1", 80), ("2001:db8::7", 5000)),
    ("v2 IPv4", proxy_v2("198.51.100.4", 6000, "10.0.0.1", 443), ("198.51.100.4", 6000)),
    ("v2 IPv6 with a TLV (AWS NLB style)", proxy_v2("2001:db8::9", 7000, "2001:db8::1", 80,
                                                     tlvs=b"\xea\x00\x05\x01vpce"), ("2001:db8::9", 7000)),
    ("v2 LOCAL (a front's health check): the socket's own address", proxy_v2("0.0.0.0", 0, "0.0.0.0", 0, local=True),
     ("127.0.0.1", None)),
]
for name, hdr, want in cases:
    mine, got = ask(pp.port, "127.0.0.1", prefix=hdr)
    w = (want[0], want[1] if want[1] is not None else mine)
    eq([who(j)[:2] if isinstance(j, dict) else j for j in got], [w], "hand-made %s header names its client" % name)

# the refusals were counted: 2 PROXY errors on pp, 1 denied on strict
def metrics_via(port, source="127.0.0.1", prefix=b""):
    st, body = raw_get(port, "/metrics", source, prefix)
    return body.decode(errors="replace")


text = metrics_via(S)
n = metric(text, "nanosrv_proxy_errors_total")
ok(n is not None and n >= 2, "/metrics: nanosrv_proxy_errors_total counts the 2 bad headers (%s)" % n, text[:1500])
text = metrics_via(strict.port, "127.0.0.2", proxy_v1("192.0.2.9", 1, "127.0.0.1", strict.port))
n = metric(text, "nanosrv_connections_denied_total", "nanosrv_conns_denied_total")
ok(n is not None and n >= 1, "/metrics: nanosrv_connections_denied_total counts nginx's refused connection (%s)" % n,
   text[:1500])

eq([p.alive() for p in (pp, plain, strict, tls)], [True] * 4, "the echo-servers still run")
eq([p.stop() for p in (pp, plain, strict, tls)], [0] * 4, "and exit 0 on SIGTERM")
if not ng.alive():
    print("# nginx error.log:\n# " + tail(os.path.join(tmp, "error.log")).replace("\n", "\n# "))
ng.stop()
finish()
