"""A Flask app for tests/test_frameworks_wsgi.py and the benchmark: routes
with params, JSON, a form upload, streaming with stream_with_context,
error handlers, cookies.

    gunicorn flask_app:app              python3 -m nanosrv flask_app:app --interface wsgi
"""
import hashlib
import threading
import time

from flask import (Flask, Response, abort, jsonify, make_response, request, send_file,
                   stream_with_context)

from _record import record

app = Flask(__name__)
application = app


class Teapot(Exception):
    pass


@app.route("/plaintext")
def plaintext():
    return Response("Hello, World!", mimetype="text/plain")


@app.route("/json")
def json_hello():
    return jsonify(message="Hello, World!")


@app.route("/users/<int:user_id>")
def user(user_id):
    return jsonify(user_id=user_id)


@app.route("/hello/<name>")
def hello(name):
    return jsonify(hello=name, q=request.args.getlist("q"))


@app.route("/files/<path:sub>")
def files(sub):
    return jsonify(path=sub)


@app.route("/echo-json", methods=["POST"])
def echo_json():
    data = request.get_json(silent=True)
    if data is None:
        abort(400, description="body is not JSON")
    return jsonify(got=data), 201


@app.route("/form", methods=["POST"])
def form():
    files = {}
    for key in request.files:
        files[key] = []
        for f in request.files.getlist(key):
            data = f.read()
            files[key].append({"filename": f.filename, "size": len(data), "content_type": f.content_type,
                               "sha256": hashlib.sha256(data).hexdigest()})
    return jsonify(fields={k: request.form.getlist(k) for k in request.form}, files=files)


@app.route("/size", methods=["POST", "PUT"])
def size():
    """Reads wsgi.input in pieces, as a streaming consumer would."""
    h, n = hashlib.sha256(), 0
    stream = request.stream
    while True:
        chunk = stream.read(65536)
        if not chunk:
            break
        h.update(chunk)
        n += len(chunk)
    return jsonify(size=n, sha256=h.hexdigest())


@app.route("/stream")
def stream():
    n = int(request.args.get("n", "5"))
    who = request.args.get("who", "anon")

    def gen():
        for i in range(n):
            # request is still usable inside the generator thanks to stream_with_context
            yield f"{request.path} {who} {i}\n"
    return Response(stream_with_context(gen()), mimetype="text/plain", headers={"X-Lines": str(n)})


@app.route("/download")
def download():
    """This file through send_file (wsgi.file_wrapper where the server has
    one; ETag and Last-Modified from the file, ranges and conditionals)."""
    return send_file(__file__, mimetype="text/x-python", conditional=True, etag=True)


@app.route("/stream-fail")
def stream_fail():
    """Two pieces, then the generator raises: the answer cannot be completed."""
    def gen():
        yield "one\n"
        yield "two\n"
        raise RuntimeError("generator failed")
    return Response(gen(), mimetype="text/plain")


@app.route("/big")
def big():
    """16 MiB in 64 KiB pieces from a generator (paced by the server)."""
    piece = bytes(range(256)) * 256
    return Response((piece for _ in range(256)), mimetype="application/octet-stream")


@app.route("/slow")
def slow():
    record("slow " + request.args.get("tag", "-"))  # the suites wait for this before they act
    time.sleep(float(request.args.get("s", "0.2")))
    return "slept"


# Three requests must be inside /barrier at once for any to pass: a server
# that runs one view at a time answers 503 (after the bounded wait).
_barrier = threading.Barrier(3, timeout=10)


@app.route("/barrier")
def barrier():
    try:
        _barrier.wait()
    except threading.BrokenBarrierError:
        _barrier.reset()
        return "alone", 503
    return "met"


_gates = {}
_gates_lock = threading.Lock()


def _gate(name):
    with _gates_lock:
        return _gates.setdefault(name, threading.Event())


@app.route("/live/<name>")
def live(name):
    """A streamed answer whose second piece waits for /release/NAME: a
    server that holds the first piece back until the generator ends makes
    it wait the whole bounded 10 s and say "timeout"."""
    def gen():
        yield "first\n"
        yield "second %s\n" % ("released" if _gate(name).wait(10) else "timeout")
    return Response(gen(), mimetype="text/plain")


@app.route("/release/<name>")
def release(name):
    _gate(name).set()
    return "released"


@app.route("/cookies")
def cookies():
    r = make_response(jsonify(cookies=request.cookies.to_dict()))
    r.set_cookie("session", "abc123", httponly=True)
    r.set_cookie("theme", "dark", max_age=3600)
    return r


@app.route("/environ")
def environ():
    e = request.environ
    keys = ("REQUEST_METHOD", "SCRIPT_NAME", "PATH_INFO", "QUERY_STRING", "SERVER_PROTOCOL",
            "CONTENT_TYPE", "CONTENT_LENGTH", "HTTP_HOST", "HTTP_X_CUSTOM", "REMOTE_ADDR", "wsgi.url_scheme")
    return jsonify({k: e.get(k) for k in keys} | {
        "wsgi.version": list(e.get("wsgi.version", ())),
        "multithread_type": type(e.get("wsgi.multithread")).__name__,
        "input_has_read": hasattr(e.get("wsgi.input"), "read"),
        "errors_has_write": hasattr(e.get("wsgi.errors"), "write")})


@app.route("/teapot")
def teapot():
    raise Teapot()


@app.route("/boom")
def boom():
    raise RuntimeError("boom")


@app.route("/redirect")
def redirect_view():
    return "", 302, {"Location": "/plaintext"}


@app.errorhandler(Teapot)
def on_teapot(e):
    return jsonify(error="teapot"), 418


@app.errorhandler(404)
def on_404(e):
    return jsonify(error="not found", path=request.path), 404
