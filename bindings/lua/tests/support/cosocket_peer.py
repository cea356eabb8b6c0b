#!/usr/bin/python3
"""Peers for tests/cosocket.lua, in a separate process, loopback only.

Prints "listening on ECHO_PORT BLACKHOLE_PORT REFUSED_PORT": a line echo
server (each connection echoes what it gets, "quit\n" closes it), a listener
whose accept queue is full and that never accepts (connects to it hang), and
a port nothing listens on. Stopped by its PID, or ends after 120 s."""
import select
import socket
import time


def main():
    echo = socket.socket()
    echo.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    echo.bind(("127.0.0.1", 0))
    echo.listen(16)
    # Backlog 0 plus connections nobody accepts: the queue is full, further
    # SYNs are dropped, a connect times out.
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(0)
    fillers = []
    for _ in range(4):
        f = socket.socket()
        f.setblocking(False)
        try:
            f.connect(hole.getsockname())
        except BlockingIOError:
            pass
        fillers.append(f)
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    refused = free.getsockname()[1]
    free.close()
    print("listening on %d %d %d" % (echo.getsockname()[1], hole.getsockname()[1], refused), flush=True)
    conns = []
    deadline = time.time() + 120
    while time.time() < deadline:
        r, _, _ = select.select([echo] + conns, [], [], 1.0)
        for s in r:
            if s is echo:
                c, _ = echo.accept()
                conns.append(c)
            else:
                data = s.recv(65536)
                if not data or data.startswith(b"quit\n"):
                    conns.remove(s)
                    s.close()
                else:
                    s.sendall(data)


main()
