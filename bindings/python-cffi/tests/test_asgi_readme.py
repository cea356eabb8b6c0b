"""The README's ASGI snippets run as written: the run() program (with
port 0) answers a request and drains on SIGTERM; the composed Server
program starts, drains and exits."""
import http.client
import os
import re
import signal
import subprocess
import sys
import tempfile
import unittest

import _tap
from _tap import PKG

README = os.path.join(PKG, "README.md")


def snippets():
    text = open(README).read()
    part = text[text.index("### ASGI"):text.index("### Streamed request bodies")]
    return re.findall(r"```python\n(.*?)```", part, re.S)


def program(code):
    fd, path = tempfile.mkstemp(suffix=".py", prefix="asgi_readme_")
    with os.fdopen(fd, "w") as f:
        f.write("import sys\nsys.path.insert(0, %r)\n" % PKG + code)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return path, subprocess.Popen([sys.executable, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


class Readme(unittest.TestCase):
    def test_snippets(self):
        first, second = snippets()
        self.assertIn("port=8000", first)
        path, p = program(first.replace("port=8000", "port=0"))
        try:
            line = p.stdout.readline().decode()
            self.assertTrue(line.startswith("listening on "), (line, p.stderr.read() if p.poll() is not None else ""))
            c = http.client.HTTPConnection("127.0.0.1", int(line.split()[2]), timeout=10)
            c.request("GET", "/")
            r = c.getresponse()
            self.assertEqual((r.status, r.read()), (200, b"Hello, World!"))
            c.close()
            os.kill(p.pid, signal.SIGTERM)
            p.communicate(timeout=20)
            self.assertEqual(p.returncode, 0)
        finally:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                p.wait(10)
            os.unlink(path)
        # the second snippet uses the first one's app
        path, p = program(first.replace('if __name__ == "__main__":', "if False:") + "\n" + second)
        try:
            out, err = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                p.wait(10)
            os.unlink(path)
        self.assertEqual(p.returncode, 0, err)
        self.assertTrue(out.startswith(b"listening on "), out)


if __name__ == "__main__":
    _tap.main()
