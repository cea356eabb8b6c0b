"""Server-sent events (conn.sse_start -> EventStream): fields parsed by an
EventSource-style client reading over http.client, asend() waiting while
the client is behind, and a client that leaves stopping the stream."""
import http.client
import logging
import select
import socket
import time
import unittest

import _tap
from test_stream import AsyncServer, wait_for

import nanosrv

logging.getLogger("nanosrv").setLevel(logging.CRITICAL)


def parse_events(lines):
    """The WHATWG event-stream interpretation: (event, data, id) per dispatch."""
    out, data, event, last_id = [], [], "", None
    for raw in lines:
        line = raw.rstrip("\n")
        if line == "":
            if data:
                out.append((event or "message", "\n".join(data), last_id))
            data, event = [], ""
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            data.append(value)
        elif field == "event":
            event = value
        elif field == "id":
            last_id = value
        elif field == "retry":
            out.append(("retry", value, last_id))
    return out


class Events(unittest.TestCase):
    def test_fields_and_keepalive(self):
        m = nanosrv.Manager()

        @m.get("/ev")
        def ev(conn, msg):
            conn.set_cookie("seen", "1")
            with conn.sse_start("X-Stream: yes\r\n") as es:
                es.send("plain")
                es.send("line1\nline2\r\nline3", event="multi", id="42")
                es.comment("keepalive")
                es.send(b"bytes", retry=1500)
                es.send("", event="empty")
                with self.assertRaises(ValueError) as cm:
                    es.send("x", event="bad\nname")
                self.assertIn("nsv_sse", str(cm.exception))
                self.assertRaises(ValueError, es.send)
            self.assertTrue(es.closed)
            self.assertRaises(nanosrv.StateError, es.send, "after end")

        @m.get("/wrong")
        def wrong(conn, msg):
            conn.sse_start("Content-Type: text/plain\r\n")  # EventSource would fail: refused

        lst = m.http_listen("http://127.0.0.1:0")
        with _tap.ServerThread(m):
            c = http.client.HTTPConnection("127.0.0.1", lst.port, timeout=10)
            c.request("GET", "/ev")
            r = c.getresponse()
            self.assertEqual((r.status, r.getheader("Content-Type"), r.getheader("Cache-Control"),
                              r.getheader("X-Stream"), r.getheader("Set-Cookie")),
                             (200, "text/event-stream", "no-cache", "yes", "seen=1"))
            text = r.read().decode()
            self.assertIn(": keepalive\n", text)
            self.assertEqual(parse_events(text.splitlines(True)), [
                ("message", "plain", None), ("multi", "line1\nline2\nline3", "42"), ("retry", "1500", "42"),
                ("message", "bytes", "42"), ("empty", "", "42")])
            c.request("GET", "/wrong")
            r = c.getresponse()
            r.read()
            self.assertEqual(r.status, 500)
            c.close()


class Backpressure(unittest.TestCase):
    def test_asend_waits_for_a_slow_client_and_stops_when_it_leaves(self):
        state = {"sent": 0, "es": None, "queued": [], "ended": None}
        n_events, payload = 5000, "x" * 1000

        def setup(m):
            @m.get("/feed")
            async def feed(conn, msg):
                es = state["es"] = conn.sse_start()
                try:
                    for i in range(n_events):
                        await es.asend("%d %s" % (i, payload), id=str(i))
                        state["queued"].append(conn.queued())
                        state["sent"] = i + 1
                    es.end()
                    state["ended"] = "done"
                except nanosrv.Disconnected:
                    state["ended"] = "client left"
                    es.end()

        with AsyncServer(setup) as srv:
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
            s.sendall(b"GET /feed HTTP/1.1\r\nHost: x\r\n\r\n")
            # Not reading: the server must stop at the high water mark, far
            # short of the 5 MB of events.
            blocked = lambda: state["es"] is not None and not state["es"].writable  # noqa: E731
            wait_for(blocked, "the stream to wait for the client")
            sent_while_blocked = state["sent"]
            self.assertLess(sent_while_blocked, n_events)
            self.assertLessEqual(max(state["queued"]), (1 << 16) + 2048)  # high water + one event
            # Read everything: the stream resumes and ends.
            buf = b""
            end = time.monotonic() + 60
            while not buf.endswith(b"0\r\n\r\n") and time.monotonic() < end:
                r, _, _ = select.select([s], [], [], 1)
                if r:
                    d = s.recv(1 << 16)
                    if not d:
                        break
                    buf += d
            s.close()
            self.assertEqual(state["ended"], "done")
            body = buf.split(b"\r\n\r\n", 1)[1]
            ids = [int(line[4:]) for line in body.split(b"\n") if line.startswith(b"id: ")]
            self.assertEqual(ids, list(range(n_events)))

            # A client that leaves mid-stream stops it.
            state.update(sent=0, es=None, ended=None)
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
            s.sendall(b"GET /feed HTTP/1.1\r\nHost: x\r\n\r\n")
            wait_for(blocked, "the stream to wait for the client")
            s.close()
            wait_for(lambda: state["ended"], "the stream to stop")
            self.assertEqual(state["ended"], "client left")
            self.assertLess(state["sent"], n_events)


if __name__ == "__main__":
    _tap.main()
