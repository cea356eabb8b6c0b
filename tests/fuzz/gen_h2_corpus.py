#!/usr/bin/env python3
# Usage: python3 tests/fuzz/gen_h2_corpus.py tests/fuzz/corpus/fuzz_h2 (needs python3-h2).
# Generates tests/fuzz/corpus/fuzz_h2: [cfg byte, piece byte] + client bytes after the preface.
import hashlib, os, struct, sys
import h2.connection, h2.config, h2.settings, h2.events
from hpack import Encoder
OUT = sys.argv[1]
PRE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
S = h2.settings.SettingCodes

def conn(settings=None):
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    c.initiate_connection()
    if settings:
        c.update_settings(settings)
    return c

def hd(method, path, extra=()):
    return [(":method", method), (":path", path), (":scheme", "http"), (":authority", "fuzz")] + list(extra)

def frame(t, fl, sid, p=b""):
    return struct.pack(">I", len(p))[1:] + bytes([t, fl]) + struct.pack(">I", sid) + p

SERVER_SETTINGS_ACK = frame(4, 1, 0)

def out(c):
    d = c.data_to_send()
    assert d.startswith(PRE)
    return d[len(PRE):]

inputs = {}
def add(name, cfg, piece, data):
    inputs[name] = bytes([cfg, piece]) + data

c = conn(); c.send_headers(1, hd("GET", "/"), end_stream=True); add("get", 0, 0, out(c) + SERVER_SETTINGS_ACK)
c = conn(); c.send_headers(1, hd("POST", "/echo", [("content-length", "11")])); c.send_data(1, b"hello world", end_stream=True)
add("post", 0, 0, out(c))
c = conn(); c.send_headers(1, hd("POST", "/echo"));
for part in (b"one ", b"two ", b"three"): c.send_data(1, part)
c.end_stream(1); add("post_no_length", 0, 7, out(c))
c = conn()
c.send_headers(1, hd("POST", "/echo", [("content-length", "6")])); c.send_headers(3, hd("POST", "/echo"))
for i in range(5): c.send_headers(5 + 2 * i, hd("GET", "/s/%d" % i), end_stream=True)
c.send_data(3, b"bo"); c.send_data(1, b"body01", end_stream=True); c.send_data(3, b"dy02", end_stream=True)
add("several_streams", 0, 0, out(c))
c = conn({S.INITIAL_WINDOW_SIZE: 100, S.HEADER_TABLE_SIZE: 0, S.MAX_FRAME_SIZE: 16384 * 2, S.ENABLE_PUSH: 0})
c.send_headers(1, hd("POST", "/echo", [("content-length", "3000")])); c.send_data(1, b"x" * 3000, end_stream=True)
add("settings", 0, 0, out(c) + SERVER_SETTINGS_ACK)
c = conn(); c.ping(b"12345678"); c.send_headers(1, hd("GET", "/p"), end_stream=True); c.ping(b"abcdefgh")
add("ping", 0, 0, out(c))
c = conn(); c.send_headers(1, hd("POST", "/echo", [("content-length", "10")])); c.send_data(1, b"abc"); c.reset_stream(1, 8)
c.send_headers(3, hd("GET", "/after"), end_stream=True); add("rst", 0, 0, out(c))
c = conn(); c.increment_flow_control_window(1 << 20); c.send_headers(1, hd("GET", "/w"), end_stream=True)
c.increment_flow_control_window(65536, stream_id=1); add("window_update", 0, 0, out(c))
c = conn(); c.send_headers(1, hd("GET", "/pri1"), end_stream=True, priority_weight=200, priority_depends_on=0, priority_exclusive=True)
c.prioritize(3, weight=10, depends_on=1); c.send_headers(3, hd("GET", "/pri3"), end_stream=True)
c.prioritize(5, weight=1, depends_on=3, exclusive=False)
add("priority", 0, 0, out(c))
c = conn(); pre = out(c)
blk = Encoder().encode(hd("GET", "/cont", [("x-a", "1" * 40), ("x-b", "2" * 40), ("x-c", "3" * 40)]))
q = len(blk) // 4
add("continuation", 0, 0, pre + frame(1, 1, 1, blk[:q]) + frame(9, 0, 1, blk[q:2*q]) + frame(9, 0, 1, blk[2*q:3*q]) + frame(9, 4, 1, blk[3*q:]))
add("continuation_flood", 0, 0, pre + frame(1, 1, 1, blk[:q]) + frame(9, 0, 1, b"") * 40 + frame(9, 4, 1, blk[q:]))
c = conn(); c.send_headers(1, hd("POST", "/echo")); c.send_data(1, b"with trailers"); c.send_headers(1, [("x-sum", "1")], end_stream=True)
add("trailers", 0, 0, out(c))
c = conn()
for i in range(4): c.send_headers(1 + 2 * i, hd("GET", "/t", [("user-agent", "fuzz-agent/1.0"), ("x-long", "L" * 200), ("cookie", "a=%d" % i), ("cookie", "b=2")]), end_stream=True)
add("hpack_table", 0, 0, out(c))
c = conn(); c.send_headers(1, hd("GET", "/bye"), end_stream=True); c.close_connection(); add("goaway", 0, 0, out(c))
c = conn(); c.send_headers(1, hd("GET", "/odd"), end_stream=True); c.send_headers(3, hd("POST", "/echo1", [("content-length", "5")])); c.send_data(3, b"chunk", end_stream=True)
add("streamed", 2, 0, out(c))
c = conn()
for i in range(8): c.send_headers(1 + 2 * i, hd("POST", "/echo", [("content-length", "4")]))
for i in range(8): c.send_data(1 + 2 * i, b"abcd", end_stream=True)
add("small_limits_streams", 1, 0, out(c))
c = conn(); pre = out(c); enc = Encoder(); rr = b""
for i in range(20):
    rr += frame(1, 4, 1 + 2 * i, enc.encode(hd("POST", "/echo", [("content-length", "9")]))) + frame(3, 0, 1 + 2 * i, struct.pack(">I", 8))
add("rapid_reset", 1, 0, pre + rr)
c = conn(); pre = out(c)
bomb = b"\x82\x86\x84\x41\x01x" + b"\x40\x06x-bomb" + b"\x7f\x49" + b"b" * 200 + b"\xbe" * 400
add("hpack_bomb", 0, 0, pre + frame(1, 5, 1, bomb))
c = conn(); pre = out(c); blk = Encoder().encode(hd("POST", "/echo", [("content-length", "4")]))
padded_h = bytes([5]) + blk + b"\0" * 5
padded_d = bytes([3]) + b"data" + b"\0" * 3
add("padded", 0, 0, pre + frame(1, 4 | 8, 1, padded_h) + frame(0, 1 | 8, 1, padded_d))
c = conn(); c.send_headers(1, hd("GET", "/slow", [("accept", "*/*")]), end_stream=True); add("one_byte_pieces", 0, 1, out(c))
c = conn(); c.send_headers(1, hd("POST", "/echo", [("content-length", "20000")]))
for i in range(2): c.send_data(1, b"z" * 10000)
c.end_stream(1); add("no_read_big_post", 16 | 8, 0, out(c))
c = conn({S.INITIAL_WINDOW_SIZE: 0}); c.send_headers(1, hd("POST", "/echo", [("content-length", "5000")])); c.send_data(1, b"w" * 5000, end_stream=True)
add("zero_window", 0, 0, out(c) + SERVER_SETTINGS_ACK)
c = conn(); pre = out(c)
add("bad_frames", 0, 0, pre + frame(0, 0, 0, b"x") + frame(0xfa, 0, 1, b"unknown") + frame(4, 0, 1))
c = conn(); c.send_headers(1, hd("POST", "/echo", [("content-length", "70")])); c.send_data(1, b"q" * 70, end_stream=True)
c.send_headers(3, hd("GET", "/too/many", [("h%d" % i, "v") for i in range(8)]), end_stream=True)
add("over_limits", 1 | 4, 0, out(c))
c = conn(); c.send_headers(1, hd("GET", "/auto404"), end_stream=True); c.send_headers(3, hd("POST", "/echo", [("content-length", "2")])); c.send_data(3, b"ok", end_stream=True)
add("auto_404", 32, 0, out(c))

for name, data in inputs.items():
    h = hashlib.sha1(data).hexdigest()
    with open(os.path.join(OUT, h), "wb") as f:
        f.write(data)
    print(h, name, len(data))
