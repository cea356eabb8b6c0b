/* parse.h - pure HTTP/1.1 request-head parser and chunked decoder.
 * Never allocates; results point into the caller's buffer. */
#ifndef NSV_HTTP_PARSE_H
#define NSV_HTTP_PARSE_H

#include <stddef.h>
#include <stdint.h>

typedef struct nsv__hdr {
    const char *name;
    size_t name_len;
    const char *value; /* leading/trailing OWS removed */
    size_t value_len;
} nsv__hdr;

/* Request-level facts derived from the headers (nsv__request.flags). */
enum {
    NSV__RF_CHUNKED = 1,         /* Transfer-Encoding: chunked (final coding) */
    NSV__RF_CONN_CLOSE = 2,      /* Connection token "close" */
    NSV__RF_CONN_KEEPALIVE = 4,  /* Connection token "keep-alive" */
    NSV__RF_CONN_UPGRADE = 8,    /* Connection token "upgrade" */
    NSV__RF_UPGRADE_WS = 16,     /* Upgrade: websocket (token list, case-insensitive) */
    NSV__RF_EXPECT_CONTINUE = 32,/* Expect: 100-continue */
    NSV__RF_ABSOLUTE_FORM = 64   /* request-target was absolute-form */
};

typedef struct nsv__request {
    const char *method;
    size_t method_len;
    const char *target; /* raw request-target */
    size_t target_len;
    const char *path;   /* origin path; for absolute-form the path part ("/" if empty) */
    size_t path_len;
    const char *query;  /* after '?', without it; NULL/0 if none; fragment excluded */
    size_t query_len;
    int minor_version;  /* 0 or 1 */
    nsv__hdr *headers;  /* caller-provided array */
    size_t num_headers; /* out: number parsed */
    int64_t content_length; /* -1 when absent */
    const char *host;   /* Host header value (NULL if absent) */
    size_t host_len;
    unsigned flags;     /* NSV__RF_* */
} nsv__request;

/*
 * Parse a request head from buf[0..len).
 * Returns  > 0: bytes consumed (through the blank line ending the head);
 *          0  : incomplete, read more (caller enforces max head bytes -> 431);
 *          < 0: minus the HTTP status to answer with, then close:
 *               -400 malformed (bad token chars, bare CR/LF, obs-fold,
 *                    whitespace before colon, CL+TE together, differing or
 *                    invalid Content-Length, HTTP/1.1 without exactly one Host,
 *                    more than one Host),
 *               -414 request-target longer than max_uri,
 *               -417 Expect with a value other than 100-continue,
 *               -431 more than max_headers header lines,
 *               -501 Transfer-Encoding other than (a list ending in) chunked
 *                    or with unknown codings,
 *               -505 HTTP version other than 1.0 / 1.1.
 * headers must have room for max_headers entries.
 */
int nsv__http_parse_request(const char *buf, size_t len, nsv__request *req,
                            nsv__hdr *headers, size_t max_headers, size_t max_uri);

/* Incremental chunked-body decoder state; zero-initialise before use. */
typedef struct nsv__chunked {
    int state;
    uint64_t remaining; /* bytes left in the current chunk */
    uint32_t line_len;  /* bytes of the current size/trailer line (bounded) */
} nsv__chunked;

/*
 * Decode chunked data from src[0..len) into dst (dst may equal src or lie
 * before it: output never overtakes input). Sets *consumed (input bytes
 * used) and *produced (output bytes written).
 * Returns 1 when the last chunk and trailers are complete (consumed stops
 * right after them), 0 when more input is needed, -400 on malformed input
 * (bad hex, size overflow, missing CRLF, overlong size/ext/trailer line,
 * more than 100 trailer lines or 16 KiB of trailer names and values).
 */
int nsv__chunked_decode(nsv__chunked *d, char *dst, const char *src, size_t len,
                        size_t *consumed, size_t *produced);

#endif
