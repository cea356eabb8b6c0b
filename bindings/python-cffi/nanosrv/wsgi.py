"""Serving a WSGI application (PEP 3333) with nanosrv.

    import nanosrv.wsgi
    nanosrv.wsgi.serve(app, host="127.0.0.1", port=8000, threads=4)

or, driving the loop yourself:

    srv = nanosrv.wsgi.Server(app, threads=4)
    m = nanosrv.Manager()
    srv.listen(m, "http://127.0.0.1:8000")
    try:
        srv.run(m)          # until m.stop() or the end of m.drain_start(ms)
    finally:
        srv.close()
        m.close()

Responses stream: the application's iterable (and write()) goes out as it
is produced, paced by the client's reading; a one-item list is one reply.
With threads=N the application runs in N worker threads and blocking
views do not stall the loop; threads=0 runs it in the polling thread.
wsgi.input streams the request body; wsgi.file_wrapper sends real files
with the library's file sender; wsgi.errors writes to logging
("nanosrv.wsgi"). See the README's WSGI section.
"""
import signal
from typing import Any, Callable, Dict, Optional

from ._manager import Manager
from ._wsgi_io import FileWrapper
from ._wsgi_server import Server, WSGIApp

__all__ = ["Server", "serve", "make_handler", "FileWrapper", "WSGIApp"]


def make_handler(app: WSGIApp, server_name: str = "127.0.0.1", server_port: int = 0, url_scheme: str = "http",
                 **options: Any) -> Callable[[Any, Any], None]:
    """A handler(conn, msg) that runs `app`; mount it with http_listen or
    route. server_name/server_port are SERVER_NAME/SERVER_PORT for requests
    without a Host header. options are Server's; threads defaults to 0 (the
    app runs in the polling thread). With threads > 0 poll the Manager with
    handler.server.run(manager), which hands the workers' replies to the
    library."""
    options.setdefault("threads", 0)
    srv = Server(app, **options)
    per_manager = {}

    def handler(conn, msg):
        m = conn._m
        h = per_manager.get(id(m))
        if h is None:
            h = per_manager[id(m)] = srv.handler(m, server_name, server_port, url_scheme)
        return h(conn, msg)
    handler.server = srv
    return handler


def serve(app: WSGIApp, host: str = "127.0.0.1", port: int = 8000, manager: Optional[Manager] = None,
          ready: Optional[Callable[[Any], Any]] = None, *, limits: Optional[Dict[str, int]] = None,
          tls: Optional[Dict[str, Any]] = None, url_scheme: Optional[str] = None, drain_timeout_ms: int = 5000,
          **server_options: Any) -> None:
    """Serve `app` until SIGTERM/SIGINT (then a graceful drain of
    drain_timeout_ms) or manager.stop(). `ready(listener)` is called once
    listening (port 0 picks a free port: listener.port).

    limits: Manager options by name, e.g. {"max_body": 10 << 20,
    "idle_timeout_ms": 30000, "request_timeout_ms": 60000, "max_conns":
    1000, "max_header_bytes": 16384}. tls: Manager.set_tls arguments
    ({"cert": ..., "key": ...}): the listener is then https://.
    url_scheme: wsgi.url_scheme when it is not the listener's (behind a TLS
    proxy). server_options: Server's (threads=4, root_path, access_log,
    limit_max_requests, ...)."""
    if limits is not None and not hasattr(limits, "items"):
        raise TypeError("limits must be a dict of option names to values, not %s" % type(limits).__name__)
    if not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError("port must be an int 0..65535, not %r" % (port,))
    m = manager or Manager()
    srv = None
    old = {}
    try:
        for name, value in (limits or {}).items():
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError("limits[%r] must be an int, not %s" % (name, type(value).__name__))
            m.set_option(name, value)
        if tls:
            m.set_tls(**tls)
        srv = Server(app, url_scheme=url_scheme, **server_options)
        h = "[%s]" % host if ":" in host and not host.startswith("[") else host
        listener = srv.listen(m, "%s://%s:%d" % ("https" if tls else "http", h, port))

        def on_signal(sig, frame):
            m.drain_start(drain_timeout_ms)
        try:
            for s in (signal.SIGTERM, signal.SIGINT):
                old[s] = signal.signal(s, on_signal)
        except ValueError:
            pass  # not the main thread: stop with manager.stop() or drain_start()
        if ready is not None:
            ready(listener)
        srv.run(m)
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        if srv is not None:
            srv.close()  # the workers stop before the server they answer on is freed
        if manager is None:
            m.close()
