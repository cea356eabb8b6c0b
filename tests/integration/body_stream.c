/* body_stream.c - request bodies delivered in pieces (NSV_ROUTE_STREAM_BODY,
 * NSV_OPT_STREAM_BODY): the head first, then BODY events (the last with
 * NSV_EVF_EOF), de-chunked; early answers with and without Expect:
 * 100-continue; pausing; max_body, the deadline and a client that leaves
 * mid-body; a streaming echo; the same on a sharded server. */
#include "tap.h"
#define NSVNET_EVS 256
#define NSVNET_ARENA (4 << 20)
#include "nsvnet.h"
#include <nanosrv.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

/* What the host saw of one request. */
typedef struct seen {
    int request, eof, error, hangup, pieces, flags;
    int32_t error_code;
    uint64_t conn;
    size_t len, max_piece;
    char body[1 << 16];
} seen;

/* Poll once and account events; `reply` answers each REQUEST at once. */
static void pump(nsv_server *s, seen *w, int timeout)
{
    int n = nsv_poll(s, evs, 256, arena, sizeof arena, timeout);
    for (int i = 0; i < n; i++) {
        nsv_event *e = &evs[i];
        if (e->type == NSV_EV_REQUEST) {
            w->request++;
            w->conn = e->conn;
            w->flags = (int)e->flags;
        } else if (e->type == NSV_EV_BODY) {
            w->pieces++;
            if (e->body_len > w->max_piece)
                w->max_piece = e->body_len;
            if (w->len + e->body_len <= sizeof w->body)
                memcpy(w->body + w->len, arena + e->body_off, e->body_len);
            w->len += e->body_len;
            if (e->flags & NSV_EVF_EOF)
                w->eof++;
        } else if (e->type == NSV_EV_ERROR) {
            w->error++;
            w->error_code = e->code;
        } else if (e->type == 13) {
            w->hangup++;
        }
    }
}

static int pump_until(nsv_server *s, seen *w, int *field, int want, int rounds)
{
    for (int i = 0; i < rounds && *field < want; i++)
        pump(s, w, 10);
    return *field >= want;
}

typedef struct pumping { nsv_server *s; seen *w; } pumping;
static void pump_step(void *ctx, int ms) { pump(((pumping *)ctx)->s, ((pumping *)ctx)->w, ms); }

static int read_wait(int fd, char *buf, size_t cap, nsv_server *s, seen *w, int rounds)
{
    pumping p = {s, w};
    return read_stepping(fd, buf, cap, rounds, 5, NULL, s ? pump_step : NULL, &p);
}

static nsv_server *server(int sharded, int *port)
{
    nsv_server *s = sharded ? nsv_server_new_sharded(2) : nsv_server_new();
    http_listen(s, port);
    nsv_route(s, "POST", 4, "/up", 3, 1, NSV_ROUTE_STREAM_BODY);
    nsv_route(s, "POST", 4, "/whole", 6, 2, 0);
    return s;
}

static void test_basic(nsv_server *s, int port, const char *what)
{
    seen w = {0};
    int fd = client(port);
    sendall(fd, "POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nhello");
    ok(pump_until(s, &w, &w.request, 1, 100), "%s: the head arrives before the body is complete", what);
    ok(w.flags & NSV_EVF_STREAM_BODY, "%s: flagged NSV_EVF_STREAM_BODY", what);
    ok(pump_until(s, &w, &w.pieces, 1, 100) && w.len == 5 && !w.eof, "%s: the first 5 bytes come as a BODY", what);
    sendall(fd, "world");
    ok(pump_until(s, &w, &w.eof, 1, 100), "%s: the last piece has NSV_EVF_EOF", what);
    ok(w.len == 10 && !memcmp(w.body, "helloworld", 10), "%s: the pieces make the body", what);
    is_int(nsv_reply(s, w.conn, 200, NULL, 0, "ok", 2), NSV_OK, "%s: answered after the body", what);
    char buf[4096];
    read_wait(fd, buf, sizeof buf, s, &w, 40);
    ok(strstr(buf, "200 OK") && !strstr(buf, "Connection: close"), "%s: kept alive", what);
    memset(&w, 0, sizeof w);
    sendall(fd, "POST /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n");
    ok(pump_until(s, &w, &w.pieces, 1, 100) && w.len == 3, "%s: chunked: a decoded piece", what);
    sendall(fd, "4\r\ndefg\r\n0\r\n\r\nPOST /whole HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nxy");
    ok(pump_until(s, &w, &w.eof, 1, 100) && w.len == 7 && !memcmp(w.body, "abcdefg", 7),
       "%s: chunked: the rest, decoded, then EOF", what);
    nsv_reply(s, w.conn, 200, NULL, 0, "ok", 2);
    int before = w.request;
    ok(pump_until(s, &w, &w.request, before + 1, 100) && !(w.flags & NSV_EVF_STREAM_BODY),
       "%s: the pipelined request behind it comes whole", what);
    nsv_reply(s, w.conn, 200, NULL, 0, "ok", 2);
    close(fd);
}

static void test_expect(nsv_server *s, int port, const char *what)
{
    seen w = {0};
    char buf[4096];
    int fd = client(port);
    sendall(fd, "POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    ok(pump_until(s, &w, &w.request, 1, 100), "%s: expect: head delivered", what);
    is_int(nsv_reply(s, w.conn, 413, NULL, 0, "no", 2), NSV_OK, "%s: answered 413 at once", what);
    read_wait(fd, buf, sizeof buf, s, &w, 40);
    ok(strncmp(buf, "HTTP/1.1 413", 12) == 0, "%s: the client gets the 413 without a 100 Continue first", what);
    ok(strstr(buf, "Connection: close") != NULL, "%s: and the connection ends (the body is not read)", what);
    close(fd);

    memset(&w, 0, sizeof w);
    fd = client(port);
    sendall(fd, "POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    ok(pump_until(s, &w, &w.request, 1, 100), "%s: expect: head delivered again", what);
    read_wait(fd, buf, sizeof buf, s, &w, 20);
    ok(strcmp(buf, "HTTP/1.1 100 Continue\r\n\r\n") == 0, "%s: not answered: 100 Continue follows", what);
    sendall(fd, "12345");
    ok(pump_until(s, &w, &w.eof, 1, 100) && w.len == 5, "%s: then the body", what);
    nsv_reply(s, w.conn, 200, NULL, 0, NULL, 0);
    close(fd);
}

static void test_pause(nsv_server *s, int port, const char *what)
{
    seen w = {0};
    int fd = client(port);
    sendall(fd, "POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 8\r\n\r\nabcd");
    ok(pump_until(s, &w, &w.pieces, 1, 100), "%s: pause: first piece", what);
    is_int(nsv_pause_read(s, w.conn, 1), NSV_OK, "%s: nsv_pause_read pauses the body", what);
    for (int i = 0; i < 5; i++)
        pump(s, &w, 10); /* let the pause reach a worker */
    int pieces = w.pieces;
    sendall(fd, "efgh");
    for (int i = 0; i < 10; i++)
        pump(s, &w, 10);
    is_int(w.pieces, pieces, "%s: nothing more while paused", what);
    is_int(nsv_pause_read(s, w.conn, 0), NSV_OK, "%s: resumed", what);
    ok(pump_until(s, &w, &w.eof, 1, 100) && w.len == 8 && !memcmp(w.body, "abcdefgh", 8),
       "%s: the rest arrives", what);
    nsv_reply(s, w.conn, 200, NULL, 0, NULL, 0);
    if (!nsv_get_int(s, NSV_OPT_WORKERS)) /* from another thread the call is queued, not judged */
        is_int(nsv_pause_read(s, w.conn, 1), NSV_ESTATE, "%s: no body streaming: pause refused", what);
    close(fd);
}

static void test_limits(nsv_server *s, int port, const char *what)
{
    seen w = {0};
    char buf[4096];
    int fd = client(port);
    sendall(fd, "POST /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    ok(pump_until(s, &w, &w.request, 1, 100), "%s: limit: head delivered", what);
    char chunk[8200];
    int k = snprintf(chunk, sizeof chunk, "2000\r\n");
    memset(chunk + k, 'z', 8192);
    memcpy(chunk + k + 8192, "\r\n", 2);
    for (int i = 0; i < 10; i++) /* 80 KiB against max_body 64 KiB */
        sendn(fd, chunk, (size_t)k + 8194);
    ok(pump_until(s, &w, &w.error, 1, 200) && w.error_code == NSV_ETOOBIG, "%s: max_body passed: ERROR NSV_ETOOBIG", what);
    read_wait(fd, buf, sizeof buf, s, &w, 40);
    ok(strncmp(buf, "HTTP/1.1 413", 12) == 0, "%s: and the client gets 413", what);
    close(fd);

    memset(&w, 0, sizeof w);
    fd = client(port);
    sendall(fd, "POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nsome");
    ok(pump_until(s, &w, &w.pieces, 1, 100), "%s: abort: a first piece", what);
    close(fd);
    ok(pump_until(s, &w, &w.error, 1, 100) && w.error_code == NSV_ECLOSED, "%s: the client left mid-body: ERROR NSV_ECLOSED", what);
    ok(w.hangup == 1, "%s: and HANGUP", what);
}

static void test_deadline(void)
{
    int port;
    nsv_server *s = server(0, &port);
    nsv_set_int(s, NSV_OPT_REQUEST_TIMEOUT_MS, 300);
    seen w = {0};
    char buf[4096];
    int fd = client(port);
    sendall(fd, "POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nslow");
    ok(pump_until(s, &w, &w.pieces, 1, 100), "deadline: a first piece");
    ok(pump_until(s, &w, &w.error, 1, 200) && w.error_code == NSV_ETIMEDOUT, "deadline: ERROR NSV_ETIMEDOUT");
    read_wait(fd, buf, sizeof buf, s, &w, 40);
    ok(strncmp(buf, "HTTP/1.1 408", 12) == 0, "deadline: the client gets 408");
    close(fd);
    nsv_server_free(s);
}

/* Full duplex: each piece is echoed as it comes, in a fixed-length
 * streamed reply, while the client is still sending. */
static size_t echo_got, echo_bad;
static int echo_head_done;

static void echo_read(int fd)
{
    char rbuf[65536];
    for (;;) {
        ssize_t r = recv(fd, rbuf, sizeof rbuf, MSG_DONTWAIT);
        if (r <= 0)
            return;
        char *p = rbuf;
        size_t len = (size_t)r;
        if (!echo_head_done) {
            char *e = memmem(rbuf, len, "\r\n\r\n", 4);
            if (!e)
                continue; /* the head fits one read here */
            echo_head_done = 1;
            len -= (size_t)(e + 4 - rbuf);
            p = e + 4;
        }
        for (size_t i = 0; i < len; i++)
            echo_bad += p[i] != (char)('a' + (echo_got + i) % 26);
        echo_got += len;
    }
}

static void test_echo(void)
{
    nsv_server *s = nsv_server_new();
    int port = nsv_listener_port(s, nsv_listen(s, "http://127.0.0.1:0", 18));
    nsv_set_int(s, NSV_OPT_STREAM_BODY, 1);
    nsv_set_int(s, NSV_OPT_MAX_BODY, 64 << 20);
    int fd = client(port);
    const size_t total = 8 << 20;
    char hdr[128], rhdr[64];
    snprintf(hdr, sizeof hdr, "PUT /any HTTP/1.1\r\nHost: t\r\nContent-Length: %zu\r\n\r\n", total);
    int rlen = snprintf(rhdr, sizeof rhdr, "Content-Length: %zu\r\n", total);
    sendall(fd, hdr);
    char *blk = malloc(65536 + 26);
    for (int i = 0; i < 65536 + 26; i++)
        blk[i] = (char)('a' + i % 26);
    size_t sent = 0, body_seen = 0, max_piece = 0;
    int eof = 0, started = 0, during = 0;
    uint64_t conn = 0;
    for (int i = 0; i < 100000 && (!eof || echo_got < total); i++) {
        if (sent < total) {
            size_t n = total - sent < 65536 ? total - sent : 65536;
            ssize_t w = send(fd, blk + sent % 26, n, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (w > 0)
                sent += (size_t)w;
        }
        int n = nsv_poll(s, evs, 256, arena, sizeof arena, 1);
        for (int k = 0; k < n; k++) {
            nsv_event *e = &evs[k];
            if (e->type == NSV_EV_REQUEST && (e->flags & NSV_EVF_STREAM_BODY)) {
                conn = e->conn;
                started = nsv_reply_start(s, conn, 200, rhdr, (size_t)rlen) == NSV_OK;
            } else if (e->type == NSV_EV_BODY) {
                if (e->body_len > max_piece)
                    max_piece = e->body_len;
                body_seen += e->body_len;
                for (int t = 0; t < 1000 && e->body_len &&
                                nsv_send_chunk(s, conn, arena + e->body_off, e->body_len) == NSV_EAGAIN; t++) {
                    echo_read(fd); /* the client reads while it sends */
                    nsv_poll(s, evs + 255, 0, arena, 0, 1);
                }
                if (e->flags & NSV_EVF_EOF) {
                    eof = 1;
                    nsv_reply_end(s, conn);
                }
            }
        }
        echo_read(fd);
        if (sent < total && echo_got > 0)
            during = 1;
    }
    ok(started, "echo: a fixed-length streamed reply started at the head");
    ok(eof && body_seen == total, "echo: 8 MiB delivered in pieces (%zu bytes, EOF %d)", body_seen, eof);
    ok(max_piece <= 256 * 1024, "echo: no piece larger than one read (largest %zu)", max_piece);
    ok(during, "echo: answer bytes reached the client while it was still sending");
    ok(echo_got == total && echo_bad == 0, "echo: all %zu bytes came back intact (%zu wrong)", echo_got, echo_bad);
    free(blk);
    close(fd);
    nsv_server_free(s);
}

/* Sharded: the workers run on their own, so the one turn the host has to
 * answer before "100 Continue" goes must be the host's (its next poll), not
 * the worker's, which ends at once. Nothing may reach the client while the
 * host, having taken the head, has not polled again. */
static void test_expect_sharded(nsv_server *s, int port)
{
    seen w = {0};
    char buf[4096];
    int fd = client(port);
    sendall(fd, "POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    ok(pump_until(s, &w, &w.request, 1, 100), "sharded: expect: head delivered");
    usleep(150 * 1000); /* the host is busy; the workers are not */
    ssize_t early = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    ok(early < 0, "sharded: no 100 Continue while the host has not polled again (got %zd bytes)", early);
    is_int(nsv_reply(s, w.conn, 413, NULL, 0, "no", 2), NSV_OK, "sharded: answered 413");
    memset(buf, 0, sizeof buf);
    read_wait(fd, buf, sizeof buf, s, &w, 40);
    ok(strncmp(buf, "HTTP/1.1 413", 12) == 0, "sharded: the client gets the 413 without a 100 Continue first");
    close(fd);

    memset(&w, 0, sizeof w);
    fd = client(port);
    sendall(fd, "POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    ok(pump_until(s, &w, &w.request, 1, 100), "sharded: expect: head delivered again");
    memset(buf, 0, sizeof buf);
    read_wait(fd, buf, sizeof buf, s, &w, 40);
    ok(strcmp(buf, "HTTP/1.1 100 Continue\r\n\r\n") == 0, "sharded: not answered by the next poll: 100 Continue");
    sendall(fd, "12345");
    ok(pump_until(s, &w, &w.eof, 1, 100) && w.len == 5, "sharded: then the body");
    nsv_reply(s, w.conn, 200, NULL, 0, NULL, 0);
    close(fd);
}

/* NSV_OPT_EXPECT_MANUAL: the 100 Continue waits for nsv_continue (the host
 * sends it when its application first reads the body), however many polls
 * go by; an answer instead of reading sends none. */
static void test_expect_manual(int sharded)
{
    const char *what = sharded ? "manual continue, sharded" : "manual continue, single loop";
    int port;
    nsv_server *s = server(sharded, &port);
    is_int(nsv_set_int(s, NSV_OPT_EXPECT_MANUAL, 1), NSV_OK, "%s: option set", what);
    is_int(nsv_get_int(s, NSV_OPT_EXPECT_MANUAL), 1, "%s: option read back", what);
    int64_t byname = nsv_opt_by_name("expect_manual", 13);
    is_int((int)byname, NSV_OPT_EXPECT_MANUAL, "%s: option by name", what);
    seen w = {0};
    char buf[4096];
    int fd = client(port);
    sendall(fd, "POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    ok(pump_until(s, &w, &w.request, 1, 100), "%s: head delivered", what);
    for (int i = 0; i < 10; i++)
        pump(s, &w, 10);
    ssize_t early = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    ok(early < 0, "%s: no 100 Continue after 10 polls without nsv_continue (got %zd bytes)", what, early);
    is_int(nsv_continue(s, w.conn), NSV_OK, "%s: nsv_continue", what);
    memset(buf, 0, sizeof buf);
    read_wait(fd, buf, sizeof buf, s, &w, 40);
    ok(strcmp(buf, "HTTP/1.1 100 Continue\r\n\r\n") == 0, "%s: 100 Continue once asked", what);
    is_int(nsv_continue(s, w.conn), NSV_OK, "%s: a second nsv_continue is a no-op", what);
    sendall(fd, "12345");
    ok(pump_until(s, &w, &w.eof, 1, 100) && w.len == 5, "%s: then the body", what);
    nsv_reply(s, w.conn, 200, NULL, 0, "ok", 2);
    memset(buf, 0, sizeof buf);
    read_wait(fd, buf, sizeof buf, s, &w, 40);
    ok(strncmp(buf, "HTTP/1.1 200", 12) == 0 && !strstr(buf, "100 Continue"), "%s: the answer, no second 100", what);
    is_int(nsv_continue(s, w.conn), NSV_ESTATE, "%s: nsv_continue with no request waiting -> NSV_ESTATE", what);
    close(fd);

    memset(&w, 0, sizeof w);
    fd = client(port);
    sendall(fd, "POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    ok(pump_until(s, &w, &w.request, 1, 100), "%s: head delivered again", what);
    for (int i = 0; i < 5; i++)
        pump(s, &w, 10);
    is_int(nsv_reply(s, w.conn, 413, NULL, 0, "no", 2), NSV_OK, "%s: answered 413 without reading", what);
    memset(buf, 0, sizeof buf);
    read_wait(fd, buf, sizeof buf, s, &w, 40);
    ok(strncmp(buf, "HTTP/1.1 413", 12) == 0, "%s: the 413 without a 100 Continue first", what);
    close(fd);

    memset(&w, 0, sizeof w);
    fd = client(port);
    sendall(fd, "POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc");
    ok(pump_until(s, &w, &w.eof, 1, 100), "%s: a body without Expect streams at once", what);
    is_int(nsv_continue(s, w.conn), NSV_OK, "%s: nsv_continue without Expect is a no-op", what);
    nsv_reply(s, w.conn, 200, NULL, 0, "ok", 2);
    memset(buf, 0, sizeof buf);
    read_wait(fd, buf, sizeof buf, s, &w, 40);
    ok(strncmp(buf, "HTTP/1.1 200", 12) == 0, "%s: and no 100 Continue is sent for it", what);
    close(fd);
    is_int(nsv_continue(s, 0), NSV_ESTALE, "%s: nsv_continue of id 0 -> NSV_ESTALE", what);
    nsv_server_free(s);
}

int main(void)
{
    int port;
    nsv_server *s = server(0, &port);
    nsv_set_int(s, NSV_OPT_MAX_BODY, 64 << 10);
    test_basic(s, port, "single loop");
    test_expect(s, port, "single loop");
    test_pause(s, port, "single loop");
    test_limits(s, port, "single loop");
    nsv_server_free(s);
    s = server(1, &port);
    nsv_set_int(s, NSV_OPT_MAX_BODY, 64 << 10);
    test_basic(s, port, "sharded");
    test_expect_sharded(s, port);
    test_pause(s, port, "sharded");
    test_limits(s, port, "sharded");
    nsv_server_free(s);
    test_expect_manual(0);
    test_expect_manual(1);
    test_deadline();
    test_echo();
    return done_testing();
}
