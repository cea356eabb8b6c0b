/* resp_parse.h - the protocol core of the HTTP/1.1 client: a pure
 * response-head parser, the body framing rules of RFC 9112 section 6.3 and
 * a request-head writer. Nothing here allocates or keeps state; results
 * point into the caller's buffers. Chunked bodies are decoded with
 * nsv__chunked_decode (parse.h). */
#ifndef NSV_HTTP_RESP_PARSE_H
#define NSV_HTTP_RESP_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "http/parse.h"

/* Facts derived from a response head (nsv__response.flags). */
enum {
    NSV__RESP_CHUNKED = 1,         /* Transfer-Encoding whose final coding is chunked */
    NSV__RESP_TE_OTHER = 2,        /* Transfer-Encoding ending in another coding: body until close */
    NSV__RESP_CL_TE = 4,           /* Content-Length and Transfer-Encoding: TE won, do not reuse */
    NSV__RESP_CONN_CLOSE = 8,      /* Connection token "close" */
    NSV__RESP_CONN_KEEPALIVE = 16, /* Connection token "keep-alive" */
    NSV__RESP_CONN_UPGRADE = 32,   /* Connection token "upgrade" */
    NSV__RESP_UPGRADE_WS = 64,     /* Upgrade: websocket (token list, case-insensitive) */
    NSV__RESP_KEEP_ALIVE = 128     /* the head lets the connection carry another request */
};

typedef struct nsv__response {
    int status;         /* 100..999 */
    int minor_version;  /* 0 for HTTP/1.0, 1 for HTTP/1.1 and later 1.x */
    const char *reason; /* reason-phrase, possibly empty */
    size_t reason_len;
    nsv__hdr *headers;  /* caller-provided array */
    size_t num_headers;
    int64_t content_length;  /* -1 when absent, or when Transfer-Encoding overrides it */
    const char *ws_accept;   /* Sec-WebSocket-Accept value, NULL when absent */
    size_t ws_accept_len;
    unsigned flags;          /* NSV__RESP_* */
    const char *why;         /* on error: which rule broke (static text) */
    size_t why_at;           /* on error: offset of the offending byte */
} nsv__response;

/*
 * Parse a response head from buf[0..len), headers into headers[0..max_headers).
 * Returns  > 0: bytes consumed (through the blank line ending the head);
 *          0  : incomplete, read more (the caller bounds the head's size);
 *          NSV_EPARSE : malformed; resp->why and resp->why_at say why/where;
 *          NSV_ETOOBIG: more than max_headers header lines (why set too).
 * Stateless like nsv__http_parse_request: hand it everything received so
 * far; a prefix of an input yields 0 or the same result as the whole input.
 *
 * Status line: "HTTP/1." DIGIT SP 3DIGIT [SP reason] CRLF. The SP before an
 * empty reason may be missing (RFC 9112 section 4 requires senders to send
 * it; servers that drop it are common and CRLF still ends the line without
 * ambiguity). HTTP/1.2..1.9 are read as 1.1 (RFC 9110 section 2.5); other
 * versions are errors. Status 100..999: 600..999 are kept as received and
 * framed as any final response (RFC 9110 section 15 "as if 5xx"); 000..099
 * are errors. Nothing may precede the status line (no empty lines: on a
 * reused connection they would be a desync).
 *
 * Headers: as strict as the request parser - token names, ':' right after
 * the name, no obs-fold, only CRLF line ends, no NUL or other CTL but HTAB
 * in values (OWS around values is trimmed). Then:
 *  - Content-Length: 1*DIGIT or a list of identical values, across repeats;
 *    anything else is an error, also beside Transfer-Encoding;
 *  - Transfer-Encoding (all lines together form one list; empty elements
 *    are ignored, RFC 9110 5.6.1): codings are tokens with optional
 *    parameters; chunked must be the final coding and appear once (else an
 *    error); a list ending in another coding sets NSV__RESP_TE_OTHER (body
 *    until close, RFC 9112 6.3 item 4). Together with Content-Length TE wins:
 *    content_length is -1 and NSV__RESP_CL_TE forbids reuse. On HTTP/1.0
 *    Transfer-Encoding is an error (RFC 9112 6.1: the framing is faulty);
 *  - Connection tokens close, keep-alive and upgrade; Upgrade: websocket;
 *  - Sec-WebSocket-Accept: its value is recorded; two of them are an error.
 * NSV__RESP_KEEP_ALIVE: HTTP/1.1 without "close", or HTTP/1.0 with
 * "keep-alive" and without "close"; never with NSV__RESP_CL_TE or _TE_OTHER.
 */
int nsv__parse_response(const char *buf, size_t len, nsv__response *resp, nsv__hdr *headers,
                        size_t max_headers);

/* How the body of a parsed response is delimited. */
enum {
    NSV__BODY_NONE = 0,    /* no body: HEAD, 204, 304 */
    NSV__BODY_LENGTH = 1,  /* content_length bytes (possibly 0) */
    NSV__BODY_CHUNKED = 2, /* chunked: decode with nsv__chunked_decode */
    NSV__BODY_CLOSE = 3,   /* until the server closes; the connection is not reusable */
    NSV__BODY_INTERIM = 4, /* 1xx other than 101: no body, the real head follows */
    NSV__BODY_UPGRADE = 5  /* 101, or 2xx to CONNECT: HTTP ends with this head; the bytes
                            * that follow belong to the new protocol or the tunnel */
};

/*
 * The framing of resp's body (RFC 9112 section 6.3) given the request's
 * method (case-sensitive, as methods are). In order: 101 -> UPGRADE, other
 * 1xx -> INTERIM (skip it and parse the next head at buf + consumed; the
 * caller bounds how many it skips), 2xx to CONNECT -> UPGRADE, HEAD, 204
 * and 304 -> NONE (whatever Content-Length says), chunked -> CHUNKED,
 * another final coding -> CLOSE, Content-Length -> LENGTH, else CLOSE.
 * A 2xx to CONNECT has no body either, but it is UPGRADE, not NONE, so that
 * the connection is never put back into a pool.
 */
int nsv__resp_body_kind(const nsv__response *resp, const char *method, size_t method_len);

/* Whether the connection may carry the next request once this response's
 * body (framed as kind) has been read in full. */
static inline int nsv__resp_reusable(const nsv__response *resp, int kind)
{
    return (resp->flags & NSV__RESP_KEEP_ALIVE) &&
           (kind == NSV__BODY_NONE || kind == NSV__BODY_LENGTH || kind == NSV__BODY_CHUNKED);
}

#endif
