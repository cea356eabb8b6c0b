/* api_errors.c - nsv_last_error_detail: per server and per thread, never
 * inherited by a new server, not overwritten by a generic text once a
 * deeper check explained the failure, and every refusal says which
 * argument broke which rule. */
#include "tap.h"
#include "nsvnet.h"
#include <nanosrv.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

/* r is the code wanted, the detail of srv names `want` and is more than the
 * code's fixed text. */
static void refusal(nsv_server *srv, int64_t r, int code, const char *want, const char *what)
{
    const char *d = nsv_last_error_detail(srv);
    int good = r == code && d[0] && strstr(d, want) && strcmp(d, nsv_strerror(code)) != 0;
    if (!ok(good, "%s: %s, detail names '%s'", what, nsv_errname(code), want))
        diag("got %lld (%s), detail \"%s\"", (long long)r, nsv_errname((int)r), d);
}

static void test_per_server(void)
{
    nsv_server *a = nsv_server_new(), *b = nsv_server_new();
    ok(!strcmp(nsv_last_error_detail(a), ""), "a new server has no detail");
    is_int(nsv_set_int(b, 9999, 1), NSV_EINVAL, "B: unknown option");
    char bdetail[256];
    snprintf(bdetail, sizeof bdetail, "%s", nsv_last_error_detail(b));
    ok(strstr(bdetail, "9999") != NULL, "B's detail names the option: %s", bdetail);
    is_int(nsv_reply(a, 0x100000001ULL, 200, NULL, 0, NULL, 0), NSV_ESTALE, "A: stale id");
    ok(!strcmp(nsv_last_error_detail(b), bdetail), "an error on A leaves B's detail alone");
    ok(strstr(nsv_last_error_detail(a), "nsv_reply") != NULL, "A's detail names the call: %s",
       nsv_last_error_detail(a));
    ok(strstr(nsv_last_error_detail(a), "9999") == NULL, "A does not show B's detail");
    is_int(nsv_url_parse("bogus", 5, &(nsv_url){0}), NSV_EURL, "server-less failure");
    ok(!strcmp(nsv_last_error_detail(b), bdetail), "a utility failure leaves B's detail alone");
    ok(strstr(nsv_last_error_detail(NULL), "://") != NULL, "the utility's detail is in the NULL slot: %s",
       nsv_last_error_detail(NULL));
    is_int(nsv_poll(NULL, evs, 1, arena, 1, 0), NSV_EINVAL, "poll with a NULL server");
    ok(strstr(nsv_last_error_detail(NULL), "srv is NULL") != NULL, "NULL server: the NULL slot says so");
    ok(!strcmp(nsv_last_error_detail(b), bdetail), "and B is still untouched");

    /* More servers than the table holds: the oldest detail goes, the others stay. */
    nsv_server *many[20];
    for (int i = 0; i < 20; i++) {
        many[i] = nsv_server_new();
        nsv_listener_port(many[i], 100 + i);
    }
    char want[64];
    snprintf(want, sizeof want, "listener %d ", 119);
    ok(strstr(nsv_last_error_detail(many[19]), want) != NULL, "the newest of 20 servers keeps its detail");
    int mixed = 0;
    for (int i = 0; i < 20; i++) {
        const char *d = nsv_last_error_detail(many[i]);
        snprintf(want, sizeof want, "listener %d ", 100 + i);
        if (d[0] && !strstr(d, want))
            mixed++;
    }
    is_int(mixed, 0, "no server shows another server's detail");
    for (int i = 0; i < 20; i++)
        nsv_server_free(many[i]);
    nsv_server_free(a);
    nsv_server_free(b);
}

static void test_new_server_at_old_address(void)
{
    int reused = 0, inherited = 0;
    for (int i = 0; i < 20; i++) {
        nsv_server *s = nsv_server_new();
        nsv_listener_port(s, 42);
        void *old = s;
        nsv_server_free(s);
        nsv_server *t = nsv_server_new();
        reused += (void *)t == old;
        inherited += nsv_last_error_detail(t)[0] != 0;
        nsv_server_free(t);
    }
    is_int(inherited, 0, "a new server never inherits a freed server's detail (%d of 20 at the same address)",
           reused);
}

struct thr {
    nsv_server *s;
    char seen[256];
    int r;
};

static void *other_thread(void *p)
{
    struct thr *t = p;
    snprintf(t->seen, sizeof t->seen, "%s", nsv_last_error_detail(t->s));
    t->r = nsv_close(t->s, 0x200000002ULL); /* ESTALE from this thread */
    return NULL;
}

static void test_per_thread(void)
{
    nsv_server *s = nsv_server_new_sharded(2);
    is_int(nsv_set_water_marks(s, 0x100000001ULL, 10, 20), NSV_ERANGE, "main thread: bad water marks");
    char mine[256];
    snprintf(mine, sizeof mine, "%s", nsv_last_error_detail(s));
    ok(strstr(mine, "low 20") != NULL, "main thread's detail: %s", mine);
    struct thr t = {.s = s};
    pthread_t th;
    pthread_create(&th, NULL, other_thread, &t);
    pthread_join(th, NULL);
    ok(t.seen[0] == 0, "another thread does not see the main thread's detail (saw \"%s\")", t.seen);
    is_int(t.r, NSV_ESTALE, "the other thread's call failed");
    ok(!strcmp(nsv_last_error_detail(s), mine), "its failure leaves the main thread's detail alone");
    nsv_server_free(s);
}

/* A pending HTTP request on s; returns its connection id. */
static uint64_t pending_request(nsv_server *s, int port, int *fd, const char *req)
{
    *fd = client(port);
    sends(*fd, req);
    nsv_event ev;
    if (!wait_event(s, NSV_EV_REQUEST, &ev, 200, 20))
        return 0;
    return ev.conn;
}

static void test_deep_detail_kept(void)
{
    nsv_server *s = nsv_server_new();
    int port = nsv_listener_port(s, nsv_listen(s, "http://127.0.0.1:0", 18));
    int fd;
    uint64_t id = pending_request(s, port, &fd, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    ok(id != 0, "a request is pending");
    int r = nsv_reply(s, id, 200, "X-A: 1\r\nX-B: a\nb\r\n", 18, "hi", 2);
    const char *d = nsv_last_error_detail(s);
    is_int(r, NSV_EINVAL, "reply with a bare LF in a header value");
    ok(strstr(d, "nsv_reply: connection") == NULL && strstr(d, "refused the call") == NULL,
       "the reply's own detail is not replaced by the generic one: %s", d);
    ok(strstr(d, "eader") != NULL, "the detail is about the header block: %s", d);
    r = nsv_reply(s, id, 42, NULL, 0, NULL, 0);
    d = nsv_last_error_detail(s);
    is_int(r, NSV_EINVAL, "reply with status 42");
    ok(strstr(d, "42") != NULL && strstr(d, "refused the call") == NULL, "the detail names status 42: %s", d);
    is_int(nsv_reply(s, id, 200, NULL, 0, "ok", 2), NSV_OK, "the request can still be answered");
    is_int(nsv_reply(s, id, 200, NULL, 0, "ok", 2), NSV_ESTATE, "a second reply");
    d = nsv_last_error_detail(s);
    ok(strstr(d, "nsv_reply") && strstr(d, "no request waiting"), "the generic detail says why: %s", d);
    close(fd);
    nsv_server_free(s);
}

static void test_refusals(void)
{
    nsv_server *s = nsv_server_new();
    int l = nsv_listen(s, "http://127.0.0.1:0", 18);
    int port = nsv_listener_port(s, l);
    int fd;
    uint64_t http = pending_request(s, port, &fd,
                                    "GET /chat HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                                    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n");
    ok(http != 0, "an upgrade request is pending");

    /* connections */
    refusal(s, nsv_ws_send(s, http, NSV_WS_TEXT, "x", 1), NSV_ESTATE, "not a WebSocket", "ws_send before the upgrade");
    refusal(s, nsv_send(s, http, "x", 1), NSV_ESTATE, "not a raw TCP", "nsv_send on HTTP");
    refusal(s, nsv_pause_read(s, http, 1), NSV_ESTATE, "nsv_pause_read", "pause_read on HTTP");
    refusal(s, nsv_send_chunk(s, http, "x", 1), NSV_ESTATE, "stream", "chunk without a stream");
    refusal(s, nsv_ws_upgrade(s, http, "Bad header", 10), NSV_EINVAL, "byte 3", "upgrade with a bad header block");
    refusal(s, nsv_ws_upgrade(s, http, "X-A: a\nb\r\n", 10), NSV_EINVAL, "at byte 6", "upgrade with an LF in a value");
    refusal(s, nsv_reply(s, http, 200, NULL, 5, NULL, 0), NSV_EINVAL, "headers is NULL with hlen 5", "NULL headers");
    refusal(s, nsv_reply(s, 0, 200, NULL, 0, NULL, 0), NSV_ESTALE, "not a connection id", "id 0");
    refusal(s, nsv_close(s, 0x12300000045ULL), NSV_ESTALE, "not open", "made-up id");
    uint64_t tag;
    refusal(s, nsv_conn_tag(s, http, NULL), NSV_EINVAL, "tag", "conn_tag without an output pointer");
    is_int(nsv_ws_upgrade(s, http, NULL, 0), NSV_OK, "upgrade");
    (void)tag;
    refusal(s, nsv_ws_send(s, http, 7, "x", 1), NSV_EINVAL, "opcode 7 is not TEXT(1), BINARY(2), PING(9) or PONG(10)",
            "ws opcode 7");
    char big[300];
    memset(big, 'p', sizeof big);
    refusal(s, nsv_ws_send(s, http, NSV_WS_PING, big, 200), NSV_ETOOBIG, "ping payload is 200 bytes", "long ping");
    refusal(s, nsv_ws_close(s, http, 1005, NULL, 0), NSV_EINVAL, "1005 is reserved", "close code 1005");
    refusal(s, nsv_ws_close(s, http, 5000, NULL, 0), NSV_EINVAL, "5000", "close code 5000");
    refusal(s, nsv_ws_close(s, http, 1000, big, 124), NSV_EINVAL, "124 bytes", "close reason of 124 bytes");
    refusal(s, nsv_ws_close(s, http, 1000, "\xff", 1), NSV_EINVAL, "UTF-8", "close reason not UTF-8");
    refusal(s, nsv_ws_broadcast(s, -1, NSV_WS_PONG, "x", 1), NSV_EINVAL, "opcode 10", "broadcast a pong");
    refusal(s, nsv_ws_send_many(s, NULL, 3, NSV_WS_TEXT, "x", 1), NSV_EINVAL, "conns is NULL", "send_many NULL ids");
    refusal(s, nsv_reply(s, http, 200, NULL, 0, NULL, 0), NSV_ESTATE, "no request waiting", "reply on a WebSocket");
    is_int(nsv_ws_close(s, http, 1000, "bye", 3), NSV_OK, "ws_close");
    refusal(s, nsv_ws_send(s, http, NSV_WS_TEXT, "x", 1), NSV_ESTATE, "close frame", "send after close");

    /* raw TCP */
    refusal(s, nsv_set_water_marks(s, http, 10, 20), NSV_ERANGE, "high 10, low 20", "low above high");
    refusal(s, nsv_connect(s, "http://x:1", 10), NSV_EURL, "scheme 'http'", "connect with http://");
    refusal(s, nsv_connect(s, "tcp://127.0.0.1", 15), NSV_EURL, "port", "connect without a port");
    refusal(s, nsv_connect(s, NULL, 0), NSV_EINVAL, "url is NULL", "connect NULL url");

    /* options */
    refusal(s, nsv_set_str(s, 7, "x", 1), NSV_EINVAL, "7", "unknown string option");
    refusal(s, nsv_set_str(s, NSV_OPT_TLS_CERT_PEM, NULL, 4), NSV_EINVAL, "value is NULL", "NULL value, len 4");
    refusal(s, nsv_set_int(s, NSV_OPT_MAX_BODY, -1), NSV_ERANGE, "max_body", "max_body -1");
    if (nsv_tls_available())
        refusal(s, nsv_set_str(s, NSV_OPT_TLS_CERT_FILE, "/no/such/file.pem", 17), NSV_ETLS, "/no/such/file.pem",
                "missing certificate file");

    /* the loop */
    refusal(s, nsv_poll(s, evs, -1, arena, sizeof arena, 0), NSV_EINVAL, "max_events is -1; must be >= 0", "poll -1");
    refusal(s, nsv_poll(s, evs, 64, NULL, 0, 0), NSV_EINVAL, "arena is NULL with max_events 64", "poll NULL arena");
    refusal(s, nsv_poll(s, NULL, 64, arena, 1, 0), NSV_EINVAL, "events is NULL", "poll NULL events");
    refusal(s, nsv_poll_worker(s, 3, evs, 64, arena, sizeof arena, 0), NSV_EINVAL, "worker 3", "poll_worker 3");
    refusal(s, nsv_listener_port(s, 7), NSV_EINVAL, "listener 7", "listener_port 7");
    refusal(s, nsv_listen(s, "ftp://127.0.0.1:0", 17), NSV_EURL, "ftp", "listen ftp://");
    refusal(s, nsv_reply_batch(s, "\x01\0\0\0\0\0\0\0\xc8\0\0\0\x10\0\0\0\0\0\0\0\0\0\0\0", 24), NSV_EINVAL,
            "16 header", "batch record longer than the buffer");

    /* event readers and utilities (no server: the NULL slot) */
    nsv_event ev = {0};
    uint32_t vl;
    refusal(NULL, nsv_ev_header(&ev, arena, NULL, 3, &vl), NSV_EINVAL, "name is NULL", "ev_header NULL name");
    refusal(NULL, nsv_ev_header_at(&ev, NULL, 0, NULL, NULL, NULL, NULL), NSV_EINVAL, "arena is NULL", "ev_header_at NULL arena");
    refusal(NULL, nsv_ev_param(NULL, arena, 0, &vl), NSV_EINVAL, "ev is NULL", "ev_param NULL event");
    char out[64];
    refusal(NULL, nsv_base64_decode("abc!", 4, out, sizeof out), NSV_EPARSE, "byte 3", "base64 bad digit");
    refusal(NULL, nsv_base64_decode("QQ=", 3, out, sizeof out), NSV_EPARSE, "multiple of 4", "base64 short padding");
    refusal(NULL, nsv_base64_encode(NULL, 3, out, sizeof out), NSV_EINVAL, "src is NULL with len 3", "base64 NULL src");
    refusal(NULL, nsv_url_decode("ab%zz", 5, out, sizeof out, 0), NSV_EPARSE, "byte 2", "url_decode bad escape");
    nsv_url u;
    refusal(NULL, nsv_url_parse("http://h:99999/", 15, &u), NSV_EURL, "99999", "url port 99999");
    refusal(NULL, nsv_url_parse("http://h st/", 12, &u), NSV_EURL, "byte 8", "url with a space");
    refusal(NULL, nsv_url_parse("gopher://h:1", 12, &u), NSV_EURL, "gopher", "url scheme gopher");
    refusal(NULL, nsv_url_parse("tcp://h", 7, &u), NSV_EURL, "needs a port", "tcp url without a port");
    refusal(NULL, nsv_json_string("{\"a\":1,}", 8, "$.a", 3, out, sizeof out), NSV_EPARSE, "byte", "bad JSON");
    refusal(NULL, nsv_json_string("{\"a\":1}", 7, "$.a", 3, out, sizeof out), NSV_ENOTFOUND, "a number, not a string",
            "json_string on a number");
    refusal(NULL, nsv_json_string("{\"a\":1}", 7, "$.b", 3, out, sizeof out), NSV_ENOTFOUND, "$.b", "json path not there");
    refusal(NULL, nsv_json_string("{}", 2, "a", 1, out, sizeof out), NSV_EINVAL, "path 'a'", "json path without $");
    int64_t iv;
    refusal(NULL, nsv_json_integer("[1.5]", 5, "$[0]", 4, &iv), NSV_ERANGE, "1.5", "json_integer 1.5");
    refusal(NULL, nsv_json_boolean("[1]", 3, "$[0]", 4, NULL), NSV_EINVAL, "out is NULL", "json_boolean NULL out");
    refusal(NULL, nsv_set_log_level(9), NSV_ERANGE, "level 9", "log level 9");
    /* Close the WebSocket before freeing the server: nsv_server_free does not
     * free the WebSocket state of connections still open. */
    close(fd);
    nsv_event cev;
    ok(wait_event(s, NSV_EV_CLOSE, &cev, 200, 20), "the WebSocket closed");
    nsv_server_free(s);
}

int main(void)
{
    test_per_server();
    test_new_server_at_old_address();
    test_per_thread();
    test_deep_detail_kept();
    test_refusals();
    return done_testing();
}
