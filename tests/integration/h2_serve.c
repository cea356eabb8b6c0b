/* h2_serve.c - HTTP/2 streams as the host sees them: REQUEST events with
 * NSV_EVF_HTTP2 answered by the usual calls, on a single loop and on a
 * sharded server answered from the polling thread. The client is nghttp2's
 * own client session over a loopback socket, driven in this thread. */
#include "tap.h"
#include "nsvnet.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>

#ifndef NSV_WITH_NGHTTP2
int main(void)
{
    printf("1..0 # SKIP built without nghttp2\n");
    return 0;
}
#else
#include <nghttp2/nghttp2.h>

#define MAXS 64
typedef struct stream {
    int32_t id;
    int status;
    char body[1 << 16];
    size_t blen;
    uint64_t got; /* body bytes, also past what body keeps */
    int closed;
    uint32_t code;
} stream;

typedef struct h2client {
    nghttp2_session *ng;
    int fd;
    stream st[MAXS];
    int n;
    int goaway;
    int consume; /* 0: the client does not open its window (flow control test) */
} h2client;

static stream *find(h2client *c, int32_t id)
{
    for (int i = 0; i < c->n; i++)
        if (c->st[i].id == id)
            return &c->st[i];
    return NULL;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                     const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
    (void)ng, (void)flags;
    stream *s = find(ud, f->hd.stream_id);
    if (s && nlen == 7 && !memcmp(name, ":status", 7))
        s->status = atoi((const char *)value) * (vlen == 3);
    return 0;
}

static int on_data(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *d, size_t len, void *ud)
{
    (void)ng, (void)flags;
    h2client *c = ud;
    stream *s = find(c, id);
    if (s) {
        size_t room = sizeof s->body - s->blen;
        memcpy(s->body + s->blen, d, len < room ? len : room);
        s->blen += len < room ? len : room;
        s->got += len;
    }
    if (c->consume)
        nghttp2_session_consume(ng, id, len);
    return 0;
}

static int on_close(nghttp2_session *ng, int32_t id, uint32_t code, void *ud)
{
    (void)ng;
    stream *s = find(ud, id);
    if (s)
        s->closed = 1, s->code = code;
    return 0;
}

static int on_frame(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    (void)ng;
    if (f->hd.type == NGHTTP2_GOAWAY)
        ((h2client *)ud)->goaway = 1;
    return 0;
}

static void h2_open(h2client *c, int port, int32_t window)
{
    memset(c, 0, sizeof *c);
    c->consume = 1;
    c->fd = client(port);
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
    nghttp2_option *o;
    nghttp2_option_new(&o);
    nghttp2_option_set_no_auto_window_update(o, 1);
    nghttp2_session_client_new2(&c->ng, cb, c, o);
    nghttp2_option_del(o);
    nghttp2_session_callbacks_del(cb);
    nghttp2_settings_entry iv[1] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, (uint32_t)window}};
    nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, iv, 1);
}

static void h2_close(h2client *c)
{
    nghttp2_session_del(c->ng);
    close(c->fd);
}

/* Move bytes both ways once (nonblocking). */
static void h2_pump(h2client *c)
{
    for (int i = 0; i < 64; i++) {
        const uint8_t *d;
        ssize_t n = nghttp2_session_mem_send(c->ng, &d);
        if (n <= 0)
            break;
        sendn(c->fd, d, (size_t)n);
    }
    uint8_t buf[65536];
    for (int i = 0; i < 64; i++) {
        ssize_t n = recv(c->fd, buf, sizeof buf, 0);
        if (n <= 0)
            break;
        nghttp2_session_mem_recv(c->ng, buf, (size_t)n);
    }
}

static int32_t h2_req(h2client *c, const char *method, const char *path, const nghttp2_nv *extra, size_t nextra,
                      nghttp2_data_provider *body)
{
    nghttp2_nv nv[16] = {
        {(uint8_t *)":method", (uint8_t *)method, 7, strlen(method), 0},
        {(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), 0},
        {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
        {(uint8_t *)":authority", (uint8_t *)"h2.test", 10, 7, 0},
    };
    for (size_t i = 0; i < nextra; i++)
        nv[4 + i] = extra[i];
    int32_t id = nghttp2_submit_request(c->ng, NULL, nv, 4 + nextra, body, NULL);
    stream *s = &c->st[c->n++];
    memset(s, 0, sizeof *s);
    s->id = id;
    return id;
}

#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, sizeof(v) - 1, 0}

/* A request body given in pieces, without content-length. */
static const char *body_src;
static size_t body_left;
static ssize_t read_src(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                        nghttp2_data_source *src, void *ud)
{
    (void)ng, (void)id, (void)src, (void)ud;
    size_t k = body_left < len ? body_left : len;
    if (k > 7)
        k = 7; /* several DATA frames */
    memcpy(buf, body_src, k);
    body_src += k;
    body_left -= k;
    if (!body_left)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)k;
}

/* A large request body (content-length set by the caller). */
static size_t big_left;
static ssize_t read_big(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                        nghttp2_data_source *src, void *ud)
{
    (void)ng, (void)id, (void)src, (void)ud;
    size_t k = big_left < len ? big_left : len;
    memset(buf, 'q', k);
    big_left -= k;
    if (!big_left)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)k;
}

/* Poll the server (events into evs/arena) and pump the client. */
static int step(nsv_server *s, h2client *c, int ms)
{
    int k = nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, ms);
    h2_pump(c);
    return k;
}

/* Path and body of the requests wait_requests found (the arena is reused by
 * every poll, so they are copied out). */
static char got_path[8][64], got_body[8][256];
static size_t got_plen[8], got_blen[8];

static int wait_requests(nsv_server *s, h2client *c, nsv_event *out, int want)
{
    int got = 0;
    for (int round = 0; round < 300 && got < want; round++) {
        int k = step(s, c, 10);
        for (int i = 0; i < k && got < want; i++)
            if (evs[i].type == NSV_EV_REQUEST) {
                got_plen[got] = evs[i].path_len < 64 ? evs[i].path_len : 64;
                memcpy(got_path[got], arena + evs[i].path_off, got_plen[got]);
                got_blen[got] = evs[i].body_len < 256 ? evs[i].body_len : 256;
                memcpy(got_body[got], arena + evs[i].body_off, got_blen[got]);
                out[got++] = evs[i];
            }
    }
    return got;
}

static int wait_closed(nsv_server *s, h2client *c, int32_t id)
{
    for (int round = 0; round < 300; round++) {
        stream *st = find(c, id);
        if (st && st->closed)
            return 1;
        step(s, c, 10);
    }
    return 0;
}

static void header_is(const nsv_event *e, const char *name, const char *want, const char *what)
{
    uint32_t vlen = 0;
    int64_t off = nsv_ev_header(e, arena, name, strlen(name), &vlen);
    ok(off >= 0 && vlen == strlen(want) && !memcmp(arena + off, want, vlen), "%s (%s: %.*s)", what, name,
       off >= 0 ? (int)vlen : 0, off >= 0 ? arena + off : "");
}

static void single_loop(void)
{
    nsv_server *s = nsv_server_new();
    is_int(nsv_set_int(s, NSV_OPT_HTTP2, NSV_H2_ALL), NSV_OK, "NSV_OPT_HTTP2 accepted");
    int port;
    http_listen(s, &port);
    nsv_route(s, "POST", 4, "/up", 3, 7, NSV_ROUTE_STREAM_BODY);
    nsv_set_int(s, NSV_OPT_MAX_BODY, 64 << 20);
    static h2client c;
    h2_open(&c, port, 65535);

    /* a GET: the usual REQUEST, flagged, answered by nsv_reply */
    nghttp2_nv ck[2] = {NV("cookie", "a=1"), NV("cookie", "b=2")};
    int32_t id1 = h2_req(&c, "GET", "/hello?x=1", ck, 2, NULL);
    nsv_event e[8];
    is_int(wait_requests(s, &c, e, 1), 1, "a GET stream is a REQUEST event");
    ok(e[0].flags & NSV_EVF_HTTP2, "it carries NSV_EVF_HTTP2");
    ok(!(e[0].flags & NSV_EVF_KEEPALIVE), "and never NSV_EVF_KEEPALIVE");
    is_mem(arena + e[0].path_off, e[0].path_len, "/hello", "path");
    is_mem(arena + e[0].query_off, e[0].query_len, "x=1", "query");
    header_is(&e[0], "host", "h2.test", ":authority becomes Host");
    header_is(&e[0], "cookie", "a=1; b=2", "cookie fields are joined");
    uint64_t conn1 = e[0].conn;
    is_int(nsv_reply(s, conn1, 201, "X-Test: yes\r\nConnection: keep-alive\r\n", 37, "hi there", 8), NSV_OK,
           "nsv_reply on the stream");
    ok(wait_closed(s, &c, id1), "the stream ends");
    stream *st = find(&c, id1);
    is_int(st->status, 201, ":status 201");
    is_mem(st->body, st->blen, "hi there", "body");
    is_int(st->code, 0, "closed without error");
    is_int(nsv_reply(s, conn1, 200, NULL, 0, "x", 1), NSV_ESTALE, "the id is stale once answered");

    /* two streams answered in reverse order; a body without content-length */
    int32_t a = h2_req(&c, "GET", "/a", NULL, 0, NULL);
    body_src = "a body in several frames";
    body_left = strlen(body_src);
    nghttp2_data_provider prd = {.read_callback = read_src};
    int32_t b = h2_req(&c, "POST", "/b", NULL, 0, &prd);
    is_int(wait_requests(s, &c, e, 2), 2, "two streams, two REQUEST events");
    int ia = got_plen[0] == 2 && got_path[0][1] == 'a' ? 0 : 1;
    nsv_event ea = e[ia], eb = e[1 - ia];
    is_mem(got_body[1 - ia], got_blen[1 - ia], "a body in several frames", "the POST body arrives whole");
    ok(eb.flags & NSV_EVF_CHUNKED, "a body without content-length is framed as chunked");
    ok(ea.conn != eb.conn, "each stream has its own id");
    nsv_reply(s, eb.conn, 200, NULL, 0, "second", 6);
    nsv_reply(s, ea.conn, 200, NULL, 0, "first", 5);
    ok(wait_closed(s, &c, a) && wait_closed(s, &c, b), "both streams end");
    is_mem(find(&c, a)->body, find(&c, a)->blen, "first", "stream a got its answer");
    is_mem(find(&c, b)->body, find(&c, b)->blen, "second", "stream b got its answer");

    /* a Host that names another authority is malformed (RFC 9113 8.3.1) */
    nghttp2_nv other[1] = {NV("host", "elsewhere.test")};
    int32_t bh = h2_req(&c, "GET", "/host", other, 1, NULL);
    int saw = 0;
    for (int round = 0; round < 300 && !find(&c, bh)->closed; round++) {
        int n = step(s, &c, 10);
        for (int i = 0; i < n; i++)
            saw |= evs[i].type == NSV_EV_REQUEST;
    }
    is_int(find(&c, bh)->status, 400, "Host differing from :authority: 400");
    ok(!saw, "and the host never sees it");
    nghttp2_nv same[1] = {NV("host", "H2.Test")};
    h2_req(&c, "GET", "/host2", same, 1, NULL);
    is_int(wait_requests(s, &c, e, 1), 1, "a Host equal to :authority (any case) is fine");
    nsv_reply(s, e[0].conn, 204, NULL, 0, NULL, 0);

    /* nsv_ws_upgrade: an HTTP/2 request is never an upgrade (HTTP/1.1 only) */
    h2_req(&c, "GET", "/ws", NULL, 0, NULL);
    is_int(wait_requests(s, &c, e, 1), 1, "ws: request");
    int wr = nsv_ws_upgrade(s, e[0].conn, NULL, 0);
    ok(wr < 0, "nsv_ws_upgrade on a stream fails (%s)", nsv_errname(wr));

    /* a streamed reply */
    int32_t sr = h2_req(&c, "GET", "/stream", NULL, 0, NULL);
    is_int(wait_requests(s, &c, e, 1), 1, "streamed: request");
    is_int(nsv_reply_start(s, e[0].conn, 200, "Content-Type: text/plain\r\n", 26), NSV_OK, "nsv_reply_start");
    nsv_send_chunk(s, e[0].conn, "one,", 4);
    step(s, &c, 5);
    nsv_send_chunk(s, e[0].conn, "two", 3);
    nsv_reply_end(s, e[0].conn);
    ok(wait_closed(s, &c, sr), "streamed: the stream ends");
    is_mem(find(&c, sr)->body, find(&c, sr)->blen, "one,two", "streamed: the chunks, unframed");

    /* the host closes a stream it will not answer: RST_STREAM */
    int32_t cl = h2_req(&c, "GET", "/close", NULL, 0, NULL);
    is_int(wait_requests(s, &c, e, 1), 1, "closed by host: request");
    is_int(nsv_close(s, e[0].conn), NSV_OK, "nsv_close on a stream");
    ok(wait_closed(s, &c, cl), "the client sees the stream end");
    ok(find(&c, cl)->code != 0, "with an error code (RST_STREAM)");

    /* the client resets a stream the host is working on: CLOSE */
    int32_t rs = h2_req(&c, "GET", "/reset", NULL, 0, NULL);
    is_int(wait_requests(s, &c, e, 1), 1, "reset by client: request");
    nghttp2_submit_rst_stream(c.ng, NGHTTP2_FLAG_NONE, rs, NGHTTP2_CANCEL);
    ok(wait_conn(s, NSV_EV_CLOSE, e[0].conn, 100, 10) || 1, "(polled)");
    int closed = 0;
    for (int round = 0; round < 100 && !closed; round++) {
        int k = step(s, &c, 10);
        for (int i = 0; i < k; i++)
            closed |= evs[i].type == NSV_EV_CLOSE && evs[i].conn == e[0].conn;
        if (nsv_reply(s, e[0].conn, 200, NULL, 0, "late", 4) == NSV_ESTALE)
            closed = 1;
    }
    ok(closed, "the host hears the stream is gone (CLOSE, then ESTALE)");

    /* a streamed reply paced by the client's window: TCP_WRITABLE 0, then 1 */
    static h2client w;
    h2_open(&w, port, 65535);
    w.consume = 0;
    int32_t big = h2_req(&w, "GET", "/big", NULL, 0, NULL);
    int k = 0;
    for (int round = 0; round < 300 && !k; round++) {
        int n = step(s, &w, 10);
        for (int i = 0; i < n; i++)
            if (evs[i].type == NSV_EV_REQUEST)
                e[0] = evs[i], k = 1;
    }
    ok(k, "paced: request");
    nsv_set_water_marks(s, e[0].conn, 64 * 1024, 16 * 1024);
    nsv_reply_start(s, e[0].conn, 200, NULL, 0);
    static char piece[16384];
    memset(piece, 'z', sizeof piece);
    int unwritable = 0, sent = 0;
    for (int round = 0; round < 400 && !unwritable; round++) {
        if (nsv_send_chunk(s, e[0].conn, piece, sizeof piece) == NSV_OK)
            sent++;
        int n = step(s, &w, 2);
        for (int i = 0; i < n; i++)
            unwritable |= evs[i].type == NSV_EV_TCP_WRITABLE && evs[i].conn == e[0].conn && evs[i].code == 0;
    }
    ok(unwritable, "a client that does not open its window: TCP_WRITABLE 0 (after %d pieces)", sent);
    int64_t q = nsv_conn_queued(s, e[0].conn);
    ok(q > 0 && q < 8 * 1024 * 1024, "the reply waits in the stream's output (%lld bytes)", (long long)q);
    ok(find(&w, big)->got <= 65535 + 16384, "the client got no more than its window (%llu)",
       (unsigned long long)find(&w, big)->got);
    w.consume = 1;
    nghttp2_session_consume(w.ng, big, (size_t)find(&w, big)->got);
    int writable = 0;
    for (int round = 0; round < 400 && !writable; round++) {
        int n = step(s, &w, 5);
        for (int i = 0; i < n; i++)
            writable |= evs[i].type == NSV_EV_TCP_WRITABLE && evs[i].conn == e[0].conn && evs[i].code == 1;
    }
    ok(writable, "the window opens: TCP_WRITABLE 1");
    nsv_reply_end(s, e[0].conn);
    ok(wait_closed(s, &w, big), "paced: the stream ends");
    is_int((long long)find(&w, big)->got, (long long)sent * 16384, "paced: every byte arrived");
    h2_close(&w);

    /* a streamed request body the host pauses: the window stays shut */
    {
        enum { TOTAL = 4 << 20 };
        static h2client u;
        h2_open(&u, port, 65535);
        big_left = TOTAL;
        nghttp2_nv clen[1] = {NV("content-length", "4194304")};
        nghttp2_data_provider bp = {.read_callback = read_big};
        int32_t up = h2_req(&u, "POST", "/up", clen, 1, &bp);
        uint64_t sid = 0, got = 0, at_pause = 0;
        int eof = 0, h2flag = 1, paused = 0, rounds = 0;
        for (; rounds < 2000 && !eof; rounds++) {
            int n = step(s, &u, 2);
            for (int i = 0; i < n; i++) {
                if (evs[i].type == NSV_EV_REQUEST && evs[i].route == 7)
                    sid = evs[i].conn, h2flag &= !!(evs[i].flags & NSV_EVF_STREAM_BODY);
                if (evs[i].type == NSV_EV_BODY && evs[i].conn == sid) {
                    got += evs[i].body_len;
                    h2flag &= !!(evs[i].flags & NSV_EVF_HTTP2);
                    eof |= !!(evs[i].flags & NSV_EVF_EOF);
                }
            }
            if (sid && !paused && got > 0) {
                is_int(nsv_pause_read(s, sid, 1), NSV_OK, "upload: nsv_pause_read on the stream");
                paused = 1;
            }
            if (paused == 1 && rounds > 200) { /* long enough for the client to fill every window */
                at_pause = got;
                ok(got < TOTAL - (1 << 20), "upload: paused, the body stops (%llu of %d bytes)",
                   (unsigned long long)got, TOTAL);
                nsv_pause_read(s, sid, 0);
                paused = 2;
            }
        }
        ok(at_pause > 0, "upload: the pause held");
        ok(eof, "upload: resumed, the body ends (NSV_EVF_EOF)");
        is_int((long long)got, TOTAL, "upload: every byte delivered");
        ok(h2flag, "upload: REQUEST streamed, BODY events carry NSV_EVF_HTTP2");
        nsv_reply(s, sid, 200, NULL, 0, "done", 4);
        ok(wait_closed(s, &u, up), "upload: answered");
        is_mem(find(&u, up)->body, find(&u, up)->blen, "done", "upload: the answer");
        h2_close(&u);
    }

    uint64_t m[NSV_M_COUNT];
    nsv_metrics(s, m, NSV_M_COUNT);
    is_int((long long)m[NSV_M_H2_CONNS], 3, "NSV_M_H2_CONNS counts the three sessions");
    is_int((long long)m[NSV_M_H2_STREAMS], 11, "NSV_M_H2_STREAMS counts the eleven streams");
    is_int((long long)m[NSV_M_CONNS_ACTIVE], 2, "NSV_M_CONNS_ACTIVE: the open sessions, not their streams");
    /* freed with streams in progress (ASan checks the teardown) */
    h2_req(&c, "GET", "/left", NULL, 0, NULL);
    h2_req(&c, "GET", "/open", NULL, 0, NULL);
    is_int(wait_requests(s, &c, e, 2), 2, "two streams left unanswered");
    nsv_server_free(s);
    h2_close(&c);
}

/* A header block that never ends does not hold the session open: it is
 * closed after the idle timeout like a silent one (slowloris over h2). */
static void slow_headers(void)
{
    nsv_server *s = nsv_server_new();
    nsv_set_int(s, NSV_OPT_HTTP2, NSV_H2_PRIOR);
    nsv_set_int(s, NSV_OPT_IDLE_TIMEOUT_MS, 300);
    int port;
    http_listen(s, &port);
    int fd = client(port);
    /* preface, empty SETTINGS, HEADERS on stream 1 without END_HEADERS
     * (one literal field ":method: GET", never indexed) */
    static const uint8_t hb[] = {0x10, 7, ':', 'm', 'e', 't', 'h', 'o', 'd', 3, 'G', 'E', 'T'};
    uint8_t w[128];
    size_t n = 0;
    memcpy(w, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
    n = 24;
    const uint8_t settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
    memcpy(w + n, settings, 9);
    n += 9;
    const uint8_t hh[9] = {0, 0, sizeof hb, 1, 0x01 /* END_STREAM only */, 0, 0, 0, 1};
    memcpy(w + n, hh, 9);
    n += 9;
    memcpy(w + n, hb, sizeof hb);
    n += sizeof hb;
    sendn(fd, w, n);
    int64_t t0 = nsv_millis();
    int closed = 0;
    char buf[4096];
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    while (!closed && nsv_millis() - t0 < 3000) {
        nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, 20);
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        closed = r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
    }
    int64_t took = nsv_millis() - t0;
    ok(closed, "an unfinished header block: the connection is closed (after %lld ms)", (long long)took);
    ok(took >= 250, "not before the idle timeout");
    close(fd);
    nsv_server_free(s);
}

/* Sharded, pull mode: workers own the sessions, this thread answers. */
static void sharded(void)
{
    nsv_server *s = nsv_server_new_sharded(2);
    nsv_set_int(s, NSV_OPT_HTTP2, NSV_H2_PRIOR);
    int port;
    http_listen(s, &port);
    static h2client c;
    h2_open(&c, port, 65535);
    enum { N = 40 };
    int32_t ids[N];
    char path[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(path[i], sizeof path[i], "/n/%d", i);
        ids[i] = h2_req(&c, "GET", path[i], NULL, 0, NULL);
    }
    int answered = 0;
    for (int round = 0; round < 500 && answered < N; round++) {
        int k = step(s, &c, 10);
        for (int i = 0; i < k; i++)
            if (evs[i].type == NSV_EV_REQUEST && (evs[i].flags & NSV_EVF_HTTP2)) {
                nsv_reply(s, evs[i].conn, 200, NULL, 0, arena + evs[i].path_off, evs[i].path_len);
                answered++;
            }
    }
    is_int(answered, N, "sharded: %d streams reached the polling thread", N);
    int good = 0;
    for (int round = 0; round < 300 && good < N; round++) {
        step(s, &c, 10);
        good = 0;
        for (int i = 0; i < N; i++) {
            stream *st = find(&c, ids[i]);
            good += st->closed && st->status == 200 && st->blen == strlen(path[i]) &&
                    !memcmp(st->body, path[i], st->blen);
        }
    }
    is_int(good, N, "sharded: every stream got its own answer");
    h2_close(&c);
    nsv_server_free(s);
}

int main(void)
{
    if (!nsv_http2_available()) {
        printf("1..0 # SKIP nsv_http2_available() is 0\n");
        return 0;
    }
    single_loop();
    slow_headers();
    sharded();
    return done_testing();
}
#endif
