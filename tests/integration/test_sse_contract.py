#!/usr/bin/env python3
"""GET /sse?n=N answers alike in the C echo-server and the three bindings'
echo examples: which queries are refused (400) and what stream a valid one
gets (the first n, percent-decoded, 0..10000000). The bindings load the
normal build of the library, so this runs only outside sanitizer builds."""
import http.client
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from nsvtest import ROOT, BUILD, Server, ok, eq, done  # noqa

if os.environ.get("SAN"):
    print("1..0 # SKIP the binding examples cannot load a sanitizer build; test_sse_echo.py covers the C side")
    sys.exit(0)

SERVERS = [
    ("c", [os.path.join(BUILD, "echo-server")]),
    ("lua", ["luajit", "bindings/lua/examples/echo.lua"]),
    ("python", ["/usr/bin/python3", "bindings/python-cffi/examples/echo.py"]),
    ("node", ["node", "bindings/node-ffi/examples/echo.js"]),
]
QUERIES = ["", "n", "n=", "n=abc", "n=-1", "n=1.5", "n=20000000", "n=0", "n=3", "n=%33",
           "n=2&n=3", "a=1&n=2", "n=0003", "n=+3"]


def ask(port, q):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/sse?" + q)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, r.getheader("Content-Type", "").split(";")[0], body


results = {}
for name, argv in SERVERS:
    ok(shutil.which(argv[0]) or os.path.exists(argv[0]), "%s: %s present" % (name, argv[0]))
    env = {"NANOSRV_LIBRARY": os.path.join(ROOT, BUILD, "libnanosrv.so.1")}
    with Server(argv + ["--port", "0"], env=env) as srv:
        results[name] = {q: ask(srv.port, q) for q in QUERIES}

c = results["c"]
eq([c[q][0] for q in QUERIES], [400, 400, 400, 400, 400, 400, 400, 200, 200, 200, 200, 200, 200, 400],
   "c: the statuses of the queries")
eq(c["n=3"][2], b"data: 0\n\ndata: 1\n\ndata: 2\n\n", "c: n=3 streams 0, 1, 2")
eq(c["n=%33"][2], c["n=3"][2], "c: n=%33 is n=3")
eq(c["n=2&n=3"][2], b"data: 0\n\ndata: 1\n\n", "c: the first n counts")
for name in ("lua", "python", "node"):
    for q in QUERIES:
        got, want = results[name][q], c[q]
        if want[0] == 200:
            eq(got, want, "%s: /sse?%s as the C echo-server" % (name, q))
        else:
            eq((got[0], got[1]), (want[0], want[1]), "%s: /sse?%s refused as by the C echo-server" % (name, q))
done()
