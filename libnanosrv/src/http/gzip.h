/* gzip.h - gzip of replies (NSV_OPT_GZIP_*): which requests accept it,
 * which media types get it, and the deflate streams (gzip.c, over zlib when
 * the build has it; without zlib the option cannot be turned on). */
#ifndef NSV_HTTP_GZIP_H
#define NSV_HTTP_GZIP_H

#include "../loop/loop.h"

/* 1 when the library was built with zlib. */
int nsv__gzip_available(void);

/* NSV_OPT_GZIP_TYPES: check and store the list (len 0: the default list). */
int nsv__gzip_set_types(nsv_server *s, const char *v, size_t len);
void nsv__gzip_server_free(nsv_server *s);

/* Whether the Accept-Encoding fields among hdrs accept gzip (RFC 9110
 * 12.5.3: "gzip"/"x-gzip" with a non-zero weight, else "*" with one). */
int nsv__gzip_accepts(const nsv__hdr *hdrs, size_t n);

/* Whether a Content-Type value names a media type of the list. */
int nsv__gzip_type_ok(const nsv_server *s, const char *ct, size_t len);

/* Compress in[0..n) as one gzip member into out with the loop's deflate
 * stream. Returns the compressed length, or 0 when it does not fit in cap
 * bytes (callers pass cap < n: compression must pay) or zlib fails. */
size_t nsv__gzip_complete(nsv__loop *l, const char *in, size_t n, char *out, size_t cap);
void nsv__gzip_loop_free(nsv__loop *l);

/* A streamed reply's own deflate stream (c->gz). start: NSV_OK or
 * NSV_ENOMEM. put: compress data (finish: and end the member), queue the
 * output on c->out, as chunks unless the reply is close-delimited (HTTP/1.0);
 * every call ends on a flush point, so the client can decode all it has. */
int nsv__gzip_stream_start(nsv__loop *l, nsv__conn *c);
int nsv__gzip_stream_put(nsv__loop *l, nsv__conn *c, const char *data, size_t len, int finish);
void nsv__gzip_stream_free(nsv__loop *l, nsv__conn *c);

#endif
