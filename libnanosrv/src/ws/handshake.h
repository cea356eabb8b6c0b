/* handshake.h - the cryptographic part of the RFC 6455 opening handshake:
 * Sec-WebSocket-Key validation and Sec-WebSocket-Accept computation, with the
 * SHA-1 they need. No allocation, no global state. */
#ifndef NSV_WS_HANDSHAKE_H
#define NSV_WS_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

/* Length of a Sec-WebSocket-Accept value: base64 of a 20-byte digest. */
#define NSV__WS_ACCEPT_LEN 28

/* Incremental SHA-1 (FIPS 180-4). Used only for the handshake, where
 * collision resistance is not what the protocol relies on. */
typedef struct nsv__sha1_ctx {
    uint32_t h[5];
    uint64_t bytes;    /* total message length so far */
    uint8_t buf[64];   /* partial block */
} nsv__sha1_ctx;

void nsv__sha1_init(nsv__sha1_ctx *c);
void nsv__sha1_update(nsv__sha1_ctx *c, const void *data, size_t n);
void nsv__sha1_final(nsv__sha1_ctx *c, uint8_t out[20]);
/* One-shot convenience. */
void nsv__sha1(const void *data, size_t n, uint8_t out[20]);

/*
 * 0 if key (the Sec-WebSocket-Key value, surrounding whitespace already
 * removed) is the canonical base64 encoding of exactly 16 bytes: 22 alphabet
 * characters, the last with its 4 unused bits zero, then "==". Otherwise
 * NSV_EINVAL; the server answers 400.
 */
int nsv__ws_check_key(const char *key, size_t len);

/*
 * Write base64(SHA-1(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")) into out
 * (exactly 28 characters, not NUL-terminated). Returns 0, or NSV_EINVAL
 * without touching out if nsv__ws_check_key rejects key.
 */
int nsv__ws_accept_key(const char *key, size_t key_len, char out[NSV__WS_ACCEPT_LEN]);

/* n bytes from the kernel's CSPRNG (getrandom). 0, or NSV_ESYS. */
int nsv__ws_random(void *buf, size_t n);

/* A client's Sec-WebSocket-Key: base64 of 16 fresh random bytes, exactly
 * 24 characters (not NUL-terminated). 0, or NSV_ESYS. */
int nsv__ws_client_key(char out[24]);

#endif
