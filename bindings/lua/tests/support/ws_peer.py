#!/usr/bin/python3
"""WebSocket peers for the Lua WebSocket client tests (python3-websockets).

  ws_peer.py server           echo server; prints "listening on PORT"
  ws_peer.py client URL       drives a WebSocket echo at URL, one line per step
  ws_peer.py expect-close URL connects, prints "close CODE REASON" when it ends

The server echoes every message with its type, offers the subprotocol
"chat" (taken when the client offers it), and answers these paths on
connect: /headers sends "x-token=VALUE", /protocol the chosen
subprotocol ("" for none), /last-close the code and reason of the last
connection that ended ("CODE REASON"). The message "close-me" makes it
close with 4000 "bye"; "path?" answers the path.
"""
import asyncio
import sys

import websockets

last_close = ["none"]


def request_headers(ws):
    req = getattr(ws, "request", None)  # websockets >= 13
    return req.headers if req is not None and hasattr(req, "headers") else ws.request_headers


async def handler(ws, path=None):
    path = getattr(ws, "path", None) or path or (ws.request.path if hasattr(ws, "request") else "/")
    if path == "/headers":
        await ws.send("x-token=" + request_headers(ws).get("X-Token", ""))
    elif path == "/protocol":
        await ws.send(ws.subprotocol or "")
    elif path == "/last-close":
        await ws.send(last_close[0])
    try:
        async for msg in ws:
            if msg == "close-me":
                await ws.close(4000, "bye")
                break
            if msg == "path?":
                await ws.send(path)
                continue
            await ws.send(msg)
    except websockets.ConnectionClosed:
        pass
    await ws.wait_closed()
    if path != "/last-close":
        last_close[0] = "%s %s" % (ws.close_code, ws.close_reason)


async def serve():
    async with websockets.serve(handler, "127.0.0.1", 0, subprotocols=["chat"], max_size=None) as server:
        port = server.sockets[0].getsockname()[1]
        print("listening on %d" % port, flush=True)
        await asyncio.Future()


async def client(url):
    async with websockets.connect(url, max_size=None, open_timeout=10) as ws:
        await ws.send("hello")
        print("text", await asyncio.wait_for(ws.recv(), 10) == "hello", flush=True)
        blob = bytes(range(256)) * 4
        await ws.send(blob)
        print("binary", await asyncio.wait_for(ws.recv(), 10) == blob, flush=True)
        big = "x" * 300000
        await ws.send(big)
        print("big", await asyncio.wait_for(ws.recv(), 10) == big, flush=True)
        many = ["m%d" % i for i in range(200)]
        for m in many:
            await ws.send(m)
        got = [await asyncio.wait_for(ws.recv(), 10) for _ in many]
        print("ordered", got == many, flush=True)
        await ws.send("close-me")
        try:
            await asyncio.wait_for(ws.recv(), 10)
        except websockets.ConnectionClosed:
            pass
        await asyncio.wait_for(ws.wait_closed(), 10)
        print("close", ws.close_code, ws.close_reason, flush=True)


async def expect_close(url):
    async with websockets.connect(url, open_timeout=10) as ws:
        try:
            await asyncio.wait_for(ws.recv(), 10)
        except websockets.ConnectionClosed:
            pass
        await asyncio.wait_for(ws.wait_closed(), 10)
        print("close", ws.close_code, ws.close_reason, flush=True)


def main():
    if sys.argv[1] == "server":
        asyncio.run(serve())
    elif sys.argv[1] == "client":
        asyncio.run(client(sys.argv[2]))
    elif sys.argv[1] == "expect-close":
        asyncio.run(expect_close(sys.argv[2]))


if __name__ == "__main__":
    main()
