"""TLS settings of a server, by name, for https://, wss:// and tls://
listeners and for outbound tls:// connections.

    srv = nanosrv.Manager()
    srv.set_tls(cert="server.crt", key="server.key")          # files
    srv.set_tls(cert=pem_bytes, key=key_pem, password="s3")   # PEM in memory
    srv.set_tls(ca="ca.crt", verify_client="required")        # mutual TLS
    srv.http_listen("https://127.0.0.1:8443", handler)

A value is PEM when it is bytes or text containing "-----BEGIN", else a
file name (str or os.PathLike). Files are read at once: a missing file, bad
PEM or a wrong password raises nanosrv.TlsError whose message is the
library's reason. Settings are checked by the first TLS listener and fixed
from then on.
"""
import os

from ._ffi import lib
from .errors import check

_VERIFY = {"none": 0, "optional": 1, "required": 2}


def _is_pem(v):
    if isinstance(v, (bytes, bytearray, memoryview)):
        return True
    return isinstance(v, str) and "-----BEGIN" in v


def _set_str(mgr, opt, value):
    srv = mgr._live()
    v = bytes(value) if isinstance(value, (bytearray, memoryview)) else value
    if isinstance(v, str):
        v = v.encode("utf-8")
    check(lib.nsv_set_str(srv, opt, v, len(v)), srv)


def _set_pem_or_file(mgr, value, file_opt, pem_opt, what):
    if _is_pem(value):
        _set_str(mgr, pem_opt, value)
        return
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError("%s must be a file name or PEM bytes, not %s" % (what, type(value).__name__))
    _set_str(mgr, file_opt, os.fsencode(value))


def verify_level(v):
    """0/1/2 from False/True, 0/1/2 or "none"/"optional"/"required"."""
    if isinstance(v, bool):
        return 2 if v else 0
    if isinstance(v, int) and v in (0, 1, 2):
        return v
    if isinstance(v, str) and v.lower() in _VERIFY:
        return _VERIFY[v.lower()]
    raise ValueError("verify_client must be 'none', 'optional', 'required' (or 0, 1, 2), not %r" % (v,))


def configure(mgr, cert=None, key=None, ca=None, password=None, verify_client=None, client_ca=None,
              verify_server=None):
    """Set TLS options of `mgr` (a Manager); arguments left None are not
    touched. cert/key/ca/client_ca: file name or PEM; password: the key's;
    verify_client: "none" (default), "optional" (a certificate, if sent,
    must verify against `ca`) or "required"; client_ca: CA for outbound
    tls:// connections (default: the system bundle); verify_server=False
    turns off the outbound certificate and host name check (tests only)."""
    # The password first: the key file is parsed with it.
    if password is not None:
        _set_str(mgr, lib.NSV_OPT_TLS_KEY_PASSWORD, password)
    if cert is not None:
        _set_pem_or_file(mgr, cert, lib.NSV_OPT_TLS_CERT_FILE, lib.NSV_OPT_TLS_CERT_PEM, "cert")
    if key is not None:
        _set_pem_or_file(mgr, key, lib.NSV_OPT_TLS_KEY_FILE, lib.NSV_OPT_TLS_KEY_PEM, "key")
    if ca is not None:
        _set_pem_or_file(mgr, ca, lib.NSV_OPT_TLS_CA_FILE, lib.NSV_OPT_TLS_CA_PEM, "ca")
    if verify_client is not None:
        srv = mgr._live()
        check(lib.nsv_set_int(srv, lib.NSV_OPT_TLS_VERIFY_CLIENT, verify_level(verify_client)), srv)
    if client_ca is not None:
        _set_pem_or_file(mgr, client_ca, lib.NSV_OPT_TLS_CLIENT_CA_FILE, lib.NSV_OPT_TLS_CLIENT_CA_PEM,
                         "client_ca")
    if verify_server is not None:
        srv = mgr._live()
        check(lib.nsv_set_int(srv, lib.NSV_OPT_TLS_VERIFY_SERVER, 1 if verify_server else 0), srv)
