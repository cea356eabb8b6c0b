/* edge.h - what happens at a connection's edge before its protocol sees
 * it: the listener's address lists and the PROXY protocol header
 * (edge.c, with the parsers in util/proxy_proto.c and util/cidr.c). */
#ifndef NSV_LOOP_EDGE_H
#define NSV_LOOP_EDGE_H

#include "loop.h"
#include "../util/cidr.h"

/* A listener's edge (allocated by the first nsv_listener_set_*): written
 * by setup calls only (a sharded server refuses them once its workers
 * run), read by the loops at accept. */
enum { NSV__EL_FROM = 0, NSV__EL_ALLOW = 1, NSV__EL_DENY = 2, NSV__EL_LISTS = 3 };
struct nsv__edge {
    int proxy;            /* enum nsv_proxy_version; its bits are NSV__PP_ACCEPT_* */
    int64_t timeout_ms;   /* NSV_LOPT_PROXY_TIMEOUT_MS */
    nsv__cidr *list[NSV__EL_LISTS];
    int nlist[NSV__EL_LISTS];
    /* The edge state of open connections, per loop (touched by that loop
     * only): a loop freed with the server frees its connections without
     * the edge hook, so the listener frees what is left. */
    struct nsv__edge_conn *live[NSV__MAX_LOOPS];
};

/* A connection's edge state: while its PROXY header is awaited, and then
 * (only when the header named a client) the front's fields for events. */
struct nsv__edge_conn {
    struct nsv__edge_conn *prev, *next; /* on owner->live[loop] */
    struct nsv__edge *owner;
    int loop;
    uint8_t *acc;        /* header bytes consumed before its end came (NSV__PP_MAX) */
    uint32_t acc_len;
    char *info;          /* "front\0front_port\0dst\0dst_port\0ssl\0authority\0alpn\0", NULL until read */
    uint32_t info_len;
};

/* At accept, before a byte is read: 0 to serve the connection from ss on
 * listener lidx, -1 to close it (counted by the caller as denied). Only
 * called when the listener has an edge. */
int nsv__edge_admit(nsv__loop *l, int lidx, const struct sockaddr_storage *ss);

/* After the connection is set up in nsv__loop_adopt and registered with
 * epoll: 1 when the edge took it over (a PROXY header must come first; the
 * edge starts TLS and calls the protocol's on_open once it is read), 0 to
 * go on as usual, -1 when c was closed. Only called when the listener has
 * an edge. */
int nsv__edge_adopt(nsv__loop *l, nsv__conn *c, int lidx);

/* The block events carry at tls_off/tls_len (see nanosrv.h), its length,
 * and the event flags it implies (NSV_EVF_TLS, NSV_EVF_PROXY). */
uint32_t nsv__conn_info_len(const nsv__conn *c);
uint32_t nsv__conn_info_put(const nsv__conn *c, char *dst);
uint32_t nsv__conn_info_flags(const nsv__conn *c);

/* Queue an event of c without a body (TCP_OPEN): as nsv__evq_emit does,
 * with NSV_EVF_PROXY and the block above when c came through a PROXY
 * header. 0 or NSV_ENOMEM. */
int nsv__edge_emit_open(nsv__loop *l, nsv__conn *c, uint32_t type);

/* A connection's edge state is freed with it. */
void nsv__edge_conn_free(nsv__loop *l, nsv__conn *c);

/* A listener's edge is freed with the server. */
void nsv__edge_free(nsv_server *s, struct nsv__edge *e);

#endif
