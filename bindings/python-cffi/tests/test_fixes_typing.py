"""The public API of the native modules is typed: mypy (Debian's
python3-mypy) finds no error in them."""
import os
import subprocess
import sys
import tempfile
import unittest

import _tap

MODULES = ["_manager.py", "_conn.py", "_message.py", "_response.py", "errors.py", "_ffi.py", "util.py",
           "headers.py", "__init__.py", "client.py", "ws_client.py"]


class Typing(unittest.TestCase):
    def test_mypy_clean(self):
        try:
            import mypy  # noqa: F401
        except ImportError:
            self.skipTest("python3-mypy is not installed (tools/install-deps.sh installs it)")
        with tempfile.TemporaryDirectory() as cache:
            p = subprocess.run([sys.executable, "-m", "mypy", "--ignore-missing-imports", "--follow-imports=silent",
                                "--cache-dir", cache] + [os.path.join("nanosrv", m) for m in MODULES],
                               cwd=_tap.PKG, capture_output=True, text=True, timeout=240)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("Success: no issues found", p.stdout)

    def test_public_functions_have_hints(self):
        import inspect
        import nanosrv
        missing = []
        for cls in (nanosrv.Manager, nanosrv.ShardedManager, nanosrv.Connection, nanosrv.HttpMessage,
                    nanosrv.client.Response, nanosrv.client.Request, nanosrv.ws_client.WebSocket, nanosrv.Headers):
            for name, fn in vars(cls).items():
                if name.startswith("_") and name not in ("__init__",):
                    continue
                f = fn.fget if isinstance(fn, property) else fn
                if not inspect.isfunction(f):
                    continue
                if "return" not in getattr(f, "__annotations__", {}):
                    missing.append("%s.%s" % (cls.__name__, name))
        self.assertEqual(missing, [])


if __name__ == "__main__":
    _tap.main()
