/* http.h - the HTTP/1 layer: the read side (http_conn.c) and replies
 * (response.c) over the loop; parsing (parse.h) and routing (router/) below. */
#ifndef NSV_HTTP_H
#define NSV_HTTP_H

#include "../loop/loop.h"
#include "../router/router.h"
#include "parse.h"
#include "gzip.h"

#define NSV__MAX_PARAMS 32

/* What a reply's header block says (response.c). */
typedef struct nsv__hscan {
    unsigned seen;           /* which of the headers the library adds are present */
    uint32_t te_off, te_len; /* the Transfer-Encoding line in the block */
    uint64_t cl;             /* the Content-Length value, when present */
    /* what gzip (gzip.c) needs: the Content-Length line to replace, the
     * Content-Type value, where a Vary value ends (to extend it) and where
     * a strong ETag's value starts (to weaken it) */
    uint32_t cl_off, cl_len;
    uint32_t ct_off, ct_len;
    uint32_t vary_end;
    uint32_t etag_off;
} nsv__hscan;

/* HTTP's per-loop scratch (nsv__loop.http): parse results and caches that
 * serve one request at a time. */
typedef struct nsv__http_loop {
    nsv__hdr hdrs[256];
    nsv__param params[NSV__MAX_PARAMS];
    char date[40];          /* "Date: ...\r\n" */
    int64_t date_sec;
    int64_t date_until;     /* loop time (ms) when the Date line must be checked again */
    char reply_hdrs[128];   /* last reply header block that passed the check */
    uint32_t reply_hdrs_len;
    nsv__hscan reply_hdrs_scan;
    void *gz;               /* deflate stream of complete replies (gzip.c), made at first use */
} nsv__http_loop;

/* http_conn.c */
int nsv__http_loop_init(nsv__loop *l);
void nsv__http_process(nsv__loop *l, nsv__conn *c);

/* body.c */
void nsv__body_start(nsv__loop *l, nsv__conn *c, int64_t content_length, int expect_continue);
size_t nsv__body_feed(nsv__loop *l, nsv__conn *c, char *data, size_t n);
void nsv__body_timeout(nsv__loop *l, nsv__conn *c);
void nsv__body_aborted(nsv__loop *l, nsv__conn *c);
int nsv__body_pause(nsv__loop *l, nsv__conn *c, int paused);

/* response.c */
int nsv__headers_scan(nsv_server *s, const char *h, size_t n, nsv__hscan *out);
int nsv__reply_check(nsv_server *s, int status, const nsv__hscan *hs, int stream);
int nsv__reply(nsv__loop *l, nsv__conn *c, int status, const char *hdrs, size_t hlen,
               const char *body, size_t blen, int stream);
int nsv__send_chunk(nsv__loop *l, nsv__conn *c, const char *data, size_t len);
int nsv__reply_end(nsv__loop *l, nsv__conn *c);
int nsv__error_reply(nsv__loop *l, nsv__conn *c, int status);
void nsv__update_date(nsv__loop *l);

#endif
