#!/usr/bin/python3
"""The README's raw TCP, asyncio Protocol and timer snippets run as
written (each as its own program); the echo servers are then used by a
real client and stopped by PID."""
import os
import re
import subprocess
import sys
import tempfile
import unittest

import _tap
from _net import Proc, echo_roundtrip

import nanosrv

README = os.path.join(_tap.PKG, "README.md")


def snippet(section):
    text = open(README).read()
    start = text.index("### " + section + "\n")
    end = text.index("\n#", start + 4)
    return re.findall(r"```python\n(.*?)```", text[start:end], re.S)[0]


def program(code):
    fd, path = tempfile.mkstemp(suffix=".py", prefix="readme_")
    with os.fdopen(fd, "w") as f:
        f.write(code)
    return path


def timers_available():
    m = nanosrv.Manager()
    try:
        m.timer(1000, lambda: None).cancel()
        return True
    except nanosrv.NotSupportedError:
        return False
    finally:
        m.close()


class Readme(unittest.TestCase):
    def echo_server(self, section):
        path = program(snippet(section))
        try:
            with Proc([sys.executable, path], listening_line=False) as p:
                line = p.p.stdout.readline().decode()
                self.assertTrue(line.startswith("listening on "), (line, p.p.stderr.read() if p.p.poll() else ""))
                port = int(line.split()[2])
                data = os.urandom(1 << 20)
                self.assertEqual(echo_roundtrip(port, data, half_close=section == "Raw TCP"), data)
        finally:
            os.unlink(path)

    def test_raw_tcp(self):
        self.echo_server("Raw TCP")

    def test_asyncio_protocols(self):
        self.echo_server("asyncio Protocols")

    @unittest.skipUnless(timers_available(), "the loaded libnanosrv has no host timers yet (NSV_ENOTSUP)")
    def test_timers(self):
        path = program(snippet("Timers and wakeups"))
        try:
            r = subprocess.run([sys.executable, path], capture_output=True, timeout=30,
                               env=dict(os.environ, PYTHONPATH=_tap.PKG))
        finally:
            os.unlink(path)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.decode().split()
        self.assertIn("later", lines)
        self.assertGreaterEqual(lines.count("tick"), 2)


if __name__ == "__main__":
    _tap.main()
