"""multipart/form-data through nanosrv.multipart: the push parser, parts
read synchronously and under asyncio while the body streams, read_form
spooling file parts to disk past a threshold, and the errors a handler
turns into 400 / 413 / 415. Clients: curl -F and http.client."""
import hashlib
import http.client
import json
import logging
import os
import subprocess
import tempfile
import unittest

import _tap
from test_stream import AsyncServer

import nanosrv
from nanosrv import multipart

logging.getLogger("nanosrv").setLevel(logging.CRITICAL)

CT = "multipart/form-data; boundary=xx"
BODY = (b'--xx\r\nContent-Disposition: form-data; name="a"\r\n\r\nhello\r\n'
        b'--xx\r\nContent-Disposition: form-data; name="f"; filename="x.bin"\r\nContent-Type: image/png\r\n\r\n'
        + b"D" * 5000 + b'\r\n--xx\r\nContent-Disposition: form-data; name="a"\r\n\r\nagain\r\n--xx--\r\n')


def post(port, path, body, ctype, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("POST", path, body=body, headers={"Content-Type": ctype})
    r = c.getresponse()
    out = r.status, r.read()
    c.close()
    return out


class Parser(unittest.TestCase):
    def test_records_whatever_the_piece_size(self):
        for size in (1, 7, 100, len(BODY)):
            p = multipart.Parser(CT)
            recs = []
            for i in range(0, len(BODY), size):
                recs += p.feed(BODY[i:i + size])
            p.finish()
            kinds = [k for k, _ in recs]
            self.assertEqual([k for i, k in enumerate(kinds) if i == 0 or k != kinds[i - 1]],
                             [multipart.PART, multipart.DATA, multipart.PART_END] * 3 + [multipart.END], size)
            data = b"".join(v for k, v in recs if k == multipart.DATA)
            self.assertEqual(data, b"hello" + b"D" * 5000 + b"again")
            parts = [v for k, v in recs if k == multipart.PART]
            self.assertEqual([(x.name, x.filename, x.content_type, x.size) for x in parts],
                             [("a", None, None, 5), ("f", "x.bin", "image/png", 5000), ("a", None, None, 5)])
            self.assertEqual(parts[1].headers[1], ("Content-Type", "image/png"))

    def test_errors(self):
        self.assertRaises(multipart.UnsupportedMediaType, multipart.Parser, "text/plain")
        with self.assertRaises(multipart.MultipartError) as cm:
            multipart.Parser("multipart/form-data; boundary=")
        self.assertEqual(cm.exception.status, 400)
        p = multipart.Parser(CT)
        with self.assertRaises(multipart.MultipartError) as cm:
            p.feed(b"--xx\r\nbroken header\r\n\r\n")
        self.assertIn("byte 12", str(cm.exception))
        p = multipart.Parser(CT)
        p.feed(BODY[:-10])
        self.assertRaises(multipart.MultipartError, p.finish)
        p = multipart.Parser(CT, max_parts=2)
        self.assertRaises(multipart.MultipartError, p.feed, BODY)
        self.assertEqual(multipart.boundary('multipart/form-data; charset=x; boundary="a b"'), b"a b")


class ReadForm(unittest.TestCase):
    def test_spooling_and_limits(self):
        form = multipart.read_form(iter([BODY[:50], BODY[50:]]), CT, spool_threshold=1000)
        self.assertEqual(form.getall("a"), ["hello", "again"])
        up = form["f"]
        self.assertIsInstance(up, nanosrv.UploadFile)
        self.assertEqual((up.filename, up.content_type, up.size, up.on_disk), ("x.bin", "image/png", 5000, True))
        self.assertEqual(up.read(), b"D" * 5000)
        up.close()
        small = multipart.read_form(iter([BODY]), CT, spool_threshold=1 << 20)["f"]
        self.assertFalse(small.on_disk)
        with self.assertRaises(multipart.PartTooLarge) as cm:
            multipart.read_form(iter([BODY]), CT, max_file_size=4999)
        self.assertEqual(cm.exception.status, 413)
        self.assertRaises(multipart.PartTooLarge, multipart.read_form, iter([BODY]), CT, max_field_size=4)


class OverHttp(unittest.TestCase):
    def test_sync_stream_route_with_curl(self):
        m = nanosrv.Manager()
        m.set_max_body_size(64 << 20)
        spool = tempfile.mkdtemp()

        @m.post("/form", stream=True)
        def form(conn, msg):
            f = multipart.read_form(msg, spool_threshold=64 << 10, spool_dir=spool, max_file_size=32 << 20)
            out = {}
            for k, v in f.items():
                if isinstance(v, nanosrv.UploadFile):
                    with v:
                        out[k] = [v.filename, v.content_type, v.size, v.on_disk,
                                  hashlib.sha256(v.read()).hexdigest()]
                else:
                    out[k] = v
            return out

        @m.post("/parts", stream=True)
        def parts(conn, msg):
            # Only the second part's data is read; the first is skipped.
            out = []
            for part in nanosrv.MultipartReader(msg):
                if part.index == 1:
                    out.append([part.name, sum(len(c) for c in part)])
                else:
                    out.append([part.name, None])
            return out
        lst = m.http_listen("http://127.0.0.1:0")
        with _tap.ServerThread(m), tempfile.NamedTemporaryFile() as big:
            data = os.urandom(3 << 20)
            big.write(data)
            big.flush()
            url = "http://127.0.0.1:%d" % lst.port
            out = subprocess.run(["curl", "-s", "-F", "note=hi there", "-F", "up=@%s;type=application/x-bin" % big.name,
                                  url + "/form"], capture_output=True, timeout=60)
            got = json.loads(out.stdout)
            self.assertEqual(got["note"], "hi there")
            self.assertEqual(got["up"], [os.path.basename(big.name), "application/x-bin", 3 << 20, True,
                                         hashlib.sha256(data).hexdigest()])
            st, body = post(lst.port, "/parts", BODY, CT)
            self.assertEqual((st, json.loads(body)), (200, [["a", None], ["f", 5000], ["a", None]]))
            # Errors a handler lets escape become their status, with the reason.
            st, body = post(lst.port, "/form", b"--xx\r\nbroken\r\n\r\n--xx--\r\n", CT)
            self.assertEqual(st, 400)
            self.assertIn(b"multipart: byte 6", body)
            self.assertEqual(post(lst.port, "/form", b"a=1", "application/x-www-form-urlencoded")[0], 415)
            big_body = (b'--xx\r\nContent-Disposition: form-data; name="f"; filename="b"\r\n\r\n'
                        + b"z" * (33 << 20) + b"\r\n--xx--\r\n")
            self.assertEqual(post(lst.port, "/form", big_body, CT)[0], 413)
            self.assertEqual(os.listdir(spool), [])
            os.rmdir(spool)

    def test_async_parts(self):
        def setup(m):
            m.set_max_body_size(64 << 20)

            @m.post("/up", stream=True)
            async def up(conn, msg):
                out = []
                async for part in nanosrv.MultipartReader(msg):
                    h = hashlib.sha256()
                    async for chunk in part:
                        h.update(chunk)
                    out.append([part.name, part.filename, part.size, h.hexdigest()])
                return out

            @m.post("/form", stream=True)
            async def form(conn, msg):
                f = await nanosrv.aread_form(msg, spool_threshold=1024)
                return {"a": f.getall("a"), "f": f["f"].size, "disk": f["f"].on_disk}

        with AsyncServer(setup) as srv:
            payload = os.urandom(20 << 20)
            body = (b'--xx\r\nContent-Disposition: form-data; name="blob"; filename="b.bin"\r\n\r\n'
                    + payload + b"\r\n--xx--\r\n")
            st, out = post(srv.port, "/up", body, CT)
            self.assertEqual((st, json.loads(out)),
                             (200, [["blob", "b.bin", 20 << 20, hashlib.sha256(payload).hexdigest()]]))
            st, out = post(srv.port, "/form", BODY, CT)
            self.assertEqual((st, json.loads(out)), (200, {"a": ["hello", "again"], "f": 5000, "disk": True}))
            self.assertEqual(post(srv.port, "/up", BODY[:-8], CT)[0], 400)


if __name__ == "__main__":
    _tap.main()
