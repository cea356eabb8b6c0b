/* http_get.c - the HTTP client from the command line:
 *   http-get URL                 prints the status line, the headers and the body
 *   http-get [options] URL...    drives many requests (the client's tests use it)
 * Options: --method M, --header 'Name: value' (repeatable), --data TEXT,
 * --data-file F (one piece), --stream-file F [--piece N] [--stream-cl]
 * (streamed body, chunked unless --stream-cl), --repeat N (one after the
 * other), --parallel N (at once), --set option=value (integer options by
 * name, e.g. http_conns_per_origin=2), --str option=value (string options,
 * e.g. tls_client_ca_file=ca.pem), --threads N (sharded server; requests start
 * from this thread), --gap-ms N (idle N ms between rounds), --pause-ms N (pause each body N ms after its head),
 * --cancel-after-head, --warm (first one GET of the first URL without a body,
 * so the requests after it find a pooled connection), --drain MS (start a drain of MS once all requests are
 * started, then try one more), --out DIR (body of request i to DIR/i), --summary
 * (one line per request instead of the response). Exit status 0 when every
 * request got a response. */
#include <nanosrv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXREQ 4096

typedef struct job {
    int64_t id;
    int status, done, paused, keepalive;
    uint64_t bytes;
    int64_t resume_at;
    FILE *out;
    int64_t sent;
} job;

static nsv_server *srv;
static job jobs[MAXREQ];
static int njobs;
static char *stream_data;
static size_t stream_len, piece = 65536;
static int stream_cl;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return p;
}

static job *find(uint64_t id)
{
    for (int i = 0; i < njobs; i++)
        if (!jobs[i].done && (uint64_t)jobs[i].id == id)
            return &jobs[i];
    return NULL;
}

/* Feed a streamed body until the output limit says wait. */
static void feed(job *j)
{
    while (j->sent < (int64_t)stream_len) {
        size_t n = stream_len - (size_t)j->sent < piece ? stream_len - (size_t)j->sent : piece;
        int r = nsv_http_request_body(srv, (uint64_t)j->id, stream_data + j->sent, n);
        if (r == NSV_EAGAIN)
            return;
        if (r) {
            fprintf(stderr, "http-get: body: %s (%s)\n", nsv_errname(r), nsv_last_error_detail(srv));
            return;
        }
        j->sent += (int64_t)n;
    }
    if (j->sent == (int64_t)stream_len) {
        j->sent++;
        int r = nsv_http_request_end(srv, (uint64_t)j->id);
        if (r)
            fprintf(stderr, "http-get: end: %s (%s)\n", nsv_errname(r), nsv_last_error_detail(srv));
    }
}

int main(int argc, char **argv)
{
    const char *method = "GET", *outdir = NULL;
    char headers[8192] = "";
    size_t hlen = 0;
    char *data = NULL, *owned = NULL;
    size_t dlen = 0;
    int repeat = 1, parallel = 1, threads = 0, pause_ms = 0, cancel = 0, summary = 0, streamed = 0, drain = -1, gap_ms = 0;
    int warm = 0;
    const char *urls[64];
    int nurls = 0;
    const char *sets[32], *strs[8];
    int nsets = 0, nstrs = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int used = 1;
        if (v && !strcmp(a, "--method")) method = v;
        else if (v && !strcmp(a, "--header") && hlen + strlen(v) + 3 < sizeof headers)
            hlen += (size_t)sprintf(headers + hlen, "%s\r\n", v);
        else if (v && !strcmp(a, "--data")) data = (char *)v, dlen = strlen(v);
        else if (v && !strcmp(a, "--data-file")) {
            if (!(data = owned = slurp(v, &dlen))) { fprintf(stderr, "http-get: cannot read %s\n", v); return 2; }
        } else if (v && !strcmp(a, "--stream-file")) {
            if (!(stream_data = slurp(v, &stream_len))) { fprintf(stderr, "http-get: cannot read %s\n", v); return 2; }
            streamed = 1;
        } else if (v && !strcmp(a, "--piece")) piece = (size_t)atol(v);
        else if (v && !strcmp(a, "--repeat")) repeat = atoi(v);
        else if (v && !strcmp(a, "--parallel")) parallel = atoi(v);
        else if (v && !strcmp(a, "--threads")) threads = atoi(v);
        else if (v && !strcmp(a, "--pause-ms")) pause_ms = atoi(v);
        else if (v && !strcmp(a, "--drain")) drain = atoi(v);
        else if (v && !strcmp(a, "--gap-ms")) gap_ms = atoi(v);
        else if (v && !strcmp(a, "--out")) outdir = v;
        else if (v && !strcmp(a, "--set") && nsets < 32) sets[nsets++] = v;
        else if (v && !strcmp(a, "--str") && nstrs < 8) strs[nstrs++] = v;
        else if (!strcmp(a, "--stream-cl")) stream_cl = 1, used = 0;
        else if (!strcmp(a, "--cancel-after-head")) cancel = 1, used = 0;
        else if (!strcmp(a, "--summary")) summary = 1, used = 0;
        else if (!strcmp(a, "--warm")) warm = 1, used = 0;
        else if (a[0] != '-' && nurls < 64) urls[nurls++] = a, used = 0;
        else { fprintf(stderr, "http-get: bad argument %s (see the comment atop examples/http_get.c)\n", a); return 2; }
        i += used;
    }
    if (!nurls) {
        fprintf(stderr, "usage: http-get [options] URL...\n");
        return 2;
    }
    srv = threads > 0 ? nsv_server_new_sharded(threads) : nsv_server_new();
    for (int i = 0; i < nsets; i++) {
        const char *eqs = strchr(sets[i], '=');
        int opt = eqs ? nsv_opt_by_name(sets[i], (size_t)(eqs - sets[i])) : NSV_EINVAL;
        int r = opt < 0 ? opt : nsv_set_int(srv, opt, atoll(eqs + 1));
        if (r) { fprintf(stderr, "http-get: --set %s: %s %s\n", sets[i], nsv_errname(r), nsv_last_error_detail(srv)); return 2; }
    }
    for (int i = 0; i < nstrs; i++) {
        const char *eqs = strchr(strs[i], '=');
        int opt = eqs ? nsv_opt_by_name(strs[i], (size_t)(eqs - strs[i])) : NSV_EINVAL;
        int r = opt < 0 ? opt : nsv_set_str(srv, opt, eqs + 1, strlen(eqs + 1));
        if (r) { fprintf(stderr, "http-get: --str %s: %s %s\n", strs[i], nsv_errname(r), nsv_last_error_detail(srv)); return 2; }
    }
    static nsv_event evs[64];
    static char arena[1 << 20];
    int total = nurls * parallel * repeat + warm, started = 0, finished = 0, failed = 0;
    if (total > MAXREQ)
        total = MAXREQ;
    int64_t deadline = now_ms() + 120000;
    while (finished < total && now_ms() < deadline) {
        /* start a round: each URL `parallel` times, after the last round ended */
        if (warm && started == 0) {
            job *j = &jobs[njobs++];
            memset(j, 0, sizeof *j);
            j->id = nsv_http_request(srv, "GET", 3, urls[0], strlen(urls[0]), headers, hlen, NULL, 0, -1, 0);
            started++;
            if (j->id < 0) {
                printf("req 0 error=%s %s\n", nsv_errname((int)j->id), nsv_last_error_detail(srv));
                j->done = 1;
                finished++, failed++;
            }
        } else if (started == finished && started < total) {
            for (int64_t until = now_ms() + (started ? gap_ms : 0); now_ms() < until;)
                nsv_poll(srv, evs, 64, arena, sizeof arena, 10); /* idle: pooled connections may die */
            for (int u = 0; u < nurls; u++)
                for (int p = 0; p < parallel && started < total; p++) {
                    job *j = &jobs[njobs++];
                    memset(j, 0, sizeof *j);
                    if (outdir) {
                        char path[4096];
                        snprintf(path, sizeof path, "%s/%d", outdir, njobs - 1);
                        j->out = fopen(path, "wb");
                    }
                    j->id = nsv_http_request(srv, method, strlen(method), urls[u], strlen(urls[u]), headers, hlen,
                                             data, dlen, streamed ? (stream_cl ? (int64_t)stream_len : -1) : -1,
                                             streamed ? NSV_HTTP_STREAM_BODY : 0);
                    started++;
                    if (j->id < 0) {
                        printf("req %d error=%s %s\n", njobs - 1, nsv_errname((int)j->id), nsv_last_error_detail(srv));
                        j->done = 1;
                        finished++, failed++;
                        continue;
                    }
                    if (streamed)
                        feed(j);
                }
            if (drain >= 0 && started == total) { /* drain with the requests in flight */
                nsv_drain_start(srv, drain);
                int64_t r = nsv_http_request(srv, "GET", 3, urls[0], strlen(urls[0]), NULL, 0, NULL, 0, -1, 0);
                printf("after drain: %s\n", r < 0 ? nsv_errname((int)r) : "started");
            }
        }
        for (int i = 0; i < njobs; i++) {
            job *j = &jobs[i];
            if (!j->done && j->paused && now_ms() >= j->resume_at) {
                j->paused = 0;
                nsv_http_pause(srv, (uint64_t)j->id, 0);
            }
        }
        int n = nsv_poll(srv, evs, 64, arena, sizeof arena, 20);
        if (n == NSV_ESTOPPED)
            break;
        for (int e = 0; e < n; e++) {
            const nsv_event *ev = &evs[e];
            job *j = find(ev->conn);
            if (!j)
                continue;
            int idx = (int)(j - jobs);
            if (ev->type == NSV_EV_HTTP_RESPONSE) {
                j->status = ev->code;
                j->keepalive = (ev->flags & NSV_EVF_KEEPALIVE) != 0;
                if (!summary) {
                    printf("HTTP %d %.*s\n", ev->code, (int)ev->path_len, arena + ev->path_off);
                    for (uint32_t h = 0; h < ev->nheaders; h++) {
                        uint32_t no, nl, vo, vl;
                        if (nsv_ev_header_at(ev, arena, h, &no, &nl, &vo, &vl) == 0)
                            printf("%.*s: %.*s\n", (int)nl, arena + no, (int)vl, arena + vo);
                    }
                    printf("\n");
                }
                if (cancel) {
                    nsv_http_cancel(srv, (uint64_t)j->id);
                    printf("req %d status=%d cancelled\n", idx, j->status);
                    j->done = 1;
                    finished++;
                } else if (pause_ms) {
                    nsv_http_pause(srv, (uint64_t)j->id, 1);
                    j->paused = 1;
                    j->resume_at = now_ms() + pause_ms;
                }
            } else if (ev->type == NSV_EV_HTTP_BODY) {
                j->bytes += ev->body_len;
                if (j->out)
                    fwrite(arena + ev->body_off, 1, ev->body_len, j->out);
                else if (!summary)
                    fwrite(arena + ev->body_off, 1, ev->body_len, stdout);
                if (ev->flags & NSV_EVF_EOF) {
                    if (summary)
                        printf("req %d status=%d bytes=%llu keepalive=%d\n", idx, j->status,
                               (unsigned long long)j->bytes, j->keepalive);
                    j->done = 1;
                    finished++;
                }
            } else if (ev->type == NSV_EV_ERROR) {
                printf("req %d error=%s %.*s\n", idx, nsv_errname(ev->code), (int)ev->body_len, arena + ev->body_off);
                j->done = 1;
                finished++, failed++;
            } else if (ev->type == NSV_EV_TCP_WRITABLE) {
                feed(j);
            }
            if (j->done && j->out) {
                fclose(j->out);
                j->out = NULL;
            }
        }
        fflush(stdout);
    }
    if (finished < total)
        printf("http-get: %d of %d requests unfinished after 120 s\n", total - finished, total);
    if (summary)
        printf("connections=%lld\n", (long long)nsv_get_int(srv, NSV_OPT_CONNECTIONS));
    nsv_server_free(srv);
    free(owned);
    free(stream_data);
    return failed || finished < total ? 1 : 0;
}
