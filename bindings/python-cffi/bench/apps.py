"""The same small app for every server in compare.py: GET answers the echo
contract's JSON description of the request."""
import json
import sys


def describe(method, path, query, body_len):
    return json.dumps({"method": method, "path": path, "query": query, "body_len": body_len},
                      separators=(",", ":")).encode()


def _flask():
    from flask import Flask, request
    app = Flask(__name__)

    @app.route("/", defaults={"path": ""}, methods=["GET", "POST", "PUT"])
    @app.route("/<path:path>", methods=["GET", "POST", "PUT"])
    def any_path(path):
        body = request.get_data()
        return describe(request.method, request.path, request.query_string.decode("latin-1"), len(body)), \
            200, {"Content-Type": "application/json"}
    return app


flask_app = _flask()


async def asgi_app(scope, receive, send):
    if scope["type"] != "http":
        return
    body_len = 0
    while True:
        m = await receive()
        body_len += len(m.get("body", b""))
        if not m.get("more_body"):
            break
    out = describe(scope["method"], scope["path"], scope["query_string"].decode("latin-1"), body_len)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": out})


def main():
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "nanosrv-wsgi":
        import nanosrv.wsgi
        nanosrv.wsgi.serve(flask_app, "127.0.0.1", port)
    elif mode == "aiohttp":
        from aiohttp import web

        async def handle(request):
            body = await request.read()
            return web.Response(body=describe(request.method, request.path, request.query_string, len(body)),
                                content_type="application/json")
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


if __name__ == "__main__":
    main()
