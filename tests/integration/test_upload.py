#!/usr/bin/env python3
"""echo-server POST /upload: multipart/form-data parsed while it streams in
(NSV_ROUTE_STREAM_BODY + nsv_multipart_*). Real clients: curl -F and Python
http.client sending a 150 MiB file part in pieces; the server's memory must
not grow with the upload. Malformed bodies get 400, other types 415. Single
loop and two workers. Every loop is bounded in count and time."""
import hashlib
import http.client
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, echo_server  # noqa

BIG = 150 << 20


def rss_kib(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def post(port, body_iter, boundary, length, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.putrequest("POST", "/upload")
    c.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
    c.putheader("Content-Length", str(length))
    c.endheaders()
    for piece in body_iter:
        c.send(piece)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def big_upload(port, label):
    boundary = "----nsvtest" + os.urandom(8).hex()
    block = os.urandom(1 << 20)
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhello\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\n"
            f"Content-Type: application/octet-stream\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    want = hashlib.sha256()
    for _ in range(BIG // len(block)):
        want.update(block)

    def pieces():
        yield head
        for _ in range(BIG // len(block)):
            yield block
        yield tail
    status, data = post(port, pieces(), boundary, len(head) + BIG + len(tail), timeout=120)
    eq(status, 200, f"{label}: 150 MiB upload answered 200")
    parts = json.loads(data) if status == 200 else []
    eq([p["name"] for p in parts], ["note", "file"], f"{label}: two parts in order")
    if len(parts) == 2:
        eq(parts[0]["size"], 5, f"{label}: the field's size")
        eq(parts[0]["filename"], None, f"{label}: the field has no filename (null)")
        eq(parts[1]["filename"], "big.bin", f"{label}: the file's name")
        eq(parts[1]["content_type"], "application/octet-stream", f"{label}: the file's type")
        eq(parts[1]["size"], BIG, f"{label}: the file's size")
        eq(parts[1]["sha256"], want.hexdigest(), f"{label}: the file's sha256, hashed while streaming")


def run(label, threads):
    with echo_server("--max-body", str(200 << 20), threads=threads) as srv:
        port = srv.port
        with tempfile.NamedTemporaryFile() as f:
            f.write(os.urandom(300000))
            f.flush()
            out = subprocess.run(["curl", "-s", "-F", "a=1", "-F", f"f=@{f.name};type=image/png",
                                  f"http://127.0.0.1:{port}/upload"], capture_output=True, timeout=30)
            parts = json.loads(out.stdout or b"[]")
            with open(f.name, "rb") as g:
                digest = hashlib.sha256(g.read()).hexdigest()
        eq(len(parts), 2, f"{label}: curl -F: two parts")
        if len(parts) == 2:
            eq(parts[0]["sha256"], hashlib.sha256(b"1").hexdigest(), f"{label}: curl -F: the field")
            eq((parts[1]["content_type"], parts[1]["size"], parts[1]["sha256"]),
               ("image/png", 300000, digest), f"{label}: curl -F: the file")

        bad = b"--xx\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nhello\r\n--xx"
        status, data = post(port, [bad], "xx", len(bad))
        eq(status, 400, f"{label}: no final boundary: 400")
        bad = b"--xx\r\nbroken header\r\n\r\nhello\r\n--xx--\r\n"
        status, data = post(port, [bad], "xx", len(bad))
        ok(status == 400 and b"multipart: byte 12:" in data, f"{label}: a bad header line: 400 naming the byte", data)
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("POST", "/upload", body=b"x=1", headers={"Content-Type": "application/x-www-form-urlencoded"})
        eq(c.getresponse().status, 415, f"{label}: not multipart: 415")
        c.close()

        before = rss_kib(srv.proc.pid)
        big_upload(port, label)
        after = rss_kib(srv.proc.pid, "VmHWM")
        ok(after - before < 16 * 1024, f"{label}: peak RSS grew {after - before} KiB for a 150 MiB upload "
           f"(under 16 MiB)")
        ok(srv.alive(), f"{label}: server still running")


if __name__ == "__main__":
    run("single loop", None)
    run("two workers", 2)
    done()
