/* req_write.h - the HTTP/1.1 client's request-head writer: validates every
 * piece a host passes toward the wire and frames the body exactly once.
 * Pure: no allocation, no state; reasons are static text. */
#ifndef NSV_HTTP_REQ_WRITE_H
#define NSV_HTTP_REQ_WRITE_H

#include <stddef.h>
#include <stdint.h>

enum {
    NSV__WR_CLOSE = 1,  /* "Connection: close": the last request on the connection */
    NSV__WR_UPGRADE = 2 /* "Connection: upgrade": the header block carries Upgrade */
};

/* body_len for a body sent with the chunked coding. */
#define NSV__BODY_CHUNKED_LEN (-1)

/*
 * Format a request head into dst[0..cap):
 *   method SP target SP "HTTP/1.1" CRLF
 *   "Host: " host CRLF
 *   headers (the caller's block, verbatim)
 *   "Content-Length: " body_len CRLF     when body_len > 0, or 0 for POST, PUT, PATCH
 *   "Transfer-Encoding: chunked" CRLF    when body_len is NSV__BODY_CHUNKED_LEN
 *   "Connection: " upgrade/close CRLF    from flags
 *   CRLF
 * Returns the head's length n (> 0); the head is written only when n <= cap
 * (otherwise dst is untouched: call again with n bytes, dst may be NULL when
 * cap is 0). NSV_EINVAL when an argument breaks a rule, NSV_ETOOBIG when the
 * head would pass INT_MAX bytes; *why (if why is not NULL) then names the
 * argument and the rule.
 *
 * Rules: method is a token. target is origin-form ("/" then visible ASCII
 * but '#'), absolute-form ("http://" or "https://", an authority without
 * userinfo, then origin-form characters; for proxies), "*" (OPTIONS only) or
 * host:port (CONNECT only, which takes nothing else). host is an authority:
 * reg-name (unreserved, sub-delims, %HH), IPv4 or [IPv6], then an optional
 * ":port" of 1..65535; empty only with absolute-form or CONNECT (the target's
 * authority is used), and otherwise equal to it (case-insensitive, RFC 9112
 * 3.2.2). headers is zero or more "Name: value\r\n" lines: token names, ':'
 * right after the name, values without CR, LF, NUL or another control
 * character but HTAB, no empty line. Framing and routing are the writer's
 * alone, so the block may not hold Host (pass host), Content-Length or
 * Transfer-Encoding (pass body_len) or Connection (pass flags): two
 * framings can never reach the wire. Nor TE, which is only valid beside
 * "Connection: TE" (RFC 9110 10.1.4). Upgrade in the block requires
 * NSV__WR_UPGRADE and the reverse. body_len >= -1; TRACE and CONNECT carry
 * no body (RFC 9110 9.3.6, 9.3.8).
 */
int nsv__write_request(char *dst, size_t cap, const char *method, size_t method_len,
                       const char *target, size_t target_len, const char *host, size_t host_len,
                       const char *headers, size_t headers_len, int64_t body_len, unsigned flags,
                       const char **why);

/* Longest chunk-size line nsv__write_chunk_size writes: 16 hex digits + CRLF. */
#define NSV__CHUNK_SIZE_MAX 18

/* The size line of one chunk of n > 0 bytes ("%x\r\n") into dst; returns its
 * length. The chunk's data and CRLF follow; the body ends with "0\r\n\r\n". */
size_t nsv__write_chunk_size(char dst[NSV__CHUNK_SIZE_MAX], uint64_t n);

#endif
