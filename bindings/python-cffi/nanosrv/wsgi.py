"""Serving a WSGI application (PEP 3333) with nanosrv.

    import nanosrv.wsgi
    nanosrv.wsgi.serve(app, host="127.0.0.1", port=8000)

Each request becomes one environ; the application's iterable is collected
and sent as one reply (Content-Length is added by the library). The
application runs in the polling thread, so it should not block for long.
"""
import io
import signal
import sys
from urllib.parse import unquote_to_bytes

from ._manager import Manager
from ._response import header_block

class _Response:
    __slots__ = ("status", "headers", "chunks")

    def __init__(self):
        self.status = None
        self.headers = None
        self.chunks = []


def make_handler(app, server_name="127.0.0.1", server_port=0, url_scheme="http"):
    """A handler(conn, msg) that runs `app`; mount it with http_listen or route."""
    base = {
        "SCRIPT_NAME": "",
        "SERVER_NAME": server_name,
        "SERVER_PORT": str(server_port),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": url_scheme,
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }

    def handler(conn, msg):
        env = dict(base)
        body = msg.body_bytes
        # PEP 3333: native strings hold the raw bytes as latin-1.
        env["REQUEST_METHOD"] = msg.method
        env["PATH_INFO"] = unquote_to_bytes(msg.raw_path).decode("latin-1")
        env["QUERY_STRING"] = msg.query
        env["SERVER_PROTOCOL"] = "HTTP/1.0" if msg.http10 else "HTTP/1.1"
        env["REMOTE_ADDR"], port = msg.peer
        env["REMOTE_PORT"] = str(port)
        env["wsgi.input"] = io.BytesIO(body)
        env["CONTENT_LENGTH"] = str(len(body)) if body else ""
        for name, value in msg.headers:
            key = name.upper().replace("-", "_")
            if key == "CONTENT_TYPE":
                env["CONTENT_TYPE"] = value
            elif key != "CONTENT_LENGTH":
                key = "HTTP_" + key
                env[key] = env[key] + "," + value if key in env else value
        resp = _Response()

        def start_response(status, headers, exc_info=None):
            if exc_info is not None:
                try:
                    # Nothing has gone out yet (the reply is sent whole), so
                    # an error page may still replace the first response.
                    if resp.status is not None and resp.chunks:
                        raise exc_info[1].with_traceback(exc_info[2])
                finally:
                    exc_info = None
            elif resp.status is not None:
                raise AssertionError("start_response called twice without exc_info")
            if not isinstance(status, str) or not isinstance(headers, list):
                raise TypeError("start_response(status: str, headers: list)")
            resp.status = status
            resp.headers = headers
            return resp.chunks.append

        result = app(env, start_response)
        try:
            for chunk in result:
                if chunk:
                    resp.chunks.append(chunk)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        if resp.status is None:
            raise RuntimeError("the WSGI application did not call start_response")
        code = int(resp.status.split(" ", 1)[0])
        # The library sets Content-Length from the body; for HEAD the app's
        # own value is kept, since the body it would describe is not sent.
        hdrs = resp.headers if msg.is_head else [(k, v) for k, v in resp.headers
                                                  if k.lower() != "content-length"]
        conn.http_reply(code, header_block(hdrs), b"".join(resp.chunks))

    return handler


def serve(app, host="127.0.0.1", port=8000, manager=None, ready=None):
    """Serve `app` until SIGTERM/SIGINT (then drain) or manager.stop().
    `ready(listener)` is called once listening."""
    m = manager or Manager()
    listener = m.http_listen("http://%s:%d" % (host, port), None)
    m._listen_fns[listener.id] = make_handler(app, host, listener.port)
    stop = []

    def on_signal(sig, frame):
        stop.append(sig)
        m.wakeup()
    old = {}
    try:
        for s in (signal.SIGTERM, signal.SIGINT):
            old[s] = signal.signal(s, on_signal)
    except ValueError:
        pass  # not the main thread: stop with manager.stop()
    if ready is not None:
        ready(listener)
    try:
        while not stop:
            if m.poll(250) < 0:
                return
        m.drain(5000)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if manager is None:
            m.close()
