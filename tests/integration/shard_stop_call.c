/* shard_stop_call.c - nsv_connect from a thread that is not a worker while
 * another thread stops the server: the call returns an id or NSV_ESTOPPED,
 * and the record it queued for a worker is never touched after it returned
 * (the caller waits until the worker ran it or left its loop). ASan and
 * TSan builds check the memory side. */
#include "tap.h"
#include <nanosrv.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
/* The queued record lives on the caller's stack: catch a late write to it. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "detect_stack_use_after_return=1"; }
#endif

typedef struct caller {
    nsv_server *s;
    char url[64];
    int ids, stopped, other;
} caller;

static void *call_main(void *arg)
{
    caller *c = arg;
    for (int i = 0; i < 400; i++) {
        int64_t r = nsv_connect(c->s, c->url, strlen(c->url));
        if (r > 0)
            c->ids++;
        else if (r == NSV_ESTOPPED) {
            c->stopped = 1;
            break;
        } else
            c->other++;
    }
    return NULL;
}

int main(void)
{
    static nsv_event evs[64];
    static char arena[1 << 16];
    int runs = 0, stopped = 0, other = 0, ids = 0;
    for (int k = 0; k < 60; k++) {
        nsv_server *s = nsv_server_new_sharded(2);
        int lid = nsv_listen(s, "tcp://127.0.0.1:0", 17);
        if (!s || lid < 0)
            break;
        caller c = {.s = s};
        snprintf(c.url, sizeof c.url, "tcp://127.0.0.1:%d", nsv_listener_port(s, lid));
        nsv_poll(s, evs, 64, arena, sizeof arena, 0); /* starts the workers */
        pthread_t t;
        if (pthread_create(&t, NULL, call_main, &c) != 0) {
            nsv_server_free(s);
            break;
        }
        usleep((useconds_t)((k % 30) * 120));
        nsv_stop(s);
        pthread_join(t, NULL);
        nsv_server_free(s);
        runs++;
        ids += c.ids;
        other += c.other;
        /* a caller that made all its calls before the stop is fine too */
        stopped += c.stopped || c.ids == 400;
    }
    is_int(runs, 60, "60 servers stopped while a thread calls nsv_connect");
    is_int(stopped, runs, "each caller ends with NSV_ESTOPPED (or finished first)");
    is_int(other, 0, "no call failed otherwise");
    ok(ids > 0, "calls before the stop got ids (%d)", ids);
    return done_testing();
}
