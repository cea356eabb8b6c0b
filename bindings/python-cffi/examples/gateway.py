#!/usr/bin/python3
"""A small API gateway: each request is answered by calling an upstream
JSON API from the same loop that serves it (srv.fetch: no thread, no
second event loop).

    NANOSRV_LIBRARY=build/libnanosrv.so.1 bindings/python-cffi/examples/gateway.py \\
        --port 0 --upstream http://127.0.0.1:9000

Prints "listening on PORT" once ready; SIGTERM or SIGINT stops it (exit 0).

GET /api/<path>           upstream GET /<path>?<query>, answered with
                          {"status": upstream status, "upstream": its JSON}
GET /many?path=A&path=B   the paths fetched at the same time, one answer:
                          {"A": {...}, "B": {...}}
GET /plain/<path>         the same as /api from a plain (non-async)
                          handler, with the callback form http_request
Upstream failures answer 502 (refused, bad answer, ...) or 504 (timeout)
with {"error": ERROR_NAME, "detail": ...}.
"""
import argparse
import asyncio
import json
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import nanosrv  # noqa: E402

TIMEOUT_S = 5.0


def failure(err):
    status = 504 if isinstance(err, nanosrv.Timeout) else 502
    return status, {"error": getattr(err, "name", type(err).__name__), "detail": str(err)}


def build(upstream):
    srv = nanosrv.Manager()

    async def call(path, query=""):
        url = upstream + "/" + path + ("?" + query if query else "")
        resp = await srv.fetch(url, headers={"Accept": "application/json"}, timeout=TIMEOUT_S)
        return {"status": resp.status, "upstream": await resp.json()}

    @srv.get("/api/<path:rest>")
    async def api(conn, msg):
        try:
            return await call(msg.params["rest"], msg.query)
        except (nanosrv.ClientError, ValueError) as err:
            return failure(err)

    @srv.get("/many")
    async def many(conn, msg):
        paths = msg.query_params.getlist("path")
        results = await asyncio.gather(*[call(p.lstrip("/")) for p in paths], return_exceptions=True)
        out = {}
        for p, r in zip(paths, results):
            out[p] = {"error": failure(r)[1]} if isinstance(r, Exception) else r
        return out

    @srv.get("/plain/<path:rest>")
    def plain(conn, msg):
        def done(resp, err):  # runs later, in the loop's thread: conn is kept by this closure
            if err is not None:
                status, body = failure(err)
            else:
                status, body = 200, {"status": resp.status, "upstream": json.loads(resp.content)}
            conn.http_reply(status, "Content-Type: application/json\r\n", json.dumps(body))
        srv.http_request(upstream + "/" + msg.params["rest"], done, headers={"Accept": "application/json"},
                         timeout=TIMEOUT_S)

    return srv


async def main(args):
    srv = build(args.upstream.rstrip("/"))
    listener = srv.http_listen("http://%s:%d" % (args.host, args.port))
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, srv.stop)
    print("listening on %d" % listener.port, flush=True)
    try:
        await nanosrv.aio.serve(srv)
    finally:
        srv.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    p.add_argument("--upstream", required=True, help="base URL of the JSON API, e.g. http://127.0.0.1:9000")
    asyncio.run(main(p.parse_args()))
