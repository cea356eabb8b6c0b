/* ws_utf8.c - incremental UTF-8 validator: reference comparison, Markus Kuhn
 * style cases, fail-fast positions, fragment borders, ASCII fast path. */
#include "tap.h"
#include "ws/utf8.h"

#include <stdint.h>

#define ACC NSV__UTF8_ACCEPT
#define REJ NSV__UTF8_REJECT

/* ---- independent reference ------------------------------------------------
 * Decodes by bit patterns. A partial sequence is viable when the code points
 * reachable by completing it with continuation bytes (an interval) meet the
 * valid set [minimum for its length, U+10FFFF] minus the surrogates. */
enum { R_ACC, R_MID, R_REJ };

static int seq_len(uint8_t b)
{
    if (b < 0x80)
        return 1;
    if ((b & 0xE0) == 0xC0)
        return 2;
    if ((b & 0xF0) == 0xE0)
        return 3;
    if ((b & 0xF8) == 0xF0)
        return 4;
    return 0;
}

static int viable(const uint8_t *s, int have, int need)
{
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t lead_bits[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
    uint32_t lo = s[0] & lead_bits[need], hi = lo;
    for (int i = 1; i < need; i++) {
        uint32_t c = i < have ? (s[i] & 0x3Fu) : 0;
        uint32_t d = i < have ? (s[i] & 0x3Fu) : 0x3F;
        lo = lo << 6 | c;
        hi = hi << 6 | d;
    }
    if (hi < min_cp[need] || lo > 0x10FFFF)
        return 0;
    if (lo < min_cp[need])
        lo = min_cp[need];
    if (hi > 0x10FFFF)
        hi = 0x10FFFF;
    /* Only a surrogate-only interval is empty after removing D800..DFFF. */
    return !(lo >= 0xD800 && hi <= 0xDFFF);
}

/* Returns R_ACC / R_MID / R_REJ for s[0..n); *bad = index of the first byte
 * at which the text became invalid (n if it did not). */
static int ref_check(const uint8_t *s, size_t n, size_t *bad)
{
    size_t i = 0;
    *bad = n;
    while (i < n) {
        int need = seq_len(s[i]);
        if (need == 0) {
            *bad = i;
            return R_REJ;
        }
        /* Fail fast: the first byte after which no completion is valid. */
        int have = 1;
        for (;;) {
            if (!viable(s + i, have, need)) {
                *bad = i + (size_t)have - 1;
                return R_REJ;
            }
            if (have == need || i + (size_t)have == n)
                break;
            if ((s[i + have] & 0xC0) != 0x80) {
                *bad = i + (size_t)have;
                return R_REJ;
            }
            have++;
        }
        if (have < need)
            return R_MID;
        i += (size_t)need;
    }
    return R_ACC;
}

static int classify(uint32_t st) { return st == ACC ? R_ACC : st == REJ ? R_REJ : R_MID; }

/* Byte-at-a-time run: index where REJECT appeared, n if never. */
static size_t dfa_reject_at(const uint8_t *s, size_t n, uint32_t *final)
{
    uint32_t st = ACC;
    size_t at = n;
    for (size_t i = 0; i < n; i++) {
        st = nsv__utf8_feed(st, s + i, 1);
        if (st == REJ && at == n)
            at = i;
    }
    *final = st;
    return at;
}

/* Compares validator and reference on s; reports the first mismatch. */
static int agree(const uint8_t *s, size_t n)
{
    size_t rbad, dbad;
    uint32_t fin;
    int r = ref_check(s, n, &rbad);
    uint32_t whole = nsv__utf8_feed(ACC, s, n);
    dbad = dfa_reject_at(s, n, &fin);
    if (classify(whole) == r && classify(fin) == r && dbad == rbad)
        return 1;
    printf("# mismatch on");
    for (size_t i = 0; i < n; i++)
        printf(" %02X", s[i]);
    printf(": ref %d at %zu, whole %u, bytewise %u at %zu\n", r, rbad, whole, fin, dbad);
    return 0;
}

static void test_reference(void)
{
    uint8_t s[4];
    int good = 1;
    for (int a = 0; a < 256 && good; a++) {
        s[0] = (uint8_t)a;
        good = agree(s, 1);
        for (int b = 0; b < 256 && good; b++) {
            s[1] = (uint8_t)b;
            good = agree(s, 2);
        }
    }
    ok(good, "all 1- and 2-byte inputs agree with the reference (state and reject index)");

    /* Every class boundary, in every combination of 3 and 4 bytes. */
    static const uint8_t edge[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF,
                                   0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE,
                                   0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xF7, 0xF8, 0xFF};
    size_t ne = sizeof edge, count = 0;
    good = 1;
    for (size_t i = 0; i < ne && good; i++)
        for (size_t j = 0; j < ne && good; j++)
            for (size_t k = 0; k < ne && good; k++) {
                s[0] = edge[i], s[1] = edge[j], s[2] = edge[k];
                good = agree(s, 3);
                for (size_t l = 0; l < ne && good; l++, count++) {
                    s[3] = edge[l];
                    good = agree(s, 4);
                }
            }
    ok(good, "%zu boundary-byte 3/4-byte inputs agree with the reference", count);

    /* Every code point, encoded, is accepted; every surrogate rejected. */
    good = 1;
    for (uint32_t cp = 0; cp <= 0x10FFFF && good; cp++) {
        uint8_t e[4];
        size_t n;
        if (cp < 0x80)
            e[0] = (uint8_t)cp, n = 1;
        else if (cp < 0x800)
            e[0] = (uint8_t)(0xC0 | cp >> 6), e[1] = (uint8_t)(0x80 | (cp & 0x3F)), n = 2;
        else if (cp < 0x10000)
            e[0] = (uint8_t)(0xE0 | cp >> 12), e[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F)),
            e[2] = (uint8_t)(0x80 | (cp & 0x3F)), n = 3;
        else
            e[0] = (uint8_t)(0xF0 | cp >> 18), e[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F)),
            e[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F)), e[3] = (uint8_t)(0x80 | (cp & 0x3F)),
            n = 4;
        int surrogate = cp >= 0xD800 && cp <= 0xDFFF;
        uint32_t st = nsv__utf8_feed(ACC, e, n);
        good = surrogate ? st == REJ : st == ACC;
        if (!good)
            diag("code point U+%04X: state %u", cp, st);
    }
    ok(good, "every scalar value U+0000..U+10FFFF accepted, every surrogate rejected");
}

/* ---- Markus Kuhn style cases ----------------------------------------------- */
struct tcase {
    const char *name;
    const char *s;
    int want;     /* R_ACC, R_MID, R_REJ */
    int fail_at;  /* expected reject index, -1 if not rejected */
};

static void run_cases(const struct tcase *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = (const uint8_t *)t[i].s;
        size_t len = strlen(t[i].s);
        uint32_t fin;
        size_t at = dfa_reject_at(p, len, &fin);
        int st = classify(nsv__utf8_feed(ACC, p, len));
        int want_at = t[i].fail_at < 0 ? (int)len : t[i].fail_at;
        ok(st == t[i].want && classify(fin) == t[i].want && (int)at == want_at, "%s", t[i].name);
        if (st != t[i].want || (int)at != want_at)
            diag("state %d (want %d), rejected at %zu (want %d)", st, t[i].want, at, want_at);
    }
}

static void test_kuhn(void)
{
    static const struct tcase t[] = {
        {"1 greek kosme", "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5", R_ACC, -1},
        {"2.1 first 2-byte U+0080", "\xc2\x80", R_ACC, -1},
        {"2.1 first 3-byte U+0800", "\xe0\xa0\x80", R_ACC, -1},
        {"2.1 first 4-byte U+10000", "\xf0\x90\x80\x80", R_ACC, -1},
        {"2.1 first 5-byte (F8) rejected", "\xf8\x88\x80\x80\x80", R_REJ, 0},
        {"2.1 first 6-byte (FC) rejected", "\xfc\x84\x80\x80\x80\x80", R_REJ, 0},
        {"2.2 last 1-byte U+007F", "\x7f", R_ACC, -1},
        {"2.2 last 2-byte U+07FF", "\xdf\xbf", R_ACC, -1},
        {"2.2 last 3-byte U+FFFF", "\xef\xbf\xbf", R_ACC, -1},
        {"2.2 4-byte U+1FFFFF rejected at lead F7", "\xf7\xbf\xbf\xbf", R_REJ, 0},
        {"2.3 U+D7FF", "\xed\x9f\xbf", R_ACC, -1},
        {"2.3 U+E000", "\xee\x80\x80", R_ACC, -1},
        {"2.3 U+FFFD", "\xef\xbf\xbd", R_ACC, -1},
        {"2.3 U+10FFFF", "\xf4\x8f\xbf\xbf", R_ACC, -1},
        {"2.3 U+110000 rejected at 2nd byte", "\xf4\x90\x80\x80", R_REJ, 1},
        {"3.1 lone continuation 80", "\x80", R_REJ, 0},
        {"3.1 lone continuation BF", "\xbf", R_REJ, 0},
        {"3.1 continuations after ASCII", "ab\x80\xbf", R_REJ, 2},
        {"3.1 extra continuation after 2-byte", "\xc3\xa9\x80", R_REJ, 2},
        {"3.2 lonely 2-byte start then space", "\xc3 ", R_REJ, 1},
        {"3.2 lonely 3-byte start then space", "\xe1 ", R_REJ, 1},
        {"3.2 lonely 4-byte start then space", "\xf1 ", R_REJ, 1},
        {"3.2 3-byte start, 1 cont, then space", "\xe1\x80 ", R_REJ, 2},
        {"3.3 2-byte missing last at end", "\xc3", R_MID, -1},
        {"3.3 3-byte missing last at end", "\xe2\x82", R_MID, -1},
        {"3.3 4-byte missing last at end", "\xf0\x9f\x98", R_MID, -1},
        {"3.3 overlong 2-byte lead C0 alone", "\xc0", R_REJ, 0},
        {"3.3 E0 80 is overlong already", "\xe0\x80", R_REJ, 1},
        {"3.4 truncated 3-byte then ASCII", "\xe2\x82x", R_REJ, 2},
        {"3.5 impossible FE", "\xfe", R_REJ, 0},
        {"3.5 impossible FF", "\xff", R_REJ, 0},
        {"3.5 FE FE FF FF", "\xfe\xfe\xff\xff", R_REJ, 0},
        {"4.1 overlong '/' 2-byte", "\xc0\xaf", R_REJ, 0},
        {"4.1 overlong '/' 3-byte", "\xe0\x80\xaf", R_REJ, 1},
        {"4.1 overlong '/' 4-byte", "\xf0\x80\x80\xaf", R_REJ, 1},
        {"4.1 overlong '/' 5-byte", "\xf8\x80\x80\x80\xaf", R_REJ, 0},
        {"4.2 max overlong 2-byte C1 BF", "\xc1\xbf", R_REJ, 0},
        {"4.2 max overlong 3-byte E0 9F BF", "\xe0\x9f\xbf", R_REJ, 1},
        {"4.2 max overlong 4-byte F0 8F BF BF", "\xf0\x8f\xbf\xbf", R_REJ, 1},
        {"4.3 overlong NUL 2-byte", "\xc0\x80", R_REJ, 0},
        {"4.3 overlong NUL 3-byte", "\xe0\x80\x80", R_REJ, 1},
        {"4.3 overlong NUL 4-byte", "\xf0\x80\x80\x80", R_REJ, 1},
        {"5.1 surrogate U+D800", "\xed\xa0\x80", R_REJ, 1},
        {"5.1 surrogate U+DB7F", "\xed\xad\xbf", R_REJ, 1},
        {"5.1 surrogate U+DB80", "\xed\xae\x80", R_REJ, 1},
        {"5.1 surrogate U+DBFF", "\xed\xaf\xbf", R_REJ, 1},
        {"5.1 surrogate U+DC00", "\xed\xb0\x80", R_REJ, 1},
        {"5.1 surrogate U+DF80", "\xed\xbe\x80", R_REJ, 1},
        {"5.1 surrogate U+DFFF", "\xed\xbf\xbf", R_REJ, 1},
        {"5.2 surrogate pair U+D800 U+DC00", "\xed\xa0\x80\xed\xb0\x80", R_REJ, 1},
        {"5.2 surrogate pair U+DBFF U+DFFF", "\xed\xaf\xbf\xed\xbf\xbf", R_REJ, 1},
        {"5.3 noncharacter U+FFFE is valid", "\xef\xbf\xbe", R_ACC, -1},
        {"5.3 noncharacter U+FFFF is valid", "\xef\xbf\xbf", R_ACC, -1},
        {"5.3 noncharacter U+10FFFE is valid", "\xf4\x8f\xbf\xbe", R_ACC, -1},
        {"5.3 noncharacter U+FDD0 is valid", "\xef\xb7\x90", R_ACC, -1},
        {"> U+10FFFF at lead F5", "\xf5\x80\x80\x80", R_REJ, 0},
        {"Autobahn 6.3.1 kosme + surrogate + 'edited'",
         "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80\x65\x64\x69\x74\x65\x64",
         R_REJ, 12},
        {"Autobahn 6.4.1 kosme + F4 90 80 80", "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xf4\x90\x80\x80"
         "\x65\x64\x69\x74\x65\x64", R_REJ, 12},
        {"Autobahn 6.4.3 kosme + F4 90 (fail at 90)", "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xf4\x90", R_REJ, 12},
        {"Hello-\\xC2\\xB5@\\xC3\\x9F\\xC3\\xB6\\xC3\\xA4\\xC3\\xBC\\xC3\\xA0\\xC3\\xA1-UTF-8!!",
         "Hello-\xc2\xb5@\xc3\x9f\xc3\xb6\xc3\xa4\xc3\xbc\xc3\xa0\xc3\xa1-UTF-8!!", R_ACC, -1},
        {"emoji U+1F600", "\xf0\x9f\x98\x80", R_ACC, -1},
        {"empty text", "", R_ACC, -1},
    };
    run_cases(t, sizeof t / sizeof t[0]);
}

/* ---- fragment borders -------------------------------------------------------
 * A character split across fragments is "in the middle" at the border, valid
 * once completed, and an error if the message ends there. */
static void test_borders(void)
{
    static const char *chars[] = {"\xc2\x80", "\xdf\xbf", "\xe0\xa0\x80", "\xed\x9f\xbf",
                                  "\xee\x80\x80", "\xef\xbf\xbf", "\xf0\x90\x80\x80",
                                  "\xf3\xbf\xbf\xbf", "\xf4\x8f\xbf\xbf"};
    int mid_ok = 1, cont_ok = 1, end_bad = 1, any_split = 1;
    for (size_t c = 0; c < sizeof chars / sizeof chars[0]; c++) {
        char text[32];
        snprintf(text, sizeof text, "ab%sz", chars[c]);
        const uint8_t *p = (const uint8_t *)text;
        size_t n = strlen(text), clen = strlen(chars[c]);
        for (size_t k = 1; k < clen; k++) {
            uint32_t st = nsv__utf8_feed(ACC, p, 2 + k); /* cut inside the char */
            mid_ok &= st != ACC && st != REJ;
            cont_ok &= nsv__utf8_feed(st, p + 2 + k, n - 2 - k) == ACC;
            end_bad &= st != ACC; /* a final fragment ending here fails */
        }
        /* Every split point of the whole text, in two and three pieces. */
        for (size_t i = 0; i <= n; i++)
            for (size_t j = i; j <= n; j++) {
                uint32_t st = nsv__utf8_feed(ACC, p, i);
                st = nsv__utf8_feed(st, p + i, j - i);
                any_split &= nsv__utf8_feed(st, p + j, n - j) == ACC;
            }
    }
    ok(mid_ok, "a character cut at a fragment border leaves the state in the middle");
    ok(cont_ok, "the next fragment completes it: ACCEPT");
    ok(end_bad, "a message ending at that border is not ACCEPT (1007)");
    ok(any_split, "three-piece feeding at every split point gives ACCEPT");

    /* Invalid continuation arriving in the next fragment fails there. */
    uint32_t st = nsv__utf8_feed(ACC, (const uint8_t *)"\xed", 1);
    ok(st != ACC && st != REJ, "ED alone is in the middle");
    is_int(nsv__utf8_feed(st, (const uint8_t *)"\xa0", 1), REJ,
           "ED | A0 across fragments: surrogate rejected at the first byte of the next one");
    st = nsv__utf8_feed(ACC, (const uint8_t *)"\xf0\x9f", 2);
    is_int(nsv__utf8_feed(st, (const uint8_t *)"A", 1), REJ,
           "F0 9F | 'A': missing continuation rejected");
    is_int(nsv__utf8_feed(REJ, (const uint8_t *)"abc", 3), REJ, "REJECT is absorbing");
    is_int(nsv__utf8_feed(st, (const uint8_t *)"", 0), st, "an empty fragment keeps the state");
    ok(nsv__utf8_valid((const uint8_t *)"caf\xc3\xa9", 5), "nsv__utf8_valid: valid");
    ok(!nsv__utf8_valid((const uint8_t *)"caf\xc3", 4), "nsv__utf8_valid: truncated is not valid");
}

/* ---- ASCII fast path ----------------------------------------------------------
 * Put one interesting sequence at every position of a long ASCII buffer, at
 * every alignment, so word-at-a-time skipping cannot step over it. */
static void test_fast_path(void)
{
    static uint8_t buf[64 + 16 + 8];
    /* Truncated sequences matter most: a lead byte at the end of one block
     * followed by an all-ASCII block must still be rejected. */
    static const char *probe[] = {"\xff", "\x80", "\xc3\xa9", "\xe0\x80\x80", "\xf0\x9f\x98\x80",
                                  "\xed\xa0\x80", "\xc3", "\xe2\x82", "\xf0\x9f\x98"};
    int good = 1;
    for (size_t pi = 0; pi < sizeof probe / sizeof probe[0] && good; pi++) {
        size_t plen = strlen(probe[pi]);
        for (size_t align = 0; align < 16 && good; align++)
            for (size_t len = plen; len <= 64 && good; len++)
                for (size_t pos = 0; pos + plen <= len && good; pos++) {
                    uint8_t *p = buf + align;
                    memset(p, 'a', len);
                    memcpy(p + pos, probe[pi], plen);
                    good = agree(p, len);
                    if (!good)
                        diag("probe %zu align %zu len %zu pos %zu", pi, align, len, pos);
                }
    }
    ok(good, "sequences at every position/alignment inside ASCII runs are seen");

    /* A lead byte right at the end of a long ASCII run is "in the middle". */
    memset(buf, 'x', sizeof buf);
    buf[sizeof buf - 1] = 0xE2;
    uint32_t st = nsv__utf8_feed(ACC, buf, sizeof buf);
    ok(st != ACC && st != REJ, "ASCII run then a lead byte at the very end: in the middle");

    /* Mixed: long random valid text, compared with byte-at-a-time. */
    static uint8_t text[8192];
    static const char *pieces[] = {"a", "hello ", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
                                   "0123456789abcdef", "\xd0\x96", " "};
    uint32_t seed = 12345;
    size_t n = 0;
    while (n + 16 < sizeof text) {
        seed = seed * 1103515245 + 12345;
        const char *pc = pieces[(seed >> 16) % 8];
        memcpy(text + n, pc, strlen(pc));
        n += strlen(pc);
    }
    uint32_t fin;
    ok(nsv__utf8_feed(ACC, text, n) == ACC && dfa_reject_at(text, n, &fin) == n && fin == ACC,
       "8 KiB of mixed valid text: whole and bytewise ACCEPT");
    int split_good = 1;
    for (size_t cut = 0; cut <= n; cut += 7) {
        uint32_t s2 = nsv__utf8_feed(nsv__utf8_feed(ACC, text, cut), text + cut, n - cut);
        split_good &= s2 == ACC;
    }
    ok(split_good, "mixed text split every 7 bytes: ACCEPT");
    text[n / 2] = 0xC0;
    ok(nsv__utf8_feed(ACC, text, n) == REJ, "one C0 in the middle of it: REJECT");
}

int main(void)
{
    test_reference();
    test_kuhn();
    test_borders();
    test_fast_path();
    return done_testing();
}
