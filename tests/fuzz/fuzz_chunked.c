/* fuzz_chunked.c - libFuzzer target for the chunked decoder. Decodes the
 * input in one piece, in place, and cut into pieces at points derived from
 * the input, and aborts unless all agree and the counters stay in range. */
#include "http/parse.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)          \
    do {                  \
        if (!(c))         \
            abort();      \
    } while (0)

typedef struct result {
    int ret;
    size_t consumed, produced;
} result;

/* Feeds src in pieces of at most `step` bytes (0: one piece), choosing each
 * length from a small PRNG when step is 1 << 30 (random cuts). */
static result feed(char *work, const char *src, size_t size, char *out, size_t step,
                   uint32_t seed, int inplace)
{
    nsv__chunked d;
    memset(&d, 0, sizeof d);
    result res = { 0, 0, 0 };
    if (inplace)
        memcpy(work, src, size);
    const char *in = inplace ? work : src;
    while (res.consumed < size) {
        size_t piece = size - res.consumed;
        if (step == (size_t)1 << 30) {
            seed = seed * 1103515245u + 12345u;
            size_t cut = (seed >> 16) % 64 + 1;
            piece = piece < cut ? piece : cut;
        } else if (step && piece > step) {
            piece = step;
        }
        size_t c = (size_t)-1, p = (size_t)-1;
        char *dst = inplace ? work + res.produced : out + res.produced;
        int r = nsv__chunked_decode(&d, dst, in + res.consumed, piece, &c, &p);
        CHECK(r == 0 || r == 1 || r == -400);
        CHECK(c <= piece && p <= c);
        if (inplace)
            memmove(out + res.produced, dst, p); /* collect for comparison */
        res.consumed += c;
        res.produced += p;
        res.ret = r;
        if (r != 0)
            break;
        CHECK(c == piece); /* 0 means every byte was taken */
    }
    return res;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *src = (const char *)data;
    char *work = malloc(size + 1), *o1 = malloc(size + 1), *o2 = malloc(size + 1);
    uint32_t seed = (uint32_t)size * 2654435761u;
    for (size_t i = 0; i < size && i < 16; i++)
        seed = seed * 31 + data[i];

    result one = feed(work, src, size, o1, 0, seed, 0);
    CHECK(one.produced <= one.consumed && one.consumed <= size);

    const size_t steps[] = { 0, 1, 7, (size_t)1 << 30 };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        for (int inplace = 0; inplace < 2; inplace++) {
            if (steps[i] == 1 && size > 512)
                continue; /* byte by byte is slow on big inputs */
            result other = feed(work, src, size, o2, steps[i], seed, inplace);
            CHECK(other.ret == one.ret);
            if (one.ret >= 0)
                CHECK(other.consumed == one.consumed && other.produced == one.produced &&
                      memcmp(o1, o2, one.produced) == 0);
        }
    }
    free(work);
    free(o1);
    free(o2);
    return 0;
}
