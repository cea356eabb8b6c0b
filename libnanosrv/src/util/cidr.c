/* cidr.c - listener address lists (see cidr.h). */
#include "cidr.h"
#include "../internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

static int sep(char c) { return c == ',' || c == ' '; }

/* One entry "addr" or "addr/bits"; 0 or -1. */
static int parse_one(const char *s, size_t n, nsv__cidr *e)
{
    char buf[INET6_ADDRSTRLEN];
    const char *slash = memchr(s, '/', n);
    size_t alen = slash ? (size_t)(slash - s) : n;
    if (alen == 0 || alen >= sizeof buf)
        return -1;
    memcpy(buf, s, alen);
    buf[alen] = 0;
    memset(e, 0, sizeof *e);
    if (inet_pton(AF_INET, buf, e->addr) == 1)
        e->v6 = 0;
    else if (inet_pton(AF_INET6, buf, e->addr) == 1)
        e->v6 = 1;
    else
        return -1;
    unsigned max = e->v6 ? 128 : 32, bits = max;
    if (slash) {
        const char *d = slash + 1;
        size_t dl = n - alen - 1;
        if (dl == 0 || dl > 3 || (dl > 1 && d[0] == '0'))
            return -1;
        bits = 0;
        for (size_t i = 0; i < dl; i++) {
            if (d[i] < '0' || d[i] > '9')
                return -1;
            bits = bits * 10 + (unsigned)(d[i] - '0');
        }
        if (bits > max)
            return -1;
    }
    e->bits = (uint8_t)bits;
    /* Host bits past the prefix are a typo more often than not: refuse. */
    for (unsigned i = bits; i < max; i++)
        if (e->addr[i / 8] & (0x80u >> (i % 8)))
            return -1;
    return 0;
}

int nsv__cidr_parse(const char *s, size_t n, nsv__cidr *out, const char **bad, size_t *badlen)
{
    int count = 0;
    size_t i = 0;
    while (i < n) {
        while (i < n && sep(s[i]))
            i++;
        if (i == n)
            break;
        size_t j = i;
        while (j < n && !sep(s[j]))
            j++;
        if (count == NSV__CIDR_MAX)
            return NSV_ERANGE;
        if (parse_one(s + i, j - i, &out[count]) != 0) {
            *bad = s + i;
            *badlen = j - i;
            return NSV_EINVAL;
        }
        count++;
        i = j;
    }
    return count;
}

static int prefix_eq(const uint8_t *a, const uint8_t *net, unsigned bits)
{
    unsigned full = bits / 8, rest = bits % 8;
    if (memcmp(a, net, full) != 0)
        return 0;
    if (rest == 0)
        return 1;
    uint8_t mask = (uint8_t)(0xFFu << (8 - rest));
    return (a[full] & mask) == net[full];
}

int nsv__cidr_match(const nsv__cidr *list, int n, const struct sockaddr *sa)
{
    const uint8_t *v4 = NULL, *v6 = NULL;
    if (sa->sa_family == AF_INET) {
        v4 = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        v6 = a->s6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a))
            v4 = v6 + 12;
    } else {
        return 0;
    }
    for (int i = 0; i < n; i++) {
        const nsv__cidr *e = &list[i];
        if (e->v6 ? v6 && prefix_eq(v6, e->addr, e->bits) : v4 && prefix_eq(v4, e->addr, e->bits))
            return 1;
    }
    return 0;
}
