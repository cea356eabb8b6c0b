/* session.c - one HTTP/2 session over a connection (nghttp2 server side):
 * its settings and defences, the protocol table of the connection once it
 * speaks h2, and the way in from HTTP/1 (ALPN, the preface, Upgrade: h2c).
 * Requests and responses are stream.c's. */
#include "h2.h"

#ifdef NSV_WITH_NGHTTP2
#include "../loop/io.h"
#include "../loop/metrics.h"
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

int nsv__h2_config(const nsv_server *s, void *ivp, void **optp)
{
    nghttp2_settings_entry *iv = ivp;
    nghttp2_option *o;
    if (nghttp2_option_new(&o) != 0)
        return NSV_ENOMEM;
    /* Window updates wait until the stream's HTTP layer consumed the bytes,
     * so a host that reads a body slowly holds the client back. */
    nghttp2_option_set_no_auto_window_update(o, 1);
    /* Rapid reset (CVE-2023-44487): frame_recv below holds clients to
     * h2_max_resets; this is nghttp2's backstop (it also counts streams it
     * resets itself). */
    nghttp2_option_set_stream_reset_rate_limit(o, 2 * (uint64_t)s->h2_max_resets, 2 * (uint64_t)s->h2_max_resets);
    nghttp2_option_set_max_continuations(o, NSV__H2_MAX_CONTINUATIONS);
    nghttp2_option_set_max_settings(o, NSV__H2_MAX_SETTINGS);
    nghttp2_option_set_max_outbound_ack(o, NSV__H2_MAX_OUTBOUND_ACK);
    nghttp2_option_set_max_deflate_dynamic_table_size(o, (size_t)s->h2_hpack_table);
    iv[0] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, (uint32_t)s->h2_max_streams};
    iv[1] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, (uint32_t)s->h2_window};
    iv[2] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, (uint32_t)s->h2_hpack_table};
    iv[3] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)s->max_header_bytes};
    *optp = o;
    return 4;
}

/* NSV_M_H2_ABUSE counts a session once: a flood feed saw, or a GOAWAY
 * nghttp2 sent by itself for one (INTERNAL_ERROR from its stream reset
 * rate limit, ENHANCE_YOUR_CALM for an oversized SETTINGS frame). */
static void abuse(nsv__h2 *h)
{
    if (!h->abused) {
        h->abused = 1;
        NSV__COUNT(h->l, NSV_M_H2_ABUSE);
    }
}

static int frame_sent(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    nsv__h2 *h = ud;
    if (f->hd.type == NGHTTP2_GOAWAY && (f->goaway.error_code == NGHTTP2_INTERNAL_ERROR ||
                                         f->goaway.error_code == NGHTTP2_ENHANCE_YOUR_CALM))
        abuse(h);
    return nsv__h2s_sent(ng, f, ud);
}

/* Rapid reset (CVE-2023-44487): RST_STREAM frames from the client draw
 * from a bucket of h2_max_resets refilled at that many per second; an empty
 * bucket ends the session with GOAWAY ENHANCE_YOUR_CALM. (nghttp2's own
 * limit, set at twice that, is the backstop; it answers INTERNAL_ERROR.) */
static int frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    nsv__h2 *h = ud;
    if (f->hd.type == NGHTTP2_RST_STREAM && !h->dead) {
        int64_t max = h->l->srv->h2_max_resets, now = h->l->now;
        if (!h->rst_at)
            h->rst_tokens = max, h->rst_at = now;
        h->rst_tokens += (now - h->rst_at) * max / 1000;
        if (h->rst_tokens > max)
            h->rst_tokens = max;
        h->rst_at = now;
        if (--h->rst_tokens < 0) {
            abuse(h);
            h->dead = 1;
            nghttp2_session_terminate_session(ng, NGHTTP2_ENHANCE_YOUR_CALM);
            return 0;
        }
    }
    return nsv__h2s_frame(ng, f, ud);
}

static nghttp2_session_callbacks *cbs;
static pthread_once_t cbs_once = PTHREAD_ONCE_INIT;

static void cbs_init(void)
{
    if (nghttp2_session_callbacks_new(&cbs) != 0)
        return;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, nsv__h2s_begin);
    nghttp2_session_callbacks_set_on_header_callback(cbs, nsv__h2s_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, nsv__h2s_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, nsv__h2s_closed);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, frame_sent);
}

void nsv__h2_wake(nsv__h2 *h)
{
    if (h->c && h->c->proto)
        nsv__conn_mark_dirty(h->l, h->c);
}

/* Pull frames into the connection's output while it has room. */
static void pump(nsv__loop *l, nsv__conn *c, nsv__h2 *h)
{
    while (c->out.len - c->out.off < NSV__H2_OUT_MAX) {
        const uint8_t *d;
        ssize_t n = nghttp2_session_mem_send(h->ng, &d);
        if (n <= 0) {
            if (n < 0) /* nghttp2 has no memory, or broke its own state */
                h->dead = 1;
            break;
        }
        if (nsv__buf_append(l, &c->out, d, (size_t)n) != 0) {
            h->dead = 1;
            break;
        }
    }
}

/* After input or output: send what is ready, and end the connection once
 * nghttp2 has nothing more to do with it (GOAWAY out, no stream left). */
static void settle(nsv__loop *l, nsv__conn *c, nsv__h2 *h)
{
    pump(l, c, h);
    if (h->dead || (!nghttp2_session_want_read(h->ng) && !nghttp2_session_want_write(h->ng))) {
        c->closing = 1;
        c->deadline = l->now + 1000; /* (the GOAWAY's last chance) */
    } else if (!c->writing) {
        /* An idle session ends after the idle timeout; one with requests
         * waits for them (each has its own deadlines). A header block
         * that never ends is not a request yet: it does not keep it. */
        if (h->nlive)
            c->deadline = 0;
        else if (!c->deadline)
            c->deadline = l->now + l->srv->idle_timeout_ms;
    }
}

/* Bytes from the peer into nghttp2. A fatal error (a flood, a protocol
 * violation) ends the session: its GOAWAY goes out, then the connection. */
static void feed(nsv__loop *l, nsv__conn *c, nsv__h2 *h, const char *p, size_t n)
{
    if (h->dead)
        return;
    ssize_t r = nghttp2_session_mem_recv(h->ng, (const uint8_t *)p, n);
    if (r < 0) {
        /* floods: queued acknowledgements, CONTINUATION frames, SETTINGS entries */
        int flood = r == NGHTTP2_ERR_FLOODED || r == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS ||
                    r == NGHTTP2_ERR_TOO_MANY_SETTINGS;
        if (flood)
            abuse(h);
        nghttp2_session_terminate_session(h->ng, flood ? NGHTTP2_ENHANCE_YOUR_CALM : NGHTTP2_PROTOCOL_ERROR);
        h->dead = 1;
        nsv__conn_set_events(l, c, 0, c->writing);
    }
    nsv__conn_mark_dirty(l, c);
}

static void on_readable(nsv__loop *l, nsv__conn *c)
{
    nsv__h2 *h = c->h2;
    ssize_t n = nsv__io_recv(l, c, l->scratch, NSV__SCRATCH);
    if (n > 0) {
        feed(l, c, h, l->scratch, (size_t)n);
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    nsv__conn_close(l, c); /* the peer left: every stream goes with it */
}

static int on_dirty(nsv__loop *l, nsv__conn *c)
{
    settle(l, c, c->h2);
    return 0;
}

static void on_flushed(nsv__loop *l, nsv__conn *c)
{
    nsv__h2 *h = c->h2;
    if (h->dead && c->closing && nsv__out_empty(c)) {
        /* the GOAWAY of a broken or abusive session is out: close now,
         * without the lingering read an HTTP/1.1 reply gets */
        nsv__conn_close(l, c);
        return;
    }
    if (nghttp2_session_want_write(h->ng) || c->closing)
        nsv__conn_mark_dirty(l, c);
}

static void on_timer(nsv__loop *l, nsv__conn *c)
{
    nsv__h2 *h = c->h2;
    if (c->writing) { /* the peer does not read: nothing polite can reach it */
        NSV__COUNT(l, NSV_M_TIMEOUT_OTHER);
        nsv__conn_close(l, c);
        return;
    }
    NSV__COUNT(l, NSV_M_TIMEOUT_IDLE);
    nghttp2_session_terminate_session(h->ng, NGHTTP2_NO_ERROR);
    h->dead = 1;
    nsv__conn_mark_dirty(l, c);
    c->deadline = l->now + 1000;
}

/* Draining: GOAWAY once; the streams in progress finish, then it closes. */
static void on_drain(nsv__loop *l, nsv__conn *c)
{
    nsv__h2 *h = c->h2;
    if (h->goaway || h->dead)
        return;
    h->goaway = 1;
    nghttp2_submit_goaway(h->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(h->ng),
                          NGHTTP2_NO_ERROR, NULL, 0);
    nsv__conn_mark_dirty(l, c);
}

static void on_close(nsv__loop *l, nsv__conn *c)
{
    nsv__h2 *h = c->h2;
    if (!h)
        return;
    h->closing = 1;
    while (h->streams) {
        nsv__h2s *s = h->streams;
        s->gone = 1;
        if (s->c)
            nsv__conn_close(l, s->c);
        nsv__h2s_free(h, s);
    }
    nghttp2_session_del(h->ng);
    nsv__free(&l->srv->alloc, h->names);
    nsv__free(&l->srv->alloc, h);
    c->h2 = NULL;
}

const nsv__proto nsv__proto_h2 = {
    .name = "an HTTP/2 connection",
    .flags = NSV__P_STREAM, /* reading stops while the peer does not read our frames */
    .on_readable = on_readable,
    .on_dirty = on_dirty,
    .on_flushed = on_flushed,
    .on_timer = on_timer,
    .on_drain = on_drain,
    .on_close = on_close,
};

/* base64url without padding (HTTP2-Settings, RFC 7540 3.2.1); -1 if bad. */
static ssize_t b64url(const char *s, size_t n, uint8_t *out, size_t cap)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        int v = ch >= 'A' && ch <= 'Z' ? ch - 'A' : ch >= 'a' && ch <= 'z' ? ch - 'a' + 26
              : ch >= '0' && ch <= '9' ? ch - '0' + 52 : ch == '-' ? 62 : ch == '_' ? 63 : -1;
        if (v < 0)
            return -1;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (k == cap)
                return -1;
            out[k++] = (uint8_t)(acc >> bits);
        }
    }
    return bits >= 6 ? -1 : (ssize_t)k;
}

/* nghttp2 allocates through the server's allocator (nsv_server_new_ex). */
static void *mem_malloc(size_t n, void *ud) { return nsv__malloc(ud, n); }
static void mem_free(void *p, void *ud) { nsv__free(ud, p); }
static void *mem_calloc(size_t k, size_t n, void *ud) { return n && k > SIZE_MAX / n ? NULL : nsv__calloc(ud, k * n); }
static void *mem_realloc(void *p, size_t n, void *ud) { return nsv__realloc(ud, p, n); }

static int start(nsv__loop *l, nsv__conn *c, const char *data, size_t len, const nsv__h2_upgrade *up)
{
    nsv_server *s = l->srv;
    uint8_t settings[6 * NSV__H2_MAX_SETTINGS];
    ssize_t slen = 0;
    if (up && (slen = b64url(up->settings, up->settings_len, settings, sizeof settings)) < 0)
        return 0; /* an HTTP2-Settings that is not one: the request stays HTTP/1.1 */
    pthread_once(&cbs_once, cbs_init);
    nsv__h2 *h = cbs ? nsv__calloc(&s->alloc, sizeof *h) : NULL;
    nghttp2_settings_entry iv[4];
    void *opt = NULL;
    int niv = h ? nsv__h2_config(s, iv, &opt) : NSV_ENOMEM;
    nghttp2_mem mem = {(void *)&s->alloc, mem_malloc, mem_free, mem_calloc, mem_realloc};
    if (niv < 0 || nghttp2_session_server_new3(&h->ng, cbs, h, opt, &mem) != 0) {
        if (opt)
            nghttp2_option_del(opt);
        nsv__free(&s->alloc, h);
        nsv__conn_close(l, c);
        return NSV_ENOMEM;
    }
    nghttp2_option_del(opt);
    h->l = l;
    h->c = c;
    /* (upgrade2 before anything is queued: stream 1 exists from the start) */
    if (up && nghttp2_session_upgrade2(h->ng, settings, (size_t)slen, up->head, NULL) != 0)
        h->dead = 1;
    nghttp2_submit_settings(h->ng, NGHTTP2_FLAG_NONE, iv, (size_t)niv);
    /* The connection's window as large as one stream's (it starts at 64 KiB). */
    nghttp2_session_set_local_window_size(h->ng, NGHTTP2_FLAG_NONE, 0, (int32_t)s->h2_window);
    c->h2 = h;
    c->proto = &nsv__proto_h2;
    c->state = NSV__C_NONE;
    c->watch_hup = 0;
    NSV__COUNT(l, NSV_M_H2_CONNS);
    if (up) {
        static const char sw[] = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n";
        if (nsv__buf_append(l, &c->out, sw, sizeof sw - 1) != 0 || h->dead ||
            nsv__h2s_upgraded(h, up->req, up->req_len) != 0)
            h->dead = 1;
    }
    /* The bytes already read (from the preface on) may sit in c->in: feed
     * them before that buffer goes. */
    if (len && !h->dead)
        feed(l, c, h, data, len);
    nsv__buf_release(l, &c->in);
    if (!c->reading)
        nsv__conn_set_events(l, c, 1, c->writing);
    c->deadline = l->now + s->idle_timeout_ms;
    nsv__conn_mark_dirty(l, c);
    return 1;
}

const nsv__h2_hooks nsv__h2_server_hooks = {
    .start = start,
    .send = nsv__h2s_send,
    .arm = nsv__h2s_arm,
    .closed = nsv__h2s_conn_closed,
};
#endif
