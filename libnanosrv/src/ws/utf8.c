/* utf8.c - shift-based UTF-8 DFA with an ASCII fast path.
 *
 * Each state is a bit offset (a multiple of 6). The table row of a byte packs,
 * for every state s, the next state into bits [s, s+6), so one step is one
 * load and one shift: next = row[byte] >> state. The dependency chain per
 * byte is one shift, which is what makes non-ASCII text fast too.
 */
#include "utf8.h"

#include <string.h>

/* States. Each multi-byte state remembers how many continuation bytes are
 * still due and, right after E0/ED/F0/F4, the narrower range the next byte
 * must fall in; that narrowing is what rejects overlongs, surrogates and
 * code points above U+10FFFF at the first byte that proves them. */
enum {
    S_ACC = NSV__UTF8_ACCEPT, /* 0 */
    S_REJ = NSV__UTF8_REJECT, /* 6 */
    S_C1 = 12, /* one more 80..BF */
    S_C2 = 18, /* two more 80..BF */
    S_C3 = 24, /* three more 80..BF */
    S_E0 = 30, /* after E0: A0..BF, then one more (no overlong 3-byte) */
    S_ED = 36, /* after ED: 80..9F, then one more (no surrogates) */
    S_F0 = 42, /* after F0: 90..BF, then two more (no overlong 4-byte) */
    S_F4 = 48  /* after F4: 80..8F, then two more (<= U+10FFFF) */
};

/* Rows default every state to REJECT; T() overrides one transition by XOR,
 * which works because the 6-bit fields do not overlap. */
#define REJ_ALL                                                                        \
    (((uint64_t)S_REJ << S_ACC) | ((uint64_t)S_REJ << S_REJ) | ((uint64_t)S_REJ << S_C1) | \
     ((uint64_t)S_REJ << S_C2) | ((uint64_t)S_REJ << S_C3) | ((uint64_t)S_REJ << S_E0) |  \
     ((uint64_t)S_REJ << S_ED) | ((uint64_t)S_REJ << S_F0) | ((uint64_t)S_REJ << S_F4))
#define T(from, to) ((uint64_t)((to) ^ S_REJ) << (from))
#define ROW(t) (REJ_ALL ^ (t))

#define ASC ROW(T(S_ACC, S_ACC))
#define CONT(extra) ROW(T(S_C1, S_ACC) | T(S_C2, S_C1) | T(S_C3, S_C2) | (extra))
#define K80 CONT(T(S_ED, S_C1) | T(S_F4, S_C2)) /* 80..8F */
#define K90 CONT(T(S_ED, S_C1) | T(S_F0, S_C2)) /* 90..9F */
#define KA0 CONT(T(S_E0, S_C1) | T(S_F0, S_C2)) /* A0..BF */
#define BAD REJ_ALL                             /* C0, C1, F5..FF */
#define L2 ROW(T(S_ACC, S_C1))                  /* C2..DF */
#define LE0 ROW(T(S_ACC, S_E0))
#define LE1 ROW(T(S_ACC, S_C2)) /* E1..EC, EE, EF */
#define LED ROW(T(S_ACC, S_ED))
#define LF0 ROW(T(S_ACC, S_F0))
#define LF1 ROW(T(S_ACC, S_C3)) /* F1..F3 */
#define LF4 ROW(T(S_ACC, S_F4))

#define X2(x) x, x
#define X4(x) X2(x), X2(x)
#define X16(x) X4(x), X4(x), X4(x), X4(x)

static const uint64_t dfa[256] = {
    X16(ASC), X16(ASC), X16(ASC), X16(ASC), /* 00..3F */
    X16(ASC), X16(ASC), X16(ASC), X16(ASC), /* 40..7F */
    X16(K80),                               /* 80..8F */
    X16(K90),                               /* 90..9F */
    X16(KA0), X16(KA0),                     /* A0..BF */
    X2(BAD),                                /* C0..C1 */
    X16(L2), X4(L2), X4(L2), X4(L2), X2(L2), /* C2..DF */
    LE0,                                    /* E0 */
    X4(LE1), X4(LE1), X4(LE1),              /* E1..EC */
    LED,                                    /* ED */
    X2(LE1),                                /* EE..EF */
    LF0,                                    /* F0 */
    LF1, LF1, LF1,                          /* F1..F3 */
    LF4,                                    /* F4 */
    X4(BAD), X4(BAD), X2(BAD), BAD          /* F5..FF */
};

#define HI8 UINT64_C(0x8080808080808080)

/* One DFA step. The shift count is masked rather than the state, so on most
 * targets a step is a single shift; callers mask before comparing. */
#define STEP(s, b) ((s) = dfa[(b)] >> ((s) & 63))

uint32_t nsv__utf8_feed(uint32_t state, const uint8_t *p, size_t n)
{
    const uint8_t *end = p + n;
    uint64_t s = state & 63;

    /* 16-byte blocks: all-ASCII blocks between characters are skipped with
     * two word tests; any other block runs 16 branch-free DFA steps, which
     * beats per-byte branching on text that mixes ASCII and multi-byte
     * characters unpredictably. REJECT is absorbing, so checking it once per
     * block gives the same state as checking every byte. */
    while (end - p >= 16) {
        uint64_t a, b;
        memcpy(&a, p, 8);
        memcpy(&b, p + 8, 8);
        if (!((a | b) & HI8) && (s & 63) == S_ACC) {
            p += 16;
            continue;
        }
        /* Unrolled by hand: gcc keeps the loop otherwise. */
        STEP(s, p[0]), STEP(s, p[1]), STEP(s, p[2]), STEP(s, p[3]);
        STEP(s, p[4]), STEP(s, p[5]), STEP(s, p[6]), STEP(s, p[7]);
        STEP(s, p[8]), STEP(s, p[9]), STEP(s, p[10]), STEP(s, p[11]);
        STEP(s, p[12]), STEP(s, p[13]), STEP(s, p[14]), STEP(s, p[15]);
        p += 16;
        if ((s & 63) == S_REJ)
            return S_REJ;
    }
    while (p < end)
        STEP(s, *p++);
    return (uint32_t)(s & 63);
}
