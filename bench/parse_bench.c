/* parse_bench.c - request-head parser microbenchmark: ns per parse of a
 * typical browser-like request (about 300 bytes, 7 headers).
 * Build: cc -O2 -Ilibnanosrv/include -Ilibnanosrv/src bench/parse_bench.c \
 *        libnanosrv/src/http/parse.c -o parse_bench */
#define _GNU_SOURCE
#include "http/parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char req[] =
    "GET /api/v1/items?page=2&sort=name HTTP/1.1\r\n"
    "Host: www.example.com\r\n"
    "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0\r\n"
    "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n"
    "Accept-Language: en-US,en;q=0.5\r\n"
    "Accept-Encoding: gzip, deflate, br\r\n"
    "Connection: keep-alive\r\n"
    "Cookie: session=4f9a2c1e\r\n"
    "\r\n";

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 5000000;
    nsv__hdr h[64];
    nsv__request r;
    size_t len = sizeof req - 1;
    volatile int sink = 0;
    double best = 1e30;
    for (int round = 0; round < 5; round++) {
        double t0 = now();
        for (long i = 0; i < iters; i++) {
            /* Keep the compiler from hoisting the call out of the loop. */
            __asm__ volatile("" ::: "memory");
            sink += nsv__http_parse_request(req, len, &r, h, 64, 8192);
        }
        double ns = (now() - t0) / (double)iters;
        if (ns < best)
            best = ns;
    }
    if (nsv__http_parse_request(req, len, &r, h, 64, 8192) != (int)len) {
        fprintf(stderr, "benchmark request did not parse\n");
        return 1;
    }
    printf("request %zu bytes, %zu headers: %.1f ns/parse (%.2f ns/byte, %.0f MB/s)\n", len,
           r.num_headers, best, best / (double)len, (double)len / best * 1e3);
    (void)sink;
    return 0;
}
