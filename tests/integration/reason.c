/* reason.c - custom reason phrases (nsv_set_reason) on every kind of reply
 * (complete, streamed, SSE, file), once per request, validated, on a single
 * loop and on a sharded server from the polling thread; and the log queue
 * (nsv_set_log_queue, nsv_log_take): lines logged by worker threads wait
 * for the host, bounded, with drops counted. */
#include "tap.h"
#include "nsvnet.h"
#include <nanosrv.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char GET[] = "GET /x HTTP/1.1\r\nHost: t\r\n\r\n";

static int detail_has(nsv_server *s, const char *what)
{
    const char *d = nsv_last_error_detail(s);
    if (!strstr(d, what)) {
        diag("detail was: %s", d);
        return 0;
    }
    return 1;
}

/* Polls s while reading fd until buf holds `stop` (bounded: 100 x 20 ms). */
static int read_until(nsv_server *s, int fd, char *buf, size_t cap, const char *stop)
{
    return read_polling(s, fd, buf, cap, 100, 20, stop);
}

static int request(nsv_server *s, int fd, nsv_event *ev)
{
    sends(fd, GET);
    return wait_event(s, NSV_EV_REQUEST, ev, 100, 20);
}

static void test_phrases(nsv_server *s, int port, const char *what)
{
    char buf[8192];
    nsv_event ev;
    int fd = client(port);
    ok(request(s, fd, &ev), "%s: request arrives", what);
    is_int(nsv_set_reason(s, ev.conn, "Custom Reason", 13), NSV_OK, "%s: phrase accepted", what);
    is_int(nsv_reply(s, ev.conn, 299, NULL, 0, "x", 1), NSV_OK, "%s: reply", what);
    read_until(s, fd, buf, sizeof buf, "\r\n\r\nx");
    ok(strncmp(buf, "HTTP/1.1 299 Custom Reason\r\n", 28) == 0, "%s: 299 Custom Reason goes out", what);

    /* Once only: the next request on the connection gets the standard phrase. */
    ok(request(s, fd, &ev), "%s: second request", what);
    is_int(nsv_reply(s, ev.conn, 404, NULL, 0, "y", 1), NSV_OK, "%s: reply without a phrase", what);
    read_until(s, fd, buf, sizeof buf, "\r\n\r\ny");
    ok(strncmp(buf, "HTTP/1.1 404 Not Found\r\n", 24) == 0, "%s: standard phrase again", what);
    /* Registered codes beyond the common ones have their phrases too. */
    ok(request(s, fd, &ev), "%s: request for 451", what);
    is_int(nsv_reply(s, ev.conn, 451, NULL, 0, "z", 1), NSV_OK, "%s: 451", what);
    read_until(s, fd, buf, sizeof buf, "\r\n\r\nz");
    ok(strncmp(buf, "HTTP/1.1 451 Unavailable For Legal Reasons\r\n", 44) == 0, "%s: 451's phrase", what);

    /* Streamed replies. */
    ok(request(s, fd, &ev), "%s: third request", what);
    is_int(nsv_set_reason(s, ev.conn, "Partial\tContent \xc3\xa9", 18), NSV_OK, "%s: HTAB and obs-text", what);
    is_int(nsv_reply_start(s, ev.conn, 200, NULL, 0), NSV_OK, "%s: stream starts", what);
    is_int(nsv_send_chunk(s, ev.conn, "abc", 3), NSV_OK, "%s: chunk", what);
    is_int(nsv_reply_end(s, ev.conn), NSV_OK, "%s: end", what);
    read_until(s, fd, buf, sizeof buf, "0\r\n\r\n");
    ok(strncmp(buf, "HTTP/1.1 200 Partial\tContent \xc3\xa9\r\n", 32) == 0, "%s: streamed reply carries it", what);

    /* SSE. */
    ok(request(s, fd, &ev), "%s: fourth request", what);
    is_int(nsv_set_reason(s, ev.conn, "Events", 6), NSV_OK, "%s: phrase for SSE", what);
    is_int(nsv_sse_start(s, ev.conn, NULL, 0), NSV_OK, "%s: SSE starts", what);
    read_until(s, fd, buf, sizeof buf, "\r\n\r\n");
    ok(strncmp(buf, "HTTP/1.1 200 Events\r\n", 21) == 0, "%s: SSE carries it", what);
    close(fd);

    /* A file. */
    fd = client(port);
    ok(request(s, fd, &ev), "%s: file request", what);
    is_int(nsv_set_reason(s, ev.conn, "Here It Is", 10), NSV_OK, "%s: phrase for a file", what);
    is_int(nsv_reply_file(s, ev.conn, 0, NULL, 0, "/etc/hostname", 13, NULL, 0, NULL, 0, 0), NSV_OK, "%s: file", what);
    read_until(s, fd, buf, sizeof buf, "\r\n\r\n");
    ok(strncmp(buf, "HTTP/1.1 200 Here It Is\r\n", 25) == 0, "%s: file reply carries it", what);
    close(fd);

    /* len 0 goes back to the standard phrase. */
    fd = client(port);
    ok(request(s, fd, &ev), "%s: reset request", what);
    is_int(nsv_set_reason(s, ev.conn, "Gone Soon", 9), NSV_OK, "%s: set", what);
    is_int(nsv_set_reason(s, ev.conn, NULL, 0), NSV_OK, "%s: reset", what);
    is_int(nsv_reply(s, ev.conn, 200, NULL, 0, NULL, 0), NSV_OK, "%s: reply", what);
    read_until(s, fd, buf, sizeof buf, "\r\n\r\n");
    ok(strncmp(buf, "HTTP/1.1 200 OK\r\n", 17) == 0, "%s: standard phrase after a reset", what);

    /* Validation, and no request waiting. */
    ok(request(s, fd, &ev), "%s: validation request", what);
    is_int(nsv_set_reason(s, ev.conn, "Bad\r\nX-Injected: 1", 18), NSV_EINVAL, "%s: CRLF refused", what);
    ok(detail_has(s, "0x0d at offset 3"), "%s: the detail names the byte", what);
    is_int(nsv_set_reason(s, ev.conn, "a\x7f", 2), NSV_EINVAL, "%s: DEL refused", what);
    is_int(nsv_set_reason(s, ev.conn, "a\0b", 3), NSV_EINVAL, "%s: NUL refused", what);
    char longr[130];
    memset(longr, 'a', sizeof longr);
    is_int(nsv_set_reason(s, ev.conn, longr, 129), NSV_EINVAL, "%s: 129 bytes refused", what);
    ok(detail_has(s, "at most 128"), "%s: the detail gives the limit", what);
    is_int(nsv_set_reason(s, ev.conn, NULL, 3), NSV_EINVAL, "%s: NULL with a length refused", what);
    is_int(nsv_set_reason(s, ev.conn, longr, 128), NSV_OK, "%s: 128 bytes accepted", what);
    is_int(nsv_reply(s, ev.conn, 200, NULL, 0, NULL, 0), NSV_OK, "%s: reply", what);
    read_until(s, fd, buf, sizeof buf, "\r\n\r\n");
    ok(strncmp(buf + 13, longr, 128) == 0 && buf[13 + 128] == '\r', "%s: 128-byte phrase sent whole", what);
    is_int(nsv_set_reason(s, ev.conn, "Late", 4), NSV_ESTATE, "%s: no request waiting: NSV_ESTATE", what);
    close(fd);
    ok(wait_conn(s, NSV_EV_CLOSE, ev.conn, 100, 20), "%s: the connection closes", what);
    is_int(nsv_set_reason(s, ev.conn, "Late", 4), NSV_ESTALE, "%s: closed connection: NSV_ESTALE", what);
    is_int(nsv_set_reason(NULL, ev.conn, "x", 1), NSV_EINVAL, "%s: NULL server", what);
}

static void test_single(void)
{
    int port;
    nsv_server *s = nsv_server_new();
    http_listen(s, &port);
    test_phrases(s, port, "single loop");
    nsv_server_free(s);
}

static void test_sharded(void)
{
    int port;
    nsv_server *s = nsv_server_new_sharded(2);
    http_listen(s, &port);
    test_phrases(s, port, "sharded");
    nsv_server_free(s);
}

/* Records of a nsv_log_take buffer: count them, find one with text. */
static int records(const char *buf, int64_t n, const char *want, int *found_level)
{
    int k = 0;
    for (int64_t at = 0; at + 3 <= n; k++) {
        size_t len = (size_t)(uint8_t)buf[at + 1] | (size_t)(uint8_t)buf[at + 2] << 8;
        if (want && found_level && len >= strlen(want) && memmem(buf + at + 3, len, want, strlen(want)))
            *found_level = (uint8_t)buf[at];
        at += 3 + (int64_t)len;
    }
    return k;
}

static void test_log_queue(void)
{
    char buf[65536];
    is_int(nsv_set_log_queue(-1), NSV_ERANGE, "log queue: negative size refused");
    is_int(nsv_set_log_queue(65537), NSV_ERANGE, "log queue: over 65536 refused");
    is_int(nsv_set_log_queue(8), NSV_OK, "log queue: on with 8 records");
    is_int((int)nsv_log_pending(), 0, "log queue: empty");
    is_int((int)nsv_log_take(buf, sizeof buf), 0, "log queue: take from an empty queue gives 0");
    /* At DEBUG every error detail is logged: one record per refused call. */
    nsv_set_log_level(NSV_LOG_DEBUG);
    nsv_set_reason(NULL, 1, "x", 1);
    is_int((int)nsv_log_pending(), 1, "log queue: a line logged in this thread waits");
    int64_t n = nsv_log_take(buf, sizeof buf);
    int lv = -1;
    ok(n > 3 && records(buf, n, "srv is NULL", &lv) == 1, "log queue: one record with the text");
    is_int(lv, NSV_LOG_DEBUG, "log queue: with its level");
    is_int((int)nsv_log_pending(), 0, "log queue: empty after take");

    /* Lines logged by a worker thread wait too: a sharded server whose
     * worker refuses a forwarded reply (Content-Length mismatch). */
    nsv_server *s = nsv_server_new_sharded(2);
    int port;
    http_listen(s, &port);
    nsv_event ev;
    int fd = client(port);
    sends(fd, GET);
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 100, 20), "log queue: sharded request");
    nsv_log_take(buf, sizeof buf);
    is_int(nsv_reply(s, ev.conn, 200, "Content-Length: 9\r\n", 19, "x", 1), NSV_OK, "log queue: forwarded");
    ok(wait_conn(s, NSV_EV_ERROR, ev.conn, 100, 20), "log queue: the worker refused it");
    n = nsv_log_take(buf, sizeof buf);
    lv = -1;
    records(buf, n, "Content-Length is 9", &lv);
    is_int(lv, NSV_LOG_DEBUG, "log queue: the worker's line is in the queue");
    close(fd);
    nsv_server_free(s);

    /* A full queue drops and counts; a small buffer. */
    nsv_set_log_queue(2);
    uint64_t dropped0 = nsv_log_dropped();
    for (int i = 0; i < 5; i++)
        nsv_set_reason(NULL, 1, "x", 1);
    is_int((int)nsv_log_pending(), 2, "log queue: bounded at 2");
    ok(nsv_log_dropped() - dropped0 == 3, "log queue: 3 drops counted (%llu)",
       (unsigned long long)(nsv_log_dropped() - dropped0));
    is_int((int)nsv_log_take(buf, 2), NSV_ENOBUFS, "log queue: a too small buffer gives NSV_ENOBUFS");
    is_int((int)nsv_log_take(NULL, 10), NSV_EINVAL, "log queue: NULL dst with a cap refused");
    n = nsv_log_take(buf, 514);
    int got = records(buf, n, NULL, NULL);
    ok(n > 3 && got >= 1, "log queue: 514 bytes always hold a record");
    is_int((int)nsv_log_pending(), 2 - got, "log queue: whole records only; the rest waits");
    /* The two records are the same line: the rest is as long as what came. */
    is_int((int)nsv_log_take(buf, sizeof buf), got == 2 ? 0 : (int)n, "log queue: then the rest");
    nsv_set_log_queue(4);
    nsv_set_reason(NULL, 1, "x", 1);
    n = nsv_log_take(buf, sizeof buf);
    ok(n > 0 && n <= 514, "log queue: a record is at most 514 bytes");
    nsv_set_reason(NULL, 1, "x", 1);
    is_int(nsv_set_log_queue(0), NSV_OK, "log queue: off");
    is_int((int)nsv_log_pending(), 0, "log queue: off discards waiting records");
    nsv_set_log_level(NSV_LOG_ERROR);
}

int main(void)
{
    test_single();
    test_sharded();
    test_log_queue();
    return done_testing();
}
