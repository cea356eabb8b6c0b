#!/usr/bin/python3
"""TCP port forwarding with nanosrv.tcp, paced by the slower side.

    tcp_proxy.py --port N --to HOST:PORT

Prints "listening on PORT". Each client gets its own upstream connection;
bytes go both ways in order; when one side's queued output passes the high
water mark the other side stops being read until it drains; a half-close
is passed on (shutdown after what is queued).
"""
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import nanosrv  # noqa: E402


class Side(nanosrv.TcpHandler):
    """One end; `other` is the connection bytes go to."""

    def __init__(self, other=None):
        self.other = other

    def on_data(self, conn, data):
        self.other.write(data)

    def on_writable(self, conn, writable):
        # conn's output is full: stop reading what fills it.
        (self.other.resume_reading if writable else self.other.pause_reading)()

    def on_eof(self, conn):
        self.other.shutdown()

    def on_close(self, conn):
        self.other.close()


def main(argv):
    args = dict(zip(argv[1::2], argv[2::2]))
    if "--to" not in args:
        sys.stderr.write("usage: tcp_proxy.py --port N --to HOST:PORT\n")
        return 2
    srv = nanosrv.Manager()
    target = "tcp://" + args["--to"]

    class Client(Side):
        def on_open(self, conn):
            up = Side(conn)
            self.other = srv.connect(target, up)

    lst = srv.tcp_listen("tcp://127.0.0.1:%s" % args.get("--port", "0"), Client)
    signal.signal(signal.SIGTERM, lambda *a: srv.stop())
    print("listening on %d" % lst.port, flush=True)
    srv.run()
    srv.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
