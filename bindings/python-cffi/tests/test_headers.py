#!/usr/bin/python3
"""Header safety: every Python header path refuses a name that is not a
token and a value with CR, LF, NUL or another control character before
anything is sent. Each path gets the injection "a\\r\\nSet-Cookie: pwned=1";
curl reads the response back and must see no such header."""
import subprocess
import unittest

import _tap
from _tap import ServerThread

import nanosrv
import nanosrv.wsgi

EVIL = "a\r\nSet-Cookie: pwned=1"


def curl_head(port, path):
    r = subprocess.run(["curl", "-sS", "-i", "--max-time", "10", "http://127.0.0.1:%d%s" % (port, path)],
                       capture_output=True, timeout=30)
    return r.stdout.decode("latin-1")


class Injection(unittest.TestCase):
    def run_paths(self, paths):
        m = nanosrv.Manager()
        outcome = {}
        for name, attempt in paths.items():
            def h(conn, msg, name=name, attempt=attempt):
                try:
                    attempt(conn, msg)
                except ValueError as e:
                    outcome[name] = str(e)
                    conn.http_reply(200, {"Content-Type": "text/plain", "X-Refused": "yes"}, "refused")
            m.get("/" + name, h)
        lst = m.http_listen("http://127.0.0.1:0")
        with ServerThread(m):
            for name in paths:
                out = curl_head(lst.port, "/" + name)
                head = out.split("\r\n\r\n", 1)[0].lower()
                self.assertNotIn("pwned", head, name)
                self.assertIn("x-refused: yes", head, name)
                self.assertIn(name, outcome)
        return outcome

    def test_every_path(self):
        def sse(conn, msg):
            conn.sse_start({"X-Evil": EVIL})

        def ws_upgrade(conn, msg):
            conn.ws_upgrade(msg, {"X-Evil": EVIL})

        out = self.run_paths({
            "dict": lambda c, m: c.http_reply(200, {"X-Evil": EVIL}, "x"),
            "pairs": lambda c, m: c.http_reply(200, [("X-Evil", EVIL)], "x"),
            "tuple_list": lambda c, m: c.http_reply(200, [["X-Evil", EVIL]], "x"),
            "bad_name": lambda c, m: c.http_reply(200, {"X-Evil: pwned=1\r\nX": "v"}, "x"),
            "nul": lambda c, m: c.http_reply(200, {"X-Evil": "a\0b"}, "x"),
            "lf_only": lambda c, m: c.http_reply(200, {"X-Evil": "a\nSet-Cookie: pwned=1"}, "x"),
            "bytes_value": lambda c, m: c.http_reply(200, {"X-Evil": EVIL.encode()}, "x"),
            "reply_start": lambda c, m: c.reply_start(200, {"X-Evil": EVIL}),
            "sse": sse,
            "ws_upgrade": ws_upgrade,
            "returned_tuple": lambda c, m: c.http_reply(*nanosrv._response.to_reply((200, {"X-Evil": EVIL}, "x"))),
            "set_cookie": lambda c, m: c.set_cookie("a", EVIL),
            "cookie_name": lambda c, m: c.set_cookie("a\r\nSet-Cookie: pwned", "1"),
        })
        self.assertIn("control byte", out["dict"])
        self.assertIn("not an HTTP token", out["bad_name"])

    def test_htab_allowed(self):
        m = nanosrv.Manager()
        m.get("/", lambda c, msg: c.http_reply(200, {"X-Tab": "a\tb", "X-Num": 7}, "ok"))
        lst = m.http_listen("http://127.0.0.1:0")
        with ServerThread(m):
            head = curl_head(lst.port, "/").lower()
        self.assertIn("x-tab: a\tb", head)
        self.assertIn("x-num: 7", head)

    def test_handler_return_value_and_wsgi(self):
        # A returned (status, headers, body) and WSGI's start_response: the
        # error surfaces as a 500 without the injected header.
        m = nanosrv.Manager()
        m.get("/ret", lambda c, msg: (200, {"X-Evil": EVIL}, "x"))

        def app(environ, start_response):
            start_response("200 OK", [("Content-Type", "text/plain"), ("X-Evil", EVIL)])
            return [b"x"]
        h = nanosrv.wsgi.make_handler(app)
        m.get("/wsgi", h)
        lst = m.http_listen("http://127.0.0.1:0")
        with ServerThread(m):
            for path in ("/ret", "/wsgi"):
                out = curl_head(lst.port, path)
                head = out.split("\r\n\r\n", 1)[0].lower()
                self.assertTrue(head.startswith("http/1.1 500"), (path, head))
                self.assertNotIn("pwned", head, path)


if __name__ == "__main__":
    _tap.main()
