/* deflate.h - WebSocket permessage-deflate (RFC 7692): the offer parser and
 * answer writer of the handshake (always built, pure), and the per-message
 * compressor / decompressor over zlib (NSV_WITH_ZLIB; without it
 * nsv__pmd_available() is 0 and NSV_OPT_WS_DEFLATE 1 is refused).
 *
 * Windows. zlib cannot build a raw deflate stream with a 256-byte window
 * (windowBits 8 is refused since zlib 1.2.9; before, it silently became 9,
 * whose matches a 256-byte inflater rejects). So a server window of 8 bits,
 * whether the option asks for it or the client's server_max_window_bits=8
 * does, is agreed to and kept by sending every message uncompressed (RFC
 * 7692 lets any message go plain). Where the server picks the client's
 * window (client_max_window_bits without a value) it never picks 8, since
 * zlib-based clients cannot compress with it; a client that offers 8 itself
 * gets 8. Received messages inflate with at least a 512-byte window, which
 * also takes what older zlib makes of "8".
 *
 * Memory per connection, each stream created at its first use and freed
 * with the connection: the deflater uses memLevel = window bits - 7 (8 at
 * 15), so about 1 << (wbits + 3) bytes (256 KiB at 15, 32 KiB at 12, 8 KiB
 * at 10) plus ~6 KiB of state; the inflater 1 << wbits plus ~7 KiB. */
#ifndef NSV_WS_DEFLATE_H
#define NSV_WS_DEFLATE_H

#include "../internal.h"
#include <stddef.h>
#include <stdint.h>

/* What a handshake agreed. */
typedef struct nsv__pmd_cfg {
    uint8_t on;           /* an offer was accepted */
    uint8_t server_nct;   /* server_no_context_takeover: reset our deflater per message */
    uint8_t client_nct;   /* client_no_context_takeover: the peer resets; we may too */
    uint8_t smwb;         /* the offer had server_max_window_bits: the answer repeats it */
    uint8_t cmwb;         /* the answer carries client_max_window_bits */
    uint8_t server_bits;  /* 8..15: our deflate window (8: we send plain) */
    uint8_t client_bits;  /* 8..15: the peer's window (15 unless cmwb) */
} nsv__pmd_cfg;

/* 1 if this build compresses (zlib). */
int nsv__pmd_available(void);

/*
 * Parse one Sec-WebSocket-Extensions value (RFC 6455 9.1, RFC 7692 5 and 7)
 * and take its first acceptable permessage-deflate offer. An offer with an
 * unknown, duplicate or badly valued parameter is declined and the next one
 * tried; a syntax error ends the value (no later offer is taken from it).
 * max_bits (8..15) is the server's window limit. Returns 1 with *cfg set, or
 * 0 (nothing accepted; *cfg untouched).
 */
int nsv__pmd_negotiate(const char *v, size_t n, int max_bits, nsv__pmd_cfg *cfg);

/* The answer line "Sec-WebSocket-Extensions: permessage-deflate...\r\n" into
 * out (at least NSV__PMD_ANSWER_MAX bytes). Returns its length. */
#define NSV__PMD_ANSWER_MAX 160
size_t nsv__pmd_answer(const nsv__pmd_cfg *cfg, char *out);

/* A cfg in 16 bits (kept on the connection between parse and upgrade). */
uint16_t nsv__pmd_pack(const nsv__pmd_cfg *cfg);
void nsv__pmd_unpack(uint16_t v, nsv__pmd_cfg *cfg);

/* A connection's compression state; streams are made lazily. */
typedef struct nsv__pmd nsv__pmd;

nsv__pmd *nsv__pmd_new(const nsv__alloc *a, const nsv__pmd_cfg *cfg);
void nsv__pmd_free(nsv__pmd *p);
/* 1 if outgoing messages may be compressed (server window of 9+ bits). */
int nsv__pmd_can_send(const nsv__pmd *p);

/* Receives inflated bytes in order; returns 0 or a negative close code. */
typedef int (*nsv__pmd_sink)(void *ctx, const uint8_t *p, size_t n);

/*
 * Inflate a piece of a compressed message's payload; last: the message's
 * final piece (its 00 00 ff ff tail is added here, and the message's count
 * starts again). limit: most inflated bytes a message may have (0: none);
 * they are counted as they come out, so a message past it stops with -1009
 * after at most 16 KiB more. Returns 0, -1007 (corrupt data), -1009, -1011
 * (no memory) or what the sink returned.
 */
int nsv__pmd_inflate(nsv__pmd *p, const uint8_t *in, size_t n, int last, uint64_t limit,
                     nsv__pmd_sink sink, void *ctx);

/* Room the compressed form of n bytes may need in nsv__pmd_deflate. */
size_t nsv__pmd_bound(size_t n);

/*
 * Compress one whole message into out[0..cap) (cap >= nsv__pmd_bound(n)),
 * sync-flushed, its 00 00 ff ff tail removed. Returns the length, or -1 (no
 * memory, or no room): the stream was reset (so the peer's context stays
 * consistent) and the message should go uncompressed.
 */
long nsv__pmd_deflate(nsv__pmd *p, const uint8_t *in, size_t n, uint8_t *out, size_t cap);

#endif
