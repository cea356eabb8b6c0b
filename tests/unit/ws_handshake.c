/* ws_handshake.c - SHA-1 vectors, Sec-WebSocket-Key checks and
 * Sec-WebSocket-Accept computation. */
#include "nanosrv.h"
#include "tap.h"
#include "ws/handshake.h"

#include <stdint.h>

static void hex(const uint8_t d[20], char out[41])
{
    for (int i = 0; i < 20; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void test_sha1(void)
{
    struct { const char *in; size_t repeat; const char *want; } v[] = {
        {"", 1, "da39a3ee5e6b4b0d3255bfef95601890afd80709"},
        {"abc", 1, "a9993e364706816aba3e25717850c26c9cd0d89d"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 1,
         "84983e441c3bd26ebaae4aa1f95129e5e54670f1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqr"
         "lmnopqrsmnopqrstnopqrstu", 1, "a49b2446a02c645bf419f995b67091253a04a259"},
        {"The quick brown fox jumps over the lazy dog", 1, "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12"},
        {"a", 1000000, "34aa973cd4c4daa4f61eeb2bdbad27316534016f"},
        {"a", 55, "c1c8bbdc22796e28c0e15163d20899b65621d65a"}, /* padding fits the block */
        {"a", 56, "c2db330f6083854c99d4b5bfb6e8f29f201be699"}, /* padding needs a 2nd block */
        {"a", 63, "03f09f5b158a7a8cdad920bddc29b81c18a551f5"},
        {"a", 64, "0098ba824b5c16427bd7a1122a5a442a25ec644d"},
        {"a", 65, "11655326c708d70319be2610e8a57d9a5b959d3b"},
        {"a", 119, "ee971065aaa017e0632a8ca6c77bb3bf8b1dfc56"},
        {"a", 120, "f34c1488385346a55709ba056ddd08280dd4c6d6"},
        {"a", 128, "ad5b3fdbcb526778c2839d2f151ea753995e26a0"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        nsv__sha1_ctx c;
        uint8_t d[20];
        char h[41];
        size_t n = strlen(v[i].in);
        nsv__sha1_init(&c);
        for (size_t r = 0; r < v[i].repeat; r++)
            nsv__sha1_update(&c, v[i].in, n);
        nsv__sha1_final(&c, d);
        hex(d, h);
        if (v[i].repeat == 1)
            ok(!strcmp(h, v[i].want), "SHA-1(\"%.20s%s\") = %s", v[i].in, n > 20 ? "..." : "", v[i].want);
        else
            ok(!strcmp(h, v[i].want), "SHA-1(\"%s\" x %zu) = %s", v[i].in, v[i].repeat, v[i].want);
    }

    /* Feeding in any two pieces gives the one-shot digest. */
    static uint8_t data[1024];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)i;
    uint8_t whole[20], part[20];
    char h[41];
    nsv__sha1(data, sizeof data, whole);
    hex(whole, h);
    ok(!strcmp(h, "5b00669c480d5cffbdfa8bdba99561160f2d1b77"), "SHA-1 of bytes 00..FF x 4");
    int good = 1;
    for (size_t cut = 0; cut <= 200; cut++) {
        nsv__sha1_ctx c;
        nsv__sha1_init(&c);
        nsv__sha1_update(&c, data, cut);
        nsv__sha1_update(&c, data + cut, 200 - cut);
        nsv__sha1_final(&c, part);
        uint8_t ref[20];
        nsv__sha1(data, 200, ref);
        good &= !memcmp(part, ref, 20);
    }
    ok(good, "SHA-1 split at every point of a 200-byte input = one-shot");
    good = 1;
    {
        nsv__sha1_ctx c;
        nsv__sha1_init(&c);
        for (size_t i = 0; i < sizeof data; i++)
            nsv__sha1_update(&c, data + i, 1);
        nsv__sha1_final(&c, part);
        good = !memcmp(part, whole, 20);
    }
    ok(good, "SHA-1 fed one byte at a time = one-shot");
}

static void test_accept(void)
{
    struct { const char *key, *accept; } v[] = {
        {"dGhlIHNhbXBsZSBub25jZQ==", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="}, /* RFC 6455 1.3 */
        {"x3JJHMbDL1EzLkh9GBhXDw==", "HSmrc0sMlYUkAGmm5OPpG2HaGWk="},
        {"AQIDBAUGBwgJCgsMDQ4PEA==", "C/0nmHhBztSRGR1CwL6Tf4ZjwpY="},
        {"AAAAAAAAAAAAAAAAAAAAAA==", "ICX+Yqv66kxgM0FcWaLWlFLwTAI="},
        {"/////////////////////w==", "XXpj4jYzLM2yUE0C7TIgMwTQh2g="},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char out[NSV__WS_ACCEPT_LEN];
        int r = nsv__ws_accept_key(v[i].key, strlen(v[i].key), out);
        is_int(r, 0, "accept key for %s: ok", v[i].key);
        is_mem(out, sizeof out, v[i].accept, "... = %s", v[i].accept);
    }
    char out[NSV__WS_ACCEPT_LEN];
    memset(out, '#', sizeof out);
    is_int(nsv__ws_accept_key("dGhlIHNhbXBsZSBub25jZQ=", 23, out), NSV_EINVAL,
           "accept of an invalid key: NSV_EINVAL");
    ok(out[0] == '#' && out[27] == '#', "... and out is untouched");
}

static void test_check_key(void)
{
    struct { const char *key; int want; const char *why; } v[] = {
        {"dGhlIHNhbXBsZSBub25jZQ==", 0, "RFC 6455 sample key"},
        {"AAAAAAAAAAAAAAAAAAAAAA==", 0, "all-zero nonce"},
        {"/////////////////////w==", 0, "all-ones nonce"},
        {"+++++++++++++++++++++g==", 0, "'+' and last char 'g'"},
        {"AAAAAAAAAAAAAAAAAAAAAQ==", 0, "last char 'Q'"},
        {"dGhlIHNhbXBsZSBub25jZQ=", NSV_EINVAL, "23 characters"},
        {"dGhlIHNhbXBsZSBub25jZQ===", NSV_EINVAL, "25 characters"},
        {"dGhlIHNhbXBsZSBub25jZQ", NSV_EINVAL, "padding missing"},
        {"dGhlIHNhbXBsZSBub25jZQA=", NSV_EINVAL, "one '=' only"},
        {"dGhlIHNhbXBsZSBub25jZR==", NSV_EINVAL, "non-canonical: padding bits set ('R')"},
        {"AAAAAAAAAAAAAAAAAAAAAB==", NSV_EINVAL, "non-canonical: padding bits set ('B')"},
        {"dGhlIHNhbXBsZSBub25j-Q==", NSV_EINVAL, "base64url '-' is not base64"},
        {"dGhlIHNhbXBsZSBub25j_Q==", NSV_EINVAL, "base64url '_' is not base64"},
        {"dGhlIHNhbXBsZSBub25j Q==", NSV_EINVAL, "embedded space"},
        {" dGhlIHNhbXBsZSBub25jZQ=", NSV_EINVAL, "leading space"},
        {"dGhlIHNhbXBs=SBub25jZQ==", NSV_EINVAL, "'=' in the middle"},
        {"dGhlIHNhbXBsZSBub25jZQQ=", NSV_EINVAL, "single '=': 17 bytes"},
        {"dGhlIHNhbXBsZSBub25jZQ==dGhl", NSV_EINVAL, "trailing garbage"},
        {"", NSV_EINVAL, "empty"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        is_int(nsv__ws_check_key(v[i].key, strlen(v[i].key)), v[i].want, "check_key: %s", v[i].why);
    is_int(nsv__ws_check_key(NULL, 24), NSV_EINVAL, "check_key: NULL");
    char nul[25] = "dGhlIHNhbXBsZSBub25jZQ==";
    nul[5] = '\0';
    is_int(nsv__ws_check_key(nul, 24), NSV_EINVAL, "check_key: embedded NUL");
}

int main(void)
{
    test_sha1();
    test_accept();
    test_check_key();
    return done_testing();
}
