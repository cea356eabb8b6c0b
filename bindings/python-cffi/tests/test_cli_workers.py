"""`python3 -m nanosrv --workers N`: the pre-fork supervisor. Requests reach
every worker; a worker killed with SIGKILL is replaced while the port keeps
answering; SIGHUP replaces every worker with no failed request; a worker
that exits after --limit-max-requests is replaced; a worker that dies at
every start is restarted with a growing back-off; workers do not outlive a
killed supervisor."""
import os
import re
import signal
import sys
import tempfile
import time
import unittest

import _tap
from test_cli import Cmd, get


def pid_of(port, path="/"):
    st, body = get(port, path)
    assert st == 200, (st, body)
    return int(body.split()[1])


def pids_until(port, want, tries=300):
    """Distinct worker pids seen over at most `tries` requests, stopping once `want` are."""
    seen = set()
    for _ in range(tries):
        seen.add(pid_of(port))
        if len(seen) >= want:
            break
    return seen


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def wait_gone(pid, seconds=15):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and alive(pid):
        time.sleep(0.05)
    return not alive(pid)


def children(pid):
    """Process ids whose parent is pid (from /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(d))
    return sorted(out)


class Workers(unittest.TestCase):
    def test_two_workers_serve(self):
        for spec in ("cli_apps:wsgi_app", "cli_apps:asgi_app"):
            with self.subTest(spec=spec), tempfile.NamedTemporaryFile("r") as imports:
                with Cmd(spec, "--port", "0", "--workers", "2", extra_env={"NSV_CLI_IMPORTS": imports.name}) as c:
                    self.assertIn(", 2 workers)", c.line)
                    kids = children(c.p.pid)
                    self.assertEqual(len(kids), 2, kids)
                    seen = pids_until(c.port, 2)
                    self.assertEqual(seen, set(kids), "requests reach both workers")
                    self.assertNotIn(c.p.pid, seen, "the supervisor serves nothing")
                    importers = set(int(x) for x in imports.read().split())
                    self.assertEqual(importers, set(kids), "each worker imported the app; the supervisor did not")
                    self.assertEqual(c.term(), 0, c.stderr())
                    for k in kids:
                        self.assertTrue(wait_gone(k), "worker %d exited" % k)

    def test_sigkill_worker_is_replaced(self):
        with Cmd("cli_apps:wsgi_app", "--port", "0", "--workers", "2") as c:
            before = set(children(c.p.pid))
            victim = sorted(before)[0]
            os.kill(victim, signal.SIGKILL)
            # The port answers all along; a new worker appears.
            new = set()
            for _ in range(400):
                new.add(pid_of(c.port))
                kids = set(children(c.p.pid))
                if len(kids) == 2 and victim not in kids and (new - before):
                    break
                time.sleep(0.02)
            self.assertNotIn(victim, children(c.p.pid))
            self.assertEqual(len(children(c.p.pid)), 2)
            self.assertTrue(new - before, "a replacement worker served requests")
            self.assertIn("worker %d was killed by signal 9; replacing it" % victim, c.stderr())
            self.assertEqual(c.term(), 0)

    def test_sighup_replaces_workers_without_failures(self):
        with Cmd("cli_apps:asgi_app", "--port", "0", "--workers", "2") as c:
            old = set(children(c.p.pid))
            self.assertEqual(len(old), 2)
            os.kill(c.p.pid, signal.SIGHUP)
            failures, served_by = [], set()
            for i in range(300):
                try:
                    served_by.add(pid_of(c.port, "/hup%d" % i))
                except Exception as e:  # any refused or broken request fails the test
                    failures.append(repr(e))
                kids = set(children(c.p.pid))
                if len(kids) == 2 and not kids & old and served_by - old:
                    break
            self.assertEqual(failures, [])
            kids = set(children(c.p.pid))
            self.assertEqual(len(kids), 2, kids)
            self.assertFalse(kids & old, "every old worker is gone")
            for i in range(20):
                self.assertNotIn(pid_of(c.port), old)
            self.assertEqual(c.term(), 0, c.stderr())

    def test_limit_max_requests_replaced(self):
        with Cmd("cli_apps:wsgi_app", "--port", "0", "--workers", "1", "--limit-max-requests", "3") as c:
            first = pid_of(c.port)
            pid_of(c.port)
            pid_of(c.port)
            # The 3rd request started a drain; the next ones reach its replacement.
            later = pid_of(c.port)
            self.assertNotEqual(later, first)
            self.assertTrue(wait_gone(first))
            self.assertRegex(c.stderr(), r"worker %d exited with status 0; replacing it" % first)
            self.assertEqual(c.term(), 0)

    def test_crash_loop_backs_off(self):
        with Cmd("cli_crash:app", "--port", "0", "--workers", "1", expect_line=False) as c:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and len(re.findall("replacing it in", c.stderr())) < 4:
                time.sleep(0.1)
            delays = re.findall(r"replacing it in ([\d.]+) s", c.stderr())
            self.assertEqual(delays[:4], ["0.1", "0.2", "0.4", "0.8"], c.stderr())
            self.assertEqual(c.term(), 0)

    def test_workers_die_with_the_supervisor(self):
        with Cmd("cli_apps:wsgi_app", "--port", "0", "--workers", "2") as c:
            kids = children(c.p.pid)
            os.kill(c.p.pid, signal.SIGKILL)
            c.wait()
            for k in kids:
                self.assertTrue(wait_gone(k), "worker %d exited after the supervisor was killed" % k)


class Example(unittest.TestCase):
    def test_prefork_example(self):
        import _net
        with _net.Proc([sys.executable, os.path.join(_net.EXAMPLES, "prefork.py"), "--port", "0",
                        "--workers", "2"]) as p:
            seen = set()
            for _ in range(300):
                st, body = get(p.port, "/")
                self.assertEqual(st, 200)
                seen.add(body.split()[1])
                if len(seen) == 2:
                    break
            self.assertEqual(len(seen), 2, "both forked workers answer on the one socket")
            os.kill(p.p.pid, signal.SIGTERM)
            self.assertEqual(p.p.wait(20), 0)


if __name__ == "__main__":
    _tap.main()
