"""`pip install --no-build-isolation --no-index bindings/python-cffi` works
offline with Debian's setuptools and ships the shared cdef."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import _tap


class Install(unittest.TestCase):
    def test_pip_install_into_venv(self):
        try:
            import setuptools  # noqa: F401
        except ImportError:
            self.skipTest("python3-setuptools is not installed")
        tmp = tempfile.mkdtemp()
        try:
            # Build from a copy so the source tree gets no build/ or egg-info.
            src = os.path.join(tmp, "bindings")
            shutil.copytree(os.path.join(_tap.ROOT, "bindings", "cdef"), os.path.join(src, "cdef"))
            shutil.copytree(_tap.PKG, os.path.join(src, "python-cffi"),
                            ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "tests", "bench"))
            venv = os.path.join(tmp, "venv")
            subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
            py = os.path.join(venv, "bin", "python")
            p = subprocess.run([py, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-index",
                                os.path.join(src, "python-cffi")], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            shutil.rmtree(src)  # the installed package must stand alone
            code = ("import nanosrv, nanosrv._ffi as f; print(f.CDEF_PATH); "
                    "print(nanosrv.base64_encode('ok'))")
            p = subprocess.run([py, "-c", code], capture_output=True, text=True, cwd=tmp)
            self.assertEqual(p.returncode, 0, p.stderr)
            cdef, b64 = p.stdout.split()
            self.assertTrue(cdef.startswith(venv), cdef)
            self.assertEqual(b64, "b2s=")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    _tap.main()
