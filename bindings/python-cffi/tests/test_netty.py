#!/usr/bin/python3
"""py-netty programs on nanosrv.netty: the seed README's echo server, echo
client and port-forwarding proxy (examples/netty_*.py, the README's code
with the import changed; the test substitutes addresses and ports only),
plus the channel API those rely on."""
import os
import socket
import ssl
import subprocess
import sys
import threading
import unittest

import _tap
from _net import Proc, certs, s_client_echo, echo_roundtrip, example, free_port, wait_port, EXAMPLES

import nanosrv
from nanosrv.netty import Bootstrap, ChannelHandlerAdapter, EventLoopGroup, ServerBootstrap


class Examples(unittest.TestCase):
    def test_echo_server(self):
        port = free_port()
        with example("netty_echo_server.py", [("address='0.0.0.0', port=8080",
                                               "address='127.0.0.1', port=%d" % port)]) as p:
            wait_port(port, p.p)
            data = os.urandom(1 << 20)
            got = echo_roundtrip(port, data, half_close=False)
            self.assertEqual(got, data)

    def test_echo_server_tls(self):
        c = certs()
        port = free_port()
        with example("netty_echo_server_tls.py", [("/path/to/cert/file", c["srv.crt"]),
                                                  ("/path/to/key/file", c["srv.key"]),
                                                  ("address='0.0.0.0', port=9443",
                                                   "address='127.0.0.1', port=%d" % port)]) as p:
            wait_port(port, p.p)
            ctx = ssl.create_default_context(cafile=c["ca.crt"])
            data = os.urandom(300000)
            self.assertEqual(echo_roundtrip(port, data, half_close=False, ctx=ctx), data)
            self.assertEqual(s_client_echo(port, c["ca.crt"], b"ping over s_client\n"), b"ping over s_client\n")

    def test_client(self):
        # The client example asks www.google.com:80 for "/"; here a local
        # HTTP server stands in for it.
        srv = nanosrv.Manager()
        lst = srv.http_listen("http://127.0.0.1:0", lambda conn, msg: conn.http_reply(
            200, "Content-Type: text/plain\r\n", "hello from %s host=%s" % (msg.uri, msg.header("host"))))
        with _tap.ServerThread(srv):
            with example("netty_client.py", [("'www.google.com', 80", "'127.0.0.1', %d" % lst.port)],
                         stdin=subprocess.PIPE) as p:
                # The program prints what it reads, then waits for a line.
                out = b""
                for _ in range(200):
                    line = p.p.stdout.readline()
                    if not line:
                        break
                    out += line
                    if b"hello from / host=127.0.0.1" in out:
                        break
                self.assertIn(b"HTTP/1.1 200", out)
                self.assertIn(b"hello from / host=127.0.0.1", out)
                p.p.stdin.write(b"\n")
                p.p.stdin.flush()
                self.assertEqual(p.p.wait(20), 0)

    def test_proxy(self):
        with Proc([sys.executable, os.path.join(EXAMPLES, "tcp_echo.py"), "--port", "0"]) as up:
            port = free_port()
            with example("netty_proxy.py", [("'www.google.com', 443", "'127.0.0.1', %d" % up.port),
                                            ("port=8443", "port=%d" % port)]) as p:
                wait_port(port, p.p)
                for size in (1, 65536, 8 << 20):
                    data = os.urandom(size)
                    self.assertEqual(echo_roundtrip(port, data, half_close=False, timeout=120), data, size)
                # Several clients at once, each its own upstream connection.
                res = [None] * 8
                datas = [os.urandom(200000 + i) for i in range(8)]

                def one(i):
                    res[i] = echo_roundtrip(port, datas[i], half_close=False)
                ts = [threading.Thread(target=one, args=(i,)) for i in range(8)]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join(120)
                self.assertEqual(res, datas)


class ChannelApi(unittest.TestCase):
    def setUp(self):
        self.groups = []

    def tearDown(self):
        for g in self.groups:
            g.shutdown_gracefully()

    def group(self, name):
        g = EventLoopGroup(1, name)
        self.groups.append(g)
        return g

    def test_lifecycle_and_auto_read(self):
        events = []
        done = threading.Event()
        ready = threading.Event()

        class Srv(ChannelHandlerAdapter):
            def channel_active(self, ctx):
                events.append("active")
                ctx.channel().set_auto_read(False)  # nothing is read until resumed
                ready.set()

            def channel_read(self, ctx, buf):
                events.append(buf)
                ctx.write(buf.upper())

            def channel_inactive(self, ctx):
                events.append("inactive")
                done.set()

        sg = self.group("srv")
        server = ServerBootstrap(child_group=sg, child_handler_initializer=Srv).bind("127.0.0.1", 0).channel()
        s = socket.create_connection(("127.0.0.1", server.port), 10)
        s.sendall(b"abc")
        self.assertTrue(ready.wait(10))
        # Paused: the bytes wait in the kernel; resume from another thread.
        self.assertEqual(events, ["active"])
        chans = []
        sg.submit_task(lambda: chans.extend(c.handler for c in sg.manager()._raw.conns.values())).result(10)
        self.assertEqual(len(chans), 1)
        chan = chans[0]
        chan.set_auto_read(True)
        s.settimeout(10)
        self.assertEqual(s.recv(10), b"ABC")
        s.close()
        self.assertTrue(done.wait(10))
        self.assertEqual(events, ["active", b"abc", "inactive"])
        # A late write to a closed channel is no error: its future says False.
        self.assertEqual(chan.write(b"late").future.result(10), False)

    def test_connect_refused_and_writability(self):
        port = free_port()  # nothing listens there
        cg = self.group("client")
        cf = Bootstrap(eventloop_group=cg, handler_initializer=ChannelHandlerAdapter).connect("127.0.0.1", port)
        with self.assertRaises(ConnectionError):
            cf.sync(10)

        changes = []
        got = threading.Event()

        class Slow(ChannelHandlerAdapter):
            def channel_writability_changed(self, ctx):
                changes.append(ctx.channel().is_writable())
                if len(changes) >= 2:
                    got.set()

        # A peer that reads nothing until told to: 16 MiB of writes must go
        # unwritable, then writable again once it reads.
        lsock = socket.socket()
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(1)
        ch = Bootstrap(eventloop_group=cg, handler_initializer=Slow).connect(
            "127.0.0.1", lsock.getsockname()[1]).sync(10).channel()
        peer, _ = lsock.accept()
        # More than loopback socket buffers hold, queued in one turn of the
        # loop (writes from this thread would trickle in as it drains).
        cg.submit_task(lambda: [ch.write(b"x" * 65536) for _ in range(256)]).result(10)
        total = 0
        peer.settimeout(20)
        while total < 256 * 65536:
            b = peer.recv(1 << 16)
            if not b:
                break
            total += len(b)
        self.assertEqual(total, 256 * 65536)
        self.assertTrue(got.wait(10), changes)
        self.assertEqual(changes[:2], [False, True])
        ch.close().sync(10)
        peer.close()
        lsock.close()

    def test_sync_in_own_loop_raises(self):
        g = self.group("own")
        errs = []
        ready = threading.Event()

        class H(ChannelHandlerAdapter):
            def channel_active(self, ctx):
                try:
                    Bootstrap(eventloop_group=g).connect("127.0.0.1", free_port()).sync()
                except RuntimeError as e:
                    errs.append(e)
                ready.set()
        srv = ServerBootstrap(child_group=g, child_handler_initializer=H).bind("127.0.0.1", 0).channel()
        socket.create_connection(("127.0.0.1", srv.port), 10).close()
        self.assertTrue(ready.wait(10))
        self.assertEqual(len(errs), 1)
        self.assertIn("wait for itself", str(errs[0]))


if __name__ == "__main__":
    _tap.main()
