#!/usr/bin/env python3
"""HTTP/2 in a real browser: Debian's headless Chromium loads a page from
echo-server's TLS port (self-signed certificate, ALPN h2) and the page
fetches 40 JSON answers at once and POSTs a body to /echo. Every response
must have come over h2 (DevTools' Network.responseReceived says which
protocol), the answers must be right, and the same page over HTTP/1.1
(echo-server --no-http2) must give the same results. Fails (does not skip)
when Chromium or python3-websockets is missing."""
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, skip_without_http2  # noqa: E402
from lbtest import Echo  # noqa: E402
from devtools import DevTools, WAIT, start_chromium, stop  # noqa: E402

skip_without_http2()

try:
    import websockets
except ImportError:
    websockets = None

PAGE = """<!doctype html><meta charset="utf-8"><title>h2</title>
<script>
window.result = (async () => {
  const many = await Promise.all(Array.from({length: 40}, (_, i) =>
    fetch('/n/' + i + '?k=' + i).then(r => r.json())));
  const echo = await (await fetch('/echo', {method: 'POST', body: 'x'.repeat(100000)})).text();
  return JSON.stringify({paths: many.map(j => j.path), queries: many.map(j => j.query), echo: echo.length});
})();
</script>
"""


async def load(port, browser_path, base):
    """The page's result and the protocol of every response."""
    async with websockets.connect("ws://127.0.0.1:%d%s" % (port, browser_path), max_size=None,
                                  ping_interval=None) as bws:
        browser = DevTools(bws)
        target = (await browser.call("Target.createTarget", url="about:blank"))["targetId"]
        async with websockets.connect("ws://127.0.0.1:%d/devtools/page/%s" % (port, target),
                                      max_size=None, ping_interval=None) as pws:
            page = DevTools(pws)
            await page.call("Page.enable")
            await page.call("Runtime.enable")
            await page.call("Network.enable")
            await page.call("Page.navigate", url=base + "/static/index.html")
            await page.wait_js("window.result !== undefined")
            result = await page.js("window.result")
            protos = [e["params"]["response"].get("protocol") for e in page.events
                      if e["method"] == "Network.responseReceived"]
            await browser.call("Target.closeTarget", targetId=target)
            return result, protos


def main():
    if not websockets:
        ok(False, "python3-websockets installed (tools/install-deps.sh)")
        return
    tmp = tempfile.mkdtemp(prefix="nsv-h2-browser-")
    procs = []
    chromium = None
    try:
        www = os.path.join(tmp, "www")
        os.mkdir(www)
        with open(os.path.join(www, "index.html"), "w") as f:
            f.write(PAGE)
        key, crt = os.path.join(tmp, "k.pem"), os.path.join(tmp, "c.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-keyout", key, "-out", crt, "-days", "2", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                       check=True, capture_output=True, timeout=30)
        chromium, port, path = start_chromium(tmp, "--ignore-certificate-errors")
        if not port:
            ok(False, "Chromium started (tools/install-deps.sh installs it)")
            return
        runs = {}
        for name, extra in (("h2", []), ("http/1.1", ["--no-http2"])):
            echo = Echo("--cert", crt, "--key", key, "--static", www, *extra)
            procs.append(echo)
            result, protos = asyncio.run(asyncio.wait_for(load(port, path, "https://127.0.0.1:%d" % echo.port),
                                                          4 * WAIT))
            runs[name] = result
            want = "h2" if name == "h2" else "http/1.1"
            ok(len(protos) >= 42, "%s: the page and its 41 fetches answered (%d responses)" % (name, len(protos)))
            eq(sorted(set(protos)), [want], "%s: every response came over %s" % (name, want))
            echo.stop()
        got = json.loads(runs["h2"] or "{}")
        eq(got.get("paths"), ["/n/%d" % i for i in range(40)], "h2: 40 concurrent fetches, each its own answer")
        eq(got.get("queries"), ["k=%d" % i for i in range(40)], "h2: with its own query")
        eq(got.get("echo"), 100000, "h2: a 100000-byte POST echoed whole")
        eq(runs["h2"], runs["http/1.1"], "the page computes the same over h2 and HTTP/1.1")
    finally:
        stop(chromium)
        for p in procs:
            p.stop()
        shutil.rmtree(tmp, ignore_errors=True)


main()
done()
