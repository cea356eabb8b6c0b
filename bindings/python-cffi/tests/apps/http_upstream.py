"""An upstream for the HTTP client tests, on python3's http.server: prints
`listening on PORT`, then serves until killed.

GET /json             {"ok": true, "path": ..., "accept": <Accept header>}
GET /big?n=N          N bytes of a fixed pattern (Content-Length), written in 64 KiB pieces;
                      the count written so far is in /progress
GET /progress         {"written": bytes /big has written so far}
GET /hang             nothing, for 30 s (timeouts, cancellation)
GET /short            a Content-Length of 100, 10 bytes, then the connection closes
POST /echo            the request body (Content-Length bodies)
anything else         404 JSON
"""
import http.server
import json
import sys
import threading
import time
from urllib.parse import parse_qs, urlsplit

PATTERN = bytes(range(256)) * 256  # 64 KiB
written = [0]
lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _send(self, status, body, ctype="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Multi", "one")
        self.send_header("X-Multi", "two")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        u = urlsplit(self.path)
        q = parse_qs(u.query)
        if u.path == "/json":
            self._send(200, json.dumps({"ok": True, "path": self.path,
                                        "accept": self.headers.get("Accept")}).encode())
        elif u.path == "/big":
            n = int(q["n"][0])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            left = n
            while left > 0:
                piece = PATTERN[:min(left, len(PATTERN))]
                self.wfile.write(piece)
                left -= len(piece)
                with lock:
                    written[0] += len(piece)
        elif u.path == "/progress":
            with lock:
                self._send(200, json.dumps({"written": written[0]}).encode())
        elif u.path == "/hang":
            time.sleep(30)
        elif u.path == "/short":
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
            self.wfile.flush()
            self.close_connection = True
        else:
            self._send(404, b'{"error":"not found"}')

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        if self.path == "/echo":
            self._send(200, body, self.headers.get("Content-Type") or "application/octet-stream")
        else:
            self._send(404, b'{"error":"not found"}')


def main():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    print("listening on %d" % srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
