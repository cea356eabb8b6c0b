#!/usr/bin/env python3
"""The `make run` demo page in a real browser: Debian's headless Chromium,
driven over the DevTools protocol (python3-websockets). Loads the page,
checks its style sheet, script and icon arrived, uploads a file of a few MiB
through the form (progress to 100%, size and sha256 in the JSON shown),
watches the SSE clock tick twice and sends a WebSocket message to see its
echo. A failed check saves a screenshot in the test's temp dir (kept, path
printed). Chromium and the demo are stopped by PID; every wait is bounded.
Fails (does not skip) when Chromium or python3-websockets is missing."""
import asyncio
import base64
import hashlib
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from nsvtest import ok, eq, done, Server, BUILD  # noqa
from devtools import DevTools, start_chromium, stop  # noqa: E402

try:
    import websockets
except ImportError:
    websockets = None

WAIT = 30  # seconds: the bound on any one wait (a hang fails, it never blocks the suite)


async def drive(port, browser_path, base, tmp, upload_path, upload_sha):
    failed = []

    def check(cond, name, diag=None):
        if not ok(cond, name, diag):
            failed.append(name)
        return cond

    async with websockets.connect("ws://127.0.0.1:%d%s" % (port, browser_path), max_size=None, ping_interval=None) as bws:
        browser = DevTools(bws)
        target = (await browser.call("Target.createTarget", url="about:blank"))["targetId"]
        async with websockets.connect("ws://127.0.0.1:%d/devtools/page/%s" % (port, target),
                                      max_size=None, ping_interval=None) as pws:
            page = DevTools(pws)
            try:
                await page.call("Page.enable")
                await page.call("Runtime.enable")
                await page.call("Network.enable")
                await page.call("Page.navigate", url=base + "/")

                # The page, its script, style sheet and icon.
                check(await page.wait_js("document.documentElement.dataset.js === 'ready'"),
                      "app.js ran (the page's script loaded)")
                eq(await page.js("document.querySelector('h1').textContent"), "libnanosrv", "index.html shown")
                check(await page.js("getComputedStyle(document.documentElement)"
                                    ".getPropertyValue('--demo-style').trim() === 'loaded'"),
                      "style.css applied (its custom property is set)")
                eq(await page.js("getComputedStyle(document.querySelector('h1')).color"), "rgb(47, 111, 223)",
                   "style.css applied (heading colour)")
                check(await page.wait_js("document.getElementById('logo').complete && "
                                         "document.getElementById('logo').naturalWidth"),
                      "icon.svg loaded and decoded")
                types = {e["params"]["response"]["url"].rsplit("/", 1)[-1]:
                         (e["params"]["response"]["status"], e["params"]["response"]["mimeType"])
                         for e in page.events if e["method"] == "Network.responseReceived"}
                for name, mime in (("style.css", "text/css"), ("app.js", "text/javascript"),
                                   ("icon.svg", "image/svg+xml")):
                    eq(types.get(name), (200, mime), "%s served as %s" % (name, mime))

                # The SSE clock: the page shows at least two more ticks.
                first = await page.wait_js("document.getElementById('clock').textContent.endsWith('UTC') && "
                                           "document.getElementById('clock').textContent")
                check(first, "clock shows the server time", first)
                seen = [first]
                for _ in range(2):
                    v = await page.wait_js("(t => t !== %s && t.endsWith('UTC') && t)"
                                           "(document.getElementById('clock').textContent)" % json.dumps(seen[-1]),
                                           timeout=10)
                    seen.append(v)
                check(all(seen) and len(set(seen)) == 3, "clock ticked twice", seen)

                # Upload: a file set on the input, the form submitted, progress to 100%.
                node = await page.call("Runtime.evaluate", expression="document.getElementById('file')")
                await page.call("DOM.enable")
                await page.call("DOM.setFileInputFiles", files=[upload_path],
                                objectId=node["result"]["objectId"])
                eq(await page.js("document.getElementById('file').files[0].size"),
                   os.path.getsize(upload_path), "the file is set on the input")
                await page.js("document.querySelector('#upload button').click()")
                result = await page.wait_js("document.getElementById('result').textContent")
                eq(await page.js("document.getElementById('progress').value"), 100, "progress bar at 100%")
                eq(await page.js("document.getElementById('percent').textContent"), "100%", "100% shown")
                try:
                    parts = json.loads(result)
                except (TypeError, ValueError):
                    parts = None
                check(isinstance(parts, list) and len(parts) == 1, "result JSON shown (one part)", result)
                part = parts[0] if isinstance(parts, list) and parts else {}
                eq((part.get("name"), part.get("filename")), ("file", os.path.basename(upload_path)),
                   "result: field name and file name")
                eq(part.get("size"), os.path.getsize(upload_path), "result: size")
                eq(part.get("sha256"), upload_sha, "result: sha256")

                # WebSocket echo.
                check(await page.wait_js("document.getElementById('ws-state').textContent === 'open'"),
                      "WebSocket open")
                msg = "hello from chromium %d" % os.getpid()
                await page.js("document.getElementById('ws-text').value = %s;"
                              "document.querySelector('#ws-form button').click()" % json.dumps(msg))
                check(await page.wait_js("document.getElementById('ws-log').textContent.includes(%s)"
                                         % json.dumps("echo: " + msg)), "WebSocket message echoed")
            except Exception as e:  # a broken protocol step fails the test, with the screenshot
                check(False, "DevTools protocol steps", repr(e))
            shot = os.path.join(tmp, "failed.png" if failed else "page.png")
            if failed or os.environ.get("NSV_KEEP_TMP"):
                try:
                    data = (await page.call("Page.captureScreenshot", format="png"))["data"]
                    with open(shot, "wb") as f:
                        f.write(base64.b64decode(data))
                    print("# screenshot: %s" % shot)
                except Exception as e:
                    print("# no screenshot: %r" % e)
            page.reader.cancel()
        browser.reader.cancel()
    return failed


def main():
    if not ok(websockets is not None, "python3-websockets importable (apt-get install python3-websockets)"):
        done()
    tmp = tempfile.mkdtemp(prefix="nsv-demo-browser-")
    upload_path = os.path.join(tmp, "upload.bin")
    data = os.urandom(3 << 20)
    with open(upload_path, "wb") as f:
        f.write(data)
    srv = Server([os.path.join(BUILD, "demo"), "--port", "0"])
    chrome, port, path = start_chromium(tmp)
    failed = ["chromium"]
    try:
        if ok(chrome is not None, "chromium found (apt-get install chromium)") and \
                ok(port is not None, "chromium's DevTools port (see %s/chromium.log)" % tmp):
            failed = asyncio.run(asyncio.wait_for(
                drive(port, path, "http://127.0.0.1:%d" % srv.port, tmp, upload_path,
                      hashlib.sha256(data).hexdigest()), 4 * WAIT))
    finally:
        stop(chrome)
        ok(srv.alive(), "demo still running")
        eq(srv.stop(), 0, "demo exits 0 on SIGTERM")
    if failed or os.environ.get("NSV_KEEP_TMP"):
        print("# kept %s" % tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    done()


main()
