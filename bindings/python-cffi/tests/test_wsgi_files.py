"""nanosrv.wsgi's wsgi.file_wrapper: a real file goes out through the
library's file sender, by default as the app's plain answer (no validators
added, no Range or condition answered: what other WSGI servers send), with
file_wrapper="sender" with the sender's ETag, Accept-Ranges, Range and
conditional answers; anything else is read in blocks; close() is always
called."""
import hashlib
import io
import os
import shutil
import tempfile
import unittest

import _tap

from test_wsgi import Serving, request

WAIT = 10


class FileWrapper(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "data.bin")
        self.data = hashlib.sha256(b"seed").digest() * 32768  # 1 MiB
        with open(self.path, "wb") as f:
            f.write(self.data)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def app(self, closed, reads=None):
        path = self.path

        def app(environ, start_response):
            kind = environ["PATH_INFO"]
            wrap = environ["wsgi.file_wrapper"]
            if kind == "/bytesio":
                f = io.BytesIO(b"in memory " * 1000)
            else:
                f = open(path, "rb")
                if kind == "/seeked":
                    f.seek(1000)
            orig, orig_read = f.close, f.read

            def close():
                closed.append(kind)
                orig()

            def read(*a):
                if reads is not None:
                    reads.append(kind)
                return orig_read(*a)
            f.close, f.read = close, read
            status = "404 Not Found" if kind == "/404" else "200 OK"
            headers = [("Content-Type", "application/x-test"), ("X-App", "1")]
            if kind == "/etag":
                headers.append(("ETag", '"app-tag"'))
            start_response(status, headers)
            return wrap(f, 32768)
        return app

    def test_real_file_is_the_apps_plain_answer(self):
        # By default the file sender sends the app's answer as it is, as
        # gunicorn would: no ETag, Last-Modified or Accept-Ranges of the
        # library, Range and If-None-Match not answered; Python never reads it.
        closed, reads = [], []
        for threads in (0, 4):
            with Serving(self.app(closed, reads), threads=threads) as port:
                st, hd, body = request(port, "GET", "/file")
                self.assertEqual((st, body), (200, self.data))
                self.assertEqual((hd["content-type"], hd["x-app"], hd["content-length"]),
                                 ("application/x-test", "1", str(len(self.data))))
                for name in ("etag", "last-modified", "accept-ranges"):
                    self.assertNotIn(name, hd)
                st, hd2, body = request(port, "GET", "/file", headers={"Range": "bytes=10-19"})
                self.assertEqual((st, body), (200, self.data))
                self.assertNotIn("content-range", hd2)
                st, _, body = request(port, "GET", "/file", headers={"If-None-Match": "*"})
                self.assertEqual((st, body), (200, self.data))
                st, hd, body = request(port, "GET", "/etag")
                self.assertEqual((st, body, hd["etag"]), (200, self.data, '"app-tag"'))
                self.assertNotIn("accept-ranges", hd)
                st, hd3, body = request(port, "HEAD", "/file")
                self.assertEqual((st, body, hd3["content-length"]), (200, b"", str(len(self.data))))
                st, _, body = request(port, "GET", "/404")
                self.assertEqual((st, body), (404, self.data))
        self.assertEqual(reads, [])
        self.assertEqual(closed, (["/file"] * 3 + ["/etag", "/file", "/404"]) * 2)

    def test_sender_mode_answers_ranges_and_conditions(self):
        closed = []
        for threads in (0, 4):
            with Serving(self.app(closed), threads=threads, file_wrapper="sender") as port:
                st, hd, body = request(port, "GET", "/file")
                self.assertEqual((st, body), (200, self.data))
                self.assertEqual((hd["content-type"], hd["x-app"], hd["content-length"]),
                                 ("application/x-test", "1", str(len(self.data))))
                # The library's file sender answered: its validators and ranges.
                self.assertIn("etag", hd)
                self.assertEqual(hd.get("accept-ranges"), "bytes")
                st, hd2, body = request(port, "GET", "/file", headers={"Range": "bytes=10-19"})
                self.assertEqual((st, body, hd2["content-range"]), (206, self.data[10:20],
                                                                    "bytes 10-19/%d" % len(self.data)))
                st, _, body = request(port, "GET", "/file", headers={"If-None-Match": hd["etag"]})
                self.assertEqual((st, body), (304, b""))
                st, hd3, body = request(port, "HEAD", "/file")
                self.assertEqual((st, body, hd3["content-length"]), (200, b"", str(len(self.data))))
                st, _, body = request(port, "GET", "/404")
                self.assertEqual((st, body), (404, self.data))
        self.assertEqual(closed, ["/file"] * 4 + ["/404"] + ["/file"] * 4 + ["/404"])

    def test_other_objects_are_read(self):
        closed = []
        for threads in (0, 4):
            with Serving(self.app(closed), threads=threads) as port:
                st, hd, body = request(port, "GET", "/bytesio")
                self.assertEqual((st, body), (200, b"in memory " * 1000))
                self.assertNotIn("etag", hd)
                st, hd, body = request(port, "GET", "/seeked")  # not from its start: read from where it is
                self.assertEqual((st, body), (200, self.data[1000:]))
                self.assertNotIn("etag", hd)
        self.assertEqual(closed, ["/bytesio", "/seeked"] * 2)

    def test_app_validators(self):
        # The app set its own ETag: it stands by default and with "read";
        # file_wrapper="sender" gives the sender's validators instead.
        closed = []
        with Serving(self.app(closed), file_wrapper="sender") as port:
            st, hd, body = request(port, "GET", "/etag")
            self.assertEqual((st, body, hd.get("accept-ranges")), (200, self.data, "bytes"))
            self.assertNotEqual(hd["etag"], '"app-tag"')
        with Serving(self.app(closed), file_wrapper="read") as port:
            st, hd, body = request(port, "GET", "/etag")
            self.assertEqual((st, body, hd["etag"]), (200, self.data, '"app-tag"'))
            st, hd, body = request(port, "GET", "/file")
            self.assertEqual((st, body), (200, self.data))
            self.assertNotIn("etag", hd)
        self.assertEqual(closed, ["/etag", "/etag", "/file"])

    def test_file_wrapper_is_pep3333(self):
        import nanosrv.wsgi
        f = io.BytesIO(b"abcdefg")
        w = nanosrv.wsgi.FileWrapper(f, 3)
        self.assertEqual(list(w), [b"abc", b"def", b"g"])
        w.close()
        self.assertTrue(f.closed)


if __name__ == "__main__":
    _tap.main()
