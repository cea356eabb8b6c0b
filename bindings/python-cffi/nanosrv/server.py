"""The server command: `python3 -m nanosrv MODULE:APP [flags]` (also
installed as the `nanosrv` script).

    python3 -m nanosrv myapp:app --port 8000              # one process
    python3 -m nanosrv myapp:app --workers 4 --port 8000  # pre-fork, supervised

Runs an ASGI 3 application (nanosrv.asgi.Server) or a WSGI one
(nanosrv.wsgi.Server), found by import string, with the flags uvicorn and
gunicorn users know. This module parses the flags, binds the listening
socket, loads the application and runs one server process; the pre-fork
supervisor behind --workers is nanosrv._supervisor.

Behind a load balancer: --proxy-protocol [v1|v2|any] (the client's
address from the PROXY header becomes the peer: ASGI scope["client"], WSGI
REMOTE_ADDR), --proxy-from, --allow, --deny (CIDR lists), --metrics-path,
--readyz-path, --access-log common|combined|json, --reuseport, --max-conns,
--no-shed. Started by systemd socket activation (LISTEN_FDS set for this
process), the command serves the passed socket instead of binding one.

Interface detection (--interface auto): an application that is a coroutine
function, or an object whose __call__ is one, is ASGI; otherwise one whose
call takes 3 positional parameters (scope, receive, send) is ASGI and one
that takes 2 (environ, start_response) is WSGI. Anything else needs
--interface.
"""
import argparse
import asyncio
import importlib
import inspect
import logging
import os
import signal
import socket
import stat
import sys
from typing import Any, Callable, List, Optional, Sequence

log = logging.getLogger("nanosrv.server")

TRACE = 5  # --log-level trace: below logging.DEBUG, as uvicorn's
LOG_LEVELS = {"critical": logging.CRITICAL, "error": logging.ERROR, "warning": logging.WARNING,
              "info": logging.INFO, "debug": logging.DEBUG, "trace": TRACE}
# Exit status of a process whose application could not be loaded or started
# (gunicorn's WORKER_BOOT_ERROR): the supervisor stops instead of retrying.
EXIT_BOOT_ERROR = 3
# Exit status for bad flags and sockets that cannot be bound (as argparse).
EXIT_USAGE = 2


class StartupError(Exception):
    """Something the command cannot start with: the message is the one line
    it prints on stderr before exiting with `status`."""

    def __init__(self, message: str, status: int = EXIT_BOOT_ERROR) -> None:
        super().__init__(message)
        self.status = status


# ---- flags ----

def _positive(name: str, minimum: int = 1) -> Callable[[str], int]:
    def conv(v: str) -> int:
        try:
            n = int(v)
        except ValueError:
            raise argparse.ArgumentTypeError("%s must be an integer, not %r" % (name, v))
        if n < minimum:
            raise argparse.ArgumentTypeError("%s must be >= %d, not %d" % (name, minimum, n))
        return n
    return conv


def _port(v: str) -> int:
    try:
        n = int(v)
    except ValueError:
        raise argparse.ArgumentTypeError("--port must be an integer, not %r" % v)
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError("--port must be 0..65535 (0 picks a free port), not %d" % n)
    return n


def _seconds(v: str) -> float:
    try:
        f = float(v)
    except ValueError:
        raise argparse.ArgumentTypeError("expected seconds, not %r" % v)
    if not f >= 0 or f > 86400:
        raise argparse.ArgumentTypeError("seconds must be 0..86400, not %r" % v)
    return f


def _cert_reqs(v: str) -> int:
    names = {"none": 0, "optional": 1, "required": 2, "0": 0, "1": 1, "2": 2,
             "cert_none": 0, "cert_optional": 1, "cert_required": 2}
    if v.lower() not in names:
        raise argparse.ArgumentTypeError("--ssl-cert-reqs must be 0 (none), 1 (optional) or 2 (required), not %r" % v)
    return names[v.lower()]


def _access_format(v: str) -> str:
    if v not in ("common", "combined", "json"):
        raise argparse.ArgumentTypeError("--access-log FORMAT must be common, combined or json, not %r" % v)
    return v


def _path(flag: str, v: Optional[str], p: argparse.ArgumentParser) -> None:
    if v is not None and not v.startswith("/"):
        p.error("%s must start with '/', not %r" % (flag, v))


def build_parser() -> argparse.ArgumentParser:
    """The command's argument parser."""
    p = argparse.ArgumentParser(
        prog="python3 -m nanosrv",
        description="Serve an ASGI 3 or WSGI application with nanosrv.",
        epilog="APP is MODULE:ATTRIBUTE (dotted attributes allowed); with --factory, or written "
               "MODULE:factory(), the attribute is called with no arguments to make the application.")
    p.add_argument("app", metavar="APP", nargs="?", help="the application, MODULE:ATTRIBUTE")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; 0.0.0.0 or :: for all)")
    p.add_argument("--port", type=_port, default=8000, help="port to bind (default 8000; 0 picks a free one)")
    p.add_argument("--uds", metavar="PATH", help="bind a unix domain socket at PATH instead of host:port")
    p.add_argument("--backlog", type=_positive("--backlog"), default=2048, help="listen backlog (default 2048)")
    p.add_argument("--interface", choices=("auto", "asgi", "wsgi"), default="auto",
                   help="application interface (default auto: see the module documentation)")
    p.add_argument("--factory", action="store_true", help="APP names a factory to call for the application")
    p.add_argument("--app-dir", default=".", help="directory put first on sys.path (default: the current one)")
    p.add_argument("--workers", type=_positive("--workers"), default=None,
                   help="worker processes sharing the socket, supervised (default: one process, unsupervised)")
    p.add_argument("--threads", type=_positive("--threads", 0), default=None,
                   help="threads running a WSGI application in each process (default 4; 0: on the "
                        "event loop's thread, for apps that never block)")
    p.add_argument("--ssl-certfile", help="certificate chain (PEM): serve https")
    p.add_argument("--ssl-keyfile", help="private key (PEM) of --ssl-certfile")
    p.add_argument("--ssl-keyfile-password", help="password of an encrypted --ssl-keyfile")
    p.add_argument("--ssl-ca-certs", help="CA certificates (PEM) that verify client certificates")
    p.add_argument("--ssl-cert-reqs", type=_cert_reqs, default=None,
                   help="client certificates: 0 none, 1 optional, 2 required (default 0; 2 when "
                        "--ssl-ca-certs is given without it)")
    p.add_argument("--log-level", choices=tuple(LOG_LEVELS), default="info", help="log level (default info)")
    p.add_argument("--access-log", dest="access_log", nargs="?", const=True, default=True, metavar="FORMAT",
                   type=_access_format,
                   help="one log line per request (default); FORMAT common, combined or json: the "
                        "library's access records in that format (nginx's common and combined, or JSON)")
    p.add_argument("--no-access-log", dest="access_log", action="store_false", help="no access log")
    p.add_argument("--root-path", default="", help="mount point of the application (ASGI root_path, WSGI SCRIPT_NAME)")
    p.add_argument("--limit-max-requests", type=_positive("--limit-max-requests"), default=None,
                   help="a process drains and exits after this many requests (a supervisor replaces it)")
    p.add_argument("--timeout-graceful-shutdown", type=_seconds, default=30.0,
                   help="seconds in-flight requests get at shutdown before their connections close (default 30)")
    p.add_argument("--lifespan", choices=("auto", "on", "off"), default="auto", help="ASGI lifespan (default auto)")
    p.add_argument("--loop", choices=("auto", "asyncio", "uvloop"), default="auto",
                   help="asyncio event loop for ASGI (default auto: uvloop if installed)")
    p.add_argument("--ws-max-size", type=_positive("--ws-max-size"), default=16 << 20,
                   help="largest WebSocket message in bytes (default 16 MiB)")
    p.add_argument("--ws-ping-interval", type=_seconds, default=None, help="seconds between WebSocket pings (default off)")
    p.add_argument("--proxy-protocol", nargs="?", const="any", default=None, choices=("v1", "v2", "any"),
                   help="every connection starts with a PROXY protocol header from a load balancer "
                        "(default when given: any, v1 or v2); the client's address becomes the peer")
    p.add_argument("--proxy-timeout-ms", type=_positive("--proxy-timeout-ms"), default=None,
                   help="deadline for the PROXY header from accept (default 5000)")
    p.add_argument("--proxy-from", action="append", default=None, metavar="CIDRS",
                   help="fronts allowed to connect with --proxy-protocol (CIDR list; repeatable)")
    p.add_argument("--allow", action="append", default=None, metavar="CIDRS",
                   help="serve only clients in these CIDR ranges (repeatable)")
    p.add_argument("--deny", action="append", default=None, metavar="CIDRS",
                   help="never serve clients in these CIDR ranges (repeatable; checked before --allow)")
    p.add_argument("--metrics-path", default=None, metavar="PATH",
                   help="answer GET PATH (e.g. /metrics) with the server's metrics in the Prometheus "
                        "text format, before the application")
    p.add_argument("--readyz-path", default=None, metavar="PATH",
                   help="answer GET PATH with 200 while serving and 503 once draining (a readiness check)")
    p.add_argument("--reuseport", action="store_true",
                   help="bind with SO_REUSEPORT, so several independent servers share the port")
    p.add_argument("--max-conns", type=_positive("--max-conns"), default=None,
                   help="connections per process (default the library's 10000)")
    p.add_argument("--no-shed", dest="shed", action="store_false", default=True,
                   help="at --max-conns refuse new connections instead of closing idle ones to make room")
    p.add_argument("--version", action="store_true", help="print the versions and exit")
    return p


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """Parse and cross-check the flags (argparse exits with status 2 on errors)."""
    p = build_parser()
    a = p.parse_args(argv)
    if a.version:
        return a
    if not a.app:
        p.error("the following arguments are required: APP (MODULE:ATTRIBUTE)")
    if bool(a.ssl_certfile) != bool(a.ssl_keyfile):
        p.error("--ssl-certfile and --ssl-keyfile go together")
    if (a.ssl_keyfile_password or a.ssl_ca_certs or a.ssl_cert_reqs) and not a.ssl_certfile:
        p.error("--ssl-keyfile-password, --ssl-ca-certs and --ssl-cert-reqs need --ssl-certfile")
    if a.ssl_cert_reqs and not a.ssl_ca_certs:
        p.error("--ssl-cert-reqs %d needs --ssl-ca-certs (the CA that verifies client certificates)" % a.ssl_cert_reqs)
    if a.ssl_ca_certs and a.ssl_cert_reqs is None:
        a.ssl_cert_reqs = 2
    if a.uds and (a.port != 8000 or a.host != "127.0.0.1"):
        p.error("--uds replaces --host and --port; give one or the other")
    if a.uds and a.reuseport:
        p.error("--reuseport applies to --host/--port sockets, not --uds")
    if (a.proxy_from or a.proxy_timeout_ms) and not a.proxy_protocol:
        p.error("--proxy-from and --proxy-timeout-ms need --proxy-protocol")
    _path("--metrics-path", a.metrics_path, p)
    _path("--readyz-path", a.readyz_path, p)
    return a


def listener_options(args: argparse.Namespace) -> dict:
    """Manager.http_listen's listener options from the flags."""
    opts = {}
    if args.proxy_protocol:
        opts["proxy_protocol"] = args.proxy_protocol
    if args.proxy_timeout_ms:
        opts["proxy_timeout_ms"] = args.proxy_timeout_ms
    for name in ("proxy_from", "allow", "deny"):
        v = getattr(args, name)
        if v:
            opts[name] = ",".join(v)
    return opts


# ---- the application ----

def import_from_string(spec: str, factory: bool = False) -> Any:
    """The object MODULE:ATTR names (attributes may be dotted; "ATTR()" or
    factory=True calls it). Raises StartupError with one clear line."""
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise StartupError('cannot load %r: the application must be given as "MODULE:ATTRIBUTE" '
                           '(for example "main:app")' % (spec,), EXIT_USAGE)
    mod_name, attr = spec.split(":")
    call = factory
    if attr.endswith("()"):
        attr, call = attr[:-2], True
    if not mod_name or not attr or not all(s.isidentifier() for s in attr.split(".")) \
            or not all(s.isidentifier() for s in mod_name.split(".")):
        raise StartupError('cannot load %r: the application must be given as "MODULE:ATTRIBUTE" '
                           '(for example "main:app")' % (spec,), EXIT_USAGE)
    try:
        module = importlib.import_module(mod_name)
    except ModuleNotFoundError as e:
        if e.name is not None and mod_name.startswith(e.name) and mod_name[len(e.name):][:1] in ("", "."):
            raise StartupError('cannot load %r: could not import module "%s" (%s)' % (spec, mod_name, e))
        log.debug("importing %s failed", mod_name, exc_info=True)
        raise StartupError('cannot load %r: importing module "%s" failed: %s: %s'
                           % (spec, mod_name, type(e).__name__, e))
    except BaseException as e:  # the module's own code failed (SyntaxError, SystemExit, ...)
        log.debug("importing %s failed", mod_name, exc_info=True)
        raise StartupError('cannot load %r: importing module "%s" failed: %s: %s'
                           % (spec, mod_name, type(e).__name__, _one_line(e)))
    obj = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise StartupError('cannot load %r: attribute "%s" not found in module "%s"' % (spec, attr, mod_name))
    if call:
        if not callable(obj):
            raise StartupError('cannot load %r: the factory "%s" is not callable' % (spec, attr))
        try:
            obj = obj()
        except BaseException as e:
            log.debug("factory %s failed", spec, exc_info=True)
            raise StartupError('cannot load %r: the factory raised %s: %s' % (spec, type(e).__name__, _one_line(e)))
    if not callable(obj):
        raise StartupError('cannot load %r: "%s" is a %s, not an application (a callable)'
                           % (spec, attr, type(obj).__name__))
    return obj


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or repr(e)


def detect_interface(app: Any) -> str:
    """"asgi" or "wsgi" by the rule in the module documentation; raises
    StartupError when the application fits neither."""
    if inspect.isclass(app):
        raise StartupError("the application is a class (%s), not an ASGI 3 or WSGI callable; "
                           "pass an instance or use --factory" % app.__qualname__)
    call = app if inspect.isfunction(app) or inspect.ismethod(app) else getattr(app, "__call__", None)
    if inspect.iscoroutinefunction(app) or inspect.iscoroutinefunction(call):
        return "asgi"
    try:
        sig = inspect.signature(app)
    except (TypeError, ValueError):
        sig = None
    if sig is not None:
        kinds = [p.kind for p in sig.parameters.values()]
        if inspect.Parameter.VAR_POSITIONAL not in kinds:
            n = sum(k in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD) for k in kinds)
            if n == 3:
                return "asgi"
            if n == 2:
                return "wsgi"
    raise StartupError("cannot tell whether %r is an ASGI or a WSGI application (its call takes %s); "
                       "pass --interface asgi or --interface wsgi"
                       % (app, "(%s)" % ", ".join(sig.parameters) if sig is not None else "unknown arguments"))


# ---- the socket ----

def bind_socket(args: argparse.Namespace) -> socket.socket:
    """The listening socket for --host/--port or --uds, bound once (by the
    supervisor when there are workers: every worker adopts it). Raises
    StartupError (port in use, bad address)."""
    if args.uds:
        path = args.uds
        try:
            if stat.S_ISSOCK(os.stat(path).st_mode):
                os.unlink(path)  # a stale socket of an earlier run, as uvicorn does
        except FileNotFoundError:
            pass
        except OSError as e:
            raise StartupError("cannot listen on unix:%s: %s" % (path, e.strerror), 1)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.bind(path)
            s.listen(args.backlog)
        except OSError as e:
            s.close()
            raise StartupError("cannot listen on unix:%s: %s" % (path, e.strerror), 1)
        return s
    host = args.host
    try:
        infos = socket.getaddrinfo(host or None, args.port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0,
                                   socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise StartupError("cannot listen on %s:%d: cannot resolve %r: %s" % (host, args.port, host, e.strerror), 1)
    fam, _, _, _, addr = infos[0]
    s = socket.socket(fam, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if getattr(args, "reuseport", False):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if fam == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.bind(addr)
        s.listen(args.backlog)
    except OSError as e:
        s.close()
        why = "address already in use" if e.errno == 98 else e.strerror
        raise StartupError("cannot listen on %s:%d: %s" % (_host_text(host), args.port, why), 1)
    return s


def inherited_socket() -> Optional[socket.socket]:
    """The listening socket systemd socket activation passed (LISTEN_FDS
    for this process: descriptor 3), or None. The variables are removed so
    workers and the application's children do not take it for theirs.
    More than one socket: the first is served, the others closed (the
    command serves one address)."""
    from .ops import inherited_fds
    try:
        fds = inherited_fds(True)
    except Exception as e:
        raise StartupError("LISTEN_FDS: %s" % e, EXIT_USAGE)
    if not fds:
        return None
    for fd in fds[1:]:
        log.warning("systemd passed %d sockets; serving the first, closing descriptor %d", len(fds), fd)
        os.close(fd)
    s = socket.socket(fileno=fds[0])
    if s.type != socket.SOCK_STREAM:
        s.close()
        raise StartupError("the socket systemd passed (descriptor %d) is not a stream socket" % fds[0], EXIT_USAGE)
    return s


def _host_text(host: str) -> str:
    return "[%s]" % host if ":" in host else host


def listen_url(args: argparse.Namespace, sock: socket.socket) -> str:
    """The URL the worker's protocol server listens on (scheme from TLS,
    the socket's real port)."""
    scheme = "https" if args.ssl_certfile else "http"
    if sock.family == socket.AF_UNIX:
        return "%s://localhost:0" % scheme
    port = sock.getsockname()[1]
    return "%s://%s:%d" % (scheme, _host_text(args.host or "0.0.0.0"), port)


def listening_line(args: argparse.Namespace, sock: socket.socket, interface: str) -> str:
    """The line printed once listening: "listening on PORT (URL, ...)"."""
    uds = args.uds or (sock.getsockname() if sock.family == socket.AF_UNIX else None)
    where = "unix:%s" % uds if sock.family == socket.AF_UNIX else str(sock.getsockname()[1])
    url = listen_url(args, sock)
    if sock.family == socket.AF_UNIX:
        url = "%s+unix://%s" % ("https" if args.ssl_certfile else "http", uds)
    procs = "%d worker%s" % (args.workers, "" if args.workers == 1 else "s") if args.workers else "pid %d" % os.getpid()
    return "listening on %s (%s, %s, %s)" % (where, url, interface, procs)


# ---- adopting the socket ----

def listen_fd(manager: Any, url: str, fd: int, handler: Optional[Callable] = None,
              ws_handler: Optional[Callable] = None) -> Any:
    """Serve connections of the listening socket `fd` (bound by the caller;
    the library owns it afterwards) on `manager` with the scheme (and TLS)
    of `url`, as Manager.http_listen(url, handler, ws_handler) does for a
    socket of its own. Returns the ConnectionRef (its port is the socket's;
    0 for a unix socket)."""
    from ._ffi import has, lib
    from ._manager import _not_found
    from .errors import NotSupportedError, check
    if not has("nsv_listen_fd"):
        raise NotSupportedError(lib.NSV_ENOTSUP, "sharing a listening socket needs nsv_listen_fd() "
                                "(libnanosrv 1.2), which the loaded libnanosrv does not export")
    if not isinstance(url, str):
        raise TypeError("url must be str, not %s" % type(url).__name__)
    if not isinstance(fd, int) or isinstance(fd, bool):
        raise TypeError("fd must be an int, not %s" % type(fd).__name__)
    u = url.encode()
    # Refused while another thread polls, as http_listen is.
    with manager._setup("listen_fd") as srv:
        lid = check(lib.nsv_listen_fd(srv, u, len(u), fd), srv)
    return manager._register_listener(lid, url, handler or _not_found, ws_handler, None)


def _adopting_manager(fd: int, url: str) -> Any:
    """A Manager whose next listener on `url` adopts `fd` instead of binding:
    the protocol servers listen through the Manager they are given, so they
    need not know the socket was inherited."""
    from ._manager import Manager

    class AdoptingManager(Manager):
        def _listen(self, u: str, fn: Any, ws: Any, events: Any, **lopts: Any) -> Any:
            nonlocal fd
            if fd < 0 or u != url:
                return super()._listen(u, fn, ws, events, **lopts)
            ref = listen_fd(self, u, fd, fn, ws)
            fd = -1  # the library owns it now
            self._listen_events[ref.id] = events
            self._listener_options(ref, lopts)
            return ref

    return AdoptingManager()


# ---- one server process ----

def configure_logging(level_name: str) -> None:
    """Log records to stderr, at the --log-level."""
    logging.addLevelName(TRACE, "TRACE")
    level = LOG_LEVELS[level_name]
    root = logging.getLogger()
    if not root.handlers:
        h = logging.StreamHandler(sys.stderr)
        h.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
        root.addHandler(h)
    root.setLevel(level)
    logging.getLogger("nanosrv").setLevel(level)


def _loop_factory(name: str) -> Optional[Callable[[], asyncio.AbstractEventLoop]]:
    if name == "asyncio":
        return None
    try:
        import uvloop  # type: ignore
    except ImportError:
        if name == "uvloop":
            raise StartupError("--loop uvloop: the uvloop module is not installed (Debian: python3-uvloop)",
                               EXIT_USAGE)
        return None
    return uvloop.new_event_loop


class Worker:
    """One server process: loads the application, adopts the listening
    socket `fd`, serves until SIGTERM/SIGINT (drain: in-flight requests
    finish) or --limit-max-requests, and returns its exit status.
    `ready()` is called once it accepts requests."""

    def __init__(self, args: argparse.Namespace, fd: int, ready: Optional[Callable[[], None]] = None,
                 interface: Optional[str] = None) -> None:
        self.args = args
        self.fd = fd
        self.ready = ready
        self.interface = interface
        self.manager: Any = None
        self.stopping = False
        self._drain_fn: Optional[Callable[[], None]] = None

    def load(self) -> Any:
        """The application, and self.interface set (StartupError if not)."""
        a = self.args
        app = import_from_string(a.app, a.factory)
        if self.interface is None:
            self.interface = a.interface if a.interface != "auto" else detect_interface(app)
        return app

    def _manager(self, url: str) -> Any:
        m = _adopting_manager(self.fd, url)
        a = self.args
        if a.ssl_certfile:
            from .errors import Error
            try:
                m.set_tls(cert=a.ssl_certfile, key=a.ssl_keyfile, password=a.ssl_keyfile_password,
                          ca=a.ssl_ca_certs, verify_client=a.ssl_cert_reqs if a.ssl_ca_certs else None)
            except (Error, OSError, ValueError, TypeError) as e:
                raise StartupError("bad TLS settings (--ssl-certfile %s --ssl-keyfile %s): %s"
                                   % (a.ssl_certfile, a.ssl_keyfile, e), EXIT_BOOT_ERROR)
        if a.max_conns:
            m.set_max_connections(a.max_conns)
        if not a.shed:
            m.set_option("shed", 0)
        from .ops import metrics_handler, readyz_handler
        if a.metrics_path:
            m.get(a.metrics_path, metrics_handler(m))
        if a.readyz_path:
            m.get(a.readyz_path, readyz_handler(m))
        self.manager = m
        return m

    def _drain(self) -> None:
        if not self.stopping:
            self.stopping = True
            if self._drain_fn is not None:
                self._drain_fn()
            else:
                self.manager.drain_start(max(1, int(self.args.timeout_graceful_shutdown * 1000)))

    def _listen(self, srv: Any, m: Any, url: str) -> Any:
        from .errors import Error
        try:
            return srv.listen(m, url, **listener_options(self.args))
        except Error as e:
            a = self.args
            if a.ssl_certfile:  # the certificate and key are parsed by the first TLS listener
                raise StartupError("bad TLS settings (--ssl-certfile %s --ssl-keyfile %s): %s"
                                   % (a.ssl_certfile, a.ssl_keyfile, e), EXIT_BOOT_ERROR)
            raise StartupError("cannot serve %s: %s" % (url, e), EXIT_BOOT_ERROR)

    def run(self) -> int:
        """Serve; returns the process exit status."""
        app = self.load()
        sock_url = self._url()
        if self.interface == "asgi":
            return self._run_asgi(app, sock_url)
        return self._run_wsgi(app, sock_url)

    def _url(self) -> str:
        s = socket.socket(fileno=os.dup(self.fd))
        try:
            return listen_url(self.args, s)
        finally:
            s.close()

    def _run_asgi(self, app: Any, url: str) -> int:
        a = self.args
        if a.threads:
            log.warning("--threads applies to WSGI applications; ignored for this ASGI one")
        try:
            from .asgi import Server as AsgiServer  # type: ignore
        except ImportError as e:
            raise StartupError("ASGI applications need nanosrv.asgi, which cannot be imported: %s" % e)
        factory = _loop_factory(a.loop)
        opts = dict(root_path=a.root_path, lifespan=a.lifespan, access_log=a.access_log,
                    limit_max_requests=a.limit_max_requests, ws_max_size=a.ws_max_size,
                    ws_ping_interval=a.ws_ping_interval)
        if _accepts(AsgiServer, "timeout_graceful_shutdown"):
            opts["timeout_graceful_shutdown"] = a.timeout_graceful_shutdown
        srv = AsgiServer(app, **opts)
        m = self._manager(url)
        self._listen(srv, m, url)
        if hasattr(srv, "drain"):
            # The server's own drain also bounds the app tasks still running.
            self._drain_fn = lambda: srv.drain(m)

        async def main() -> None:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self._drain)
            try:
                await srv.startup()
            except Exception as e:
                raise StartupError("application startup failed: %s" % _one_line(e))
            if self.ready is not None:
                self.ready()
            await srv.serve(m)
            await srv.shutdown()

        try:
            with asyncio.Runner(loop_factory=factory) as runner:
                runner.run(main())
        finally:
            m.close()
        return 0

    def _run_wsgi(self, app: Any, url: str) -> int:
        a = self.args
        from .wsgi import Server as WsgiServer
        m = self._manager(url)
        srv = WsgiServer(app, threads=4 if a.threads is None else a.threads, root_path=a.root_path,
                         access_log=a.access_log, limit_max_requests=a.limit_max_requests)
        self._listen(srv, m, url)
        old = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            old[sig] = signal.signal(sig, lambda s, f: self._drain())
        if self.ready is not None:
            self.ready()
        try:
            srv.run(m)
        finally:
            for sig, h in old.items():
                signal.signal(sig, h)
            srv.close()
            m.close()
        return 0


def _accepts(fn: Any, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


# ---- the command ----

def version_text() -> str:
    """"nanosrv X (libnanosrv Y) on CPython Z"."""
    from . import __version__
    from .util import version
    return "nanosrv %s (libnanosrv %s) on %s %s" % (__version__, version(), sys.implementation.name,
                                                    ".".join(map(str, sys.version_info[:3])))


def _set_app_dir(app_dir: str) -> None:
    d = os.path.abspath(app_dir)
    if d not in sys.path:
        sys.path.insert(0, d)


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of `python3 -m nanosrv` and the `nanosrv` script; returns
    the exit status (0 after a graceful stop)."""
    args = parse_args(argv)
    if args.version:
        print(version_text())
        return 0
    configure_logging(args.log_level)
    try:
        _loop_factory(args.loop)  # --loop uvloop without uvloop fails here, before any fork
        # systemd socket activation: the unit's socket instead of binding
        # (--host, --port and --uds are not used then).
        sock = inherited_socket()
        if sock is None:
            sock = bind_socket(args)
        elif sock.family != socket.AF_UNIX:
            args.host = sock.getsockname()[0]  # what the URL and ASGI "server" say
    except StartupError as e:
        print("nanosrv: error: %s" % e, file=sys.stderr, flush=True)
        return e.status
    if args.workers:
        from ._supervisor import Supervisor
        return Supervisor(args, sock).run()
    return serve_single(args, sock)


def serve_single(args: argparse.Namespace, sock: socket.socket) -> int:
    """One process, no supervisor: the application is loaded here."""
    _set_app_dir(args.app_dir)
    fd = os.dup(sock.fileno())
    w = Worker(args, fd)

    def ready() -> None:
        print(listening_line(args, sock, w.interface or "?"), flush=True)
        sock.close()  # the library holds the socket now
    w.ready = ready
    try:
        return w.run()
    except StartupError as e:
        print("nanosrv: error: %s" % e, file=sys.stderr, flush=True)
        return e.status
    except KeyboardInterrupt:
        return 0
    finally:
        if args.uds:
            _unlink(args.uds)


def _unlink(path: str) -> None:
    try:
        if stat.S_ISSOCK(os.stat(path).st_mode):
            os.unlink(path)
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main())
