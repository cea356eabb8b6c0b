/* access_log.c - access records (NSV_OPT_ACCESS_LOG, nsv_access_take):
 * one per answer (host replies, streamed, HEAD, answers made in C, a
 * request whose connection closed first), their fields and byte counts as
 * on the wire, strings cut at their limits, drops counted when the queue is
 * full, a buffer too small for one record, and a sharded server whose
 * records are taken from another thread while it serves. */
#include "tap.h"
#include "nsvnet.h"
#include <nanosrv.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void answer(nsv_server *s, const nsv_event *ev, const char *a)
{
    const char *path = a + ev->path_off;
    if (ev->path_len == 7 && !memcmp(path, "/stream", 7)) {
        nsv_reply_start(s, ev->conn, 200, NULL, 0);
        nsv_send_chunk(s, ev->conn, "abc", 3);
        nsv_reply_end(s, ev->conn);
    } else if (ev->path_len == 5 && !memcmp(path, "/hold", 5)) {
        /* not answered: the test closes it */
    } else if (ev->path_len == 6 && !memcmp(path, "/s/", 3)) {
        nsv_reply(s, ev->conn, atoi(path + 3), NULL, 0, "x", 1);
    } else {
        nsv_reply(s, ev->conn, 200, NULL, 0, "ok", 2);
    }
}

static uint64_t held;

static void serve_step(void *ctx, int ms)
{
    nsv_server *s = ctx;
    int n = nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, ms);
    for (int i = 0; i < n; i++)
        if (evs[i].type == NSV_EV_REQUEST) {
            if (evs[i].path_len == 5 && !memcmp(arena + evs[i].path_off, "/hold", 5))
                held = evs[i].conn;
            answer(s, &evs[i], arena);
        }
}

/* One record, its strings pointed at. */
typedef struct rec {
    nsv_access_record r;
    const char *method, *target, *peer, *ua, *referer;
} rec;

static int split(const char *buf, int64_t n, rec *out, int max, int *well_formed)
{
    int k = 0;
    *well_formed = 1;
    for (int64_t at = 0; at < n && k < max;) {
        nsv_access_record r;
        memcpy(&r, buf + at, sizeof r);
        size_t strs = (size_t)r.method_len + r.target_len + r.peer_len + r.ua_len + r.referer_len;
        if (r.size % 8 || r.size < sizeof r + strs || at + r.size > n) {
            *well_formed = 0;
            break;
        }
        const char *p = buf + at + sizeof r;
        out[k].r = r;
        out[k].method = p, p += r.method_len;
        out[k].target = p, p += r.target_len;
        out[k].peer = p, p += r.peer_len;
        out[k].ua = p, p += r.ua_len;
        out[k].referer = p;
        k++;
        at += r.size;
    }
    return k;
}

static int str_is(const char *p, uint32_t n, const char *want)
{
    return n == strlen(want) && !memcmp(p, want, n);
}

static char take_buf[1 << 20];
static rec recs[512];

static int take_all(nsv_server *s, int *wf)
{
    int64_t n = nsv_access_take(s, take_buf, sizeof take_buf);
    if (n < 0) {
        diag("nsv_access_take: %lld", (long long)n);
        return -1;
    }
    return split(take_buf, n, recs, 512, wf);
}

/* Sends req on fd, serves until stop is read; returns the bytes read. */
static int exchange_on(nsv_server *s, int fd, const char *req, const char *stop, char *buf, size_t cap)
{
    sendall(fd, req);
    return read_stepping(fd, buf, cap, 100, 10, stop, serve_step, s);
}

static void test_records(void)
{
    nsv_server *s = nsv_server_new();
    is_int(nsv_get_int(s, NSV_OPT_ACCESS_LOG), 0, "access records are off by default");
    is_int(nsv_set_int(s, NSV_OPT_ACCESS_LOG, 64), NSV_OK, "access_log 64");
    int port;
    http_listen(s, &port);
    char buf[8192];
    int64_t t0 = (int64_t)time(NULL) * 1000;

    is_int(nsv_access_take(s, take_buf, sizeof take_buf), 0, "nothing to take yet");

    static const char get[] = "GET /a/b?q=1&r=2 HTTP/1.1\r\nHost: t\r\nUser-Agent: tester/1.0\r\n"
                              "Referer: http://example.test/from\r\n\r\n";
    static const char s404[] = "GET /s/404 HTTP/1.1\r\nHost: t\r\n\r\n";
    static const char strm[] = "GET /stream HTTP/1.1\r\nHost: t\r\n\r\n";
    static const char head[] = "HEAD /a HTTP/1.1\r\nHost: t\r\n\r\n";
    static const char post[] = "POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello";
    int fd = client(port);
    int got_get = exchange_on(s, fd, get, "\r\n\r\nok", buf, sizeof buf);
    int got_404 = exchange_on(s, fd, s404, "\r\n\r\nx", buf, sizeof buf);
    int got_strm = exchange_on(s, fd, strm, "0\r\n\r\n", buf, sizeof buf);
    int got_head = exchange_on(s, fd, head, "\r\n\r\n", buf, sizeof buf);
    int got_post = exchange_on(s, fd, post, "\r\n\r\nok", buf, sizeof buf);
    close(fd);
    fd = client(port);
    static const char bad[] = "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n";
    int got_bad = exchange_on(s, fd, bad, "\n\n", buf, sizeof buf); /* until the close */
    close(fd);
    /* A request whose connection closes before any answer: status 0. */
    held = 0;
    fd = client(port);
    sendall(fd, "GET /hold HTTP/1.1\r\nHost: t\r\n\r\n");
    for (int i = 0; i < 100 && !held; i++)
        serve_step(s, 10);
    ok(held != 0, "the held request arrived");
    nsv_close(s, held);
    for (int i = 0; i < 3; i++)
        serve_step(s, 5);
    close(fd);

    int wf;
    int k = take_all(s, &wf);
    ok(wf, "records are well formed (sizes multiples of 8, strings inside)");
    is_int(k, 7, "seven records");
    if (k < 7)
        goto out;
    rec *r = &recs[0];
    is_int(r->r.status, 200, "1: status 200");
    ok(str_is(r->method, r->r.method_len, "GET"), "1: method");
    ok(str_is(r->target, r->r.target_len, "/a/b?q=1&r=2"), "1: target with its query");
    ok(str_is(r->peer, r->r.peer_len, "127.0.0.1"), "1: peer");
    ok(str_is(r->ua, r->r.ua_len, "tester/1.0"), "1: user agent");
    ok(str_is(r->referer, r->r.referer_len, "http://example.test/from"), "1: referer");
    is_int(r->r.bytes_in, sizeof get - 1, "1: bytes_in is the request head");
    is_int(r->r.bytes_out, got_get, "1: bytes_out is what the client read");
    ok(r->r.conn != 0 && r->r.time_ms >= t0 - 1000 && r->r.time_ms < t0 + 60000, "1: conn id and wall clock");
    is_int(r->r.flags & NSV_EVF_HEAD, 0, "1: not HEAD");
    is_int(recs[1].r.status, 404, "2: the host's 404");
    is_int(recs[1].r.bytes_out, got_404, "2: bytes_out");
    ok(recs[1].r.conn == r->r.conn, "2: same connection");
    is_int(recs[2].r.status, 200, "3: streamed 200");
    is_int(recs[2].r.bytes_out, got_strm, "3: streamed bytes_out counts the chunk framing");
    is_int(recs[3].r.status, 200, "4: HEAD 200");
    ok(recs[3].r.flags & NSV_EVF_HEAD, "4: HEAD flag");
    ok(str_is(recs[3].method, recs[3].r.method_len, "HEAD"), "4: method HEAD");
    is_int(recs[3].r.bytes_out, got_head, "4: HEAD bytes_out is the head only");
    is_int(recs[4].r.bytes_in, sizeof post - 1, "5: bytes_in counts the body");
    is_int(recs[4].r.bytes_out, got_post, "5: bytes_out");
    is_int(recs[5].r.status, 400, "6: the library's 400");
    is_int(recs[5].r.bytes_out, got_bad, "6: its bytes_out");
    is_int(recs[5].r.method_len + recs[5].r.target_len, 0, "6: refused before the head: no strings");
    is_int(recs[6].r.status, 0, "7: closed before an answer: status 0");
    ok(str_is(recs[6].target, recs[6].r.target_len, "/hold"), "7: its target");
    is_int(nsv_access_take(s, take_buf, sizeof take_buf), 0, "all taken");
out:
    nsv_server_free(s);
}

/* The worker's first record may be a refusal made before any head was
 * complete: its queue is made then. */
static void test_first_is_refusal(void)
{
    nsv_server *s = nsv_server_new();
    nsv_set_int(s, NSV_OPT_ACCESS_LOG, 8);
    int port;
    http_listen(s, &port);
    char buf[2048];
    int fd = client(port);
    exchange_on(s, fd, "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "\n\n", buf, sizeof buf);
    close(fd);
    int wf, k = take_all(s, &wf);
    is_int(k, 1, "a first request refused with 400 has its record");
    if (k == 1)
        is_int(recs[0].r.status, 400, "status 400");
    nsv_server_free(s);
}

static void test_limits(void)
{
    nsv_server *s = nsv_server_new();
    nsv_set_int(s, NSV_OPT_ACCESS_LOG, 2);
    nsv_set_int(s, NSV_OPT_MAX_HEADER_BYTES, 32768);
    int port;
    http_listen(s, &port);
    static char req[16384], buf[8192];
    char ua[700], ref[1200], tgt[5001];
    memset(ua, 'u', sizeof ua - 1), ua[sizeof ua - 1] = 0;
    memset(ref, 'r', sizeof ref - 1), ref[sizeof ref - 1] = 0;
    tgt[0] = '/';
    memset(tgt + 1, 't', sizeof tgt - 2), tgt[sizeof tgt - 1] = 0;
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\nUser-Agent: %s\r\nReferer: %s\r\n\r\n", tgt, ua, ref);
    int fd = client(port);
    for (int i = 0; i < 4; i++)
        exchange_on(s, fd, req, "\r\n\r\nok", buf, sizeof buf);
    close(fd);

    char tiny[16];
    is_int(nsv_access_take(s, tiny, sizeof tiny), NSV_ENOBUFS, "a record does not fit 16 bytes: NSV_ENOBUFS");
    int wf;
    int k = take_all(s, &wf);
    is_int(k, 2, "two records kept of four");
    uint64_t m[NSV_M_COUNT];
    nsv_metrics(s, m, NSV_M_COUNT);
    is_int(m[NSV_M_ACCESS_DROPPED], 2, "two dropped and counted");
    if (k >= 1) {
        is_int(recs[0].r.target_len, 4096, "target cut at 4096");
        is_int(recs[0].r.ua_len, 512, "user agent cut at 512");
        is_int(recs[0].r.referer_len, 1024, "referer cut at 1024");
        ok(recs[0].r.size <= 8192, "one record fits 8 KiB (%u)", recs[0].r.size);
    }
    nsv_server_free(s);
}

/* Records are bounded in bytes as well as in number: 100 of the largest
 * (about 5.8 KB each, the client's choice) do not all fit under a cap of
 * 1000 records (512 bytes a record: 500 KiB), so some are dropped. */
static void test_byte_bound(void)
{
    nsv_server *s = nsv_server_new();
    nsv_set_int(s, NSV_OPT_ACCESS_LOG, 1000);
    nsv_set_int(s, NSV_OPT_MAX_HEADER_BYTES, 32768);
    int port;
    http_listen(s, &port);
    static char req[16384], buf[8192];
    char ua[700], ref[1200], tgt[5001];
    memset(ua, 'u', sizeof ua - 1), ua[sizeof ua - 1] = 0;
    memset(ref, 'r', sizeof ref - 1), ref[sizeof ref - 1] = 0;
    tgt[0] = '/';
    memset(tgt + 1, 't', sizeof tgt - 2), tgt[sizeof tgt - 1] = 0;
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\nUser-Agent: %s\r\nReferer: %s\r\n\r\n", tgt, ua, ref);
    int fd = client(port);
    for (int i = 0; i < 100; i++)
        exchange_on(s, fd, req, "\r\n\r\nok", buf, sizeof buf);
    close(fd);
    uint64_t m[NSV_M_COUNT];
    nsv_metrics(s, m, NSV_M_COUNT);
    ok(m[NSV_M_ACCESS_DROPPED] > 0 && m[NSV_M_ACCESS_DROPPED] < 100,
       "100 records of 5.8 KB under 1000 records' bytes: some dropped (%llu)",
       (unsigned long long)m[NSV_M_ACCESS_DROPPED]);
    nsv_server_free(s);
}

/* ---- sharded ---- */

#define SH_CONNS 4
#define SH_REQS 40
static atomic_int sh_done;

static void *sh_poller(void *arg)
{
    nsv_server *s = arg;
    static nsv_event ev[64];
    static char ar[1 << 16];
    for (int i = 0; i < 20000 && !atomic_load(&sh_done); i++) {
        int n = nsv_poll(s, ev, 64, ar, sizeof ar, 10);
        for (int k = 0; k < n; k++)
            if (ev[k].type == NSV_EV_REQUEST)
                nsv_reply(s, ev[k].conn, 200, NULL, 0, "ok", 2);
    }
    return NULL;
}

static void *sh_client(void *arg)
{
    int port = *(int *)arg;
    char buf[512];
    for (int c = 0; c < SH_CONNS; c++) {
        int fd = client(port);
        for (int i = 0; i < SH_REQS; i++) {
            sendall(fd, "GET /sh HTTP/1.1\r\nHost: t\r\n\r\n");
            read_stepping(fd, buf, sizeof buf, 200, 10, "\r\n\r\nok", NULL, NULL);
        }
        close(fd);
    }
    atomic_store(&sh_done, 1);
    return NULL;
}

static void test_sharded(void)
{
    nsv_server *s = nsv_server_new_sharded(2);
    nsv_set_int(s, NSV_OPT_ACCESS_LOG, 1000);
    int port;
    http_listen(s, &port);
    pthread_t p, c;
    pthread_create(&p, NULL, sh_poller, s);
    pthread_create(&c, NULL, sh_client, &port);
    int total = 0, all_wf = 1, all_ok = 1;
    for (int i = 0; i < 5000; i++) {
        int done = atomic_load(&sh_done);
        int wf, k = take_all(s, &wf);
        all_wf &= wf && k >= 0;
        for (int j = 0; j < k; j++)
            all_ok &= recs[j].r.status == 200 && str_is(recs[j].target, recs[j].r.target_len, "/sh");
        total += k > 0 ? k : 0;
        if (done && k == 0)
            break;
        usleep(1000);
    }
    pthread_join(c, NULL);
    pthread_join(p, NULL);
    ok(all_wf, "sharded: records taken while serving are well formed");
    ok(all_ok, "sharded: each is a 200 for /sh");
    is_int(total, SH_CONNS * SH_REQS, "sharded: one record per request from both workers");
    nsv_server_free(s);
}

int main(void)
{
    test_first_is_refusal();
    test_records();
    test_limits();
    test_byte_bound();
    test_sharded();
    return done_testing();
}
