/* tcp_proxy.c - TCP port forwarder:
 *   tcp-proxy --listen PORT --to HOST:PORT [--connect-timeout-ms N]
 *             [--to-tls] [--ca FILE]
 * With --to-tls the outbound side is TLS (server certificate verified
 * against --ca, default the system bundle, and the host name).
 * Prints "listening on PORT". Each accepted connection gets an outbound
 * one; bytes flow both ways. When one side stops reading, its peer is paused
 * at the high water mark, so a fast sender and a slow receiver never grow
 * the proxy's memory without bound. A small table pairs the two ids (event
 * tags would do, except for events queued before the tag was set). */
#include <nanosrv.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static nsv_server *srv;

/* id -> peer id, open addressing; ids are never 0. */
#define PAIRS 65536
static uint64_t pair_key[PAIRS], pair_val[PAIRS];

static size_t pair_slot(uint64_t id)
{
    size_t i = (size_t)(id * 0x9E3779B97F4A7C15ULL >> 48) & (PAIRS - 1);
    while (pair_key[i] && pair_key[i] != id)
        i = (i + 1) & (PAIRS - 1);
    return i;
}

static void pair_set(uint64_t id, uint64_t peer)
{
    size_t i = pair_slot(id);
    pair_key[i] = id;
    pair_val[i] = peer;
}

static uint64_t pair_get(uint64_t id)
{
    size_t i = pair_slot(id);
    return pair_key[i] ? pair_val[i] : 0;
}

static void pair_del(uint64_t id)
{
    size_t i = pair_slot(id);
    if (!pair_key[i])
        return;
    pair_key[i] = 0;
    /* re-insert the rest of the cluster so lookups still find them */
    for (size_t j = (i + 1) & (PAIRS - 1); pair_key[j]; j = (j + 1) & (PAIRS - 1)) {
        uint64_t k = pair_key[j], v = pair_val[j];
        pair_key[j] = 0;
        pair_set(k, v);
    }
}
static void on_signal(int sig) { (void)sig; nsv_stop(srv); }

int main(int argc, char **argv)
{
    int port = 0;
    const char *to = NULL;
    long ctimeout = 0;
    int to_tls = 0;
    const char *ca = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--to-tls")) to_tls = 1;
        else if (v && !strcmp(argv[i], "--listen")) port = atoi(v), i++;
        else if (v && !strcmp(argv[i], "--to")) to = v, i++;
        else if (v && !strcmp(argv[i], "--connect-timeout-ms")) ctimeout = atol(v), i++;
        else if (v && !strcmp(argv[i], "--ca")) ca = v, i++;
        else {
            to = NULL;
            break;
        }
    }
    if (!to) {
        fprintf(stderr, "usage: %s --listen PORT --to HOST:PORT [--connect-timeout-ms N] [--to-tls] [--ca FILE]\n",
                argv[0]);
        return 2;
    }
    char target[300];
    snprintf(target, sizeof target, "%s://%s", to_tls ? "tls" : "tcp", to);
    srv = nsv_server_new();
    if (ca && nsv_set_str(srv, NSV_OPT_TLS_CLIENT_CA_FILE, ca, strlen(ca)) != 0) {
        fprintf(stderr, "tcp-proxy: --ca %s: %s\n", ca, nsv_last_error_detail(srv));
        return 1;
    }
    if (ctimeout)
        nsv_set_int(srv, NSV_OPT_CONNECT_TIMEOUT_MS, ctimeout);
    char url[64];
    snprintf(url, sizeof url, "tcp://0.0.0.0:%d", port);
    int lid = nsv_listen(srv, url, strlen(url));
    if (lid < 0) {
        fprintf(stderr, "tcp-proxy: %s (%s)\n", nsv_strerror(lid), nsv_last_error_detail(srv));
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    printf("listening on %d\n", nsv_listener_port(srv, lid));
    fflush(stdout);
    static nsv_event evs[256];
    size_t cap = 1 << 20;
    char *arena = malloc(cap);
    int n;
    while ((n = nsv_poll(srv, evs, 256, arena, cap, 1000)) != NSV_ESTOPPED) {
        if (n == NSV_ENOBUFS) {
            cap = (size_t)nsv_poll_need(srv) + 4096;
            arena = realloc(arena, cap);
            continue;
        }
        for (int i = 0; i < n; i++) {
            const nsv_event *e = &evs[i];
            uint64_t peer = pair_get(e->conn);
            switch (e->type) {
            case NSV_EV_TCP_OPEN: {
                int64_t b = nsv_connect(srv, target, strlen(target));
                if (b < 0) {
                    nsv_abort(srv, e->conn);
                    break;
                }
                pair_set(e->conn, (uint64_t)b);
                pair_set((uint64_t)b, e->conn);
                break;
            }
            case NSV_EV_TCP_DATA:
                if (e->body_len && nsv_send(srv, peer, arena + e->body_off, e->body_len) == NSV_EAGAIN)
                    nsv_abort(srv, e->conn); /* cannot happen while pausing works; never buffer unbounded */
                if (e->flags & NSV_EVF_EOF)
                    nsv_shutdown(srv, peer);
                break;
            case NSV_EV_TCP_WRITABLE: /* this side's output is full: stop reading its peer */
                nsv_pause_read(srv, peer, e->code == 0);
                break;
            case NSV_EV_ERROR:
                if (peer)
                    nsv_close(srv, peer);
                break;
            case NSV_EV_CLOSE:
                pair_del(e->conn);
                if (peer)
                    nsv_close(srv, peer);
                break;
            }
        }
    }
    free(arena);
    signal(SIGTERM, SIG_IGN); /* a late signal must not reach the freed server */
    signal(SIGINT, SIG_IGN);
    nsv_server_free(srv);
    return 0;
}
