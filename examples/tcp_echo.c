/* tcp_echo.c - raw TCP echo server: `tcp-echo --port N [--threads N]`.
 * Prints "listening on PORT". Echoes every byte; on the client's EOF it
 * finishes sending and half-closes. Respects backpressure: a client that
 * does not read is paused at the high water mark instead of buffered. */
#include <nanosrv.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static nsv_server *srv;
static void on_signal(int sig) { (void)sig; nsv_stop(srv); }

int main(int argc, char **argv)
{
    int port = 0, threads = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: %s --port N [--threads N]\n", argv[0]);
            return 2;
        }
    }
    srv = threads > 0 ? nsv_server_new_sharded(threads) : nsv_server_new();
    char url[64];
    snprintf(url, sizeof url, "tcp://0.0.0.0:%d", port);
    int lid = nsv_listen(srv, url, strlen(url));
    if (lid < 0) {
        fprintf(stderr, "tcp-echo: %s (%s)\n", nsv_strerror(lid), nsv_last_error_detail(srv));
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
            if (e->type == NSV_EV_TCP_DATA) {
                int r = e->body_len ? nsv_send(srv, e->conn, arena + e->body_off, e->body_len) : 0;
                if (r < 0 && r != NSV_ESTALE) { /* never drop bytes quietly: reset the client */
                    fprintf(stderr, "tcp-echo: send: %s\n", nsv_strerror(r));
                    nsv_abort(srv, e->conn);
                    continue;
                }
                if (e->flags & NSV_EVF_EOF)
                    nsv_shutdown(srv, e->conn);
            } else if (e->type == NSV_EV_TCP_WRITABLE) {
                nsv_pause_read(srv, e->conn, e->code == 0); /* peer not reading: stop reading it */
            } else if (e->type == NSV_EV_ERROR) { /* e.g. a queued send failed (sharded) */
                fprintf(stderr, "tcp-echo: connection error: %s\n", nsv_strerror(e->code));
            }
        }
    }
    free(arena);
    signal(SIGTERM, SIG_IGN); /* a late signal must not reach the freed server */
    signal(SIGINT, SIG_IGN);
    nsv_server_free(srv);
    return 0;
}
