#!/usr/bin/env python3
"""Per-event cost of the Python dispatch, without sockets.

Fills a Manager's event array with N REQUEST records (a few connections,
strings in the arena) and times Manager._dispatch over them with a handler
that reads the method and path and returns nothing, then the bare record
unpacking (EVENT.unpack_from per record). Prints nanoseconds per event,
best of --rounds.

    NANOSRV_LIBRARY=build/libnanosrv.so.1 python3 bindings/python-cffi/bench/unpack.py
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import nanosrv  # noqa: E402
from nanosrv._ffi import ffi, lib, EVENT_SIZE  # noqa: E402
from nanosrv._message import EVENT  # noqa: E402


def fill(m, n):
    arena = b"GET/items/42"
    ffi.memmove(m._arena, arena, len(arena))
    for i in range(n):
        e = m._evs[i]
        e.conn = 0x10000 + (i % 64)
        e.type = lib.NSV_EV_REQUEST
        e.flags = lib.NSV_EVF_KEEPALIVE
        e.route = 0
        e.method_off, e.method_len = 0, 3
        e.path_off, e.path_len = 3, 9
        e.listener = 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100000)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    m = nanosrv.Manager(max_events=a.batch)
    def handler(conn, msg):
        msg.method, msg.path
        # The events are fabricated, so nothing can answer them; marking the
        # request answered keeps the "handler never replied" 500 path (and
        # its log line) out of what is measured.
        conn._pending = False
    m.route("GET", "/items/:id", handler)
    fill(m, a.batch)
    batches = max(1, a.events // a.batch)
    total = batches * a.batch

    best = float("inf")
    for _ in range(a.rounds):
        t = time.perf_counter()
        for _ in range(batches):
            m._dispatch(a.batch)
        best = min(best, time.perf_counter() - t)
    print("dispatch: %.0f ns/event (%d events, best of %d)" % (best / total * 1e9, total, a.rounds))

    unpack, buf = EVENT.unpack_from, m._evbuf
    best = float("inf")
    for _ in range(a.rounds):
        t = time.perf_counter()
        for _ in range(batches):
            for off in range(0, a.batch * EVENT_SIZE, EVENT_SIZE):
                unpack(buf, off)
        best = min(best, time.perf_counter() - t)
    print("unpack:   %.0f ns/event" % (best / total * 1e9))
    m.close()


if __name__ == "__main__":
    main()
