/* listener_api.c - per-listener options (the PROXY protocol and address
 * lists, kept in the listener's struct nsv__edge, loop/edge.h) and the
 * sockets a supervisor passes by the systemd socket activation protocol. */
#include "server.h"
#include "../loop/edge.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROXY_TIMEOUT_DEFAULT 5000
#define PROXY_TIMEOUT_MAX (24 * 3600 * 1000)

static int check_listener(nsv_server *s, const char *call, int listener)
{
    if (listener < 0 || listener >= s->nlisteners)
        return nsv__set_detail(s, NSV_EINVAL, "%s: no listener %d (the server has %d)", call, listener,
                               s->nlisteners);
    return NSV_OK;
}

static struct nsv__edge *edge_of(nsv_server *s, int listener)
{
    nsv__listener *L = &s->listeners[listener];
    if (!L->edge) {
        L->edge = nsv__calloc(&s->alloc, sizeof *L->edge);
        if (L->edge)
            L->edge->timeout_ms = PROXY_TIMEOUT_DEFAULT;
    }
    return L->edge;
}

static int set_int(nsv_server *s, int listener, int opt, int64_t v)
{
    const char *call = "nsv_listener_set_int";
    if (opt == NSV_LOPT_PROXY_PROTOCOL) {
        if (v < NSV_PROXY_OFF || v > NSV_PROXY_ANY)
            return nsv__set_detail(s, NSV_ERANGE, "%s(proxy_protocol): %lld is not 0-3 (NSV_PROXY_*)", call,
                                   (long long)v);
    } else if (opt == NSV_LOPT_PROXY_TIMEOUT_MS) {
        if (v < 1 || v > PROXY_TIMEOUT_MAX)
            return nsv__set_detail(s, NSV_ERANGE, "%s(proxy_timeout_ms): %lld is not 1-%d", call, (long long)v,
                                   PROXY_TIMEOUT_MAX);
    } else {
        return nsv__set_detail(s, NSV_EINVAL, "%s: %d is not an integer listener option", call, opt);
    }
    struct nsv__edge *e = edge_of(s, listener);
    if (!e)
        return nsv__set_detail(s, NSV_ENOMEM, "%s: out of memory", call);
    if (opt == NSV_LOPT_PROXY_PROTOCOL)
        e->proxy = (int)v;
    else
        e->timeout_ms = v;
    return NSV_OK;
}

int nsv_listener_set_int(nsv_server *s, int listener, int opt, int64_t value)
{
    if (!s)
        return NSV_EINVAL;
    int r = nsv__setup_begin(s, "nsv_listener_set_int", "set listener options");
    if (r)
        return r;
    r = check_listener(s, "nsv_listener_set_int", listener);
    if (!r)
        r = set_int(s, listener, opt, value);
    nsv__setup_end(s);
    return r;
}

int64_t nsv_listener_get_int(nsv_server *s, int listener, int opt)
{
    if (!s)
        return NSV_EINVAL;
    int r = check_listener(s, "nsv_listener_get_int", listener);
    if (r)
        return r;
    const struct nsv__edge *e = s->listeners[listener].edge;
    if (opt == NSV_LOPT_PROXY_PROTOCOL)
        return e ? e->proxy : NSV_PROXY_OFF;
    if (opt == NSV_LOPT_PROXY_TIMEOUT_MS)
        return e ? e->timeout_ms : PROXY_TIMEOUT_DEFAULT;
    return nsv__set_detail(s, NSV_EINVAL, "nsv_listener_get_int: %d is not an integer listener option", opt);
}

static const char *list_name(int which)
{
    return which == NSV__EL_FROM ? "proxy_from" : which == NSV__EL_ALLOW ? "allow" : "deny";
}

static int set_str(nsv_server *s, int listener, int opt, const char *v, size_t len)
{
    const char *call = "nsv_listener_set_str";
    int which = opt == NSV_LOPT_PROXY_FROM ? NSV__EL_FROM
                : opt == NSV_LOPT_ALLOW    ? NSV__EL_ALLOW
                : opt == NSV_LOPT_DENY     ? NSV__EL_DENY
                                           : -1;
    if (which < 0)
        return nsv__set_detail(s, NSV_EINVAL, "%s: %d is not a string listener option", call, opt);
    if (!v)
        len = 0;
    nsv__cidr *tmp = NULL, *list = NULL;
    int n = 0;
    if (len) {
        tmp = nsv__malloc(&s->alloc, NSV__CIDR_MAX * sizeof *tmp);
        if (!tmp)
            return nsv__set_detail(s, NSV_ENOMEM, "%s: out of memory", call);
        const char *bad = NULL;
        size_t badlen = 0;
        n = nsv__cidr_parse(v, len, tmp, &bad, &badlen);
        if (n == NSV_EINVAL) {
            nsv__free(&s->alloc, tmp);
            return nsv__set_detail(s, NSV_EINVAL,
                                   "%s(%s): \"%.*s\" is not an IPv4 or IPv6 address with an optional "
                                   "prefix length (host bits past the prefix must be 0)",
                                   call, list_name(which), (int)(badlen > 64 ? 64 : badlen), bad);
        }
        if (n == NSV_ERANGE) {
            nsv__free(&s->alloc, tmp);
            return nsv__set_detail(s, NSV_ERANGE, "%s(%s): more than %d entries", call, list_name(which),
                                   NSV__CIDR_MAX);
        }
        if (n > 0) {
            list = nsv__malloc(&s->alloc, (size_t)n * sizeof *list);
            if (!list) {
                nsv__free(&s->alloc, tmp);
                return nsv__set_detail(s, NSV_ENOMEM, "%s: out of memory", call);
            }
            memcpy(list, tmp, (size_t)n * sizeof *list);
        }
        nsv__free(&s->alloc, tmp);
    }
    struct nsv__edge *e = n || s->listeners[listener].edge ? edge_of(s, listener) : NULL;
    if (n && !e) {
        nsv__free(&s->alloc, list);
        return nsv__set_detail(s, NSV_ENOMEM, "%s: out of memory", call);
    }
    if (!e)
        return NSV_OK; /* clearing a list never set */
    nsv__free(&s->alloc, e->list[which]);
    e->list[which] = list;
    e->nlist[which] = n;
    return NSV_OK;
}

int nsv_listener_set_str(nsv_server *s, int listener, int opt, const char *value, size_t len)
{
    if (!s)
        return NSV_EINVAL;
    int r = nsv__setup_begin(s, "nsv_listener_set_str", "set listener options");
    if (r)
        return r;
    r = check_listener(s, "nsv_listener_set_str", listener);
    if (!r)
        r = set_str(s, listener, opt, value, len);
    nsv__setup_end(s);
    return r;
}

/* A decimal number without sign or leading zeros into *out; -1 if not. */
static int parse_dec(const char *s, long long max, long long *out)
{
    if (!s || !*s || (s[0] == '0' && s[1]))
        return -1;
    long long v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        v = v * 10 + (*s - '0');
        if (v > max)
            return -1;
    }
    *out = v;
    return 0;
}

static int inherited(void)
{
    const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
    if (!pid)
        return 0;
    long long p, n;
    if (parse_dec(pid, 0x7FFFFFFF, &p) != 0)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_inherited_fds: LISTEN_PID \"%.32s\" is not a process id", pid);
    if (p != (long long)getpid())
        return 0; /* meant for another process (the parent that started us) */
    if (!fds)
        return 0;
    if (parse_dec(fds, 0x7FFFFFFF - 3, &n) != 0)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_inherited_fds: LISTEN_FDS \"%.32s\" is not a count", fds);
    const char *names = getenv("LISTEN_FDNAMES");
    if (names && n > 0) {
        long long k = 1;
        for (const char *c = names; *c; c++)
            k += *c == ':';
        if (k != n)
            return nsv__set_detail(NULL, NSV_EINVAL,
                                   "nsv_inherited_fds: LISTEN_FDNAMES names %lld sockets, LISTEN_FDS says %lld", k, n);
    }
    for (long long fd = 3; fd < 3 + n; fd++) {
        int fl = fcntl((int)fd, F_GETFD);
        if (fl < 0)
            return nsv__set_detail(NULL, NSV_EINVAL, "nsv_inherited_fds: LISTEN_FDS is %lld but descriptor %lld "
                                   "is not open", n, fd);
        /* As sd_listen_fds: they are ours now, not for processes we start. */
        fcntl((int)fd, F_SETFD, fl | FD_CLOEXEC);
    }
    return (int)n;
}

int nsv_inherited_fds(int unset_env)
{
    int r = inherited();
    if (unset_env) {
        unsetenv("LISTEN_PID");
        unsetenv("LISTEN_FDS");
        unsetenv("LISTEN_FDNAMES");
    }
    return r;
}
