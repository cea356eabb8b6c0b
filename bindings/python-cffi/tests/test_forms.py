"""Query strings and urlencoded forms (MultiDict), cookies (msg.cookies)
and Set-Cookie (conn.set_cookie, nanosrv.set_cookie_header), through the
library's parsers, with curl and http.client as clients."""
import datetime
import http.client
import json
import logging
import subprocess
import unittest

import _tap

import nanosrv

logging.getLogger("nanosrv").setLevel(logging.CRITICAL)


class Parsing(unittest.TestCase):
    def test_multidict(self):
        md = nanosrv.parse_form("a=1&b=x+y&a=2&&c&d=%41%zz&e=%C3%A9")
        self.assertEqual(md.items(), [("a", "1"), ("b", "x y"), ("a", "2"), ("c", ""), ("d", "A%zz"),
                                      ("e", "\u00e9")])
        self.assertEqual((md["a"], md.get("a"), md.getone("a")), ("1", "1", "1"))
        self.assertEqual((md.getall("a"), md.getlist("a"), md.getlist("zz")), (["1", "2"], ["1", "2"], []))
        self.assertEqual(md.getall("zz", None), None)
        self.assertRaises(KeyError, md.getall, "zz")
        self.assertRaises(KeyError, lambda: md["zz"])
        self.assertEqual(md.get("zz", "dflt"), "dflt")
        self.assertEqual((len(md), list(md), "c" in md, "zz" in md), (6, ["a", "b", "a", "c", "d", "e"], True, False))
        self.assertEqual(md.to_dict(), {"a": "1", "b": "x y", "c": "", "d": "A%zz", "e": "\u00e9"})
        self.assertEqual(nanosrv.parse_form(b""), nanosrv.MultiDict())
        # Bytes that are not UTF-8 come back as sent.
        v = nanosrv.parse_form(b"k=%FF%00")["k"]
        self.assertEqual(v.encode("utf-8", "surrogateescape"), b"\xff\x00")

    def test_cookies(self):
        self.assertEqual(nanosrv.parse_cookies('sid=abc; theme="dark"; sid=second; junk; =empty'),
                         {"sid": "abc", "theme": "dark", "": "empty"})
        self.assertEqual(nanosrv.parse_cookies(""), {})

    def test_set_cookie_header(self):
        when = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
        self.assertEqual(nanosrv.set_cookie_header("sid", "abc", path="/", domain="example.com",
                                                   max_age=datetime.timedelta(hours=1), expires=when,
                                                   secure=True, httponly=True, samesite="Strict"),
                         "sid=abc; Path=/; Max-Age=3600; Expires=Wed, 02 Jan 2030 03:04:05 GMT; "
                         "Domain=example.com; Secure; HttpOnly; SameSite=Strict")
        self.assertEqual(nanosrv.set_cookie_header("a", "b" * 5000)[:4], "a=bb")  # longer than the first guess
        for kwargs, detail in [({"name": "bad name"}, "name"), ({"value": "a;b"}, "0x3b"),
                               ({"samesite": "None"}, "SameSite=None"), ({"name": "__Host-x", "secure": True,
                                                                         "domain": "x.org"}, "__Host-"),
                               ({"path": "/a;b"}, "path")]:
            args = {"name": "n", "value": "v"}
            args.update(kwargs)
            with self.assertRaises(ValueError) as cm:
                nanosrv.set_cookie_header(args.pop("name"), args.pop("value"), **args)
            self.assertIn("nsv_set_cookie", str(cm.exception))  # the library's reason
            self.assertIn(detail, str(cm.exception))
        self.assertRaises(ValueError, nanosrv.set_cookie_header, "n", "v", samesite="sometimes")
        self.assertRaises(ValueError, nanosrv.set_cookie_header, "n", "v",
                          expires=datetime.datetime(2030, 1, 1))  # naive


class OverHttp(unittest.TestCase):
    def test_query_form_cookies_and_set_cookie(self):
        m = nanosrv.Manager()

        @m.route("ALL", "/echo")
        def echo(conn, msg):
            conn.set_cookie("sid", "s1", path="/", httponly=True, samesite="Lax")
            conn.set_cookie("theme", "dark", max_age=60)
            return {"query": msg.query_params.items(), "tags": msg.query_params.getall("tag", []),
                    "raw": msg.query, "form": msg.form.items(), "cookies": msg.cookies}

        @m.get("/bad")
        def bad(conn, msg):
            conn.set_cookie("x", "has space")  # ValueError: a 500, the cookie never goes out
            return "unreachable"

        @m.get("/deleted")
        def deleted(conn, msg):
            conn.delete_cookie("sid", path="/")
            conn.http_reply(204)

        lst = m.http_listen("http://127.0.0.1:0")
        with _tap.ServerThread(m):
            c = http.client.HTTPConnection("127.0.0.1", lst.port, timeout=10)
            c.request("POST", "/echo?tag=a&tag=b&q=hello+world&tag=%C3%A9", body="name=J%C3%B6rg&x=1&x=2",
                      headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8",
                               "Cookie": "sid=old; lang=en"})
            r = c.getresponse()
            out = json.loads(r.read())
            self.assertEqual(r.status, 200)
            self.assertEqual(out["query"], [["tag", "a"], ["tag", "b"], ["q", "hello world"], ["tag", "\u00e9"]])
            self.assertEqual(out["tags"], ["a", "b", "\u00e9"])
            self.assertEqual(out["raw"], "tag=a&tag=b&q=hello+world&tag=%C3%A9")
            self.assertEqual(out["form"], [["name", "J\u00f6rg"], ["x", "1"], ["x", "2"]])
            self.assertEqual(out["cookies"], {"sid": "old", "lang": "en"})
            self.assertEqual(r.msg.get_all("Set-Cookie"), ["sid=s1; Path=/; HttpOnly; SameSite=Lax",
                                                           "theme=dark; Max-Age=60"])
            c.request("GET", "/bad")
            r = c.getresponse()
            r.read()
            self.assertEqual((r.status, r.getheader("Set-Cookie")), (500, None))
            # The next request on the connection carries no leftover cookie.
            c.request("GET", "/deleted")
            r = c.getresponse()
            r.read()
            self.assertEqual((r.status, r.msg.get_all("Set-Cookie")), (204, ["sid=; Path=/; Max-Age=0"]))
            c.close()
            # curl's cookie jar reads what the server set.
            out = subprocess.run(["curl", "-s", "-c", "-", "-o", "/dev/null",
                                  "http://127.0.0.1:%d/echo" % lst.port], capture_output=True, text=True,
                                 timeout=30).stdout
            jar = {line.split("\t")[5]: line.split("\t")[6] for line in out.splitlines()
                   if line.count("\t") == 6}
            self.assertEqual(jar, {"sid": "s1", "theme": "dark"})


if __name__ == "__main__":
    _tap.main()
