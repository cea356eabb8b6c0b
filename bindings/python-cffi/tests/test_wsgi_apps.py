"""Smoke tests of real WSGI frameworks under nanosrv.wsgi: a Flask app
(routes, JSON, a multipart form upload, a streamed response with
stream_with_context, errors) and a Django app configured in code."""
import json
import unittest
import uuid

import _tap

from test_wsgi import Serving, request

WAIT = 10


def multipart(fields, files):
    boundary = uuid.uuid4().hex
    out = []
    for k, v in fields.items():
        out.append(b"--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n%s\r\n"
                   % (boundary.encode(), k.encode(), v.encode()))
    for k, (name, data) in files.items():
        out.append(b"--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
                   b"Content-Type: application/octet-stream\r\n\r\n%s\r\n"
                   % (boundary.encode(), k.encode(), name.encode(), data))
    out.append(b"--%s--\r\n" % boundary.encode())
    return b"".join(out), "multipart/form-data; boundary=" + boundary


def flask_app():
    from flask import Flask, Response, jsonify, request as freq, stream_with_context
    app = Flask("wsgi_smoke")
    app.logger.disabled = True

    @app.route("/users/<int:uid>")
    def user(uid):
        return jsonify(id=uid, q=freq.args.get("q"))

    @app.route("/echo", methods=["POST"])
    def echo():
        return jsonify(got=freq.get_json(), ua=freq.headers.get("X-Test"))

    @app.route("/upload", methods=["POST"])
    def upload():
        f = freq.files["file"]
        data = f.read()
        return jsonify(name=f.filename, size=len(data), title=freq.form["title"])

    @app.route("/stream")
    def stream():
        who = freq.args.get("who", "nobody")

        def gen():
            for i in range(3):
                yield "%s %d\n" % (freq.args.get("who", who), i)  # the request context is still there
        return Response(stream_with_context(gen()), mimetype="text/plain")

    @app.route("/boom")
    def boom():
        raise RuntimeError("flask view failed")

    @app.route("/teapot")
    def teapot():
        return "short and stout", 418, {"X-Kind": "teapot"}
    return app


class FlaskSmoke(unittest.TestCase):
    def test_flask(self):
        app = flask_app()
        for threads in (0, 4):
            with Serving(app, threads=threads) as port:
                st, hd, body = request(port, "GET", "/users/42?q=x")
                self.assertEqual((st, hd["content-type"], json.loads(body)), (200, "application/json",
                                                                              {"id": 42, "q": "x"}))
                st, _, body = request(port, "POST", "/echo", json.dumps({"a": [1, 2]}).encode(),
                                      {"Content-Type": "application/json", "X-Test": "t"})
                self.assertEqual(json.loads(body), {"got": {"a": [1, 2]}, "ua": "t"})
                data = bytes(range(256)) * 800
                mp, ctype = multipart({"title": "report"}, {"file": ("r.bin", data)})
                st, _, body = request(port, "POST", "/upload", mp, {"Content-Type": ctype})
                self.assertEqual((st, json.loads(body)), (200, {"name": "r.bin", "size": len(data),
                                                                "title": "report"}))
                st, hd, body = request(port, "GET", "/stream?who=ann")
                self.assertEqual((st, hd.get("transfer-encoding"), body), (200, "chunked",
                                                                           b"ann 0\nann 1\nann 2\n"))
                self.assertEqual(request(port, "GET", "/boom")[0], 500)
                self.assertEqual(request(port, "GET", "/nope")[0], 404)
                st, hd, body = request(port, "GET", "/teapot")
                self.assertEqual((st, hd["x-kind"], body), (418, "teapot", b"short and stout"))
                self.assertEqual(request(port, "POST", "/users/1")[0], 405)


def django_app():
    from django.conf import settings
    if not settings.configured:
        settings.configure(
            DEBUG=False, SECRET_KEY="wsgi-smoke-test", ALLOWED_HOSTS=["*"], ROOT_URLCONF=__name__,
            MIDDLEWARE=[], INSTALLED_APPS=[], LOGGING_CONFIG=None, USE_TZ=True,
        )
    import django
    django.setup()
    from django.core.wsgi import get_wsgi_application
    return get_wsgi_application()


def _views():
    from django.http import HttpResponse, JsonResponse, StreamingHttpResponse
    from django.urls import path
    from django.views.decorators.csrf import csrf_exempt

    def hello(request, name):
        return JsonResponse({"hello": name, "path": request.path, "script": request.META["SCRIPT_NAME"],
                             "secure": request.is_secure()})

    @csrf_exempt
    def post(request):
        return HttpResponse(b"%d:%s" % (len(request.body), request.POST.get("a", "").encode()),
                            content_type="text/plain")

    def stream(request):
        return StreamingHttpResponse((b"part%d;" % i for i in range(4)), content_type="text/plain")

    def boom(request):
        raise ValueError("django view failed")
    return [path("hello/<str:name>", hello), path("post", post), path("stream", stream), path("boom", boom)]


urlpatterns = []


class DjangoSmoke(unittest.TestCase):
    def test_django(self):
        import logging
        logging.getLogger("django").setLevel(logging.CRITICAL)
        app = django_app()
        urlpatterns[:] = _views()
        with Serving(app, threads=4, root_path="/site") as port:
            st, hd, body = request(port, "GET", "/site/hello/bob")
            self.assertEqual((st, json.loads(body)), (200, {"hello": "bob", "path": "/site/hello/bob",
                                                            "script": "/site", "secure": False}))
            st, _, body = request(port, "POST", "/site/post", b"a=x+y&b=2",
                                  {"Content-Type": "application/x-www-form-urlencoded"})
            self.assertEqual((st, body), (200, b"9:x y"))
            st, hd, body = request(port, "GET", "/site/stream")
            self.assertEqual((st, body), (200, b"part0;part1;part2;part3;"))
            self.assertEqual(request(port, "GET", "/site/boom")[0], 500)
            self.assertEqual(request(port, "GET", "/site/missing")[0], 404)


if __name__ == "__main__":
    _tap.main()
