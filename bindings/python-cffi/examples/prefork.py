"""Pre-fork workers sharing one listening socket, with the native handler
API (the server command's --workers does this, supervised, for ASGI and
WSGI apps):

    python3 examples/prefork.py --port 0 --workers 2

The parent binds once and forks; each worker adopts its inherited copy of
the socket with nanosrv.server.listen_fd and serves until SIGTERM, which
drains it. The parent prints "listening on PORT", forwards SIGTERM/SIGINT
to the workers and exits once they have.
"""
import argparse
import os
import signal
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import nanosrv  # noqa: E402
from nanosrv.server import listen_fd  # noqa: E402


def worker(fd):
    m = nanosrv.Manager()
    listen_fd(m, "http://127.0.0.1:0", fd,
              lambda conn, msg: conn.http_reply(200, "Content-Type: text/plain\r\n", "worker %d\n" % os.getpid()))
    signal.signal(signal.SIGTERM, lambda *a: m.drain_start(5000))
    while m.poll(250) >= 0:
        pass
    m.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    s = socket.create_server(("127.0.0.1", a.port), backlog=1024)
    pids = []
    for _ in range(a.workers):
        pid = os.fork()
        if pid == 0:
            worker(os.dup(s.fileno()))
            os._exit(0)
        pids.append(pid)
    print("listening on %d" % s.getsockname()[1], flush=True)

    def forward(sig, frame):
        for p in pids:
            os.kill(p, signal.SIGTERM)
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    for p in pids:
        os.waitpid(p, 0)


if __name__ == "__main__":
    main()
