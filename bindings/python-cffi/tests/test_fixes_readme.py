"""The README's snippets of the native API fixes (Threads, Routes and
parameters, Backpressure) run as written, then a real client asks what
they define."""
import http.client
import os
import re
import threading
import unittest

import _tap

README = os.path.join(_tap.PKG, "README.md")


def section(name):
    text = open(README).read()
    start = text.index("### " + name + "\n")
    end = re.compile(r"\n##+ ").search(text, start + 4).start()
    return re.findall(r"```python\n(.*?)```", text[start:end], re.S)


def get(port, path, method="GET", body=None, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, r.getheader("Allow"), data


class Snippets(unittest.TestCase):
    def test_threads(self):
        (code,) = section("Threads")
        # The snippet closes the server right after starting it; ask /slow
        # at the place its comment marks.
        before, after = code.split("# ... requests to /slow are answered from the pool ...\n")
        ns = {}
        exec(compile(before, README, "exec"), ns)
        try:
            for _ in range(5):
                self.assertEqual(get(ns["port"], "/slow")[::2], (200, b"computed off the loop"))
        finally:
            exec(compile(after, README, "exec"), ns)
            ns["pool"].shutdown()
        self.assertFalse(ns["loop"].is_alive())

    def test_routes(self):
        (code,) = section("Routes and parameters")
        ns = {}
        exec(compile(code, README, "exec"), ns)
        srv = ns["srv"]
        port = srv.http_listen("http://127.0.0.1:0").port
        t = threading.Thread(target=srv.run, args=(50,), daemon=True)
        t.start()
        try:
            self.assertEqual(get(port, "/files/a/b%20c.txt")[::2], (200, b'{"name":"a/b c.txt"}'))
            self.assertEqual(get(port, "/items/41")[::2], (200, b'{"id":42}'))
            self.assertEqual(get(port, "/items/abc")[0], 404)
            self.assertEqual(get(port, "/items")[:2], (405, "POST"))
            self.assertEqual(get(port, "/items", "POST", b'{"a":1}', {"Content-Type": "application/json"})[::2],
                             (201, b'{"a":1}'))
        finally:
            srv.close()
        t.join(10)

    def test_backpressure(self):
        (code,) = section("Backpressure")
        ns = {}
        exec(compile(code, README, "exec"), ns)
        srv = ns["srv"]
        port = srv.http_listen("http://127.0.0.1:0").port
        t = threading.Thread(target=srv.run, args=(50,), daemon=True)
        t.start()
        try:
            status, _, body = get(port, "/big")
            self.assertEqual((status, len(body)), (200, 64 * 65536))
        finally:
            srv.close()
        t.join(10)


if __name__ == "__main__":
    _tap.main()
