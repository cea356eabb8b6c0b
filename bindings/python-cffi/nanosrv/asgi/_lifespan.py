"""The ASGI lifespan protocol: startup and shutdown of an application.

The app runs as one task with the scope {"type": "lifespan", "state": {}}
for the life of the server. mode "on" requires it; "auto" (the default)
accepts apps that raise on the lifespan scope before answering (they do
not speak it) and serves them without; "off" never runs it.
"""
import asyncio
import logging

from ._scope import ASGI_HTTP

log = logging.getLogger("nanosrv.asgi")


class LifespanFailure(RuntimeError):
    """startup (or shutdown) failed: the app's lifespan.startup.failed
    message, or the exception it raised in mode "on"."""


class Lifespan:
    """One app's lifespan task and the two events it answers."""

    def __init__(self, app, mode="auto"):
        if mode not in ("auto", "on", "off"):
            raise ValueError("lifespan must be 'auto', 'on' or 'off', not %r" % (mode,))
        self.app = app
        self.mode = mode
        self.state = {}
        self.supported = False  # the app answered startup
        self.task = None
        self.queue = None
        self.startup_done = None
        self.shutdown_done = None
        self.failed = None      # message of a failure
        self.error = False      # the app raised

    async def startup(self):
        """Run startup; LifespanFailure with the app's message if it failed."""
        if self.mode == "off":
            return
        loop = asyncio.get_running_loop()
        self.queue = asyncio.Queue()
        self.startup_done = asyncio.Event()
        self.shutdown_done = asyncio.Event()
        self.task = loop.create_task(self._main())
        await self.queue.put({"type": "lifespan.startup"})
        await self.startup_done.wait()
        if self.failed is not None or (self.error and self.mode == "on"):
            raise LifespanFailure(self.failed or "the application raised during lifespan startup")

    async def shutdown(self):
        """Run shutdown; LifespanFailure with the app's message if it failed."""
        if self.task is None or not self.supported or self.task.done():
            return
        await self.queue.put({"type": "lifespan.shutdown"})
        await self.shutdown_done.wait()
        if self.failed is not None:
            raise LifespanFailure(self.failed)
        if self.error:
            raise LifespanFailure("the application raised during lifespan shutdown")

    async def _main(self):
        scope = {"type": "lifespan", "asgi": ASGI_HTTP, "state": self.state}
        try:
            await self.app(scope, self._receive, self._send)
        except BaseException as exc:
            self.error = True
            if isinstance(exc, asyncio.CancelledError):
                raise
            if self.startup_done.is_set() and self.supported:
                log.exception("Exception in 'lifespan' protocol")
            elif self.mode == "auto":
                log.info("ASGI 'lifespan' protocol appears unsupported (%s: %s)", type(exc).__name__, exc)
            else:
                log.exception("Exception in 'lifespan' protocol")
        finally:
            self.startup_done.set()
            self.shutdown_done.set()

    async def _receive(self):
        return await self.queue.get()

    async def _send(self, message):
        t = message.get("type") if isinstance(message, dict) else None
        if t == "lifespan.startup.complete":
            if self.startup_done.is_set():
                raise RuntimeError("lifespan.startup.complete sent twice or after startup ended")
            self.supported = True
            self.startup_done.set()
        elif t == "lifespan.startup.failed":
            if self.startup_done.is_set():
                raise RuntimeError("lifespan.startup.failed sent after startup ended")
            self.supported = True
            self.failed = message.get("message", "") or "lifespan startup failed"
            log.error("lifespan startup failed: %s", self.failed)
            self.startup_done.set()
        elif t == "lifespan.shutdown.complete":
            if not self.startup_done.is_set() or self.shutdown_done.is_set():
                raise RuntimeError("lifespan.shutdown.complete sent out of order")
            self.shutdown_done.set()
        elif t == "lifespan.shutdown.failed":
            if not self.startup_done.is_set() or self.shutdown_done.is_set():
                raise RuntimeError("lifespan.shutdown.failed sent out of order")
            self.failed = message.get("message", "") or "lifespan shutdown failed"
            log.error("lifespan shutdown failed: %s", self.failed)
            self.shutdown_done.set()
        else:
            raise RuntimeError("unexpected ASGI message %r in the lifespan protocol" % (t,))
