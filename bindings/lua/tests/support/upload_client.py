#!/usr/bin/env python3
"""Streams a multipart/form-data upload of SIZE MiB of random bytes to
POST /upload with http.client, 1 MiB per send, and prints the answer's
status, the expected sha256 of the file part, then the answer body."""
import hashlib
import http.client
import os
import sys

port, mib = int(sys.argv[1]), int(sys.argv[2])
boundary = "----nsvlua" + os.urandom(8).hex()
block = os.urandom(1 << 20)
head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhello\r\n"
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\n"
        f"Content-Type: application/octet-stream\r\n\r\n").encode()
tail = f"\r\n--{boundary}--\r\n".encode()
c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
c.putrequest("POST", "/upload")
c.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
c.putheader("Content-Length", str(len(head) + mib * len(block) + len(tail)))
c.endheaders()
c.send(head)
want = hashlib.sha256()
for _ in range(mib):
    c.send(block)
    want.update(block)
c.send(tail)
r = c.getresponse()
print(r.status)
print(want.hexdigest())
print(r.read().decode())
