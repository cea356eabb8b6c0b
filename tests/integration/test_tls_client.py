#!/usr/bin/env python3
"""Outbound TLS (nsv_connect "tls://"): tcp-proxy --to-tls in front of a TLS
echo server, with the server certificate checked against a CA and the name."""
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, Server, BUILD  # noqa

tmp = tempfile.mkdtemp()


def sh(*argv):
    subprocess.run(argv, check=True, capture_output=True, cwd=tmp)


def ca(name):
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", name + ".key", "-out", name + ".crt", "-days", "30", "-subj", "/CN=" + name)


def cert(name, ca_name, host, san=None):
    sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + host)
    with open(os.path.join(tmp, name + ".ext"), "w") as f:
        f.write("subjectAltName=%s\n" % (san or "DNS:" + host))
    sh("openssl", "x509", "-req", "-in", name + ".csr", "-CA", ca_name + ".crt", "-CAkey", ca_name + ".key",
       "-CAcreateserial", "-out", name + ".crt", "-days", "30", "-extfile", name + ".ext")


ca("ca")
ca("otherca")
cert("good", "ca", "localhost")
cert("wrongname", "ca", "other.example")
cert("ipsan", "ca", "ip-cert", "DNS:ip-cert,IP:127.0.0.1,IP:::1")
cert("otherip", "ca", "ip-cert2", "IP:127.0.0.2")


def tls_echo_server(certname):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(tmp, certname + ".crt"), os.path.join(tmp, certname + ".key"))
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    def run():
        while True:
            try:
                c, _ = ls.accept()
            except OSError:
                return
            def serve(c=c):
                try:
                    s = ctx.wrap_socket(c, server_side=True)
                    while True:
                        d = s.recv(65536)
                        if not d:
                            break
                        s.sendall(d)
                    s.close()
                except (ssl.SSLError, OSError):
                    c.close()
            threading.Thread(target=serve, daemon=True).start()
    threading.Thread(target=run, daemon=True).start()
    return ls, ls.getsockname()[1]


def through_proxy(port, data):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(data)
        got = b""
        while len(got) < len(data):
            d = s.recv(65536)
            if not d:
                break
            got += d
        return got
    except OSError:
        return b""
    finally:
        s.close()


def proxy(target_port, ca_name, host="localhost"):
    return Server([os.path.join(BUILD, "tcp-proxy"), "--listen", "0", "--to", "%s:%d" % (host, target_port),
                   "--to-tls", "--ca", os.path.join(tmp, ca_name + ".crt")])


good_ls, good_port = tls_echo_server("good")
p = proxy(good_port, "ca")
data = os.urandom(200000)
eq(through_proxy(p.port, data) == data, True, "200 KB through plain -> tls:// with a verified certificate")
eq(through_proxy(p.port, b"again"), b"again", "second connection")
eq(p.stop(), 0, "proxy exits 0")

p = proxy(good_port, "otherca")
eq(through_proxy(p.port, b"must not pass"), b"", "certificate from an unknown CA: connection refused")
eq(p.stop(), 0, "proxy exits 0")

wrong_ls, wrong_port = tls_echo_server("wrongname")
p = proxy(wrong_port, "ca")
eq(through_proxy(p.port, b"must not pass"), b"", "certificate for another host name: connection refused")
ok(p.alive(), "proxy keeps running after failed handshakes")
eq(p.stop(), 0, "proxy exits 0")
# An IP address as the host: the certificate must list it as an iPAddress
# subjectAltName (RFC 6125; mbedTLS 2 compares names only, so the library
# checks it), and no SNI is sent for it (RFC 6066).
ip_ls, ip_port = tls_echo_server("ipsan")
p = proxy(ip_port, "ca", "127.0.0.1")
eq(through_proxy(p.port, b"by address"), b"by address", "tls://127.0.0.1 with an IP:127.0.0.1 subjectAltName: verified")
eq(p.stop(), 0, "proxy exits 0")
otherip_ls, otherip_port = tls_echo_server("otherip")
p = proxy(otherip_port, "ca", "127.0.0.1")
eq(through_proxy(p.port, b"must not pass"), b"", "tls://127.0.0.1 with only IP:127.0.0.2 listed: refused")
eq(p.stop(), 0, "proxy exits 0")
p = proxy(good_port, "ca", "127.0.0.1")
eq(through_proxy(p.port, b"must not pass"), b"", "tls://127.0.0.1 with a DNS-only certificate: refused")
eq(p.stop(), 0, "proxy exits 0")
good_ls.close()
wrong_ls.close()
ip_ls.close()
otherip_ls.close()
shutil.rmtree(tmp, ignore_errors=True)
done()
