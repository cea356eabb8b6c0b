"""The binding's view of the ABI against the generated description
(bindings/cdef/nanosrv_abi.json): every enum constant, the event record
layout as the dispatch unpacks it, flags and opcodes; then the parts that
depend on it over real sockets: the TLS block of requests (SNI, verified
client subject) from a TLS listener, and HANGUP / NSV_EVF_EOF as
msg.disconnected."""
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import unittest

import _tap
from _tap import ServerThread

import nanosrv
from nanosrv import _ffi, _message

ABI_JSON = os.path.join(_tap.ROOT, "bindings", "cdef", "nanosrv_abi.json")
with open(ABI_JSON) as f:
    ABI = json.load(f)


class Description(unittest.TestCase):
    def test_abi_major(self):
        self.assertEqual(_ffi.ABI_MAJOR, ABI["abi_major"])

    def test_every_enum(self):
        # The binding reads its constants from the cdef'd enums: they must
        # be exactly the JSON's, group by group.
        self.assertEqual(_ffi.ENUMS, ABI["enums"])
        for group in ABI["enums"].values():
            for name, value in group.items():
                self.assertEqual(getattr(_ffi.lib, name), value, name)

    def test_event_layout(self):
        ev = ABI["structs"]["nsv_event"]
        self.assertEqual(_ffi.EVENT_SIZE, ev["size"])
        self.assertEqual(_message.EVENT.size, ev["size"])
        self.assertEqual(_ffi.EVENT_FIELDS, [(f["name"], f["offset"], f["type"]) for f in ev["fields"]])
        # Every field, filled with a distinct value through cffi, comes back
        # at its index in the tuple the dispatch unpacks.
        rec = _ffi.ffi.new("nsv_event *")
        want = {}
        for i, f in enumerate(ev["fields"]):
            v = (0x0102030405060708 + i) if f["type"] in ("uint64_t",) else -(1000 + i) if f["type"] == "int32_t" \
                else 0x10000 + i
            setattr(rec, f["name"], v)
            want[f["name"]] = v
        got = _message.EVENT.unpack_from(_ffi.ffi.buffer(rec))
        self.assertEqual(set(_message.FIELD), set(want))
        for name, v in want.items():
            self.assertEqual(got[_message.FIELD[name]], v, name)
        # The named indices used by the dispatch point at their fields.
        for const, name in (("CONN", "conn"), ("TYPE", "type"), ("FLAGS", "flags"), ("ROUTE", "route"),
                            ("CODE", "code"), ("BODY", "body_off"), ("BODY_LEN", "body_len"),
                            ("TLS", "tls_off"), ("TLS_LEN", "tls_len"), ("LISTENER", "listener"),
                            ("PEER_PORT", "peer_port")):
            self.assertEqual(getattr(_message, const), _message.FIELD[name], const)
        pairs = sorted(f["name"] for f in ev["fields"] if f["name"].endswith("_off"))
        self.assertEqual(sorted(n for n, i in _message.FIELD.items() if i in _message._PAIRS), pairs)

    def test_flags_and_opcodes(self):
        flags = ABI["enums"]["nsv_event_flag"]
        for name in ("KEEPALIVE", "HEAD", "HTTP10", "CHUNKED", "UPGRADE", "TLS", "EOF"):
            self.assertEqual(getattr(_message, "EVF_" + name), flags["NSV_EVF_" + name], name)
        ops = ABI["enums"]["nsv_ws_opcode"]
        for name in ("Text", "Binary", "Ping", "Pong"):
            self.assertEqual(int(getattr(nanosrv.WsOpcode, name)), ops["NSV_WS_" + name.upper()], name)
        levels = ABI["enums"]["nsv_log_level"]
        self.assertEqual({"NSV_LOG_" + ("NONE" if m is nanosrv.LogLevel.Off else m.name.upper()): int(m)
                          for m in nanosrv.LogLevel}, levels)
        errs = ABI["enums"]["nsv_err"]
        self.assertEqual(nanosrv.errors.ESTALE, errs["NSV_ESTALE"])
        self.assertEqual(nanosrv.errors.ESTATE, errs["NSV_ESTATE"])
        self.assertEqual(nanosrv.errors.ENOTSUP, errs["NSV_ENOTSUP"])
        for name, code in errs.items():
            if code < 0:
                self.assertEqual(nanosrv.Error(code).name, name)

    def test_mismatched_json_is_refused(self):
        # A JSON whose event layout differs from the cdef's stops the import.
        d = tempfile.mkdtemp(prefix="nsv-abi-")
        try:
            bad = json.loads(json.dumps(ABI))
            bad["structs"]["nsv_event"]["fields"][-1]["offset"] += 4
            pkg = os.path.join(d, "nanosrv")
            shutil.copytree(os.path.join(_tap.PKG, "nanosrv"), pkg)
            with open(os.path.join(pkg, "nanosrv_abi.json"), "w") as f:
                json.dump(bad, f)
            shutil.copyfile(os.path.join(_tap.ROOT, "bindings", "cdef", "nanosrv_cdef.h"),
                            os.path.join(pkg, "nanosrv_cdef.h"))
            r = subprocess.run(["/usr/bin/python3", "-c", "import nanosrv"], cwd=d, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=60)
            out = r.stdout.decode()
            self.assertNotEqual(r.returncode, 0, out)
            self.assertIn("describe nsv_event differently", out)
        finally:
            shutil.rmtree(d, ignore_errors=True)


def sh(d, *argv):
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=d)


def make_certs(d):
    def ca(name, cn):
        sh(d, "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-keyout", name + ".key", "-out", name + ".crt", "-days", "30", "-subj", "/CN=" + cn)

    def cert(name, subj, san=None):
        sh(d, "openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-keyout", name + ".key", "-out", name + ".csr", "-subj", subj)
        argv = ["openssl", "x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", name + ".crt", "-days", "30"]
        if san:
            with open(os.path.join(d, name + ".ext"), "w") as f:
                f.write("subjectAltName=" + san + "\n")
            argv += ["-extfile", name + ".ext"]
        sh(d, *argv)
    ca("ca", "nanosrv binding test CA")
    cert("srv", "/CN=localhost", "DNS:localhost,IP:127.0.0.1")
    cert("alice", "/CN=alice/O=Example")


def read_response(sock):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = sock.recv(65536)
        if not d:
            break
        buf += d
    head, _, body = buf.partition(b"\r\n\r\n")
    n = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v)
    while len(body) < n:
        d = sock.recv(65536)
        if not d:
            break
        body += d
    return head.split(b"\r\n")[0], body


@unittest.skipUnless(nanosrv.tls_available() and shutil.which("openssl"), "library built without TLS")
class Tls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = tempfile.mkdtemp(prefix="nsv-pytls-")
        make_certs(cls.d)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.d, ignore_errors=True)

    def p(self, name):
        return os.path.join(self.d, name)

    def serve(self, verify_client):
        m = nanosrv.Manager()
        m.set_option("tls_cert_file", self.p("srv.crt"))
        m.set_option("tls_key_file", self.p("srv.key"))
        m.set_option("tls_ca_file", self.p("ca.crt"))
        m.set_option("tls_verify_client", verify_client)
        seen = []

        def handler(conn, msg):
            t = msg.tls
            seen.append(t)
            conn.http_reply(200, "Content-Type: text/plain\r\n",
                            "none" if t is None else "%s|%s" % (t.sni, t.peer_subject))
        lis = m.http_listen("https://127.0.0.1:0", handler)
        plain = m.http_listen("http://127.0.0.1:0", handler)
        return m, lis.port, plain.port, seen

    def get(self, port, sni, cert=None):
        ctx = ssl.create_default_context(cafile=self.p("ca.crt"))
        ctx.check_hostname = False
        if cert:
            ctx.load_cert_chain(self.p(cert + ".crt"), self.p(cert + ".key"))
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        s = ctx.wrap_socket(raw, server_hostname=sni)
        s.sendall(b"GET /x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        status, body = read_response(s)
        s.close()
        return status, body

    def test_sni_and_verified_subject(self):
        m, port, plain, seen = self.serve(1)
        with ServerThread(m):
            status, body = self.get(port, "localhost", cert="alice")
            self.assertIn(b"200", status)
            sni, _, subject = body.decode().partition("|")
            self.assertEqual(sni, "localhost")
            self.assertIn("CN=alice", subject)
            self.assertIn("O=Example", subject)
            # No client certificate: SNI still there, subject empty.
            status, body = self.get(port, "other.example")
            self.assertEqual(body, b"other.example|")
            # A plain connection has no TLS block.
            sock = socket.create_connection(("127.0.0.1", plain), timeout=10)
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            self.assertEqual(read_response(sock)[1], b"none")
            sock.close()
        self.assertIsInstance(seen[0], nanosrv.TlsInfo)
        self.assertIsNone(seen[-1])

    def test_tls_survives_a_kept_message(self):
        # A message kept past its batch is frozen: the TLS block comes along.
        m = nanosrv.Manager()
        m.set_option("tls_cert_file", self.p("srv.crt"))
        m.set_option("tls_key_file", self.p("srv.key"))
        kept = []

        def handler(conn, msg):
            kept.append(msg)
            conn.http_reply(200, "", "ok")
        port = m.http_listen("https://127.0.0.1:0", handler).port
        with ServerThread(m):
            self.get(port, "kept.example")
            self.get(port, "second.example")
        self.assertEqual([k.tls.sni for k in kept], ["kept.example", "second.example"])


class Hangup(unittest.TestCase):
    def test_hangup_marks_the_pending_request(self):
        m = nanosrv.Manager()
        held = []
        port = m.http_listen("http://127.0.0.1:0", lambda conn, msg: held.append((conn, msg, msg.disconnected))).port
        called = []
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET /long HTTP/1.1\r\nHost: x\r\n\r\n")
        deadline = time.time() + 5
        while not held and time.time() < deadline:
            m.poll(50)
        conn, msg, was = held[0]
        self.assertFalse(was)
        self.assertFalse(msg.disconnected)
        msg.on_disconnect(lambda: called.append(1))
        s.shutdown(socket.SHUT_WR)  # the client ends its side, still reading
        deadline = time.time() + 5
        while not called and time.time() < deadline:
            m.poll(50)
        self.assertEqual(called, [1])
        self.assertTrue(msg.disconnected)
        self.assertFalse(conn.closed)
        conn.http_reply(200, "", "late answer")  # a half-closed client still gets it
        for _ in range(5):
            m.poll(20)
        status, body = read_response(s)
        self.assertIn(b"200", status)
        self.assertEqual(body, b"late answer")
        s.close()
        m.close()

    def test_eof_flag_on_a_pipelined_request(self):
        m = nanosrv.Manager()
        seen = []

        def handler(conn, msg):
            seen.append((conn, msg, msg.disconnected))
            if msg.path != "/a":
                conn.http_reply(200, "", msg.path)
        port = m.http_listen("http://127.0.0.1:0", handler).port
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
        s.shutdown(socket.SHUT_WR)
        deadline = time.time() + 5
        while not (seen and seen[0][1].disconnected) and time.time() < deadline:
            m.poll(50)
        self.assertEqual(len(seen), 1)  # /b waits for the answer to /a
        self.assertTrue(seen[0][1].disconnected)  # HANGUP: /a was with the handler
        seen[0][0].http_reply(200, "", "/a")
        deadline = time.time() + 5
        while len(seen) < 2 and time.time() < deadline:
            m.poll(50)
        for _ in range(5):
            m.poll(20)
        self.assertEqual([x[1].path for x in seen], ["/a", "/b"])
        # /b reached the handler after the client had ended its side: NSV_EVF_EOF.
        self.assertTrue(seen[1][2])
        data = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
        self.assertEqual(data.count(b"HTTP/1.1 200"), 2)
        s.close()
        m.close()

    def test_asyncio_wait_disconnected(self):
        import asyncio
        out = []

        async def main():
            m = nanosrv.Manager()

            @m.route("GET", "/poll")
            async def longpoll(conn, msg):
                await asyncio.wait_for(msg.wait_disconnected(), 5)
                out.append("gone")
                return "bye"
            port = m.http_listen("http://127.0.0.1:0").port
            task = asyncio.ensure_future(nanosrv.aio.serve(m))

            def client():
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                s.sendall(b"GET /poll HTTP/1.1\r\nHost: x\r\n\r\n")
                time.sleep(0.2)
                s.shutdown(socket.SHUT_WR)
                out.append(read_response(s)[1])
                s.close()
            t = threading.Thread(target=client)
            t.start()
            await asyncio.get_running_loop().run_in_executor(None, t.join, 10)
            m.stop()
            await task
            m.close()
        asyncio.run(main())
        self.assertEqual(out, ["gone", b"bye"])


if __name__ == "__main__":
    _tap.main()
