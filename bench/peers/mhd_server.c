/* mhd_server.c - the echo contract on Debian's libmicrohttpd, one internal
 * epoll thread. POST|PUT /echo answers the body; anything else answers a JSON
 * summary of the request. Usage: mhd_server [--port N] [--poll]
 * --poll uses poll() instead of epoll: with libmicrohttpd 0.9.75 the epoll
 * mode stalls for seconds at a time once ~128 connections are open. */
#define _GNU_SOURCE
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The request body as it arrives in pieces; lives in *req_cls. */
struct body {
    char *p;
    size_t len;
};

static int is_echo(const char *method, const char *url)
{
    return (!strcmp(method, "POST") || !strcmp(method, "PUT")) && !strcmp(url, "/echo");
}

static enum MHD_Result add_query(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
    (void)kind;
    char *q = cls;
    size_t n = strlen(q);
    /* MHD hands the query back already split; rebuild it for the summary. */
    snprintf(q + n, 512 - n, "%s%s%s%s", n ? "&" : "", key, value ? "=" : "", value ? value : "");
    return MHD_YES;
}

static enum MHD_Result reply(struct MHD_Connection *c, const char *type, const char *p,
                             size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)p,
                                                             MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *data,
                              size_t *data_size, void **req_cls)
{
    (void)cls;
    (void)version;
    struct body *b = *req_cls;
    if (!b) { /* first call: headers only */
        b = calloc(1, sizeof *b);
        if (!b)
            return MHD_NO;
        *req_cls = b;
        return MHD_YES;
    }
    if (*data_size) {
        char *np = realloc(b->p, b->len + *data_size);
        if (!np)
            return MHD_NO;
        memcpy(np + b->len, data, *data_size);
        b->p = np;
        b->len += *data_size;
        *data_size = 0;
        return MHD_YES;
    }
    if (is_echo(method, url))
        return reply(c, "application/octet-stream", b->p ? b->p : "", b->len);

    char query[512] = "", json[1024];
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, add_query, query);
    int n = snprintf(json, sizeof json,
                     "{\"method\":\"%s\",\"path\":\"%s\",\"query\":\"%s\",\"body_len\":%zu}",
                     method, url, query, b->len);
    if (n < 0 || (size_t)n >= sizeof json)
        n = (int)strlen(json);
    return reply(c, "application/json", json, (size_t)n);
}

static void done(void *cls, struct MHD_Connection *c, void **req_cls,
                 enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    struct body *b = *req_cls;
    if (b) {
        free(b->p);
        free(b);
    }
    *req_cls = NULL;
}

int main(int argc, char **argv)
{
    int port = 0;
    unsigned int poller = MHD_USE_EPOLL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--port") && i + 1 < argc)
            port = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--poll"))
            poller = MHD_USE_POLL;
        else {
            fprintf(stderr, "usage: %s [--port N] [--poll]\n", argv[0]);
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | poller, (uint16_t)port, NULL, NULL, handle,
        NULL, MHD_OPTION_NOTIFY_COMPLETED, done, NULL, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned int)20000, MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned int)4096,
        MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "MHD_start_daemon failed\n");
        return 1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    printf("listening on %u\n", info ? (unsigned)info->port : (unsigned)port);
    fflush(stdout);
    for (;;)
        pause();
}
