#!/usr/bin/python3
"""Opens COUNT keep-alive connections to 127.0.0.1:PORT, completes one GET on
each (so the server has set up its per-connection state), prints
"held N" and keeps them idle until stdin closes or it is killed.
Usage: conn_hold.py --port N [--count 10000]"""
import argparse
import resource
import selectors
import socket
import sys
import time

BATCH = 500  # stay well under the listen backlog so no SYN is dropped


def open_batch(port, n, deadline):
    sel = selectors.DefaultSelector()
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        sel.register(s, selectors.EVENT_WRITE)
        socks.append(s)
    pending = len(socks)
    while pending and time.monotonic() < deadline:
        for key, ev in sel.select(1.0):
            s = key.fileobj
            if ev & selectors.EVENT_WRITE:
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                    sel.unregister(s)
                    pending -= 1
                    continue
                s.send(b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n")
                sel.modify(s, selectors.EVENT_READ)
            else:
                try:
                    data = s.recv(65536)
                except OSError:
                    data = b""
                sel.unregister(s)
                pending -= 1
                if not data:
                    s.close()
    sel.close()
    return [s for s in socks if s.fileno() >= 0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--timeout", type=float, default=60)
    a = ap.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    deadline = time.monotonic() + a.timeout
    held = []
    while len(held) < a.count and time.monotonic() < deadline:
        got = open_batch(a.port, min(BATCH, a.count - len(held)), deadline)
        if not got:
            break
        held += got
    print(f"held {len(held)}", flush=True)
    sys.stdin.read()  # hold until the parent closes our stdin


if __name__ == "__main__":
    main()
