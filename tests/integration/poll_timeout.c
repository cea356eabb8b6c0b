/* poll_timeout.c - a negative poll timeout blocks until an event, a wakeup
 * or a stop, the same on a single loop (nsv_poll), a sharded server
 * (nsv_poll) and one worker of it (nsv_poll_worker); 0 returns at once. */
#include "tap.h"
#include <nanosrv.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

static nsv_event evs[16];
static char arena[4096];

typedef struct waker {
    nsv_server *s;
    int stop;           /* 1: nsv_stop instead of nsv_wakeup */
    atomic_int done;    /* the poll returned */
} waker;

/* Wake (or stop) the server every 100 ms until the poll returned; after
 * 3 s stop it anyway, so a poll that ignores wakeups fails instead of hanging. */
static void *wake_main(void *arg)
{
    waker *w = arg;
    for (int i = 0; i < 100 && !atomic_load(&w->done); i++) {
        usleep(100 * 1000);
        if (atomic_load(&w->done))
            break;
        if (w->stop || i >= 30)
            nsv_stop(w->s);
        else
            nsv_wakeup(w->s);
    }
    return NULL;
}

/* Poll with timeout -1 (worker < 0: nsv_poll) while another thread wakes or
 * stops the server; returns what the poll returned and its duration. */
static int blocked_poll(nsv_server *s, int worker, int timeout, int stop, int64_t *ms)
{
    waker w = {.s = s, .stop = stop};
    pthread_t th;
    pthread_create(&th, NULL, wake_main, &w);
    int64_t t0 = nsv_millis();
    int r = worker < 0 ? nsv_poll(s, evs, 16, arena, sizeof arena, timeout)
                       : nsv_poll_worker(s, worker, evs, 16, arena, sizeof arena, timeout);
    *ms = nsv_millis() - t0;
    atomic_store(&w.done, 1);
    pthread_join(th, NULL);
    return r;
}

static void run(const char *kind, int sharded, int worker)
{
    int timeouts[] = {-1, -2, -1000};
    for (int k = 0; k < 3; k++) {
        nsv_server *s = sharded ? nsv_server_new_sharded(2) : nsv_server_new();
        int64_t ms, t0 = nsv_millis();
        int r = worker < 0 ? nsv_poll(s, evs, 16, arena, sizeof arena, 0)
                           : nsv_poll_worker(s, worker, evs, 16, arena, sizeof arena, 0);
        ok(r == 0 && nsv_millis() - t0 < 500, "%s: timeout 0 returns at once", kind);
        r = blocked_poll(s, worker, timeouts[k], 0, &ms);
        ok(r == 0 && ms >= 80 && ms < 2500, "%s, timeout %d: blocks until nsv_wakeup, then 0 (%d after %lld ms)",
           kind, timeouts[k], r, (long long)ms);
        r = blocked_poll(s, worker, timeouts[k], 1, &ms);
        ok((r == 0 || r == NSV_ESTOPPED) && ms < 2500, "%s, timeout %d: nsv_stop ends it (%s after %lld ms)",
           kind, timeouts[k], nsv_errname(r), (long long)ms);
        r = worker < 0 ? nsv_poll(s, evs, 16, arena, sizeof arena, timeouts[k])
                       : nsv_poll_worker(s, worker, evs, 16, arena, sizeof arena, timeouts[k]);
        is_int(r, NSV_ESTOPPED, "%s, timeout %d: stopped server -> ESTOPPED at once", kind, timeouts[k]);
        nsv_server_free(s);
    }
}

int main(void)
{
    run("single loop nsv_poll", 0, -1);
    run("sharded nsv_poll", 1, -1);
    run("sharded nsv_poll_worker", 1, 1);
    return done_testing();
}
