/* tls.h - TLS (mbedTLS) for connections: server handshakes for https://,
 * wss:// and tls:// listeners, outbound client sessions, and the hooks the
 * loop calls. Without NSV_WITH_MBEDTLS every hook is an inline stub, so the
 * callers need no #ifdefs and a TLS listener fails with NSV_ENOTSUP.
 *
 * Threading: every mbedTLS object (config, RNG, certificates, keys) exists
 * once per loop and is only touched by that loop's thread, because mbedTLS
 * contexts are not safe to share unless the library was built with
 * MBEDTLS_THREADING_C (and even then an EC key's lazy tables are not).
 * Configuration is parsed from the server's string options: for listeners
 * at the first TLS nsv_listen (errors are reported there), for outbound
 * sessions lazily by each loop at its first nsv__tls_client_start. After
 * that the matching options are frozen (nsv_set_str returns NSV_ESTATE).
 *
 * Handshake lifecycle of a connection c with c->tls set:
 *   - nsv__tls_handshake(l, c) drives it (the loop calls it on every event
 *     of the connection before anything else). It returns 0 while in
 *     progress (EPOLLIN/EPOLLOUT armed as mbedTLS asks), 2 when it has just
 *     completed, 1 when it was already complete, and -1 when it failed: the
 *     connection is then closed and counted (NSV_OPT_TLS_HANDSHAKE_FAILURES).
 *   - nsv__io_recv / nsv__io_send (net/io.h) carry application data.
 *   - The request deadline set at accept bounds a stalled handshake; the
 *     sweep closes such a connection without writing (req_started is 0).
 */
#ifndef NSV_TLS_H
#define NSV_TLS_H

#include "../loop/loop.h"
#include <errno.h>
#include <sys/types.h>

/* nsv__listener.tls values. */
enum { NSV__TLS_NONE = 0, NSV__TLS_HTTP = 1 /* ALPN http/1.1 */, NSV__TLS_RAW = 2 /* no ALPN */ };

/* Called with a slot whose TLS session holds decrypted bytes not yet read. */
typedef void (*nsv__tls_event_fn)(nsv__loop *l, uint32_t slot, uint32_t events);

#ifdef NSV_WITH_MBEDTLS

/* Store a string option (enum nsv_str_option); NULL or len 0 clears it. */
int nsv__tls_set_str(nsv_server *s, int opt, const char *v, size_t len);
/* Build the listener side of every loop from the options (idempotent).
 * NSV_ETLS with the mbedTLS message in the error detail on bad input. */
int nsv__tls_server_init(nsv_server *s);
/* Free the server's option strings (after the loops are freed). */
void nsv__tls_server_free(nsv_server *s);
/* Free a loop's mbedTLS objects (after its connections are closed). */
void nsv__tls_loop_free(nsv__loop *l);

/* Start a server session on a connection accepted by a TLS listener
 * (kind: NSV__TLS_HTTP or NSV__TLS_RAW). 0, or NSV_ENOMEM / NSV_ETLS. */
int nsv__tls_accept(nsv__loop *l, nsv__conn *c, int kind);
/* Outbound: start a client session on a connected socket. host (not
 * NUL-terminated; hlen 0: no SNI, no name check) is sent as SNI and, when
 * verify is 1 (-1: unless NSV_OPT_TLS_VERIFY_SERVER is 0; 0: never),
 * checked against the server certificate, which must chain to the CA of
 * NSV_OPT_TLS_CLIENT_CA_FILE / _PEM (default: the system bundle
 * /etc/ssl/certs/ca-certificates.crt). Call it once the TCP connect has
 * completed, then call nsv__tls_handshake(l, c) to send the ClientHello;
 * the loop drives the rest, and the caller learns of completion from
 * nsv__tls_handshake returning 2 (e.g. to emit NSV_EV_TCP_CONNECTED).
 * 0, or NSV_ENOMEM / NSV_ETLS (detail set). */
int nsv__tls_client_start(nsv__loop *l, nsv__conn *c, const char *host, size_t hlen, int verify);
/* Drive the handshake; see the lifecycle above. */
int nsv__tls_handshake(nsv__loop *l, nsv__conn *c);
/* Free the session; sends close_notify first when it can go at once. */
void nsv__tls_free(nsv__loop *l, nsv__conn *c);

/* Data path behind nsv__io_recv / nsv__io_send (recv/send contract). */
ssize_t nsv__tls_recv(nsv__loop *l, nsv__conn *c, char *buf, size_t n);
ssize_t nsv__tls_send(nsv__loop *l, nsv__conn *c, const char *buf, size_t n);

/* Decrypted bytes can wait inside mbedTLS after the socket was drained,
 * where level-triggered epoll cannot see them. nsv__tls_has_ready tells the
 * loop not to sleep; nsv__tls_run_pending calls fn(l, slot, EPOLLIN) for
 * each such connection that is reading. */
int nsv__tls_has_ready(nsv__loop *l);
void nsv__tls_run_pending(nsv__loop *l, nsv__tls_event_fn fn);

/* Event block "sni\0peer_subject\0" of a TLS connection: its length (0 for
 * plain connections) and a writer that returns the bytes written. */
/* The protocol ALPN chose once the handshake is done ("h2", "http/1.1"), or NULL. */
const char *nsv__tls_alpn(const nsv__conn *c);
uint32_t nsv__tls_info_len(const nsv__conn *c);
uint32_t nsv__tls_info_put(const nsv__conn *c, char *dst);

#else /* no TLS in this build */

static inline int nsv__tls_set_str(nsv_server *s, int opt, const char *v, size_t len)
{
    (void)v, (void)len;
    return nsv__set_detail(s, NSV_ENOTSUP, "nsv_set_str: option %d is a TLS option and this build has "
                           "no TLS (nsv_tls_available() is 0)", opt);
}
static inline int nsv__tls_server_init(nsv_server *s)
{
    return nsv__set_detail(s, NSV_ENOTSUP, "nsv_listen: a TLS URL needs TLS, which this build lacks "
                           "(nsv_tls_available() is 0)");
}
static inline void nsv__tls_server_free(nsv_server *s) { (void)s; }
static inline void nsv__tls_loop_free(nsv__loop *l) { (void)l; }
static inline int nsv__tls_accept(nsv__loop *l, nsv__conn *c, int kind)
{
    (void)l, (void)c, (void)kind;
    return NSV_ENOTSUP;
}
static inline int nsv__tls_client_start(nsv__loop *l, nsv__conn *c, const char *host, size_t hlen, int verify)
{
    (void)c, (void)host, (void)hlen, (void)verify;
    return nsv__set_detail(l->srv, NSV_ENOTSUP, "TLS is not available in this build");
}
static inline int nsv__tls_handshake(nsv__loop *l, nsv__conn *c) { (void)l, (void)c; return 1; }
static inline void nsv__tls_free(nsv__loop *l, nsv__conn *c) { (void)l, (void)c; }
static inline int nsv__tls_has_ready(nsv__loop *l) { (void)l; return 0; }
static inline void nsv__tls_run_pending(nsv__loop *l, nsv__tls_event_fn fn) { (void)l, (void)fn; }
static inline const char *nsv__tls_alpn(const nsv__conn *c) { (void)c; return NULL; }
static inline uint32_t nsv__tls_info_len(const nsv__conn *c) { (void)c; return 0; }
static inline uint32_t nsv__tls_info_put(const nsv__conn *c, char *dst) { (void)c, (void)dst; return 0; }

#endif
#endif
