"""Static files through the binding: Manager.static (nsv_serve_dir) with
its flags by name, Connection.send_file (nsv_reply_file) and mime_type.
Clients: http.client and curl."""
import http.client
import logging
import os
import shutil
import subprocess
import tempfile
import unittest

import _tap

import nanosrv

logging.getLogger("nanosrv").setLevel(logging.CRITICAL)


def get(port, path, headers=None, method="GET"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request(method, path, headers=headers or {})
    r = c.getresponse()
    out = r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    c.close()
    return out


class Static(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.outside = tempfile.mkdtemp()
        for name, data in [("index.html", b"<h1>home</h1>"), ("a.txt", b"0123456789"), (".secret", b"dot"),
                           ("list/one.css", b"body{}"), ("list/two.js", b"1")]:
            os.makedirs(os.path.dirname(os.path.join(self.dir, name)), exist_ok=True)
            with open(os.path.join(self.dir, name), "wb") as f:
                f.write(data)
        with open(os.path.join(self.outside, "out.txt"), "wb") as f:
            f.write(b"outside")
        os.symlink(os.path.join(self.outside, "out.txt"), os.path.join(self.dir, "link.txt"))

    def tearDown(self):
        shutil.rmtree(self.dir)
        shutil.rmtree(self.outside)

    def test_mounts(self):
        m = nanosrv.Manager()
        self.assertGreaterEqual(m.static("/s/", self.dir, cache_control="max-age=60"), 0)
        m.static("/all/", self.dir, list=True, dotfiles=True, symlinks=True)
        m.static("/ft/", self.dir, fallthrough=True)
        m.route("GET", "/ft/*", lambda c, msg: "route got " + msg.uri)
        self.assertRaises(TypeError, m.static, "/x/", self.dir, listing=True)
        self.assertRaises(FileNotFoundError, m.static, "/y/", os.path.join(self.dir, "a.txt"))
        with self.assertRaises(nanosrv.Error) as cm:
            m.static("no-slash", self.dir)
        self.assertEqual(cm.exception.name, "NSV_EINVAL")
        lst = m.http_listen("http://127.0.0.1:0")
        p = lst.port
        with _tap.ServerThread(m):
            st, h, body = get(p, "/s/a.txt")
            self.assertEqual((st, body, h["content-type"].split(";")[0], h["cache-control"]),
                             (200, b"0123456789", "text/plain", "max-age=60"))
            self.assertEqual(get(p, "/s/a.txt", {"If-None-Match": h["etag"]})[0], 304)
            st, h2, body = get(p, "/s/a.txt", {"Range": "bytes=2-4"})
            self.assertEqual((st, body, h2["content-range"]), (206, b"234", "bytes 2-4/10"))
            self.assertEqual(get(p, "/s/")[2], b"<h1>home</h1>")
            self.assertEqual(get(p, "/s/a.txt", method="HEAD")[1]["content-length"], "10")
            for bad in ("/s/.secret", "/s/../s/a.txt", "/s/%2e%2e/etc/passwd", "/s/link.txt", "/s/list/"):
                self.assertEqual(get(p, bad)[0], 404, bad)
            self.assertEqual(get(p, "/all/.secret")[2], b"dot")
            self.assertEqual(get(p, "/all/link.txt")[2], b"outside")
            st, _, listing = get(p, "/all/list/")
            self.assertEqual(st, 200)
            self.assertIn(b"one.css", listing)
            self.assertEqual(get(p, "/ft/a.txt")[2], b"0123456789")
            self.assertEqual(get(p, "/ft/nothing")[2], b"route got /ft/nothing")
            out = subprocess.run(["curl", "-s", "-o", "-", "-w", "%{http_code}",
                                  "http://127.0.0.1:%d/s/list/one.css" % p], capture_output=True, timeout=30).stdout
            self.assertEqual(out, b"body{}200")

    def test_send_file(self):
        m = nanosrv.Manager()
        root = self.dir

        @m.get("/files/*")
        def files(conn, msg):
            conn.set_cookie("v", "1")
            if not conn.send_file(msg, msg.params["*"], root=root, headers="X-From: send_file\r\n"):
                return 404, "no such file: " + msg.params["*"]

        @m.get("/page")
        def page(conn, msg):
            conn.send_file(msg, os.path.join(root, "index.html"), status=503,
                           headers="Content-Type: text/html; charset=utf-8\r\n")
        lst = m.http_listen("http://127.0.0.1:0")
        with _tap.ServerThread(m):
            st, h, body = get(lst.port, "/files/list/one.css")
            self.assertEqual((st, body, h["content-type"].split(";")[0], h["x-from"], h["set-cookie"]),
                             (200, b"body{}", "text/css", "send_file", "v=1"))
            self.assertEqual(get(lst.port, "/files/a.txt", {"Range": "bytes=-3"})[2], b"789")
            st, h, body = get(lst.port, "/files/missing.txt")
            self.assertEqual((st, body, h.get("set-cookie")), (404, b"no such file: missing.txt", "v=1"))
            self.assertEqual(get(lst.port, "/files/..%2fa.txt")[0], 404)
            st, h, body = get(lst.port, "/page")
            self.assertEqual((st, body, h["content-type"]), (503, b"<h1>home</h1>", "text/html; charset=utf-8"))

    def test_mime_type(self):
        self.assertEqual(nanosrv.mime_type("index.html"), "text/html; charset=utf-8")
        self.assertEqual(nanosrv.mime_type("x.unknown-ext"), "application/octet-stream")


if __name__ == "__main__":
    _tap.main()
