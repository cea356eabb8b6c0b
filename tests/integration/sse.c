/* sse.c - server-sent event streams end to end: nsv_sse_start's headers
 * and refusals, events and keepalive comments read back by a client that
 * parses the stream as the WHATWG HTML spec says a browser does, a large
 * burst paced by TCP_WRITABLE to a client that reads slowly (queued output
 * stays below the cap), and a sharded server fed from the polling thread. */
#include "tap.h"
#include <nanosrv.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static nsv_event evs[64];
static char arena[1 << 20];

static int client(int port, int rcvbuf)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void sends(int fd, const char *s) { ssize_t w = write(fd, s, strlen(s)); (void)w; }

static int wait_request(nsv_server *s, nsv_event *out)
{
    for (int t = 0; t < 200; t++) {
        int n = nsv_poll(s, evs, 64, arena, sizeof arena, 20);
        for (int i = 0; i < n; i++)
            if (evs[i].type == NSV_EV_REQUEST) {
                *out = evs[i];
                return 1;
            }
    }
    return 0;
}

/* ---- a growing byte buffer ---- */
typedef struct {
    char *p;
    size_t n, cap;
} bytes;

static void put(bytes *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

/* ---- the response: head, then the de-chunked body ---- */

/* Splits raw into head (up to the empty line) and de-chunked body; 1 when
 * the terminating chunk was seen. */
static int dechunk(const bytes *raw, bytes *head, bytes *body)
{
    const char *e = raw->p ? strstr(raw->p, "\r\n\r\n") : NULL;
    if (!e)
        return 0;
    head->n = 0;
    body->n = 0;
    put(head, raw->p, (size_t)(e - raw->p) + 4);
    size_t i = (size_t)(e - raw->p) + 4;
    for (;;) {
        char *end;
        if (i >= raw->n)
            return 0;
        unsigned long sz = strtoul(raw->p + i, &end, 16);
        const char *crlf = memmem(raw->p + i, raw->n - i < 32 ? raw->n - i : 32, "\r\n", 2);
        if (!crlf || end == raw->p + i)
            return 0;
        i = (size_t)(crlf - raw->p) + 2;
        if (sz == 0)
            return 1;
        if (i + sz + 2 > raw->n)
            return 0;
        put(body, raw->p + i, sz);
        i += sz + 2;
    }
}

/* The last chunk is there (checked before dechunk, which reads it all). */
static int ends_stream(const bytes *raw)
{
    return raw->n >= 5 && memcmp(raw->p + raw->n - 5, "0\r\n\r\n", 5) == 0;
}

/* ---- a client-side parser following WHATWG HTML 9.2.6 ---- */
typedef struct {
    char type[64];
    char *data;
    size_t dlen;
    char last_id[64];
} sse_event;

typedef struct {
    sse_event ev[16384];
    int n;
    long long retry;  /* -1: never set */
    int comments;
    bytes data, type; /* buffers */
    char last_id[64];
} sse_client;

static void dispatch(sse_client *c)
{
    /* 1: the last event id string takes the buffer's value (done as we go). */
    if (c->data.n == 0) { /* 2: empty data buffer: reset, no event */
        c->type.n = 0;
        return;
    }
    if (c->data.p[c->data.n - 1] == '\n')
        c->data.n--;
    if (c->n < (int)(sizeof c->ev / sizeof c->ev[0])) {
        sse_event *e = &c->ev[c->n++];
        snprintf(e->type, sizeof e->type, "%.*s", c->type.n ? (int)c->type.n : 7, c->type.n ? c->type.p : "message");
        e->data = malloc(c->data.n + 1);
        memcpy(e->data, c->data.p, c->data.n);
        e->data[c->data.n] = 0;
        e->dlen = c->data.n;
        snprintf(e->last_id, sizeof e->last_id, "%s", c->last_id);
    }
    c->data.n = 0;
    c->type.n = 0;
}

static void field(sse_client *c, const char *line, size_t len)
{
    if (len == 0) {
        dispatch(c);
        return;
    }
    if (line[0] == ':') {
        c->comments++;
        return;
    }
    const char *colon = memchr(line, ':', len);
    size_t nl = colon ? (size_t)(colon - line) : len;
    const char *v = colon ? colon + 1 : line + len;
    size_t vl = colon ? len - nl - 1 : 0;
    if (vl && *v == ' ')
        v++, vl--;
    if (nl == 5 && !memcmp(line, "event", 5)) {
        c->type.n = 0;
        put(&c->type, v, vl);
    } else if (nl == 4 && !memcmp(line, "data", 4)) {
        put(&c->data, v, vl);
        put(&c->data, "\n", 1);
    } else if (nl == 2 && !memcmp(line, "id", 2)) {
        if (!memchr(v, 0, vl))
            snprintf(c->last_id, sizeof c->last_id, "%.*s", (int)vl, v);
    } else if (nl == 5 && !memcmp(line, "retry", 5)) {
        int digits = vl > 0;
        for (size_t i = 0; i < vl; i++)
            digits &= v[i] >= '0' && v[i] <= '9';
        if (digits)
            c->retry = strtoll(v, NULL, 10);
    }
}

/* Feeds a whole stream (lines end in CRLF, LF or CR); a last line without
 * its end is dropped, as at the end of a stream. */
static void parse_stream(sse_client *c, const char *s, size_t n)
{
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\n' || s[i] == '\r') {
            field(c, s + start, i - start);
            if (s[i] == '\r' && i + 1 < n && s[i + 1] == '\n')
                i++;
            start = i + 1;
        }
    }
}

static sse_client *client_new(void)
{
    sse_client *c = calloc(1, sizeof *c);
    c->retry = -1;
    return c;
}

static void client_free(sse_client *c)
{
    for (int i = 0; i < c->n; i++)
        free(c->ev[i].data);
    free(c->data.p);
    free(c->type.p);
    free(c);
}

/* Reads what is there (nonblocking-ish: poll 0..ms) into raw; -1 on EOF. */
static int read_some(int fd, bytes *raw, size_t max, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, ms) <= 0)
        return 0;
    char buf[65536];
    if (max > sizeof buf)
        max = sizeof buf;
    ssize_t r = read(fd, buf, max);
    if (r <= 0)
        return -1;
    put(raw, buf, (size_t)r);
    return (int)r;
}

static int header_count(const bytes *head, const char *line)
{
    int k = 0;
    for (const char *p = head->p; (p = strcasestr(p, line)); p++)
        k++;
    return k;
}

static nsv_server *server(int *port)
{
    nsv_server *s = nsv_server_new();
    int lid = nsv_listen(s, "http://127.0.0.1:0", 18);
    *port = nsv_listener_port(s, lid);
    return s;
}

static const char GET[] = "GET /events HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n";

static void test_events(void)
{
    int port;
    nsv_server *s = server(&port);
    nsv_event ev;
    int fd = client(port, 0);
    sends(fd, GET);
    ok(wait_request(s, &ev), "request arrives");
    is_int(nsv_sse_start(s, ev.conn, "Content-Type: text/plain\r\n", 26), NSV_EINVAL,
           "a Content-Type other than text/event-stream is refused");
    ok(strstr(nsv_last_error_detail(s), "not text/event-stream") != NULL, "the detail says why");
    is_int(nsv_sse_start(s, ev.conn, "Content-Length: 10\r\n", 20), NSV_EINVAL, "a Content-Length is refused");
    is_int(nsv_sse_start(s, ev.conn, "X-A: b", 6), NSV_EINVAL, "a block without its CRLF is refused");
    is_int(nsv_sse_start(s, ev.conn, "Bad header\r\n", 12), NSV_EINVAL, "a bad header line (nsv_reply_start's rules)");
    static const char H[] = "content-type: Text/Event-Stream; charset=utf-8\r\nCache-Control: no-store\r\n";
    is_int(nsv_sse_start(s, ev.conn, H, sizeof H - 1), NSV_OK, "the stream starts (the host's headers)");
    is_int(nsv_sse_start(s, ev.conn, NULL, 0), NSV_ESTATE, "a second start is NSV_ESTATE");

    char kb[64];
    int64_t kn = nsv_sse_comment("keepalive", 9, kb, sizeof kb);
    is_int(nsv_sse_send(s, ev.conn, NULL, 0, NULL, 0, NULL, 0, 2500), NSV_OK, "retry only");
    is_int(nsv_sse_send(s, ev.conn, NULL, 0, "1", 1, "hello", 5, -1), NSV_OK, "a message with an id");
    is_int(nsv_send_chunk(s, ev.conn, kb, (size_t)kn), NSV_OK, "a keepalive comment");
    is_int(nsv_sse_send(s, ev.conn, "update", 6, "2", 1, "line1\nline2\r\nline3\rline4", 24, -1), NSV_OK,
           "a named event with multi-line data");
    is_int(nsv_sse_send(s, ev.conn, "ping", 4, NULL, 0, NULL, 0, -1), NSV_OK, "a named event without data");
    is_int(nsv_sse_send(s, ev.conn, NULL, 0, "3", 1, NULL, 0, -1), NSV_OK, "an id alone (no event)");
    is_int(nsv_sse_send(s, ev.conn, NULL, 0, NULL, 0, "", 0, -1), NSV_OK, "empty data");
    is_int(nsv_sse_send(s, ev.conn, "x", 1, "4\r\ndata: injected", 17, "d", 1, -1), NSV_EINVAL,
           "an id with CRLF is refused");
    ok(strstr(nsv_last_error_detail(s), "nsv_sse_send: id byte 1 is CR") != NULL, "detail on the server");
    /* an event larger than the stack buffer */
    size_t bl = 20000;
    char *big = malloc(bl);
    for (size_t i = 0; i < bl; i++)
        big[i] = (i % 1000 == 999) ? '\n' : (char)('a' + i % 26);
    is_int(nsv_sse_send(s, ev.conn, "big", 3, "5", 1, big, bl, -1), NSV_OK, "a 20 KB event");
    is_int(nsv_send_chunk(s, ev.conn, kb, (size_t)kn), NSV_OK, "another keepalive");
    is_int(nsv_reply_end(s, ev.conn), NSV_OK, "the stream ends");

    bytes raw = {0}, head = {0}, body = {0};
    int done = 0;
    for (int i = 0; i < 400 && !done; i++) {
        nsv_poll(s, evs, 64, arena, sizeof arena, 5);
        if (read_some(fd, &raw, 65536, 5) < 0)
            break;
        done = dechunk(&raw, &head, &body);
    }
    ok(done, "the whole stream arrived (terminating chunk)");
    ok(head.p && strncmp(head.p, "HTTP/1.1 200", 12) == 0, "status 200");
    ok(head.p && header_count(&head, "content-type:") == 1 && strstr(head.p, "Text/Event-Stream; charset=utf-8"),
       "the host's Content-Type only");
    ok(head.p && header_count(&head, "cache-control:") == 1 && strstr(head.p, "no-store"),
       "the host's Cache-Control only");
    ok(head.p && strstr(head.p, "X-Accel-Buffering: no\r\n"), "X-Accel-Buffering added");
    ok(head.p && strstr(head.p, "Transfer-Encoding: chunked\r\n"), "chunked");

    sse_client *c = client_new();
    if (body.p)
        parse_stream(c, body.p, body.n);
    is_int(c->n, 5, "five events dispatched (id-only and retry-only blocks are not)");
    is_int(c->retry, 2500, "retry applied");
    is_int(c->comments, 2, "two comments seen");
    if (c->n == 5) {
        ok(!strcmp(c->ev[0].type, "message") && !strcmp(c->ev[0].data, "hello") && !strcmp(c->ev[0].last_id, "1"),
           "message 'hello', last id 1");
        ok(!strcmp(c->ev[1].type, "update") && !strcmp(c->ev[1].data, "line1\nline2\nline3\nline4") &&
               !strcmp(c->ev[1].last_id, "2"),
           "update: lines joined with LF, last id 2");
        ok(!strcmp(c->ev[2].type, "ping") && c->ev[2].dlen == 0 && !strcmp(c->ev[2].last_id, "2"),
           "ping dispatched with empty data");
        ok(!strcmp(c->ev[3].type, "message") && c->ev[3].dlen == 0 && !strcmp(c->ev[3].last_id, "3"),
           "empty data dispatched; the lone id changed the last id");
        ok(!strcmp(c->ev[4].type, "big") && c->ev[4].dlen == bl && !memcmp(c->ev[4].data, big, bl) &&
               !strcmp(c->ev[4].last_id, "5"),
           "the 20 KB event comes back byte for byte");
    }
    client_free(c);
    free(big);
    free(raw.p);
    free(head.p);
    free(body.p);
    close(fd);

    /* defaults, and nsv_sse_start on a request that is gone */
    fd = client(port, 0);
    sends(fd, GET);
    ok(wait_request(s, &ev), "second request");
    is_int(nsv_sse_start(s, ev.conn, NULL, 0), NSV_OK, "start without headers");
    is_int(nsv_reply_end(s, ev.conn), NSV_OK, "end at once");
    bytes r2 = {0}, h2 = {0}, b2 = {0};
    done = 0;
    for (int i = 0; i < 400 && !done; i++) {
        nsv_poll(s, evs, 64, arena, sizeof arena, 5);
        if (read_some(fd, &r2, 65536, 5) < 0)
            break;
        done = dechunk(&r2, &h2, &b2);
    }
    ok(done && strstr(h2.p, "Content-Type: text/event-stream\r\n") && strstr(h2.p, "Cache-Control: no-cache\r\n") &&
           strstr(h2.p, "X-Accel-Buffering: no\r\n"),
       "default headers added");
    free(r2.p);
    free(h2.p);
    free(b2.p);
    close(fd);
    is_int(nsv_sse_send(s, ev.conn, NULL, 0, NULL, 0, "x", 1, -1), NSV_ESTATE, "a send after the end: NSV_ESTATE");
    is_int(nsv_sse_start(NULL, 1, NULL, 0), NSV_EINVAL, "NULL server");
    nsv_server_free(s);
}

/* A burst far larger than max_output to a client with a small receive
 * buffer that reads 4 KiB per turn: the host sends while not paused by
 * TCP_WRITABLE code 0, resumes on code 1; queued output stays bounded. */
static void test_paced_burst(void)
{
    int port;
    nsv_server *s = server(&port);
    nsv_set_int(s, NSV_OPT_MAX_OUTPUT, 256 * 1024);
    nsv_event ev;
    int fd = client(port, 16384);
    sends(fd, GET);
    ok(wait_request(s, &ev), "burst: request arrives");
    is_int(nsv_sse_start(s, ev.conn, NULL, 0), NSV_OK, "burst: stream starts");
    enum { N = 12000 }; /* 12 MB: more than the kernel's socket buffers hold */
    char data[1000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (char)('A' + i % 26);
    int sent = 0, paused = 0, pauses = 0, resumes = 0, eagain = 0, ended = 0, done = 0;
    int64_t max_queued = 0;
    bytes raw = {0}, head = {0}, body = {0};
    int64_t t0 = nsv_millis();
    while (!done && nsv_millis() - t0 < 60000) {
        for (int k = 0; k < 16 && !paused && sent < N; k++) {
            char id[16];
            int il = snprintf(id, sizeof id, "%d", sent);
            int r = nsv_sse_send(s, ev.conn, "n", 1, id, (size_t)il, data, sizeof data, -1);
            if (r == NSV_EAGAIN) {
                eagain++;
                break;
            }
            if (r != NSV_OK) {
                diag("send %d: %s", sent, nsv_last_error_detail(s));
                break;
            }
            sent++;
        }
        if (sent == N && !ended) {
            ended = nsv_reply_end(s, ev.conn) == NSV_OK ? 1 : -1;
        }
        int64_t q = nsv_conn_queued(s, ev.conn);
        if (q > max_queued)
            max_queued = q;
        int n = nsv_poll(s, evs, 64, arena, sizeof arena, 0);
        for (int i = 0; i < n; i++)
            if (evs[i].type == NSV_EV_TCP_WRITABLE && evs[i].conn == ev.conn) {
                if (evs[i].code == 0)
                    paused = 1, pauses++;
                else
                    paused = 0, resumes++;
            }
        /* the client starts reading once the host was told to wait */
        if ((pauses || nsv_millis() - t0 > 3000) && read_some(fd, &raw, 4096, 1) < 0)
            break;
        if (ended && ends_stream(&raw))
            done = dechunk(&raw, &head, &body);
    }
    ok(done, "burst: the whole stream arrived (%zu bytes)", raw.n);
    is_int(ended, 1, "burst: nsv_reply_end accepted");
    ok(pauses > 0 && resumes > 0, "burst: paced by TCP_WRITABLE (%d pauses, %d resumes)", pauses, resumes);
    is_int(eagain, 0, "burst: a paced host never meets NSV_EAGAIN");
    ok(max_queued < 256 * 1024, "burst: queued output stayed below max_output (peak %lld)", (long long)max_queued);
    sse_client *c = client_new();
    if (body.p)
        parse_stream(c, body.p, body.n);
    int in_order = c->n == N;
    for (int i = 0; in_order && i < N; i++) {
        char id[16];
        snprintf(id, sizeof id, "%d", i);
        in_order = !strcmp(c->ev[i].type, "n") && !strcmp(c->ev[i].last_id, id) && c->ev[i].dlen == sizeof data &&
                   !memcmp(c->ev[i].data, data, sizeof data);
    }
    ok(in_order, "burst: %d events parsed, in order and intact", c->n);
    client_free(c);
    free(raw.p);
    free(head.p);
    free(body.p);
    close(fd);
    nsv_server_free(s);
}

/* Sharded: the host polls from its own thread (not a worker) and sends
 * from there; the NSV_EAGAIN rule of the owning worker does not apply, so
 * it paces by TCP_WRITABLE events alone. */
static void test_sharded(void)
{
    nsv_server *s = nsv_server_new_sharded(2);
    int lid = nsv_listen(s, "http://127.0.0.1:0", 18);
    int port = nsv_listener_port(s, lid);
    nsv_event ev;
    int fd = client(port, 16384);
    sends(fd, GET);
    ok(wait_request(s, &ev), "sharded: request arrives");
    is_int(nsv_sse_start(s, ev.conn, NULL, 0), NSV_OK, "sharded: stream starts from the polling thread");
    enum { N = 10000 };
    char data[1024];
    memset(data, 'z', sizeof data);
    data[100] = '\n';
    int sent = 0, paused = 0, pauses = 0, ended = 0, done = 0, fail = 0;
    bytes raw = {0}, head = {0}, body = {0};
    int64_t t0 = nsv_millis();
    while (!done && !fail && nsv_millis() - t0 < 60000) {
        for (int k = 0; k < 32 && !paused && sent < N; k++) {
            char id[16];
            int il = snprintf(id, sizeof id, "%d", sent);
            if (nsv_sse_send(s, ev.conn, NULL, 0, id, (size_t)il, data, sizeof data, -1) != NSV_OK) {
                diag("send %d: %s", sent, nsv_last_error_detail(s));
                fail = 1;
                break;
            }
            sent++;
        }
        if (sent == N && !ended)
            ended = nsv_reply_end(s, ev.conn) == NSV_OK ? 1 : -1;
        int n = nsv_poll(s, evs, 64, arena, sizeof arena, 0);
        for (int i = 0; i < n; i++) {
            if (evs[i].type == NSV_EV_TCP_WRITABLE && evs[i].conn == ev.conn) {
                if (evs[i].code == 0)
                    paused = 1, pauses++;
                else
                    paused = 0;
            }
            if (evs[i].type == NSV_EV_ERROR)
                fail = 1, diag("error event %d", evs[i].code);
        }
        if ((pauses || nsv_millis() - t0 > 3000) && read_some(fd, &raw, 8192, 1) < 0)
            break;
        if (ended && ends_stream(&raw))
            done = dechunk(&raw, &head, &body);
    }
    ok(!fail && done, "sharded: the stream arrived whole");
    ok(pauses > 0, "sharded: paced by TCP_WRITABLE events (%d pauses)", pauses);
    sse_client *c = client_new();
    if (body.p)
        parse_stream(c, body.p, body.n);
    int good = c->n == N;
    for (int i = 0; good && i < N; i++) {
        char id[16];
        snprintf(id, sizeof id, "%d", i);
        good = !strcmp(c->ev[i].last_id, id) && c->ev[i].dlen == sizeof data && !memcmp(c->ev[i].data, data, sizeof data);
    }
    ok(good, "sharded: %d events parsed in order", c->n);
    client_free(c);
    free(raw.p);
    free(head.p);
    free(body.p);
    close(fd);
    nsv_server_free(s);
}

/* curl -N as the client: each event reaches it while the stream is open. */
static void test_curl(void)
{
    if (system("curl --version >/dev/null 2>&1") != 0) {
        printf("ok %d # skip curl not installed\n", ++tap_n);
        return;
    }
    int port;
    nsv_server *s = server(&port);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/events", port);
    int p[2];
    if (pipe(p) != 0)
        return;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        execlp("curl", "curl", "-sN", "--max-time", "20", "-H", "Accept: text/event-stream", url, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    nsv_event ev;
    ok(wait_request(s, &ev), "curl: request arrives");
    is_int(nsv_sse_start(s, ev.conn, NULL, 0), NSV_OK, "curl: stream starts");
    bytes out = {0};
    int seen[3] = {0};
    const char *want[3] = {"data: one\n\n", "event: two\ndata: 2a\ndata: 2b\n\n", ": bye\n\n"};
    for (int k = 0; k < 3; k++) {
        if (k < 2)
            nsv_sse_send(s, ev.conn, k ? "two" : NULL, k ? 3 : 0, NULL, 0, k ? "2a\r\n2b" : "one", k ? 6 : 3, -1);
        else {
            char cb[16];
            int64_t n = nsv_sse_comment("bye", 3, cb, sizeof cb);
            nsv_send_chunk(s, ev.conn, cb, (size_t)n);
        }
        for (int i = 0; i < 500 && !seen[k]; i++) {
            nsv_poll(s, evs, 64, arena, sizeof arena, 2);
            if (read_some(p[0], &out, 65536, 2) < 0)
                break;
            seen[k] = out.p && strstr(out.p, want[k]) != NULL;
        }
        ok(seen[k], "curl: event %d printed while the stream is open", k + 1);
    }
    nsv_reply_end(s, ev.conn);
    int st = -1;
    for (int i = 0; i < 1000; i++) {
        nsv_poll(s, evs, 64, arena, sizeof arena, 2);
        read_some(p[0], &out, 65536, 0);
        if (waitpid(pid, &st, WNOHANG) == pid)
            break;
    }
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "curl: exits 0 after nsv_reply_end");
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    is_mem(out.p ? out.p : "", out.n, "data: one\n\nevent: two\ndata: 2a\ndata: 2b\n\n: bye\n\n", "curl: the whole stream");
    free(out.p);
    close(p[0]);
    nsv_server_free(s);
}

int main(void)
{
    test_events();
    test_curl();
    test_paced_burst();
    test_sharded();
    return done_testing();
}
