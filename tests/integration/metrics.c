/* metrics.c - nsv_metrics and its Prometheus text: answers counted by
 * status class (host replies, streamed replies, HEAD, answers made in C,
 * a WebSocket's 101), parser refusals by kind from raw sockets, timeouts by
 * kind, WebSocket messages, TLS handshakes (curl) and failures, one latency
 * observation per answer in each histogram with cumulative buckets, names
 * and bounds, the exposition's line format checked strictly, and a sharded
 * server read from a third thread while two others poll and send (TSan). */
#include "tap.h"
#include "nsvnet.h"
#include <nanosrv.h>
#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t m[NSV_M_COUNT];

static void read_metrics(nsv_server *s)
{
    memset(m, 0, sizeof m);
    int n = nsv_metrics(s, m, NSV_M_COUNT);
    if (n != NSV_M_COUNT)
        diag("nsv_metrics returned %d", n);
}

/* Answer by path: /s/NNN replies NNN, /stream streams, anything else 200. */
static void answer(nsv_server *s, const nsv_event *ev, const char *a)
{
    const char *path = a + ev->path_off;
    if (ev->path_len == 7 && !memcmp(path, "/stream", 7)) {
        nsv_reply_start(s, ev->conn, 200, NULL, 0);
        nsv_send_chunk(s, ev->conn, "abc", 3);
        nsv_reply_end(s, ev->conn);
    } else if (ev->path_len == 6 && !memcmp(path, "/s/", 3)) {
        nsv_reply(s, ev->conn, atoi(path + 3), NULL, 0, "x", 1);
    } else {
        nsv_reply(s, ev->conn, 200, NULL, 0, "ok", 2);
    }
}

static void serve_step(void *ctx, int ms)
{
    nsv_server *s = ctx;
    int n = nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, ms);
    for (int i = 0; i < n; i++)
        if (evs[i].type == NSV_EV_REQUEST)
            answer(s, &evs[i], arena);
}

/* One request on a fresh connection, served while reading until `stop`. */
static int exchange(nsv_server *s, int port, const char *req, const char *stop, char *buf, size_t cap)
{
    int fd = client(port);
    sendall(fd, req);
    int n = read_stepping(fd, buf, cap, 100, 10, stop, serve_step, s);
    close(fd);
    return n;
}

static int starts(const char *buf, const char *p) { return strncmp(buf, p, strlen(p)) == 0; }

/* ---- a strict check of the text format 0.0.4 ---- */

static int name_ok(const char *p, size_t n, const char *prefix)
{
    if (n <= strlen(prefix) || strncmp(p, prefix, strlen(prefix)))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)p[i]) || p[i] == '_' || p[i] == ':') || (i == 0 && isdigit((unsigned char)p[i])))
            return 0;
    return 1;
}

static int ends(const char *p, size_t n, const char *sfx)
{
    size_t k = strlen(sfx);
    return n >= k && !memcmp(p + n - k, sfx, k);
}

typedef struct prom_check {
    int lines, families, samples;
    int histograms_ok; /* histograms whose buckets were cumulative and ended at _count */
    const char *why;
    int bad_line;
} prom_check;

static void prom_parse(const char *t, size_t len, const char *prefix, prom_check *pc)
{
    memset(pc, 0, sizeof *pc);
    char fam[256] = "", type[512] = "";
    double last_bucket = -1, inf_value = -1, prev_le = -1;
    int in_buckets = 0, saw_inf = 0;
#define BAD(msg) do { pc->why = msg; pc->bad_line = pc->lines; return; } while (0)
    if (len == 0 || t[len - 1] != '\n')
        BAD("does not end with a newline");
    for (size_t at = 0; at < len;) {
        const char *line = t + at, *nl = memchr(line, '\n', len - at);
        size_t n = (size_t)(nl - line);
        at += n + 1;
        pc->lines++;
        char l[1024];
        if (n >= sizeof l)
            BAD("line too long");
        memcpy(l, line, n);
        l[n] = 0;
        if (l[0] == '#') {
            char kw[8], nm[256], rest[512];
            if (sscanf(l, "# %7s %255s %511[^\n]", kw, nm, rest) != 3)
                BAD("comment is not '# HELP|TYPE name ...'");
            if (!name_ok(nm, strlen(nm), prefix))
                BAD("comment names a metric without the prefix");
            if (!strcmp(kw, "TYPE")) {
                if (strcmp(nm, fam))
                    BAD("TYPE for another name than its HELP");
                if (strcmp(rest, "counter") && strcmp(rest, "gauge") && strcmp(rest, "histogram"))
                    BAD("unknown TYPE");
                if (!strcmp(rest, "counter") && !ends(nm, strlen(nm), "_total"))
                    BAD("counter without _total");
                snprintf(type, sizeof type, "%s", rest);
                pc->families++;
            } else if (!strcmp(kw, "HELP")) {
                snprintf(fam, sizeof fam, "%s", nm);
                type[0] = 0;
                in_buckets = 0, saw_inf = 0, prev_le = -1, last_bucket = -1;
            } else {
                BAD("comment other than HELP or TYPE");
            }
            continue;
        }
        /* name{labels} value */
        size_t k = 0;
        while (k < n && l[k] != '{' && l[k] != ' ')
            k++;
        if (!name_ok(l, k, prefix))
            BAD("sample name");
        if (!type[0])
            BAD("sample before its TYPE");
        char nm[256];
        snprintf(nm, sizeof nm, "%.*s", (int)k, l);
        char le[64] = "";
        if (l[k] == '{') {
            k++;
            for (;;) {
                size_t ks = k;
                while (k < n && (isalnum((unsigned char)l[k]) || l[k] == '_'))
                    k++;
                if (k == ks || l[k] != '=' || l[k + 1] != '"')
                    BAD("label is not name=\"value\"");
                int is_le = k - ks == 2 && !strncmp(l + ks, "le", 2);
                k += 2;
                size_t vs = k;
                while (k < n && l[k] != '"' && l[k] != '\\' && l[k] != '\n')
                    k++;
                if (l[k] != '"')
                    BAD("label value not closed");
                if (is_le)
                    snprintf(le, sizeof le, "%.*s", (int)(k - vs), l + vs);
                k++;
                if (l[k] == ',') {
                    k++;
                    continue;
                }
                if (l[k] != '}')
                    BAD("labels not closed");
                k++;
                break;
            }
        }
        if (l[k] != ' ')
            BAD("no space before the value");
        char *end;
        double v = strtod(l + k + 1, &end);
        if (end == l + k + 1 || *end)
            BAD("value is not a number");
        pc->samples++;
        if (!strcmp(type, "histogram")) {
            char want[300];
            snprintf(want, sizeof want, "%s_bucket", fam);
            if (!strcmp(nm, want)) {
                if (!le[0])
                    BAD("bucket without le");
                double b = !strcmp(le, "+Inf") ? 1e300 : strtod(le, NULL);
                if (!in_buckets)
                    prev_le = -1, last_bucket = -1;
                in_buckets = 1;
                if (b <= prev_le || v < last_bucket)
                    BAD("buckets not increasing or not cumulative");
                prev_le = b, last_bucket = v;
                if (b == 1e300)
                    saw_inf = 1, inf_value = v;
                continue;
            }
            in_buckets = 0;
            snprintf(want, sizeof want, "%s_sum", fam);
            if (!strcmp(nm, want))
                continue;
            snprintf(want, sizeof want, "%s_count", fam);
            if (strcmp(nm, want))
                BAD("histogram sample of another name");
            if (!saw_inf || v != inf_value)
                BAD("_count differs from the +Inf bucket");
            saw_inf = 0;
            pc->histograms_ok++;
        } else if (strcmp(nm, fam)) {
            BAD("sample name differs from its family");
        }
    }
#undef BAD
}

/* ---- single loop ---- */

static void test_single(void)
{
    nsv_server *s = nsv_server_new();
    nsv_set_int(s, NSV_OPT_MAX_URI, 64);
    nsv_set_int(s, NSV_OPT_MAX_HEADER_BYTES, 512);
    nsv_set_int(s, NSV_OPT_MAX_BODY, 100);
    int port;
    http_listen(s, &port);
    char buf[8192];

    read_metrics(s);
    is_int(m[NSV_M_REQUESTS], 0, "a new server has answered nothing");
    is_int(nsv_metrics(s, NULL, 0), NSV_M_COUNT, "nsv_metrics says how many values it has");

    /* Host answers on one keep-alive connection: 200, 302, 404, 500, a
     * streamed 200 and a HEAD. */
    int fd = client(port);
    static const char *const reqs[][2] = {
        {"GET /a HTTP/1.1\r\nHost: t\r\n\r\n", "\r\n\r\nok"},
        {"GET /s/302 HTTP/1.1\r\nHost: t\r\n\r\n", "\r\n\r\nx"},
        {"GET /s/404 HTTP/1.1\r\nHost: t\r\n\r\n", "\r\n\r\nx"},
        {"GET /s/500 HTTP/1.1\r\nHost: t\r\n\r\n", "\r\n\r\nx"},
        {"GET /stream HTTP/1.1\r\nHost: t\r\n\r\n", "0\r\n\r\n"},
        {"HEAD /a HTTP/1.1\r\nHost: t\r\n\r\n", "\r\n\r\n"},
    };
    for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
        sendall(fd, reqs[i][0]);
        read_stepping(fd, buf, sizeof buf, 100, 10, reqs[i][1], serve_step, s);
        ok(starts(buf, "HTTP/1.1 "), "host answer %zu arrives", i);
    }
    close(fd);

    /* Refusals made in C, each on its own connection. */
    static const struct {
        const char *req, *status;
    } bad[] = {
        {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "HTTP/1.1 400"},
        {"GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa HTTP/1.1\r\nHost: t\r\n\r\n",
         "HTTP/1.1 414"},
        {"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n", "HTTP/1.1 413"},
        {"GET / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n", "HTTP/1.1 501"},
        {"GET / HTTP/1.7\r\nHost: t\r\n\r\n", "HTTP/1.1 505"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        exchange(s, port, bad[i].req, "\r\n\r\n", buf, sizeof buf);
        ok(starts(buf, bad[i].status), "refusal %s", bad[i].status);
    }
    /* A head past max_header_bytes: 431. */
    char big[1200];
    snprintf(big, sizeof big, "GET / HTTP/1.1\r\nHost: t\r\nX-Big: %0900d\r\n\r\n", 0);
    exchange(s, port, big, "\r\n\r\n", buf, sizeof buf);
    ok(starts(buf, "HTTP/1.1 431"), "refusal 431");
    for (int i = 0; i < 5; i++) /* the last answers' output went out before the reads ended */
        serve_step(s, 5);

    read_metrics(s);
    is_int(m[NSV_M_REQUESTS], 12, "12 answers counted");
    is_int(m[NSV_M_RESP_1XX], 0, "no 1xx");
    is_int(m[NSV_M_RESP_2XX], 3, "2xx: 200, streamed 200, HEAD 200");
    is_int(m[NSV_M_RESP_3XX], 1, "3xx: 302");
    is_int(m[NSV_M_RESP_4XX], 5, "4xx: the host's 404, 400, 414, 413, 431");
    is_int(m[NSV_M_RESP_5XX], 3, "5xx: the host's 500, 501, 505");
    is_int(m[NSV_M_PARSE_BAD_REQUEST], 1, "parse errors: one bad request");
    is_int(m[NSV_M_PARSE_URI_TOO_LONG], 1, "parse errors: one URI too long");
    is_int(m[NSV_M_PARSE_BODY_TOO_LARGE], 1, "parse errors: one body too large");
    is_int(m[NSV_M_PARSE_HEAD_TOO_LARGE], 1, "parse errors: one head too large");
    is_int(m[NSV_M_PARSE_OTHER], 2, "parse errors: 501 and 505 as other");
    is_int(m[NSV_M_LAT_QUEUED_COUNT], 12, "one queued-latency observation per answer");
    is_int(m[NSV_M_LAT_FLUSHED_COUNT], 12, "one flushed-latency observation per answer");
    int cumulative = 1;
    for (int i = 1; i < NSV_M_LAT_BUCKETS; i++)
        cumulative &= m[NSV_M_LAT_QUEUED_BUCKET + i] >= m[NSV_M_LAT_QUEUED_BUCKET + i - 1] &&
                      m[NSV_M_LAT_FLUSHED_BUCKET + i] >= m[NSV_M_LAT_FLUSHED_BUCKET + i - 1];
    ok(cumulative, "buckets are cumulative");
    is_int(m[NSV_M_LAT_QUEUED_BUCKET + NSV_M_LAT_BUCKETS - 1], 12, "the +Inf bucket holds every observation");
    ok(m[NSV_M_LAT_FLUSHED_SUM_US] >= m[NSV_M_LAT_QUEUED_SUM_US], "flushed latency sums at least the queued");
    is_int(m[NSV_M_DRAINING], 0, "not draining");

    uint64_t w[NSV_M_COUNT];
    is_int(nsv_metrics_worker(s, 0, w, NSV_M_COUNT), NSV_M_COUNT, "a single loop is worker 0");
    is_int(w[NSV_M_REQUESTS], 12, "worker 0 has them all");
    is_int(nsv_metrics_worker(s, 1, w, NSV_M_COUNT), NSV_ERANGE, "no worker 1");
    uint64_t three[3] = {0, 0, 7};
    is_int(nsv_metrics(s, three, 2), NSV_M_COUNT, "a short array takes what it asks for");
    is_int(three[2], 7, "and nothing past it");

    /* The exposition. */
    static char text[32768];
    int64_t n = nsv_metrics_prometheus(s, NULL, 0, 0, text, sizeof text);
    ok(n > 0, "prometheus text: %lld bytes", (long long)n);
    prom_check pc;
    prom_parse(text, n > 0 ? (size_t)n : 0, "nanosrv_", &pc);
    ok(!pc.why, "every line is a HELP/TYPE comment or a sample of its family%s%s", pc.why ? ": " : "",
       pc.why ? pc.why : "");
    if (pc.why)
        diag("line %d", pc.bad_line);
    is_int(pc.histograms_ok, 2, "both histograms cumulative, ending at +Inf equal to _count");
    ok(strstr(text, "\nnanosrv_responses_total{class=\"2xx\"} 3\n") != NULL, "responses by class label");
    ok(strstr(text, "\nnanosrv_parse_errors_total{kind=\"uri_too_long\"} 1\n") != NULL, "parse errors by kind");
    ok(strstr(text, "\nnanosrv_requests_total 12\n") != NULL, "requests_total");
    ok(strstr(text, "nanosrv_request_queued_seconds_bucket{le=\"0.0001\"}") != NULL, "first bucket 100 us in seconds");
    ok(strstr(text, "\nnanosrv_request_queued_seconds_count 12\n") != NULL, "histogram count");
    n = nsv_metrics_prometheus(s, "app_", 4, 1, text, sizeof text);
    prom_parse(text, n > 0 ? (size_t)n : 0, "app_", &pc);
    ok(n > 0 && !pc.why, "per worker with a prefix parses%s%s", pc.why ? ": " : "", pc.why ? pc.why : "");
    ok(strstr(text, "app_responses_total{class=\"4xx\",worker=\"0\"} 5\n") != NULL, "worker label beside class");
    is_int(nsv_metrics_prometheus(s, "bad-", 4, 0, text, sizeof text), NSV_EINVAL, "a prefix with '-' is refused");
    is_int(nsv_metrics_prometheus(s, NULL, 0, 0, text, 100), NSV_ENOBUFS, "a small buffer: NSV_ENOBUFS");
    ok(strstr(nsv_last_error_detail(s), "needed") != NULL, "the detail says the size needed");
    nsv_server_free(s);
}

/* Latency off: counters still count, histograms stay empty. */
static void test_latency_off(void)
{
    nsv_server *s = nsv_server_new();
    is_int(nsv_get_int(s, NSV_OPT_METRICS_LATENCY), 1, "latency is on by default");
    nsv_set_int(s, NSV_OPT_METRICS_LATENCY, 0);
    int port;
    http_listen(s, &port);
    char buf[4096];
    exchange(s, port, "GET / HTTP/1.1\r\nHost: t\r\n\r\n", "\r\n\r\nok", buf, sizeof buf);
    exchange(s, port, "GET / HTTP/9.9\r\nHost: t\r\n\r\n", "\r\n\r\n", buf, sizeof buf);
    serve_step(s, 5);
    read_metrics(s);
    is_int(m[NSV_M_REQUESTS], 2, "latency off: answers counted");
    is_int(m[NSV_M_LAT_QUEUED_COUNT] + m[NSV_M_LAT_FLUSHED_COUNT], 0, "latency off: histograms empty");
    nsv_server_free(s);
}

static void test_names(void)
{
    ok(nsv_metric_name(NSV_M_CONNS_ACCEPTED) && !strcmp(nsv_metric_name(NSV_M_CONNS_ACCEPTED), "conns_accepted"),
       "name of 0");
    ok(!strcmp(nsv_metric_name(NSV_M_RESP_2XX), "resp_2xx"), "resp_2xx");
    ok(!strcmp(nsv_metric_name(NSV_M_LAT_QUEUED_BUCKET + 3), "lat_queued_bucket"), "a queued bucket");
    ok(!strcmp(nsv_metric_name(NSV_M_LAT_FLUSHED_BUCKET + 15), "lat_flushed_bucket"), "a flushed bucket");
    ok(nsv_metric_name(NSV_M_COUNT) == NULL && nsv_metric_name(-1) == NULL, "NULL past the end");
    int all = 1;
    for (int i = 0; i < NSV_M_COUNT; i++)
        all &= nsv_metric_name(i) != NULL;
    ok(all, "every metric has a name");
    is_int(nsv_metric_bucket_us(0), 100, "first bound 100 us");
    is_int(nsv_metric_bucket_us(14), 10000000, "bound 14: 10 s");
    is_int(nsv_metric_bucket_us(15), -1, "last: +Inf");
    is_int(nsv_metric_bucket_us(16), NSV_ERANGE, "past the end");
}

/* A WebSocket route: the 101 counts as a 1xx answer with its latency,
 * data messages each way are counted, pings are not. */
static void test_websocket(void)
{
    nsv_server *s = nsv_server_new();
    int port;
    http_listen(s, &port);
    nsv_route(s, "GET", 3, "/ws", 3, 1, NSV_ROUTE_WEBSOCKET);
    int fd = client(port);
    sendall(fd, "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n");
    nsv_event e;
    ok(wait_event(s, NSV_EV_WS_OPEN, &e, 200, 10), "ws: open");
    char buf[512];
    read_stepping(fd, buf, sizeof buf, 100, 10, "\r\n\r\n", nsvnet_poll_step, s);
    ok(starts(buf, "HTTP/1.1 101"), "ws: 101");
    nsv_ws_send(s, e.conn, NSV_WS_TEXT, "a", 1);
    nsv_ws_send(s, e.conn, NSV_WS_TEXT, "b", 1);
    nsv_ws_send(s, e.conn, NSV_WS_PING, "p", 1);
    static const char frame[] = {(char)0x81, (char)0x82, 0, 0, 0, 0, 'h', 'i'};
    sendn(fd, frame, sizeof frame);
    ok(wait_event(s, NSV_EV_WS_MESSAGE, &e, 200, 10), "ws: message in");
    read_metrics(s);
    is_int(m[NSV_M_RESP_1XX], 1, "ws: the 101 counts as 1xx");
    is_int(m[NSV_M_REQUESTS], 1, "ws: and as an answered request");
    is_int(m[NSV_M_LAT_QUEUED_COUNT], 1, "ws: the upgrade's latency queued");
    is_int(m[NSV_M_LAT_FLUSHED_COUNT], 1, "ws: and flushed");
    is_int(m[NSV_M_WS_MESSAGES_OUT], 2, "ws: two data messages out (the ping not)");
    is_int(m[NSV_M_WS_MESSAGES_IN], 1, "ws: one message in");
    close(fd);
    nsv_server_free(s);
}

/* TLS: a handshake by curl (a real client) and one broken by plain text
 * count apart; the older NSV_OPT_TLS_HANDSHAKE_FAILURES still counts. */
static void test_tls(void)
{
    if (!nsv_tls_available()) {
        ok(1, "# skip tls: built without TLS");
        return;
    }
    char dir[] = "/tmp/nsv-metrics-XXXXXX", cmd[512], crt[64], key[64];
    if (!mkdtemp(dir)) {
        ok(0, "tls: temporary directory");
        return;
    }
    snprintf(cmd, sizeof cmd, "cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
             "-keyout k.pem -out c.pem -days 2 -subj /CN=localhost >/dev/null 2>&1", dir);
    int made = system(cmd) == 0;
    snprintf(crt, sizeof crt, "%s/c.pem", dir);
    snprintf(key, sizeof key, "%s/k.pem", dir);
    nsv_server *s = nsv_server_new();
    int lid = -1;
    if (made && nsv_set_str(s, NSV_OPT_TLS_CERT_FILE, crt, strlen(crt)) == NSV_OK &&
        nsv_set_str(s, NSV_OPT_TLS_KEY_FILE, key, strlen(key)) == NSV_OK)
        lid = nsv_listen(s, "https://127.0.0.1:0", 19);
    if (lid < 0) {
        ok(0, "tls: listener (%s)", nsv_last_error_detail(s));
        goto out;
    }
    int port = nsv_listener_port(s, lid);
    snprintf(cmd, sizeof cmd, "curl -sk --max-time 10 -o /dev/null https://127.0.0.1:%d/", port);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int status = -1;
    for (int i = 0; i < 1000 && waitpid(pid, &status, WNOHANG) == 0; i++)
        serve_step(s, 10);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "tls: curl got its answer");
    int fd = client(port);
    sendall(fd, "GET / HTTP/1.1\r\nHost: t\r\n\r\n"); /* plain text to a TLS port */
    char buf[256];
    read_stepping(fd, buf, sizeof buf, 100, 10, NULL, serve_step, s);
    close(fd);
    read_metrics(s);
    is_int(m[NSV_M_TLS_HANDSHAKES], 1, "tls: one handshake completed");
    is_int(m[NSV_M_TLS_FAILURES], 1, "tls: one failed");
    is_int(nsv_get_int(s, NSV_OPT_TLS_HANDSHAKE_FAILURES), 1, "tls: NSV_OPT_TLS_HANDSHAKE_FAILURES agrees");
    is_int(m[NSV_M_RESP_2XX], 1, "tls: the answer over TLS counted");
out:
    nsv_server_free(s);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        diag("could not remove %s", dir);
}

/* Timeouts by kind: a head that never completes (408), an idle
 * keep-alive connection. */
static void test_timeouts(void)
{
    nsv_server *s = nsv_server_new();
    nsv_set_int(s, NSV_OPT_REQUEST_TIMEOUT_MS, 50);
    nsv_set_int(s, NSV_OPT_IDLE_TIMEOUT_MS, 50);
    int port;
    http_listen(s, &port);
    char buf[2048];
    int fd = client(port);
    sendall(fd, "GET / HTTP/1.1\r\nHost:"); /* and no more */
    read_stepping(fd, buf, sizeof buf, 300, 10, NULL, serve_step, s); /* until the close */
    close(fd);
    ok(starts(buf, "HTTP/1.1 408"), "timeouts: 408 for a head that does not complete");
    fd = client(port);
    sendall(fd, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    read_stepping(fd, buf, sizeof buf, 300, 10, NULL, serve_step, s); /* answered, then closed when idle */
    close(fd);
    ok(strstr(buf, "\r\n\r\nok") != NULL, "timeouts: the keep-alive request answered");
    read_metrics(s);
    is_int(m[NSV_M_TIMEOUT_REQUEST], 1, "timeouts: one request timeout");
    is_int(m[NSV_M_TIMEOUT_IDLE], 1, "timeouts: one idle keep-alive connection closed");
    is_int(m[NSV_M_RESP_4XX], 1, "timeouts: the 408 is an answer");
    nsv_server_free(s);
}

/* Gauges of a sharded server: a request waiting for the host is one
 * queued event (counted once over the workers), none once polled. */
static void test_gauges(void)
{
    nsv_server *s = nsv_server_new_sharded(2);
    int port;
    http_listen(s, &port);
    nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, 0); /* starts the workers */
    int fd = client(port);
    sendall(fd, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    uint64_t q = 0;
    for (int i = 0; i < 200 && q == 0; i++) {
        usleep(5000);
        read_metrics(s);
        q = m[NSV_M_EVENTS_QUEUED];
    }
    is_int(q, 1, "gauges: one event waits for the host");
    is_int(m[NSV_M_CONNS_ACTIVE], 1, "gauges: one connection open");
    nsv_event e;
    ok(wait_event(s, NSV_EV_REQUEST, &e, 100, 10), "gauges: the host takes it");
    read_metrics(s);
    is_int(m[NSV_M_EVENTS_QUEUED], 0, "gauges: none waits then");
    close(fd);
    nsv_server_free(s);
}

/* Pipelined requests in one write: each answer observed once in each
 * histogram (an answer whose bytes still wait when the next head is
 * complete is observed as flushed then). */
static void test_pipelined(void)
{
    nsv_server *s = nsv_server_new();
    int port;
    http_listen(s, &port);
    char buf[4096];
    int fd = client(port);
    sendall(fd, "GET /1 HTTP/1.1\r\nHost: t\r\n\r\nGET /2 HTTP/1.1\r\nHost: t\r\n\r\n"
                "GET /3 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    int n = read_stepping(fd, buf, sizeof buf, 100, 10, NULL, serve_step, s); /* until the close */
    close(fd);
    int answers = 0;
    for (const char *p = buf; (p = strstr(p, "HTTP/1.1 200")) != NULL; p++)
        answers++;
    is_int(answers, 3, "pipelined: three answers (%d bytes)", n);
    read_metrics(s);
    is_int(m[NSV_M_REQUESTS], 3, "pipelined: three requests");
    is_int(m[NSV_M_LAT_QUEUED_COUNT], 3, "pipelined: three queued observations");
    is_int(m[NSV_M_LAT_FLUSHED_COUNT], 3, "pipelined: three flushed observations");
    nsv_server_free(s);
}

/* ---- sharded: two threads poll and send while a third reads ---- */

#define SH_CONNS 4
#define SH_REQS 50

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

static int sh_answered;

static void *sh_client(void *arg)
{
    int port = *(int *)arg;
    char buf[512];
    for (int c = 0; c < SH_CONNS; c++) {
        int fd = client(port);
        for (int i = 0; i < SH_REQS; i++) {
            sendall(fd, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
            read_stepping(fd, buf, sizeof buf, 200, 10, "\r\n\r\nok", NULL, NULL);
            sh_answered += strstr(buf, "\r\n\r\nok") != NULL;
        }
        close(fd);
    }
    atomic_store(&sh_done, 1);
    return NULL;
}

static void test_sharded(void)
{
    nsv_server *s = nsv_server_new_sharded(2);
    int port;
    http_listen(s, &port);
    pthread_t p, c;
    pthread_create(&p, NULL, sh_poller, s);
    pthread_create(&c, NULL, sh_client, &port);
    static char text[65536];
    int reads = 0, parsed = 1;
    uint64_t prev = 0;
    int monotonic = 1;
    for (int i = 0; i < 5000 && !atomic_load(&sh_done); i++) {
        read_metrics(s);
        monotonic &= m[NSV_M_REQUESTS] >= prev;
        prev = m[NSV_M_REQUESTS];
        int64_t n = nsv_metrics_prometheus(s, NULL, 0, i & 1, text, sizeof text);
        prom_check pc;
        prom_parse(text, n > 0 ? (size_t)n : 0, "nanosrv_", &pc);
        parsed &= !pc.why;
        reads++;
        usleep(1000);
    }
    pthread_join(c, NULL);
    pthread_join(p, NULL);
    diag("%d reads while serving", reads);
    ok(monotonic, "sharded: requests only grow while read");
    ok(parsed, "sharded: every exposition read meanwhile parses");
    is_int(sh_answered, SH_CONNS * SH_REQS, "sharded: every request answered");
    read_metrics(s);
    is_int(m[NSV_M_REQUESTS], SH_CONNS * SH_REQS, "sharded: requests summed over the workers");
    is_int(m[NSV_M_LAT_QUEUED_COUNT], SH_CONNS * SH_REQS, "sharded: one observation each");
    uint64_t w0[NSV_M_COUNT], w1[NSV_M_COUNT];
    nsv_metrics_worker(s, 0, w0, NSV_M_COUNT);
    nsv_metrics_worker(s, 1, w1, NSV_M_COUNT);
    is_int(w0[NSV_M_REQUESTS] + w1[NSV_M_REQUESTS], SH_CONNS * SH_REQS, "sharded: the workers' shares add up");
    nsv_server_free(s);
}

int main(void)
{
    test_names();
    test_single();
    test_latency_off();
    test_websocket();
    test_tls();
    test_timeouts();
    test_gauges();
    test_pipelined();
    test_sharded();
    return done_testing();
}
