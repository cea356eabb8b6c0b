/* frame.h - RFC 6455 framing: header parser/writer, unmasking, fragmentation
 * rules and close-payload checks. Pure functions over caller buffers: no
 * sockets, no allocation, no global state.
 *
 * Error convention: a negative return is minus the close code to send before
 * closing (-1002 protocol error, -1007 invalid UTF-8, -1009 too big).
 *
 * Receive path of one connection, in order:
 *   h = nsv__ws_parse_header(buf, len, &f)      0: read more; <0: fail
 *   op = nsv__ws_msg_frame(&msg, &f)            fragmentation rules, size
 *   nsv__ws_unmask(payload, n, f.key, offset)   as payload bytes arrive
 *   data frame:    nsv__ws_msg_data(&msg, payload, n)   per piece (UTF-8)
 *                  nsv__ws_msg_frame_end(&msg)          1: message complete
 *   close frame:   nsv__ws_check_close(payload, f.len, &code)
 */
#ifndef NSV_WS_FRAME_H
#define NSV_WS_FRAME_H

#include <stddef.h>
#include <stdint.h>

enum nsv__ws_opcode {
    NSV__WS_CONT = 0x0,
    NSV__WS_TEXT = 0x1,
    NSV__WS_BINARY = 0x2,
    NSV__WS_CLOSE = 0x8,
    NSV__WS_PING = 0x9,
    NSV__WS_PONG = 0xA
};

enum nsv__ws_close_code {
    NSV__WS_NORMAL = 1000,
    NSV__WS_GOING_AWAY = 1001,
    NSV__WS_PROTOCOL_ERROR = 1002,
    NSV__WS_UNSUPPORTED = 1003,
    NSV__WS_NO_STATUS = 1005,   /* never sent: close frame without a code */
    NSV__WS_ABNORMAL = 1006,    /* never sent: connection dropped */
    NSV__WS_INVALID_DATA = 1007,
    NSV__WS_POLICY = 1008,
    NSV__WS_TOO_BIG = 1009,
    NSV__WS_INTERNAL = 1011
};

/* Or'ed into an opcode for nsv__ws_write_header: RSV1 (compressed). */
#define NSV__WS_RSV1 0x40

/* Largest header: 2 + 8 (64-bit length) + 4 (mask key). */
#define NSV__WS_MAX_HEADER 14
/* Control frames carry at most this many payload bytes. */
#define NSV__WS_MAX_CONTROL 125

static inline int nsv__ws_is_control(int opcode) { return (opcode & 0x8) != 0; }

/* A parsed frame header. */
typedef struct nsv__ws_frame {
    uint64_t len;      /* payload length (< 2^63) */
    uint8_t key[4];    /* masking key (client frames are always masked; zero for server frames) */
    uint8_t opcode;    /* enum nsv__ws_opcode */
    uint8_t fin;       /* 1 on the last frame of a message (always for control) */
    uint8_t rsv1;      /* RSV1: a compressed message (nsv__ws_parse_header_rsv1 only) */
    uint8_t hlen;      /* header length in bytes, 6..14 (server frames 2..10) */
} nsv__ws_frame;

/*
 * Parse a client frame header from buf[0..len).
 * Returns > 0: header length (payload starts at buf + result), f filled;
 *         0  : incomplete, read more (at most NSV__WS_MAX_HEADER bytes needed);
 *         -1002: protocol violation, decided as soon as the offending byte is
 *                present: RSV1-3 set (no extension is negotiated), reserved
 *                opcode (3-7, 0xB-0xF), unmasked frame, control frame with
 *                FIN=0 or payload > 125, 64-bit length with the top bit set.
 * Non-minimal length encodings are accepted, as RFC 6455 5.2 allows.
 * f is only fully written on success.
 */
int nsv__ws_parse_header(const uint8_t *buf, size_t len, nsv__ws_frame *f);

/*
 * The same, with permessage-deflate negotiated: RSV1 is allowed on TEXT and
 * BINARY frames (f->rsv1 set), still -1002 on continuation and control
 * frames. RSV2 and RSV3 stay -1002.
 */
int nsv__ws_parse_header_rsv1(const uint8_t *buf, size_t len, nsv__ws_frame *f);

/*
 * The same for a frame from a server (read by a client): every rule above
 * but the mask, which is reversed: a masked frame is -1002 and an unmasked
 * one has no key (f->key is zero, hlen 2..10).
 */
int nsv__ws_parse_server_header(const uint8_t *buf, size_t len, nsv__ws_frame *f);

/*
 * XOR p[0..n) with the masking key in place. offset is the position of p[0]
 * within the frame payload, so a payload unmasked in pieces (as reads arrive)
 * gives the same bytes as unmasking it whole. Works a word at a time for any
 * alignment of p.
 */
void nsv__ws_unmask(uint8_t *p, size_t n, const uint8_t key[4], size_t offset);

/*
 * Write an unmasked (server) frame header for a payload of len bytes, using
 * the shortest length encoding. opcode is enum nsv__ws_opcode; fin is 0 or 1.
 * Returns the header length: 2, 4 or 10. out has room for a masked header.
 * opcode | NSV__WS_RSV1 sets RSV1 (a compressed message, permessage-deflate).
 */
size_t nsv__ws_write_header(uint8_t out[NSV__WS_MAX_HEADER], int fin, int opcode, uint64_t len);

/*
 * A client frame header: as nsv__ws_write_header, with the mask bit and the
 * 4-byte key after the length. Returns 6, 8 or 14. The payload that follows
 * must be masked with the same key (nsv__ws_unmask, offset 0).
 */
size_t nsv__ws_write_masked_header(uint8_t out[NSV__WS_MAX_HEADER], int fin, int opcode, uint64_t len,
                                   const uint8_t key[4]);

/*
 * Message assembler: tracks fragmentation across frames and validates text
 * messages incrementally. Zero-initialise, then set max (0 = unlimited).
 * Control frames may arrive between fragments and do not touch the state.
 */
typedef struct nsv__ws_msg {
    uint64_t size;   /* payload bytes announced so far in the current message */
    uint64_t max;    /* message size limit; exceeding it gives -1009 */
    uint32_t utf8;   /* UTF-8 validator state (text messages) */
    uint8_t opcode;  /* TEXT/BINARY while a message is open, else 0 */
    uint8_t fin;     /* the current data frame is the message's last */
} nsv__ws_msg;

/*
 * Account a frame header. Returns the frame's opcode for control frames and
 * the message's opcode (TEXT or BINARY) for data frames, including
 * continuations; or -1002 for a continuation outside a message or a new
 * TEXT/BINARY frame inside a fragmented one; or -1009 when the message
 * would exceed m->max (known from the header, before reading the payload).
 */
int nsv__ws_msg_frame(nsv__ws_msg *m, const nsv__ws_frame *f);

/*
 * Unmasked payload bytes of the current data frame, in order, in any number
 * of pieces. Returns 0, or -1007 as soon as a text message holds bytes that
 * cannot become valid UTF-8.
 */
int nsv__ws_msg_data(nsv__ws_msg *m, const uint8_t *p, size_t n);

/*
 * The current data frame's payload is complete. Returns 1 if that completed
 * the message (the state is reset for the next one), 0 if more fragments
 * follow, -1007 if a text message ends inside a UTF-8 sequence.
 */
int nsv__ws_msg_frame_end(nsv__ws_msg *m);

/* 1 if code may appear in a close frame on the wire (RFC 6455 7.4 and the
 * IANA registry): 1000-1003, 1007-1014, 3000-4999. */
int nsv__ws_close_code_valid(unsigned code);

/*
 * Check a received close payload. Returns 0 and sets *code (1005 when the
 * payload is empty; otherwise the reason is p + 2, n - 2 bytes); -1002 for
 * a 1-byte payload or a code not allowed on the wire (< 1000, 1004-1006,
 * 1015-2999, >= 5000); -1007 if the reason is not valid UTF-8. The caller
 * enforces the 125-byte control limit (nsv__ws_parse_header already does).
 */
int nsv__ws_check_close(const uint8_t *p, size_t n, uint16_t *code);

#endif
