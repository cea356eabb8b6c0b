#!/usr/bin/python3
"""Raw TCP echo: every byte back, in order.

    tcp_echo.py --port N [--host H] [--cert FILE --key FILE]

Prints "listening on PORT" once ready. When the client shuts its write
side, what remains is sent and then the server shuts its side too. With
--cert/--key it listens on tls://. SIGTERM/SIGINT stop it.
"""
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import nanosrv  # noqa: E402


class Echo(nanosrv.TcpHandler):
    def on_data(self, conn, data):
        conn.write(data)

    def on_writable(self, conn, writable):
        # The client reads slower than it sends: stop reading until the
        # echoes drain, so memory stays bounded.
        if writable:
            conn.resume_reading()
        else:
            conn.pause_reading()

    def on_eof(self, conn):
        conn.shutdown()  # after what is queued


def main(argv):
    args = {"--port": "0", "--host": "127.0.0.1", "--cert": None, "--key": None}
    i = 1
    while i < len(argv):
        if argv[i] not in args or i + 1 >= len(argv):
            sys.stderr.write("usage: tcp_echo.py --port N [--host H] [--cert FILE --key FILE]\n")
            return 2
        args[argv[i]] = argv[i + 1]
        i += 2
    srv = nanosrv.Manager()
    scheme = "tcp"
    if args["--cert"] or args["--key"]:
        srv.set_tls(cert=args["--cert"], key=args["--key"])
        scheme = "tls"
    host = args["--host"]
    url = "%s://%s:%s" % (scheme, "[%s]" % host if ":" in host else host, args["--port"])
    lst = srv.tcp_listen(url, Echo())
    signal.signal(signal.SIGTERM, lambda *a: srv.stop())
    signal.signal(signal.SIGINT, lambda *a: srv.stop())
    print("listening on %d" % lst.port, flush=True)
    srv.run()
    srv.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
