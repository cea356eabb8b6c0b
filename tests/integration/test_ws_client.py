#!/usr/bin/env python3
"""The WebSocket client (nsv_ws_connect) through the driver mode of the
ws_client test binary, against real servers: our echo-server (ws:// and
wss:// with a CA, a wrong CA and a wrong name; single loop and a sharded
client), Python's websockets server (Debian python3-websockets: echo,
subprotocol choice, its close), and a raw-socket server with misbehaving
modes: no 101, a wrong Sec-WebSocket-Accept, no Upgrade or Connection, an
unoffered subprotocol or extension, a masked frame, bad UTF-8, a message
over ws_max_message, a huge head, an early close, a slow trickle of the
head, frames in the same packet as the 101, no answer, a server that never
closes TCP. The raw server also checks the request and the masking: every
client frame masked, with a fresh key each time. Fails (does not skip)
when python3-websockets is missing."""
import base64
import hashlib
import os
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, Server, BUILD  # noqa

DRIVER = os.path.join(BUILD, "tests", "integration", "ws_client")
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
tmp = tempfile.mkdtemp(prefix="nsv-wsc-")


runs_failed = []  # driver runs that did not exit 0 (a timeout, a sanitizer report)


def drive(url, *args, timeout=30):
    p = subprocess.run([DRIVER, "--drive", url] + list(args), capture_output=True, timeout=timeout)
    out = p.stdout.decode(errors="replace").splitlines()
    err = p.stderr.decode(errors="replace")
    if p.returncode != 0 or "Sanitizer" in err:
        runs_failed.append((url, p.returncode, err[-800:]))
    return p.returncode, out, err


def has(lines, prefix):
    return any(l.startswith(prefix) for l in lines)


# ---- certificates (as test_tls_client.py makes them) ----

def sh(*argv):
    subprocess.run(argv, check=True, capture_output=True, cwd=tmp)


def ca(name):
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", name + ".key", "-out", name + ".crt", "-days", "30", "-subj", "/CN=" + name)


def cert(name, ca_name, host):
    sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + host)
    with open(os.path.join(tmp, name + ".ext"), "w") as f:
        f.write("subjectAltName=DNS:%s\n" % host)
    sh("openssl", "x509", "-req", "-in", name + ".csr", "-CA", ca_name + ".crt", "-CAkey", ca_name + ".key",
       "-CAcreateserial", "-out", name + ".crt", "-days", "30", "-extfile", name + ".ext")


ca("ca")
ca("otherca")
cert("good", "ca", "localhost")
cert("wrongname", "ca", "other.example")
CA = os.path.join(tmp, "ca.crt")
OTHERCA = os.path.join(tmp, "otherca.crt")

# ---- our echo-server ----

echo = Server([os.path.join(BUILD, "echo-server"), "--port", "0"])
for workers in ([], ["--workers", "2"]):
    kind = "sharded client" if workers else "client"
    rc, out, err = drive("ws://127.0.0.1:%d/ws" % echo.port, "--send", "hello", "--send", "wörld",
                         "--binary", "1000000", "--close", "1000", *workers)
    eq(rc, 0, "echo-server, %s: the driver ended" % kind)
    ok(has(out, "open 101 proto= tls=0"), "echo-server, %s: WS_OPEN 101" % kind, out)
    ok("message 1 hello" in out and "message 1 wörld" in out, "echo-server, %s: text echoed" % kind, out)
    ok("message 2 len=1000000 intact=1" in out, "echo-server, %s: 1 MB binary echoed intact" % kind, out)
    ok("close 1000 " in out and out[-1] == "closed", "echo-server, %s: its echo of our 1000, CLOSE" % kind, out)
echo.stop()

tls = Server([os.path.join(BUILD, "echo-server"), "--port", "0", "--cert", os.path.join(tmp, "good.crt"),
              "--key", os.path.join(tmp, "good.key")])
rc, out, err = drive("wss://localhost:%d/ws" % tls.port, "--ca", CA, "--send", "over tls", "--binary", "300000",
                     "--close", "1000")
ok(has(out, "open 101 proto= tls=1"), "wss:// to echo-server: WS_OPEN with NSV_EVF_TLS", out)
ok("message 1 over tls" in out and "message 2 len=300000 intact=1" in out, "wss://: messages echoed", out)
ok(out[-1:] == ["closed"], "wss://: closed", out)
rc, out, err = drive("wss://localhost:%d/ws" % tls.port, "--ca", CA, "--workers", "2", "--send", "sharded tls",
                     "--close", "1000")
ok("message 1 sharded tls" in out and out[-1:] == ["closed"], "wss:// from a sharded client", out)
rc, out, err = drive("wss://localhost:%d/ws" % tls.port, "--ca", OTHERCA, "--send", "x")
ok(has(out, "error NSV_ETLS") and not has(out, "open") and out[-1:] == ["closed"],
   "wss:// with a certificate from another CA: ERROR ETLS, CLOSE, no open", out)
tls.stop()
tls = Server([os.path.join(BUILD, "echo-server"), "--port", "0", "--cert", os.path.join(tmp, "wrongname.crt"),
              "--key", os.path.join(tmp, "wrongname.key")])
rc, out, err = drive("wss://localhost:%d/ws" % tls.port, "--ca", CA, "--send", "x")
ok(has(out, "error NSV_ETLS") and not has(out, "open"), "wss:// to a certificate for another name: ETLS", out)
rc, out, err = drive("wss://localhost:%d/ws" % tls.port, "--ca", CA, "--opt", "tls_verify_server=0", "--send",
                     "unverified", "--close", "1000")
ok("message 1 unverified" in out, "... accepted with tls_verify_server 0", out)
tls.stop()

# ---- Python's websockets server ----

WS_SERVER = r'''
import asyncio, ssl, sys
import websockets
async def handler(ws):
    path = getattr(ws, "path", None) or ws.request.path
    sys.stderr.write("path %s proto %s\n" % (path, ws.subprotocol)); sys.stderr.flush()
    async for m in ws:
        if m == "close-me":
            await ws.close(4000, "srv bye")
            return
        await ws.send(m)
async def main():
    ctx = None
    if len(sys.argv) > 1:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[1], sys.argv[2])
    async with websockets.serve(handler, "127.0.0.1", 0, subprotocols=["chat", "superchat"], ssl=ctx,
                                max_size=None, ping_interval=None) as srv:
        port = list(srv.sockets)[0].getsockname()[1]
        print("listening on %d" % port, flush=True)
        await asyncio.Future()
asyncio.run(main())
'''
try:
    import websockets  # noqa
    have_ws = True
except ImportError:
    have_ws = False
ok(have_ws, "python3-websockets is installed")
if have_ws:
    py = Server([sys.executable, "-c", WS_SERVER])
    rc, out, err = drive("ws://127.0.0.1:%d/chat?room=1" % py.port, "--protocols", "v9, chat", "--send",
                         "hi websockets", "--binary", "70000", "--close", "1000")
    ok(has(out, "open 101 proto=chat"), "websockets: WS_OPEN with the subprotocol it chose", out)
    ok("message 1 hi websockets" in out and "message 2 len=70000 intact=1" in out,
       "websockets: text and binary echoed (it refuses unmasked frames)", out)
    ok("close 1000 done" in out and out[-1:] == ["closed"], "websockets: our close answered", out)
    rc, out, err = drive("ws://127.0.0.1:%d/x" % py.port, "--send", "close-me")
    ok("close 4000 srv bye" in out and out[-1:] == ["closed"], "websockets: its close (4000) echoed, then closed",
       out)
    py.stop()
    py = Server([sys.executable, "-c", WS_SERVER, os.path.join(tmp, "good.crt"), os.path.join(tmp, "good.key")])
    rc, out, err = drive("wss://localhost:%d/tls" % py.port, "--ca", CA, "--send", "tls websockets", "--close",
                         "1000")
    ok(has(out, "open 101 proto= tls=1") and "message 1 tls websockets" in out and out[-1:] == ["closed"],
       "websockets over wss://", out)
    py.stop()

# ---- the raw-socket server ----

seen = {"keys": [], "requests": [], "frame_keys": [], "client_close": [], "eof_before_close": []}
lock = threading.Lock()


def accept_of(key):
    return base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()


def frame(op, payload, fin=True, mask=None):
    b0 = (0x80 if fin else 0) | op
    n = len(payload)
    mbit = 0x80 if mask else 0
    if n < 126:
        h = struct.pack("!BB", b0, mbit | n)
    elif n < 65536:
        h = struct.pack("!BBH", b0, mbit | 126, n)
    else:
        h = struct.pack("!BBQ", b0, mbit | 127, n)
    if mask:
        payload = bytes(c ^ mask[i % 4] for i, c in enumerate(payload))
        h += mask
    return h + payload


def read_frame(f):
    """One client frame: (opcode, payload, mask key) or None at EOF."""
    h = f.read(2)
    if len(h) < 2:
        return None
    n = h[1] & 0x7F
    if n == 126:
        n = struct.unpack("!H", f.read(2))[0]
    elif n == 127:
        n = struct.unpack("!Q", f.read(8))[0]
    key = f.read(4) if h[1] & 0x80 else None
    p = f.read(n)
    if key:
        p = bytes(c ^ key[i % 4] for i, c in enumerate(p))
    return h[0] & 0x0F, p, key


def head_of(f):
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        b = f.read(1)
        if not b:
            return None
        head += b
        if len(head) > 65536:
            return None
    return head.decode("latin-1")


def ok101(key, extra=""):
    return ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Accept: %s\r\n%s\r\n" % (accept_of(key), extra)).encode()


def handle(c):
    f = c.makefile("rb")
    head = head_of(f)
    if head is None:
        return
    lines = head.split("\r\n")
    path = lines[0].split(" ")[1]
    hdrs = {}
    for l in lines[1:]:
        if ":" in l:
            k, v = l.split(":", 1)
            hdrs[k.strip().lower()] = v.strip()
    key = hdrs.get("sec-websocket-key", "")
    with lock:
        seen["keys"].append(key)
        seen["requests"].append((lines[0], hdrs))
    mode = path.split("?")[0].strip("/")
    if mode == "no101":
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")
    elif mode == "badaccept":
        c.sendall(ok101(key + "x"))  # the accept of another key
    elif mode == "noupgrade":
        c.sendall(ok101(key).replace(b"Upgrade: websocket\r\n", b""))
    elif mode == "noconnection":
        c.sendall(ok101(key).replace(b"Connection: Upgrade\r\n", b""))
    elif mode == "proto":
        c.sendall(ok101(key, "Sec-WebSocket-Protocol: other\r\n"))
    elif mode == "ext":
        c.sendall(ok101(key, "Sec-WebSocket-Extensions: permessage-deflate\r\n"))
    elif mode in ("masked", "badutf8", "big", "rsv", "bigping", "cont"):
        bad = {"masked": frame(1, b"masked!", mask=b"\x01\x02\x03\x04"),
               "badutf8": frame(1, b"ok \xc3\x28 bad"),
               "big": frame(2, b"z" * 2000),
               "rsv": bytes([0xC1, 1]) + b"x",  # RSV1: no extension was agreed
               "bigping": frame(9, b"p" * 126),  # control frames carry at most 125
               "cont": frame(0, b"nothing to continue")}[mode]
        c.sendall(ok101(key) + bad)
        fr = read_frame(f)
        with lock:
            seen["client_close"].append((mode, fr[0] if fr else None,
                                         struct.unpack("!H", fr[1][:2])[0] if fr and len(fr[1]) >= 2 else None))
    elif mode == "hugehead":
        c.sendall(b"HTTP/1.1 101 Switching Protocols\r\n" + b"X-Filler: " + b"a" * 100000 + b"\r\n\r\n")
    elif mode == "earlyclose":
        c.sendall(b"HTTP/1.1 101 Swi")
    elif mode == "reset":
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends RST
    elif mode == "trickle":
        for b in ok101(key) + frame(1, b"after the trickle"):
            c.sendall(bytes([b]))
            time.sleep(0.002)
        read_frame(f)
    elif mode == "samepacket":
        c.sendall(ok101(key) + frame(1, b"one") + frame(1, b"tw", fin=False) + frame(0, b"o") + frame(9, b"pp"))
        read_frame(f)
    elif mode == "closeburst":  # everything at once, then FIN: nothing may be lost
        c.sendall(ok101(key) + frame(1, b"last") + frame(8, struct.pack("!H", 1000) + b"bye"))
        c.shutdown(socket.SHUT_WR)
        read_frame(f)
    elif mode == "silent":
        time.sleep(2)
    elif mode == "echo":
        c.sendall(ok101(key))
        while True:
            fr = read_frame(f)
            if fr is None:
                return
            op, p, k = fr
            with lock:
                seen["frame_keys"].append(k)
            if op == 8:
                c.sendall(frame(8, p[:2]))
                return
            c.sendall(frame(op, p))
    elif mode == "srvclose":
        c.sendall(ok101(key) + frame(8, struct.pack("!H", 1000) + b"bye"))
        fr = read_frame(f)
        c.settimeout(0.3)
        try:
            eof = f.read(1) == b""  # the client must leave closing TCP to us
        except (socket.timeout, OSError):
            eof = False
        with lock:
            seen["eof_before_close"].append((fr[0] if fr else None, eof))
    elif mode == "srvclose_empty":  # a close without a code: 1005 for the host, an empty echo
        c.sendall(ok101(key) + frame(8, b""))
        fr = read_frame(f)
        with lock:
            seen["empty_echo"] = fr[:2] if fr else None
    elif mode == "neverclose":
        c.sendall(ok101(key) + frame(8, struct.pack("!H", 1001)))
        time.sleep(3)


ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0))
ls.listen(64)
RAW = ls.getsockname()[1]


def serve():
    while True:
        try:
            c, _ = ls.accept()
        except OSError:
            return

        def one(c=c):
            try:
                handle(c)
            except OSError:
                pass
            finally:
                c.close()
        threading.Thread(target=one, daemon=True).start()


threading.Thread(target=serve, daemon=True).start()


def raw(mode, *args):
    return drive("ws://127.0.0.1:%d/%s" % (RAW, mode), *args)


# The runs are independent (each its own connection): they go at once,
# the checks follow in order.
EPARSE_MODES = [("no101", "status line \"HTTP/1.1 200 OK\""), ("badaccept", "does not match the key"),
                ("noupgrade", "Upgrade: websocket"), ("noconnection", "Connection header"),
                ("proto", "\"other\", which was not offered"), ("ext", "extension \"permessage-deflate\"")]
CLOSE_MODES = [("masked", 1002, []), ("badutf8", 1007, []), ("big", 1009, ["--opt", "ws_max_message=1000"]),
               ("rsv", 1002, []), ("bigping", 1002, []), ("cont", 1002, [])]
runs = {m: (m, "--protocols", "chat", "--send", "x") for m, _ in EPARSE_MODES}
runs.update({m: (m,) + tuple(a) for m, _, a in CLOSE_MODES})
runs.update({
    "hugehead": ("hugehead",),
    "earlyclose": ("earlyclose",),
    "reset": ("reset",),
    "silent": ("silent", "--opt", "http_head_timeout_ms=300"),
    "trickle": ("trickle", "--close", "1000"),
    "samepacket": ("samepacket", "--close", "1000"),
    "closeburst": ("closeburst",),
    "echo": ("echo?q=1", "--protocols", "chat, v2", "--header", "Origin: http://o.example", "--header",
             "Authorization: Bearer t", "--send", "a", "--send", "b", "--send", "c", "--send", "d", "--close", "1000"),
    "srvclose": ("srvclose",),
    "neverclose": ("neverclose", "--opt", "ws_close_timeout_ms=300"),
    "srvclose_empty": ("srvclose_empty",),
})
with ThreadPoolExecutor(max_workers=8) as pool:
    futures = {k: pool.submit(raw, *v) for k, v in runs.items()}
    res = {k: f.result()[1] for k, f in futures.items()}

for mode, want in EPARSE_MODES:
    out = res[mode]
    ok(any(l.startswith("error NSV_EPARSE") and want in l for l in out) and not has(out, "open")
       and out[-1:] == ["closed"], "raw %s: ERROR EPARSE naming the rule (%s), then CLOSE" % (mode, want), out)

for mode, code, args in CLOSE_MODES:
    out = res[mode]
    ok(has(out, "open 101") and ("close %d " % code) in [l[:11] for l in out] and out[-1:] == ["closed"],
       "raw %s: opens, then WS_CLOSE %d and CLOSE" % (mode, code), out)
with lock:
    got = {m: (op, cc) for m, op, cc in seen["client_close"]}
eq(got, {"masked": (8, 1002), "badutf8": (8, 1007), "big": (8, 1009), "rsv": (8, 1002), "bigping": (8, 1002),
          "cont": (8, 1002)}, "raw: the client sent close frames with 1002, 1007, 1009")

out = res["hugehead"]
ok(has(out, "error NSV_ETOOBIG") and out[-1:] == ["closed"], "raw hugehead: ERROR ETOOBIG", out)
out = res["earlyclose"]
ok(has(out, "error NSV_ECLOSED") and out[-1:] == ["closed"], "raw earlyclose: ERROR ECLOSED", out)
out = res["reset"]
ok(has(out, "error NSV_ECLOSED") and out[-1:] == ["closed"], "raw reset: ERROR ECLOSED", out)
out = res["silent"]
ok(any(l.startswith("error NSV_ETIMEDOUT") and "http_head_timeout_ms" in l for l in out),
   "raw silent: ERROR ETIMEDOUT naming http_head_timeout_ms", out)
out = res["trickle"]
ok(has(out, "open 101") and "message 1 after the trickle" in out, "raw trickle: a head in 1-byte pieces, then a frame",
   out)
out = res["samepacket"]
ok(out[:4] == ["open 101 proto= tls=0", "message 1 one", "message 1 two", "ping pp"],
   "raw samepacket: frames in the 101's packet all read, in order", out)

out = res["closeburst"]
eq(out, ["open 101 proto= tls=0", "message 1 last", "close 1000 bye", "closed"],
   "raw closeburst: 101, a message, a close and FIN at once: all of it read")

out = res["echo"]
ok(["message 1 a", "message 1 b", "message 1 c", "message 1 d"] == [l for l in out if l.startswith("message")],
   "raw echo: messages echoed", out)
with lock:
    fk = list(seen["frame_keys"])
ok(len(fk) == 5 and all(k is not None for k in fk), "raw echo: every client frame is masked", fk)
ok(len(set(fk)) == len(fk), "raw echo: a fresh masking key per frame", fk)
with lock:
    reqs = list(seen["requests"])
    keys = list(seen["keys"])
line, h = [r for r in reqs if r[0].startswith("GET /echo")][0]
eq(line, "GET /echo?q=1 HTTP/1.1", "raw echo: request line")
eq((h.get("host"), h.get("upgrade"), h.get("connection"), h.get("sec-websocket-version")),
   ("127.0.0.1:%d" % RAW, "websocket", "upgrade", "13"), "raw echo: Host, Upgrade, Connection, version")
eq((h.get("sec-websocket-protocol"), h.get("origin"), h.get("authorization")), ("chat,v2", "http://o.example", "Bearer t"),
   "raw echo: subprotocols offered and the caller's headers")
ok(all(len(base64.b64decode(k)) == 16 and len(k) == 24 for k in keys), "raw: every key is base64 of 16 bytes",
   keys[:3])
eq(len(set(keys)), len(keys), "raw: %d connections, %d distinct keys" % (len(keys), len(set(keys))))

out = res["srvclose"]
ok("close 1000 bye" in out and out[-1:] == ["closed"], "raw srvclose: WS_CLOSE 1000 'bye', then CLOSE", out)
with lock:
    ebc = list(seen["eof_before_close"])
eq(ebc, [(8, False)], "raw srvclose: the client echoed the close and left closing TCP to the server")
out = res["srvclose_empty"]
ok("close 1005 " in out and out[-1:] == ["closed"], "raw srvclose_empty: WS_CLOSE 1005", out)
with lock:
    eq(seen.get("empty_echo"), (8, b""), "raw srvclose_empty: echoed with an empty close frame")
out = res["neverclose"]
ok("close 1001 " in out and out[-1:] == ["closed"], "raw neverclose: the client closes after ws_close_timeout_ms",
   out)

ok(not runs_failed, "every driver run exited 0 without a sanitizer report", runs_failed)
ls.close()
shutil.rmtree(tmp, ignore_errors=True)
done()
