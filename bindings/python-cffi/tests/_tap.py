"""unittest -> TAP for `prove`, plus helpers shared by the suites."""
import os
import sys
import threading
import traceback
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(PKG))
sys.path.insert(0, PKG)
if not os.environ.get("NANOSRV_LIBRARY"):
    os.environ["NANOSRV_LIBRARY"] = os.path.join(ROOT, os.environ.get("NSV_BUILD", "build"), "libnanosrv.so.1")


class TapResult(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.n = 0

    def _line(self, ok, test, extra=""):
        if getattr(self, "_sub_failed", None) is test:
            self._sub_failed = None  # one line per test
        self.n += 1
        print("%s %d - %s%s" % ("ok" if ok else "not ok", self.n, test.id().split(".", 1)[-1], extra))
        sys.stdout.flush()

    def addSuccess(self, test):
        super().addSuccess(test)
        self._line(True, test)

    def _diag(self, err):
        text = "".join(traceback.format_exception(*err))
        for line in text.splitlines():
            print("# " + line)
        # stderr too: prove shows it without -v, so a failure in CI says what failed
        sys.stderr.write("".join("# %s\n" % l for l in text.splitlines()[-30:]))
        sys.stderr.flush()

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._line(False, test)
        self._diag(err)

    def addError(self, test, err):
        super().addError(test, err)
        self._line(False, test)
        self._diag(err)

    def addSubTest(self, test, subtest, err):
        # A failed subtest fails its test, which then gets no addSuccess:
        # its line is written at stopTest, with each subtest's diagnostics.
        super().addSubTest(test, subtest, err)
        if err is not None:
            self._sub_failed = test
            print("# subtest %s failed:" % subtest._subDescription())
            self._diag(err)

    def stopTest(self, test):
        super().stopTest(test)
        if getattr(self, "_sub_failed", None) is test:
            self._sub_failed = None
            self._line(False, test)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._line(True, test, " # SKIP " + reason)


def main():
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules["__main__"])
    print("1..%d" % suite.countTestCases())
    sys.stdout.flush()
    result = TapResult()
    suite.run(result)
    sys.exit(0 if result.wasSuccessful() else 1)


class ServerThread:
    """Runs manager.run() in a thread for the duration of a with-block."""

    def __init__(self, manager):
        self.m = manager
        self.t = threading.Thread(target=manager.run, args=(50,), daemon=True)

    def __enter__(self):
        self.t.start()
        return self.m

    def __exit__(self, *exc):
        self.m.stop()
        self.t.join(10)
        self.m.close()
