/* chunked.c - incremental decoder for the chunked transfer coding
 * (RFC 9112 section 7.1).
 *
 * A byte-at-a-time state machine handles the size, extension and trailer
 * lines; chunk data is moved in bulk. Extensions and trailers are checked
 * and discarded. Every line is bounded, and so is the trailer section as a
 * whole (lines and bytes), so a peer cannot make the decoder consume
 * unbounded input without producing output.
 */
#include "http/parse.h"

#include <string.h>

#define E400 (-400)

/* Longest size+extension line or trailer line, CRLF excluded. */
#define LINE_MAX_BYTES 4096
/* 15 hex digits stay below 2^60, hence below INT64_MAX. */
#define SIZE_MAX_DIGITS 15
/* The trailer section (RFC 9112 7.1.2 lets a recipient bound it): at most
 * this many lines and bytes of names and values in all. Without the caps
 * an endless trailer would pass any per-line limit and produce no output
 * for a body byte limit to see on the server side. */
#define TRAILER_MAX_LINES 100
#define TRAILER_MAX_BYTES 16384

enum {
    S_SIZE,     /* hex digits; line_len counts them */
    S_SIZE_WS,  /* BWS after the size, before ';' */
    S_EXT,      /* chunk extension, up to CR */
    S_SIZE_LF,  /* LF ending the size line */
    S_DATA,     /* remaining bytes of chunk data */
    S_DATA_CR,  /* CRLF after chunk data */
    S_DATA_LF,
    S_TR_START, /* start of a trailer line or of the final CRLF */
    S_TR_NAME,
    S_TR_VALUE,
    S_TR_LF,
    S_END_LF,   /* LF of the final CRLF */
    S_DONE,
    S_ERROR
};

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

static int is_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'))
        return 1;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* field-content and chunk-ext bytes: no CTL but HTAB. */
static int is_text(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

/* Counts one more byte on a bounded line. */
static int line_grow(nsv__chunked *d)
{
    return ++d->line_len <= LINE_MAX_BYTES ? 0 : E400;
}

/* Counts one trailer byte (and a new line). Once the last chunk is read
 * `remaining` holds no chunk size, so it keeps the section's counts:
 * lines in the high 32 bits, bytes in the low. */
static int trailer_grow(nsv__chunked *d, int new_line)
{
    uint64_t lines = (d->remaining >> 32) + (new_line ? 1 : 0), bytes = (d->remaining & 0xffffffffu) + 1;
    if (lines > TRAILER_MAX_LINES || bytes > TRAILER_MAX_BYTES)
        return E400;
    d->remaining = lines << 32 | bytes;
    return 0;
}

/* Advances the state machine by one non-data byte; returns 0, 1 (done) or
 * -400. */
static int step(nsv__chunked *d, unsigned char c)
{
    switch (d->state) {
    case S_SIZE: {
        int v = hexval(c);
        if (v >= 0) {
            if (d->line_len == SIZE_MAX_DIGITS)
                return E400;
            d->remaining = d->remaining << 4 | (uint64_t)v;
            d->line_len++;
            return 0;
        }
        if (d->line_len == 0)
            return E400;
        if (c == '\r')
            d->state = S_SIZE_LF;
        else if (c == ';')
            d->state = S_EXT;
        else if (c == ' ' || c == '\t')
            d->state = S_SIZE_WS;
        else
            return E400;
        return line_grow(d);
    }
    case S_SIZE_WS:
        if (c == ';')
            d->state = S_EXT;
        else if (c != ' ' && c != '\t')
            return E400; /* BWS is only allowed before an extension */
        return line_grow(d);
    case S_EXT:
        if (c == '\r')
            d->state = S_SIZE_LF;
        else if (!is_text(c))
            return E400;
        return line_grow(d);
    case S_SIZE_LF:
        if (c != '\n')
            return E400;
        d->line_len = 0;
        d->state = d->remaining ? S_DATA : S_TR_START;
        return 0;
    case S_DATA_CR:
        if (c != '\r')
            return E400;
        d->state = S_DATA_LF;
        return 0;
    case S_DATA_LF:
        if (c != '\n')
            return E400;
        d->state = S_SIZE;
        d->remaining = 0;
        d->line_len = 0;
        return 0;
    case S_TR_START:
        if (c == '\r') {
            d->state = S_END_LF;
            return 0;
        }
        if (!is_tchar(c))
            return E400; /* also obs-fold and empty names */
        d->state = S_TR_NAME;
        d->line_len = 1;
        return trailer_grow(d, 1);
    case S_TR_NAME:
        if (c == ':')
            d->state = S_TR_VALUE;
        else if (!is_tchar(c))
            return E400;
        return line_grow(d) ? E400 : trailer_grow(d, 0);
    case S_TR_VALUE:
        if (c == '\r') { /* line ends do not count toward the section's bytes */
            d->state = S_TR_LF;
            return line_grow(d);
        }
        if (!is_text(c))
            return E400;
        return line_grow(d) ? E400 : trailer_grow(d, 0);
    case S_TR_LF:
        if (c != '\n')
            return E400;
        d->state = S_TR_START;
        d->line_len = 0;
        return 0;
    case S_END_LF:
        if (c != '\n')
            return E400;
        d->state = S_DONE;
        return 1;
    }
    return E400;
}

int nsv__chunked_decode(nsv__chunked *d, char *dst, const char *src, size_t len,
                        size_t *consumed, size_t *produced)
{
    size_t in = 0, out = 0;
    int r = 0;

    if (d->state == S_DONE || d->state == S_ERROR) {
        *consumed = 0;
        *produced = 0;
        return d->state == S_DONE ? 1 : E400;
    }
    while (in < len) {
        if (d->state == S_DATA) {
            size_t n = len - in;
            if (n > d->remaining)
                n = (size_t)d->remaining;
            /* dst <= src + in always holds (out <= in), so memmove never
             * clobbers unread input. */
            if (dst + out != src + in)
                memmove(dst + out, src + in, n);
            in += n;
            out += n;
            d->remaining -= n;
            if (d->remaining == 0)
                d->state = S_DATA_CR;
            continue;
        }
        r = step(d, (unsigned char)src[in]);
        if (r < 0) {
            d->state = S_ERROR;
            break;
        }
        in++;
        if (r == 1)
            break;
    }
    *consumed = in;
    *produced = out;
    return r;
}
