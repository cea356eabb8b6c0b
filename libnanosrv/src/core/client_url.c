/* client_url.c - the URL rules of the outbound clients (nsv_http_request,
 * nsv_ws_connect): one scheme or its TLS form, a host, a port, and the
 * target sent as given. */
#include "server.h"
#include <string.h>

int nsv__client_url(nsv_server *s, const char *call, const char *url, size_t len, const char *scheme, nsv_url *u,
                    int *tls, const char **target, size_t *tlen)
{
    if (nsv_url_parse(url, len, u) != 0)
        return nsv__set_detail(s, NSV_EURL, "%s: url: %s", call, nsv_last_error_detail(NULL));
    size_t n = strlen(scheme);
    const char *sc = url + u->scheme_off;
    *tls = u->scheme_len == n + 1 && nsv__strncaseeq(sc, scheme, n) && (sc[n] == 's' || sc[n] == 'S');
    if (!*tls && !(u->scheme_len == n && nsv__strncaseeq(sc, scheme, n)))
        return nsv__set_detail(s, NSV_EURL, "%s: url: scheme '%.*s' is not %s:// or %ss://", call,
                               (int)u->scheme_len, sc, scheme, scheme);
    if (*tls && !nsv_tls_available())
        return nsv__set_detail(s, NSV_ENOTSUP, "%s: %ss:// needs TLS, which this build lacks "
                               "(nsv_tls_available() is 0)", call, scheme);
    if (u->host_len == 0 || u->host_len > 255)
        return nsv__set_detail(s, NSV_EURL, "%s: url: the host is %u bytes; 1-255 allowed", call,
                               (unsigned)u->host_len);
    if (u->port <= 0 || u->port > 65535)
        return nsv__set_detail(s, NSV_EURL, "%s: url: port %d is not 1-65535", call, (int)u->port);
    if (memchr(url, '#', len))
        return nsv__set_detail(s, NSV_EURL, "%s: url: a fragment ('#') is never sent; remove it", call);
    if (!u->path_len && u->query_len)
        return nsv__set_detail(s, NSV_EURL, "%s: url: a query needs a path (\"/?...\")", call);
    /* The target: path and query as given; "/" for an empty path. */
    *target = "/";
    *tlen = 1;
    if (u->path_len) {
        *target = url + u->path_off;
        *tlen = (u->query_len ? u->query_off + u->query_len : u->path_off + u->path_len) - u->path_off;
    }
    return NSV_OK;
}
