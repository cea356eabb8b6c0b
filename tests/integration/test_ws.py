#!/usr/bin/env python3
"""WebSocket behaviour of echo-server's /ws: a real client (python3-websockets)
for the happy paths, raw sockets for every failure rule of RFC 6455."""
import asyncio
import base64
import os
import socket
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, echo_server, connect, read_response, closed_by_peer  # noqa
from nsvtest import ws_frame as frame, ws_read_frame as read_frame  # noqa
import websockets  # noqa: E402

srv = echo_server()
if os.environ.get("NSV_TEST_FRONT"):  # the suite through build/http-proxy (tests/long/proxy_suites.sh)
    from proxy_upstream import Front
    srv = Front(srv)
P = srv.port
URL = "ws://127.0.0.1:%d/ws" % P


async def client_tests():
    async with websockets.connect(URL, max_size=None, compression=None) as ws:
        await ws.send("hello")
        eq(await ws.recv(), "hello", "text echo")
        await ws.send(b"\x00\xffbin")
        eq(await ws.recv(), b"\x00\xffbin", "binary echo keeps the opcode")
        await ws.send("")
        eq(await ws.recv(), "", "empty text message")
        for size in (125, 126, 65535, 65536, 1 << 20):
            data = os.urandom(size)
            await ws.send(data)
            eq(await ws.recv() == data, True, "binary message of %d bytes (7/16/64-bit lengths)" % size)
        big = "é" * (4 << 20)  # 8 MiB of 2-byte UTF-8
        await ws.send(big)
        ok(await ws.recv() == big, "8 MiB text message")
        await ws.send(["frag", "men", "ted ✓"])
        eq(await ws.recv(), "fragmented ✓", "fragmented message reassembled")
        pong = await ws.ping(b"payload")
        await asyncio.wait_for(pong, 5)
        ok(True, "ping answered with pong")
        for i in range(100):
            await ws.send("m%d" % i)
        got = [await ws.recv() for _ in range(100)]
        eq(got, ["m%d" % i for i in range(100)], "100 messages in order")
        await ws.close(4001, "done")
        eq(ws.close_code, 4001, "close code echoed by the server")
    async def many(i):
        async with websockets.connect(URL) as w:
            await w.send("c%d" % i)
            return await w.recv() == "c%d" % i
    res = await asyncio.gather(*[many(i) for i in range(50)])
    eq(sum(res), 50, "50 concurrent WebSocket clients")

asyncio.run(client_tests())


# ---- raw sockets ---------------------------------------------------------------
KEY = base64.b64encode(b"0123456789abcdef").decode()


def handshake(extra=b"", key=KEY.encode(), version=b"13", method=b"GET", ver=b"HTTP/1.1", path=b"/ws"):
    s = connect(P)
    req = (method + b" " + path + b" " + ver + b"\r\nHost: x\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n"
           + (b"Sec-WebSocket-Key: " + key + b"\r\n" if key else b"")
           + (b"Sec-WebSocket-Version: " + version + b"\r\n" if version else b"") + extra + b"\r\n")
    s.sendall(req)
    return s, read_response(s, head_only=True)


def expect_close(payloads, code, name):
    s, r = handshake()
    s.settimeout(5)
    for p in payloads:
        s.sendall(p)
    try:
        f = read_frame(s)
        while f and f[0] != 8:
            f = read_frame(s)
    except (ConnectionResetError, socket.timeout):
        f = None
    got = struct.unpack(">H", f[1][:2])[0] if f and len(f[1]) >= 2 else None
    eq(got, code, name + " -> close %d" % code)
    ok(closed_by_peer(s), name + ": TCP connection closed")
    s.close()


s, r = handshake()
eq(r[0], 101, "handshake -> 101")
eq(r[1].get("sec-websocket-accept"), base64.b64encode(
    __import__("hashlib").sha1((KEY + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode(),
   "Sec-WebSocket-Accept computed")
ok("sec-websocket-extensions" not in r[1], "no extension offered")
s.sendall(frame(1, b"split") [:3])
s.sendall(frame(1, b"split")[3:])
eq(read_frame(s), (1, b"split"), "frame split across writes")
s.sendall(frame(1, b"a") + frame(2, b"b") + frame(9, b"pi"))
got = [read_frame(s) for _ in range(3)]
eq(sorted(got), [(1, b"a"), (2, b"b"), (10, b"pi")], "many frames in one write; ping -> pong with payload")
eq([g for g in got if g[0] != 10], [(1, b"a"), (2, b"b")], "echoes keep their order")
s.sendall(frame(1, b"x" * 3, fin=False) + frame(9, b"mid") + frame(0, b"yz"))
eq([read_frame(s), read_frame(s)], [(10, b"mid"), (1, b"xxxyz")], "control frame between fragments")
for b in frame(1, b"bytewise"):
    s.sendall(bytes([b]))
eq(read_frame(s), (1, b"bytewise"), "frame fed byte by byte")
s.sendall(frame(8, struct.pack(">H", 1000) + b"bye"))
eq(read_frame(s), (8, struct.pack(">H", 1000)), "close handshake echoes the code")
ok(closed_by_peer(s), "TCP closed after the close exchange")
s.close()

expect_close([frame(1, b"hi", mask=False)], 1002, "unmasked client frame")
expect_close([frame(1, b"hi", rsv=4)], 1002, "RSV1 without extension")
expect_close([frame(3, b"hi")], 1002, "reserved opcode 3")
expect_close([frame(0xB, b"")], 1002, "reserved control opcode 0xB")
expect_close([frame(9, b"x" * 126)], 1002, "control frame over 125 bytes")
expect_close([frame(9, b"x", fin=False)], 1002, "fragmented control frame")
expect_close([frame(0, b"x")], 1002, "continuation without a start")
expect_close([frame(1, b"a", fin=False), frame(1, b"b")], 1002, "new data frame inside a fragmented message")
expect_close([frame(1, b"\xc0\xaf")], 1007, "overlong UTF-8")
expect_close([frame(1, b"\xed\xa0\x80")], 1007, "UTF-16 surrogate in UTF-8")
expect_close([frame(1, b"\xf4\x90\x80\x80")], 1007, "code point past U+10FFFF")
s, r = handshake()
s.sendall(frame(1, b"ok\xe2\x82", fin=False) + frame(0, b"\xac!"))
eq(read_frame(s), (1, "ok€!".encode()), "UTF-8 sequence split across fragments is valid")
s.close()
expect_close([frame(1, b"ab\xe2\x82", fin=False), frame(0, b"")], 1007, "text ending mid-sequence")
expect_close([frame(8, b"\x03\xe8\xff")], 1007, "close reason not UTF-8")
expect_close([frame(8, struct.pack(">H", 1005))], 1002, "close code 1005 on the wire")
expect_close([frame(8, struct.pack(">H", 999))], 1002, "close code 999")
expect_close([frame(8, b"\x03")], 1002, "one-byte close payload")
expect_close([frame(2, b"", length=17 << 20)], 1009, "message over the 16 MiB limit")

for name, kw, want in [
    ("missing key", dict(key=None), 400),
    ("key of 15 bytes", dict(key=base64.b64encode(b"x" * 15)), 400),
    ("version 8", dict(version=b"8"), 426),
    ("no version", dict(version=None), 426),
]:
    s, r = handshake(**kw)
    eq(r[0] if r else None, want, "handshake with %s -> %d" % (name, want))
    if want == 426:
        eq(r[1].get("sec-websocket-version"), "13", "426 names version 13")
    s.close()
s, r = handshake(method=b"POST")
ok(r and r[0] != 101, "POST with upgrade headers is not upgraded (the route is GET)")
s.close()
s = connect(P)
s.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\n\r\n")
r = read_response(s)
eq(r[0], 426, "plain GET on a WebSocket route -> 426")
s.close()
ok(srv.alive(), "server alive after every failure")


# A client that sends much faster than it reads: the server stops reading it
# while its answers back up, so every echo arrives and nothing is dropped.
def slow_reader_gets_everything(count=256, size=65536):
    s, r = handshake()
    if not r or r[0] != 101:
        return "no upgrade"
    s.settimeout(20)
    blob = os.urandom(size)
    hdr = bytes([0x82, 0x80 | 127]) + struct.pack(">Q", size) + b"\0\0\0\0"  # zero mask key

    def sender():
        try:
            for i in range(count):
                s.sendall(hdr + struct.pack(">I", i) + blob[4:])
        except OSError:
            pass
    t = __import__("threading").Thread(target=sender)
    t.start()
    __import__("time").sleep(1.0)  # read nothing for a while
    try:
        for i in range(count):
            f = read_frame(s)
            if f is None or f[0] != 2 or f[1][:4] != struct.pack(">I", i) or f[1][4:] != blob[4:]:
                return "message %d wrong or missing" % i
    except socket.timeout:
        return "timed out at message %d" % i
    finally:
        t.join(20)
        s.close()
    return None
eq(slow_reader_gets_everything(), None, "16 MiB sent to a client that reads late: every echo arrives in order")


async def drain_closes_websockets():
    async with websockets.connect(URL) as w:
        await w.send("before")
        await w.recv()
        srv.proc.send_signal(__import__("signal").SIGTERM)
        try:
            await asyncio.wait_for(w.recv(), 5)
            return None
        except websockets.ConnectionClosed as e:
            return e.code
eq(asyncio.run(drain_closes_websockets()), 1001, "SIGTERM drain closes open WebSockets with 1001")
eq(srv.stop(), 0, "server drains and exits 0")
done()
