/* cidr.h - address lists of listeners (NSV_LOPT_PROXY_FROM, ALLOW, DENY):
 * "10.0.0.0/8, 192.168.1.7 ::1,2001:db8::/32" parsed into a compact array
 * and matched against a socket address. */
#ifndef NSV_UTIL_CIDR_H
#define NSV_UTIL_CIDR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define NSV__CIDR_MAX 256

typedef struct nsv__cidr {
    uint8_t v6;        /* 0: IPv4 (addr[0..4)), 1: IPv6 */
    uint8_t bits;      /* prefix length */
    uint8_t addr[16];  /* network address, host bits zero */
} nsv__cidr;

/* Parse s[0..n) into out (room for NSV__CIDR_MAX). Returns the number of
 * entries (0 for an empty list), NSV_EINVAL with *bad / *badlen naming the
 * first bad entry, or NSV_ERANGE past NSV__CIDR_MAX entries. */
int nsv__cidr_parse(const char *s, size_t n, nsv__cidr *out, const char **bad, size_t *badlen);

/* 1 when the address matches one of the n entries. An IPv4 entry matches
 * AF_INET and IPv4-mapped AF_INET6 addresses; an IPv6 entry AF_INET6 ones;
 * any other family matches nothing. */
int nsv__cidr_match(const nsv__cidr *list, int n, const struct sockaddr *sa);

#endif
