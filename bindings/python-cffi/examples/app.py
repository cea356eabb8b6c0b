#!/usr/bin/python3
"""A small nanosrv app: routes with parameters, JSON in and out, a
WebSocket chat room, and one coroutine handler served from asyncio.

    NANOSRV_LIBRARY=build/libnanosrv.so.1 bindings/python-cffi/examples/app.py --port 8080
    curl localhost:8080/users/7
    curl -d '{"name":"ada"}' localhost:8080/users
    curl localhost:8080/slow
"""
import asyncio
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import nanosrv  # noqa: E402

srv = nanosrv.Manager()
users = {"7": {"id": "7", "name": "grace"}}
room = set()


@srv.route("GET", "/users/{id}")
def get_user(conn, msg):
    user = users.get(msg.params["id"])
    return user if user else (404, {"error": "no such user"})


@srv.route("POST", "/users")
def add_user(conn, msg):
    name = nanosrv.json.string(msg.body_bytes, "$.name")
    if not name:
        return 400, {"error": "name is required"}
    uid = str(len(users) + 1)
    users[uid] = {"id": uid, "name": name}
    return 201, {"Location": "/users/" + uid}, users[uid]


@srv.route("GET", "/slow")
async def slow(conn, msg):
    await asyncio.sleep(0.2)  # other requests are served meanwhile
    return "done after 200 ms\n"


def chat(conn, event, data):
    if event == nanosrv.Event.WsOpen:
        room.add(conn)
    elif event == nanosrv.Event.WsMessage and data.is_text:
        for peer in list(room):
            peer.ws_send_text(data.data)
    elif event == nanosrv.Event.Close:
        room.discard(conn)


async def main(port):
    if nanosrv.websocket_available():
        srv.websocket("/chat", chat)
    lst = srv.http_listen("http://127.0.0.1:%d" % port)
    print("listening on %d" % lst.port, flush=True)
    await nanosrv.aio.serve(srv)


if __name__ == "__main__":
    port = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 8080
    try:
        asyncio.run(main(port))
    except KeyboardInterrupt:
        pass
