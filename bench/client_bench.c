/* client_bench.c - the HTTP client's throughput: N GET requests to one URL,
 * C of them in flight at any time, all on one loop (nsv_http_request on a
 * server with no listener). The connection cap per origin is raised to C,
 * as curl --parallel-max C and Node's fetch open as many as they need.
 *   client_bench URL N C [WARMUP]
 * Prints one line: requests=N errors=E seconds=S rps=R (WARMUP requests
 * first, untimed). Exit status 1 when a request failed. bench/client_bench.py
 * runs it beside curl and Node (the method is in its docstring). */
#include <nanosrv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs n requests with c in flight; returns the number that failed. */
static long run(nsv_server *srv, const char *url, long n, long c, char *arena, size_t cap)
{
    static nsv_event evs[512];
    size_t ulen = strlen(url);
    long started = 0, finished = 0, failed = 0, inflight = 0;
    while (finished < n) {
        while (inflight < c && started < n) {
            int64_t id = nsv_http_request(srv, "GET", 3, url, ulen, NULL, 0, NULL, 0, -1, 0);
            started++;
            if (id < 0) {
                fprintf(stderr, "client_bench: %s: %s\n", nsv_errname((int)id), nsv_last_error_detail(srv));
                finished++, failed++;
                continue;
            }
            inflight++;
        }
        int k = nsv_poll(srv, evs, 512, arena, cap, 1000);
        if (k < 0) {
            fprintf(stderr, "client_bench: nsv_poll: %s\n", nsv_errname(k));
            return failed + (n - finished);
        }
        for (int i = 0; i < k; i++) {
            const nsv_event *ev = &evs[i];
            if (ev->type == NSV_EV_HTTP_BODY && (ev->flags & NSV_EVF_EOF)) {
                finished++, inflight--;
            } else if (ev->type == NSV_EV_ERROR) {
                if (failed < 5)
                    fprintf(stderr, "client_bench: %s: %.*s\n", nsv_errname(ev->code), (int)ev->body_len,
                            arena + ev->body_off);
                finished++, inflight--, failed++;
            }
        }
    }
    return failed;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: client_bench URL N C [WARMUP]\n");
        return 2;
    }
    const char *url = argv[1];
    long n = atol(argv[2]), c = atol(argv[3]), warm = argc > 4 ? atol(argv[4]) : 0;
    if (n <= 0 || c <= 0 || c > 256) {
        fprintf(stderr, "client_bench: N > 0 and 1 <= C <= 256\n");
        return 2;
    }
    nsv_server *srv = nsv_server_new();
    if (!srv || nsv_set_int(srv, NSV_OPT_HTTP_CONNS_PER_ORIGIN, c) != 0) {
        fprintf(stderr, "client_bench: cannot set up the client\n");
        return 2;
    }
    size_t cap = 4 << 20;
    char *arena = malloc(cap);
    if (!arena)
        return 2;
    long failed = warm ? run(srv, url, warm, c, arena, cap) : 0;
    double t0 = now_s();
    failed += run(srv, url, n, c, arena, cap);
    double dt = now_s() - t0;
    printf("requests=%ld errors=%ld seconds=%.3f rps=%.0f\n", n, failed, dt, (double)n / dt);
    nsv_server_free(srv);
    free(arena);
    return failed ? 1 : 0;
}
