"""The wheel that carries libnanosrv.so.1 (README, "Packaging"): built with
Debian's pip, setuptools and wheel from a copy of the tree, offline, with
NANOSRV_BUNDLE_LIBRARY; it holds the library, py.typed, the asgi subpackage
and the nanosrv script; installed with `pip install --target` it imports
with NANOSRV_LIBRARY unset (so the bundled library is the one loaded) and
serves a request, through the API and through `python3 -m nanosrv`."""
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

import _tap

LIB = os.environ["NANOSRV_LIBRARY"]

SERVE_ONE = r"""
import http.client, threading, nanosrv, nanosrv._ffi as f
print(f.LIBRARY_PATH)
m = nanosrv.Manager()
lst = m.http_listen("http://127.0.0.1:0", lambda c, msg: c.http_reply(200, "", "wheel " + msg.uri))
t = threading.Thread(target=lambda: [m.poll(50) for _ in range(200)], daemon=True)
t.start()
c = http.client.HTTPConnection("127.0.0.1", lst.port, timeout=10)
c.request("GET", "/x")
print(c.getresponse().read().decode())
"""


def clean_env(target):
    e = {k: v for k, v in os.environ.items() if k not in ("NANOSRV_LIBRARY", "PYTHONPATH")}
    e["PYTHONPATH"] = target
    return e


class Wheel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="nsv_wheel_")
        src = os.path.join(cls.tmp, "src", "bindings")
        shutil.copytree(os.path.join(_tap.ROOT, "bindings", "cdef"), os.path.join(src, "cdef"))
        shutil.copytree(_tap.PKG, os.path.join(src, "python-cffi"),
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "tests", "bench",
                                                      "libnanosrv.so*"))
        env = dict(os.environ, NANOSRV_BUNDLE_LIBRARY=LIB)
        cls.dist = os.path.join(cls.tmp, "dist")
        p = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
                            "--no-index", "-w", cls.dist, os.path.join(src, "python-cffi")],
                           capture_output=True, text=True, env=env, timeout=240)
        cls.build = p
        wheels = glob.glob(os.path.join(cls.dist, "*.whl"))
        cls.wheel = wheels[0] if len(wheels) == 1 else None
        shutil.rmtree(os.path.join(cls.tmp, "src"))  # the installed package must stand alone

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.assertEqual(self.build.returncode, 0, self.build.stdout + self.build.stderr)
        self.assertIsNotNone(self.wheel, os.listdir(self.dist))

    def test_contents(self):
        name = os.path.basename(self.wheel)
        self.assertRegex(name, r"^nanosrv-\d+\.\d+\.\d+-py3-none-linux_[a-z0-9_]+\.whl$")
        with zipfile.ZipFile(self.wheel) as z:
            names = set(z.namelist())
            for want in ("nanosrv/libnanosrv.so.1", "nanosrv/py.typed", "nanosrv/nanosrv_cdef.h",
                         "nanosrv/nanosrv_abi.json", "nanosrv/asgi/__init__.py", "nanosrv/server.py",
                         "nanosrv/_supervisor.py", "nanosrv/__main__.py"):
                self.assertIn(want, names)
            with open(LIB, "rb") as f:
                self.assertEqual(z.read("nanosrv/libnanosrv.so.1"), f.read(), "the library itself, not a link")
            ep = [n for n in names if n.endswith("entry_points.txt")]
            self.assertEqual(len(ep), 1)
            self.assertIn("nanosrv = nanosrv.server:main", z.read(ep[0]).decode())
            wheel_meta = z.read([n for n in names if n.endswith(".dist-info/WHEEL")][0]).decode()
            self.assertIn("Root-Is-Purelib: false", wheel_meta)

    def test_install_target_and_serve(self):
        target = os.path.join(self.tmp, "target")
        p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                            "--target", target, self.wheel], capture_output=True, text=True, timeout=240)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        p = subprocess.run([sys.executable, "-c", SERVE_ONE], capture_output=True, text=True,
                           env=clean_env(target), cwd=self.tmp, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        path, body = p.stdout.split()[0], " ".join(p.stdout.split()[1:])
        self.assertEqual(path, os.path.join(target, "nanosrv", "libnanosrv.so.1"), "the bundled library is loaded")
        self.assertEqual(body, "wheel /x")
        # The console script exists and the command runs from the install.
        self.assertTrue(os.path.exists(os.path.join(target, "bin", "nanosrv")))
        p = subprocess.run([sys.executable, "-m", "nanosrv", "--version"], capture_output=True, text=True,
                           env=clean_env(target), cwd=self.tmp, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith("nanosrv "), p.stdout)


if __name__ == "__main__":
    _tap.main()
