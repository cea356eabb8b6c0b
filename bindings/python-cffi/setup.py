"""Copies the shared declarations (bindings/cdef/) into the built package,
so an installed nanosrv does not depend on the source tree. Metadata lives
in pyproject.toml."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
CDEF = os.path.join(HERE, "..", "cdef")
FILES = ("nanosrv_cdef.h", "nanosrv_abi.json")


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


setup(cmdclass={"build_py": BuildWithCdef})
