#!/usr/bin/env python3
"""The `make run` demo answers its page, API route, stream and echo."""
import json
import os
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, Server, BUILD  # noqa

srv = Server([os.path.join(BUILD, "demo"), "--port", "0"])
base = "http://127.0.0.1:%d" % srv.port
page = urllib.request.urlopen(base + "/", timeout=5).read()
ok(b"<h1>libnanosrv</h1>" in page, "index page")
j = json.loads(urllib.request.urlopen(base + "/api/users/42?fields=name", timeout=5).read())
eq((j["id"], j["query"]), ("42", "fields=name"), "route param and query")
eq(urllib.request.urlopen(base + "/stream", timeout=5).read().count(b"chunk"), 5, "chunked stream")
r = urllib.request.urlopen(urllib.request.Request(base + "/echo", data=b"demo body"), timeout=5)
eq(r.read(), b"demo body", "echo")
try:
    urllib.request.urlopen(base + "/nope", timeout=5)
    ok(False, "404")
except urllib.error.HTTPError as e:
    eq(e.code, 404, "unknown path -> 404")
eq(srv.stop(), 0, "demo exits 0 on SIGTERM")
done()
