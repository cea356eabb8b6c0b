"""nanosrv.asgi over TLS (a throwaway CA and certificates made with
openssl): scheme https / wss, the scope's "tls" extension with the SNI
name and the verified client certificate's subject, a streamed body."""
import asyncio
import http.client
import ssl
import unittest

import _tap
from _net import certs
from test_asgi_http import AppServer

import nanosrv
import websockets.client


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        return
    tls = scope.get("extensions", {}).get("tls")
    info = ("%s %s %s" % (scope["scheme"], tls and tls["server_name"], tls and tls["client_cert_name"])).encode()
    if scope["type"] == "websocket":
        await receive()
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "bytes": info})
        await send({"type": "websocket.close"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": info, "more_body": True})
    await send({"type": "http.response.body", "body": b" end"})


@unittest.skipUnless(nanosrv.tls_available(), "the loaded libnanosrv has no TLS")
class Tls(unittest.TestCase):
    def test_https_and_wss_scope(self):
        c = certs()
        ctx = ssl.create_default_context(cafile=c["ca.crt"])
        with AppServer(app, tls={"cert": c["srv.crt"], "key": c["srv.key"]}) as s:
            conn = http.client.HTTPSConnection("localhost", s.port, context=ctx, timeout=10)
            conn.request("GET", "/")
            r = conn.getresponse()
            self.assertEqual(r.read(), b"https localhost None end")
            conn.close()

            async def ws():
                async with websockets.client.connect("wss://localhost:%d/" % s.port, ssl=ctx) as w:
                    return await asyncio.wait_for(w.recv(), 10)
            self.assertEqual(asyncio.run(ws()), b"wss localhost None")

    def test_client_certificate_subject(self):
        c = certs()
        ctx = ssl.create_default_context(cafile=c["ca.crt"])
        ctx.load_cert_chain(c["alice.crt"], c["alice.key"])
        with AppServer(app, tls={"cert": c["srv.crt"], "key": c["srv.key"], "ca": c["ca.crt"],
                                 "verify_client": "required"}) as s:
            conn = http.client.HTTPSConnection("localhost", s.port, context=ctx, timeout=10)
            conn.request("GET", "/")
            body = conn.getresponse().read()
            conn.close()
        self.assertTrue(body.startswith(b"https localhost "), body)
        self.assertIn(b"CN=alice", body)


if __name__ == "__main__":
    _tap.main()
