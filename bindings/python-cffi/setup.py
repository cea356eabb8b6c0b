"""Copies the shared declarations (bindings/cdef/) into the built package,
so an installed nanosrv does not depend on the source tree. Metadata lives
in pyproject.toml.

A wheel that carries the library, so users need no compiler:

    make -j2 lib
    NANOSRV_BUNDLE_LIBRARY=$PWD/build/libnanosrv.so.1 \\
        pip wheel --no-build-isolation --no-deps -w dist bindings/python-cffi

NANOSRV_BUNDLE_LIBRARY names the libnanosrv.so.1 to ship as
nanosrv/libnanosrv.so.1 (the binding loads it before the system's). Such a
wheel is tagged for this platform (py3-none-linux_<arch>: cffi's ABI mode
needs no particular CPython), not pure.
"""
import os
import shutil
import sysconfig

import setuptools
from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
CDEF = os.path.join(HERE, "..", "cdef")
FILES = ("nanosrv_cdef.h", "nanosrv_abi.json")
BUNDLE = os.environ.get("NANOSRV_BUNDLE_LIBRARY", "")


class BuildWithCdef(build_py):
    def run(self):
        super().run()
        out = os.path.join(self.build_lib, "nanosrv")
        for name in FILES:
            src = os.path.join(CDEF, name)
            if os.path.exists(src):
                shutil.copyfile(src, os.path.join(out, name))
            elif not os.path.exists(os.path.join(HERE, "nanosrv", name)):
                raise SystemExit("nanosrv: %s not found; build from the libnanosrv source tree" % src)
        if BUNDLE:
            if not os.path.isfile(BUNDLE):
                raise SystemExit("nanosrv: NANOSRV_BUNDLE_LIBRARY=%s is not a file (build it with make lib)" % BUNDLE)
            shutil.copyfile(BUNDLE, os.path.join(out, "libnanosrv.so.1"))  # follows the symlink


cmdclass = {"build_py": BuildWithCdef}

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # no python3-wheel: sdists and plain installs still work
    bdist_wheel = None

if bdist_wheel is not None:
    class PlatformWheel(bdist_wheel):
        """A wheel with a bundled library is for this platform only."""

        def get_tag(self):
            if not BUNDLE:
                return super().get_tag()
            plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = PlatformWheel



class Distribution(setuptools.Distribution):
    """With a bundled library the package is platform-specific: it is built
    into the platform lib directory and the wheel root is not purelib."""

    def has_ext_modules(self):
        return bool(BUNDLE)


setup(cmdclass=cmdclass, distclass=Distribution)
