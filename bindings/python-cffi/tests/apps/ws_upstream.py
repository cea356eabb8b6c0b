"""A WebSocket upstream for the client tests, on python3-websockets:
prints `listening on PORT`, then serves until killed.

/echo          every message back, as received (text or binary)
/hello         sends the request's Origin and X-Token, then echoes
/close?code=C  closes at once with code C and reason "bye"
/burst?n=N     sends N text messages "0".."N-1", then echoes
Subprotocols offered "chat" or "superchat" are chosen (the first offered).
"""
import asyncio
import json
import sys
from urllib.parse import parse_qs, urlsplit

import websockets


async def handler(ws, path=None):
    path = path if path is not None else ws.path
    u = urlsplit(path)
    q = parse_qs(u.query)
    if u.path == "/close":
        await ws.close(int(q["code"][0]), "bye")
        return
    if u.path == "/hello":
        h = ws.request_headers
        await ws.send(json.dumps({"origin": h.get("Origin"), "token": h.get("X-Token"),
                                  "subprotocol": ws.subprotocol}))
    if u.path == "/burst":
        for i in range(int(q["n"][0])):
            await ws.send(str(i))
    try:
        async for msg in ws:
            await ws.send(msg)
    except websockets.ConnectionClosed:
        pass


async def main():
    async with websockets.serve(handler, "127.0.0.1", 0, subprotocols=["chat", "superchat"],
                                max_size=1 << 24) as srv:
        port = next(iter(srv.sockets)).getsockname()[1]
        print("listening on %d" % port, flush=True)
        await asyncio.Future()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
