#!/usr/bin/env python3
"""TLS through echo-server --cert/--key[/--ca]: curl, openssl s_client and
Python's ssl module as real clients; HTTP and WebSocket over TLS, ALPN, SNI,
mutual TLS (required, optional, missing, wrong CA), old protocol versions
refused, stalled handshakes that block nobody, and startup errors.
Certificates are made with the openssl command in a temporary directory."""
import asyncio
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, Server, BUILD  # noqa
import websockets  # noqa: E402

ECHO = os.path.join(BUILD, "echo-server")
D = tempfile.mkdtemp(prefix="nsv-tls-")


def sh(*argv):
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=D)


def p(name):
    return os.path.join(D, name)


def make_ca(name, cn):
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", name + ".key", "-out", name + ".crt", "-days", "30", "-subj", "/CN=" + cn)


def make_cert(name, ca, subj, san=None, days="30"):
    sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", name + ".key", "-out", name + ".csr", "-subj", subj)
    argv = ["openssl", "x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
            "-CAcreateserial", "-out", name + ".crt", "-days", days]
    if san:
        with open(p(name + ".ext"), "w") as f:
            f.write("subjectAltName=" + san + "\n")
        argv += ["-extfile", name + ".ext"]
    sh(*argv)


make_ca("ca", "nanosrv test CA")
make_ca("other", "some other CA")
make_cert("srv", "ca", "/CN=localhost", "DNS:localhost,IP:127.0.0.1")
make_cert("alice", "ca", "/CN=alice/O=Example")
make_cert("mallory", "other", "/CN=mallory")
make_cert("expired", "ca", "/CN=localhost", "DNS:localhost,IP:127.0.0.1", days="-1")
make_cert("wronghost", "ca", "/CN=wrong.example", "DNS:wrong.example")


def tls_server(*extra, cert="srv", threads=None):
    argv = [ECHO, "--port", "0", "--cert", p(cert + ".crt"), "--key", p(cert + ".key")] + list(extra)
    t = threads if threads is not None else os.environ.get("NSV_THREADS")
    if t:
        argv += ["--threads", str(t)]
    return Server(argv)


def curl(port, path="/", *args, host="localhost"):
    r = subprocess.run(["curl", "-sS", "--max-time", "10", "--cacert", p("ca.crt"),
                        "--resolve", "%s:%d:127.0.0.1" % (host, port),
                        "https://%s:%d%s" % (host, port, path)] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace")


def s_client(port, *args, stdin=b""):
    r = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port] + list(args),
                       input=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=10)
    return r.returncode, r.stdout.decode(errors="replace")


def client_ctx(cert=None, check_host=True):
    ctx = ssl.create_default_context(cafile=p("ca.crt"))
    ctx.check_hostname = check_host
    if cert:
        ctx.load_cert_chain(p(cert + ".crt"), p(cert + ".key"))
    return ctx


def https_conn(port, ctx=None, sni="localhost"):
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return (ctx or client_ctx()).wrap_socket(raw, server_hostname=sni)


def read_http(sock, buf=b""):
    """One response with Content-Length: (status, body, rest)."""
    while b"\r\n\r\n" not in buf:
        d = sock.recv(65536)
        if not d:
            return None, b"", buf
        buf += d
    head, rest = buf.split(b"\r\n\r\n", 1)
    n = 0
    for line in head.split(b"\r\n")[1:]:
        k, v = line.split(b":", 1)
        if k.strip().lower() == b"content-length":
            n = int(v)
    while len(rest) < n:
        d = sock.recv(65536)
        if not d:
            break
        rest += d
    return int(head.split()[1]), rest[:n], rest[n:]


# ---- one-way TLS ----
with tls_server() as srv:
    port = srv.port
    rc, out, err = curl(port, "/hello?x=1")
    ok(rc == 0, "curl GET over https", err)
    info = json.loads(out) if rc == 0 else {}
    eq((info.get("path"), info.get("query")), ("/hello", "x=1"), "request fields arrive over TLS")
    eq((info.get("sni"), info.get("subject")), ("localhost", ""), "SNI readable by the host; no client subject")

    body = os.urandom(1 << 20)
    with open(p("body.bin"), "wb") as f:
        f.write(body)
    rc, out, err = curl(port, "/echo", "--data-binary", "@" + p("body.bin"))
    ok(rc == 0 and out == body, "1 MiB POST echoed byte for byte over TLS", err)

    rc, out = s_client(port, "-servername", "localhost", "-alpn", "http/1.1", "-CAfile", p("ca.crt"))
    ok("ALPN protocol: http/1.1" in out, "ALPN selects http/1.1", out[-800:])
    ok("Verify return code: 0" in out, "openssl s_client verifies the chain", out[-800:])
    rc, out = s_client(port, "-tls1_2", "-CAfile", p("ca.crt"))
    ok("Protocol  : TLSv1.2" in out or "TLSv1.2" in out, "TLS 1.2 handshake", out[-800:])
    rc, out = s_client(port, "-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0")
    ok(rc != 0 and ("Cipher is (NONE)" in out or "alert protocol version" in out), "TLS 1.1 refused", out[-800:])
    rc, out = s_client(port, "-tls1", "-cipher", "DEFAULT:@SECLEVEL=0")
    ok(rc != 0, "TLS 1.0 refused", out[-800:])

    # SNI of another name: one certificate serves it, the host sees the name.
    s = https_conn(port, client_ctx(check_host=False), sni="api.example.test")
    s.sendall(b"GET /sni HTTP/1.1\r\nHost: x\r\n\r\n")
    st, b, _ = read_http(s)
    ok(st == 200 and json.loads(b).get("sni") == "api.example.test", "SNI name passed through", b)
    eq(s.selected_alpn_protocol(), None, "no ALPN when the client offers none")
    s.close()

    # Keep-alive and pipelining on one TLS connection.
    s = https_conn(port)
    results = []
    rest = b""
    for i in range(3):
        s.sendall(b"GET /k%d HTTP/1.1\r\nHost: x\r\n\r\n" % i)
        st, b, rest = read_http(s, rest)
        results.append(st == 200 and json.loads(b)["path"] == "/k%d" % i)
    eq(results, [True] * 3, "three keep-alive requests on one TLS connection")
    s.sendall(b"".join(b"GET /p%d HTTP/1.1\r\nHost: x\r\n\r\n" % i for i in range(20)))
    paths = []
    for i in range(20):
        st, b, rest = read_http(s, rest)
        paths.append(json.loads(b)["path"] if st == 200 else st)
    eq(paths, ["/p%d" % i for i in range(20)], "20 pipelined requests answered in order over TLS")
    # Many requests in one write: more plaintext than one read takes at once.
    big = b"".join(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 9000\r\n\r\n" + bytes([65 + i]) * 9000
                   for i in range(12))
    s.sendall(big)
    got = []
    for i in range(12):
        st, b, rest = read_http(s, rest)
        got.append(st == 200 and b == bytes([65 + i]) * 9000)
    eq(got, [True] * 12, "12 pipelined 9000-byte POSTs (108 KB in one write) all echoed")
    s.close()
    # 3000 pipelined GETs: the reader pauses and resumes while decrypted
    # bytes wait inside the TLS session, where epoll cannot see them.
    s = https_conn(port)
    s.sendall(b"".join(b"GET /q%d HTTP/1.1\r\nHost: x\r\n\r\n" % i for i in range(3000)))
    rest, last = b"", None
    for i in range(3000):
        st, b, rest = read_http(s, rest)
        if st != 200:
            last = (last, st, b[:200])
            break
        last = json.loads(b)["path"]
    eq(last, "/q2999", "3000 pipelined requests in one write all answered")
    s.close()

    # WebSocket over TLS (wss) with a real client.
    async def ws_check():
        async with websockets.connect("wss://localhost:%d/ws" % port, ssl=client_ctx(),
                                      max_size=None, compression=None) as ws:
            await ws.send("hello över tls")
            a = await ws.recv()
            blob = os.urandom(300000)
            await ws.send(blob)
            b = await ws.recv()
            return a == "hello över tls" and b == blob
    try:
        ok(asyncio.run(ws_check()), "wss:// text and 300 KB binary echo")
    except Exception as e:  # noqa
        ok(False, "wss:// text and 300 KB binary echo", repr(e))

    # Plain HTTP to the TLS port: rejected without disturbing the server.
    x = socket.create_connection(("127.0.0.1", port), timeout=5)
    x.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        data = x.recv(4096)
    except ConnectionResetError:
        data = b""
    ok(not data.startswith(b"HTTP/"), "plaintext request on the TLS port is not answered in plaintext")
    x.close()
    rc, out, err = curl(port, "/after")
    ok(rc == 0, "server fine after bad clients", err)

    # Concurrency: many clients handshaking and requesting at once.
    res = [None] * 24

    def worker(i):
        try:
            s2 = https_conn(port)
            s2.sendall(b"GET /c%d HTTP/1.1\r\nHost: x\r\n\r\n" % i)
            st2, b2, _ = read_http(s2)
            res[i] = st2 == 200 and json.loads(b2)["path"] == "/c%d" % i
            s2.close()
        except Exception as e:  # noqa
            res[i] = repr(e)
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(len(res))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    eq(res, [True] * len(res), "24 concurrent TLS clients")
    ok(srv.alive(), "server alive")
    eq(srv.stop(), 0, "drains and exits 0")

# ---- handshakes under the request deadline ----
with tls_server("--request-timeout-ms", "1000") as srv:
    port = srv.port
    # Stalled handshakes: one client sends half a ClientHello, one nothing.
    hello_part = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"
    stalled = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
    stalled[0].sendall(hello_part)
    t0 = time.time()
    rc, out, err = curl(port, "/while-stalled")
    ok(rc == 0 and time.time() - t0 < 3, "a stalled handshake does not block other clients", err)
    stalled[0].settimeout(5)
    try:
        data = stalled[0].recv(4096)
    except ConnectionResetError:
        data = b""
    except socket.timeout:
        data = b"(still open)"
    eq(data, b"", "stalled handshake closed by the request deadline, no plaintext 408")
    for x in stalled:
        x.close()

    ok(srv.alive(), "server alive after stalled handshakes")

# ---- sharded manager ----
with tls_server(threads=2) as srv:
    res = [None] * 16

    def sworker(i):
        try:
            s2 = https_conn(srv.port)
            for k in range(3):
                s2.sendall(b"GET /s%d HTTP/1.1\r\nHost: x\r\n\r\n" % k)
                st2, b2, _ = read_http(s2)
                if st2 != 200:
                    raise RuntimeError(st2)
            res[i] = True
            s2.close()
        except Exception as e:  # noqa
            res[i] = repr(e)
    ts = [threading.Thread(target=sworker, args=(i,)) for i in range(len(res))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    eq(res, [True] * len(res), "sharded server (2 workers): 16 TLS clients x 3 keep-alive requests")
    eq(srv.stop(), 0, "sharded TLS server exits 0")

# ---- mutual TLS ----
with tls_server("--ca", p("ca.crt")) as srv:
    rc, out, err = curl(srv.port, "/m", "--cert", p("alice.crt"), "--key", p("alice.key"))
    ok(rc == 0 and json.loads(out).get("subject") == "CN=alice, O=Example",
       "client certificate required: verified subject reaches the host", out + err.encode())
    rc, out, err = curl(srv.port, "/m")
    ok(rc != 0, "client certificate required: missing certificate refused", out)
    rc, out, err = curl(srv.port, "/m", "--cert", p("mallory.crt"), "--key", p("mallory.key"))
    ok(rc != 0, "client certificate required: certificate from another CA refused", out)

    async def wss_mtls():
        async with websockets.connect("wss://localhost:%d/ws" % srv.port, ssl=client_ctx("alice")) as ws:
            await ws.send("mtls")
            return await ws.recv()
    try:
        eq(asyncio.run(wss_mtls()), "mtls", "wss:// with a client certificate")
    except Exception as e:  # noqa
        ok(False, "wss:// with a client certificate", repr(e))
    eq(srv.stop(), 0, "mutual TLS server exits 0")

with tls_server("--ca-optional", p("ca.crt")) as srv:
    rc, out, err = curl(srv.port, "/o")
    ok(rc == 0 and json.loads(out).get("subject") == "", "optional: no certificate is let in", err)
    rc, out, err = curl(srv.port, "/o", "--cert", p("alice.crt"), "--key", p("alice.key"))
    ok(rc == 0 and json.loads(out).get("subject") == "CN=alice, O=Example", "optional: good certificate verified", err)
    rc, out, err = curl(srv.port, "/o", "--cert", p("mallory.crt"), "--key", p("mallory.key"))
    ok(rc == 0 and json.loads(out).get("subject") == "", "optional: unverified certificate gives no subject", err)
    eq(srv.stop(), 0, "optional mutual TLS server exits 0")

# ---- certificates a client must not accept (the server serves what it is given) ----
with tls_server(cert="expired") as srv:
    rc, out, err = curl(srv.port, "/")
    ok(rc != 0 and "expired" in err, "expired server certificate rejected by a verifying client", err)
with tls_server(cert="wronghost") as srv:
    rc, out, err = curl(srv.port, "/")
    ok(rc != 0, "wrong-host server certificate rejected by a verifying client", err)


# ---- startup errors ----
def start_fails(args):
    r = subprocess.run([ECHO, "--port", "0"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=10)
    return r.returncode, r.stderr.decode(errors="replace")


rc, err = start_fails(["--cert", p("missing.crt"), "--key", p("srv.key")])
ok(rc != 0 and "missing.crt" in err and "TLS" in err, "missing certificate file: clear error", err)
rc, err = start_fails(["--cert", p("srv.crt"), "--key", p("alice.key")])
ok(rc != 0 and "do not match" in err, "certificate and key mismatch: clear error", err)
with open(p("garbage.pem"), "w") as f:
    f.write("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
rc, err = start_fails(["--cert", p("garbage.pem"), "--key", p("srv.key")])
ok(rc != 0 and "certificate" in err and "TLS failure" in err, "malformed PEM: NSV_ETLS with the mbedTLS reason", err)

shutil.rmtree(D, ignore_errors=True)
done()
