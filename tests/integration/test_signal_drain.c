/* test_signal_drain.c - nsv_drain_on_signal: a signal drains (listener
 * closed, the request in flight answered in full, then NSV_ESTOPPED), a
 * second one stops at once, a poll blocked without a deadline wakes, the
 * previous disposition comes back on removal and at nsv_server_free,
 * several servers on one signal, the table's limit, bad arguments, and a
 * sharded server. */
#include "tap.h"
#include "nsvnet.h"
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

static atomic_int usr_hits;
static void usr_handler(int sig) { (void)sig; atomic_fetch_add(&usr_hits, 1); }

/* A request sent on a new client connection; its conn id once polled. */
static uint64_t request_in_flight(nsv_server *s, int port, int *fd)
{
    *fd = client(port);
    sendall(*fd, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
    nsv_event e;
    return wait_event(s, NSV_EV_REQUEST, &e, 200, 20) ? e.conn : 0;
}

/* Polls s for ms (events dropped); returns the last poll's result. */
static int poll_for(nsv_server *s, int ms)
{
    int r = 0;
    for (int64_t end = nsv_millis() + ms; nsv_millis() < end;) {
        r = nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, 10);
        if (r == NSV_ESTOPPED)
            break;
    }
    return r;
}

/* Polls until NSV_ESTOPPED, at most ms. */
static int stopped_within(nsv_server *s, int ms)
{
    for (int64_t end = nsv_millis() + ms; nsv_millis() < end;)
        if (nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, 20) == NSV_ESTOPPED)
            return 1;
    return 0;
}

static void *kill_later(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 100 * 1000000};
    nanosleep(&ts, NULL);
    kill(getpid(), SIGTERM);
    return NULL;
}

/* The drain: SIGTERM closes the listener, the request in flight is
 * answered 300 ms later in full, then the poll reports the stop. */
static void drain_case(const char *how, nsv_server *s)
{
    int port, fd;
    http_listen(s, &port);
    is_int(nsv_drain_on_signal(s, SIGTERM, 5000), NSV_OK, "%s: drain on SIGTERM registered", how);
    uint64_t conn = request_in_flight(s, port, &fd);
    ok(conn != 0, "%s: a request is with the host", how);
    raise(SIGTERM);
    ok(1, "%s: the process survived SIGTERM", how);
    poll_for(s, 50);
    int c2 = client(port);
    ok(c2 < 0, "%s: the listener is closed (a new connect is refused)", how);
    if (c2 >= 0)
        close(c2);
    is_int(poll_for(s, 300), 0, "%s: still serving 300 ms later (the request holds the drain open)", how);
    const char body[] = "slow answer";
    is_int(nsv_reply(s, conn, 200, "Content-Type: text/plain\r\n", 26, body, sizeof body - 1), NSV_OK,
           "%s: the host answers", how);
    char buf[4096];
    int n = read_polling(s, fd, buf, sizeof buf, 200, 20, NULL);
    ok(n > 0 && strstr(buf, "HTTP/1.1 200") && strstr(buf, "Connection: close") && strstr(buf, body),
       "%s: the answer arrived in full, with Connection: close", how);
    ok(stopped_within(s, 3000), "%s: then nsv_poll reports NSV_ESTOPPED", how);
    close(fd);
}

/* An idle server's nsv_poll(-1) sleeps with no deadline at all (no
 * connection, no timer): a SIGTERM sent from another thread ends it, and
 * the poll then reports the stop. */
static void wake_case(const char *how, nsv_server *s)
{
    int port;
    http_listen(s, &port);
    nsv_drain_on_signal(s, SIGTERM, 5000);
    pthread_t th;
    pthread_create(&th, NULL, kill_later, NULL);
    int64_t t0 = nsv_millis();
    int n = 0, polls = 0;
    while (n >= 0 && polls < 100 && nsv_millis() - t0 < 10000) { /* the alarm in main bounds a hang */
        n = nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, -1);
        polls++;
    }
    pthread_join(th, NULL);
    is_int(n, NSV_ESTOPPED, "%s: nsv_poll(-1) woke after kill(getpid(), SIGTERM) and reported the stop "
           "(%d polls, %lld ms)", how, polls, (long long)(nsv_millis() - t0));
    int c2 = client(port);
    ok(c2 < 0, "%s: the listener is closed", how);
    if (c2 >= 0)
        close(c2);
}

static void test_drain(void)
{
    nsv_server *s = nsv_server_new();
    drain_case("single loop", s);
    nsv_server_free(s);
    s = nsv_server_new_sharded(2);
    drain_case("sharded", s);
    nsv_server_free(s);
    s = nsv_server_new();
    wake_case("single loop", s);
    nsv_server_free(s);
    s = nsv_server_new_sharded(2);
    wake_case("sharded", s);
    nsv_server_free(s);
}

/* A second signal stops a drain a request keeps open. */
static void test_second_signal(int workers)
{
    const char *how = workers ? "sharded" : "single loop";
    nsv_server *s = workers ? nsv_server_new_sharded(workers) : nsv_server_new();
    int port, fd;
    http_listen(s, &port);
    nsv_drain_on_signal(s, SIGINT, 60000);
    uint64_t conn = request_in_flight(s, port, &fd);
    ok(conn != 0, "%s: a request is with the host", how);
    raise(SIGINT);
    is_int(poll_for(s, 200), 0, "%s: first SIGINT: draining, not stopped", how);
    int64_t t0 = nsv_millis();
    raise(SIGINT);
    ok(stopped_within(s, 1000), "%s: second SIGINT: NSV_ESTOPPED at once (%lld ms)", how,
       (long long)(nsv_millis() - t0));
    close(fd);
    nsv_server_free(s);
}

/* A repeated SIGTERM keeps draining: supervisors and process-group kills
 * (timeout(1), systemd's control group, a container init forwarding) can
 * deliver one TERM twice, and that must not drop the requests in flight.
 * Only a repeated SIGINT (an interactive ^C ^C) forces the stop. */
static void test_repeated_term(int workers)
{
    const char *how = workers ? "sharded" : "single loop";
    nsv_server *s = workers ? nsv_server_new_sharded(workers) : nsv_server_new();
    int port, fd;
    http_listen(s, &port);
    nsv_drain_on_signal(s, SIGTERM, 60000);
    nsv_drain_on_signal(s, SIGINT, 60000);
    uint64_t conn = request_in_flight(s, port, &fd);
    ok(conn != 0, "%s: a request is with the host", how);
    raise(SIGTERM);
    is_int(poll_for(s, 100), 0, "%s: SIGTERM: draining", how);
    raise(SIGTERM);
    raise(SIGTERM);
    is_int(poll_for(s, 300), 0, "%s: SIGTERM twice more: still draining, the request still open", how);
    is_int(nsv_reply(s, conn, 200, NULL, 0, "late", 4), NSV_OK, "%s: the request is answered", how);
    ok(stopped_within(s, 2000), "%s: then the drain ends by itself", how);
    char buf[256];
    ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = 0;
    ok(n > 0 && strstr(buf, "200") && strstr(buf, "late"), "%s: the client got the answer", how);
    close(fd);
    nsv_server_free(s);
}

static int current_handler_is(int sig, void (*fn)(int))
{
    struct sigaction sa;
    sigaction(sig, NULL, &sa);
    return sa.sa_handler == fn;
}

static void test_remove_and_free(void)
{
    struct sigaction sa = {0};
    sa.sa_handler = usr_handler;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);

    nsv_server *s = nsv_server_new();
    is_int(nsv_drain_on_signal(s, SIGUSR1, 1000), NSV_OK, "SIGUSR1 registered");
    ok(!current_handler_is(SIGUSR1, usr_handler), "the library's handler is installed");
    is_int(nsv_drain_on_signal(s, SIGUSR1, 2000), NSV_OK, "registered again: the timeout is replaced");
    is_int(nsv_drain_on_signal(s, SIGUSR1, -1), NSV_OK, "removed");
    ok(current_handler_is(SIGUSR1, usr_handler), "the previous handler is back");
    raise(SIGUSR1);
    is_int(atomic_load(&usr_hits), 1, "and it runs");
    is_int(poll_for(s, 50), 0, "the server did not drain");
    is_int(nsv_drain_on_signal(s, SIGUSR1, -1), NSV_ENOTFOUND, "removing again: NSV_ENOTFOUND");
    ok(strstr(nsv_last_error_detail(s), "no handler for signal"), "detail: %s", nsv_last_error_detail(s));

    /* Two servers on one signal: both drain; the disposition stays until
     * the last one goes. */
    nsv_server *s2 = nsv_server_new();
    nsv_drain_on_signal(s, SIGUSR2, 1000);
    nsv_drain_on_signal(s2, SIGUSR2, 1000);
    raise(SIGUSR2);
    ok(stopped_within(s, 1000) && stopped_within(s2, 1000), "one SIGUSR2 drained both servers");
    is_int(atomic_load(&usr_hits), 1, "the previous handler did not run");
    nsv_server_free(s);
    ok(!current_handler_is(SIGUSR2, usr_handler), "after freeing one, the library's handler stays");
    raise(SIGUSR2); /* reaches only s2, which is stopped: nothing happens */
    nsv_server_free(s2);
    ok(current_handler_is(SIGUSR2, usr_handler), "nsv_server_free of the last one restored the handler");
    raise(SIGUSR2);
    is_int(atomic_load(&usr_hits), 2, "a signal after the free reaches the previous handler only");

    /* The process-wide table holds 16. */
    nsv_server *many[17];
    int r = 0, n = 0;
    for (n = 0; n < 17; n++) {
        many[n] = nsv_server_new();
        r = nsv_drain_on_signal(many[n], SIGUSR2, 1000);
        if (r != 0)
            break;
    }
    is_int(n, 16, "16 registrations fit");
    is_int(r, NSV_ENOMEM, "the 17th: NSV_ENOMEM");
    ok(n < 17 && strstr(nsv_last_error_detail(many[n]), "16 signal drain registrations"), "detail: %s",
       n < 17 ? nsv_last_error_detail(many[n]) : "");
    for (int i = 0; i <= n && i < 17; i++)
        nsv_server_free(many[i]);
    ok(current_handler_is(SIGUSR2, usr_handler), "all freed: the previous handler is back");
}

static void test_bad_args(void)
{
    nsv_server *s = nsv_server_new();
    is_int(nsv_drain_on_signal(NULL, SIGTERM, 0), NSV_EINVAL, "srv NULL: NSV_EINVAL");
    is_int(nsv_drain_on_signal(s, SIGKILL, 0), NSV_EINVAL, "SIGKILL: NSV_EINVAL");
    ok(strstr(nsv_last_error_detail(s), "is not one of SIGINT"), "detail: %s", nsv_last_error_detail(s));
    is_int(nsv_drain_on_signal(s, SIGSEGV, 0), NSV_EINVAL, "SIGSEGV: NSV_EINVAL");
    is_int(nsv_drain_on_signal(s, 0, 0), NSV_EINVAL, "signal 0: NSV_EINVAL");
    is_int(nsv_drain_on_signal(s, -1, 0), NSV_EINVAL, "signal -1: NSV_EINVAL");
    is_int(nsv_drain_on_signal(s, 1000, 0), NSV_EINVAL, "signal 1000: NSV_EINVAL");
    is_int(nsv_drain_on_signal(s, SIGHUP, -1), NSV_ENOTFOUND, "removing what was never added: NSV_ENOTFOUND");
    nsv_server_free(s);
}

int main(void)
{
    alarm(120); /* a hang fails the test instead of stalling the suite */
    test_bad_args();
    test_drain();
    test_second_signal(0);
    test_second_signal(2);
    test_repeated_term(0);
    test_repeated_term(2);
    test_remove_and_free();
    ok(current_handler_is(SIGTERM, SIG_DFL) && current_handler_is(SIGINT, SIG_DFL),
       "SIGTERM and SIGINT: default dispositions again after every server was freed");
    return done_testing();
}
