"""One WebSocket connection of an ASGI app.

Upgrade requests reach the server as ordinary requests, so the app
decides: websocket.accept upgrades (nsv_ws_upgrade), websocket.close
before it answers 403, and the websocket.http.response extension sends
any other HTTP answer. After the upgrade the connection's WebSocket events
(message, close frame, close) are queued for receive().
"""
import asyncio
import collections
import logging

from .._ffi import lib
from .._message import Event, WsOpcode
from ..errors import check
from ._http import ClientDisconnected
from ._scope import header_block

log = logging.getLogger("nanosrv.asgi")

_CONNECTING, _OPEN, _CLOSED, _RESPONSE, _DENIED = range(5)
_ESTALE = lib.NSV_ESTALE
_TEXT, _BINARY = lib.NSV_WS_TEXT, lib.NSV_WS_BINARY
_CONNECT = {"type": "websocket.connect"}
_403_HDR = b"Content-Type: text/plain; charset=utf-8\r\n"
_500_HDR = b"Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
# Queued output past which send() waits for the client to read. The library
# stops reading a WebSocket whose output passes half of NSV_OPT_MAX_OUTPUT
# but gives no writable events for it, so the wait polls the queue.
_WAIT_S = 0.005
_WAIT_MAX_S = 0.1


class WebSocketCycle:
    __slots__ = ("srv", "conn", "scope", "state", "queue", "waiter", "connect_sent", "close_sent",
                 "gone", "code", "status", "headers", "body", "task")

    def __init__(self, srv, conn, scope):
        self.srv = srv
        self.conn = conn
        self.scope = scope
        self.state = _CONNECTING
        self.queue = collections.deque()
        self.waiter = None
        self.connect_sent = False
        self.close_sent = False   # websocket.close from the app went out
        self.gone = False         # websocket.disconnect is queued
        self.code = 1006
        self.status = 0
        self.headers = b""
        self.body = []
        self.task = None

    async def run(self, app):
        try:
            await app(self.scope, self.receive, self.send)
        except asyncio.CancelledError:
            self._close_after(1012)
            raise
        except BaseException as exc:
            if isinstance(exc, ClientDisconnected) or self.gone:
                log.debug("ASGI WebSocket app ended after the client left: %r", exc)
            else:
                log.exception("Exception in ASGI application (websocket %s)", self.scope["path"])
                if self.state == _CONNECTING or self.state == _RESPONSE:
                    self._http(500, _500_HDR, b"Internal Server Error")
                else:
                    self._close_after(1011)
            if not isinstance(exc, Exception):
                raise
        else:
            if self.state == _CONNECTING or self.state == _RESPONSE:
                log.error("ASGI callable returned without accepting or denying the WebSocket (%s)",
                          self.scope["path"])
                self._http(500, _500_HDR, b"Internal Server Error")
            else:
                self._close_after(1000)
        finally:
            self.srv.tasks.discard(self.task)

    def _close_after(self, code):
        if self.state == _OPEN and not self.close_sent and not self.conn._closed:
            self.close_sent = True
            self.conn.ws_close(code, "")
            self.conn._after_send()

    def _http(self, status, headers, body):
        self.state = _DENIED
        c = self.conn
        if not c._closed:
            r = lib.nsv_reply(c._s, c.id, status, headers, len(headers), body, len(body))
            if r < 0 and r != _ESTALE:
                check(r, c._s)
            self.conn._after_send()
        self._push({"type": "websocket.disconnect", "code": 1006})

    # ---- events of the upgraded connection (the Manager calls this) ----

    def on_event(self, conn, ev, data):
        if ev == Event.WsMessage:
            if data.opcode == WsOpcode.Text:
                self._push({"type": "websocket.receive", "text": data.data.decode("utf-8", "replace")})
            else:
                self._push({"type": "websocket.receive", "bytes": data.data})
        elif ev == Event.WsControl:
            if data.opcode == WsOpcode.Close:
                self._push({"type": "websocket.disconnect", "code": data.code or 1005})
        elif ev == Event.Close:
            self._push({"type": "websocket.disconnect", "code": 1006})

    def _push(self, message):
        if self.gone:
            return
        if message["type"] == "websocket.disconnect":
            self.gone = True
            self.state = _CLOSED if self.state == _OPEN else self.state
        self.queue.append(message)
        w = self.waiter
        if w is not None:
            self.waiter = None
            if not w.done():
                w.set_result(None)

    # ---- the app's side ----

    async def receive(self):
        if not self.connect_sent:
            self.connect_sent = True
            return _CONNECT
        q = self.queue
        while not q:
            if self.gone:
                return {"type": "websocket.disconnect", "code": self.code}
            self.waiter = self.srv.loop.create_future()
            await self.waiter
        m = q.popleft()
        if m["type"] == "websocket.disconnect":
            self.code = m["code"]
            q.clear()
        return m

    async def send(self, message):
        t = message["type"]
        st = self.state
        c = self.conn
        if t == "websocket.send":
            if st != _OPEN:
                if self.gone or c._closed:
                    return  # the peer is gone; uvicorn drops such sends too
                raise RuntimeError("ASGI: 'websocket.send' %s" % ("before 'websocket.accept'" if st == _CONNECTING
                                                                   else "after 'websocket.close'"))
            text = message.get("text")
            if text is not None:
                if type(text) is not str:
                    raise TypeError("ASGI: websocket.send 'text' must be str, not %s" % type(text).__name__)
                n = c.ws_send(text.encode("utf-8"), _TEXT)
            else:
                data = message.get("bytes")
                if data is None:
                    raise ValueError("ASGI: websocket.send needs 'text' or 'bytes'")
                if not isinstance(data, (bytes, bytearray, memoryview)):
                    raise TypeError("ASGI: websocket.send 'bytes' must be bytes, not %s" % type(data).__name__)
                n = c.ws_send(bytes(data), _BINARY)
            self.conn._after_send()
            if n and c.send_queue_len >= self.srv.ws_high_water:
                await self._drain()
            return
        if t == "websocket.accept":
            if st != _CONNECTING:
                raise RuntimeError("ASGI: 'websocket.accept' in state %s" % _NAMES[st])
            hdr = b""
            sub = message.get("subprotocol")
            if sub is not None:
                if not isinstance(sub, str):
                    raise TypeError("ASGI: websocket.accept 'subprotocol' must be str, not %s" % type(sub).__name__)
                hdr = header_block([(b"Sec-WebSocket-Protocol", sub.encode("latin-1"))], "websocket.accept")
            extra = message.get("headers")
            if extra:
                extra = [(n, v) for n, v in extra if n.lower() != b"sec-websocket-protocol" or sub is None]
                hdr += header_block(extra, "websocket.accept")
            self.state = _OPEN
            try:
                ok = c.ws_upgrade(None, hdr, handler=self.on_event)
            except Exception as exc:
                if getattr(exc, "code", None) == lib.NSV_EPARSE:
                    # Not a valid handshake: the library answered 400/426.
                    log.info("WebSocket handshake refused for %s: %s", self.scope["path"], exc)
                    self.state = _DENIED
                    self._push({"type": "websocket.disconnect", "code": 1006})
                    return
                self.state = _CONNECTING
                raise
            if not ok:
                self._push({"type": "websocket.disconnect", "code": 1006})
            self.conn._after_send()
            return
        if t == "websocket.close":
            if st == _CONNECTING:
                self._http(403, _403_HDR, b"Forbidden")
                return
            if st == _OPEN and not self.close_sent:
                code = message.get("code", 1000)
                reason = message.get("reason") or ""
                if type(code) is not int:
                    raise TypeError("ASGI: websocket.close 'code' must be an int")
                self.close_sent = True
                if not c._closed:
                    c.ws_close(code, reason)
                    self.conn._after_send()
                return
            if self.gone or c._closed or self.close_sent:
                return
            raise RuntimeError("ASGI: 'websocket.close' in state %s" % _NAMES[st])
        if t == "websocket.http.response.start":
            if st != _CONNECTING:
                raise RuntimeError("ASGI: 'websocket.http.response.start' in state %s" % _NAMES[st])
            status = message["status"]
            if type(status) is not int or not 200 <= status <= 999:
                raise ValueError("ASGI: websocket.http.response.start 'status' must be an int 200..999, not %r"
                                 % (status,))
            self.headers = header_block(message.get("headers"), "websocket.http.response.start")
            self.status = status
            self.state = _RESPONSE
            return
        if t == "websocket.http.response.body":
            if st != _RESPONSE:
                raise RuntimeError("ASGI: 'websocket.http.response.body' in state %s" % _NAMES[st])
            body = message.get("body", b"")
            if not isinstance(body, (bytes, bytearray, memoryview)):
                raise TypeError("ASGI: websocket.http.response.body 'body' must be bytes")
            self.body.append(bytes(body))
            if not message.get("more_body", False):
                body, self.body = b"".join(self.body), []
                self._http(self.status, self.headers, body)
            return
        raise RuntimeError("ASGI: unexpected message type %r for a websocket scope" % (t,))

    async def _drain(self):
        c = self.conn
        low = self.srv.ws_high_water // 2
        delay = _WAIT_S
        while not c._closed and c.send_queue_len > low:
            await asyncio.sleep(delay)
            delay = min(delay * 2, _WAIT_MAX_S)
        if c._closed:
            raise ClientDisconnected("the client left while messages were being sent")


_NAMES = {_CONNECTING: "connecting", _OPEN: "open", _CLOSED: "closed", _RESPONSE: "response", _DENIED: "denied"}
