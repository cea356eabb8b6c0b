/* reply.c - the response side as a new user meets it: framing a reply may
 * put on the wire (Content-Length, Transfer-Encoding, fixed-length streams,
 * HEAD, 204/304, HTTP/1.0), 1xx statuses, header bytes, an answered
 * pipelined request never held back by the next one, and the HANGUP event
 * for a client that ends its side while its request is with the host. */
#include "tap.h"
#include "nsvnet.h"
#include <nanosrv.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#define EV_HANGUP 13 /* NSV_EV_HANGUP */

/* Poll a few times, collecting nothing (lets queued output move). */
static int spin(nsv_server *s, int times, uint32_t count_type)
{
    int seen = 0;
    for (int t = 0; t < times; t++) {
        int n = nsv_poll(s, evs, 64, arena, sizeof arena, 10);
        for (int i = 0; i < n; i++)
            seen += evs[i].type == count_type;
    }
    return seen;
}

static int count(const char *hay, const char *needle)
{
    int k = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++)
        k++;
    return k;
}

static nsv_server *server(int *port)
{
    nsv_server *s = nsv_server_new();
    http_listen(s, port);
    return s;
}

/* One request on a fresh connection; its REQUEST event in *ev. */
static int request(nsv_server *s, int port, const char *req, nsv_event *ev)
{
    int fd = client(port);
    sends(fd, req);
    if (!wait_event(s, NSV_EV_REQUEST, ev, 100, 20)) {
        close(fd);
        return -1;
    }
    return fd;
}

static const char GET[] = "GET /x HTTP/1.1\r\nHost: t\r\n\r\n";
static const char HEAD[] = "HEAD /x HTTP/1.1\r\nHost: t\r\n\r\n";
static const char GET10[] = "GET /x HTTP/1.0\r\n\r\n";

static int detail_has(nsv_server *s, const char *what)
{
    const char *d = nsv_last_error_detail(s);
    if (!strstr(d, what)) {
        diag("detail was: %s", d);
        return 0;
    }
    return 1;
}

static void test_complete_framing(void)
{
    int port;
    nsv_server *s = server(&port);
    nsv_event ev;
    char buf[8192];
    int fd = request(s, port, GET, &ev);
    ok(fd >= 0, "request arrives");
    is_int(nsv_reply(s, ev.conn, 200, "Content-Length: 10\r\n", 20, "hello", 5), NSV_EINVAL,
           "Content-Length 10 with a 5-byte body is refused");
    ok(detail_has(s, "Content-Length is 10 but the body is 5 bytes"), "the detail gives both lengths");
    is_int(nsv_reply(s, ev.conn, 200, "Transfer-Encoding: chunked\r\n", 28, "hello", 5), NSV_EINVAL,
           "Transfer-Encoding in a complete reply is refused");
    ok(detail_has(s, "Transfer-Encoding"), "the detail names Transfer-Encoding");
    is_int(nsv_reply(s, ev.conn, 200, "Content-Length: 5\r\nContent-Length: 5\r\n", 38, "hello", 5), NSV_EINVAL,
           "two Content-Length lines are refused");
    is_int(nsv_reply(s, ev.conn, 200, "Content-Length: 5x\r\n", 20, "hello", 5), NSV_EINVAL,
           "a Content-Length that is not a number is refused");
    is_int(nsv_reply(s, ev.conn, 200, "Content-Length: -5\r\n", 20, "hello", 5), NSV_EINVAL,
           "a negative Content-Length is refused");
    is_int(nsv_reply(s, ev.conn, 204, "Content-Length: 0\r\n", 19, NULL, 0), NSV_EINVAL,
           "Content-Length on a 204 is refused");
    is_int(nsv_reply(s, ev.conn, 200, "Content-Length:  5 \r\n", 21, "hello", 5), NSV_OK,
           "a matching Content-Length (with whitespace) is accepted");
    int n = read_polling(s, fd, buf, sizeof buf, 40, 5, NULL);
    ok(n > 0 && count(buf, "Content-Length") == 1, "exactly one Content-Length on the wire");
    ok(strstr(buf, "\r\n\r\nhello") != NULL, "the body follows");
    /* The same connection still works: nothing of the refused replies went out. */
    sends(fd, GET);
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 100, 20), "keep-alive: the next request arrives");
    is_int(nsv_reply(s, ev.conn, 200, NULL, 0, "again", 5), NSV_OK, "and is answered");
    n = read_polling(s, fd, buf, sizeof buf, 40, 5, NULL);
    ok(n > 0 && count(buf, "HTTP/1.1") == 1 && strstr(buf, "again"), "one response, no stray bytes before it");
    close(fd);

    fd = request(s, port, HEAD, &ev);
    is_int(nsv_reply(s, ev.conn, 200, "Content-Length: 100\r\n", 21, NULL, 0), NSV_OK,
           "HEAD: Content-Length may describe the body not sent");
    n = read_polling(s, fd, buf, sizeof buf, 40, 5, NULL);
    ok(strstr(buf, "Content-Length: 100\r\n") && strstr(buf, "\r\n\r\n")[4] == 0, "HEAD: header kept, no body");
    close(fd);

    fd = request(s, port, GET, &ev);
    is_int(nsv_reply(s, ev.conn, 304, "Content-Length: 100\r\nETag: \"x\"\r\n", 32, NULL, 0), NSV_OK,
           "304: Content-Length may describe the representation");
    n = read_polling(s, fd, buf, sizeof buf, 40, 5, NULL);
    ok(strstr(buf, "HTTP/1.1 304") && count(buf, "Content-Length") == 1, "304 keeps the host's Content-Length only");
    close(fd);

    fd = request(s, port, GET, &ev);
    is_int(nsv_reply(s, ev.conn, 304, NULL, 0, NULL, 0), NSV_OK, "304 without headers");
    n = read_polling(s, fd, buf, sizeof buf, 40, 5, NULL);
    ok(strstr(buf, "HTTP/1.1 304") && !strstr(buf, "Content-Length"), "304: no Content-Length added");
    close(fd);
    nsv_server_free(s);
}

static void test_interim(void)
{
    int port;
    nsv_server *s = server(&port);
    nsv_event ev;
    char buf[4096];
    int fd = request(s, port, GET, &ev);
    is_int(nsv_reply(s, ev.conn, 100, NULL, 0, "x", 1), NSV_EINVAL, "100 as a final reply is refused");
    ok(detail_has(s, "interim"), "the detail says 1xx is interim");
    is_int(nsv_reply(s, ev.conn, 101, NULL, 0, NULL, 0), NSV_EINVAL, "101 through nsv_reply is refused");
    ok(detail_has(s, "nsv_ws_upgrade"), "the detail points at nsv_ws_upgrade");
    is_int(nsv_reply_start(s, ev.conn, 103, NULL, 0), NSV_EINVAL, "103 through nsv_reply_start is refused");
    is_int(nsv_reply(s, ev.conn, 99, NULL, 0, NULL, 0), NSV_EINVAL, "status 99 is refused");
    is_int(nsv_reply(s, ev.conn, 1000, NULL, 0, NULL, 0), NSV_EINVAL, "status 1000 is refused");
    is_int(nsv_reply(s, ev.conn, 200, NULL, 0, "fine", 4), NSV_OK, "the request can still be answered");
    read_polling(s, fd, buf, sizeof buf, 40, 5, NULL);
    ok(strncmp(buf, "HTTP/1.1 200 OK\r\n", 17) == 0 && count(buf, "HTTP/1.1") == 1, "only the 200 went out");
    close(fd);
    nsv_server_free(s);
}

static void test_header_bytes(void)
{
    int port;
    nsv_server *s = server(&port);
    nsv_event ev;
    char buf[4096];
    int fd = request(s, port, GET, &ev);
    static const struct {
        const char *h;
        size_t len;
        const char *why;
    } bad[] = {
        {"X-A: a\0b\r\n", 10, "NUL"},
        {"X-A: a\x7f" "b\r\n", 10, "DEL"},
        {"X-A: a\x01" "b\r\n", 10, "0x01"},
        {"X-A: a\nb\r\n", 10, "LF"},
        {"X-A: a\rb\r\n", 10, "bare CR"},
        {"X-A: a\x1b[0m\r\n", 13, "0x1b"},
        {"X A: a\r\n", 8, "' '"},
        {"X(A): a\r\n", 9, "'('"},
        {"X-\xc3\xa9: a\r\n", 10, "0xc3"},
        {": a\r\n", 5, "empty name"},
        {"X-A a\r\n", 7, "' '"},
        {"X-A: a\r\n\r\nX-B: b\r\n", 18, "empty line"},
        {"X-A: a", 6, "CRLF"},
        {"X-A: a\n", 7, "LF"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        is_int(nsv_reply(s, ev.conn, 200, bad[i].h, bad[i].len, NULL, 0), NSV_EINVAL, "header block %zu refused (%s)",
               i, bad[i].why);
        ok(detail_has(s, bad[i].why), "  and the detail says %s", bad[i].why);
    }
    ok(detail_has(s, "headers:"), "details start with what was checked");
    is_int(nsv_reply(s, ev.conn, 200, "X-A: a\tb \xc3\xa9\r\nX-!#$%&'*+-.^_`|~: ok\r\n", 36, "y", 1), NSV_OK,
           "HTAB, obs-text and every token character are accepted");
    read_polling(s, fd, buf, sizeof buf, 40, 5, NULL);
    ok(strstr(buf, "X-A: a\tb \xc3\xa9\r\n") != NULL, "sent as given");
    close(fd);
    unsigned char v[] = "X-A: v\r\n";
    fd = request(s, port, GET, &ev);
    int refused = 0;
    for (int ch = 0; ch < 0x80; ch++) {
        if (ch == '\t' || (ch >= 0x20 && ch < 0x7f))
            continue;
        v[5] = (unsigned char)ch;
        int r = nsv_reply(s, ev.conn, 200, (const char *)v, 8, NULL, 0);
        if (r == NSV_EINVAL)
            refused++;
        else
            diag("byte 0x%02x: %d", ch, r);
    }
    is_int(refused, 32, "every control byte but HTAB, and DEL, is refused in a value");
    close(fd);
    /* nsv_ws_upgrade's extra headers get the same check. */
    nsv_server_free(s);
}

static void test_streams(void)
{
    int port;
    nsv_server *s = server(&port);
    nsv_event ev;
    char buf[8192];
    /* A fixed-length stream: the host's Content-Length frames it, no chunking. */
    int fd = request(s, port, GET, &ev);
    is_int(nsv_reply_start(s, ev.conn, 200, "Content-Length: 10\r\n", 20), NSV_OK, "stream with Content-Length");
    is_int(nsv_send_chunk(s, ev.conn, "hello", 5), NSV_OK, "5 bytes");
    is_int(nsv_send_chunk(s, ev.conn, "world!", 6), NSV_EINVAL, "6 more would pass the 10 declared");
    ok(detail_has(s, "Content-Length"), "the detail says so");
    is_int(nsv_send_chunk(s, ev.conn, "world", 5), NSV_OK, "5 more fit");
    is_int(nsv_reply_end(s, ev.conn), NSV_OK, "end");
    read_polling(s, fd, buf, sizeof buf, 40, 5, NULL);
    ok(!strstr(buf, "Transfer-Encoding") && strstr(buf, "\r\n\r\nhelloworld") && !strstr(buf, "0\r\n\r\n"),
       "raw body, no chunk framing");
    ok(!strstr(buf, "Connection: close"), "the connection is kept");
    sends(fd, GET);
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 100, 20), "the next request on it arrives");
    /* Ended short: the connection closes, so the client sees a short body. */
    is_int(nsv_reply_start(s, ev.conn, 200, "Content-Length: 10\r\n", 20), NSV_OK, "another fixed stream");
    is_int(nsv_send_chunk(s, ev.conn, "abc", 3), NSV_OK, "3 bytes");
    is_int(nsv_reply_end(s, ev.conn), NSV_EINVAL, "ending 7 bytes short is an error");
    ok(detail_has(s, "7 bytes short"), "the detail counts the missing bytes");
    is_int(nsv_send_chunk(s, ev.conn, "x", 1), NSV_ESTATE, "the stream is over");
    int n = read_polling(s, fd, buf, sizeof buf, 40, 5, NULL);
    ok(n > 0 && strstr(buf, "\r\n\r\nabc") != NULL, "the 3 bytes went out");
    char tail[16];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int closed = 0;
    for (int i = 0; i < 50 && !closed; i++) {
        nsv_poll(s, evs, 64, arena, sizeof arena, 5);
        if (poll(&p, 1, 5) > 0)
            closed = read(fd, tail, sizeof tail) == 0;
    }
    ok(closed, "then the server closes the connection");
    close(fd);

    fd = request(s, port, GET, &ev);
    is_int(nsv_reply_start(s, ev.conn, 200, "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n", 47), NSV_EINVAL,
           "stream with both Content-Length and Transfer-Encoding is refused");
    is_int(nsv_reply_start(s, ev.conn, 200, "Transfer-Encoding: gzip\r\n", 25), NSV_EINVAL,
           "stream with Transfer-Encoding other than chunked is refused");
    is_int(nsv_reply_start(s, ev.conn, 200, "Transfer-Encoding: chunked\r\n", 28), NSV_OK,
           "stream with the host's own Transfer-Encoding: chunked");
    nsv_send_chunk(s, ev.conn, "abc", 3);
    nsv_reply_end(s, ev.conn);
    read_polling(s, fd, buf, sizeof buf, 40, 5, NULL);
    ok(count(buf, "Transfer-Encoding") == 1 && strstr(buf, "3\r\nabc\r\n0\r\n\r\n"), "one TE line, chunked body");
    close(fd);

    /* HTTP/1.0: no chunking; a host's TE line would lie, so it is left out. */
    fd = request(s, port, GET10, &ev);
    is_int(nsv_reply_start(s, ev.conn, 200, "Transfer-Encoding: chunked\r\nX-B: 1\r\n", 36), NSV_OK, "HTTP/1.0 stream");
    nsv_send_chunk(s, ev.conn, "abc", 3);
    nsv_reply_end(s, ev.conn);
    read_polling(s, fd, buf, sizeof buf, 40, 5, NULL);
    ok(!strstr(buf, "Transfer-Encoding") && strstr(buf, "X-B: 1\r\n") && strstr(buf, "\r\n\r\nabc"),
       "HTTP/1.0: no Transfer-Encoding on the wire, other headers kept, raw body");
    ok(strstr(buf, "Connection: close") != NULL, "HTTP/1.0: the close ends the body");
    close(fd);

    fd = request(s, port, GET, &ev);
    is_int(nsv_reply_start(s, ev.conn, 204, NULL, 0), NSV_OK, "a 204 stream");
    is_int(nsv_send_chunk(s, ev.conn, "abc", 3), NSV_EINVAL, "a body chunk on a 204 is refused");
    is_int(nsv_reply_end(s, ev.conn), NSV_OK, "ends");
    read_polling(s, fd, buf, sizeof buf, 40, 5, NULL);
    ok(strstr(buf, "HTTP/1.1 204") && !strstr(buf, "Transfer-Encoding") && !strstr(buf, "0\r\n\r\n"),
       "204: no framing, no terminator");
    sends(fd, GET);
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 100, 20), "and the connection goes on");
    nsv_reply(s, ev.conn, 200, NULL, 0, NULL, 0);
    close(fd);

    fd = request(s, port, HEAD, &ev);
    is_int(nsv_reply_start(s, ev.conn, 200, "Content-Length: 100\r\n", 21), NSV_OK, "HEAD stream with Content-Length");
    is_int(nsv_send_chunk(s, ev.conn, "abc", 3), NSV_OK, "chunks of a HEAD reply are counted, not sent");
    is_int(nsv_reply_end(s, ev.conn), NSV_OK, "end without the declared bytes is fine for HEAD");
    read_polling(s, fd, buf, sizeof buf, 40, 5, NULL);
    ok(strstr(buf, "Content-Length: 100") && strstr(buf, "\r\n\r\n")[4] == 0, "HEAD: no body bytes");
    close(fd);
    nsv_server_free(s);
}

/* Bug 1: /one answered, /two (pipelined in the same write) kept pending. */
static void test_pipeline_hold(nsv_server *s, int port, const char *what)
{
    char buf[4096] = "";
    nsv_event ev;
    int fd = client(port);
    sends(fd, "GET /one HTTP/1.1\r\nHost: t\r\n\r\nGET /two HTTP/1.1\r\nHost: t\r\n\r\n");
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 100, 20) && ev.path_len == 4, "%s: /one arrives", what);
    is_int(nsv_reply(s, ev.conn, 200, NULL, 0, "one", 3), NSV_OK, "%s: /one answered", what);
    /* Keep polling, never answering /two. */
    int got = 0;
    for (int i = 0; i < 60 && !strstr(buf, "one"); i++) {
        int n = nsv_poll(s, evs, 64, arena, sizeof arena, 10);
        for (int k = 0; k < n; k++)
            if (evs[k].type == NSV_EV_REQUEST)
                ev = evs[k];
        struct pollfd p = {.fd = fd, .events = POLLIN};
        buf[got] = 0;
        if (poll(&p, 1, 0) > 0) {
            ssize_t r = read(fd, buf + got, sizeof buf - 1 - (size_t)got);
            if (r > 0)
                got += (int)r;
            buf[got] = 0;
        }
    }
    ok(strstr(buf, "\r\n\r\none") != NULL, "%s: the answer to /one arrives while /two is pending", what);
    ok(ev.path_len == 4 && !memcmp(arena + ev.path_off, "/two", 4), "%s: /two is with the host", what);
    is_int(nsv_reply(s, ev.conn, 200, NULL, 0, "two", 3), NSV_OK, "%s: /two answered", what);
    got = read_polling(s, fd, buf, sizeof buf, 40, 5, NULL);
    ok(strstr(buf, "\r\n\r\ntwo") != NULL, "%s: then its answer follows", what);
    close(fd);
}

/* Sixteen pipelined requests answered as they come still leave in order. */
static void test_pipeline_order(nsv_server *s, int port)
{
    char req[16 * 64], buf[16384];
    size_t n = 0;
    for (int i = 0; i < 16; i++)
        n += (size_t)snprintf(req + n, sizeof req - n, "GET /%02d HTTP/1.1\r\nHost: t\r\n\r\n", i);
    int fd = client(port);
    ssize_t w = write(fd, req, n);
    (void)w;
    int answered = 0;
    for (int i = 0; i < 400 && answered < 16; i++) {
        int k = nsv_poll(s, evs, 64, arena, sizeof arena, 5);
        for (int j = 0; j < k; j++)
            if (evs[j].type == NSV_EV_REQUEST) {
                nsv_reply(s, evs[j].conn, 200, NULL, 0, arena + evs[j].path_off, evs[j].path_len);
                answered++;
            }
    }
    is_int(answered, 16, "16 pipelined requests delivered one at a time");
    read_polling(s, fd, buf, sizeof buf, 60, 5, NULL);
    int in_order = 1;
    const char *p = buf;
    for (int i = 0; i < 16; i++) {
        char want[16];
        snprintf(want, sizeof want, "\r\n/%02d", i);
        const char *q = strstr(p, want);
        if (!q) {
            in_order = 0;
            break;
        }
        p = q + 1;
    }
    ok(in_order, "their answers arrive in request order");
    close(fd);
}

static void test_pipeline(void)
{
    int port;
    nsv_server *s = server(&port);
    test_pipeline_hold(s, port, "single loop");
    test_pipeline_order(s, port);
    nsv_server_free(s);
    s = nsv_server_new_sharded(2);
    int lid = nsv_listen(s, "http://127.0.0.1:0", 18);
    port = nsv_listener_port(s, lid);
    test_pipeline_hold(s, port, "sharded");
    nsv_server_free(s);
}

/* Sharded, polled from this (non-worker) thread: calls are forwarded. */
static void test_sharded_framing(void)
{
    nsv_server *s = nsv_server_new_sharded(2);
    int lid = nsv_listen(s, "http://127.0.0.1:0", 18);
    int port = nsv_listener_port(s, lid);
    nsv_event ev;
    char buf[4096];
    int fd = request(s, port, GET, &ev);
    ok(fd >= 0, "sharded: request arrives");
    is_int(nsv_reply(s, ev.conn, 100, NULL, 0, NULL, 0), NSV_EINVAL, "sharded: 1xx refused at once");
    is_int(nsv_reply(s, ev.conn, 200, "Transfer-Encoding: chunked\r\n", 28, "x", 1), NSV_EINVAL,
           "sharded: TE in a complete reply refused at once");
    is_int(nsv_reply(s, ev.conn, 200, "X-A: \x01\r\n", 8, "x", 1), NSV_EINVAL, "sharded: control byte refused at once");
    ok(detail_has(s, "0x01"), "sharded: with the detail in the calling thread");
    is_int(nsv_reply(s, ev.conn, 200, "Content-Length: 9\r\n", 19, "x", 1), NSV_OK,
           "sharded: a Content-Length mismatch is accepted by the calling thread");
    ok(wait_conn(s, NSV_EV_ERROR, ev.conn, 100, 20), "then an ERROR event for the connection");
    int n = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    for (int i = 0; i < 100 && poll(&p, 1, 20) >= 0; i++) {
        if (!(p.revents & POLLIN))
            continue;
        ssize_t r = read(fd, buf + n, sizeof buf - 1 - (size_t)n);
        if (r <= 0)
            break;
        n += (int)r;
    }
    buf[n] = 0;
    ok(strncmp(buf, "HTTP/1.1 500", 12) == 0 && !strstr(buf, "Content-Length: 9"),
       "the client gets a 500, not the mismatched reply");
    close(fd);

    fd = request(s, port, GET, &ev);
    is_int(nsv_reply_start(s, ev.conn, 200, "Content-Length: 4\r\n", 19), NSV_OK, "sharded: fixed-length stream");
    is_int(nsv_send_chunk(s, ev.conn, "abc", 3), NSV_OK, "sharded: 3 bytes");
    is_int(nsv_send_chunk(s, ev.conn, "de", 2), NSV_OK, "sharded: 2 more are accepted by the calling thread");
    int got_err = 0, got_close = 0;
    for (int t = 0; t < 100 && !got_close; t++) {
        int k = nsv_poll(s, evs, 64, arena, sizeof arena, 20);
        for (int i = 0; i < k; i++) {
            got_err |= evs[i].type == NSV_EV_ERROR && evs[i].conn == ev.conn && evs[i].code == NSV_EINVAL;
            got_close |= evs[i].type == NSV_EV_CLOSE && evs[i].conn == ev.conn;
        }
    }
    ok(got_err, "then the worker reports the overrun");
    ok(got_close, "and closes the connection");
    close(fd);

    fd = request(s, port, HEAD, &ev);
    is_int(nsv_reply(s, ev.conn, 200, "Content-Length: 9\r\n", 19, NULL, 0), NSV_OK, "sharded: HEAD with Content-Length");
    n = 0;
    buf[0] = 0;
    p.fd = fd;
    for (int i = 0; i < 100 && poll(&p, 1, 20) >= 0 && !strstr(buf, "\r\n\r\n"); i++) {
        if (!(p.revents & POLLIN))
            continue;
        ssize_t r = read(fd, buf + n, sizeof buf - 1 - (size_t)n);
        if (r <= 0)
            break;
        n += (int)r;
        buf[n] = 0;
    }
    ok(strncmp(buf, "HTTP/1.1 200", 12) == 0 && strstr(buf, "Content-Length: 9\r\n"), "is sent as given");
    close(fd);
    nsv_server_free(s);
}

/* Bug 9: the host hears of a client that ends its side while its request waits. */
static void test_hangup(void)
{
    int port;
    nsv_server *s = server(&port);
    nsv_event ev, hup;
    char buf[4096];
    int fd = request(s, port, GET, &ev);
    close(fd);
    ok(wait_event(s, EV_HANGUP, &hup, 100, 20), "client closed while its request is pending: HANGUP");
    ok(hup.conn == ev.conn, "for that connection");
    nsv_reply(s, ev.conn, 200, NULL, 0, "late", 4);
    ok(wait_conn(s, NSV_EV_CLOSE, ev.conn, 200, 20), "a late reply ends in CLOSE");

    fd = request(s, port, GET, &ev);
    shutdown(fd, SHUT_WR);
    ok(wait_event(s, EV_HANGUP, &hup, 100, 20) && hup.conn == ev.conn, "half-close while pending: HANGUP");
    is_int(nsv_reply(s, ev.conn, 200, NULL, 0, "still", 5), NSV_OK, "the reply is still accepted");
    read_polling(s, fd, buf, sizeof buf, 40, 5, NULL);
    ok(strstr(buf, "\r\n\r\nstill") != NULL, "and a half-closed client gets it");
    close(fd);

    fd = request(s, port, GET, &ev);
    is_int(nsv_reply_start(s, ev.conn, 200, NULL, 0), NSV_OK, "a stream starts");
    nsv_send_chunk(s, ev.conn, "tick", 4);
    read_polling(s, fd, buf, sizeof buf, 20, 5, NULL);
    close(fd);
    ok(wait_event(s, EV_HANGUP, &hup, 100, 20) && hup.conn == ev.conn, "client gone during a stream: HANGUP");
    is_int(nsv_send_chunk(s, ev.conn, "tock", 4), NSV_OK, "the stream may go on until a write fails");
    ok(wait_conn(s, NSV_EV_CLOSE, ev.conn, 200, 20), "which ends it with CLOSE");

    /* A client that closes with unread bytes resets: CLOSE at once. */
    fd = request(s, port, GET, &ev);
    nsv_reply_start(s, ev.conn, 200, NULL, 0);
    nsv_send_chunk(s, ev.conn, "tick", 4);
    spin(s, 5, 0);
    close(fd);
    ok(wait_conn(s, NSV_EV_CLOSE, ev.conn, 100, 20), "a reset during a stream: CLOSE");
    is_int(nsv_send_chunk(s, ev.conn, "tock", 4), NSV_ESTALE, "and the id is stale");

    /* Not reading it: a pipelining client whose input filled its buffer. */
    fd = client(port);
    char big[8192];
    memset(big, 'a', sizeof big);
    sends(fd, GET);
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 100, 20), "first request with the host");
    int hdr = snprintf(buf, sizeof buf, "POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n", 200000);
    /* More than the server buffers (64 KiB) while a request is pending, less
     * than that plus the socket's receive buffer, so the FIN gets there. */
    ssize_t w = write(fd, buf, (size_t)hdr);
    (void)w;
    size_t sent = 0;
    for (int i = 0; i < 200 && sent < 100000; i++) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        nsv_poll(s, evs, 64, arena, sizeof arena, 2);
        if (poll(&p, 1, 5) > 0) {
            ssize_t k = send(fd, big, sizeof big, MSG_DONTWAIT);
            if (k > 0)
                sent += (size_t)k;
        }
    }
    shutdown(fd, SHUT_WR);
    ok(wait_event(s, EV_HANGUP, &hup, 100, 20) && hup.conn == ev.conn,
       "EOF behind a full input buffer is still noticed (%zu bytes sent)", sent);
    close(fd);

    /* Pipelined request delivered after the client's EOF: flag, no HANGUP. */
    fd = client(port);
    sends(fd, "GET /a HTTP/1.1\r\nHost: t\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\n");
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 100, 20), "/a arrives");
    shutdown(fd, SHUT_WR);
    ok(wait_event(s, EV_HANGUP, &hup, 100, 20), "HANGUP for /a");
    nsv_reply(s, ev.conn, 200, NULL, 0, "a", 1);
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 100, 20) && (ev.flags & NSV_EVF_EOF), "/b arrives flagged NSV_EVF_EOF");
    is_int(spin(s, 5, EV_HANGUP), 0, "no second HANGUP");
    nsv_reply(s, ev.conn, 200, NULL, 0, "b", 1);
    read_polling(s, fd, buf, sizeof buf, 40, 5, NULL);
    ok(strstr(buf, "\r\n\r\na") && strstr(buf, "\r\n\r\nb"), "both answers reach the half-closed client");
    close(fd);

    /* Answered and idle: an EOF then is no HANGUP. */
    fd = request(s, port, GET, &ev);
    nsv_reply(s, ev.conn, 200, NULL, 0, NULL, 0);
    read_polling(s, fd, buf, sizeof buf, 20, 5, NULL);
    close(fd);
    is_int(spin(s, 10, EV_HANGUP), 0, "an idle keep-alive client that leaves gets no HANGUP");
    nsv_server_free(s);
}

int main(void)
{
    test_complete_framing();
    test_interim();
    test_header_bytes();
    test_streams();
    test_pipeline();
    test_sharded_framing();
    test_hangup();
    return done_testing();
}
