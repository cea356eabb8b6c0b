"""Applications for tests/test_ops.py: each answers, as JSON, the client
address the server gave it and the PROXY protocol front's facts."""
import json


def wsgi_app(environ, start_response):
    body = json.dumps({"client": [environ["REMOTE_ADDR"], int(environ["REMOTE_PORT"])],
                       "proxy": environ.get("nanosrv.proxy")}).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


async def asgi_app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            m = await receive()
            if m["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif m["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = json.dumps({"client": list(scope["client"]),
                       "proxy": scope.get("extensions", {}).get("nanosrv.proxy")}).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
