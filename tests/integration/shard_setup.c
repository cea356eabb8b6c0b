/* shard_setup.c - a sharded server refuses setup once its workers run:
 * nsv_route, nsv_listen, nsv_set_int, nsv_set_str and nsv_set_callback
 * return NSV_ESTATE with a detail after the first nsv_poll (or
 * nsv_poll_worker, nsv_fd, nsv_run), while requests keep being served; a
 * setup call racing the first poll from another thread either lands before
 * the workers start or is refused (run under ThreadSanitizer too). */
#include "tap.h"
#define NSVNET_EVS 256
#include "nsvnet.h"
#include <nanosrv.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#define S(x) x, sizeof(x) - 1

static int detail_has(nsv_server *s, const char *a, const char *b)
{
    const char *d = nsv_last_error_detail(s);
    int r = d && strstr(d, a) && (!b || strstr(d, b));
    if (!r)
        diag("detail: '%s' (wanted '%s'%s%s)", d ? d : "(null)", a, b ? " and " : "", b ? b : "");
    return r;
}

/* Sends `GET path`, polls and answers with the route id, returns it (or -99). */
static int ask(nsv_server *s, int fd, const char *path)
{
    char req[256], buf[4096];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
    if (write(fd, req, (size_t)n) != n)
        return -99;
    int route = -99, answered = 0;
    for (int tries = 0; tries < 200 && !answered; tries++) {
        int k = nsv_poll(s, evs, 256, arena, sizeof arena, 10);
        for (int i = 0; i < k; i++)
            if (evs[i].type == NSV_EV_REQUEST) {
                route = evs[i].route;
                char body[16];
                int bl = snprintf(body, sizeof body, "%d", route);
                nsv_reply(s, evs[i].conn, 200, NULL, 0, body, (size_t)bl);
                answered = 1;
            }
    }
    size_t got = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (answered && got < sizeof buf - 1 && poll(&p, 1, 2000) > 0) {
        ssize_t r = read(fd, buf + got, sizeof buf - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
        buf[got] = 0;
        char *b = strstr(buf, "\r\n\r\n");
        if (b && strlen(b + 4) > 0)
            break;
    }
    return answered && got ? route : -99;
}

static void on_ev(nsv_server *s, const nsv_event *ev, const char *a, void *ud)
{
    (void)s;
    (void)ev;
    (void)a;
    (void)ud;
}

/* Every setup call is refused, naming itself, and changes nothing. */
static void check_refused(nsv_server *s, const char *how)
{
    is_int(nsv_route(s, S("GET"), S("/late"), 9, 0), NSV_ESTATE, "%s: nsv_route -> NSV_ESTATE", how);
    ok(detail_has(s, "nsv_route", "workers are running"), "%s: nsv_route detail", how);
    ok(detail_has(s, "add routes before the first nsv_poll", NULL), "%s: the detail says what to do", how);
    is_int(nsv_listen(s, S("http://127.0.0.1:0")), NSV_ESTATE, "%s: nsv_listen -> NSV_ESTATE", how);
    ok(detail_has(s, "nsv_listen", "workers are running"), "%s: nsv_listen detail", how);
    int64_t mb = nsv_get_int(s, NSV_OPT_MAX_BODY);
    is_int(nsv_set_int(s, NSV_OPT_MAX_BODY, 12345), NSV_ESTATE, "%s: nsv_set_int -> NSV_ESTATE", how);
    ok(detail_has(s, "nsv_set_int(max_body)", "workers are running"), "%s: nsv_set_int detail", how);
    is_int(nsv_get_int(s, NSV_OPT_MAX_BODY), mb, "%s: option unchanged", how);
    is_int(nsv_set_int(s, 9999, 1), NSV_EINVAL, "%s: an unknown option is still NSV_EINVAL", how);
    is_int(nsv_set_str(s, NSV_OPT_TLS_CA_PEM, S("x")), NSV_ESTATE, "%s: nsv_set_str -> NSV_ESTATE", how);
    ok(detail_has(s, "nsv_set_str(tls_ca_pem)", "workers are running"), "%s: nsv_set_str detail", how);
    is_int(nsv_set_callback(s, on_ev, NULL), NSV_ESTATE, "%s: nsv_set_callback -> NSV_ESTATE", how);
    ok(detail_has(s, "nsv_set_callback", "workers are running"), "%s: nsv_set_callback detail", how);
    is_int(nsv_set_callback(s, NULL, NULL), NSV_ESTATE, "%s: nsv_set_callback(NULL) -> NSV_ESTATE", how);
}

/* ---- refused while requests are served; a thread keeps trying ---- */
static atomic_int stop_hammer, hammer_ok, hammer_calls;
static void *hammer(void *arg)
{
    nsv_server *s = arg;
    char pat[32];
    for (int i = 0; i < 2000 && (i < 50 || !atomic_load(&stop_hammer)); i++) {
        snprintf(pat, sizeof pat, "/h%d", i);
        int r1 = nsv_route(s, "GET", 3, pat, strlen(pat), 100 + i, 0);
        int r2 = nsv_set_int(s, NSV_OPT_MAX_HEADERS, 50 + i % 10);
        int r3 = nsv_set_callback(s, NULL, NULL);
        atomic_fetch_add(&hammer_calls, 1);
        if (r1 != NSV_ESTATE || r2 != NSV_ESTATE || r3 != NSV_ESTATE)
            atomic_fetch_add(&hammer_ok, 1);
        usleep(200);
    }
    return NULL;
}

static void test_refused_after_poll(void)
{
    nsv_server *s = nsv_server_new_sharded(2);
    ok(s != NULL, "sharded server, 2 workers");
    is_int(nsv_route(s, S("GET"), S("/t"), 1, 0), NSV_OK, "route before the first poll");
    is_int(nsv_set_int(s, NSV_OPT_MAX_BODY, 4096), NSV_OK, "option before the first poll");
    int lid = nsv_listen(s, S("http://127.0.0.1:0"));
    ok(lid >= 0, "listener before the first poll");
    int port = nsv_listener_port(s, lid);
    is_int(nsv_poll(s, evs, 256, arena, sizeof arena, 0), 0, "first poll starts the workers");
    check_refused(s, "after nsv_poll");

    int fd = client(port);
    ok(fd >= 0, "client connected");
    is_int(ask(s, fd, "/t"), 1, "request served after the refusals");
    is_int(ask(s, fd, "/late"), -1, "the refused route was not added");

    /* Requests are matched on the workers while another thread keeps
     * trying to change routes and options. */
    pthread_t th;
    pthread_create(&th, NULL, hammer, s);
    int served = 0;
    for (int i = 0; i < 100; i++)
        served += ask(s, fd, i % 2 ? "/t" : "/h1") != -99;
    atomic_store(&stop_hammer, 1);
    pthread_join(th, NULL);
    is_int(served, 100, "100 requests served while setup calls were refused");
    ok(atomic_load(&hammer_calls) > 0, "the other thread made %d rounds of calls", atomic_load(&hammer_calls));
    is_int(atomic_load(&hammer_ok), 0, "every one of them NSV_ESTATE");
    is_int(ask(s, fd, "/h1"), -1, "no route of that thread was added");
    close(fd);
    nsv_server_free(s);
}

/* Each way of starting the workers counts. */
static void test_other_starters(void)
{
    nsv_server *s = nsv_server_new_sharded(2);
    ok(nsv_fd(s) >= 0, "nsv_fd");
    check_refused(s, "after nsv_fd");
    nsv_server_free(s);

    s = nsv_server_new_sharded(2);
    is_int(nsv_poll_worker(s, 1, evs, 256, arena, sizeof arena, 0), 0, "nsv_poll_worker");
    is_int(nsv_route(s, S("GET"), S("/x"), 1, 0), NSV_ESTATE, "after nsv_poll_worker: nsv_route -> NSV_ESTATE");
    nsv_server_free(s);
}

static void *runner(void *arg)
{
    nsv_run(arg);
    return NULL;
}

static void test_run(void)
{
    nsv_server *s = nsv_server_new_sharded(2);
    is_int(nsv_set_callback(s, on_ev, NULL), NSV_OK, "callback before nsv_run");
    pthread_t th;
    pthread_create(&th, NULL, runner, s);
    int r = NSV_OK;
    char pat[32];
    for (int i = 0; i < 400 && r == NSV_OK; i++) {
        snprintf(pat, sizeof pat, "/r%d", i);
        r = nsv_route(s, "GET", 3, pat, strlen(pat), i, 0);
        if (r == NSV_OK)
            usleep(5000);
    }
    is_int(r, NSV_ESTATE, "nsv_run on another thread: nsv_route -> NSV_ESTATE once it started");
    nsv_stop(s);
    pthread_join(th, NULL);
    nsv_server_free(s);
}

/* A thread adds routes while the main thread polls for the first time:
 * each lands before the workers start (and then matches) or is refused. */
static atomic_int last_ok = -1, racer_done;
static void *racer(void *arg)
{
    nsv_server *s = arg;
    char pat[32];
    for (int i = 0; i < 100000; i++) {
        snprintf(pat, sizeof pat, "/r%d", i);
        int r = nsv_route(s, "GET", 3, pat, strlen(pat), i, 0);
        if (r == NSV_ESTATE)
            break;
        if (r != NSV_OK) {
            atomic_store(&last_ok, -2);
            break;
        }
        atomic_store(&last_ok, i);
    }
    atomic_store(&racer_done, 1);
    return NULL;
}

static void test_race_first_poll(void)
{
    nsv_server *s = nsv_server_new_sharded(2);
    int lid = nsv_listen(s, S("http://127.0.0.1:0"));
    pthread_t th;
    pthread_create(&th, NULL, racer, s);
    for (int i = 0; i < 20000 && atomic_load(&last_ok) < 50 && !atomic_load(&racer_done); i++)
        usleep(100); /* some routes in first */
    nsv_poll(s, evs, 256, arena, sizeof arena, 0);
    pthread_join(th, NULL);
    int last = atomic_load(&last_ok);
    ok(last >= 50 && last < 99999, "racing thread: %d routes added, then NSV_ESTATE", last + 1);
    int fd = client(nsv_listener_port(s, lid));
    char path[32];
    snprintf(path, sizeof path, "/r%d", last);
    is_int(ask(s, fd, path), last, "the last route added before the start matches");
    snprintf(path, sizeof path, "/r%d", last + 1);
    is_int(ask(s, fd, path), -1, "the refused one does not");
    close(fd);
    nsv_server_free(s);
}

int main(void)
{
    test_refused_after_poll();
    test_other_starters();
    test_run();
    test_race_first_poll();
    return done_testing();
}
