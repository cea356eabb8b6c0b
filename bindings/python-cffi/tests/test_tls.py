#!/usr/bin/python3
"""TLS in the Python binding: echo.py --cert/--key[/--ca] through curl,
openssl s_client and a wss client; mutual TLS required and optional;
msg.tls; certificates and keys as files and as PEM bytes, an encrypted key
with its password; errors that name the cause; outbound tls:// with a CA,
with the system bundle (refused) and with verification turned off."""
import asyncio
import json
import os
import ssl
import subprocess
import sys
import unittest

import _tap
from _net import EXAMPLES, Proc, certs, echo_roundtrip, s_client_echo

import nanosrv

C = certs()


def curl(port, path, *args, data=None):
    argv = ["curl", "-sS", "--max-time", "20", "--cacert", C["ca.crt"], "https://localhost:%d%s" % (port, path),
            "--resolve", "localhost:%d:127.0.0.1" % port] + list(args)
    if data is not None:
        argv += ["--data-binary", "@-", "-H", "Content-Type: application/octet-stream"]
    r = subprocess.run(argv, input=data, capture_output=True, timeout=30)
    return r.returncode, r.stdout, r.stderr


def echo_py(*extra):
    return Proc([sys.executable, os.path.join(EXAMPLES, "echo.py"), "--port", "0", "--cert", C["srv.crt"],
                 "--key", C["srv.key"]] + list(extra))


class EchoExample(unittest.TestCase):
    def test_https_and_wss(self):
        with echo_py() as p:
            body = os.urandom(1 << 20)
            rc, out, err = curl(p.port, "/echo", data=body)
            self.assertEqual(rc, 0, err)
            self.assertEqual(out, body)
            rc, out, err = curl(p.port, "/info?x=1")
            self.assertEqual(rc, 0, err)
            info = json.loads(out)
            self.assertEqual((info["path"], info["query"], info["sni"], info["subject"]),
                             ("/info", "x=1", "localhost", ""))
            # Plain HTTP on the TLS port gets no answer.
            r = subprocess.run(["curl", "-sS", "--max-time", "10", "http://127.0.0.1:%d/" % p.port],
                               capture_output=True, timeout=30)
            self.assertNotEqual(r.returncode, 0)
            line = s_client_echo(p.port, C["ca.crt"], b"GET /sc HTTP/1.1\r\nHost: localhost\r\n\r\n")
            self.assertTrue(line.startswith(b"HTTP/1.1 200"), line)

            import websockets.client

            async def wss():
                ctx = ssl.create_default_context(cafile=C["ca.crt"])
                async with websockets.client.connect("wss://localhost:%d/ws" % p.port, ssl=ctx) as ws:
                    await ws.send("hello over wss")
                    a = await ws.recv()
                    blob = os.urandom(200000)
                    await ws.send(blob)
                    return a, (await ws.recv()) == blob
            self.assertEqual(asyncio.run(asyncio.wait_for(wss(), 30)), ("hello over wss", True))

    def test_mtls_required(self):
        with echo_py("--ca", C["ca.crt"]) as p:
            rc, out, err = curl(p.port, "/m", "--cert", C["alice.crt"], "--key", C["alice.key"])
            self.assertEqual(rc, 0, err)
            self.assertEqual(json.loads(out)["subject"], "CN=alice, O=Example")
            rc, out, err = curl(p.port, "/m")
            self.assertNotEqual(rc, 0, "no client certificate must be refused")
            rc, out, err = curl(p.port, "/m", "--cert", C["mallory.crt"], "--key", C["mallory.key"])
            self.assertNotEqual(rc, 0, "a certificate of another CA must be refused")
            line = s_client_echo(p.port, C["ca.crt"], b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
                                 ["-cert", C["alice.crt"], "-key", C["alice.key"]])
            self.assertTrue(line.startswith(b"HTTP/1.1 200"), line)

    def test_mtls_optional(self):
        with echo_py("--ca-optional", C["ca.crt"]) as p:
            rc, out, err = curl(p.port, "/o")
            self.assertEqual(rc, 0, err)
            self.assertEqual(json.loads(out)["subject"], "")
            rc, out, err = curl(p.port, "/o", "--cert", C["alice.crt"], "--key", C["alice.key"])
            self.assertEqual(rc, 0, err)
            self.assertEqual(json.loads(out)["subject"], "CN=alice, O=Example")

    def test_tcp_echo_tls(self):
        with Proc([sys.executable, os.path.join(EXAMPLES, "tcp_echo.py"), "--port", "0", "--cert", C["srv.crt"],
                   "--key", C["srv.key"]]) as p:
            ctx = ssl.create_default_context(cafile=C["ca.crt"])
            data = os.urandom(3 << 20)
            self.assertEqual(echo_roundtrip(p.port, data, half_close=False, ctx=ctx), data)
            self.assertEqual(s_client_echo(p.port, C["ca.crt"], b"raw line\n"), b"raw line\n")


def read(name):
    with open(C[name], "rb") as f:
        return f.read()


class InProcess(unittest.TestCase):
    def serve(self, srv, **tls):
        srv.set_tls(**tls)
        seen = []

        def h(conn, msg):
            seen.append(msg.tls)
            conn.http_reply(200, {"Content-Type": "text/plain"}, "ok")
        return srv.http_listen("https://127.0.0.1:0", h), seen

    def test_pem_bytes_and_msg_tls(self):
        srv = nanosrv.Manager()
        lst, seen = self.serve(srv, cert=read("srv.crt"), key=read("srv.key").decode(), ca=read("ca.crt"),
                               verify_client="optional")
        with _tap.ServerThread(srv):
            rc, out, err = curl(lst.port, "/", "--cert", C["alice.crt"], "--key", C["alice.key"])
        self.assertEqual((rc, out), (0, b"ok"), err)
        self.assertEqual((seen[0].sni, seen[0].peer_subject), ("localhost", "CN=alice, O=Example"))

    def test_encrypted_key(self):
        srv = nanosrv.Manager()
        lst, seen = self.serve(srv, cert=C["srv.crt"], key=C["srv_enc.key"], password="s3cret")
        with _tap.ServerThread(srv):
            rc, out, err = curl(lst.port, "/")
        self.assertEqual((rc, out), (0, b"ok"), err)

    def test_errors_name_the_cause(self):
        srv = nanosrv.Manager()
        with self.assertRaises(nanosrv.TlsError) as cm:
            srv.set_tls(cert="/nonexistent/dir/cert.pem")
        self.assertIn("/nonexistent/dir/cert.pem", str(cm.exception))
        srv.close()
        srv = nanosrv.Manager()
        srv.set_tls(cert=C["srv.crt"], key=C["srv_enc.key"], password="wrong")
        with self.assertRaises(nanosrv.TlsError) as cm:
            srv.http_listen("https://127.0.0.1:0")
        self.assertRegex(str(cm.exception).lower(), "password|decrypt")
        srv.close()
        srv = nanosrv.Manager()
        srv.set_tls(cert=b"-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n",
                    key=C["srv.key"])
        with self.assertRaises(nanosrv.TlsError) as cm:
            srv.http_listen("https://127.0.0.1:0")
        self.assertRegex(str(cm.exception).lower(), "cert|pem|base64")
        srv.close()
        with self.assertRaises(ValueError):
            nanosrv.Manager().set_tls(verify_client="sometimes")

    def test_outbound(self):
        with Proc([sys.executable, os.path.join(EXAMPLES, "tcp_echo.py"), "--port", "0", "--cert", C["srv.crt"],
                   "--key", C["srv.key"]]) as p:
            for kw, expect_ok in (({"client_ca": C["ca.crt"]}, True), ({}, False),
                                  ({"verify_server": False}, True)):
                srv = nanosrv.Manager()
                srv.set_tls(**kw)
                out = {"data": b"", "err": None, "closed": False}

                class H(nanosrv.TcpHandler):
                    def on_open(self, conn):
                        conn.write(b"over tls")
                        conn.shutdown()

                    def on_data(self, conn, data):
                        out["data"] += data

                    def on_error(self, conn, exc):
                        out["err"] = exc

                    def on_close(self, conn):
                        out["closed"] = True
                c = srv.connect("tls://localhost:%d" % p.port, H)
                self.assertTrue(c.is_tls)
                for _ in range(400):
                    if out["closed"]:
                        break
                    srv.poll(50)
                srv.close()
                self.assertTrue(out["closed"], kw)
                if expect_ok:
                    self.assertEqual((out["data"], out["err"]), (b"over tls", None), kw)
                else:
                    self.assertEqual(out["data"], b"", kw)
                    self.assertIsInstance(out["err"], nanosrv.Error, kw)


if __name__ == "__main__":
    _tap.main()
