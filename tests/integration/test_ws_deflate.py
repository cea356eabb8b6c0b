#!/usr/bin/env python3
"""permessage-deflate (RFC 7692) on echo-server's /ws with real clients:
python3-websockets with compression (its default offer) and without, the
wire checked with a raw socket (RSV1 on compressed echoes, plain under the
minimum size), echo-server --no-ws-deflate declining, and Node's `ws` with
perMessageDeflate when Node and the binding's node_modules are there."""
import asyncio
import base64
import os
import shutil
import struct
import subprocess
import sys
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, echo_server, connect, read_response  # noqa
from nsvtest import ws_frame as frame, ws_read_frame  # noqa
import websockets  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
srv = echo_server()
P = srv.port
URL = "ws://127.0.0.1:%d/ws" % P


def ext_of(ws):
    h = getattr(ws, "response_headers", None)
    if h is None:
        h = ws.response.headers
    return h.get("Sec-WebSocket-Extensions")


async def with_client(url, compression, expect_ext):
    async with websockets.connect(url, max_size=None, compression=compression) as ws:
        ext = ext_of(ws)
        if expect_ext:
            ok(ext is not None and ext.startswith("permessage-deflate"),
               "compression=%s: agreed (%s)" % (compression, ext))
        else:
            eq(ext, None, "compression=%s: no extension agreed" % compression)
        for m in ["hello", "", "é✓" * 5000, b"\x00\xff" * 3000, os.urandom(70000), "x" * (1 << 20)]:
            await ws.send(m)
            got = await ws.recv()
            ok(got == m, "compression=%s: echo of %d %s" % (compression, len(m), type(m).__name__))
        await ws.send(["frag", "men", "ted ✓" * 100])
        eq(await ws.recv(), "fragmented ✓" + "ted ✓" * 99, "compression=%s: fragmented message" % compression)
        for i in range(200):
            await ws.send("message %d " % i * 10)
        got = [await ws.recv() for _ in range(200)]
        ok(got == ["message %d " % i * 10 for i in range(200)], "compression=%s: 200 in order" % compression)
        await ws.close(1000)
        eq(ws.close_code, 1000, "compression=%s: clean close" % compression)


asyncio.run(with_client(URL, "deflate", True))
asyncio.run(with_client(URL, None, False))


# ---- the wire, through a raw socket --------------------------------------------
KEY = base64.b64encode(b"0123456789abcdef").decode()


def read_frame(s):
    """(first byte, payload) of the next server frame."""
    return ws_read_frame(s, whole_byte=True)


def raw(port, offer):
    s = connect(port)
    s.settimeout(5)
    s.sendall(("GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
               "Sec-WebSocket-Extensions: %s\r\n\r\n" % (KEY, offer)).encode())
    return s, read_response(s, head_only=True)


s, r = raw(P, "permessage-deflate; client_max_window_bits")
eq(r[0], 101, "raw: 101")
eq(r[1].get("sec-websocket-extensions"), "permessage-deflate; client_max_window_bits=15", "raw: the answer")
c = zlib.compressobj(6, zlib.DEFLATED, -15)
d = zlib.decompressobj(-15)
msg = b"abcdefgh" * 1000
z = c.compress(msg) + c.flush(zlib.Z_SYNC_FLUSH)
s.sendall(frame(2, z[:-4], rsv=4))
b0, pl = read_frame(s)
eq(b0, 0xC2, "raw: the echo of 8000 compressible bytes has RSV1 (0x%02x)" % b0)
ok(len(pl) < 200, "raw: and is %d bytes" % len(pl))
eq(d.decompress(pl + b"\x00\x00\xff\xff"), msg, "raw: and inflates to the message")
s.sendall(frame(1, b"tiny"))
eq(read_frame(s), (0x81, b"tiny"), "raw: a 4-byte message goes back plain (under the 64-byte minimum)")
s.sendall(frame(2, z[:-4], rsv=4))  # the same again, our stream keeps its context
b0, pl = read_frame(s)
z2 = c.compress(msg) + c.flush(zlib.Z_SYNC_FLUSH)
ok(b0 == 0xC2 and d.decompress(pl + b"\x00\x00\xff\xff") == msg, "raw: second echo, with context")
s.sendall(frame(2, z2[:-4], rsv=4))
b0, pl = read_frame(s)
ok(d.decompress(pl + b"\x00\x00\xff\xff") == msg, "raw: the client's context kept by the server")
s.sendall(frame(8, struct.pack(">H", 1000)))
eq(read_frame(s), (0x88, struct.pack(">H", 1000)), "raw: close")
s.close()

plain = echo_server("--no-ws-deflate")
s, r = raw(plain.port, "permessage-deflate")
eq(r[0], 101, "--no-ws-deflate: 101")
eq(r[1].get("sec-websocket-extensions"), None, "--no-ws-deflate: the offer is declined")
s.close()
asyncio.run(with_client("ws://127.0.0.1:%d/ws" % plain.port, "deflate", False))
plain.stop()

# ---- Node's ws with perMessageDeflate ------------------------------------------
NODE_MODULES = os.path.join(ROOT, "bindings", "node-ffi", "node_modules")
JS = r"""
const WebSocket = require('ws');
const ws = new WebSocket(process.argv[1], { perMessageDeflate: { threshold: 0 } });
const timer = setTimeout(() => { console.log('TIMEOUT'); process.exit(1); }, 15000);
const msgs = ['hello node', 'y'.repeat(100000), Buffer.alloc(70000, 7)];
let i = 0;
ws.on('open', () => { console.log('EXT ' + ws.extensions); ws.send(msgs[0]); });
ws.on('message', (data, isBinary) => {
  const want = msgs[i];
  const same = Buffer.isBuffer(want) ? isBinary && data.equals(want) : !isBinary && data.toString() === want;
  console.log((same ? 'SAME ' : 'DIFF ') + i);
  if (++i < msgs.length) ws.send(msgs[i]); else ws.close(1000);
});
ws.on('close', (code) => { console.log('CLOSE ' + code); clearTimeout(timer); });
ws.on('error', (e) => { console.log('ERROR ' + e.message); process.exit(1); });
"""
node = shutil.which("node")
if node and os.path.isdir(os.path.join(NODE_MODULES, "ws")):
    env = dict(os.environ, NODE_PATH=NODE_MODULES)
    out = subprocess.run([node, "-e", JS, URL], capture_output=True, text=True, timeout=30, env=env).stdout
    lines = out.split("\n")
    ok(any(l.startswith("EXT ") and "permessage-deflate" in l for l in lines), "node ws: agreed (%s)" % lines[0])
    eq([l for l in lines if l.startswith(("SAME", "DIFF"))], ["SAME 0", "SAME 1", "SAME 2"],
       "node ws: three compressed echoes")
    ok("CLOSE 1000" in lines, "node ws: clean close")
else:
    ok(False, "node and bindings/node-ffi/node_modules/ws installed (make deps)")

srv.stop()
done()
