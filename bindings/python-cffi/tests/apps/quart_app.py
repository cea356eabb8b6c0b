"""A Quart app for tests/test_frameworks_asgi.py: routes with params, JSON,
a streamed answer, a WebSocket echo, startup/shutdown.

    python3 -m uvicorn quart_app:app          python3 -m nanosrv quart_app:app
"""
import asyncio

from quart import Quart, abort, jsonify, request, websocket

from _record import record

app = Quart(__name__)
application = app


@app.before_serving
async def startup() -> None:
    record("startup")


@app.after_serving
async def shutdown() -> None:
    record("shutdown")


@app.route("/")
async def index():
    return "Hello from Quart"


@app.route("/hello/<name>")
async def hello(name: str):
    return jsonify(hello=name, q=request.args.getlist("q"))


@app.route("/num/<int:n>")
async def num(n: int):
    return jsonify(n=n, double=n * 2)


@app.route("/json", methods=["POST"])
async def echo_json():
    data = await request.get_json(force=False, silent=True)
    if data is None:
        abort(400)
    return jsonify(got=data), 201


@app.route("/form", methods=["POST"])
async def form():
    f = await request.form
    files = await request.files
    return jsonify(fields={k: f.getlist(k) for k in f},
                   files={k: [len(x.read()) for x in files.getlist(k)] for k in files})


@app.route("/stream")
async def stream():
    n = int(request.args.get("n", "4"))

    async def gen():
        for i in range(n):
            yield f"part {i}\n".encode()
            await asyncio.sleep(0)
    return gen(), 200, {"Content-Type": "text/plain", "X-Parts": str(n)}


@app.route("/teapot")
async def teapot():
    return "short and stout", 418, {"X-Kind": "teapot"}


@app.errorhandler(404)
async def not_found(e):
    return jsonify(error="not found", path=request.path), 404


@app.websocket("/ws")
async def ws():
    while True:
        msg = await websocket.receive()
        if isinstance(msg, str) and msg.startswith("close "):
            _, code, reason = (msg + " ").split(" ", 2)
            await websocket.close(int(code), reason.strip())
            return
        await websocket.send(msg)
