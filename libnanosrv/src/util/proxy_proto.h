/* proxy_proto.h - a pure parser of the PROXY protocol header (HAProxy's
 * proxy-protocol.txt, versions 1 and 2) that a load balancer sends before
 * a connection's own bytes. It reads the caller's buffer, never allocates
 * and never reads past n; results point into the input. */
#ifndef NSV_UTIL_PROXY_PROTO_H
#define NSV_UTIL_PROXY_PROTO_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define NSV__PP_V1_MAX 107   /* the longest v1 line, CRLF included */
#define NSV__PP_V2_MAX 4096  /* longest v2 header accepted (16 bytes + addresses + TLVs) */
#define NSV__PP_MAX NSV__PP_V2_MAX

enum { NSV__PP_ACCEPT_V1 = 1, NSV__PP_ACCEPT_V2 = 2 }; /* bits of `accept` */
enum { NSV__PP_NEED = 0, NSV__PP_ERROR = -1 };

typedef struct nsv__pp_str {
    const uint8_t *p; /* into the input; NULL when absent */
    uint16_t len;
} nsv__pp_str;

typedef struct nsv__pp_result {
    int version;   /* 1 or 2 */
    int local;     /* 1: use the socket's own endpoints (v2 LOCAL, v1 UNKNOWN,
                      v2 PROXY with AF_UNSPEC); the fields below are empty */
    int family;    /* AF_INET, AF_INET6 or AF_UNIX when local is 0 */
    struct sockaddr_storage src, dst; /* AF_INET / AF_INET6 with ports; AF_UNIX: sun_path */
    nsv__pp_str alpn, authority, unique_id, netns, ssl_version;
    int has_ssl;            /* PP2_TYPE_SSL present */
    uint8_t ssl_client;     /* its client field (PP2_CLIENT_SSL = 1, ...) */
    uint32_t ssl_verify;    /* 0: the client presented a verified certificate */
    int crc_checked;        /* PP2_TYPE_CRC32C was present and matched */
} nsv__pp_result;

/* Parse the header at the start of p[0..n) (the bytes seen so far).
 * accept: NSV__PP_ACCEPT_V1 | NSV__PP_ACCEPT_V2 (told apart by the first
 * byte). Returns the header length (> 0) with *r filled, NSV__PP_NEED (0)
 * when every byte seen may still be part of a header (all n bytes are then
 * header bytes, so a caller may consume them), or NSV__PP_ERROR with *why
 * set to a static reason. */
int nsv__pp_parse(const uint8_t *p, size_t n, int accept, nsv__pp_result *r, const char **why);

/* CRC-32C (Castagnoli) of p[0..n), as PP2_TYPE_CRC32C uses. */
uint32_t nsv__crc32c(const uint8_t *p, size_t n);

#endif
