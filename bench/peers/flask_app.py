"""The echo contract as a Flask app, the usual choice for a synchronous
Python service; run under gunicorn (gthread worker, so keep-alive works):
    gunicorn -w 1 -k gthread --threads 4 -b 127.0.0.1:PORT flask_app:app
"""
from flask import Flask, Response, jsonify, request

app = Flask(__name__)


@app.route("/", defaults={"path": ""}, methods=["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD"])
@app.route("/<path:path>", methods=["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD"])
def echo(path):
    body = request.get_data()
    if request.method in ("POST", "PUT") and request.path == "/echo":
        return Response(body, mimetype="application/octet-stream")
    return jsonify(method=request.method, path=request.path,
                   query=request.query_string.decode("latin-1"), body_len=len(body))
