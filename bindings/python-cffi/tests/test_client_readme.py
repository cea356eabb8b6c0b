"""The README's HTTP and WebSocket client snippets run as written: the
asyncio programs each as their own process, whose output must be the
"prints" block below them; the callback-form snippet on a Manager that a
real client (http.client) then asks."""
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

import _tap
from _net import env

from test_ws_client import ws_client_available

README = os.path.join(_tap.PKG, "README.md")


def section(title):
    text = open(README).read()
    start = text.index("### " + title + "\n")
    return text[start:text.index("\n### ", start + 4)]


def programs(title):
    """[(code, expected output)] of the snippets followed by a prints block."""
    return re.findall(r"```python\n(.*?)```\n\nprints\n\n```\n(.*?)```", section(title), re.S)


def run_program(code):
    fd, path = tempfile.mkstemp(suffix=".py", prefix="readme_client_")
    with os.fdopen(fd, "w") as f:
        f.write(code)
    try:
        return subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=30, env=env(),
                              cwd=_tap.PKG)
    finally:
        os.unlink(path)


class Readme(unittest.TestCase):
    def test_http_client_program(self):
        progs = programs("HTTP client")
        self.assertEqual(len(progs), 1)
        p = run_program(progs[0][0])
        self.assertEqual((p.returncode, p.stdout), (0, progs[0][1]), p.stderr)

    def test_callback_form(self):
        blocks = re.findall(r"```python\n(.*?)```", section("HTTP client"), re.S)
        cb = [b for b in blocks if "http_request" in b]
        self.assertEqual(len(cb), 1)
        ns = {}
        exec(compile(cb[0], README, "exec"), ns)
        srv = ns["srv"]
        port = int(ns["UPSTREAM"].rsplit(":", 1)[1])
        with _tap.ServerThread(srv):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("GET", "/gateway")
            r = c.getresponse()
            self.assertEqual((r.status, json.loads(r.read())), (200, {"via": "gateway", "upstream": {"answer": 42}}))
            c.close()

    @unittest.skipUnless(ws_client_available(), "nsv_ws_connect is NSV_ENOTSUP in the loaded libnanosrv")
    def test_websocket_client_program(self):
        progs = programs("WebSocket client")
        self.assertEqual(len(progs), 1)
        p = run_program(progs[0][0])
        self.assertEqual((p.returncode, p.stdout), (0, progs[0][1]), p.stderr)


if __name__ == "__main__":
    _tap.main()
