/* shard.c - sharded server: replies from other threads, many threads
 * replying at once, stale ids across workers, per-worker poll, the pipe fd,
 * drain under load with no request lost, and 10,000 connections. */
#include "tap.h"
#define NSVNET_NO_BUFFERS
#include "nsvnet.h"
#include <nanosrv.h>
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

/* Read until `count` complete "\r\n\r\n"+Content-Length responses or timeout. */
static int read_responses(int fd, int count, int ms)
{
    char buf[65536];
    size_t n = 0;
    int got = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (got < count && poll(&p, 1, ms) > 0) {
        ssize_t r = read(fd, buf + n, sizeof buf - n - 1);
        if (r <= 0)
            break;
        n += (size_t)r;
        buf[n] = 0;
        got = 0;
        for (char *q = buf; (q = strstr(q, "HTTP/1.1 200")); q++)
            got++;
    }
    return got;
}

/* ---- replies from worker pool threads ---- */
typedef struct job { uint64_t conn; } job;
static job jobs[4096];
static atomic_int jhead, jtail, replied;
static nsv_server *S;
static atomic_int quit;

static void *replier(void *arg)
{
    (void)arg;
    while (!atomic_load(&quit)) {
        int t = atomic_load(&jtail);
        if (t == atomic_load(&jhead)) {
            usleep(100);
            continue;
        }
        if (!atomic_compare_exchange_strong(&jtail, &t, t + 1))
            continue;
        uint64_t id = jobs[t % 4096].conn;
        if (nsv_reply(S, id, 200, NULL, 0, "threaded", 8) == NSV_OK)
            atomic_fetch_add(&replied, 1);
    }
    return NULL;
}

static void test_threads(void)
{
    S = nsv_server_new_sharded(2);
    ok(S != NULL, "sharded server with 2 workers");
    is_int(nsv_get_int(S, NSV_OPT_WORKERS), 2, "worker count");
    int port;
    http_listen(S, &port);
    ok(port > 0, "listening");
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, replier, NULL);
    enum { CLIENTS = 40, REQS = 25 };
    int fds[CLIENTS];
    for (int i = 0; i < CLIENTS; i++)
        fds[i] = client(port);
    static nsv_event evs[256];
    static char arena[1 << 20];
    int total_seen = 0;
    uint64_t first_id[2] = {0, 0};
    int workers_seen = 0;
    for (int round = 0; round < REQS; round++) {
        for (int i = 0; i < CLIENTS; i++) {
            ssize_t w = write(fds[i], "GET /t HTTP/1.1\r\nHost: h\r\n\r\n", 28);
            (void)w;
        }
        int seen = 0;
        for (int tries = 0; seen < CLIENTS && tries < 500; tries++) {
            int n = nsv_poll(S, evs, 256, arena, sizeof arena, 10);
            for (int k = 0; k < n; k++) {
                if (evs[k].type != NSV_EV_REQUEST)
                    continue;
                unsigned w = (unsigned)((evs[k].conn >> 24) & 0xff);
                if (w < 2 && !first_id[w]) {
                    first_id[w] = evs[k].conn;
                    workers_seen++;
                }
                int h = atomic_load(&jhead);
                jobs[h % 4096].conn = evs[k].conn;
                atomic_store(&jhead, h + 1);
                seen++;
            }
        }
        for (int i = 0; i < CLIENTS; i++)
            read_responses(fds[i], 1, 2000);
        total_seen += seen;
    }
    is_int(total_seen, CLIENTS * REQS, "every request reached the host");
    for (int i = 0; i < 200 && atomic_load(&replied) < CLIENTS * REQS; i++)
        usleep(10000);
    is_int(atomic_load(&replied), CLIENTS * REQS, "4 threads replied to every request");
    is_int(workers_seen, 2, "connections spread over both workers");
    /* every id is now idle: replying again is a state error, not a crash */
    is_int(nsv_reply(S, first_id[0], 200, NULL, 0, NULL, 0), NSV_ESTATE, "reply twice from another thread -> ESTATE");
    uint64_t fake = first_id[1] + (1ULL << 32);
    is_int(nsv_reply(S, fake, 200, NULL, 0, NULL, 0), NSV_ESTALE, "wrong generation -> ESTALE");
    is_int(nsv_reply(S, (uint64_t)7 << 24 | 1ULL << 32, 200, NULL, 0, NULL, 0), NSV_ESTALE, "unknown worker -> ESTALE");
    for (int i = 0; i < CLIENTS; i++)
        close(fds[i]);
    int closes = 0;
    for (int tries = 0; closes < CLIENTS && tries < 300; tries++) {
        int n = nsv_poll(S, evs, 256, arena, sizeof arena, 10);
        for (int k = 0; k < n; k++)
            closes += evs[k].type == NSV_EV_CLOSE;
    }
    is_int(closes, CLIENTS, "a close event for every connection");
    is_int(nsv_close(S, first_id[0]), NSV_ESTALE, "close after close -> ESTALE");
    atomic_store(&quit, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    nsv_server_free(S);
}

static void test_fd_and_worker_poll(void)
{
    nsv_server *s = nsv_server_new_sharded(2);
    int port;
    http_listen(s, &port);
    int fd = nsv_fd(s);
    ok(fd >= 0, "sharded nsv_fd is a descriptor");
    static nsv_event evs[64];
    static char arena[65536];
    is_int(nsv_poll(s, evs, 64, arena, sizeof arena, 0), 0, "nothing yet");
    int c = client(port);
    ssize_t w = write(c, "GET /fd HTTP/1.1\r\nHost: h\r\n\r\n", 29);
    (void)w;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    ok(poll(&p, 1, 3000) == 1, "pipe fd became readable when the event arrived");
    int n = 0, worker = -1;
    for (int i = 0; i < 2 && n == 0; i++) {
        n = nsv_poll_worker(s, i, evs, 64, arena, sizeof arena, 100);
        worker = i;
    }
    ok(n == 1 && evs[0].type == NSV_EV_REQUEST, "nsv_poll_worker got it from worker %d", worker);
    is_int(nsv_poll_worker(s, 5, evs, 64, arena, sizeof arena, 0), NSV_EINVAL, "bad worker index");
    is_int(nsv_reply(s, evs[0].conn, 200, "Bad header\r\n", 12, "x", 1), NSV_EINVAL,
           "bad header block from another thread -> EINVAL, request still pending");
    is_int(nsv_reply(s, evs[0].conn, 200, NULL, 0, "ok", 2), NSV_OK, "reply");
    ok(read_responses(c, 1, 2000) == 1, "response arrived");
    int64_t t0 = nsv_millis();
    nsv_wakeup(s);
    n = nsv_poll(s, evs, 64, arena, sizeof arena, 2000);
    ok(n >= 0 && nsv_millis() - t0 < 1500, "wakeup interrupts a blocking poll");
    close(c);
    nsv_server_free(s);
}

/* Workers start with signals blocked: the host's handlers run on its threads. */
static void test_worker_signals(void)
{
    nsv_server *s = nsv_server_new_sharded(2);
    static nsv_event evs[4];
    static char arena[4096];
    nsv_poll(s, evs, 4, arena, sizeof arena, 0); /* starts the workers */
    int others = 0, blocked = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.' || atoi(e->d_name) == getpid())
            continue;
        char path[300], line[256];
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        FILE *f = fopen(path, "r");
        while (f && fgets(line, sizeof line, f))
            if (!strncmp(line, "SigBlk:", 7)) {
                unsigned long long m = strtoull(line + 7, NULL, 16);
                others++;
                blocked += (m & (1ull << (SIGTERM - 1))) && (m & (1ull << (SIGINT - 1)));
            }
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    ok(others >= 2 && blocked == others, "%d of %d worker threads block SIGTERM and SIGINT", blocked, others);
    nsv_server_free(s);
}

/* A host that does not poll for a while: the worker stops reading raw TCP
 * once its queue holds ~max_output/8, and every byte still arrives in order. */
#define SLOW_TOTAL (16 << 20)
static void *flood(void *arg)
{
    int fd = *(int *)arg;
    static char buf[65536];
    for (size_t off = 0; off < SLOW_TOTAL;) {
        size_t len = SLOW_TOTAL - off < sizeof buf ? SLOW_TOTAL - off : sizeof buf;
        for (size_t i = 0; i < len; i++)
            buf[i] = (char)((off + i) % 251);
        ssize_t w = write(fd, buf, len);
        if (w <= 0)
            break;
        off += (size_t)w; /* a short write: the next buffer starts at the new offset */
    }
    shutdown(fd, SHUT_WR);
    return NULL;
}

static void test_slow_host(void)
{
    nsv_server *s = nsv_server_new_sharded(1);
    int lid = nsv_listen(s, "tcp://127.0.0.1:0", 17);
    int port = nsv_listener_port(s, lid);
    static nsv_event evs[4096];
    size_t cap = 64 << 20;
    char *arena = malloc(cap);
    is_int(nsv_poll(s, evs, 4096, arena, cap, 0), 0, "workers started");
    int c = client(port);
    pthread_t t;
    pthread_create(&t, NULL, flood, &c);
    usleep(400 * 1000); /* the host is busy elsewhere */
    size_t first = 0, total = 0;
    int good = 1, eof = 0, batches = 0;
    int64_t until = nsv_millis() + 20000;
    while (!eof && nsv_millis() < until) {
        int n = nsv_poll(s, evs, 4096, arena, cap, 100);
        for (int i = 0; i < n; i++) {
            if (evs[i].type != NSV_EV_TCP_DATA)
                continue;
            for (uint32_t k = 0; k < evs[i].body_len; k++)
                if ((unsigned char)arena[evs[i].body_off + k] != (total + k) % 251)
                    good = 0;
            total += evs[i].body_len;
            eof |= (evs[i].flags & NSV_EVF_EOF) != 0;
        }
        if (n > 0 && batches++ == 0)
            first = total;
    }
    ok(first > 0 && first <= (1u << 20), "queued while the host was away: %zu bytes (<= 1 MiB)", first);
    is_int((int64_t)total, SLOW_TOTAL, "every byte arrived after the host came back");
    ok(good, "in order");
    pthread_join(t, NULL);
    close(c);
    free(arena);
    nsv_server_free(s);
}

/* Drain under load: every request sent gets a complete response. */
typedef struct load { int port; int sent, answered; } load;
static void *loader(void *arg)
{
    load *L = arg;
    for (int i = 0; i < 200; i++) {
        int fd = client(L->port);
        if (fd < 0)
            break; /* listener closed: never accepted, fine */
        ssize_t w = write(fd, "GET /d HTTP/1.1\r\nHost: h\r\n\r\n", 28);
        if (w != 28) {
            close(fd);
            continue;
        }
        L->sent++;
        char buf[1024];
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 3000) > 0) {
            ssize_t r = read(fd, buf, sizeof buf - 1);
            if (r > 0) {
                buf[r] = 0;
                if (strstr(buf, "HTTP/1.1 200") && strstr(buf, "\r\n\r\ndrained?"))
                    L->answered++;
                else if (strstr(buf, "503"))
                    L->sent--; /* refused at accept during the drain: never accepted */
            } else {
                L->sent--; /* closed without a byte: the connection was idle-closed before its request arrived */
            }
        }
        close(fd);
    }
    return NULL;
}

static void test_drain(void)
{
    nsv_server *s = nsv_server_new_sharded(2);
    int port;
    http_listen(s, &port);
    static nsv_event evs[256];
    static char arena[1 << 20];
    load L[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        L[i] = (load){port, 0, 0};
        pthread_create(&th[i], NULL, loader, &L[i]);
    }
    int64_t t0 = nsv_millis();
    int started = 0, n;
    while ((n = nsv_poll(s, evs, 256, arena, sizeof arena, 10)) >= 0) {
        for (int i = 0; i < n; i++)
            if (evs[i].type == NSV_EV_REQUEST)
                nsv_reply(s, evs[i].conn, 200, NULL, 0, "drained?", 8);
        if (!started && nsv_millis() - t0 > 150) {
            started = 1;
            is_int(nsv_drain_start(s, 3000), NSV_OK, "drain started under load");
        }
        if (nsv_millis() - t0 > 10000)
            break;
    }
    is_int(n, NSV_ESTOPPED, "poll reports the end of the drain");
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    int sent = 0, answered = 0;
    for (int i = 0; i < 4; i++)
        sent += L[i].sent, answered += L[i].answered;
    ok(sent > 0, "load ran (%d requests)", sent);
    is_int(answered, sent, "every accepted request got a complete response");
    nsv_server_free(s);
}

static void test_many_conns(void)
{
    nsv_server *s = nsv_server_new_sharded(2);
    int port;
    http_listen(s, &port);
    static nsv_event evs[256];
    static char arena[1 << 20];
    int done = 0, fails = 0;
    for (int i = 0; i < 10000; i += 50) {
        int fds[50];
        for (int k = 0; k < 50; k++) {
            fds[k] = client(port);
            ssize_t w = write(fds[k], "GET /m HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", 47);
            (void)w;
        }
        int got = 0;
        for (int tries = 0; got < 50 && tries < 200; tries++) {
            int n = nsv_poll(s, evs, 256, arena, sizeof arena, 10);
            for (int k = 0; k < n; k++)
                if (evs[k].type == NSV_EV_REQUEST && nsv_reply(s, evs[k].conn, 200, NULL, 0, "m", 1) == 0)
                    got++;
        }
        for (int k = 0; k < 50; k++) {
            if (read_responses(fds[k], 1, 2000) == 1)
                done++;
            else
                fails++;
            close(fds[k]);
        }
    }
    is_int(done, 10000, "10,000 connections served (%d failed)", fails);
    nsv_server_free(s);
}

int main(void)
{
    test_threads();
    test_fd_and_worker_poll();
    test_worker_signals();
    test_slow_host();
    test_drain();
    test_many_conns();
    return done_testing();
}
