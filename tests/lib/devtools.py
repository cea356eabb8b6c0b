"""Headless Chromium for the browser tests: started with its own profile,
driven over the DevTools protocol (python3-websockets), stopped by PID with
its process group. Every wait is bounded by WAIT seconds."""
import asyncio
import json
import os
import shutil
import signal
import subprocess
import time

WAIT = 30  # seconds: the bound on any one wait (a hang fails, it never blocks the suite)


class DevTools:
    """A minimal DevTools protocol client: commands by id, events kept in a list."""

    def __init__(self, ws):
        self.ws = ws
        self.next_id = 0
        self.pending = {}
        self.events = []
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self):
        async for raw in self.ws:
            msg = json.loads(raw)
            if "id" in msg and msg["id"] in self.pending:
                self.pending.pop(msg["id"]).set_result(msg)
            elif "method" in msg:
                self.events.append(msg)

    async def call(self, method, **params):
        self.next_id += 1
        fut = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = fut
        await self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        msg = await asyncio.wait_for(fut, WAIT)
        if "error" in msg:
            raise RuntimeError("%s: %s" % (method, msg["error"]))
        return msg["result"]

    async def js(self, expr):
        """The value of a JavaScript expression in the page."""
        r = await self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError("%s: %s" % (expr, r["exceptionDetails"]))
        return r["result"].get("value")

    async def wait_js(self, expr, timeout=WAIT):
        """Polls expr until it is truthy; its last value (falsy on timeout).
        An exception (the document still loading) counts as not yet."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                v = await self.js(expr)
            except RuntimeError:
                v = None
            if v or time.monotonic() > deadline:
                return v
            await asyncio.sleep(0.1)


def start_chromium(tmp, *flags):
    """Starts Chromium with its own profile in tmp and the extra flags;
    (process, DevTools port, browser path)."""
    exe = os.environ.get("NSV_CHROMIUM") or shutil.which("chromium")
    if not exe:
        return None, None, None
    profile = os.path.join(tmp, "profile")
    with open(os.path.join(tmp, "chromium.log"), "wb") as log:
        try:
            proc = subprocess.Popen([exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                     "--no-default-browser-check", "--disable-extensions", "--disable-dev-shm-usage",
                                     "--no-proxy-server",
                                     "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
                                     "--user-data-dir=" + profile, "--window-size=1000,1500"] + list(flags) + ["about:blank"],
                                    stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as e:
            log.write(("cannot start %s: %s\n" % (exe, e)).encode())
            return None, None, None
    # Chromium writes the port it picked and the browser's path here once it listens.
    active = os.path.join(profile, "DevToolsActivePort")
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with open(active) as f:
                lines = f.read().split("\n")
            if len(lines) >= 2 and lines[0].strip().isdigit() and lines[1].startswith("/"):
                return proc, int(lines[0]), lines[1].strip()
        except FileNotFoundError:
            pass
        time.sleep(0.1)
    return proc, None, None


def stop(proc):
    """Stops Chromium, then any helper process it left in its process group."""
    if not proc:
        return
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the group Chromium leads (start_new_session)
    except ProcessLookupError:
        pass
