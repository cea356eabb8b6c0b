/* ws_client.c - nsv_ws_connect against the library's own WebSocket server,
 * on the same server (single loop and sharded, the calls made from the
 * polling thread and from other threads): the handshake (path, query,
 * headers, subprotocols), echo of text, binary, empty and large messages,
 * pings both ways, close started by either side, pause, tags, broadcast
 * not reaching clients, and the failures before the open (refused, not a
 * 101, bad arguments).
 *
 * With arguments it is the driver of test_ws_client.py instead:
 *   ws_client --drive URL [--protocols P] [--header LINE] [--send TEXT]...
 *             [--binary N] [--close CODE] [--wait-close] [--ca FILE]
 *             [--workers N] [--opt NAME=VALUE]...
 * prints one line per event of the connection (open, message, ping,
 * close, error, closed) and exits 0 once it is closed. */
#include "tap.h"
#define NSVNET_NO_BUFFERS
#include "nsvnet.h"
#include <nanosrv.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { R_WS = 1, R_PROTO = 2, R_PLAIN = 3 };

/* ---- what the client side saw ---- */

typedef struct rec {
    uint32_t type, flags;
    int32_t code;
    uint64_t conn, tag;
    char *body;
    size_t blen;
    char path[128], query[128], proto[64];
} rec;

#define MAXREC 4096
static rec recs[MAXREC];
static int nrec;

#define MAXCLI 256
static uint64_t clients[MAXCLI];
static int nclients;
static pthread_mutex_t cli_lock = PTHREAD_MUTEX_INITIALIZER;

static void add_client(uint64_t id)
{
    pthread_mutex_lock(&cli_lock);
    if (nclients < MAXCLI)
        clients[nclients++] = id;
    pthread_mutex_unlock(&cli_lock);
}

static int is_client(uint64_t id)
{
    pthread_mutex_lock(&cli_lock);
    int yes = 0;
    for (int i = 0; i < nclients && !yes; i++)
        yes = clients[i] == id;
    pthread_mutex_unlock(&cli_lock);
    return yes;
}

/* ---- the server side: what the routes do ---- */

static char seen_origin[128], seen_protocols[128];
static int server_pongs, server_closes, server_close_code, server_got_all;
static char server_close_reason[64];
static uint64_t last_server_ws;

static void hdr(const nsv_event *e, const char *a, const char *name, char *out, size_t cap)
{
    uint32_t vl = 0;
    int64_t off = nsv_ev_header(e, a, name, strlen(name), &vl);
    out[0] = 0;
    if (off >= 0)
        snprintf(out, cap, "%.*s", (int)vl, a + off);
}

static void server_event(nsv_server *s, const nsv_event *e, const char *a)
{
    switch (e->type) {
    case NSV_EV_REQUEST:
        if (e->route == R_PROTO) {
            hdr(e, a, "Origin", seen_origin, sizeof seen_origin);
            hdr(e, a, "Sec-WebSocket-Protocol", seen_protocols, sizeof seen_protocols);
            nsv_ws_upgrade(s, e->conn, "Sec-WebSocket-Protocol: v2\r\n", 28);
        } else if (e->route == R_PLAIN) {
            nsv_reply(s, e->conn, 200, NULL, 0, "hi", 2);
        } else {
            nsv_reply(s, e->conn, 404, NULL, 0, "no", 2);
        }
        break;
    case NSV_EV_WS_OPEN:
        last_server_ws = e->conn;
        break;
    case NSV_EV_WS_MESSAGE:
        last_server_ws = e->conn;
        if (e->body_len == 3 && memcmp(a + e->body_off, "all", 3) == 0)
            server_got_all++;
        if (e->body_len == 8 && memcmp(a + e->body_off, "close-me", 8) == 0)
            nsv_ws_close(s, e->conn, 4001, "srv", 3);
        else if (e->body_len == 7 && memcmp(a + e->body_off, "ping-me", 7) == 0)
            nsv_ws_send(s, e->conn, NSV_WS_PING, "sp", 2);
        else
            nsv_ws_send(s, e->conn, e->code, a + e->body_off, e->body_len);
        break;
    case NSV_EV_WS_PONG:
        server_pongs++;
        break;
    case NSV_EV_WS_CLOSE:
        server_closes++;
        server_close_code = e->code;
        snprintf(server_close_reason, sizeof server_close_reason, "%.*s", (int)e->body_len, a + e->body_off);
        break;
    }
}

static void client_event(const nsv_event *e, const char *a)
{
    if (nrec >= MAXREC)
        return;
    rec *r = &recs[nrec++];
    memset(r, 0, sizeof *r);
    r->type = e->type;
    r->flags = e->flags;
    r->code = e->code;
    r->conn = e->conn;
    r->tag = e->tag;
    r->blen = e->body_len;
    r->body = malloc(e->body_len + 1);
    memcpy(r->body, a + e->body_off, e->body_len);
    r->body[e->body_len] = 0;
    if (e->type == NSV_EV_WS_OPEN) {
        snprintf(r->path, sizeof r->path, "%.*s", (int)e->path_len, a + e->path_off);
        snprintf(r->query, sizeof r->query, "%.*s", (int)e->query_len, a + e->query_off);
        hdr(e, a, "Sec-WebSocket-Protocol", r->proto, sizeof r->proto);
    }
}

static nsv_event evs[256];
static char *arena;
#define ARENA (8 << 20)

static void pump(nsv_server *s, int ms)
{
    int n = nsv_poll(s, evs, 256, arena, ARENA, ms);
    for (int i = 0; i < n; i++) {
        if (getenv("WSC_DEBUG"))
            fprintf(stderr, "ev type %u conn %llx code %d route %d client %d\n", evs[i].type,
                    (unsigned long long)evs[i].conn, evs[i].code, evs[i].route, is_client(evs[i].conn));
        /* Client connections have no route; a thread may not have noted
         * its id yet when the first event comes. */
        if (is_client(evs[i].conn) || (evs[i].route < 0 && evs[i].type != NSV_EV_REQUEST))
            client_event(&evs[i], arena);
        else
            server_event(s, &evs[i], arena);
    }
}

/* The first unconsumed client record of type for conn (0: any), pumping up
 * to tries polls of 20 ms; consumed records are marked with type 0. */
static rec *wait_rec(nsv_server *s, uint32_t type, uint64_t conn, int tries)
{
    for (int t = 0; t <= tries; t++) {
        for (int i = 0; i < nrec; i++)
            if (recs[i].type == type && (!conn || recs[i].conn == conn)) {
                recs[i].type = 0;
                return &recs[i];
            }
        if (t < tries)
            pump(s, 20);
    }
    return NULL;
}

static int count_rec(uint32_t type, uint64_t conn)
{
    int n = 0;
    for (int i = 0; i < nrec; i++)
        n += recs[i].type == type && (!conn || recs[i].conn == conn);
    return n;
}

static void clear_recs(void)
{
    for (int i = 0; i < nrec; i++)
        free(recs[i].body);
    nrec = 0;
    nclients = 0; /* the next server reuses the same ids */
}

static int64_t wsc(nsv_server *s, const char *url, const char *headers, const char *protos)
{
    int64_t id = nsv_ws_connect(s, url, strlen(url), headers, headers ? strlen(headers) : 0, protos,
                                protos ? strlen(protos) : 0, 0);
    if (id > 0)
        add_client((uint64_t)id);
    return id;
}

static int setup(nsv_server *s, int *port)
{
    nsv_set_int(s, NSV_OPT_WS_CONTROL_EVENTS, 1);
    nsv_route(s, "GET", 3, "/ws", 3, R_WS, NSV_ROUTE_WEBSOCKET);
    nsv_route(s, "GET", 3, "/proto", 6, R_PROTO, 0);
    nsv_route(s, "GET", 3, "/plain", 6, R_PLAIN, 0);
    int lid = nsv_listen(s, "http://127.0.0.1:0", 18);
    *port = lid >= 0 ? nsv_listener_port(s, lid) : -1;
    return *port > 0;
}

/* Open one client to path, checked. */
static uint64_t open_one(nsv_server *s, const char *kind, int port, const char *path, const char *headers,
                         const char *protos, rec **open_rec)
{
    char url[128];
    snprintf(url, sizeof url, "ws://127.0.0.1:%d%s", port, path);
    int64_t id = wsc(s, url, headers, protos);
    ok(id > 0, "%s: nsv_ws_connect %s -> an id (%s)", kind, path, id > 0 ? "ok" : nsv_last_error_detail(s));
    if (id <= 0)
        return 0;
    rec *r = wait_rec(s, NSV_EV_WS_OPEN, (uint64_t)id, 250);
    ok(r != NULL, "%s: WS_OPEN for %s", kind, path);
    if (!r) {
        rec *er = wait_rec(s, NSV_EV_ERROR, (uint64_t)id, 0);
        if (er)
            diag("error %d: %s", er->code, er->body);
        return 0;
    }
    if (open_rec)
        *open_rec = r;
    return (uint64_t)id;
}

static char *pattern(size_t n)
{
    char *p = malloc(n);
    for (size_t i = 0; i < n; i++)
        p[i] = (char)(i * 7 + i / 251);
    return p;
}

static void echo_and_close(nsv_server *s, const char *kind, int port)
{
    rec *o = NULL;
    uint64_t id = open_one(s, kind, port, "/proto?x=1&y=2", "Origin: http://origin.example\r\n", "chat, v2", &o);
    if (!id)
        return;
    is_int(o->code, 101, "%s: WS_OPEN code 101", kind);
    is_mem(o->path, strlen(o->path), "/proto", "%s: WS_OPEN path", kind);
    is_mem(o->query, strlen(o->query), "x=1&y=2", "%s: WS_OPEN query", kind);
    is_mem(o->proto, strlen(o->proto), "v2", "%s: WS_OPEN carries the chosen Sec-WebSocket-Protocol", kind);
    ok(!(o->flags & NSV_EVF_TLS), "%s: no NSV_EVF_TLS on ws://", kind);
    is_mem(seen_origin, strlen(seen_origin), "http://origin.example", "%s: the server saw the Origin header", kind);
    is_mem(seen_protocols, strlen(seen_protocols), "chat,v2", "%s: the server saw the offered subprotocols", kind);

    is_int(nsv_conn_set_tag(s, id, 77), NSV_OK, "%s: nsv_conn_set_tag", kind);
    is_int(nsv_ws_send(s, id, NSV_WS_TEXT, "hello", 5), NSV_OK, "%s: send text", kind);
    rec *m = wait_rec(s, NSV_EV_WS_MESSAGE, id, 250);
    ok(m && m->code == NSV_WS_TEXT && m->blen == 5 && !memcmp(m->body, "hello", 5), "%s: text echoed", kind);
    ok(m && m->tag == 77, "%s: the event carries the tag", kind);

    is_int(nsv_ws_send(s, id, NSV_WS_TEXT, "", 0), NSV_OK, "%s: send empty text", kind);
    m = wait_rec(s, NSV_EV_WS_MESSAGE, id, 250);
    ok(m && m->code == NSV_WS_TEXT && m->blen == 0, "%s: empty text echoed", kind);

    size_t big = 300000; /* 64-bit length, many reads */
    char *p = pattern(big);
    is_int(nsv_ws_send(s, id, NSV_WS_BINARY, p, big), NSV_OK, "%s: send %zu binary bytes", kind, big);
    m = wait_rec(s, NSV_EV_WS_MESSAGE, id, 500);
    ok(m && m->code == NSV_WS_BINARY && m->blen == big && !memcmp(m->body, p, big), "%s: binary echoed intact",
       kind);
    free(p);
    p = pattern(200);
    is_int(nsv_ws_send(s, id, NSV_WS_BINARY, p, 200), NSV_OK, "%s: send 200 bytes (16-bit length)", kind);
    m = wait_rec(s, NSV_EV_WS_MESSAGE, id, 250);
    ok(m && m->blen == 200 && !memcmp(m->body, p, 200), "%s: 200 bytes echoed", kind);
    free(p);

    /* many small ones in a row: order kept */
    for (int i = 0; i < 50; i++) {
        char b[16];
        int n = snprintf(b, sizeof b, "m%d", i);
        nsv_ws_send(s, id, NSV_WS_TEXT, b, (size_t)n);
    }
    int inorder = 1;
    for (int i = 0; i < 50; i++) {
        char b[16];
        snprintf(b, sizeof b, "m%d", i);
        m = wait_rec(s, NSV_EV_WS_MESSAGE, id, 250);
        inorder &= m && strcmp(m->body, b) == 0;
    }
    ok(inorder, "%s: 50 messages echoed in order", kind);

    /* pings: ours is answered by the server, the server's by us */
    is_int(nsv_ws_send(s, id, NSV_WS_PING, "cp", 2), NSV_OK, "%s: send ping", kind);
    m = wait_rec(s, NSV_EV_WS_PONG, id, 250);
    ok(m && m->blen == 2 && !memcmp(m->body, "cp", 2), "%s: the server's pong carries our payload", kind);
    int before = server_pongs;
    nsv_ws_send(s, id, NSV_WS_TEXT, "ping-me", 7);
    m = wait_rec(s, NSV_EV_WS_PING, id, 250);
    ok(m && m->blen == 2 && !memcmp(m->body, "sp", 2), "%s: WS_PING from the server", kind);
    for (int t = 0; t < 250 && server_pongs == before; t++)
        pump(s, 20);
    ok(server_pongs == before + 1, "%s: the server got our automatic pong", kind);

    /* broadcast reaches server-side WebSockets only: the client hears it
     * from the server side; had the client connection been reached too,
     * the server side would receive it */
    int nb = nsv_ws_broadcast(s, -1, NSV_WS_TEXT, "all", 3);
    if (strcmp(kind, "single") == 0)
        is_int(nb, 1, "%s: broadcast counts the one server-side WebSocket, not the client", kind);
    server_got_all = 0;
    m = wait_rec(s, NSV_EV_WS_MESSAGE, id, 250);
    ok(m && !strcmp(m->body, "all"), "%s: the broadcast reached the client from the server side", kind);
    nsv_ws_send(s, id, NSV_WS_TEXT, "after", 5); /* the echo of this comes after any stray "all" */
    m = wait_rec(s, NSV_EV_WS_MESSAGE, id, 250);
    ok(m && !strcmp(m->body, "after"), "%s: echo after the broadcast", kind);
    is_int(server_got_all, 0, "%s: the client connection did not send the broadcast", kind);

    is_int(nsv_wakeup_conn(s, id, "w", 1), NSV_OK, "%s: nsv_wakeup_conn", kind);
    m = wait_rec(s, NSV_EV_WAKEUP, id, 250);
    ok(m && m->blen == 1 && m->body[0] == 'w', "%s: WAKEUP on the client connection", kind);

    /* pause: nothing is delivered until resumed */
    is_int(nsv_pause_read(s, id, 1), NSV_OK, "%s: nsv_pause_read(1)", kind);
    nsv_ws_send(s, id, NSV_WS_TEXT, "paused", 6);
    for (int t = 0; t < 10; t++)
        pump(s, 10);
    is_int(count_rec(NSV_EV_WS_MESSAGE, id), 0, "%s: no message while paused", kind);
    is_int(nsv_pause_read(s, id, 0), NSV_OK, "%s: nsv_pause_read(0)", kind);
    m = wait_rec(s, NSV_EV_WS_MESSAGE, id, 250);
    ok(m && !strcmp(m->body, "paused"), "%s: the message comes once resumed", kind);

    /* client-initiated close */
    int sc = server_closes;
    is_int(nsv_ws_close(s, id, 1000, "bye", 3), NSV_OK, "%s: nsv_ws_close", kind);
    if (strcmp(kind, "single") == 0) /* sharded, from this thread: queued, refused by the worker */
        is_int(nsv_ws_send(s, id, NSV_WS_TEXT, "x", 1), NSV_ESTATE, "%s: no send after close", kind);
    m = wait_rec(s, NSV_EV_WS_CLOSE, id, 250);
    ok(m && m->code == 1000, "%s: WS_CLOSE with the server's echo (1000)", kind);
    ok(wait_rec(s, NSV_EV_CLOSE, id, 250) != NULL, "%s: CLOSE", kind);
    for (int t = 0; t < 100 && server_closes == sc; t++)
        pump(s, 20);
    ok(server_closes == sc + 1 && server_close_code == 1000 && !strcmp(server_close_reason, "bye"),
       "%s: the server got 1000 'bye'", kind);
    is_int(nsv_ws_send(s, id, NSV_WS_TEXT, "x", 1), NSV_ESTALE, "%s: the id is stale after CLOSE", kind);

    /* server-initiated close */
    id = open_one(s, kind, port, "/ws", NULL, NULL, &o);
    if (!id)
        return;
    is_mem(o->proto, strlen(o->proto), "", "%s: /ws chose no subprotocol", kind);
    nsv_ws_send(s, id, NSV_WS_TEXT, "close-me", 8);
    m = wait_rec(s, NSV_EV_WS_CLOSE, id, 250);
    ok(m && m->code == 4001 && !strcmp(m->body, "srv"), "%s: WS_CLOSE 4001 'srv' from the server", kind);
    ok(wait_rec(s, NSV_EV_CLOSE, id, 300) != NULL, "%s: CLOSE once the server closed TCP", kind);
    is_int(count_rec(NSV_EV_WS_CLOSE, id), 0, "%s: one WS_CLOSE only", kind);
}

static void failures(nsv_server *s, const char *kind, int port)
{
    char url[128];
    /* refused: a port nobody listens on (a listener opened and closed) */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    bind(fd, (struct sockaddr *)&a, sizeof a);
    getsockname(fd, (struct sockaddr *)&a, &al);
    close(fd);
    snprintf(url, sizeof url, "ws://127.0.0.1:%d/ws", ntohs(a.sin_port));
    int64_t id = wsc(s, url, NULL, NULL);
    ok(id > 0, "%s: connect to a closed port returns an id", kind);
    rec *r = wait_rec(s, NSV_EV_ERROR, (uint64_t)id, 250);
    is_int(r ? r->code : 0, NSV_ECONNREFUSED, "%s: ERROR ECONNREFUSED", kind);
    ok(wait_rec(s, NSV_EV_CLOSE, (uint64_t)id, 250) != NULL, "%s: then CLOSE", kind);

    /* answers that are not a 101 */
    snprintf(url, sizeof url, "ws://127.0.0.1:%d/plain", port);
    id = wsc(s, url, NULL, NULL);
    r = wait_rec(s, NSV_EV_ERROR, (uint64_t)id, 250);
    ok(r && r->code == NSV_EPARSE && strstr(r->body, "200"), "%s: a 200 answer: EPARSE naming the status (%s)",
       kind, r ? r->body : "none");
    ok(wait_rec(s, NSV_EV_CLOSE, (uint64_t)id, 250) != NULL, "%s: then CLOSE", kind);
    is_int(count_rec(NSV_EV_WS_OPEN, (uint64_t)id), 0, "%s: and no WS_OPEN", kind);
    snprintf(url, sizeof url, "ws://127.0.0.1:%d/nothing", port);
    id = wsc(s, url, NULL, NULL);
    r = wait_rec(s, NSV_EV_ERROR, (uint64_t)id, 250);
    ok(r && r->code == NSV_EPARSE && strstr(r->body, "404"), "%s: a 404 answer: EPARSE", kind);
    wait_rec(s, NSV_EV_CLOSE, (uint64_t)id, 250);

    /* a listener that never answers: calls before the open, nsv_close, the head timeout */
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in la = {.sin_family = AF_INET};
    la.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t lal = sizeof la;
    bind(lfd, (struct sockaddr *)&la, sizeof la);
    listen(lfd, 8);
    getsockname(lfd, (struct sockaddr *)&la, &lal);
    snprintf(url, sizeof url, "ws://127.0.0.1:%d/silent", ntohs(la.sin_port));
    int single = strcmp(kind, "single") == 0; /* a running sharded server keeps its options */
    if (single)
        nsv_set_int(s, NSV_OPT_HTTP_HEAD_TIMEOUT_MS, 200);
    id = wsc(s, url, NULL, NULL);
    is_int(nsv_ws_send(s, (uint64_t)id, NSV_WS_TEXT, "x", 1), NSV_ESTATE, "%s: nsv_ws_send before WS_OPEN: ESTATE",
           kind);
    is_int(nsv_ws_close(s, (uint64_t)id, 1000, NULL, 0), NSV_ESTATE, "%s: nsv_ws_close before WS_OPEN: ESTATE",
           kind);
    if (single) { /* sharded: queued, refused by the worker */
        is_int(nsv_send(s, (uint64_t)id, "raw", 3), NSV_ESTATE, "%s: nsv_send (raw TCP) on it: ESTATE", kind);
        is_int(nsv_pause_read(s, (uint64_t)id, 1), NSV_ESTATE, "%s: nsv_pause_read before WS_OPEN: ESTATE", kind);
        r = wait_rec(s, NSV_EV_ERROR, (uint64_t)id, 250);
        ok(r && r->code == NSV_ETIMEDOUT && strstr(r->body, "http_head_timeout_ms"),
           "%s: no answer: ERROR ETIMEDOUT naming http_head_timeout_ms (%s)", kind, r ? r->body : "none");
        ok(wait_rec(s, NSV_EV_CLOSE, (uint64_t)id, 250) != NULL, "%s: then CLOSE", kind);
        nsv_set_int(s, NSV_OPT_HTTP_HEAD_TIMEOUT_MS, 30000);
    } else {
        nsv_close(s, (uint64_t)id);
        ok(wait_rec(s, NSV_EV_CLOSE, (uint64_t)id, 250) != NULL, "%s: CLOSE", kind);
    }
    id = wsc(s, url, NULL, NULL);
    for (int t = 0; t < 5; t++)
        pump(s, 10);
    is_int(nsv_close(s, (uint64_t)id), NSV_OK, "%s: nsv_close during the handshake", kind);
    ok(wait_rec(s, NSV_EV_CLOSE, (uint64_t)id, 250) != NULL, "%s: CLOSE", kind);
    is_int(count_rec(NSV_EV_ERROR, (uint64_t)id), 0, "%s: and no ERROR (the host asked)", kind);
    close(lfd);

    /* the caller's mistakes, refused at once */
    struct {
        const char *url, *headers, *protos;
        int want;
        const char *what;
    } bad[] = {
        {"http://127.0.0.1:1/", NULL, NULL, NSV_EURL, "http:// scheme"},
        {"ws://127.0.0.1:1/x#frag", NULL, NULL, NSV_EURL, "a fragment"},
        {"ws:///x", NULL, NULL, NSV_EURL, "no host"},
        {"ws://127.0.0.1:1/", "Host: x\r\n", NULL, NSV_EINVAL, "a Host header"},
        {"ws://127.0.0.1:1/", "Sec-WebSocket-Key: x\r\n", NULL, NSV_EINVAL, "a Sec-WebSocket-Key header"},
        {"ws://127.0.0.1:1/", "sec-websocket-extensions: x\r\n", NULL, NSV_EINVAL, "an extensions header"},
        {"ws://127.0.0.1:1/", "Upgrade: h2c\r\n", NULL, NSV_EINVAL, "an Upgrade header"},
        {"ws://127.0.0.1:1/", "Connection: close\r\n", NULL, NSV_EINVAL, "a Connection header"},
        {"ws://127.0.0.1:1/", "X-A: b\r\nbroken\r\n", NULL, NSV_EINVAL, "a line without a colon"},
        {"ws://127.0.0.1:1/", "X-A: b", NULL, NSV_EINVAL, "a block without its last CRLF"},
        {"ws://127.0.0.1:1/", "X-A: b\r\n\r\n", NULL, NSV_EINVAL, "an empty line"},
        {"ws://127.0.0.1:1/", "X-A: b\nX-B: c\r\n", NULL, NSV_EINVAL, "a bare LF"},
        {"ws://127.0.0.1:1/", "X-A: b\r\n", "a,,b", NSV_EINVAL, "an empty subprotocol"},
        {"ws://127.0.0.1:1/", NULL, "a, a", NSV_EINVAL, "a subprotocol twice"},
        {"ws://127.0.0.1:1/", NULL, "a b", NSV_EINVAL, "a subprotocol with a space"},
        {"ws://127.0.0.1:1/", NULL, "a,", NSV_EINVAL, "a trailing comma"},
        {"ws://127.0.0.1:1/", NULL, "ch\"at", NSV_EINVAL, "a non-token subprotocol"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t r2 = wsc(s, bad[i].url, bad[i].headers, bad[i].protos);
        is_int(r2, bad[i].want, "%s: %s refused with %s (%s)", kind, bad[i].what, nsv_errname(bad[i].want),
               r2 < 0 ? nsv_last_error_detail(s) : "accepted");
    }
    is_int(nsv_ws_connect(s, "ws://127.0.0.1:1/", 18, NULL, 0, NULL, 0, 1), NSV_EINVAL, "%s: flags 1 refused", kind);
    is_int(nsv_ws_connect(s, NULL, 0, NULL, 0, NULL, 0, 0), NSV_EINVAL, "%s: NULL url refused", kind);
    is_int(nsv_ws_connect(NULL, "ws://a/", 7, NULL, 0, NULL, 0, 0), NSV_EINVAL, "NULL server refused");
    is_int(nsv_ws_connect(s, "ws://a/", 7, NULL, 3, NULL, 0, 0), NSV_EINVAL, "%s: NULL headers with a length", kind);
}

static void run(nsv_server *s, const char *kind)
{
    int port;
    ok(s && setup(s, &port), "%s: server listening", kind);
    if (!s)
        return;
    echo_and_close(s, kind, port);
    failures(s, kind, port);
    clear_recs();
    nsv_server_free(s);
}

/* ---- callback mode: the host answers inside the events ---- */

static struct {
    uint64_t id;
    int opened, echoed, closed, ws_close;
} cbst;

static void cb(nsv_server *s, const nsv_event *e, const char *a, void *ud)
{
    (void)ud;
    if (e->type == NSV_EV_TIMER) { /* the bound on the run */
        nsv_stop(s);
        return;
    }
    if (e->conn != cbst.id || !cbst.id) {
        server_event(s, e, a);
        return;
    }
    if (e->type == NSV_EV_WS_OPEN) {
        cbst.opened++;
        nsv_ws_send(s, e->conn, NSV_WS_TEXT, "from a callback", 15); /* at once, inside WS_OPEN */
    } else if (e->type == NSV_EV_WS_MESSAGE) {
        cbst.echoed += e->body_len == 15 && !memcmp(a + e->body_off, "from a callback", 15);
        nsv_ws_close(s, e->conn, 1000, NULL, 0);
    } else if (e->type == NSV_EV_WS_CLOSE) {
        cbst.ws_close = e->code;
    } else if (e->type == NSV_EV_CLOSE) {
        cbst.closed++;
        nsv_stop(s);
    }
}

static void callback_mode(void)
{
    nsv_server *s = nsv_server_new();
    int port;
    ok(s && setup(s, &port), "callback: server listening");
    if (!s)
        return;
    nsv_set_callback(s, cb, NULL);
    char url[64];
    snprintf(url, sizeof url, "ws://127.0.0.1:%d/ws", port);
    int64_t id = nsv_ws_connect(s, url, strlen(url), NULL, 0, NULL, 0, 0);
    cbst.id = id > 0 ? (uint64_t)id : 0;
    nsv_timer_add(s, 10000, 0, 1); /* a bound on the run: its event stops the loop */
    nsv_run(s);
    ok(cbst.opened == 1 && cbst.echoed == 1, "callback: sent inside WS_OPEN, echo received");
    ok(cbst.ws_close == 1000 && cbst.closed == 1, "callback: closed from inside the message event");
    nsv_server_free(s);
}

/* ---- draining: client WebSockets close with 1001, new ones are refused ---- */

static void drain(void)
{
    nsv_server *s = nsv_server_new();
    int port;
    ok(s && setup(s, &port), "drain: server listening");
    if (!s)
        return;
    uint64_t id = open_one(s, "drain", port, "/ws", NULL, NULL, NULL);
    /* and one whose server never answers: the drain deadline ends it */
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in la = {.sin_family = AF_INET};
    la.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t lal = sizeof la;
    bind(lfd, (struct sockaddr *)&la, sizeof la);
    listen(lfd, 8);
    getsockname(lfd, (struct sockaddr *)&la, &lal);
    char surl[64];
    snprintf(surl, sizeof surl, "ws://127.0.0.1:%d/silent", ntohs(la.sin_port));
    int64_t sid = wsc(s, surl, NULL, NULL);
    for (int t = 0; t < 5; t++)
        pump(s, 10);
    is_int(nsv_drain_start(s, 300), NSV_OK, "drain: nsv_drain_start");
    char url[64];
    snprintf(url, sizeof url, "ws://127.0.0.1:%d/ws", port);
    is_int(wsc(s, url, NULL, NULL), NSV_ESTOPPED, "drain: nsv_ws_connect while draining: ESTOPPED");
    int stopped = 0;
    for (int t = 0; t < 300 && !stopped; t++) {
        int n = nsv_poll(s, evs, 256, arena, ARENA, 20);
        if (n == NSV_ESTOPPED)
            stopped = 1;
        for (int i = 0; i < n; i++)
            if (is_client(evs[i].conn))
                client_event(&evs[i], arena);
    }
    ok(stopped, "drain: the drain ended (every connection closed)");
    rec *r = wait_rec(s, NSV_EV_WS_CLOSE, id, 0);
    ok(r && (r->code == 1001), "drain: the client WebSocket closed with 1001 (%d)", r ? r->code : 0);
    ok(wait_rec(s, NSV_EV_CLOSE, id, 0) != NULL, "drain: and CLOSE");
    r = wait_rec(s, NSV_EV_ERROR, (uint64_t)sid, 0);
    ok(r && r->code == NSV_ESTOPPED, "drain: the unanswered handshake: ERROR ESTOPPED at the deadline (%s)",
       r ? r->body : "none");
    ok(wait_rec(s, NSV_EV_CLOSE, (uint64_t)sid, 0) != NULL, "drain: and CLOSE");
    close(lfd);
    clear_recs();
    nsv_server_free(s);
}

/* ---- threads: connects and sends from threads that are not workers ---- */

#define TH 4
#define TH_MSGS 20
static atomic_int th_open[TH];
static atomic_ullong th_id[TH];
static atomic_int th_stop;

static void *th_main(void *arg)
{
    nsv_server *s = ((void **)arg)[0];
    int k = (int)(intptr_t)((void **)arg)[1];
    int port = (int)(intptr_t)((void **)arg)[2];
    char url[64];
    snprintf(url, sizeof url, "ws://127.0.0.1:%d/ws", port);
    int64_t id = wsc(s, url, NULL, NULL);
    atomic_store(&th_id[k], id > 0 ? (unsigned long long)id : 0);
    if (id <= 0)
        return NULL;
    for (int t = 0; t < 5000 && !atomic_load(&th_open[k]) && !atomic_load(&th_stop); t++)
        usleep(1000);
    for (int i = 0; i < TH_MSGS; i++) {
        char b[32];
        int n = snprintf(b, sizeof b, "t%d-%d", k, i);
        nsv_ws_send(s, (uint64_t)id, NSV_WS_TEXT, b, (size_t)n);
    }
    return NULL;
}

static void threads(void)
{
    nsv_server *s = nsv_server_new_sharded(2);
    int port;
    ok(s && setup(s, &port), "threads: sharded server listening");
    if (!s)
        return;
    pthread_t th[TH];
    void *args[TH][3];
    for (int k = 0; k < TH; k++) {
        args[k][0] = s;
        args[k][1] = (void *)(intptr_t)k;
        args[k][2] = (void *)(intptr_t)port;
        pthread_create(&th[k], NULL, th_main, args[k]);
    }
    int got[TH] = {0}, inorder[TH], closed[TH] = {0};
    for (int k = 0; k < TH; k++)
        inorder[k] = 1;
    for (int t = 0; t < 1000; t++) {
        pump(s, 10);
        int done = 1;
        for (int i = 0; i < nrec; i++) {
            rec *r = &recs[i];
            for (int k = 0; k < TH; k++) {
                if (r->conn != atomic_load(&th_id[k]) || !r->conn)
                    continue;
                if (r->type == NSV_EV_WS_OPEN)
                    atomic_store(&th_open[k], 1);
                if (r->type == NSV_EV_WS_MESSAGE) {
                    char b[32];
                    snprintf(b, sizeof b, "t%d-%d", k, got[k]);
                    inorder[k] &= strcmp(r->body, b) == 0;
                    if (++got[k] == TH_MSGS)
                        nsv_ws_close(s, r->conn, 1000, NULL, 0);
                }
                if (r->type == NSV_EV_CLOSE)
                    closed[k] = 1;
                r->type = 0;
            }
        }
        for (int k = 0; k < TH; k++)
            done &= closed[k];
        if (done)
            break;
    }
    atomic_store(&th_stop, 1);
    for (int k = 0; k < TH; k++)
        pthread_join(th[k], NULL);
    for (int k = 0; k < TH; k++) {
        ok(atomic_load(&th_id[k]) != 0, "threads: client %d got an id from its thread", k);
        ok(got[k] == TH_MSGS && inorder[k], "threads: client %d: %d messages sent from its thread echoed in order",
           k, got[k]);
        ok(closed[k], "threads: client %d closed", k);
    }
    clear_recs();
    nsv_server_free(s);
}

/* ---- the driver of test_ws_client.py ---- */

static int drive(int argc, char **argv)
{
    const char *url = NULL, *protos = NULL, *ca = NULL;
    char headers[4096] = "";
    const char *sends[64];
    int nsend = 0, close_code = 0, workers = 0;
    long binary = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--drive") && v)
            url = v, i++;
        else if (!strcmp(a, "--protocols") && v)
            protos = v, i++;
        else if (!strcmp(a, "--header") && v)
            strncat(headers, v, sizeof headers - strlen(headers) - 3), strcat(headers, "\r\n"), i++;
        else if (!strcmp(a, "--send") && v && nsend < 64)
            sends[nsend++] = v, i++;
        else if (!strcmp(a, "--binary") && v)
            binary = atol(v), i++;
        else if (!strcmp(a, "--close") && v)
            close_code = atoi(v), i++;
        else if (!strcmp(a, "--ca") && v)
            ca = v, i++;
        else if (!strcmp(a, "--workers") && v)
            workers = atoi(v), i++;
        else if (!strcmp(a, "--opt") && v) {
            i++;
        } else {
            fprintf(stderr, "ws_client: unknown argument %s\n", a);
            return 2;
        }
    }
    nsv_server *s = workers ? nsv_server_new_sharded(workers) : nsv_server_new();
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--opt") && i + 1 < argc) {
            char name[64];
            const char *eqs = strchr(argv[i + 1], '=');
            if (!eqs)
                continue;
            snprintf(name, sizeof name, "%.*s", (int)(eqs - argv[i + 1]), argv[i + 1]);
            int id = nsv_opt_by_name(name, strlen(name));
            if (id < 0 || nsv_set_int(s, id, atoll(eqs + 1)) != NSV_OK) {
                fprintf(stderr, "ws_client: option %s: %s\n", name, nsv_last_error_detail(s));
                return 2;
            }
        }
    nsv_set_int(s, NSV_OPT_WS_CONTROL_EVENTS, 1);
    if (ca && nsv_set_str(s, NSV_OPT_TLS_CLIENT_CA_FILE, ca, strlen(ca)) != NSV_OK) {
        fprintf(stderr, "ws_client: ca: %s\n", nsv_last_error_detail(s));
        return 2;
    }
    int64_t id = nsv_ws_connect(s, url, strlen(url), headers, strlen(headers), protos, protos ? strlen(protos) : 0, 0);
    if (id < 0) {
        printf("refused %s %s\n", nsv_errname((int)id), nsv_last_error_detail(s));
        return 0;
    }
    int expect = nsend + (binary >= 0), got = 0, closing = 0;
    char *bin = binary >= 0 ? pattern((size_t)binary) : NULL;
    for (int t = 0; t < 3000; t++) {
        int n = nsv_poll(s, evs, 256, arena, ARENA, 10);
        for (int i = 0; i < n; i++) {
            nsv_event *e = &evs[i];
            const char *b = arena + e->body_off;
            switch (e->type) {
            case NSV_EV_WS_OPEN: {
                char proto[128];
                hdr(e, arena, "Sec-WebSocket-Protocol", proto, sizeof proto);
                printf("open %d proto=%s tls=%d\n", e->code, proto, !!(e->flags & NSV_EVF_TLS));
                for (int k = 0; k < nsend; k++)
                    nsv_ws_send(s, e->conn, NSV_WS_TEXT, sends[k], strlen(sends[k]));
                if (bin)
                    nsv_ws_send(s, e->conn, NSV_WS_BINARY, bin, (size_t)binary);
                if (!expect && close_code)
                    nsv_ws_close(s, e->conn, close_code, "done", 4), closing = 1;
                break;
            }
            case NSV_EV_WS_MESSAGE:
                if (e->code == NSV_WS_BINARY)
                    printf("message 2 len=%u intact=%d\n", e->body_len,
                           bin && e->body_len == (uint32_t)binary && !memcmp(b, bin, (size_t)binary));
                else
                    printf("message 1 %.*s\n", (int)e->body_len, b);
                if (++got == expect && close_code && !closing)
                    nsv_ws_close(s, e->conn, close_code, "done", 4), closing = 1;
                break;
            case NSV_EV_WS_PING:
                printf("ping %.*s\n", (int)e->body_len, b);
                break;
            case NSV_EV_WS_PONG:
                printf("pong %.*s\n", (int)e->body_len, b);
                break;
            case NSV_EV_WS_CLOSE:
                printf("close %d %.*s\n", e->code, (int)e->body_len, b);
                break;
            case NSV_EV_ERROR:
                printf("error %s %.*s\n", nsv_errname(e->code), (int)e->body_len, b);
                break;
            case NSV_EV_CLOSE:
                printf("closed\n");
                fflush(stdout);
                nsv_server_free(s);
                free(bin);
                return 0;
            }
            fflush(stdout);
        }
    }
    printf("timeout\n");
    nsv_server_free(s);
    free(bin);
    return 1;
}

int main(int argc, char **argv)
{
    arena = malloc(ARENA);
    if (argc > 1)
        return drive(argc, argv);
    if (!getenv("WSC_ONLY") || !strcmp(getenv("WSC_ONLY"), "single"))
        run(nsv_server_new(), "single");
    if (!getenv("WSC_ONLY") || !strcmp(getenv("WSC_ONLY"), "sharded"))
        run(nsv_server_new_sharded(2), "sharded");
    if (!getenv("WSC_ONLY") || !strcmp(getenv("WSC_ONLY"), "threads"))
        threads();
    if (!getenv("WSC_ONLY") || !strcmp(getenv("WSC_ONLY"), "callback"))
        callback_mode();
    if (!getenv("WSC_ONLY") || !strcmp(getenv("WSC_ONLY"), "drain"))
        drain();
    free(arena);
    return done_testing();
}
