#!/usr/bin/env python3
"""Real clients for the Lua raw TCP and TLS tests (stdlib only).

  stream_client.py echo PORT SIZE [CAFILE]
      Sends SIZE random bytes while reading the echo, half-closes (plain
      TCP: shutdown(SHUT_WR); TLS: reads SIZE bytes first, as TLS has no
      half-close of its own), reads until the server closes; prints
      "ok SIZE" when every byte came back in order, else what went wrong.
  stream_client.py wss PORT CAFILE
      WebSocket over TLS: a text and a 300 KB binary message echoed;
      prints "ok" or what went wrong.
"""
import base64
import os
import socket
import ssl
import struct
import sys
import time
import select


def connect(port, cafile, timeout=60):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    if cafile:
        ctx = ssl.create_default_context(cafile=cafile)
        s = ctx.wrap_socket(s, server_hostname="localhost")
    return s


def echo(port, size, cafile):
    """One thread, non-blocking: an SSL socket must not be read and written
    from two threads at once."""
    data = os.urandom(size)
    s = connect(port, cafile)
    s.setblocking(False)
    got = bytearray()
    off, ended = 0, False
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        want_w = off < size
        r, w, _ = select.select([s], [s] if want_w else [], [], 1.0)
        if w or (want_w and cafile):
            try:
                off += s.send(data[off:off + (1 << 16)])
            except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError):
                pass
        if off >= size and not cafile and not ended:
            s.shutdown(socket.SHUT_WR)
            ended = True
        if r or (cafile and s.pending()):
            try:
                d = s.recv(1 << 16)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                continue
            if not d:
                break
            got += d
            if cafile and len(got) >= size:
                break
    s.close()
    if bytes(got) != data:
        same = next((i for i in range(min(len(got), size)) if got[i] != data[i]), min(len(got), size))
        return "got %d bytes of %d (sent %d), first difference at %d" % (len(got), size, off, same)
    return "ok %d" % size


def ws_frame(op, payload):
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | op, 0x80 | n)
    elif n < 65536:
        head = struct.pack("!BBH", 0x80 | op, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | op, 0x80 | 127, n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def recv_exact(s, n, buf):
    while len(buf) < n:
        d = s.recv(1 << 16)
        if not d:
            raise EOFError("closed after %d of %d bytes" % (len(buf), n))
        buf += d
    return buf[:n], buf[n:]


def ws_read(s, buf):
    h, buf = recv_exact(s, 2, buf)
    op, n = h[0] & 15, h[1] & 127
    if n == 126:
        x, buf = recv_exact(s, 2, buf)
        n = struct.unpack("!H", x)[0]
    elif n == 127:
        x, buf = recv_exact(s, 8, buf)
        n = struct.unpack("!Q", x)[0]
    p, buf = recv_exact(s, n, buf)
    return op, p, buf


def wss(port, cafile):
    s = connect(port, cafile)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(("GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % key).encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            return "closed during the handshake"
        buf += d
    head, buf = buf.split(b"\r\n\r\n", 1)
    if not head.startswith(b"HTTP/1.1 101"):
        return "handshake: " + head.decode(errors="replace")
    text = "hello över tls".encode()
    blob = os.urandom(300000)
    s.sendall(ws_frame(1, text) + ws_frame(2, blob))
    op1, p1, buf = ws_read(s, buf)
    op2, p2, buf = ws_read(s, buf)
    s.close()
    if (op1, p1) != (1, text) or (op2, p2) != (2, blob):
        return "echo differs: opcodes %d %d, sizes %d %d" % (op1, op2, len(p1), len(p2))
    return "ok"


try:
    if sys.argv[1] == "echo":
        print(echo(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else None))
    else:
        print(wss(int(sys.argv[2]), sys.argv[3]))
except Exception as e:  # the test prints what failed
    print("failed: %r" % e)
