"""Operating behind load balancers (libnanosrv 1.4) from Python: PROXY
protocol v1 (curl --haproxy-protocol, raw headers) and v2 (raw headers with
TLVs), address lists (curl --interface 127.0.0.2), metrics after known
requests and their Prometheus text, access log lines in each format (the
same bytes as examples/lib/access_format.h), shedding at max_conns, the
draining flag, and the server command's flags and systemd socket
activation."""
import http.client
import json
import logging
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import _tap
import _net

import nanosrv
from nanosrv import ops
from nanosrv._ffi import ffi, lib

APPS = os.path.join(_tap.HERE, "apps")
ECHO = os.path.join(_tap.PKG, "examples", "echo.py")
REQ = b"GET /who?x=1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"


def _works(probe):
    """True when the loaded library implements what probe(manager) calls
    (a library with the 1.4 declarations but not the feature answers
    NSV_ENOTSUP: those tests are skipped, saying so)."""
    m = nanosrv.Manager()
    try:
        probe(m)
        return True
    except (nanosrv.NotSupportedError, AttributeError):
        return False
    finally:
        m.close()


_buf = ffi.new("char[]", 8192)
LISTENER_OPTS = _works(lambda m: m.http_listen("http://127.0.0.1:0", proxy_protocol="v1", allow="127.0.0.1"))
METRICS = _works(lambda m: nanosrv.errors.check(lib.nsv_metrics(m._srv, ffi.cast("uint64_t *", _buf), 1))
                 and ops.prometheus_text(m._srv))
ACCESS = _works(lambda m: nanosrv.errors.check(lib.nsv_access_take(m._srv, _buf, 8192)))
NOT_YET = "the loaded libnanosrv answers NSV_ENOTSUP for it"


def wait_for(pred, seconds=10.0):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.01)
    return pred()


def raw(port, data, src=None, timeout=10.0):
    """Everything the server sends back on one connection after `data`
    (until it closes)."""
    s = socket.socket()
    s.settimeout(timeout)
    try:
        if src:
            s.bind((src, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(data)
        out = b""
        while True:
            try:
                b = s.recv(65536)
            except ConnectionResetError:
                break
            if not b:
                break
            out += b
        return out
    finally:
        s.close()


def body_of(resp):
    return resp.partition(b"\r\n\r\n")[2]


def v1(src="203.0.113.7", dst="192.0.2.1", sport=4567, dport=80):
    return ("PROXY TCP4 %s %s %d %d\r\n" % (src, dst, sport, dport)).encode()


def v2(src="198.51.100.9", dst="192.0.2.2", sport=5555, dport=443, tlvs=b""):
    sig = b"\r\n\r\n\x00\r\nQUIT\n"
    addr = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!HH", sport, dport)
    return sig + bytes([0x21, 0x11]) + struct.pack("!H", len(addr) + len(tlvs)) + addr + tlvs


def tlv(t, value):
    return bytes([t]) + struct.pack("!H", len(value)) + value


def describe(conn, msg):
    conn.http_reply(200, "Content-Type: application/json\r\n",
                    json.dumps({"peer": list(msg.peer), "proxy": msg.proxy, "uri": msg.uri}))


class Server:
    """A Manager on 127.0.0.1:0 with `describe`, polled in a thread."""

    def __init__(self, **lopts):
        self.m = nanosrv.Manager()
        self.ref = self.m.http_listen("http://127.0.0.1:0", describe, **lopts)
        self.port = self.ref.port
        self.t = _tap.ServerThread(self.m)

    def __enter__(self):
        self.t.__enter__()
        return self

    def __exit__(self, *exc):
        self.t.__exit__(*exc)


def curl(*args):
    p = subprocess.run(["curl", "-s", "-S", "--max-time", "10"] + list(args), capture_output=True, timeout=30)
    return p.returncode, p.stdout


class Options(unittest.TestCase):
    """The binding's own conversions (no server needed)."""

    def test_proxy_versions(self):
        self.assertEqual(ops.proxy_version(True), lib.NSV_PROXY_ANY)
        self.assertEqual(ops.proxy_version("v1"), lib.NSV_PROXY_V1)
        self.assertEqual(ops.proxy_version("V2"), lib.NSV_PROXY_V2)
        self.assertEqual(ops.proxy_version(False), lib.NSV_PROXY_OFF)
        with self.assertRaisesRegex(nanosrv.InvalidArgument, "proxy_protocol must be"):
            ops.proxy_version("v3")

    def test_address_lists(self):
        self.assertEqual(ops.address_list(["10.0.0.0/8", "::1"]), b"10.0.0.0/8,::1")
        self.assertEqual(ops.address_list("127.0.0.1 ::1"), b"127.0.0.1 ::1")
        self.assertEqual(ops.address_list([]), b"")
        with self.assertRaises(TypeError):
            ops.address_list([10])
        m = nanosrv.Manager()
        try:
            with self.assertRaisesRegex(TypeError, "unknown listener option"):
                m.http_listen("http://127.0.0.1:0", describe, alow="127.0.0.1")
        finally:
            m.close()


def record(status=200, conn=7, time_ms=1764646380123, bytes_out=120, bytes_in=80, duration_us=1234,
           peer_port=40000, flags=0, method=b"GET", target=b"/x?y=1", peer=b"127.0.0.1", ua=b"", referer=b""):
    """One access record as nsv_access_take writes it (layout from the cdef)."""
    r = ffi.new("nsv_access_record *")
    strs = method + target + peer + ua + referer
    size = (ffi.sizeof("nsv_access_record") + len(strs) + 7) // 8 * 8
    r.size, r.status, r.conn, r.time_ms = size, status, conn, time_ms
    r.bytes_out, r.bytes_in, r.duration_us, r.peer_port, r.flags = bytes_out, bytes_in, duration_us, peer_port, flags
    r.method_len, r.target_len, r.peer_len, r.ua_len, r.referer_len = (
        len(method), len(target), len(peer), len(ua), len(referer))
    data = bytes(ffi.buffer(r)) + strs
    return data + b"\0" * (size - len(data))


RECORDS = [
    record(),
    record(status=404, flags=lib.NSV_EVF_HTTP10, duration_us=2000, ua=b"curl/7.88.1", referer=b"http://r/"),
    record(status=0, method=b"", target=b"", duration_us=0, peer=b"::1"),
    record(target=b'/q"\\\x01\x7f\xc3\xa9\xff', ua=b"caf\xc3\xa9 \"x\"", referer=b"\xff\xfe\t",
           duration_us=123456789, time_ms=1764646380007),
]

FORMAT_PROG = r"""
#include "lib/access_format.h"
int main(int argc, char **argv)
{
    static uint64_t buf[1 << 14];
    static char line[65536];
    int fmt = access_format_by_name(argv[1]);
    size_t n = fread(buf, 1, sizeof buf, stdin);
    (void)argc;
    for (size_t off = 0; off + sizeof(nsv_access_record) <= n;) {
        const nsv_access_record *r = (const nsv_access_record *)((const char *)buf + off);
        fwrite(line, 1, access_format_line(fmt, r, line, sizeof line), stdout);
        off += r->size;
    }
    return 0;
}
"""


class Formats(unittest.TestCase):
    """Access log lines from records: the bytes echo-server writes."""

    def test_lines(self):
        recs = ops.parse_records(b"".join(RECORDS))
        self.assertEqual(len(recs), 4)
        self.assertEqual(recs[1]["user_agent"], "curl/7.88.1")
        self.assertEqual(recs[3]["time"], "2025-12-02T03:33:00.007Z")
        old = os.environ.get("TZ")
        os.environ["TZ"] = "UTC"
        time.tzset()
        try:
            self.assertEqual(ops.format_common(recs[0]),
                             '127.0.0.1 - - [02/Dec/2025:03:33:00 +0000] "GET /x?y=1 HTTP/1.1" 200 120')
            self.assertEqual(ops.format_combined(recs[1]),
                             '127.0.0.1 - - [02/Dec/2025:03:33:00 +0000] "GET /x?y=1 HTTP/1.0" 404 120 '
                             '"http://r/" "curl/7.88.1"')
            self.assertEqual(ops.format_common(recs[2]), '::1 - - [02/Dec/2025:03:33:00 +0000] "-" 0 120')
            self.assertIn(r'"GET /q\x22\x5C\x01\x7F\xC3\xA9\xFF HTTP/1.1"', ops.format_common(recs[3]))
        finally:
            if old is None:
                del os.environ["TZ"]
            else:
                os.environ["TZ"] = old
            time.tzset()
        j = ops.format_json(recs[3])
        self.assertTrue(j.startswith('{"time":"2025-12-02T03:33:00.007Z","peer":"127.0.0.1","port":40000,'))
        self.assertIn('"duration_ms":123456.789,', j)
        self.assertIn(r'"target":"/q\"\\\u0001' + "\x7f\u00e9" + r'\u00ff"', j)
        self.assertEqual(json.loads(j)["referer"], "\u00ff\u00fe\t")
        self.assertIn('"duration_ms":0.000,', ops.format_json(recs[2]))

    @unittest.skipUnless(shutil.which("cc"), "no C compiler")
    def test_same_bytes_as_echo_server(self):
        inc = os.path.join(_tap.ROOT, "libnanosrv", "include")
        ex = os.path.join(_tap.ROOT, "examples")
        if not os.path.exists(os.path.join(ex, "lib", "access_format.h")):
            self.skipTest("examples/lib/access_format.h is not there")
        with tempfile.TemporaryDirectory() as d:
            src, exe = os.path.join(d, "fmt.c"), os.path.join(d, "fmt")
            with open(src, "w") as f:
                f.write(FORMAT_PROG)
            subprocess.run(["cc", "-std=c11", "-D_GNU_SOURCE", "-I" + inc, "-I" + ex, "-o", exe, src,
                            os.environ["NANOSRV_LIBRARY"],
                            "-Wl,-rpath," + os.path.dirname(os.path.abspath(os.environ["NANOSRV_LIBRARY"]))],
                           check=True, timeout=60)
            data = b"".join(RECORDS)
            old = os.environ.get("TZ")
            os.environ["TZ"] = "EST5"  # a zone with an offset, the same for both sides
            time.tzset()
            try:
                for fmt in ("common", "combined", "json"):
                    with self.subTest(fmt=fmt):
                        c = subprocess.run([exe, fmt], input=data, capture_output=True, timeout=30,
                                           env=dict(os.environ, TZ="EST5"), check=True).stdout
                        py = "".join(ops.FORMATS[fmt](r) + "\n" for r in ops.parse_records(data))
                        self.assertEqual(py.encode("utf-8", "surrogateescape"), c)
            finally:
                if old is None:
                    del os.environ["TZ"]
                else:
                    os.environ["TZ"] = old
                time.tzset()


@unittest.skipUnless(LISTENER_OPTS, "listener options: " + NOT_YET)
class Proxy(unittest.TestCase):
    """PROXY protocol headers: the peer is the client, msg.proxy the front."""

    def test_v1_raw(self):
        srv = Server(proxy_protocol="v1")
        self.assertEqual(srv.m.listener_option(srv.ref, "proxy_protocol"), lib.NSV_PROXY_V1)
        with srv as s:
            got = json.loads(body_of(raw(s.port, v1() + REQ)))
            self.assertEqual(got["peer"], ["203.0.113.7", 4567])
            self.assertEqual(got["proxy"]["front"], "127.0.0.1")
            self.assertEqual((got["proxy"]["dst"], got["proxy"]["dst_port"]), ("192.0.2.1", 80))
            self.assertEqual(got["proxy"]["alpn"], "")

    def test_curl_haproxy_protocol(self):
        with Server(proxy_protocol=True) as s:
            code, out = curl("--haproxy-protocol", "http://127.0.0.1:%d/c" % s.port)
            self.assertEqual(code, 0)
            got = json.loads(out)
            self.assertEqual(got["peer"][0], "127.0.0.1")
            self.assertIsNotNone(got["proxy"], "the connection is flagged as proxied")
            self.assertEqual(got["proxy"]["dst_port"], s.port)

    def test_v2_with_tlvs(self):
        ssl = tlv(0x20, b"\x01" + b"\0\0\0\0" + tlv(0x21, b"TLSv1.3"))
        h = v2(tlvs=tlv(0x01, b"h2") + tlv(0x02, b"example.com") + ssl)
        with Server(proxy_protocol="v2") as s:
            got = json.loads(body_of(raw(s.port, h + REQ)))
            self.assertEqual(got["peer"], ["198.51.100.9", 5555])
            p = got["proxy"]
            self.assertEqual((p["dst"], p["dst_port"], p["alpn"], p["authority"], p["ssl"]),
                             ("192.0.2.2", 443, "h2", "example.com", "TLSv1.3"))

    def test_missing_header_closes_and_counts(self):
        with Server(proxy_protocol="v1") as s:
            self.assertEqual(raw(s.port, REQ), b"", "a request without the header gets no answer")
            self.assertTrue(wait_for(lambda: s.m.metrics["proxy_errors"] == 1), s.m.metrics)

    def test_plain_listener_has_no_proxy(self):
        with Server() as s:
            got = json.loads(body_of(raw(s.port, REQ)))
            self.assertIsNone(got["proxy"])
            self.assertEqual(got["peer"][0], "127.0.0.1")


    def test_raw_tcp_listener(self):
        m = nanosrv.Manager()
        peers = []

        class Peer(nanosrv.TcpHandler):
            def on_open(self, conn):
                peers.append(conn.peer)
                conn.write(b"%s %d\n" % (conn.peer[0].encode(), conn.peer[1]))
                conn.close()
        lst = m.tcp_listen("tcp://127.0.0.1:0", Peer, proxy_protocol="v2")
        with _tap.ServerThread(m):
            self.assertEqual(raw(lst.port, v2()), b"198.51.100.9 5555\n")
            self.assertEqual(raw(lst.port, b"hello"), b"", "no header, no connection")


@unittest.skipUnless(LISTENER_OPTS, "listener options: " + NOT_YET)
class AddressLists(unittest.TestCase):

    def test_deny_and_allow_with_curl_interface(self):
        with Server(deny=["127.0.0.2"]) as s:
            self.assertEqual(curl("http://127.0.0.1:%d/a" % s.port)[0], 0)
            self.assertNotEqual(curl("--interface", "127.0.0.2", "http://127.0.0.1:%d/a" % s.port)[0], 0)
            self.assertTrue(wait_for(lambda: s.m.metrics["conns_denied"] == 1), s.m.metrics)
        with Server(allow="127.0.0.2/32") as s:
            self.assertNotEqual(curl("http://127.0.0.1:%d/a" % s.port)[0], 0)
            code, out = curl("--interface", "127.0.0.2", "http://127.0.0.1:%d/a" % s.port)
            self.assertEqual(code, 0)
            self.assertEqual(json.loads(out)["peer"][0], "127.0.0.2")

    def test_proxy_from_and_client_lists(self):
        # The front must be in proxy_from; allow/deny apply to the header's client.
        with Server(proxy_protocol="v1", proxy_from="127.0.0.1", deny="203.0.113.0/24") as s:
            self.assertEqual(raw(s.port, v1(src="203.0.113.7") + REQ), b"")
            self.assertIn(b"198.51.100.1", raw(s.port, v1(src="198.51.100.1") + REQ))
            self.assertEqual(raw(s.port, v1(src="198.51.100.1") + REQ, src="127.0.0.2"), b"")

    def test_bad_list_raises_with_detail(self):
        m = nanosrv.Manager()
        try:
            with self.assertRaisesRegex(nanosrv.InvalidArgument, r"10\.0\.0\.1/8"):
                m.http_listen("http://127.0.0.1:0", describe, allow=["127.0.0.1", "10.0.0.1/8"])
            ref = m.http_listen("http://127.0.0.1:0", describe)
            with self.assertRaisesRegex(nanosrv.InvalidArgument, "nonsense"):
                ref.configure(deny="nonsense")
        finally:
            m.close()


def get(port, path, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", path, headers=headers or {})
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()


@unittest.skipUnless(METRICS, "metrics: " + NOT_YET)
class Metrics(unittest.TestCase):

    def setUp(self):
        self.m = nanosrv.Manager()
        self.m.get("/metrics", ops.metrics_handler(self.m))
        self.m.get("/ok", lambda c, msg: c.http_reply(200, "", "ok"))
        self.port = self.m.http_listen("http://127.0.0.1:0").port  # everything else: 404

    def tearDown(self):
        self.m.close()

    def test_values_after_known_requests(self):
        before = self.m.metrics()
        self.assertEqual(before["requests"], 0)
        with _tap.ServerThread(self.m):
            for _ in range(3):
                self.assertEqual(get(self.port, "/ok")[0], 200)
            self.assertEqual(get(self.port, "/nope")[0], 404)
            self.assertTrue(wait_for(lambda: self.m.metrics["requests"] == 4), self.m.metrics)
            m = self.m.metrics
            self.assertEqual((m["resp_2xx"], m["resp_4xx"], m["resp_5xx"]), (3, 1, 0))
            self.assertEqual(m["conns_accepted"], 4)
            self.assertGreater(m["bytes_in"], 4 * len("GET /ok HTTP/1.1\r\n"))
            self.assertEqual(m.bytes_read, m["bytes_in"])
            h = m["lat_queued"]
            self.assertEqual(h["count"], 4)
            self.assertEqual(h["buckets"][-1], [float("inf"), 4])
            self.assertEqual(h["buckets"][0][0], 0.0001)
            self.assertEqual([b[1] for b in h["buckets"]], sorted(b[1] for b in h["buckets"]))
            self.assertGreaterEqual(h["sum_seconds"], 0.0)
            self.assertEqual(self.m.metrics_worker(0)["requests"], 4)

    def test_prometheus_text(self):
        with _tap.ServerThread(self.m):
            get(self.port, "/ok")
            st, hdrs, body = get(self.port, "/metrics")
            self.assertEqual(st, 200)
            self.assertEqual(hdrs["Content-Type"], "text/plain; version=0.0.4")
            text = body.decode()
            self.assertIn("# TYPE nanosrv_requests_total counter", text)
            self.assertRegex(text, r"(?m)^nanosrv_requests_total 1$")
            self.assertRegex(text, r'(?m)^nanosrv_\w+_bucket\{le="\+Inf"\} \d+$')
            for line in text.splitlines():
                self.assertRegex(line, r'^(# (HELP|TYPE) \w+ .+|\w+(\{[^}]*\})? [0-9.e+-]+)$')
            self.assertIn("app_requests_total", self.m.metrics_text("app_"))
            with self.assertRaises(nanosrv.InvalidArgument):
                self.m.metrics_text("bad-prefix")


@unittest.skipUnless(METRICS and nanosrv.sharded_available(), "sharded metrics: " + NOT_YET)
class ShardedMetrics(unittest.TestCase):

    def test_per_worker(self):
        m = nanosrv.ShardedManager(2)
        m.set_option("shard_accept", 1)  # one acceptor hands connections to the workers in turn
        port = m.http_listen("http://127.0.0.1:0", lambda c, msg: c.http_reply(200, "", "ok")).port
        with _tap.ServerThread(m):
            for _ in range(6):
                self.assertEqual(get(port, "/")[0], 200)
            self.assertTrue(wait_for(lambda: m.metrics["requests"] == 6), m.metrics)
            per = [m.metrics_worker(i)["requests"] for i in range(2)]
            self.assertEqual(sum(per), 6)
            text = m.metrics_text(per_worker=True)
            self.assertRegex(text, r'(?m)^nanosrv_requests_total\{worker="0"\} \d+$')
            self.assertRegex(text, r'(?m)^nanosrv_requests_total\{worker="1"\} \d+$')
            with self.assertRaises(nanosrv.Error):
                m.metrics_worker(2)


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, rec):
        self.lines.append(rec.getMessage())


@unittest.skipUnless(ACCESS, "access records: " + NOT_YET)
class AccessLog(unittest.TestCase):

    def setUp(self):
        self.h = _Lines()
        lg = logging.getLogger("nanosrv.access")
        lg.addHandler(self.h)
        lg.setLevel(logging.INFO)

    def tearDown(self):
        logging.getLogger("nanosrv.access").removeHandler(self.h)

    def run_requests(self, fmt, n=1, path="/ok?a=1", want=None):
        """n requests to a new server whose access_log is fmt; the lines."""
        self.h.lines.clear()
        m = nanosrv.Manager()
        m.get("/ok", lambda c, msg: c.http_reply(200, "", "ok"))
        port = m.http_listen("http://127.0.0.1:0").port
        if fmt is not None:
            m.access_log = fmt
            self.assertEqual(m.access_log, fmt)
        with _tap.ServerThread(m):
            for _ in range(n):
                get(port, path, {"User-Agent": "ua/1", "Referer": "http://ref/"})
            wait_for(want or (lambda: len(self.h.lines) >= n), 5)
        return self.h.lines

    def test_off_by_default(self):
        m = nanosrv.Manager()
        port = m.http_listen("http://127.0.0.1:0").port
        self.assertIsNone(m.access_log)
        self.assertEqual(m.get_option("access_log"), 0)
        buf = ffi.new("char[]", 8192)
        with _tap.ServerThread(m):
            get(port, "/")
            self.assertTrue(wait_for(lambda: m.metrics["requests"] == 1))
            self.assertEqual(lib.nsv_access_take(m._srv, buf, 8192), 0, "no records are kept")
        self.assertEqual(self.h.lines, [])

    def test_common_combined_json(self):
        clf = r'^127\.0\.0\.1 - - \[\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\] "GET /ok\?a=1 HTTP/1\.1" 200 \d+'
        for fmt, rx in (("common", clf + "$"), ("combined", clf + ' "http://ref/" "ua/1"$')):
            with self.subTest(fmt=fmt):
                lines = self.run_requests(fmt)
                self.assertEqual(len(lines), 1, lines)
                self.assertRegex(lines[0], rx)
        lines = self.run_requests("json", 2, "/missing")
        self.assertEqual(len(lines), 2, lines)
        j = json.loads(lines[0])
        self.assertEqual(list(j), ["time", "peer", "port", "method", "target", "status", "bytes_out",
                                   "bytes_in", "duration_ms", "user_agent", "referer"])
        self.assertEqual((j["peer"], j["method"], j["target"], j["status"], j["user_agent"], j["referer"]),
                         ("127.0.0.1", "GET", "/missing", 404, "ua/1", "http://ref/"))
        self.assertRegex(j["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        self.assertGreater(j["bytes_out"], 0)

    def test_callable_and_off_again(self):
        got = []
        self.run_requests(got.append, 2, want=lambda: len(got) >= 2)
        self.assertEqual(len(got), 2)
        self.assertEqual((got[0]["status"], got[0]["target"], got[0]["user_agent"]), (200, "/ok?a=1", "ua/1"))
        m = nanosrv.Manager()
        try:
            m.access_log = "json"
            self.assertGreater(m.get_option("access_log"), 0)
            m.access_log = None
            self.assertEqual(m.get_option("access_log"), 0)
            with self.assertRaisesRegex(ValueError, "access_log must be"):
                m.access_log = "apache"
        finally:
            m.close()


@unittest.skipUnless(METRICS, "metrics: " + NOT_YET)
class ShedAndDrain(unittest.TestCase):

    def test_shed_evicts_an_idle_connection(self):
        m = nanosrv.Manager()
        m.get("/ok", lambda c, msg: c.http_reply(200, "", "ok"))
        port = m.http_listen("http://127.0.0.1:0").port
        m.set_max_connections(2)
        self.assertEqual(m.get_option("shed"), 1)
        with _tap.ServerThread(m):
            idle = []
            for _ in range(2):
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                c.request("GET", "/ok")
                c.getresponse().read()
                idle.append(c)
            self.assertEqual(get(port, "/ok")[0], 200, "the third client is served")
            self.assertTrue(wait_for(lambda: m.metrics["conns_evicted"] == 1), m.metrics)
            for c in idle:
                c.close()

    def test_draining_flag_and_readyz(self):
        m = nanosrv.Manager()
        ready = ops.readyz_handler(m)
        m.http_listen("http://127.0.0.1:0")
        answers = []

        class Conn:
            def http_reply(self, status, headers, body):
                answers.append((status, body))
        self.assertFalse(m.draining)
        ready(Conn(), None)
        m.drain_start(1000)
        self.assertTrue(m.draining)
        self.assertEqual(m.metrics["draining"], 1)
        ready(Conn(), None)
        self.assertEqual(answers, [(200, "ready\n"), (503, "draining\n")])
        m.close()


def cmd(args, extra_env=None, pass_fds=(), shell_prefix=None):
    env = _net.env()
    env.pop("PYTHONUNBUFFERED", None)
    env.update(extra_env or {})
    argv = [sys.executable, "-m", "nanosrv"] + list(args)
    if shell_prefix:
        argv = ["sh", "-c", shell_prefix + ' exec "$@"', "sh"] + argv
    return subprocess.Popen(argv, cwd=APPS, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            pass_fds=pass_fds)


def listening(p, seconds=30):
    line = _read_line(p, seconds)
    m = re.match(r"^listening on (\d+) ", line)
    if not m:
        p.kill()
        raise AssertionError("no listening line: %r; stderr %r" % (line, p.communicate(timeout=10)[1]))
    return int(m.group(1))


def _read_line(p, seconds):
    import select
    fd, buf, end = p.stdout.fileno(), b"", time.monotonic() + seconds
    while b"\n" not in buf and time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            b = os.read(fd, 4096)
            if not b:
                break
            buf += b
        elif p.poll() is not None:
            break
    return buf.decode().split("\n")[0]


def stop(p):
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)
    out, err = p.communicate(timeout=10)
    return p.returncode, err.decode("utf-8", "replace")


@unittest.skipUnless(LISTENER_OPTS and METRICS, "listener options or metrics: " + NOT_YET)
class Command(unittest.TestCase):
    """python3 -m nanosrv with the load balancer flags."""

    def test_asgi_and_wsgi_behind_proxy(self):
        for app in ("ops_apps:asgi_app", "ops_apps:wsgi_app"):
            with self.subTest(app=app):
                p = cmd([app, "--port", "0", "--proxy-protocol", "--metrics-path", "/metrics",
                         "--access-log", "json", "--allow", "203.0.113.0/24"])
                try:
                    port = listening(p)
                    got = json.loads(body_of(raw(port, v1() + REQ)))
                    self.assertEqual(got["client"], ["203.0.113.7", 4567])
                    self.assertEqual(got["proxy"]["front"], "127.0.0.1")
                    self.assertEqual(raw(port, v1(src="198.51.100.1") + REQ), b"", "not in --allow")
                    m = body_of(raw(port, v1() + b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"))
                    self.assertRegex(m.decode(), r"(?m)^nanosrv_requests_total 1$")
                    self.assertRegex(m.decode(), r"(?m)^nanosrv_connections_denied_total 1$")
                finally:
                    code, err = stop(p)
                self.assertEqual(code, 0, err)
                lines = [json.loads(x.partition("INFO: ")[2]) for x in err.splitlines() if '"target":' in x]
                self.assertEqual([(x["peer"], x["target"]) for x in lines],
                                 [("203.0.113.7", "/who?x=1"), ("203.0.113.7", "/metrics")])

    def test_reuseport_flag(self):
        from nanosrv import server
        a = server.parse_args(["m:app", "--port", "0", "--reuseport"])
        s1 = server.bind_socket(a)
        try:
            b = server.parse_args(["m:app", "--port", str(s1.getsockname()[1]), "--reuseport"])
            s2 = server.bind_socket(b)
            self.assertEqual(s2.getsockname()[1], s1.getsockname()[1], "two servers bind one port")
            s2.close()
            with self.assertRaisesRegex(server.StartupError, "address already in use"):
                server.bind_socket(server.parse_args(["m:app", "--port", str(s1.getsockname()[1])]))
        finally:
            s1.close()
        import contextlib
        import io
        err = io.StringIO()
        with self.assertRaises(SystemExit), contextlib.redirect_stderr(err):
            server.parse_args(["m:app", "--proxy-from", "10.0.0.0/8"])
        self.assertIn("need --proxy-protocol", err.getvalue())

    def test_bad_list_is_a_startup_error(self):
        p = cmd(["ops_apps:wsgi_app", "--port", "0", "--deny", "10.0.0.1/8"])
        try:
            p.wait(30)
        finally:
            code, err = stop(p)
        self.assertEqual(code, 3)
        self.assertIn("10.0.0.1/8", err)

    def test_systemd_socket_activation_with_workers(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        port = s.getsockname()[1]
        try:
            for extra in ([], ["--workers", "2"]):
                with self.subTest(extra=extra):
                    p = cmd(["ops_apps:wsgi_app", "--port", "1"] + extra, pass_fds=(s.fileno(),),
                            shell_prefix="exec 3<&%d; LISTEN_FDS=1 LISTEN_PID=$$; export LISTEN_FDS LISTEN_PID;"
                            % s.fileno())
                    try:
                        self.assertEqual(listening(p), port, "the passed socket is served, --port ignored")
                        for _ in range(4):
                            st, _, body = get(port, "/")
                            self.assertEqual(st, 200)
                            self.assertEqual(json.loads(body)["client"][0], "127.0.0.1")
                    finally:
                        code, err = stop(p)
                    self.assertEqual(code, 0, err)
        finally:
            s.close()


@unittest.skipUnless(LISTENER_OPTS and METRICS, "listener options or metrics: " + NOT_YET)
class EchoExample(unittest.TestCase):

    def test_peer_front_and_metrics(self):
        p = subprocess.Popen([sys.executable, ECHO, "--port", "0", "--proxy-protocol", "--access-log", "common"],
                             env=_net.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            line = _read_line(p, 30)
            self.assertRegex(line, r"^listening on \d+$")
            port = int(line.split()[-1])
            got = json.loads(body_of(raw(port, v1() + REQ)))
            self.assertEqual((got["peer"], got["peer_port"], got["front"]), ("203.0.113.7", 4567, "127.0.0.1"))
            m = body_of(raw(port, v2() + b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"))
            self.assertIn(b"nanosrv_requests_total 1\n", m)
            self.assertEqual(body_of(raw(port, v2() + b"GET /readyz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")),
                             b"ready")
            self.assertRegex(_read_line(p, 10), r'^203\.0\.113\.7 - - \[.*\] "GET /who\?x=1 HTTP/1\.1" 200 \d+$')
        finally:
            p.terminate()
            p.communicate(timeout=20)
        self.assertEqual(p.returncode, 0)


def readme_blocks():
    text = open(os.path.join(_tap.PKG, "README.md")).read()
    part = text[text.index("### Behind a load balancer"):text.index("### Packaging")]
    return re.findall(r"```python\n(.*?)```", part, re.S)


@unittest.skipUnless(LISTENER_OPTS and METRICS and ACCESS, "1.4 features: " + NOT_YET)
class Readme(unittest.TestCase):
    """The "Behind a load balancer" snippet, run as written."""

    def test_snippet(self):
        blocks = readme_blocks()
        self.assertEqual(len(blocks), 1)
        h = _Lines()
        lg = logging.getLogger("nanosrv.access")
        lg.addHandler(h)
        lg.setLevel(logging.INFO)
        ns = {}
        try:
            exec(compile(blocks[0], "README.md", "exec"), ns)
            srv, port = ns["srv"], ns["lst"].port
            with _tap.ServerThread(srv):
                self.assertEqual(body_of(raw(port, v1() + REQ)), b"hello 203.0.113.7 via 127.0.0.1\n")
                m = body_of(raw(port, v2() + b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"))
                self.assertIn(b"nanosrv_requests_total 1\n", m)
                ready = raw(port, v2() + b"GET /readyz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                self.assertTrue(ready.startswith(b"HTTP/1.1 200"), ready)
                self.assertEqual(raw(port, v1(src="192.0.2.5") + REQ), b"", "denied")
                self.assertTrue(wait_for(lambda: len(h.lines) >= 3), h.lines)
            self.assertRegex(h.lines[0], r'^203\.0\.113\.7 - - \[.*\] "GET /who\?x=1 HTTP/1\.1" 200 \d+ "-" "-"$')
        finally:
            lg.removeHandler(h)


if __name__ == "__main__":
    _tap.main()
