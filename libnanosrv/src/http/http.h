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

/* A static mount (nsv_serve_dir), read-only once the server runs. */
typedef struct nsv__mount {
    char *prefix;       /* starts and ends with '/' */
    uint32_t plen;
    int dirfd;          /* the directory, O_PATH: files are opened beneath it */
    char *cc;           /* "Cache-Control: ...\r\n", or NULL */
    uint32_t cclen;
    uint32_t flags;     /* enum nsv_static_flag */
} nsv__mount;

/* The request headers a static answer depends on (pointers into the request). */
typedef struct nsv__sreq {
    const char *inm, *ims, *range, *if_range, *ae;
    uint32_t inm_len, ims_len, range_len, if_range_len, ae_len;
} nsv__sreq;

/* The file chosen to answer: an open descriptor and how to describe it. */
typedef struct nsv__sfile {
    int fd;
    uint8_t enc;   /* 0 identity, 1 br, 2 gzip (a precompressed NAME.br / NAME.gz) */
    uint8_t vary;  /* Vary: Accept-Encoding (the mount serves precompressed files) */
    uint8_t index; /* a directory's index.html */
    int16_t mime;  /* nsv__mime_index of the name */
} nsv__sfile;

/* static.c */
void nsv__sreq_header(nsv__sreq *q, const char *n, size_t nl, const char *v, size_t vl);
void nsv__sreq_block(nsv__sreq *q, const char *b, size_t n);
int nsv__static_open(int dirfd, const char *rel, uint32_t flags);
int nsv__static_resolve(int dirfd, char *rel, size_t rlen, uint32_t flags, const nsv__sreq *q,
                        nsv__sfile *f, int *dir_fd);
int nsv__static_host_block(nsv_server *s, const char *h, size_t n, int *has_ctype);
/* hflags of nsv__static_send: the host's block has a Content-Type; the file
 * is a plain body (NSV_STATIC_PLAIN: no validators of ours). */
enum { NSV__SF_HOST_CTYPE = 1, NSV__SF_PLAIN = 2 };
int nsv__static_send(nsv__loop *l, nsv__conn *c, int status, nsv__sfile *f, const nsv__sreq *q,
                     const char *cc, size_t cclen, const char *hdrs, size_t hlen, int hflags);
int nsv__static_request(nsv__loop *l, nsv__conn *c, const nsv__request *r);
void nsv__static_free(nsv_server *s);

/* http_conn.c */
int nsv__http_loop_init(nsv__loop *l);
void nsv__http_process(nsv__loop *l, nsv__conn *c);
void nsv__http_continue(nsv__loop *l, nsv__conn *c, int asked);

/* access.c: free a loop's access records and capture buffers (server
 * free, before nsv__loop_free; safe to call twice). */
void nsv__access_loop_free(nsv__loop *l);

/* body.c */
void nsv__body_start(nsv__loop *l, nsv__conn *c, int64_t content_length, int expect_continue);
size_t nsv__body_feed(nsv__loop *l, nsv__conn *c, char *data, size_t n);
void nsv__body_timeout(nsv__loop *l, nsv__conn *c);
void nsv__body_aborted(nsv__loop *l, nsv__conn *c);
int nsv__body_pause(nsv__loop *l, nsv__conn *c, int paused);

/* response.c */
int nsv__headers_scan(nsv_server *s, const char *h, size_t n, nsv__hscan *out);
int nsv__reply_check(nsv_server *s, int status, const nsv__hscan *hs, int stream);
/* mode: NSV__REPLY_FULL (body given), NSV__REPLY_STREAM (nsv_reply_start),
 * NSV__REPLY_FILE (the block's Content-Length describes a body the caller
 * queues or attaches right after: a file). */
enum { NSV__REPLY_FULL = 0, NSV__REPLY_STREAM = 1, NSV__REPLY_FILE = 2 };
int nsv__reply(nsv__loop *l, nsv__conn *c, int status, const char *hdrs, size_t hlen,
               const char *body, size_t blen, int mode);
int nsv__send_chunk(nsv__loop *l, nsv__conn *c, const char *data, size_t len);
#define NSV__REASON_MAX 128 /* bytes of a reason phrase (nsv_set_reason) */
/* nsv_set_reason on the owning loop: keep the phrase (len 0: drop it) for the
 * next status line of the request waiting on c; NSV_ESTATE if none waits. */
int nsv__reason_set(nsv__loop *l, nsv__conn *c, const char *reason, size_t len);
int nsv__reply_end(nsv__loop *l, nsv__conn *c);
int nsv__error_reply(nsv__loop *l, nsv__conn *c, int status);
void nsv__update_date(nsv__loop *l);

#endif
