"""The pre-fork supervisor behind `python3 -m nanosrv --workers N`.

The supervisor binds and listens once (so --port 0 is resolved once and
printed once), or takes the socket systemd socket activation passed it
(LISTEN_FDS; the variables are removed so the workers do not take it for
theirs), then forks N workers. It has imported nothing of the
application: each worker imports it itself, after the fork, and adopts the
inherited listening socket (nsv_listen_fd). Every process holds the same
socket, so connections that arrive while a worker restarts wait in its
backlog for another one: no connection is refused.

- A worker that dies is replaced. One that exits abnormally (a signal, a
  non-zero status) within 1 s of starting makes the next replacement wait:
  0.1 s, then twice as long each time in a row, at most 5 s; a worker that
  lived longer resets the wait. A worker that exits with status 0 on its
  own (--limit-max-requests) is replaced at once.
- A worker that cannot load or start the application exits with status 3;
  the supervisor then stops the others and exits with 3 (as gunicorn does:
  restarting cannot fix the import).
- SIGTERM or SIGINT: every worker gets SIGTERM and drains (in-flight
  requests finish); a worker still there --timeout-graceful-shutdown + 1 s
  later gets SIGKILL; the supervisor exits 0. A second SIGTERM/SIGINT kills
  the workers at once.
- SIGHUP: N new workers start (importing the application afresh); each one
  that is ready retires one old worker with SIGTERM (it drains).
- Workers get SIGTERM should the supervisor itself die (PR_SET_PDEATHSIG).
"""
import argparse
import ctypes
import logging
import os
import select
import signal
import socket
import sys
import time
import traceback
from typing import Dict, List, Optional

from .server import EXIT_BOOT_ERROR, StartupError, Worker, _set_app_dir, _unlink, listening_line

log = logging.getLogger("nanosrv.supervisor")

BACKOFF_FIRST = 0.1   # seconds before replacing a worker that died young
BACKOFF_MAX = 5.0
YOUNG = 1.0           # a worker that dies sooner than this after its start died young
KILL_GRACE = 1.0      # after --timeout-graceful-shutdown, before SIGKILL


class _Child:
    __slots__ = ("pid", "gen", "ready_fd", "started", "ready", "retiring", "interface")

    def __init__(self, pid: int, gen: int, ready_fd: int) -> None:
        self.pid, self.gen, self.ready_fd = pid, gen, ready_fd
        self.started = time.monotonic()
        self.ready = False
        self.retiring = False
        self.interface = ""


class Supervisor:
    """Runs args.workers worker processes on the listening socket `sock`."""

    def __init__(self, args: argparse.Namespace, sock: socket.socket) -> None:
        self.args = args
        self.sock = sock
        self.n = args.workers
        self.children: Dict[int, _Child] = {}
        self.gen = 0
        self.stopping = False
        self.kill_at: Optional[float] = None
        self.status = 0
        self.due: List[float] = []     # when replacements may start
        self.streak = 0                # workers in a row that died young
        self.announced = False
        self.reported = False          # a worker's startup error was printed
        self.signals: List[int] = []
        self.wake_r = self.wake_w = -1

    # ---- signals ----

    def _on_signal(self, sig: int, frame: object) -> None:
        self.signals.append(sig)

    def _install(self) -> None:
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, self._on_signal)

    def _handle_signals(self) -> None:
        while self.signals:
            sig = self.signals.pop(0)
            if sig in (signal.SIGTERM, signal.SIGINT):
                if self.stopping:
                    self._kill_all(signal.SIGKILL)
                else:
                    self.stop()
            elif sig == signal.SIGHUP and not self.stopping:
                self.reload()

    # ---- workers ----

    def _spawn(self) -> None:
        rfd, wfd = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.close(rfd)
            self._child(wfd)  # never returns
        os.close(wfd)
        self.children[pid] = _Child(pid, self.gen, rfd)
        log.debug("worker %d started (generation %d)", pid, self.gen)

    def _child(self, ready_w: int) -> None:
        code = 1
        try:
            signal.set_wakeup_fd(-1)
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
                signal.signal(sig, signal.SIG_DFL)
            for fd in [self.wake_r, self.wake_w] + [c.ready_fd for c in self.children.values()]:
                if fd >= 0:
                    os.close(fd)
            _die_with_parent()
            _set_app_dir(self.args.app_dir)
            w = Worker(self.args, os.dup(self.sock.fileno()))

            def ready() -> None:
                os.write(ready_w, b"R" + (w.interface or "?").encode())
                os.close(ready_w)
                self.sock.close()  # the library holds its own copy
            w.ready = ready
            code = w.run()
        except StartupError as e:
            # The supervisor prints the first worker's reason, once.
            try:
                os.write(ready_w, b"E" + str(e).encode("utf-8", "replace")[:4000])
            except OSError:
                print("nanosrv: error: %s" % e, file=sys.stderr, flush=True)
            code = e.status
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except KeyboardInterrupt:
            code = 0
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)

    def _read_ready(self, c: _Child) -> None:
        try:
            data = os.read(c.ready_fd, 8192)
        except OSError:
            data = b""
        os.close(c.ready_fd)
        c.ready_fd = -1
        if not data:
            return  # it died before it was ready: the reaper says how
        if data[:1] == b"E":
            if not self.reported:
                self.reported = True
                print("nanosrv: error: %s" % data[1:].decode("utf-8", "replace"), file=sys.stderr, flush=True)
            return
        c.ready = True
        c.interface = data[1:].decode(errors="replace")
        log.debug("worker %d ready", c.pid)
        if c.gen == self.gen:
            old = [o for o in self.children.values() if o.gen < self.gen and not o.retiring]
            if old:
                self._retire(old[0])
        if not self.announced and sum(1 for o in self.children.values() if o.ready) >= self.n:
            self.announced = True
            print(listening_line(self.args, self.sock, c.interface), flush=True)

    def _retire(self, c: _Child) -> None:
        c.retiring = True
        log.info("retiring worker %d", c.pid)
        _kill(c.pid, signal.SIGTERM)

    def _reap(self) -> None:
        while True:
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            c = self.children.pop(pid, None)
            if c is None:
                continue
            if c.ready_fd >= 0:
                os.close(c.ready_fd)
            code = os.waitstatus_to_exitcode(st)
            self._exited(c, code)

    def _exited(self, c: _Child, code: int) -> None:
        how = "was killed by signal %d" % -code if code < 0 else "exited with status %d" % code
        if self.stopping or c.retiring:
            log.debug("worker %d %s", c.pid, how)
            return
        if c.gen < self.gen:
            return  # replaced by a reload already
        if code == EXIT_BOOT_ERROR and not c.ready:
            # Its reason is printed already (one line); this is for debugging.
            log.debug("worker %d could not start the application; stopping", c.pid)
            self.status = EXIT_BOOT_ERROR
            self.stop()
            return
        now = time.monotonic()
        if code == 0:
            log.info("worker %d %s; replacing it", c.pid, how)
            self.due.append(now)
            return
        self.streak = self.streak + 1 if now - c.started < YOUNG else 0
        delay = 0.0 if self.streak == 0 else min(BACKOFF_FIRST * 2 ** (self.streak - 1), BACKOFF_MAX)
        log.warning("worker %d %s; replacing it%s", c.pid, how, " in %.1f s" % delay if delay else "")
        self.due.append(now + delay)

    def _kill_all(self, sig: int) -> None:
        for pid in list(self.children):
            _kill(pid, sig)

    # ---- control ----

    def stop(self) -> None:
        """Drain every worker, then exit."""
        self.stopping = True
        self.due.clear()
        self._kill_all(signal.SIGTERM)
        self.kill_at = time.monotonic() + self.args.timeout_graceful_shutdown + KILL_GRACE

    def reload(self) -> None:
        """New workers, then the old ones drain."""
        log.info("reloading: starting %d new workers", self.n)
        self.gen += 1
        self.due.clear()
        for _ in range(self.n):
            self._spawn()

    def run(self) -> int:
        """Supervise until stopped; returns the exit status."""
        self._install()
        try:
            for _ in range(self.n):
                self._spawn()
            while True:
                self._handle_signals()
                self._reap()
                now = time.monotonic()
                if self.stopping:
                    if not self.children:
                        break
                    if self.kill_at is not None and now >= self.kill_at:
                        log.warning("workers still draining after %.1f s; killing them",
                                    self.args.timeout_graceful_shutdown + KILL_GRACE)
                        self._kill_all(signal.SIGKILL)
                        self.kill_at = None
                else:
                    while self.due and self.due[0] <= now and self._current() < self.n:
                        self.due.pop(0)
                        self._spawn()
                    self.due.sort()
                timeout = 1.0
                if self.due:
                    timeout = max(0.0, min(timeout, self.due[0] - now))
                if self.kill_at is not None:
                    timeout = max(0.0, min(timeout, self.kill_at - now))
                fds = [self.wake_r] + [c.ready_fd for c in self.children.values() if c.ready_fd >= 0]
                r, _, _ = select.select(fds, [], [], timeout)
                for fd in r:
                    if fd == self.wake_r:
                        try:
                            while os.read(self.wake_r, 512):
                                pass
                        except BlockingIOError:
                            pass
                        continue
                    for c in list(self.children.values()):
                        if c.ready_fd == fd:
                            self._read_ready(c)
        finally:
            signal.set_wakeup_fd(-1)
            self.sock.close()
            if self.args.uds:
                _unlink(self.args.uds)
        return self.status

    def _current(self) -> int:
        return sum(1 for c in self.children.values() if c.gen == self.gen and not c.retiring)


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _die_with_parent() -> None:
    """SIGTERM this worker if the supervisor dies (Linux PR_SET_PDEATHSIG)."""
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before prctl took effect
        os._exit(0)
