/* api_setup.c - setup mistakes are refused with a detail: route methods
 * that are no token or have lower-case letters, NSV_ROUTE_WEBSOCKET off GET,
 * unknown route flags, water marks with low above high, listen URLs with a
 * path, query or user info. Also: a single-loop server may still be set up
 * after it polled, and a reply past the largest size gets NSV_ETOOBIG. */
#include "tap.h"
#include "nsvnet.h"
#include <nanosrv.h>
#include <poll.h>
#include <stdint.h>
#include <unistd.h>

#define S(x) x, sizeof(x) - 1

/* The last error detail contains every one of the given words. */
static int detail_has(nsv_server *s, const char *a, const char *b)
{
    const char *d = nsv_last_error_detail(s);
    int r = d && strstr(d, a) && (!b || strstr(d, b));
    if (!r)
        diag("detail: '%s' (wanted '%s'%s%s)", d ? d : "(null)", a, b ? " and " : "", b ? b : "");
    return r;
}

static void test_route_methods(void)
{
    nsv_server *s = nsv_server_new();
    is_int(nsv_route(s, S("get"), S("/a"), 1, 0), NSV_EINVAL, "lower-case method refused");
    ok(detail_has(s, "lower-case", "register \"GET\""), "detail suggests \"GET\"");
    is_int(nsv_route(s, S("Post"), S("/a"), 1, 0), NSV_EINVAL, "mixed-case method refused");
    ok(detail_has(s, "\"POST\"", NULL), "detail suggests \"POST\"");
    is_int(nsv_route(s, S("purge"), S("/a"), 1, 0), NSV_EINVAL, "lower-case custom method refused");
    ok(detail_has(s, "\"PURGE\"", NULL), "detail suggests \"PURGE\"");
    is_int(nsv_route(s, S("all"), S("/a"), 1, 0), NSV_EINVAL, "\"all\" is not the wildcard");
    ok(detail_has(s, "\"ALL\"", NULL), "detail suggests \"ALL\"");
    is_int(nsv_route(s, S("G T"), S("/a"), 1, 0), NSV_EINVAL, "space in method refused");
    ok(detail_has(s, "RFC 9110 token", NULL), "detail says token");
    is_int(nsv_route(s, S("GET()"), S("/a"), 1, 0), NSV_EINVAL, "separators in method refused");
    ok(detail_has(s, "token", NULL), "detail says token");
    is_int(nsv_route(s, "GET\0", 4, S("/a"), 1, 0), NSV_EINVAL, "NUL in method refused");
    is_int(nsv_route(s, "", 0, S("/a"), 1, 0), NSV_EINVAL, "empty method refused");
    ok(detail_has(s, "empty method", NULL), "detail says empty");
    char longm[80];
    memset(longm, 'X', sizeof longm);
    is_int(nsv_route(s, longm, sizeof longm, S("/a"), 1, 0), NSV_EINVAL, "80-byte method refused");
    ok(detail_has(s, "64 bytes", NULL), "detail gives the limit");

    is_int(nsv_route(s, S("GET"), S("/a"), 1, 0), NSV_OK, "GET accepted");
    is_int(nsv_route(s, S("ALL"), S("/b"), 2, 0), NSV_OK, "ALL accepted");
    is_int(nsv_route(s, S("PURGE"), S("/a"), 3, 0), NSV_OK, "upper-case custom method accepted");
    is_int(nsv_route(s, S("M-SEARCH"), S("/a"), 4, 0), NSV_OK, "token with '-' accepted");

    /* flags */
    is_int(nsv_route(s, S("POST"), S("/ws"), 5, NSV_ROUTE_WEBSOCKET), NSV_EINVAL, "WEBSOCKET on POST refused");
    ok(detail_has(s, "NSV_ROUTE_WEBSOCKET", "GET"), "detail says GET only");
    is_int(nsv_route(s, S("ALL"), S("/ws"), 5, NSV_ROUTE_WEBSOCKET), NSV_EINVAL, "WEBSOCKET on ALL refused");
    is_int(nsv_route(s, S("HEAD"), S("/ws"), 5, NSV_ROUTE_WEBSOCKET), NSV_EINVAL, "WEBSOCKET on HEAD refused");
    is_int(nsv_route(s, S("get"), S("/ws"), 5, NSV_ROUTE_WEBSOCKET), NSV_EINVAL, "WEBSOCKET on \"get\" refused");
    ok(detail_has(s, "register \"GET\"", NULL), "detail suggests \"GET\"");
    is_int(nsv_route(s, S("GET"), S("/ws"), 5, NSV_ROUTE_WEBSOCKET), NSV_OK, "WEBSOCKET on GET accepted");
    is_int(nsv_route(s, S("GET"), S("/f"), 6, 4), NSV_EINVAL, "unknown flag 4 refused");
    ok(detail_has(s, "unknown route flags 0x4", NULL), "detail names the bits");
    is_int(nsv_route(s, S("GET"), S("/f"), 6, 0x80000001u), NSV_EINVAL, "unknown high bit with WEBSOCKET refused");
    ok(detail_has(s, "0x80000000", NULL), "detail names the unknown bit only");
    is_int(nsv_route(s, S("GET"), S("/f"), 6, 0), NSV_OK, "the same route without them accepted");

    /* Nothing refused was registered: requests match only the good routes. */
    int lid = nsv_listen(s, S("http://127.0.0.1:0"));
    int fd = client(nsv_listener_port(s, lid));
    sends(fd, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
    nsv_event ev;
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 100, 20), "request arrives");
    is_int(ev.route, 1, "GET /a matches route 1");
    nsv_reply(s, ev.conn, 200, NULL, 0, "a", 1);
    sends(fd, "PURGE /a HTTP/1.1\r\nHost: x\r\n\r\n");
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 100, 20), "request arrives");
    is_int(ev.route, 3, "PURGE /a matches route 3");
    nsv_reply(s, ev.conn, 200, NULL, 0, "a", 1);
    sends(fd, "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 100, 20), "request arrives");
    is_int(ev.route, 2, "POST /b matches ALL");
    nsv_reply(s, ev.conn, 200, NULL, 0, "a", 1);
    close(fd);
    nsv_server_free(s);
}

static void test_water_marks(void)
{
    nsv_server *s = nsv_server_new();
    is_int(nsv_get_int(s, NSV_OPT_TCP_HIGH_WATER), 65536, "default high");
    is_int(nsv_get_int(s, NSV_OPT_TCP_LOW_WATER), 32768, "default low");
    is_int(nsv_set_int(s, NSV_OPT_TCP_LOW_WATER, 100000), NSV_ERANGE, "low above high refused");
    ok(detail_has(s, "tcp_low_water", "raise tcp_high_water first"), "detail says which to set first");
    is_int(nsv_get_int(s, NSV_OPT_TCP_LOW_WATER), 32768, "low unchanged");
    is_int(nsv_set_int(s, NSV_OPT_TCP_HIGH_WATER, 1000), NSV_ERANGE, "high below low refused");
    ok(detail_has(s, "tcp_high_water", "lower tcp_low_water first"), "detail says which to set first");
    is_int(nsv_get_int(s, NSV_OPT_TCP_HIGH_WATER), 65536, "high unchanged");

    is_int(nsv_set_int(s, NSV_OPT_TCP_HIGH_WATER, 200000), NSV_OK, "raise high first");
    is_int(nsv_set_int(s, NSV_OPT_TCP_LOW_WATER, 100000), NSV_OK, "then low");
    is_int(nsv_set_int(s, NSV_OPT_TCP_LOW_WATER, 200000), NSV_OK, "low equal to high accepted");
    is_int(nsv_set_int(s, NSV_OPT_TCP_LOW_WATER, 0), NSV_OK, "lower low first");
    is_int(nsv_set_int(s, NSV_OPT_TCP_HIGH_WATER, 1), NSV_OK, "then high");
    is_int(nsv_set_int(s, NSV_OPT_TCP_HIGH_WATER, 0), NSV_ERANGE, "high 0 outside the range");
    ok(detail_has(s, "outside", NULL), "range detail");

    /* per connection: nsv_set_water_marks checks the pair itself */
    is_int(nsv_set_water_marks(s, 1, 10, 20), NSV_ERANGE, "nsv_set_water_marks low > high refused");
    diag("nsv_set_water_marks(10, 20) detail: '%s'", nsv_last_error_detail(s));
    nsv_server_free(s);
}

static void test_listen_urls(void)
{
    nsv_server *s = nsv_server_new();
    is_int(nsv_listen(s, S("http://127.0.0.1:0/path")), NSV_EURL, "path refused");
    ok(detail_has(s, "no path", "'/path'"), "detail names the path");
    is_int(nsv_listen(s, S("http://127.0.0.1:0/a/")), NSV_EURL, "longer path refused");
    is_int(nsv_listen(s, S("http://127.0.0.1:0/?x=1")), NSV_EURL, "query refused");
    ok(detail_has(s, "query", NULL), "detail says query");
    is_int(nsv_listen(s, S("http://127.0.0.1:0?x")), NSV_EURL, "query without path refused");
    is_int(nsv_listen(s, S("http://127.0.0.1:0#frag")), NSV_EURL, "fragment refused");
    ok(detail_has(s, "fragment", NULL), "detail says fragment");
    is_int(nsv_listen(s, S("http://user:pw@127.0.0.1:0")), NSV_EURL, "user info refused");
    ok(detail_has(s, "user info", NULL), "detail says user info");
    is_int(nsv_listen(s, S("tcp://u@127.0.0.1:0")), NSV_EURL, "user info on tcp:// refused");
    is_int(nsv_listen(s, S("ws://127.0.0.1:0/chat")), NSV_EURL, "ws:// with a path refused");

    int a = nsv_listen(s, S("http://127.0.0.1:0"));
    ok(a >= 0, "no path accepted");
    int b = nsv_listen(s, S("http://127.0.0.1:0/"));
    ok(b >= 0, "path \"/\" accepted");
    int c = nsv_listen(s, S("tcp://127.0.0.1:0"));
    ok(c >= 0, "tcp:// accepted");
    int d = nsv_listen(s, S("http://[::1]:0/"));
    ok(d >= 0 || d == NSV_EURL || d == NSV_ESYS, "[::1] with \"/\" accepted (where IPv6 exists)");
    nsv_server_free(s);
}

/* A single-loop server is set up from the thread that polls it: setup after
 * the first poll stays allowed. */
static int cb_n;
static void on_ev(nsv_server *s, const nsv_event *ev, const char *a, void *ud)
{
    (void)a;
    (void)ud;
    if (ev->type == NSV_EV_REQUEST) {
        cb_n++;
        nsv_reply(s, ev->conn, 200, NULL, 0, "cb", 2);
    }
}

static void test_single_loop_late_setup(void)
{
    nsv_server *s = nsv_server_new();
    int lid = nsv_listen(s, S("http://127.0.0.1:0"));
    is_int(nsv_poll(s, evs, 64, arena, sizeof arena, 0), 0, "first poll");
    is_int(nsv_route(s, S("GET"), S("/late"), 7, 0), NSV_OK, "single loop: nsv_route after a poll");
    is_int(nsv_set_int(s, NSV_OPT_MAX_BODY, 1000), NSV_OK, "single loop: nsv_set_int after a poll");
    is_int(nsv_set_str(s, NSV_OPT_TLS_CA_PEM, NULL, 0), nsv_tls_available() ? NSV_OK : NSV_ENOTSUP,
           "single loop: nsv_set_str after a poll");
    int l2 = nsv_listen(s, S("http://127.0.0.1:0"));
    ok(l2 >= 0, "single loop: nsv_listen after a poll");
    int fd = client(nsv_listener_port(s, l2));
    sends(fd, "GET /late HTTP/1.1\r\nHost: x\r\n\r\n");
    nsv_event ev;
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 100, 20), "request on the late listener");
    is_int(ev.route, 7, "late route matches");

    /* The largest reply: past it NSV_ETOOBIG, checked before any byte of the
     * body is read (the body pointer below has only 1 byte). */
    static const char one = 'x';
    is_int(nsv_reply(s, ev.conn, 200, NULL, 0, &one, (size_t)0xFFFF0000u + 1), NSV_ETOOBIG,
           "reply of 4 GiB - 64 KiB + 1 bytes: NSV_ETOOBIG");
    is_int(nsv_reply(s, ev.conn, 200, NULL, 0, &one, (size_t)5 << 30), NSV_ETOOBIG, "reply of 5 GiB: NSV_ETOOBIG");
    is_int(nsv_reply(s, ev.conn, 200, NULL, 0, "late", 4), NSV_OK, "the request can still be answered");
    char buf[1024];
    read_polling(s, fd, buf, sizeof buf, 100, 10, "\r\n\r\n");
    ok(strstr(buf, "200 OK") && strstr(buf, "late"), "response received");

    is_int(nsv_set_callback(s, on_ev, NULL), NSV_OK, "single loop: nsv_set_callback after a poll");
    sends(fd, "GET /late HTTP/1.1\r\nHost: x\r\n\r\n");
    read_polling(s, fd, buf, sizeof buf, 100, 10, "\r\n\r\n");
    ok(strstr(buf, "cb") != NULL, "callback answered");
    is_int(cb_n, 1, "callback ran once");
    close(fd);
    (void)lid;
    nsv_server_free(s);
}

int main(void)
{
    test_route_methods();
    test_water_marks();
    test_listen_urls();
    test_single_loop_late_setup();
    return done_testing();
}
