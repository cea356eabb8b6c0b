/* utf8.h - incremental UTF-8 validator (RFC 3629) for WebSocket text.
 *
 * A text message may arrive in many frames, and each frame in many reads, so
 * the validator is a state value the caller keeps between calls:
 *
 *     uint32_t st = NSV__UTF8_ACCEPT;
 *     st = nsv__utf8_feed(st, chunk1, n1);   // REJECT: close with 1007 now
 *     st = nsv__utf8_feed(st, chunk2, n2);
 *     // at the end of the message: st must be NSV__UTF8_ACCEPT
 *
 * Any other state means "inside a multi-byte sequence": fine between chunks,
 * an error (1007) when the message ends there.
 *
 * The validator fails fast: the state becomes REJECT at the first byte after
 * which no continuation could form valid UTF-8 (e.g. at the second byte of
 * E0 80, ED A0 or F4 90, at C0/C1/F5..FF, at a stray continuation byte). It
 * rejects overlong forms, UTF-16 surrogates (U+D800..U+DFFF) and code points
 * above U+10FFFF. REJECT is absorbing. Runs of ASCII are checked 16 bytes per
 * step. No allocation, no global state: safe from any thread.
 */
#ifndef NSV_WS_UTF8_H
#define NSV_WS_UTF8_H

#include <stddef.h>
#include <stdint.h>

#define NSV__UTF8_ACCEPT 0u /* between characters: a complete, valid text */
#define NSV__UTF8_REJECT 6u /* invalid; stays so for any further input */

/* Validate p[0..n) continuing from state; returns the new state. */
uint32_t nsv__utf8_feed(uint32_t state, const uint8_t *p, size_t n);

/* 1 if p[0..n) is complete, valid UTF-8. */
static inline int nsv__utf8_valid(const uint8_t *p, size_t n)
{
    return nsv__utf8_feed(NSV__UTF8_ACCEPT, p, n) == NSV__UTF8_ACCEPT;
}

#endif
