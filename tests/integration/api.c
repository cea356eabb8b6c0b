/* api.c - the C ABI in-process: errors for bad ids and bad calls, options,
 * listeners, routes, event accessors, streaming, batches, callback mode. */
#include "tap.h"
#include "nsvnet.h"
#include <nanosrv.h>
#include <poll.h>
#include <unistd.h>

static void test_errors(void)
{
    is_int(nsv_abi_version(), NSV_ABI_VERSION, "ABI version matches header");
    is_int(nsv_event_size(), sizeof(nsv_event), "event size matches header");
    is_int(nsv_version(), NSV_VERSION_NUMBER, "version number");
    ok(!strcmp(nsv_version_string(), NSV_VERSION_STRING), "version string");
    ok(!strcmp(nsv_errname(NSV_ESTALE), "NSV_ESTALE"), "errname");
    ok(strlen(nsv_strerror(-999)) > 0 && strlen(nsv_errname(-999)) > 0, "unknown codes still named");
    for (int e = 0; e >= NSV_EEXIST; e--)
        ok(strcmp(nsv_errname(e), "NSV_EUNKNOWN") != 0, "code %d has a name (%s)", e, nsv_errname(e));
    is_int(nsv_reply(NULL, 1, 200, NULL, 0, NULL, 0), NSV_EINVAL, "NULL server -> EINVAL");
    is_int(nsv_listen(NULL, "http://x", 8), NSV_EINVAL, "listen NULL server");
    nsv_server_free(NULL);
    ok(1, "nsv_server_free(NULL) is a no-op");
    nsv_server *s = nsv_server_new();
    ok(s != NULL, "server created");
    is_int(nsv_reply(s, 0, 200, NULL, 0, NULL, 0), NSV_ESTALE, "id 0 -> ESTALE");
    is_int(nsv_reply(s, 0x123456789abULL, 200, NULL, 0, NULL, 0), NSV_ESTALE, "made-up id -> ESTALE");
    is_int(nsv_close(s, ~0ULL), NSV_ESTALE, "close with garbage id -> ESTALE");
    is_int(nsv_listen(s, NULL, 0), NSV_EINVAL, "listen NULL url");
    is_int(nsv_listen(s, "bogus", 5), NSV_EURL, "listen bad URL");
    is_int(nsv_listen(s, "ftp://127.0.0.1:0", 17), NSV_EURL, "listen unsupported scheme");
    is_int(nsv_listen(s, "http://127.0.0.1:99999", 22), NSV_EURL, "listen bad port");
    int l1 = nsv_listen(s, "http://127.0.0.1:0", 18);
    ok(l1 >= 0, "listen on ephemeral port");
    int port = nsv_listener_port(s, l1);
    ok(port > 0, "bound port reported (%d)", port);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    is_int(nsv_listen(s, url, strlen(url)), NSV_EADDRINUSE, "port in use -> EADDRINUSE");
    ok(strlen(nsv_last_error_detail(s)) > 0, "detail explains: %s", nsv_last_error_detail(s));
    int l6 = nsv_listen(s, "http://[::1]:0", 14);
    ok(l6 >= 0, "IPv6 listener");
    is_int(nsv_listener_port(s, 99), NSV_EINVAL, "listener_port bad id");
    is_int(nsv_set_int(s, 9999, 1), NSV_EINVAL, "unknown option");
    is_int(nsv_set_int(s, NSV_OPT_MAX_HEADERS, 0), NSV_ERANGE, "option out of range");
    is_int(nsv_set_int(s, NSV_OPT_MAX_BODY, 1234), NSV_OK, "set max_body");
    is_int(nsv_get_int(s, NSV_OPT_MAX_BODY), 1234, "get max_body");
#ifdef NSV_WITH_ZLIB
    is_int(nsv_set_int(s, NSV_OPT_WS_DEFLATE, 1), NSV_OK, "ws_deflate 1 accepted (built with zlib)");
#else
    /* Without zlib: refused, never accepted and ignored. */
    is_int(nsv_set_int(s, NSV_OPT_WS_DEFLATE, 1), NSV_ENOTSUP, "ws_deflate 1: no zlib, refused");
    ok(strstr(nsv_last_error_detail(s), "zlib") != NULL, "and the detail says so (%s)",
       nsv_last_error_detail(s));
#endif
    is_int(nsv_set_int(s, NSV_OPT_WS_DEFLATE, 0), NSV_OK, "ws_deflate 0 accepted");
    is_int(nsv_opt_by_name("max_body", 8), NSV_OPT_MAX_BODY, "opt_by_name");
    is_int(nsv_opt_by_name("NSV_OPT_MAX_CONNS", 17), NSV_OPT_MAX_CONNS, "opt_by_name with prefix");
    is_int(nsv_opt_by_name("nope", 4), NSV_ENOTFOUND, "opt_by_name unknown");
    is_int(nsv_get_int(s, NSV_OPT_WORKERS), 0, "single loop has 0 workers");
    is_int(nsv_route(s, "GET", 3, "/u/:id", 6, 7, 0), NSV_OK, "route added");
    is_int(nsv_route(s, "GET", 3, "/u/:id", 6, 8, 0), NSV_EEXIST, "duplicate route");
    is_int(nsv_route(s, "GET", 3, "nope", 4, 8, 0), NSV_EINVAL, "bad pattern");
    is_int(nsv_poll(s, NULL, 5, arena, 10, 0), NSV_EINVAL, "poll NULL events");
    is_int(nsv_poll(s, evs, 64, arena, sizeof arena, 0), 0, "poll with nothing to do returns 0");

    /* A request, then every misuse of its id. */
    int fd = client(port);
    sends(fd, "GET /u/42?x=1 HTTP/1.1\r\nHost: h\r\nX-Test: Value 1\r\nx-other: two\r\n\r\n");
    nsv_event ev;
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 100, 20), "request event");
    is_int(ev.route, 7, "route id in event");
    is_mem(arena + ev.method_off, ev.method_len, "GET", "method");
    is_mem(arena + ev.path_off, ev.path_len, "/u/42", "path");
    is_mem(arena + ev.query_off, ev.query_len, "x=1", "query");
    is_int(ev.nparams, 1, "one param");
    uint32_t vl = 0;
    int64_t vo = nsv_ev_param_by_name(&ev, arena, "id", 2, &vl);
    ok(vo >= 0, "param by name");
    is_mem(arena + vo, vl, "42", "param value");
    vo = nsv_ev_param(&ev, arena, 0, &vl);
    is_mem(arena + vo, vl, "42", "param by index");
    is_int(nsv_ev_param(&ev, arena, 1, &vl), NSV_ENOTFOUND, "param index past end");
    vo = nsv_ev_header(&ev, arena, "x-test", 6, &vl);
    is_mem(arena + vo, vl, "Value 1", "header lookup is case-insensitive");
    is_int(nsv_ev_header(&ev, arena, "absent", 6, &vl), NSV_ENOTFOUND, "absent header");
    is_int(ev.nheaders, 3, "header count");
    is_mem(arena + ev.headers_off, ev.headers_len, "Host: h\r\nX-Test: Value 1\r\nx-other: two\r\n",
           "header block as sent");
    uint32_t no, nl, vo2, vl2;
    is_int(nsv_ev_header_at(&ev, arena, 2, &no, &nl, &vo2, &vl2), NSV_OK, "header_at 2");
    is_mem(arena + no, nl, "x-other", "header_at name");
    is_mem(arena + vo2, vl2, "two", "header_at value");
    is_int(nsv_ev_header_at(&ev, arena, 3, &no, &nl, &vo2, &vl2), NSV_ENOTFOUND, "header_at past end");
    is_mem(arena + ev.peer_off, ev.peer_len, "127.0.0.1", "peer address");
    ok(ev.peer_port > 0, "peer port");
    ok(ev.flags & NSV_EVF_KEEPALIVE, "keep-alive flag");
    uint64_t tag = 0;
    is_int(nsv_conn_set_tag(s, ev.conn, 0xfeedULL), NSV_OK, "set tag");
    is_int(nsv_conn_tag(s, ev.conn, &tag), NSV_OK, "get tag");
    is_int(tag, 0xfeed, "tag round-trips");
    is_int(nsv_reply(s, ev.conn, 42, NULL, 0, NULL, 0), NSV_EINVAL, "bad status -> EINVAL");
    is_int(nsv_reply(s, ev.conn, 200, "Bad\r\nHeader", 12, NULL, 0), NSV_EINVAL, "bad header block -> EINVAL");
    is_int(nsv_reply(s, ev.conn, 200, "X: a\nInjected: b\r\n", 19, NULL, 0), NSV_EINVAL, "bare LF in header block -> EINVAL");
    is_int(nsv_reply(s, ev.conn, 200, NULL, 5, NULL, 0), NSV_EINVAL, "NULL headers with length -> EINVAL");
    is_int(nsv_send_chunk(s, ev.conn, "x", 1), NSV_ESTATE, "chunk before reply_start -> ESTATE");
    is_int(nsv_reply(s, ev.conn, 200, "X-A: 1\r\n", 8, "hi", 2), NSV_OK, "reply");
    is_int(nsv_reply(s, ev.conn, 200, NULL, 0, "again", 5), NSV_ESTATE, "reply twice -> ESTATE");
    nsv_poll(s, evs, 64, arena, sizeof arena, 0);
    char buf[4096];
    read_all(fd, buf, sizeof buf, 500, 50);
    ok(strstr(buf, "HTTP/1.1 200 OK\r\n") && strstr(buf, "X-A: 1\r\n") && strstr(buf, "\r\n\r\nhi"), "reply on the wire");

    /* streaming */
    sends(fd, "GET /stream HTTP/1.1\r\nHost:h\r\nX-Sp:   padded \t \r\n\r\n");
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 100, 20), "second request on the same connection");
    is_int(ev.route, -1, "unmatched route -> -1");
    is_mem(arena + ev.headers_off, ev.headers_len, "Host: h\r\nX-Sp: padded\r\n",
           "header block rewritten as \"Name: value\" lines when sent otherwise");
    is_int(nsv_reply(s, ev.conn, 200, "X-A:\n1\r\n", 8, NULL, 0), NSV_EINVAL,
           "a bad block the length of the last good one is still checked");
    is_int(nsv_reply_start(s, ev.conn, 200, "Content-Type: text/plain\r\n", 26), NSV_OK, "reply_start");
    is_int(nsv_send_chunk(s, ev.conn, "abc", 3), NSV_OK, "chunk 1");
    is_int(nsv_send_chunk(s, ev.conn, "", 0), NSV_OK, "empty chunk ignored");
    is_int(nsv_send_chunk(s, ev.conn, "defgh", 5), NSV_OK, "chunk 2");
    is_int(nsv_reply(s, ev.conn, 200, NULL, 0, NULL, 0), NSV_ESTATE, "reply during stream -> ESTATE");
    is_int(nsv_reply_end(s, ev.conn), NSV_OK, "reply_end");
    is_int(nsv_reply_end(s, ev.conn), NSV_ESTATE, "reply_end twice -> ESTATE");
    nsv_poll(s, evs, 64, arena, sizeof arena, 0);
    read_all(fd, buf, sizeof buf, 500, 50);
    ok(strstr(buf, "Transfer-Encoding: chunked") && strstr(buf, "3\r\nabc\r\n5\r\ndefgh\r\n0\r\n\r\n"),
       "chunked stream on the wire");

    /* a long stream paced by TCP_WRITABLE: 0 when the client stops reading, 1 once it drained */
    int sfd = client(port);
    sends(sfd, "GET /big HTTP/1.1\r\nHost: h\r\n\r\n");
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 100, 20), "request for a long stream");
    uint64_t sc = ev.conn;
    is_int(nsv_reply_start(s, sc, 200, NULL, 0), NSV_OK, "long stream started");
    static char chunk[32768];
    memset(chunk, 'z', sizeof chunk);
    int blocked = 0, chunks = 0, bad = 0;
    while (!blocked && chunks < 2048 && !bad) { /* at most 64 MiB */
        bad = nsv_send_chunk(s, sc, chunk, sizeof chunk) != NSV_OK;
        chunks++;
        int n = nsv_poll(s, evs, 64, arena, sizeof arena, 0);
        for (int i = 0; i < n; i++)
            if (evs[i].type == NSV_EV_TCP_WRITABLE && evs[i].conn == sc)
                blocked = evs[i].code == 0;
    }
    ok(blocked && !bad, "TCP_WRITABLE 0 once the client stops reading (after %d chunks of 32 KiB)", chunks);
    ok(nsv_conn_queued(s, sc) >= 65536, "queued output above the high water mark");
    int64_t t_end = nsv_millis() + 5000;
    size_t got = 0;
    while (blocked && nsv_millis() < t_end) {
        char rb[65536];
        ssize_t r;
        while ((r = recv(sfd, rb, sizeof rb, MSG_DONTWAIT)) > 0)
            got += (size_t)r;
        int n = nsv_poll(s, evs, 64, arena, sizeof arena, 5);
        for (int i = 0; i < n; i++)
            if (evs[i].type == NSV_EV_TCP_WRITABLE && evs[i].conn == sc)
                blocked = evs[i].code == 0;
    }
    ok(!blocked, "TCP_WRITABLE 1 after the client read %zu bytes", got);
    is_int(nsv_reply_end(s, sc), NSV_OK, "long stream ended");
    close(sfd);

    /* A stream that ends while it is past the high water mark still gets its
     * TCP_WRITABLE 1: a host that paused on the 0 (per connection, as the
     * bindings do) would otherwise wait forever on the next keep-alive reply. */
    sfd = client(port);
    sends(sfd, "GET /big2 HTTP/1.1\r\nHost: h\r\n\r\n");
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 100, 20), "request for a stream that ends while blocked");
    sc = ev.conn;
    is_int(nsv_reply_start(s, sc, 200, NULL, 0), NSV_OK, "stream started");
    blocked = 0, chunks = 0, bad = 0;
    while (!blocked && chunks < 2048 && !bad) {
        bad = nsv_send_chunk(s, sc, chunk, sizeof chunk) != NSV_OK;
        chunks++;
        int n = nsv_poll(s, evs, 64, arena, sizeof arena, 0);
        for (int i = 0; i < n; i++)
            if (evs[i].type == NSV_EV_TCP_WRITABLE && evs[i].conn == sc)
                blocked = evs[i].code == 0;
    }
    ok(blocked && !bad, "TCP_WRITABLE 0 (after %d chunks)", chunks);
    is_int(nsv_reply_end(s, sc), NSV_OK, "stream ended while past the high water mark");
    t_end = nsv_millis() + 5000;
    got = 0;
    int closed = 0;
    while (blocked && !closed && nsv_millis() < t_end) {
        char rb[65536];
        ssize_t r;
        while ((r = recv(sfd, rb, sizeof rb, MSG_DONTWAIT)) > 0)
            got += (size_t)r;
        int n = nsv_poll(s, evs, 64, arena, sizeof arena, 5);
        for (int i = 0; i < n; i++) {
            if (evs[i].type == NSV_EV_TCP_WRITABLE && evs[i].conn == sc)
                blocked = evs[i].code == 0;
            closed |= evs[i].type == NSV_EV_CLOSE && evs[i].conn == sc;
        }
    }
    ok(!blocked && !closed, "TCP_WRITABLE 1 after the ended stream drained (%zu bytes read)", got);
    sends(sfd, "GET /after HTTP/1.1\r\nHost: h\r\n\r\n");
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 100, 20) && ev.conn == sc, "the next request on that connection");
    is_int(nsv_reply(s, sc, 200, NULL, 0, "ok", 2), NSV_OK, "answered");
    close(sfd);

    /* peer closes while the host holds a request */
    sends(fd, "GET /late HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 100, 20), "third request");
    uint64_t old = ev.conn;
    shutdown(fd, SHUT_RDWR);
    close(fd);
    is_int(nsv_reply(s, old, 200, NULL, 0, "ok", 2), NSV_OK, "reply after peer half-closed is accepted");
    nsv_event cev;
    ok(wait_event(s, NSV_EV_CLOSE, &cev, 100, 20), "close event");
    is_int(cev.conn, old, "close event names the connection");
    is_int(cev.tag, 0xfeed, "close event carries the tag");
    is_int(nsv_reply(s, old, 200, NULL, 0, NULL, 0), NSV_ESTALE, "reply after close -> ESTALE");
    is_int(nsv_close(s, old), NSV_ESTALE, "close after close -> ESTALE");
    is_int(nsv_conn_set_tag(s, old, 1), NSV_ESTALE, "tag after close -> ESTALE");

    /* a new connection reusing the slot must not accept the old id */
    fd = client(port);
    sends(fd, "GET /new HTTP/1.1\r\nHost: h\r\n\r\n");
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 100, 20), "request on a new connection");
    ok(ev.conn != old, "new id differs from the stale one");
    is_int(nsv_reply(s, old, 200, NULL, 0, NULL, 0), NSV_ESTALE, "stale id rejected, slot reused");
    is_int(nsv_reply(s, ev.conn, 200, NULL, 0, "fine", 4), NSV_OK, "new connection answered");
    nsv_poll(s, evs, 64, arena, sizeof arena, 0);
    read_all(fd, buf, sizeof buf, 500, 50);
    ok(strstr(buf, "\r\n\r\nfine") != NULL, "new connection unaffected");

    /* arena too small: the event waits */
    sends(fd, "POST /big HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\n");
    char body[1000];
    memset(body, 'b', sizeof body);
    ssize_t w = write(fd, body, sizeof body);
    (void)w;
    int n = 0;
    for (int i = 0; i < 50 && n == 0; i++)
        n = nsv_poll(s, evs, 64, arena, 100, 20);
    is_int(n, NSV_ENOBUFS, "small arena -> ENOBUFS");
    ok(nsv_poll_need(s) >= 1000, "poll_need reports %lld", (long long)nsv_poll_need(s));
    n = nsv_poll(s, evs, 64, arena, sizeof arena, 0);
    ok(n == 1 && evs[0].body_len == 1000, "event delivered with a big enough arena");

    /* reply_batch */
    char batch[256];
    memset(batch, 0, sizeof batch);
    uint64_t id = evs[0].conn;
    int32_t st = 201;
    uint32_t hl = 0, bl = 5;
    memcpy(batch, &id, 8);
    memcpy(batch + 8, &st, 4);
    memcpy(batch + 12, &hl, 4);
    memcpy(batch + 16, &bl, 4);
    memcpy(batch + 24, "batch", 5);
    memcpy(batch + 32, &old, 8); /* a stale id in the same batch */
    memcpy(batch + 40, &st, 4);
    is_int(nsv_reply_batch(s, batch, 56), 1, "batch: 1 of 2 accepted (stale one refused)");
    nsv_poll(s, evs, 64, arena, sizeof arena, 0);
    read_all(fd, buf, sizeof buf, 500, 50);
    ok(strstr(buf, "HTTP/1.1 201 Created") && strstr(buf, "\r\n\r\nbatch"), "batch reply on the wire");
    close(fd);
    nsv_server_free(s);
}

static int cb_count;
static void on_ev(nsv_server *s, const nsv_event *ev, const char *a, void *ud)
{
    (void)ud;
    if (ev->type != NSV_EV_REQUEST)
        return;
    cb_count++;
    nsv_reply(s, ev->conn, 200, NULL, 0, a + ev->path_off, ev->path_len);
    if (cb_count == 3)
        nsv_stop(s);
}

static void test_callback(void)
{
    nsv_server *s = nsv_server_new();
    int l = nsv_listen(s, "http://127.0.0.1:0", 18);
    int port = nsv_listener_port(s, l);
    is_int(nsv_set_callback(s, on_ev, NULL), NSV_OK, "callback set");
    int fd = client(port);
    sends(fd, "GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\nGET /3 HTTP/1.1\r\nHost: h\r\n\r\n");
    is_int(nsv_run(s), NSV_OK, "run returns after stop from the callback");
    is_int(cb_count, 3, "three pipelined requests through the callback");
    nsv_poll(s, evs, 64, arena, sizeof arena, 0);
    char buf[4096];
    read_all(fd, buf, sizeof buf, 500, 50);
    ok(strstr(buf, "\r\n\r\n/1") && strstr(buf, "\r\n\r\n/2") && strstr(buf, "\r\n\r\n/3"), "callback replies in order");
    is_int(nsv_poll(s, evs, 64, arena, sizeof arena, 0), NSV_ESTOPPED, "poll after stop -> ESTOPPED");
    close(fd);
    nsv_server_free(s);
}

/* Explicit upgrade with a subprotocol, server-initiated close, broadcast. */
static void test_ws_api(void)
{
    nsv_server *s = nsv_server_new();
    int l = nsv_listen(s, "http://127.0.0.1:0", 18);
    int port = nsv_listener_port(s, l);
    nsv_route(s, "GET", 3, "/auto", 5, 5, NSV_ROUTE_WEBSOCKET);
    int fd = client(port);
    sends(fd, "GET /chat HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
              "Sec-WebSocket-Protocol: chat, superchat\r\n\r\n");
    nsv_event ev;
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 100, 20), "upgrade request reaches the host");
    ok(ev.flags & NSV_EVF_UPGRADE, "UPGRADE flag set");
    uint32_t vl;
    int64_t vo = nsv_ev_header(&ev, arena, "sec-websocket-protocol", 22, &vl);
    is_mem(arena + vo, vl, "chat, superchat", "offered subprotocols readable");
    is_int(nsv_ws_send(s, ev.conn, NSV_WS_TEXT, "x", 1), NSV_ESTATE, "ws_send before upgrade -> ESTATE");
    is_int(nsv_ws_upgrade(s, ev.conn, "Bad header", 10), NSV_EINVAL, "bad extra headers -> EINVAL");
    is_int(nsv_ws_upgrade(s, ev.conn, "Sec-WebSocket-Protocol: chat\r\n", 30), NSV_OK, "ws_upgrade");
    is_int(nsv_ws_upgrade(s, ev.conn, NULL, 0), NSV_ESTATE, "upgrade twice -> ESTATE");
    is_int(nsv_reply(s, ev.conn, 200, NULL, 0, NULL, 0), NSV_ESTATE, "HTTP reply on a WebSocket -> ESTATE");
    is_int(nsv_ws_send(s, ev.conn, 7, "x", 1), NSV_EINVAL, "bad opcode -> EINVAL");
    char big[200];
    memset(big, 'p', sizeof big);
    is_int(nsv_ws_send(s, ev.conn, NSV_WS_PING, big, 126), NSV_ETOOBIG, "ping over 125 bytes -> ETOOBIG");
    is_int(nsv_ws_send(s, ev.conn, NSV_WS_TEXT, "hey", 3), NSV_OK, "ws_send text");
    is_int(nsv_ws_broadcast(s, -1, NSV_WS_BINARY, "all", 3), 1, "broadcast to all WebSockets reaches 1");
    is_int(nsv_ws_broadcast(s, 5, NSV_WS_BINARY, "none", 4), 0, "broadcast to another route reaches 0");
    uint64_t ids[2] = {ev.conn, 12345};
    is_int(nsv_ws_send_many(s, ids, 2, NSV_WS_TEXT, "many", 4), 1, "send_many: 1 of 2 ids valid");
    is_int(nsv_ws_close(s, ev.conn, 1004, NULL, 0), NSV_EINVAL, "close code 1004 -> EINVAL");
    is_int(nsv_ws_close(s, ev.conn, 1001, "going", 5), NSV_OK, "ws_close");
    is_int(nsv_ws_send(s, ev.conn, NSV_WS_TEXT, "late", 4), NSV_ESTATE, "send after close -> ESTATE");
    nsv_poll(s, evs, 64, arena, sizeof arena, 0);
    char buf[4096];
    int n = read_all(fd, buf, sizeof buf, 500, 50);
    ok(strstr(buf, "101 Switching Protocols") && strstr(buf, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=") &&
       strstr(buf, "Sec-WebSocket-Protocol: chat\r\n"), "101 with accept key and chosen subprotocol");
    char *body = strstr(buf, "\r\n\r\n");
    static const unsigned char want[] = {0x81, 3, 'h', 'e', 'y', 0x82, 3, 'a', 'l', 'l', 0x81, 4, 'm', 'a', 'n', 'y',
                                         0x88, 7, 0x03, 0xe9, 'g', 'o', 'i', 'n', 'g'};
    ok(body && n - (body + 4 - buf) == (int)sizeof want && !memcmp(body + 4, want, sizeof want),
       "frames on the wire: text, broadcast, send_many, close 1001");
    /* peer answers the close: the server closes the TCP connection */
    static const unsigned char close_frame[] = {0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe9};
    ssize_t w = write(fd, close_frame, sizeof close_frame);
    (void)w;
    nsv_event cev;
    ok(wait_event(s, NSV_EV_CLOSE, &cev, 100, 20), "connection closed after the close exchange");
    close(fd);

    /* automatic route: WS_OPEN then messages */
    fd = client(port);
    sends(fd, "GET /auto?room=1 HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n");
    static const unsigned char msg[] = {0x81, 0x82, 1, 2, 3, 4, 'h' ^ 1, 'i' ^ 2};
    ok(wait_event(s, NSV_EV_WS_OPEN, &ev, 100, 20), "WS_OPEN for an automatic route");
    is_int(ev.route, 5, "WS_OPEN carries the route");
    is_mem(arena + ev.query_off, ev.query_len, "room=1", "WS_OPEN carries the query");
    w = write(fd, msg, sizeof msg);
    ok(wait_event(s, NSV_EV_WS_MESSAGE, &ev, 100, 20), "WS_MESSAGE");
    is_int(ev.code, NSV_WS_TEXT, "text opcode");
    is_mem(arena + ev.body_off, ev.body_len, "hi", "unmasked payload");
    is_int(ev.route, 5, "message carries the route");
    is_int(nsv_ws_broadcast(s, 5, NSV_WS_TEXT, "room", 4), 1, "broadcast to the route");
    close(fd);
    ok(wait_event(s, NSV_EV_WS_CLOSE, &ev, 100, 20), "abrupt disconnect -> WS_CLOSE");
    is_int(ev.code, 1006, "code 1006");
    nsv_server_free(s);
}

int main(void)
{
    test_ws_api();
    test_errors();
    test_callback();
    return done_testing();
}
