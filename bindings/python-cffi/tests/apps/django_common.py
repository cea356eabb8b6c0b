"""Django configured in code for django_asgi_app.py, django_wsgi_app.py and
channels_app.py: no project tree, one URLconf (this module), views with
URL params, JSON, a CSRF-exempt form POST, a file upload, a streamed
answer, a 404."""
import hashlib
import json
import os
import threading
import time

import django
from django.conf import settings

if not settings.configured:
    settings.configure(
        DEBUG=False,
        SECRET_KEY="nanosrv-tests-only",
        ALLOWED_HOSTS=["*"],
        ROOT_URLCONF=__name__,
        USE_TZ=True,
        INSTALLED_APPS=["django.contrib.contenttypes", "channels"] if os.environ.get("NSV_DJANGO_CHANNELS") else
        ["django.contrib.contenttypes"],
        MIDDLEWARE=["django.middleware.common.CommonMiddleware", "django.middleware.csrf.CsrfViewMiddleware"],
        DATABASES={},
        # Uploads above this go to a temporary file, as in production settings.
        FILE_UPLOAD_MAX_MEMORY_SIZE=256 * 1024,
        DATA_UPLOAD_MAX_MEMORY_SIZE=8 * 1024 * 1024,
        LOGGING_CONFIG=None,
    )
    django.setup()

from django.http import (FileResponse, HttpResponse, HttpResponseNotAllowed, JsonResponse,  # noqa: E402
                         StreamingHttpResponse)
from django.urls import path  # noqa: E402
from django.views.decorators.csrf import csrf_exempt  # noqa: E402


def plaintext(request):
    return HttpResponse(b"Hello, World!", content_type="text/plain")


def hello(request, name):
    return JsonResponse({"hello": name, "q": request.GET.getlist("q"), "method": request.method})


def article(request, year, slug):
    return JsonResponse({"year": year, "slug": slug})


@csrf_exempt
def echo_json(request):
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    try:
        data = json.loads(request.body)
    except ValueError:
        return JsonResponse({"error": "bad json"}, status=400)
    return JsonResponse({"got": data}, status=201)


@csrf_exempt
def form(request):
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    files = {}
    for key in request.FILES:
        files[key] = []
        for f in request.FILES.getlist(key):
            h = hashlib.sha256()
            for chunk in f.chunks():
                h.update(chunk)
            files[key].append({"name": f.name, "size": f.size, "content_type": f.content_type,
                               "sha256": h.hexdigest()})
    return JsonResponse({"fields": {k: request.POST.getlist(k) for k in request.POST}, "files": files})


def protected(request):
    """Not exempt: a POST without a CSRF token gets Django's 403."""
    return HttpResponse(b"ok")


def stream(request):
    n = int(request.GET.get("n", "5"))

    def gen():
        for i in range(n):
            yield ("row %d\n" % i).encode()
    r = StreamingHttpResponse(gen(), content_type="text/plain")
    r["X-Rows"] = str(n)
    return r


_gates = {}
_gates_lock = threading.Lock()


def _gate(name):
    with _gates_lock:
        return _gates.setdefault(name, threading.Event())


def live(request, name):
    """A streamed answer whose second piece waits for /release/NAME (see flask_app.live)."""
    def gen():
        yield b"first\n"
        yield ("second %s\n" % ("released" if _gate(name).wait(10) else "timeout")).encode()
    return StreamingHttpResponse(gen(), content_type="text/plain")


def release(request, name):
    _gate(name).set()
    return HttpResponse(b"released")


def download(request):
    """This file as a FileResponse (wsgi.file_wrapper under WSGI)."""
    return FileResponse(open(__file__, "rb"), content_type="text/x-python")


def cookies(request):
    r = JsonResponse({"cookies": request.COOKIES})
    r.set_cookie("session", "abc123", httponly=True)
    r.set_cookie("theme", "dark", max_age=3600)
    return r


def meta(request):
    """What Django saw of the request (the server's environ or scope)."""
    return JsonResponse({"path": request.path, "path_info": request.path_info,
                         "script_name": request.META.get("SCRIPT_NAME", ""),
                         "query": request.META.get("QUERY_STRING"), "method": request.method,
                         "scheme": request.scheme, "host": request.get_host().split(":")[0],
                         "remote_addr": request.META.get("REMOTE_ADDR"),
                         "content_type": request.META.get("CONTENT_TYPE"),
                         "x_custom": request.META.get("HTTP_X_CUSTOM"),
                         "secure": request.is_secure()})


def slow(request):
    time.sleep(float(request.GET.get("s", "0.2")))
    return HttpResponse(b"slept")


def boom(request):
    raise RuntimeError("boom")


urlpatterns = [
    path("plaintext", plaintext),
    path("hello/<str:name>/", hello),
    path("articles/<int:year>/<slug:slug>/", article),
    path("json", echo_json),
    path("form", form),
    path("protected", protected),
    path("stream", stream),
    path("cookies", cookies),
    path("download", download),
    path("live/<str:name>", live),
    path("release/<str:name>", release),
    path("meta/", meta),
    path("slow", slow),
    path("boom", boom),
]
