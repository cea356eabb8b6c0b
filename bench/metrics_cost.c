/* metrics_cost.c - what request counting, latency histograms and access
 * records cost on the hot path: a single-loop server answering every
 * request with "ok", NSV_OPT_METRICS_LATENCY and NSV_OPT_ACCESS_LOG set
 * from the command line. Prints its port, then serves until SIGINT/SIGTERM;
 * with access records on it takes them after each poll, as a host would.
 * At exit it prints its CPU time per answered request (user + system),
 * which other load on the machine disturbs less than requests/s.
 *
 *   taskset -c 0 build/metrics_cost --latency 1 &
 *   taskset -c 1 wrk -t1 -c50 -d5s http://127.0.0.1:PORT/
 */
#include <nanosrv.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig, stop = 1; }

int main(int argc, char **argv)
{
    int port = 0, latency = 1, access = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--port"))
            port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--latency"))
            latency = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--access"))
            access = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: %s [--port N] [--latency 0|1] [--access N]\n", argv[0]);
            return 2;
        }
    }
    nsv_server *s = nsv_server_new();
    if (!s || nsv_set_int(s, NSV_OPT_METRICS_LATENCY, latency) != NSV_OK ||
        nsv_set_int(s, NSV_OPT_ACCESS_LOG, access) != NSV_OK) {
        fprintf(stderr, "metrics_cost: %s\n", s ? nsv_last_error_detail(s) : "no server");
        return 1;
    }
    char url[64];
    int n = snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    int lid = nsv_listen(s, url, (size_t)n);
    if (lid < 0) {
        fprintf(stderr, "metrics_cost: listen: %s\n", nsv_last_error_detail(s));
        return 1;
    }
    printf("%d\n", nsv_listener_port(s, lid));
    fflush(stdout);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    static nsv_event ev[256];
    static char arena[1 << 20], recs[1 << 16];
    uint64_t answered = 0;
    while (!stop) {
        int k = nsv_poll(s, ev, 256, arena, sizeof arena, 100);
        for (int i = 0; i < k; i++)
            if (ev[i].type == NSV_EV_REQUEST)
                answered += nsv_reply(s, ev[i].conn, 200, NULL, 0, "ok", 2) == NSV_OK;
        if (access)
            while (nsv_access_take(s, recs, sizeof recs) > 0)
                ;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu_us = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
    fprintf(stderr, "%llu answers, %.3f us CPU each", (unsigned long long)answered,
            answered ? cpu_us / (double)answered : 0.0);
    uint64_t m[NSV_M_COUNT];
    if (nsv_metrics(s, m, NSV_M_COUNT) > 0) /* (NSV_ENOTSUP before 1.4's metrics) */
        fprintf(stderr, ", %llu latency observations", (unsigned long long)m[NSV_M_LAT_QUEUED_COUNT]);
    fprintf(stderr, "\n");
    nsv_server_free(s);
    return 0;
}
