"""A Starlette app as users write them, for tests/test_frameworks_asgi.py
and the benchmark: path params, JSON, forms and uploads, streaming,
background tasks, a WebSocket endpoint, startup/shutdown events,
middleware, exception handlers, HEAD.

    python3 -m uvicorn starlette_app:app      python3 -m nanosrv starlette_app:app
"""
import asyncio
import hashlib
import os

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from _record import record


class Teapot(Exception):
    """Raised by /teapot; the app's exception handler turns it into a 418."""


async def plaintext(request: Request) -> Response:
    return PlainTextResponse("Hello, World!")


async def json_hello(request: Request) -> Response:
    return JSONResponse({"message": "Hello, World!"})


async def user(request: Request) -> Response:
    return JSONResponse({"user_id": request.path_params["user_id"]})


async def item(request: Request) -> Response:
    return JSONResponse({"item_id": request.path_params["item_id"],
                         "name": request.path_params["name"],
                         "q": request.query_params.getlist("q")})


async def scope_view(request: Request) -> Response:
    """The parts of the scope an app sees; ports differ per server, so only hosts go out."""
    s = request.scope
    return JSONResponse({
        "type": s["type"], "asgi": s["asgi"].get("version"), "spec": s["asgi"].get("spec_version"),
        "http_version": s["http_version"], "method": s["method"], "scheme": s["scheme"],
        "path": s["path"], "raw_path": s.get("raw_path", b"").decode("latin-1"),
        "query_string": s["query_string"].decode("latin-1"), "root_path": s["root_path"],
        "headers": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in s["headers"]],
        "client_host": s["client"][0] if s.get("client") else None,
        "server_host": s["server"][0] if s.get("server") else None,
        "header_types": sorted({type(k).__name__ + "/" + type(v).__name__ for k, v in s["headers"]}),
    })


async def echo_json(request: Request) -> Response:
    try:
        data = await request.json()
    except ValueError:
        raise HTTPException(400, "body is not JSON")
    return JSONResponse({"got": data, "type": type(data).__name__}, status_code=201)


async def form(request: Request) -> Response:
    out = {}
    async with request.form() as f:
        for key, value in f.multi_items():
            if hasattr(value, "read"):
                data = await value.read()
                out.setdefault(key, []).append({"filename": value.filename, "size": len(data),
                                                "content_type": value.content_type,
                                                "sha256": hashlib.sha256(data).hexdigest()})
            else:
                out.setdefault(key, []).append(value)
    return JSONResponse(out)


async def body_size(request: Request) -> Response:
    """Reads the body as it streams in (http.request with more_body)."""
    h, n = hashlib.sha256(), 0
    async for chunk in request.stream():
        h.update(chunk)
        n += len(chunk)
    return JSONResponse({"size": n, "sha256": h.hexdigest()})


async def stream(request: Request) -> Response:
    count = int(request.query_params.get("n", "5"))

    async def gen():
        for i in range(count):
            yield f"chunk {i}\n".encode()
            await asyncio.sleep(0)
    return StreamingResponse(gen(), media_type="text/plain")


async def big_stream(request: Request) -> Response:
    """MiB of 64 KiB pieces as fast as the server takes them: paced only by
    the server's backpressure."""
    mib = int(request.query_params.get("mib", "8"))
    piece = bytes(range(256)) * 256

    async def gen():
        for _ in range(mib * 16):
            yield piece
    return StreamingResponse(gen(), media_type="application/octet-stream")


async def stream_fail(request: Request) -> Response:
    """Two pieces, then the generator raises: the answer cannot be completed."""
    async def gen():
        yield b"one\n"
        await asyncio.sleep(0)
        yield b"two\n"
        raise RuntimeError("generator failed")
    return StreamingResponse(gen(), media_type="text/plain")


async def latin1(request: Request) -> Response:
    """A header value with obs-text (RFC 9110 5.5): Starlette encodes it as latin-1."""
    return PlainTextResponse("ok", headers={"x-name": "caf\u00e9"})


async def background(request: Request) -> Response:
    tag = request.query_params.get("tag", "none")
    return JSONResponse({"queued": tag}, background=BackgroundTask(record, "bg " + tag))


async def teapot(request: Request) -> Response:
    raise Teapot()


async def boom(request: Request) -> Response:
    raise RuntimeError("boom")


async def cookies(request: Request) -> Response:
    r = JSONResponse({"cookies": dict(request.cookies)})
    r.set_cookie("session", "abc123", httponly=True, path="/")
    r.set_cookie("theme", "dark", max_age=3600)
    return r


async def status_view(request: Request) -> Response:
    code = int(request.path_params["code"])
    return Response(b"" if code in (204, 304) else f"status {code}".encode(), status_code=code,
                    headers={"x-code": str(code)})


_gates = {}


async def live(request: Request) -> Response:
    """A streamed answer whose second piece waits (at most 10 s) for
    /release/NAME: it only comes out "released" when the server sent the
    first piece before the generator ended."""
    gate = _gates.setdefault(request.path_params["name"], asyncio.Event())

    async def gen():
        yield b"first\n"
        try:
            await asyncio.wait_for(gate.wait(), 10)
            yield b"second released\n"
        except asyncio.TimeoutError:
            yield b"second timeout\n"
    return StreamingResponse(gen(), media_type="text/plain")


async def release(request: Request) -> Response:
    _gates.setdefault(request.path_params["name"], asyncio.Event()).set()
    return PlainTextResponse("released")


async def hold(request: Request) -> Response:
    """Reads the body, then waits for the next ASGI message: the server's
    http.disconnect when the client leaves (recorded), at most 10 s."""
    tag = request.path_params["tag"]
    await request.body()
    record("hold %s start" % tag)
    try:
        msg = await asyncio.wait_for(request.receive(), 10)
        record("hold %s %s" % (tag, msg["type"]))
    except asyncio.TimeoutError:
        record("hold %s timeout" % tag)
    return PlainTextResponse("held")


async def ws_echo(websocket: WebSocket) -> None:
    """Echo; "close CODE REASON" closes with that code; a subprotocol
    the client offers is taken."""
    protos = websocket.scope.get("subprotocols") or []
    await websocket.accept(subprotocol=protos[0] if protos else None)
    try:
        while True:
            msg = await websocket.receive()
            if msg["type"] == "websocket.disconnect":
                record("ws disconnect %s" % msg.get("code"))
                return
            if msg.get("text") is not None:
                text = msg["text"]
                if text.startswith("close "):
                    _, code, reason = (text + " ").split(" ", 2)
                    await websocket.close(code=int(code), reason=reason.strip())
                    return
                await websocket.send_text(text)
            else:
                await websocket.send_bytes(msg["bytes"])
    except WebSocketDisconnect:
        return


async def ws_deny(websocket: WebSocket) -> None:
    await websocket.close(code=1008)


class StampMiddleware(BaseHTTPMiddleware):
    """Adds x-middleware and x-path to every answer."""

    async def dispatch(self, request, call_next):
        response = await call_next(request)
        response.headers["x-middleware"] = "starlette"
        response.headers["x-path"] = request.url.path
        return response


async def on_teapot(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": "teapot"}, status_code=418)


async def on_http(request: Request, exc: HTTPException) -> Response:
    return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=exc.headers)


def startup() -> None:
    record("startup")
    if os.environ.get("NSV_APP_FAIL_STARTUP"):
        raise RuntimeError("startup failed on purpose (NSV_APP_FAIL_STARTUP)")


def shutdown() -> None:
    record("shutdown")


app = Starlette(
    routes=[
        Route("/plaintext", plaintext),
        Route("/json", json_hello),
        Route("/users/{user_id:int}", user),
        Route("/items/{item_id:int}/{name}", item),
        Route("/scope/{rest:path}", scope_view, methods=["GET", "POST", "DELETE"]),
        Route("/echo-json", echo_json, methods=["POST"]),
        Route("/form", form, methods=["POST"]),
        Route("/size", body_size, methods=["POST", "PUT"]),
        Route("/stream", stream),
        Route("/big-stream", big_stream),
        Route("/stream-fail", stream_fail),
        Route("/latin1", latin1),
        Route("/bg", background, methods=["POST"]),
        Route("/teapot", teapot),
        Route("/boom", boom),
        Route("/cookies", cookies),
        Route("/status/{code:int}", status_view),
        Route("/live/{name}", live),
        Route("/release/{name}", release),
        Route("/hold/{tag}", hold),
        WebSocketRoute("/ws", ws_echo),
        WebSocketRoute("/ws-deny", ws_deny),
    ],
    middleware=[Middleware(StampMiddleware)],
    exception_handlers={Teapot: on_teapot, HTTPException: on_http},
    on_startup=[startup],
    on_shutdown=[shutdown],
)
application = app

# The benchmark's Starlette app (bench/METHOD.md): the same /plaintext, /json,
# /users/{user_id:int} and /ws endpoints without StampMiddleware, whose
# BaseHTTPMiddleware costs several times what the server does per request.
bench_app = Starlette(routes=[
    Route("/plaintext", plaintext),
    Route("/json", json_hello),
    Route("/users/{user_id:int}", user),
    WebSocketRoute("/ws", ws_echo),
])
