/* body_throttle.c - sharded pull mode: a worker whose event queue holds more
 * than the host has taken stops reading a streamed request body (throttle.c)
 * and must read it again once the host has caught up, however the two
 * threads interleave. The case that once stalled an upload until its
 * deadline: the host drains the whole queue while the worker is between
 * deciding to throttle and raising the flag, so the worker resumes at once;
 * the body must then keep flowing.
 *
 * The interleaving is forced through the allocator hook: the first
 * throttle of a loop allocates its list of throttled connections, and the
 * hook holds that worker there until the host has drained the queue. */
#include "tap.h"
#define NSVNET_EVS 256
#define NSVNET_ARENA (4 << 20)
#include "nsvnet.h"
#include <nanosrv.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define BODY (8u << 20)
#define THROTTLE_LIST (64 * sizeof(uint64_t)) /* throttle.c's first list: 64 ids */

static pthread_t host;
static atomic_int armed, held, released;

static void sleep_ms(int ms)
{
    struct timespec t = {0, ms * 1000000L};
    nanosleep(&t, NULL);
}

/* libc realloc, except that the first worker allocation of the throttle
 * list's size while armed waits (at most 5 s) until the host releases it. */
static void *gate_alloc(void *ud, void *p, size_t n)
{
    (void)ud;
    if (n == 0) {
        free(p);
        return NULL;
    }
    if (!p && n == THROTTLE_LIST && !pthread_equal(pthread_self(), host) && atomic_exchange(&armed, 0)) {
        atomic_store(&held, 1);
        for (int i = 0; i < 500 && !atomic_load(&released); i++)
            sleep_ms(10);
    }
    return realloc(p, n);
}

struct upload {
    int port;
    char status[16];
};

/* The client: one POST of BODY bytes, then the status line of the answer. */
static void *upload_thread(void *arg)
{
    struct upload *u = arg;
    int fd = client(u->port);
    char head[128];
    snprintf(head, sizeof head, "POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: %u\r\n\r\n", BODY);
    sendall(fd, head);
    char *blk = malloc(1 << 16);
    memset(blk, 'b', 1 << 16);
    for (unsigned sent = 0; sent < BODY; sent += 1 << 16)
        sendn(fd, blk, 1 << 16);
    free(blk);
    char buf[256];
    int n = read_all(fd, buf, sizeof buf, 20000, 200);
    if (n > 12)
        memcpy(u->status, buf, 12);
    close(fd);
    return NULL;
}

/* One poll: the body bytes it carried; *conn and *eof as they came. */
static size_t take(nsv_server *s, int ms, uint64_t *conn, int *eof)
{
    size_t got = 0;
    int n = nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, ms);
    for (int i = 0; i < n; i++) {
        if (evs[i].type == NSV_EV_REQUEST)
            *conn = evs[i].conn;
        else if (evs[i].type == NSV_EV_BODY) {
            got += evs[i].body_len;
            if (evs[i].flags & NSV_EVF_EOF)
                *eof = 1;
        }
    }
    return got;
}

static void test_drained_while_throttling(void)
{
    host = pthread_self();
    nsv_server *s = nsv_server_new_ex(1, gate_alloc, NULL);
    nsv_set_int(s, NSV_OPT_MAX_OUTPUT, 1024); /* the throttle's least limit: 256 KiB queued */
    nsv_set_int(s, NSV_OPT_MAX_BODY, 64 << 20);
    nsv_set_int(s, NSV_OPT_REQUEST_TIMEOUT_MS, 15000); /* a stalled body fails in seconds, not minutes */
    nsv_set_int(s, NSV_OPT_IDLE_TIMEOUT_MS, 15000);
    int port;
    http_listen(s, &port);
    nsv_route(s, "POST", 4, "/up", 3, 1, NSV_ROUTE_STREAM_BODY);
    atomic_store(&armed, 1);
    struct upload u = {port, ""};
    pthread_t t;
    pthread_create(&t, NULL, upload_thread, &u);

    uint64_t conn = 0;
    int eof = 0;
    size_t got = 0;
    for (int i = 0; i < 500 && !conn; i++)
        got += take(s, 10, &conn, &eof);
    ok(conn != 0, "the streamed request reached the host");
    /* The host looks away: the worker queues body events past the limit
     * and starts to throttle, where the hook holds it. */
    for (int i = 0; i < 500 && !atomic_load(&held); i++)
        sleep_ms(10);
    ok(atomic_load(&held), "the worker throttled the body while the host did not poll");
    /* The host takes everything queued before the worker raises its flag. */
    for (int i = 0; i < 1000; i++) {
        size_t n = take(s, 0, &conn, &eof);
        got += n;
        if (n == 0)
            break;
    }
    atomic_store(&released, 1);
    for (int i = 0; i < 1000 && !eof; i++) /* at most ~10 s, inside the deadlines */
        got += take(s, 10, &conn, &eof);
    ok(eof && got == BODY, "the whole body arrived after the throttle (%zu of %u bytes, EOF %d)", got, BODY, eof);
    nsv_reply(s, conn, 200, NULL, 0, "ok", 2);
    for (int i = 0; i < 100 && !u.status[0]; i++)
        take(s, 10, &conn, &eof);
    pthread_join(t, NULL);
    is_mem(u.status, strlen(u.status), "HTTP/1.1 200", "the client got its answer");
    nsv_server_free(s);
}

int main(void)
{
    test_drained_while_throttling();
    return done_testing();
}
