"""The echo contract as a bare ASGI app, the usual choice for an async Python
service; run under uvicorn:  uvicorn --port PORT asgi_app:app
/ws is a WebSocket echo (uvicorn needs python3-websockets for it)."""
import json


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] == "websocket":
        await websocket_echo(receive, send)
        return
    body = b""
    more = True
    while more:
        msg = await receive()
        body += msg.get("body", b"")
        more = msg.get("more_body", False)
    method, path = scope["method"], scope["path"]
    if method in ("POST", "PUT") and path == "/echo":
        ctype, out = b"application/octet-stream", body
    else:
        ctype = b"application/json"
        out = json.dumps({"method": method, "path": path,
                          "query": scope["query_string"].decode("latin-1"),
                          "body_len": len(body)}, separators=(",", ":")).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", ctype), (b"content-length", str(len(out)).encode())]})
    await send({"type": "http.response.body", "body": out})


async def websocket_echo(receive, send):
    while True:
        msg = await receive()
        if msg["type"] == "websocket.connect":
            await send({"type": "websocket.accept"})
        elif msg["type"] == "websocket.receive":
            if msg.get("bytes") is not None:
                await send({"type": "websocket.send", "bytes": msg["bytes"]})
            else:
                await send({"type": "websocket.send", "text": msg["text"]})
        else:
            return
