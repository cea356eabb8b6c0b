"""nanosrv.asgi: an ASGI 3 server on libnanosrv and asyncio.

    import nanosrv.asgi

    async def app(scope, receive, send):
        assert scope["type"] == "http"
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"hello"})

    nanosrv.asgi.run(app, host="127.0.0.1", port=8000)

Server(app, ...) is the piece a server command composes: listen() on
one or more listeners of a Manager, startup(), serve(manager), shutdown().
"""
import asyncio
import logging
import signal
from typing import Any, Callable, Dict, Optional

from ._http import ClientDisconnected
from ._lifespan import LifespanFailure
from ._server import ASGIApp, Server

__all__ = ["Server", "run", "serve", "LifespanFailure", "ClientDisconnected", "new_event_loop", "ASGIApp"]

log = logging.getLogger("nanosrv.asgi")


def new_event_loop(loop: str = "auto") -> asyncio.AbstractEventLoop:
    """An event loop: "uvloop" (ImportError if absent), "asyncio", or
    "auto" (uvloop when it is installed)."""
    if loop not in ("auto", "asyncio", "uvloop"):
        raise ValueError("loop must be 'auto', 'asyncio' or 'uvloop', not %r" % (loop,))
    if loop != "asyncio":
        try:
            import uvloop
            return uvloop.new_event_loop()
        except ImportError:
            if loop == "uvloop":
                raise
    return asyncio.new_event_loop()


async def serve(app: ASGIApp, host: str = "127.0.0.1", port: int = 8000, *,
                ready: Optional[Callable[[Any], None]] = None, manager: Any = None,
                tls: Optional[Dict[str, Any]] = None, **server_options: Any) -> None:
    """The coroutine under run(): lifespan startup, listen, serve until
    SIGINT/SIGTERM (then a graceful drain) or manager.stop(), lifespan
    shutdown. With `manager` given, it is used (and not closed)."""
    from .._manager import Manager
    m = manager if manager is not None else Manager()
    srv = Server(app, **server_options)
    try:
        await srv.startup()
        if tls:
            m.set_tls(**tls)
        scheme = "https" if tls else "http"
        h = "[%s]" % host if ":" in host else host
        lst = srv.listen(m, "%s://%s:%d" % (scheme, h, port))
        loop = asyncio.get_running_loop()
        installed = []

        def on_signal(sig):
            log.info("signal %d: draining", sig)
            srv.drain(m)
        for s in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(s, on_signal, s)
                installed.append(s)
            except (NotImplementedError, RuntimeError, ValueError):
                pass  # not the main thread: stop with manager.stop() or srv.drain()
        if ready is not None:
            ready(lst)
        try:
            await srv.serve(m)
        finally:
            for s in installed:
                loop.remove_signal_handler(s)
        await srv.shutdown()
    finally:
        if manager is None:
            m.close()


def run(app: ASGIApp, host: str = "127.0.0.1", port: int = 8000, *, ready: Optional[Callable[[Any], None]] = None,
        loop: str = "auto", tls: Optional[Dict[str, Any]] = None, **server_options: Any) -> None:
    """Serve `app` on host:port until SIGINT/SIGTERM, then drain and run
    lifespan shutdown. ready(listener) is called once listening (its
    `port` is the bound one when port is 0). loop: "auto" (uvloop when
    installed), "uvloop", "asyncio". tls: set_tls() arguments as a dict
    (cert=, key=, ca=, ...) to serve https. Other keywords are Server
    options. Raises LifespanFailure when startup fails."""
    ev = new_event_loop(loop)
    try:
        asyncio.set_event_loop(ev)
        ev.run_until_complete(serve(app, host, port, ready=ready, tls=tls, **server_options))
    finally:
        try:
            _cancel_all(ev)
            ev.run_until_complete(ev.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            ev.close()


def _cancel_all(ev):
    tasks = [t for t in asyncio.all_tasks(ev) if not t.done()]
    for t in tasks:
        t.cancel()
    if tasks:
        ev.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
