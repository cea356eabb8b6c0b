"""nanosrv.asgi with real frameworks (Debian's Starlette and FastAPI), a
smoke test each: routes with parameters, JSON with validation, a streamed
response, a background task, an upload, a WebSocket endpoint and the
startup/shutdown events. (The framework suites compare with uvicorn.)"""
import asyncio
import http.client
import json
import unittest

import _tap
from test_asgi_http import AppServer, wait_for

import websockets.client


def request(port, method, path, body=None, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    out = r.status, r.getheader("content-type"), r.read()
    c.close()
    return out


def ws_roundtrip(port, path, text):
    async def go():
        async with websockets.client.connect("ws://127.0.0.1:%d%s" % (port, path)) as ws:
            await ws.send(text)
            return await asyncio.wait_for(ws.recv(), 10)
    return asyncio.run(go())


class Starlette(unittest.TestCase):
    def test_starlette_app(self):
        from starlette.applications import Starlette
        from starlette.background import BackgroundTask
        from starlette.responses import JSONResponse, PlainTextResponse, StreamingResponse
        from starlette.routing import Route, WebSocketRoute

        events = []

        async def user(request):
            return JSONResponse({"id": request.path_params["id"], "q": request.query_params.get("q")})

        async def echo(request):
            data = await request.json()
            return JSONResponse({"got": data},
                                background=BackgroundTask(lambda: events.append("background")))

        async def stream(request):
            async def gen():
                for i in range(3):
                    yield b"chunk%d\n" % i
            return StreamingResponse(gen(), media_type="text/plain")

        async def ws(websocket):
            await websocket.accept()
            text = await websocket.receive_text()
            await websocket.send_text(text.upper())
            await websocket.close()

        app = Starlette(routes=[Route("/users/{id:int}", user), Route("/echo", echo, methods=["POST"]),
                                Route("/stream", stream), WebSocketRoute("/ws", ws),
                                Route("/", lambda r: PlainTextResponse("home"))],
                        on_startup=[lambda: events.append("startup")],
                        on_shutdown=[lambda: events.append("shutdown")])
        with AppServer(app) as s:
            self.assertEqual(request(s.port, "GET", "/"), (200, "text/plain; charset=utf-8", b"home"))
            st, _, body = request(s.port, "GET", "/users/42?q=x")
            self.assertEqual((st, json.loads(body)), (200, {"id": 42, "q": "x"}))
            st, _, body = request(s.port, "POST", "/echo", b'{"a": [1, 2]}', {"Content-Type": "application/json"})
            self.assertEqual((st, json.loads(body)), (200, {"got": {"a": [1, 2]}}))
            self.assertEqual(request(s.port, "GET", "/stream")[2], b"chunk0\nchunk1\nchunk2\n")
            self.assertEqual(request(s.port, "GET", "/nope")[0], 404)
            self.assertEqual(request(s.port, "POST", "/")[0], 405)
            self.assertEqual(ws_roundtrip(s.port, "/ws", "hello"), "HELLO")
            wait_for(lambda: "background" in events, "the background task")
        self.assertEqual(events, ["startup", "background", "shutdown"])


class FastAPI(unittest.TestCase):
    def test_fastapi_app(self):
        from fastapi import FastAPI, File, UploadFile, WebSocket
        from pydantic import BaseModel

        app = FastAPI()
        events = []

        class Item(BaseModel):
            name: str
            price: float

        @app.on_event("startup")
        async def startup():
            events.append("startup")

        @app.on_event("shutdown")
        async def shutdown():
            events.append("shutdown")

        @app.get("/items/{item_id}")
        async def read_item(item_id: int, q: str = None):
            return {"item_id": item_id, "q": q}

        @app.post("/items")
        async def create(item: Item):
            return {"name": item.name, "double": item.price * 2}

        @app.post("/upload")
        async def upload(file: UploadFile = File(...)):
            data = await file.read()
            return {"filename": file.filename, "size": len(data)}

        @app.websocket("/ws")
        async def ws(websocket: WebSocket):
            await websocket.accept()
            data = await websocket.receive_text()
            await websocket.send_text("fastapi:" + data)
            await websocket.close()

        with AppServer(app) as s:
            st, _, body = request(s.port, "GET", "/items/5?q=z")
            self.assertEqual((st, json.loads(body)), (200, {"item_id": 5, "q": "z"}))
            self.assertEqual(request(s.port, "GET", "/items/abc")[0], 422)
            st, _, body = request(s.port, "POST", "/items", b'{"name": "x", "price": 1.5}',
                                  {"Content-Type": "application/json"})
            self.assertEqual((st, json.loads(body)), (200, {"name": "x", "double": 3.0}))
            self.assertEqual(request(s.port, "POST", "/items", b'{"name": "x"}',
                                     {"Content-Type": "application/json"})[0], 422)
            payload = b"p" * 300000
            form = (b"--BOUNDARY\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.bin\"\r\n"
                    b"Content-Type: application/octet-stream\r\n\r\n" + payload + b"\r\n--BOUNDARY--\r\n")
            st, _, body = request(s.port, "POST", "/upload", form,
                                  {"Content-Type": "multipart/form-data; boundary=BOUNDARY"})
            self.assertEqual((st, json.loads(body)), (200, {"filename": "a.bin", "size": len(payload)}))
            self.assertEqual(ws_roundtrip(s.port, "/ws", "hi"), "fastapi:hi")
            st, _, body = request(s.port, "GET", "/openapi.json")
            self.assertEqual(st, 200)
            self.assertIn("/items/{item_id}", json.loads(body)["paths"])
        self.assertEqual(events, ["startup", "shutdown"])


if __name__ == "__main__":
    _tap.main()
