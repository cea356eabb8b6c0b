/* timers.c - host timers (nsv_timer_add, nsv_timer_cancel) and connection
 * wakeups (nsv_wakeup_conn): argument checks; one-shot order and ids; a
 * blocked poll woken by the next timer without busy wake-ups; repeats that
 * never fire early and never burst after a slow host; cancels from the
 * polling thread (a queued event is dropped), from inside the event and
 * from another thread; nsv_run with a callback; sharded servers (nsv_poll
 * and nsv_poll_worker of worker 0); wakeups in order with the
 * connection's data, from several threads, payload limits, stale ids; and a
 * server freed with live timers and queued events. Every wait is bounded in
 * count and time; a watchdog stops a poll that would block forever. */
#include "tap.h"
#include <nanosrv.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

static nsv_event evs[256];
static char arena[1 << 20];

/* Stops the server after 5 s unless disarmed: a poll that ignores its next
 * timer fails the test instead of hanging it. */
typedef struct watchdog {
    nsv_server *s;
    atomic_int done;
    pthread_t th;
} watchdog;

static void *watch_main(void *arg)
{
    watchdog *w = arg;
    for (int i = 0; i < 500 && !atomic_load(&w->done); i++)
        usleep(10 * 1000);
    if (!atomic_load(&w->done))
        nsv_stop(w->s);
    return NULL;
}

static void watch_start(watchdog *w, nsv_server *s)
{
    w->s = s;
    atomic_store(&w->done, 0);
    pthread_create(&w->th, NULL, watch_main, w);
}

static void watch_end(watchdog *w)
{
    atomic_store(&w->done, 1);
    pthread_join(w->th, NULL);
}

/* Poll (worker < 0: nsv_poll) until n TIMER events came or `polls` polls
 * passed; tags (and ids, times) of the events in order. */
static int timers_seen(nsv_server *s, int worker, int n, int polls, int timeout, uint64_t *tags, int64_t *ids,
                       int64_t *at)
{
    int got = 0;
    for (int p = 0; p < polls && got < n; p++) {
        int r = worker < 0 ? nsv_poll(s, evs, 256, arena, sizeof arena, timeout)
                           : nsv_poll_worker(s, worker, evs, 256, arena, sizeof arena, timeout);
        if (r < 0)
            break;
        for (int i = 0; i < r && got < n; i++)
            if (evs[i].type == NSV_EV_TIMER) {
                if (tags)
                    tags[got] = evs[i].tag;
                if (ids)
                    ids[got] = (int64_t)evs[i].conn;
                if (at)
                    at[got] = nsv_millis();
                got++;
            }
    }
    return got;
}

/* TIMER events of timer id in `polls` polls with timeout 0. */
static int count_fires(nsv_server *s, int64_t id, int polls, int timeout)
{
    int c = 0;
    for (int p = 0; p < polls; p++) {
        int r = nsv_poll(s, evs, 256, arena, sizeof arena, timeout);
        for (int i = 0; i < r; i++)
            c += evs[i].type == NSV_EV_TIMER && (int64_t)evs[i].conn == id;
    }
    return c;
}

static void test_args(void)
{
    nsv_server *s = nsv_server_new();
    is_int(nsv_timer_add(NULL, 1, 0, 0), NSV_EINVAL, "timer_add: NULL server -> EINVAL");
    is_int(nsv_timer_add(s, -1, 0, 0), NSV_EINVAL, "timer_add: negative delay -> EINVAL");
    is_int(nsv_timer_add(s, 1, -5, 0), NSV_EINVAL, "timer_add: negative repeat -> EINVAL");
    ok(strstr(nsv_last_error_detail(s), "negative") != NULL, "detail names the cause: %s", nsv_last_error_detail(s));
    is_int(nsv_timer_add(s, (int64_t)1 << 41, 0, 0), NSV_ERANGE, "timer_add: delay past 2^40 ms -> ERANGE");
    is_int(nsv_timer_add(s, 1, INT64_MAX, 0), NSV_ERANGE, "timer_add: repeat past 2^40 ms -> ERANGE");
    is_int(nsv_timer_cancel(NULL, 1), NSV_EINVAL, "timer_cancel: NULL server -> EINVAL");
    is_int(nsv_timer_cancel(s, 0), NSV_EINVAL, "timer_cancel: id 0 -> EINVAL");
    is_int(nsv_timer_cancel(s, -3), NSV_EINVAL, "timer_cancel: negative id -> EINVAL");
    is_int(nsv_timer_cancel(s, 12345), NSV_ENOTFOUND, "timer_cancel: unknown id -> ENOTFOUND");
    is_int(nsv_wakeup_conn(NULL, 1, "x", 1), NSV_EINVAL, "wakeup_conn: NULL server -> EINVAL");
    is_int(nsv_wakeup_conn(s, 0, "x", 1), NSV_ESTALE, "wakeup_conn: id 0 -> ESTALE");
    is_int(nsv_wakeup_conn(s, 0xFFFF00000001ull, NULL, 0), NSV_ESTALE, "wakeup_conn: unknown id -> ESTALE");
    is_int(nsv_wakeup_conn(s, 1ull << 32, NULL, 3), NSV_EINVAL, "wakeup_conn: NULL data with a length -> EINVAL");
    nsv_server_free(s);
}

/* One-shot timers fire once each, by due time, ids > 0 and never reused. */
static void test_oneshot(void)
{
    nsv_server *s = nsv_server_new();
    int64_t a = nsv_timer_add(s, 60, 0, 3), b = nsv_timer_add(s, 20, 0, 1), c = nsv_timer_add(s, 40, 0, 2);
    int64_t d = nsv_timer_add(s, 0, 0, 0);
    ok(a > 0 && b > a && c > b && d > c, "ids > 0, increasing (%lld %lld %lld %lld)", (long long)a, (long long)b,
       (long long)c, (long long)d);
    uint64_t tags[8];
    int64_t ids[8];
    int n = timers_seen(s, -1, 4, 200, 20, tags, ids, NULL);
    is_int(n, 4, "four one-shot timers -> four TIMER events");
    is_int(timers_seen(s, -1, 1, 5, 10, NULL, NULL, NULL), 0, "and no more");
    ok(tags[0] == 0 && tags[1] == 1 && tags[2] == 2 && tags[3] == 3, "in due order (tags %llu %llu %llu %llu)",
       (unsigned long long)tags[0], (unsigned long long)tags[1], (unsigned long long)tags[2],
       (unsigned long long)tags[3]);
    ok(ids[0] == d && ids[1] == b && ids[2] == c && ids[3] == a, "conn carries the timer id");
    is_int(nsv_timer_cancel(s, a), NSV_ENOTFOUND, "cancel after its event -> ENOTFOUND");
    int64_t e = nsv_timer_add(s, 0, 0, 9);
    ok(e > a && e > d, "a later timer gets a new id (%lld)", (long long)e);
    nsv_server_free(s);
}

/* nsv_poll with timeout -1 returns for the next timer, without busy wake-ups. */
static void test_blocking_poll(nsv_server *s, const char *kind)
{
    watchdog w;
    watch_start(&w, s);
    int64_t t0 = nsv_millis();
    int64_t id = nsv_timer_add(s, 150, 0, 77);
    int polls = 0, got = 0;
    while (!got && polls < 50) {
        int r = nsv_poll(s, evs, 256, arena, sizeof arena, -1);
        polls++;
        if (r < 0)
            break;
        for (int i = 0; i < r; i++)
            got |= evs[i].type == NSV_EV_TIMER && (int64_t)evs[i].conn == id && evs[i].tag == 77;
    }
    int64_t dt = nsv_millis() - t0;
    watch_end(&w);
    ok(got, "%s: a poll with timeout -1 returns the timer's event", kind);
    ok(dt >= 150, "%s: not before its due time (%lld ms)", kind, (long long)dt);
    ok(polls <= 3, "%s: no busy wake-ups while waiting (%d polls)", kind, polls);
}

/* A timer added by another thread while the host's poll sleeps wakes it. */
typedef struct adder {
    nsv_server *s;
    int64_t id;
} adder;

static void *add_main(void *arg)
{
    adder *a = arg;
    usleep(50 * 1000);
    a->id = nsv_timer_add(a->s, 0, 0, 55);
    return NULL;
}

static void test_add_from_thread(nsv_server *s, const char *kind)
{
    watchdog w;
    watch_start(&w, s);
    adder a = {.s = s};
    pthread_t th;
    pthread_create(&th, NULL, add_main, &a);
    int got = 0;
    for (int p = 0; p < 50 && !got; p++) {
        int r = nsv_poll(s, evs, 256, arena, sizeof arena, -1);
        if (r < 0)
            break;
        for (int i = 0; i < r; i++)
            got |= evs[i].type == NSV_EV_TIMER && evs[i].tag == 55;
    }
    pthread_join(th, NULL);
    watch_end(&w);
    ok(got && a.id > 0, "%s: a timer added from another thread wakes a poll blocked with timeout -1", kind);
}

/* Repeats: never early, on their phase; a slow host gets one event, not a
 * burst; cancel from inside the event stops it. */
static void test_repeat(nsv_server *s, const char *kind, int worker)
{
    int64_t t0 = nsv_millis();
    int64_t id = nsv_timer_add(s, 10, 10, 5);
    int64_t at[10];
    int n = timers_seen(s, worker, 10, 2000, 50, NULL, NULL, at);
    is_int(n, 10, "%s: a repeating timer fires again and again", kind);
    int early = 0;
    for (int i = 0; i < n; i++)
        early += at[i] < t0 + 10 + 10 * i;
    is_int(early, 0, "%s: the k-th event never comes before delay + k * repeat", kind);

    /* The host stops polling for 20 periods: then at most one event waits
     * (a single loop fires only inside nsv_poll: exactly one). */
    usleep(200 * 1000);
    int burst = 0;
    int got = worker < 0 ? nsv_poll(s, evs, 256, arena, sizeof arena, 0)
                         : nsv_poll_worker(s, worker, evs, 256, arena, sizeof arena, 0);
    for (int i = 0; i < got; i++)
        burst += evs[i].type == NSV_EV_TIMER && (int64_t)evs[i].conn == id;
    if (strstr(kind, "single"))
        is_int(burst, 1, "%s: after a slow host, one event, not a burst of the missed periods", kind);
    else
        ok(burst <= 1, "%s: after a slow host, at most one event waits, not a burst (%d)", kind, burst);

    /* Cancel from inside its own event: nothing after. */
    int stopped = 0, after = 0;
    for (int p = 0; p < 400 && !stopped; p++) {
        int r = worker < 0 ? nsv_poll(s, evs, 256, arena, sizeof arena, 50)
                           : nsv_poll_worker(s, worker, evs, 256, arena, sizeof arena, 50);
        for (int i = 0; i < r; i++)
            if (evs[i].type == NSV_EV_TIMER && (int64_t)evs[i].conn == id) {
                if (stopped)
                    after++;
                else
                    stopped = nsv_timer_cancel(s, id) == NSV_OK;
            }
    }
    ok(stopped, "%s: cancel inside the repeating timer's event -> OK", kind);
    for (int p = 0; p < 5; p++) {
        int r = worker < 0 ? nsv_poll(s, evs, 256, arena, sizeof arena, 20)
                           : nsv_poll_worker(s, worker, evs, 256, arena, sizeof arena, 20);
        for (int i = 0; i < r; i++)
            after += evs[i].type == NSV_EV_TIMER && (int64_t)evs[i].conn == id;
    }
    is_int(after, 0, "%s: no event after the cancel returned", kind);
    is_int(nsv_timer_cancel(s, id), NSV_ENOTFOUND, "%s: a second cancel -> ENOTFOUND", kind);
}

/* An event already queued when the polling thread cancels is dropped. */
static void test_cancel_queued(nsv_server *s, const char *kind)
{
    int64_t a = nsv_timer_add(s, 0, 0, 1), b = nsv_timer_add(s, 0, 0, 2), c = nsv_timer_add(s, 0, 50, 3);
    int seen_a = 0, cancelled = 0, late = 0;
    for (int p = 0; p < 200 && !seen_a; p++) {
        int r = nsv_poll(s, evs, 1, arena, sizeof arena, 10); /* one event per poll */
        if (r == 1 && evs[0].type == NSV_EV_TIMER && (int64_t)evs[0].conn == a)
            seen_a = 1;
    }
    usleep(20 * 1000); /* b and c are due and, on a sharded server, queued */
    cancelled = nsv_timer_cancel(s, b) == NSV_OK && nsv_timer_cancel(s, c) == NSV_OK;
    for (int p = 0; p < 10; p++) {
        int r = nsv_poll(s, evs, 256, arena, sizeof arena, 10);
        for (int i = 0; i < r; i++)
            late += evs[i].type == NSV_EV_TIMER && ((int64_t)evs[i].conn == b || (int64_t)evs[i].conn == c);
    }
    ok(seen_a && cancelled, "%s: timers b and c cancelled while due", kind);
    is_int(late, 0, "%s: their events, due or queued, never come after the cancel", kind);
}

/* Cancel from another thread: once it returned, nothing comes. */
typedef struct canceller {
    nsv_server *s;
    int64_t id;
    int r;
} canceller;

static void *cancel_main(void *arg)
{
    canceller *k = arg;
    usleep(30 * 1000);
    k->r = nsv_timer_cancel(k->s, k->id);
    return NULL;
}

static void test_cancel_thread(nsv_server *s, const char *kind)
{
    canceller k = {.s = s, .id = nsv_timer_add(s, 1, 1, 8)};
    pthread_t th;
    pthread_create(&th, NULL, cancel_main, &k);
    int before = 0;
    for (int p = 0; p < 10; p++)
        before += count_fires(s, k.id, 1, 5);
    pthread_join(th, NULL);
    is_int(k.r, NSV_OK, "%s: cancel from another thread -> OK", kind);
    ok(before > 0, "%s: it fired before (%d)", kind, before);
    is_int(count_fires(s, k.id, 10, 10), 0, "%s: nothing after the other thread's cancel returned", kind);
}

/* nsv_run with a callback: three repeats, cancel inside, a one-shot stops. */
static atomic_int run_fires, run_other;
static int64_t run_timer;

static void run_cb(nsv_server *s, const nsv_event *ev, const char *a, void *ud)
{
    (void)a, (void)ud;
    if (ev->type != NSV_EV_TIMER)
        return;
    if ((int64_t)ev->conn != run_timer) {
        if (ev->tag == 99)
            nsv_stop(s);
        else
            atomic_fetch_add(&run_other, 1);
        return;
    }
    if (atomic_fetch_add(&run_fires, 1) + 1 == 3) {
        nsv_timer_cancel(s, run_timer);
        nsv_timer_add(s, 30, 0, 99); /* stops the run after late repeats would have come */
    }
}

static void test_run(int sharded)
{
    const char *kind = sharded ? "sharded nsv_run" : "nsv_run";
    nsv_server *s = sharded ? nsv_server_new_sharded(2) : nsv_server_new();
    atomic_store(&run_fires, 0);
    atomic_store(&run_other, 0);
    nsv_set_callback(s, run_cb, NULL);
    run_timer = nsv_timer_add(s, 5, 5, 1);
    int64_t dropped = nsv_timer_add(s, 10, 0, 2);
    is_int(nsv_timer_cancel(s, dropped), NSV_OK, "%s: cancel before the run", kind);
    watchdog w;
    watch_start(&w, s);
    int r = nsv_run(s);
    watch_end(&w);
    is_int(r, NSV_OK, "%s: returns after the stop", kind);
    is_int(atomic_load(&run_fires), 3, "%s: three callbacks, then the cancel inside the third stops it", kind);
    is_int(atomic_load(&run_other), 0, "%s: a timer cancelled before the run never fires", kind);
    nsv_server_free(s);
}

/* ---- wakeups ---- */

static int tcp_client(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void sendn_or(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

/* Poll (worker < 0: nsv_poll) until an event of type for conn (0: any). */
static int wait_ev(nsv_server *s, int worker, uint32_t type, uint64_t conn, nsv_event *out, char *data, int polls)
{
    for (int p = 0; p < polls; p++) {
        int r = worker < 0 ? nsv_poll(s, evs, 256, arena, sizeof arena, 20)
                           : nsv_poll_worker(s, worker, evs, 256, arena, sizeof arena, 20);
        for (int i = 0; i < r; i++)
            if (evs[i].type == type && (!conn || evs[i].conn == conn)) {
                *out = evs[i];
                if (data)
                    memcpy(data, arena + evs[i].body_off, evs[i].body_len);
                return 1;
            }
    }
    return 0;
}

static void test_wakeup(int sharded)
{
    const char *kind = sharded ? "sharded" : "single loop";
    nsv_server *s = sharded ? nsv_server_new_sharded(2) : nsv_server_new();
    int lid = nsv_listen(s, "tcp://127.0.0.1:0", 17);
    int fd = tcp_client(nsv_listener_port(s, lid));
    nsv_event ev;
    static char data[70000];
    ok(fd >= 0 && wait_ev(s, -1, NSV_EV_TCP_OPEN, 0, &ev, NULL, 200), "%s: TCP_OPEN", kind);
    uint64_t conn = ev.conn;
    nsv_conn_set_tag(s, conn, 4242);

    /* Order: the wakeup, then a send the client answers: the wakeup comes
     * before the answer's data (both calls go the same way to the loop). */
    sendn_or(fd, "one", 3);
    ok(wait_ev(s, -1, NSV_EV_TCP_DATA, conn, &ev, NULL, 200), "%s: DATA", kind);
    is_int(nsv_wakeup_conn(s, conn, "ping", 4), NSV_OK, "%s: wakeup_conn -> OK", kind);
    is_int(nsv_send(s, conn, "go", 2), NSV_OK, "%s: send", kind);
    int order = 0, answered = 0; /* order 1: wakeup seen; 2: then data; -1: data first */
    for (int p = 0; p < 300 && order != 2 && order != -1; p++) {
        char buf[8];
        if (!answered && recv(fd, buf, sizeof buf, MSG_DONTWAIT) == 2) {
            sendn_or(fd, "two", 3);
            answered = 1;
        }
        int r = nsv_poll(s, evs, 256, arena, sizeof arena, 10);
        for (int i = 0; i < r && order != -1; i++) {
            if (evs[i].conn != conn)
                continue;
            if (evs[i].type == NSV_EV_WAKEUP && order == 0) {
                order = 1;
                ev = evs[i];
                memcpy(data, arena + ev.body_off, ev.body_len);
            } else if (evs[i].type == NSV_EV_TCP_DATA) {
                order = order == 1 ? 2 : -1;
            }
        }
    }
    ok(answered, "%s: the client got the send and answered", kind);
    is_int(order, 2, "%s: WAKEUP comes before the data the client sent after it", kind);
    ok(ev.tag == 4242 && ev.body_len == 4 && memcmp(data, "ping", 4) == 0,
       "%s: WAKEUP carries the connection's tag and the payload", kind);

    /* Payload limits. */
    for (size_t i = 0; i < 65536; i++)
        data[i] = (char)(i * 131 + 7);
    data[10] = 0;
    is_int(nsv_wakeup_conn(s, conn, data, 65537), NSV_ETOOBIG, "%s: 65537 bytes -> ETOOBIG", kind);
    is_int(nsv_wakeup_conn(s, conn, data, 65536), NSV_OK, "%s: 65536 bytes -> OK", kind);
    is_int(nsv_wakeup_conn(s, conn, NULL, 0), NSV_OK, "%s: an empty payload -> OK", kind);
    int big = 0, empty = 0;
    for (int p = 0; p < 200 && !empty; p++) {
        int r = nsv_poll(s, evs, 256, arena, sizeof arena, 10);
        for (int i = 0; i < r; i++) {
            if (evs[i].type != NSV_EV_WAKEUP || evs[i].conn != conn)
                continue;
            if (!big)
                big = evs[i].body_len == 65536 && memcmp(arena + evs[i].body_off, data, 65536) == 0 ? 1 : -1;
            else
                empty = evs[i].body_len == 0 ? 1 : -1;
        }
    }
    is_int(big, 1, "%s: 64 KiB payload intact (NUL included)", kind);
    is_int(empty, 1, "%s: then the empty payload -> body_len 0", kind);

    /* Stale: after the close. */
    close(fd);
    is_int(nsv_close(s, conn), NSV_OK, "%s: close", kind);
    ok(wait_ev(s, -1, NSV_EV_CLOSE, conn, &ev, NULL, 200), "%s: CLOSE", kind);
    is_int(nsv_wakeup_conn(s, conn, "x", 1), NSV_ESTALE, "%s: wakeup for a closed connection -> ESTALE", kind);
    ok(strstr(nsv_last_error_detail(s), "not open") != NULL, "%s: detail: %s", kind, nsv_last_error_detail(s));

    /* Once the host has the CLOSE, every call on the id says ESTALE: on a
     * sharded server the worker retires the id before it queues the CLOSE,
     * so a poll on another thread cannot see the CLOSE first. */
    int closes = 0, stale = 0;
    for (int k = 0; k < 150; k++) {
        int cfd = tcp_client(nsv_listener_port(s, lid));
        if (cfd < 0 || !wait_ev(s, -1, NSV_EV_TCP_OPEN, 0, &ev, NULL, 200)) {
            if (cfd >= 0)
                close(cfd);
            break;
        }
        uint64_t id = ev.conn;
        close(cfd);
        nsv_close(s, id);
        /* Spin (timeout 0) so the poll sees the CLOSE as early as it can. */
        int got = 0;
        for (int p = 0; p < 2000000 && !got; p++) {
            int r = nsv_poll(s, evs, 256, arena, sizeof arena, p < 1000000 ? 0 : 1);
            for (int i = 0; i < r && !got; i++)
                got = evs[i].type == NSV_EV_CLOSE && evs[i].conn == id;
        }
        if (!got)
            break;
        closes++;
        stale += nsv_wakeup_conn(s, id, "x", 1) == NSV_ESTALE && nsv_send(s, id, "x", 1) == NSV_ESTALE;
    }
    is_int(closes, 150, "%s: 150 closes, each a CLOSE", kind);
    is_int(stale, closes, "%s: after each CLOSE, wakeup_conn and send -> ESTALE", kind);
    nsv_server_free(s);
}

/* Wakeups from several threads all arrive, each thread's in its order; on a
 * sharded server through nsv_poll_worker of the connection's worker. */
#define WTHREADS 4
#define WEACH 200
typedef struct waker {
    nsv_server *s;
    uint64_t conn;
    int k, fails;
} waker;

static void *wake_main(void *arg)
{
    waker *w = arg;
    for (int i = 0; i < WEACH; i++) {
        char p[16];
        int n = snprintf(p, sizeof p, "%d:%d", w->k, i);
        w->fails += nsv_wakeup_conn(w->s, w->conn, p, (size_t)n) != NSV_OK;
    }
    return NULL;
}

static void test_wakeup_threads(int sharded)
{
    const char *kind = sharded ? "sharded nsv_poll_worker" : "single loop";
    nsv_server *s = sharded ? nsv_server_new_sharded(2) : nsv_server_new();
    int lid = nsv_listen(s, "tcp://127.0.0.1:0", 17);
    int fd = tcp_client(nsv_listener_port(s, lid));
    nsv_event ev = {0};
    int worker = -1, open = 0;
    for (int p = 0; p < 200 && !open; p++) {
        if (!sharded) {
            open = wait_ev(s, -1, NSV_EV_TCP_OPEN, 0, &ev, NULL, 1);
            continue;
        }
        for (int k = 0; k < 2 && !open; k++)
            if ((open = wait_ev(s, k, NSV_EV_TCP_OPEN, 0, &ev, NULL, 1)))
                worker = k; /* the connection's events come from here */
    }
    ok(fd >= 0 && open, "%s: TCP_OPEN", kind);
    waker w[WTHREADS];
    pthread_t th[WTHREADS];
    for (int k = 0; k < WTHREADS; k++) {
        w[k] = (waker){.s = s, .conn = ev.conn, .k = k};
        pthread_create(&th[k], NULL, wake_main, &w[k]);
    }
    int next[WTHREADS] = {0}, total = 0, bad = 0;
    for (int p = 0; p < 1000 && total < WTHREADS * WEACH; p++) {
        int r = worker < 0 ? nsv_poll(s, evs, 256, arena, sizeof arena, 20)
                           : nsv_poll_worker(s, worker, evs, 256, arena, sizeof arena, 20);
        for (int i = 0; i < r; i++) {
            if (evs[i].type != NSV_EV_WAKEUP)
                continue;
            int k = -1, n = -1;
            char p2[16] = {0};
            memcpy(p2, arena + evs[i].body_off, evs[i].body_len < 15 ? evs[i].body_len : 15);
            if (sscanf(p2, "%d:%d", &k, &n) != 2 || k < 0 || k >= WTHREADS || n != next[k])
                bad++;
            else
                next[k]++;
            total++;
        }
    }
    int fails = 0;
    for (int k = 0; k < WTHREADS; k++) {
        pthread_join(th[k], NULL);
        fails += w[k].fails;
    }
    is_int(fails, 0, "%s: every wakeup_conn from %d threads -> OK", kind, WTHREADS);
    is_int(total, WTHREADS * WEACH, "%s: every WAKEUP arrives", kind);
    is_int(bad, 0, "%s: each thread's wakeups in its order", kind);
    close(fd);
    nsv_server_free(s);
}

/* Freed with live timers (one-shot, repeating) and queued, undelivered
 * events: ASan finds no leak or use after free. */
static void test_free_live(int sharded)
{
    nsv_server *s = sharded ? nsv_server_new_sharded(2) : nsv_server_new();
    for (int i = 0; i < 300; i++)
        nsv_timer_add(s, i % 3 ? 0 : 100000, i % 2 ? 1 : 0, (uint64_t)i);
    for (int i = 1; i < 300; i += 7)
        nsv_timer_cancel(s, i);
    int r = nsv_poll(s, evs, 4, arena, sizeof arena, 20); /* some delivered, most still queued */
    ok(r > 0, "%s: timers fired before the free (%d)", sharded ? "sharded" : "single loop", r);
    usleep(10 * 1000);
    nsv_server_free(s);
}

int main(void)
{
    test_args();
    test_oneshot();

    nsv_server *s = nsv_server_new();
    test_blocking_poll(s, "single loop");
    test_add_from_thread(s, "single loop");
    test_repeat(s, "single loop", -1);
    test_cancel_queued(s, "single loop");
    test_cancel_thread(s, "single loop");
    nsv_server_free(s);

    s = nsv_server_new_sharded(2);
    test_blocking_poll(s, "sharded");
    test_add_from_thread(s, "sharded");
    test_repeat(s, "sharded", -1);
    test_cancel_queued(s, "sharded");
    test_cancel_thread(s, "sharded");
    nsv_server_free(s);

    s = nsv_server_new_sharded(3);
    test_repeat(s, "sharded nsv_poll_worker(0)", 0);
    nsv_server_free(s);

    test_run(0);
    test_run(1);
    test_wakeup(0);
    test_wakeup(1);
    test_wakeup_threads(0);
    test_wakeup_threads(1);
    test_free_live(0);
    test_free_live(1);
    return done_testing();
}
