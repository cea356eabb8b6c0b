"""Small ASGI and WSGI applications for the server command's tests
(tests/test_cli*.py). Each answers with its process id, so a test can tell
which worker served a request."""
import os
import threading
import time

# Which processes imported this module (the supervisor must not).
if os.environ.get("NSV_CLI_IMPORTS"):
    with open(os.environ["NSV_CLI_IMPORTS"], "a") as _f:
        _f.write("%d\n" % os.getpid())


def wsgi_app(environ, start_response):
    """GET /slow?s sleeps s seconds first; every answer is
    "pid PID path PATH_INFO script SCRIPT_NAME scheme URL_SCHEME thread NAME"."""
    if environ["PATH_INFO"] == "/slow":
        time.sleep(float(environ.get("QUERY_STRING") or "1"))
    body = ("pid %d path %s script %s scheme %s thread %s" % (
        os.getpid(), environ["PATH_INFO"], environ.get("SCRIPT_NAME", ""), environ["wsgi.url_scheme"],
        threading.current_thread().name.replace(" ", "_"))).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


async def asgi_app(scope, receive, send):
    """The same over ASGI 3; lifespan events are acknowledged."""
    if scope["type"] == "lifespan":
        while True:
            m = await receive()
            if m["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif m["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    import asyncio
    if scope["path"] == "/slow":
        await asyncio.sleep(float(scope["query_string"].decode() or "1"))
    body = ("pid %d path %s script %s scheme %s" % (os.getpid(), scope["path"], scope.get("root_path", ""),
                                                    scope["scheme"])).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class AsgiObject:
    """An object whose __call__ is a coroutine function: ASGI."""

    async def __call__(self, scope, receive, send):
        await asgi_app(scope, receive, send)


class WsgiObject:
    """An object whose __call__ takes (environ, start_response): WSGI."""

    def __call__(self, environ, start_response):
        return wsgi_app(environ, start_response)


asgi_object = AsgiObject()
wsgi_object = WsgiObject()


def create_wsgi():
    """A factory (--factory, or "cli_apps:create_wsgi()")."""
    return wsgi_app


def neither(a):
    """One parameter: neither ASGI nor WSGI."""
    return a


not_callable = 42


def boom():
    raise RuntimeError("factory exploded")


async def asgi_bad_startup(scope, receive, send):
    """Fails its lifespan startup; serves when lifespan is off."""
    if scope["type"] == "lifespan":
        await receive()
        await send({"type": "lifespan.startup.failed", "message": "database unreachable"})
        return
    await asgi_app(scope, receive, send)
