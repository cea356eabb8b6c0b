#!/usr/bin/python3
"""The echo contract of echo-server, in Python.

    echo.py [--port N | --listen-fd N] [--threads N] [--busy-us N] [--routes N]
            [--request-timeout-ms N] [--idle-timeout-ms N] [--max-conns N]
            [--max-body N] [--max-header-bytes N] [--shed 0|1] [--reuseport]
            [--cert FILE --key FILE [--ca FILE | --ca-optional FILE]]
            [--proxy-protocol] [--proxy-from CIDRS] [--allow CIDRS] [--deny CIDRS]
            [--access-log common|combined|json] [--drain-ms N]

With --cert and --key it serves https and wss instead of http and ws; --ca
asks for client certificates signed by that CA (--ca-optional lets clients
without one in), and the JSON description of a request over TLS carries
"sni" and the verified client "subject".
Prints "listening on PORT" once ready. POST|PUT /echo answers the body byte
for byte; /ws echoes WebSocket messages (when the library has WebSocket);
POST /upload parses a multipart/form-data body while it streams in and
answers the JSON array of its parts {name, filename|null,
content_type|null, size, sha256} (400 malformed, 415 other media types);
GET /sse?n=N sends N server-sent events with data 0..N-1, then ends;
GET /metrics answers the metrics in the Prometheus text format, GET
/healthz "ok", GET /readyz "ready" (503 "draining" once a drain started);
everything else gets {"method":..,"path":..,"query":..,"body_len":..,
"peer":..,"peer_port":..} (the client's address, also through a PROXY
protocol front, whose own address is then "front").
Behind a load balancer: --proxy-protocol (v1 or v2 headers), --proxy-from,
--allow and --deny (CIDR lists "10.0.0.0/8, ::1"); --reuseport lets several
processes bind the port; --listen-fd N serves listening socket N; with
neither --port nor --listen-fd, sockets from systemd socket activation
(LISTEN_FDS) are served. --access-log writes one line per request to stdout.
SIGTERM/SIGINT drain (--drain-ms, default 5000): in-flight requests finish,
then it exits 0.
"""
import hashlib
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import nanosrv  # noqa: E402

OPTIONS = {"--request-timeout-ms": "request_timeout_ms", "--idle-timeout-ms": "idle_timeout_ms",
           "--max-conns": "max_conns", "--max-body": "max_body", "--max-header-bytes": "max_header_bytes",
           "--shed": "shed"}
USAGE = ("usage: echo.py [--port N | --listen-fd N] [--threads N] [--busy-us N] [--routes N]\n"
         "       [--request-timeout-ms N] [--idle-timeout-ms N] [--max-conns N]\n"
         "       [--max-body N] [--max-header-bytes N] [--shed 0|1] [--reuseport]\n"
         "       [--cert FILE --key FILE [--ca FILE | --ca-optional FILE]]\n"
         "       [--proxy-protocol] [--proxy-from CIDRS] [--allow CIDRS] [--deny CIDRS]\n"
         "       [--access-log common|combined|json] [--drain-ms N]\n")
TLS_FLAGS = ("--cert", "--key", "--ca", "--ca-optional")
LIST_FLAGS = {"--proxy-from": "proxy_from", "--allow": "allow", "--deny": "deny"}
BARE_FLAGS = ("--proxy-protocol", "--reuseport")
NUM_FLAGS = ("--port", "--threads", "--busy-us", "--routes", "--listen-fd", "--drain-ms")

JSON_HDR = b"Content-Type: application/json\r\n"
OCTET_HDR = b"Content-Type: application/octet-stream\r\n"
_needs_escape = re.compile(rb'["\\\x00-\x1f]').search


def _esc_char(m):
    c = m.group()
    return b"\\" + c if c in b'"\\' else b"\\u%04x" % c[0]


def json_bytes(b):
    """A JSON string for raw bytes, escaped like echo-server (bytes >= 0x80 pass through)."""
    if _needs_escape(b) is None:
        return b'"' + b + b'"'
    return b'"' + re.sub(rb'["\\\x00-\x1f]', _esc_char, b) + b'"'


def json_opt(b):
    return b"null" if b is None else json_bytes(b)


TEXT_HDR = b"Content-Type: text/plain\r\n"


def upload(conn, msg):
    """POST /upload: each part hashed as it streams past (nanosrv.multipart)."""
    if not msg.streamed:
        return 400, TEXT_HDR, b"empty multipart body\n"
    try:
        reader = nanosrv.MultipartReader(msg, msg.header("content-type") or "", max_parts=10000)
    except nanosrv.UnsupportedMediaType:
        return 415, TEXT_HDR, b"not multipart/form-data\n"
    except nanosrv.MultipartError:
        return 400, TEXT_HDR, b"bad multipart boundary\n"
    out = []
    try:
        for part in reader:
            h = hashlib.sha256()
            for chunk in part:
                h.update(chunk)
            ct = part.content_type.encode("latin-1") if part.content_type is not None else None
            out.append(b'{"name":%s,"filename":%s,"content_type":%s,"size":%d,"sha256":"%s"}' % (
                json_bytes(part.raw_name), json_opt(part.raw_filename), json_opt(ct), part.size,
                h.hexdigest().encode()))
    except nanosrv.MultipartError as e:
        return 400, TEXT_HDR, str(e).encode() + b"\n"
    conn.http_reply(200, JSON_HDR, b"[" + b",".join(out) + b"]")


SSE_MAX = 10000000  # as the C echo-server: n is 0 .. 1e7, digits only


def sse(conn, msg):
    """GET /sse?n=N: N events (data 0..N-1), sent as fast as the client takes them."""
    q = msg.query_params.get("n")
    n = int(q) if q is not None and q.isascii() and q.isdigit() and len(q) <= 9 else -1
    if not 0 <= n <= SSE_MAX:
        return 400, TEXT_HDR, b"n must be a number of events, 0..%d\n" % SSE_MAX
    es = conn.sse_start()
    state = [0]

    def pump():
        i = state[0]
        while i < n and not es.closed:
            i += 1
            if not es.send(str(i - 1)):
                state[0] = i
                es.on_drain(pump)  # paced by the client: go on at the low water mark
                return
        state[0] = i
        es.end()
    pump()


def spin(us):
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


def parse_args(argv):
    cfg = {"port": None, "listen_fd": None, "threads": 0, "busy_us": 0, "routes": 0, "drain_ms": 5000,
           "options": {}, "tls": {}, "listener": {}, "reuseport": False, "access_log": None}
    i = 0
    while i < len(argv):
        flag = argv[i]
        if flag in BARE_FLAGS:
            if flag == "--proxy-protocol":
                cfg["listener"]["proxy_protocol"] = "any"
            else:
                cfg["reuseport"] = True
            i += 1
            continue
        val = argv[i + 1] if i + 1 < len(argv) else None
        if val is None or (flag not in OPTIONS and flag not in TLS_FLAGS and flag not in LIST_FLAGS
                           and flag not in NUM_FLAGS and flag != "--access-log"):
            sys.stderr.write(USAGE)
            sys.exit(2)
        if flag in TLS_FLAGS:
            cfg["tls"][flag] = val
        elif flag in LIST_FLAGS:
            cfg["listener"][LIST_FLAGS[flag]] = val
        elif flag == "--access-log":
            if val not in nanosrv.ops.FORMATS:
                sys.stderr.write(USAGE)
                sys.exit(2)
            cfg["access_log"] = val
        elif flag in OPTIONS:
            cfg["options"][OPTIONS[flag]] = int(val)
        else:
            cfg[flag[2:].replace("-", "_")] = int(val)
        i += 2
    tls = cfg["tls"]
    if tls and ("--cert" not in tls or "--key" not in tls or ("--ca" in tls and "--ca-optional" in tls)):
        sys.stderr.write(USAGE)
        sys.exit(2)
    if cfg["port"] is not None and cfg["listen_fd"] is not None:
        sys.stderr.write(USAGE)
        sys.exit(2)
    return cfg


def access_writer(fmt):
    """The access log's sink: one line per record on stdout, as echo-server."""
    line = nanosrv.ops.FORMATS[fmt]

    def write(record):
        sys.stdout.write(line(record) + "\n")
        sys.stdout.flush()
    return write


def listen(srv, cfg, handler):
    """The listeners: --listen-fd, --port, else systemd's sockets, else 8080."""
    scheme = "https" if cfg["tls"] else "http"
    lopts = cfg["listener"]
    if cfg["listen_fd"] is not None:
        fd = cfg["listen_fd"]
        return [srv.listen_fd(nanosrv.ops.fd_url(fd, bool(cfg["tls"])), fd, handler, **lopts)]
    if cfg["port"] is None:
        got = srv.listen_inherited(handler, tls=bool(cfg["tls"]), **lopts)
        if got:
            return got
    url = "%s://0.0.0.0:%d" % (scheme, 8080 if cfg["port"] is None else cfg["port"])
    return [srv.http_listen(url, handler, **lopts)]


def main():
    cfg = parse_args(sys.argv[1:])
    busy = cfg["busy_us"]
    srv = nanosrv.ShardedManager(cfg["threads"]) if cfg["threads"] > 0 else nanosrv.Manager()
    if cfg["reuseport"]:
        cfg["options"]["reuseport"] = 1
    for name, value in cfg["options"].items():
        try:
            srv.set_option(name, value)
        except nanosrv.Error as e:
            sys.stderr.write("echo.py: --%s %s: %s\n" % (name.replace("_", "-"), value, e))
            return 2

    def echo(conn, msg):
        if busy:
            spin(busy)
        conn.http_reply(200, OCTET_HDR, msg.body_bytes)

    def describe(conn, msg):
        if busy:
            spin(busy)
        tls = msg.tls
        extra = b"" if tls is None else b',"sni":%s,"subject":%s' % (
            json_bytes(tls.sni.encode("utf-8", "surrogateescape")),
            json_bytes(tls.peer_subject.encode("utf-8", "surrogateescape")))
        # peer is the client's address, also through a PROXY protocol front
        peer, port = msg.peer
        extra += b',"peer":%s,"peer_port":%d' % (json_bytes(peer.encode("latin-1")[:128]), port)
        proxy = msg.proxy
        if proxy is not None:
            extra += b',"front":%s' % json_bytes(proxy["front"].encode("utf-8", "surrogateescape")[:128])
        conn.http_reply(200, JSON_HDR, b'{"method":%s,"path":%s,"query":%s,"body_len":%d%s}' % (
            json_bytes(msg.raw_method), json_bytes(msg.raw_path[:8192]),
            json_bytes(msg.raw_query[:8192]), msg.body_len, extra))

    def readyz(conn, msg):
        # fails from the drain's start, for keep-alive connections a front still holds
        if srv.draining:
            conn.http_reply(503, TEXT_HDR, b"draining")
        else:
            conn.http_reply(200, TEXT_HDR, b"ready")

    def ws_echo(conn, event, data):
        if event == nanosrv.Event.WsMessage:
            conn.ws_send(data.data, data.opcode)

    srv.route("GET", "/metrics", nanosrv.ops.metrics_handler(srv))
    srv.route("GET", "/healthz", lambda conn, msg: conn.http_reply(200, TEXT_HDR, b"ok"))
    srv.route("GET", "/readyz", readyz)
    srv.route("POST", "/echo", echo)
    srv.route("POST", "/upload", upload, stream=True)
    srv.route("GET", "/sse", sse)
    srv.route("PUT", "/echo", echo)
    for i in range(cfg["routes"]):
        srv.route("GET", "/dummy/%d/:id" % i, describe)
    if nanosrv.websocket_available():
        srv.websocket("/ws", ws_echo)
    tls = cfg["tls"]
    if tls:
        ca = tls.get("--ca") or tls.get("--ca-optional")
        try:
            srv.set_tls(cert=tls["--cert"], key=tls["--key"], ca=ca,
                        verify_client=None if ca is None else "required" if "--ca" in tls else "optional")
        except nanosrv.Error as e:
            sys.stderr.write("echo.py: TLS: %s\n" % e)
            return 1
    try:
        listeners = listen(srv, cfg, describe)
    except nanosrv.Error as e:
        sys.stderr.write("echo.py: listen: %s\n" % e)
        return 1

    got_signal = []

    def on_signal(sig, frame):
        got_signal.append(sig)
        srv.wakeup()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print("listening on %d" % listeners[0].port, flush=True)
    if cfg["access_log"]:
        try:
            srv.set_access_log(access_writer(cfg["access_log"]))
        except nanosrv.Error as e:
            sys.stderr.write("echo.py: --access-log: %s\n" % e)
            return 1

    draining = False
    while True:
        if got_signal and not draining:
            draining = True
            srv.drain_start(cfg["drain_ms"])
        if srv.poll(1000) < 0:
            break  # the drain has finished
    srv.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
