"""A FastAPI app as users write them, for tests/test_frameworks_asgi.py and
the benchmark (/plaintext, /json, /users/{id}, /ws): validated path and
query params (422 on bad input), pydantic bodies, UploadFile,
StreamingResponse, BackgroundTasks, dependencies, a WebSocket endpoint,
startup/shutdown events.

    python3 -m uvicorn fastapi_app:app        python3 -m nanosrv fastapi_app:app
"""
import asyncio
import hashlib
from typing import List, Optional

from fastapi import (BackgroundTasks, Depends, FastAPI, File, Form, Header, HTTPException, Query,
                     UploadFile, WebSocket, WebSocketDisconnect)
from fastapi.responses import PlainTextResponse, StreamingResponse
from pydantic import BaseModel, Field

from _record import record

app = FastAPI(title="nanosrv test app")
application = app


class Item(BaseModel):
    name: str = Field(..., min_length=1, max_length=50)
    price: float = Field(..., gt=0)
    tags: List[str] = []


@app.on_event("startup")
async def startup() -> None:
    record("startup")


@app.on_event("shutdown")
async def shutdown() -> None:
    record("shutdown")


@app.get("/plaintext", response_class=PlainTextResponse)
async def plaintext() -> str:
    return "Hello, World!"


@app.get("/json")
async def json_hello() -> dict:
    return {"message": "Hello, World!"}


@app.get("/users/{user_id}")
async def user(user_id: int) -> dict:
    return {"user_id": user_id}


@app.get("/items/{item_id}")
async def read_item(item_id: int, q: Optional[str] = None, limit: int = Query(10, ge=1, le=100)) -> dict:
    return {"item_id": item_id, "q": q, "limit": limit}


@app.post("/items", status_code=201)
async def create_item(item: Item) -> dict:
    return {"item": item.dict(), "total": round(item.price * 1.2, 2)}


@app.post("/upload")
async def upload(title: str = Form(...), files: List[UploadFile] = File(...)) -> dict:
    out = []
    for f in files:
        data = await f.read()
        out.append({"filename": f.filename, "content_type": f.content_type, "size": len(data),
                    "sha256": hashlib.sha256(data).hexdigest()})
    return {"title": title, "files": out}


@app.get("/stream")
async def stream(n: int = Query(5, ge=0, le=10000)) -> StreamingResponse:
    async def gen():
        for i in range(n):
            yield f"line {i}\n"
            await asyncio.sleep(0)
    return StreamingResponse(gen(), media_type="text/plain", headers={"x-lines": str(n)})


@app.post("/bg", status_code=202)
async def background(tag: str, tasks: BackgroundTasks) -> dict:
    tasks.add_task(record, "bg " + tag)
    return {"queued": tag}


def token(x_token: str = Header(...)) -> str:
    if x_token != "secret":
        raise HTTPException(status_code=401, detail="bad token", headers={"WWW-Authenticate": "Token"})
    return x_token


async def pager(offset: int = 0, size: int = Query(20, le=50)) -> dict:
    yield {"offset": offset, "size": size}


@app.get("/private")
async def private(tok: str = Depends(token), page: dict = Depends(pager)) -> dict:
    return {"token": tok, "page": page}


@app.get("/boom")
async def boom() -> dict:
    raise RuntimeError("boom")


@app.websocket("/ws")
async def ws_echo(websocket: WebSocket) -> None:
    """Echo; "close CODE REASON" closes with that code."""
    await websocket.accept()
    try:
        while True:
            msg = await websocket.receive()
            if msg["type"] == "websocket.disconnect":
                return
            if msg.get("text") is not None:
                if msg["text"].startswith("close "):
                    _, code, reason = (msg["text"] + " ").split(" ", 2)
                    await websocket.close(code=int(code), reason=reason.strip())
                    return
                await websocket.send_text(msg["text"])
            else:
                await websocket.send_bytes(msg["bytes"])
    except WebSocketDisconnect:
        return


@app.websocket("/ws/{room}")
async def ws_room(websocket: WebSocket, room: str, name: str = "anon") -> None:
    await websocket.accept()
    await websocket.send_json({"room": room, "name": name})
    data = await websocket.receive_json()
    await websocket.send_json({"echo": data, "room": room})
    await websocket.close(code=1000)
