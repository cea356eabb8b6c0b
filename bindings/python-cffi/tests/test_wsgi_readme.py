"""The README's WSGI snippets run as written."""
import contextlib
import io
import os
import re
import threading
import unittest

import _tap

from test_wsgi import request

README = os.path.join(_tap.PKG, "README.md")


def snippets():
    text = open(README).read()
    start = text.index("### WSGI\n")
    end = text.find("\n### ", start + 1)
    part = text[start:end if end > 0 else len(text)]
    return re.findall(r"```python\n(.*?)```", part, re.S)


class Readme(unittest.TestCase):
    def test_snippets(self):
        blocks = snippets()
        self.assertEqual(len(blocks), 3)
        ns = {"__name__": "readme"}
        exec(compile(blocks[0], README, "exec"), ns)   # the app; serve() only under __main__
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(blocks[1], README, "exec"), ns)   # Server, listen, close
        self.assertEqual(out.getvalue(), "listening on %d\n" % ns["lst"].port)
        self.assertGreater(ns["lst"].port, 0)
        exec(compile(blocks[2], README, "exec"), ns)   # make_handler on a route
        m = ns["m"]
        port = m.http_listen("http://127.0.0.1:0").port
        with _tap.ServerThread(m):
            self.assertEqual(request(port, "GET", "/legacy/x")[::2], (200, b"Hello, World!"))

    def test_serve_snippet(self):
        # The first snippet's serve() call, on a port of our choosing.
        import nanosrv
        ns = {"__name__": "readme"}
        exec(compile(snippets()[0], README, "exec"), ns)
        m = nanosrv.Manager()
        ready = threading.Event()
        port = []
        t = threading.Thread(target=ns["nanosrv"].wsgi.serve, args=(ns["app"], "127.0.0.1", 0, m),
                             kwargs={"threads": 4, "ready": lambda lst: (port.append(lst.port), ready.set())},
                             daemon=True)
        t.start()
        try:
            self.assertTrue(ready.wait(10))
            self.assertEqual(request(port[0], "GET", "/")[::2], (200, b"Hello, World!"))
        finally:
            m.stop()
            t.join(10)
            m.close()


if __name__ == "__main__":
    _tap.main()
