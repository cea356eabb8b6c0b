/* drain_late_reply.c - a drain that ends when a reply made after it started
 * closes the last connection: the next nsv_poll, even with no timeout,
 * reports the stop instead of waiting for I/O that will never come; and
 * NSV_OPT_DRAINING tells a readiness check that a drain began. */
#include "nsvnet.h"
#include "tap.h"
#include <pthread.h>
#include <stdatomic.h>

typedef struct watchdog {
    nsv_server *s;
    atomic_int done, fired;
} watchdog;

/* Stops the server after 5 s, so a poll that would block forever fails
 * the test instead of hanging it. */
static void *watch_main(void *arg)
{
    watchdog *w = arg;
    for (int i = 0; i < 50 && !atomic_load(&w->done); i++)
        usleep(100 * 1000);
    if (!atomic_load(&w->done)) {
        atomic_store(&w->fired, 1);
        nsv_stop(w->s);
    }
    return NULL;
}

typedef struct reader {
    int fd;
    char buf[1024];
} reader;

/* The client reads the answer as it comes and closes at its end (EOF). */
static void *read_main(void *arg)
{
    reader *rd = arg;
    read_all(rd->fd, rd->buf, sizeof rd->buf, 3000, 1000);
    close(rd->fd);
    return NULL;
}

static void run(int timeout_ms, int close_req)
{
    nsv_server *s = nsv_server_new();
    int port;
    http_listen(s, &port);
    int fd = client(port);
    sends(fd, close_req ? "GET /late HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                         : "GET /late HTTP/1.1\r\nHost: x\r\n\r\n");
    nsv_event req = {0};
    ok(wait_event(s, NSV_EV_REQUEST, &req, 50, 100), "poll %d: request in flight", timeout_ms);
    /* A host timer far in the future: the poll must not sleep until it. */
    ok(nsv_timer_add(s, 60000, 0, 1) > 0, "poll %d: a host timer pending for 60 s", timeout_ms);
    is_int(nsv_drain_start(s, 10000), NSV_OK, "poll %d: drain started with the request in flight", timeout_ms);
    /* The host answers after the drain began and keeps polling with the
     * caller's timeout: the reply flushes, the connection closes, the
     * drain is over. */
    watchdog w = {.s = s};
    pthread_t th;
    pthread_create(&th, NULL, watch_main, &w);
    /* The answer comes from a host timer's event, as a handler that slept
     * gives it: the poll that returned the timer's event had nothing left
     * to do, the reply closes the drain's last connection outside it. */
    ok(nsv_timer_add(s, 50, 0, 2) > 0, "poll %d: host timer for the answer", timeout_ms);
    ok(wait_event(s, NSV_EV_TIMER, NULL, 50, 100), "poll %d: the timer fired", timeout_ms);
    is_int(nsv_reply(s, req.conn, 200, "", 0, "late", 4), NSV_OK, "poll %d: answered after the drain began",
           timeout_ms);
    reader rd = {.fd = fd};
    pthread_t rt;
    pthread_create(&rt, NULL, read_main, &rd);
    int closed = 0, r = 0, polls = 0;
    while (polls < 20 && !atomic_load(&w.fired)) {
        r = nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, timeout_ms);
        polls++;
        if (r < 0)
            break;
        for (int i = 0; i < r; i++)
            if (evs[i].type == NSV_EV_CLOSE && evs[i].conn == req.conn)
                closed = 1;
    }
    atomic_store(&w.done, 1);
    pthread_join(th, NULL);
    ok(closed, "poll %d: its connection closed after the reply", timeout_ms);
    is_int(r, NSV_ESTOPPED, "poll %d: then the poll reports the finished drain", timeout_ms);
    ok(!atomic_load(&w.fired), "poll %d: ... by itself, not stopped by the watchdog (%d polls)", timeout_ms, polls);
    pthread_join(rt, NULL);
    ok(strstr(rd.buf, "200 OK") && strstr(rd.buf, "\r\n\r\nlate"), "poll %d: the client got the whole answer",
       timeout_ms);
    nsv_server_free(s);
}

/* A request the host never answers: the drain ends at its deadline, and a
 * poll without a timeout wakes for it. */
static void run_deadline(void)
{
    nsv_server *s = nsv_server_new();
    int port;
    http_listen(s, &port);
    int fd = client(port);
    sends(fd, "GET /never HTTP/1.1\r\nHost: x\r\n\r\n");
    ok(wait_event(s, NSV_EV_REQUEST, NULL, 50, 100), "deadline: request in flight");
    is_int((int)nsv_get_int(s, NSV_OPT_DRAINING), 0, "NSV_OPT_DRAINING is 0 before a drain");
    is_int(nsv_set_int(s, NSV_OPT_DRAINING, 1), NSV_EINVAL, "NSV_OPT_DRAINING is read-only");
    ok(strstr(nsv_last_error_detail(s), "read-only") != NULL, "... and the detail says so");
    is_int(nsv_opt_by_name("draining", 8), NSV_OPT_DRAINING, "NSV_OPT_DRAINING by name");
    is_int(nsv_drain_start(s, 300), NSV_OK, "deadline: drain of 300 ms started");
    is_int((int)nsv_get_int(s, NSV_OPT_DRAINING), 1, "NSV_OPT_DRAINING is 1 once it started");
    watchdog w = {.s = s};
    pthread_t th;
    pthread_create(&th, NULL, watch_main, &w);
    int r = 0, polls = 0;
    while (polls < 20 && !atomic_load(&w.fired) && r >= 0) {
        r = nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, -1);
        polls++;
    }
    atomic_store(&w.done, 1);
    pthread_join(th, NULL);
    is_int(r, NSV_ESTOPPED, "deadline: the poll reports the end of the drain");
    is_int((int)nsv_get_int(s, NSV_OPT_DRAINING), 1, "NSV_OPT_DRAINING stays 1 after the drain ended");
    ok(!atomic_load(&w.fired), "deadline: ... at its deadline, not stopped by the watchdog (%d polls)", polls);
    close(fd);
    nsv_server_free(s);
}

int main(void)
{
    run_deadline();
    run(-1, 0);
    run(-1, 1);
    run(30000, 0);
    run(30000, 1);
    return done_testing();
}
