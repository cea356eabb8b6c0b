#!/usr/bin/env python3
"""build/http-proxy --http2: h2c clients (curl --http2-prior-knowledge,
curl's Upgrade: h2c, h2load) through the proxy to an HTTP/1.1 echo-server
upstream. Answers match the ones the proxy gives over HTTP/1.1 and bodies
stream both ways whole."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, Server, BUILD, skip_without_http2  # noqa: E402
from proxy_upstream import proxy  # noqa: E402

skip_without_http2()

tmp = tempfile.mkdtemp(prefix="nsv-h2-proxy-")
up = Server([os.path.join(BUILD, "echo-server"), "--port", "0", "--no-http2"])
px = proxy("http://127.0.0.1:%d" % up.port, "--http2")
base = "http://127.0.0.1:%d" % px.port


def curl(*args):
    r = subprocess.run(["curl", "-s", "-o", os.path.join(tmp, "body"), "-w", "%{http_version} %{http_code}",
                        "--max-time", "20"] + list(args), capture_output=True, timeout=30)
    with open(os.path.join(tmp, "body"), "rb") as f:
        return r.stdout.decode().split(" "), f.read()


try:
    (v1, s1), b1 = curl("--http1.1", base + "/hello?a=1")
    (v2, s2), b2 = curl("--http2-prior-knowledge", base + "/hello?a=1")
    eq((v2, s2), ("2", "200"), "GET over h2c prior knowledge: HTTP/2 200")
    j1, j2 = json.loads(b1), json.loads(b2)
    eq((j2["method"], j2["path"], j2["query"]), (j1["method"], j1["path"], j1["query"]),
       "the upstream got the same request as over HTTP/1.1")
    (vu, su), bu = curl("--http2", base + "/up")
    eq((vu, su), ("2", "200"), "curl --http2 on http:// upgrades (Upgrade: h2c): HTTP/2 200")
    data = os.urandom(700000)
    with open(os.path.join(tmp, "in"), "wb") as f:
        f.write(data)
    (vp, sp), bp = curl("--http2-prior-knowledge", "--data-binary", "@" + os.path.join(tmp, "in"), base + "/echo")
    eq((vp, sp), ("2", "200"), "POST 700000 bytes over h2c: 200")
    ok(bp == data, "the upstream's echo comes back whole (%d bytes)" % len(bp))
    r = subprocess.run(["h2load", "-n", "3000", "-c", "4", "-m", "16", base + "/"], capture_output=True, timeout=60)
    out = r.stdout.decode(errors="replace")
    ok("3000 succeeded" in out and "3000 2xx" in out, "h2load: 3000 requests on 4 connections x 16 streams, all 2xx",
       out[-400:])
finally:
    px.stop()
    up.stop()
    shutil.rmtree(tmp, ignore_errors=True)
done()
