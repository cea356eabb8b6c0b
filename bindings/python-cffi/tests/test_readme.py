"""The README's web-app snippets (streamed bodies to static files) run as
written: executed in order on one Manager, then every endpoint they
define is asked by a real client (http.client, curl)."""
import asyncio
import hashlib
import http.client
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import unittest

import _tap

import nanosrv

README = os.path.join(_tap.PKG, "README.md")


def snippets():
    text = open(README).read()
    part = text[text.index("### Streamed request bodies"):text.index("## How it is fast")]
    return re.findall(r"```python\n(.*?)```", part, re.S)


class Readme(unittest.TestCase):
    def setUp(self):
        self.cwd = os.getcwd()
        self.tmp = tempfile.mkdtemp()
        os.chdir(self.tmp)
        os.makedirs("public")
        os.makedirs("files")
        with open("public/app.css", "w") as f:
            f.write("body{}")
        with open("files/report.txt", "w") as f:
            f.write("report")

    def tearDown(self):
        os.chdir(self.cwd)
        shutil.rmtree(self.tmp)

    def test_sync_snippets(self):
        blocks = snippets()
        self.assertEqual(len(blocks), 5)
        ns = {}
        for b in blocks:
            exec(compile(b, README, "exec"), ns)
        srv = ns["srv"]
        port = srv.http_listen("http://127.0.0.1:0").port
        t = threading.Thread(target=srv.run, args=(50,), daemon=True)
        t.start()
        try:
            def req(method, path, body=None, headers=None):
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                c.request(method, path, body=body, headers=headers or {})
                r = c.getresponse()
                out = r.status, r, r.read()
                c.close()
                return out
            data = os.urandom(3 << 20)
            st, _, body = req("POST", "/upload", data)
            self.assertEqual((st, json.loads(body)), (200, {"size": len(data),
                                                            "sha256": hashlib.sha256(data).hexdigest()}))
            st, r, body = req("GET", "/login?tag=a&tag=b", headers={"Cookie": "theme=dark"})
            self.assertEqual((st, json.loads(body)), (200, {"tags": ["a", "b"], "theme": "dark"}))
            self.assertEqual(r.getheader("Set-Cookie"), "sid=abc123; Path=/; Max-Age=3600; HttpOnly; SameSite=Lax")
            with open("photo.jpg", "wb") as f:
                f.write(os.urandom(2 << 20))
            url = "http://127.0.0.1:%d" % port
            out = subprocess.run(["curl", "-s", "-F", "title=Hi", "-F", "photo=@photo.jpg", url + "/form"],
                                 capture_output=True, timeout=30).stdout
            self.assertEqual(json.loads(out), {"title": "Hi", "bytes": 2 << 20, "on_disk": True})
            out = subprocess.run(["curl", "-s", "-F", "a=1", "-F", "photo=@photo.jpg;type=image/jpeg",
                                  url + "/files"], capture_output=True, timeout=30).stdout
            self.assertEqual(json.loads(out), [["a", None, None, 1], ["photo", "photo.jpg", "image/jpeg", 2 << 20]])
            self.assertEqual(req("GET", "/assets/app.css")[2], b"body{}")
            self.assertEqual(req("GET", "/download/report.txt")[2], b"report")
            self.assertEqual(req("GET", "/download/nothing.txt")[::2], (404, b"no such file\n"))
        finally:
            srv.stop()
            t.join(10)
            srv.close()

    def test_sse_snippet_under_asyncio(self):
        sse = [b for b in snippets() if "sse_start" in b]
        self.assertEqual(len(sse), 1)
        ns = {"srv": nanosrv.Manager(), "nanosrv": nanosrv}
        exec(compile(sse[0], README, "exec"), ns)
        srv = ns["srv"]

        async def main():
            port = srv.http_listen("http://127.0.0.1:0").port
            done = nanosrv.aio.attach(srv)

            def client():
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                c.request("GET", "/events")
                r = c.getresponse()
                lines = [r.readline() for _ in range(6)]
                c.close()  # leave: the handler's asend raises Disconnected
                return lines
            try:
                return await asyncio.get_running_loop().run_in_executor(None, client)
            finally:
                srv.stop()
                await asyncio.wait_for(done, 5)
                srv.close()
        lines = asyncio.run(main())
        self.assertEqual(lines, [b"event: tick\n", b"id: 0\n", b"data: tick 0\n", b"\n",
                                 b"event: tick\n", b"id: 1\n"])


if __name__ == "__main__":
    _tap.main()
