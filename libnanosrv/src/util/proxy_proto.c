/* proxy_proto.c - PROXY protocol v1 and v2 headers (see proxy_proto.h).
 * Strict on purpose: the header comes from a trusted front, so anything
 * off the specification is a misconfiguration or an attack, and closing
 * beats guessing. */
#include "proxy_proto.h"

#include <arpa/inet.h>
#include <string.h>
#include <sys/un.h>

static const uint8_t v2sig[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};

enum {
    PP2_TYPE_ALPN = 0x01, PP2_TYPE_AUTHORITY = 0x02, PP2_TYPE_CRC32C = 0x03, PP2_TYPE_NOOP = 0x04,
    PP2_TYPE_UNIQUE_ID = 0x05, PP2_TYPE_SSL = 0x20, PP2_SUBTYPE_SSL_VERSION = 0x21, PP2_TYPE_NETNS = 0x30
};

static int fail(const char **why, const char *msg)
{
    *why = msg;
    return NSV__PP_ERROR;
}

static uint32_t crc32c_update(uint32_t crc, const uint8_t *p, size_t n)
{
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return crc;
}

uint32_t nsv__crc32c(const uint8_t *p, size_t n) { return ~crc32c_update(~0u, p, n); }

/* ---- version 1 ---- */

/* A port: 0-65535 in decimal, no sign, no leading zero but "0" itself. */
static int v1_port(const uint8_t *s, size_t n, uint16_t *out)
{
    if (n == 0 || n > 5 || (n > 1 && s[0] == '0'))
        return -1;
    uint32_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (uint32_t)(s[i] - '0');
    }
    if (v > 65535)
        return -1;
    *out = (uint16_t)v;
    return 0;
}

static int v1_addr(int fam, const uint8_t *s, size_t n, uint16_t port, struct sockaddr_storage *ss)
{
    char buf[INET6_ADDRSTRLEN];
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, s, n);
    buf[n] = 0;
    memset(ss, 0, sizeof *ss);
    if (fam == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)ss;
        a->sin_family = AF_INET;
        a->sin_port = htons(port);
        return inet_pton(AF_INET, buf, &a->sin_addr) == 1 ? 0 : -1;
    }
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    return inet_pton(AF_INET6, buf, &a->sin6_addr) == 1 ? 0 : -1;
}

static int parse_v1(const uint8_t *p, size_t n, nsv__pp_result *r, const char **why)
{
    size_t k = n < 6 ? n : 6;
    if (memcmp(p, "PROXY ", k) != 0)
        return fail(why, "v1: the line does not start with \"PROXY \"");
    /* The line ends at its CR; CRLF included it is at most 107 bytes. */
    size_t end = 0;
    int found = 0;
    for (size_t i = 0; i < n && i < NSV__PP_V1_MAX - 1; i++) {
        if (p[i] == '\r') {
            if (i + 1 < n && p[i + 1] != '\n')
                return fail(why, "v1: CR not followed by LF");
            if (i + 1 >= n)
                return NSV__PP_NEED;
            end = i;
            found = 1;
            break;
        }
        if (p[i] < 0x20 || p[i] > 0x7E)
            return fail(why, "v1: a control or non-ASCII byte in the line");
    }
    if (!found)
        return n >= NSV__PP_V1_MAX - 1 ? fail(why, "v1: no CRLF within 107 bytes") : NSV__PP_NEED;
    const uint8_t *s = p + 6;
    size_t len = end - 6;
    memset(r, 0, sizeof *r);
    r->version = 1;
    if (len >= 7 && memcmp(s, "UNKNOWN", 7) == 0 && (len == 7 || s[7] == ' ')) {
        r->local = 1; /* the rest of the line is to be ignored */
        return (int)end + 2;
    }
    int fam;
    if (len >= 5 && memcmp(s, "TCP4 ", 5) == 0)
        fam = AF_INET;
    else if (len >= 5 && memcmp(s, "TCP6 ", 5) == 0)
        fam = AF_INET6;
    else
        return fail(why, "v1: protocol is not TCP4, TCP6 or UNKNOWN");
    const uint8_t *tok[4];
    size_t tlen[4];
    size_t ntok = 0, i = 5;
    while (i <= len) {
        size_t j = i;
        while (j < len && s[j] != ' ')
            j++;
        if (j == i)
            return fail(why, "v1: fields must be separated by exactly one space");
        if (ntok == 4)
            return fail(why, "v1: too many fields");
        tok[ntok] = s + i;
        tlen[ntok++] = j - i;
        i = j + 1;
    }
    if (ntok != 4)
        return fail(why, "v1: too few fields");
    uint16_t sport, dport;
    if (v1_port(tok[2], tlen[2], &sport) || v1_port(tok[3], tlen[3], &dport))
        return fail(why, "v1: a port is not a decimal number 0-65535");
    if (v1_addr(fam, tok[0], tlen[0], sport, &r->src) || v1_addr(fam, tok[1], tlen[1], dport, &r->dst))
        return fail(why, fam == AF_INET ? "v1: an address is not an IPv4 address"
                                        : "v1: an address is not an IPv6 address");
    r->family = fam;
    return (int)end + 2;
}

/* ---- version 2 ---- */

static int set_once(nsv__pp_str *f, const uint8_t *v, uint16_t l, const char **why, const char *dup)
{
    if (f->p)
        return fail(why, dup);
    f->p = v;
    f->len = l;
    return 0;
}

/* Walk TLVs p[off..end): top level (ssl 0) or inside PP2_TYPE_SSL (ssl 1).
 * hdr/total: the whole header, for PP2_TYPE_CRC32C. */
static int walk_tlvs(const uint8_t *hdr, size_t total, size_t off, size_t end, int ssl,
                     nsv__pp_result *r, const char **why)
{
    while (off < end) {
        if (end - off < 3)
            return fail(why, "v2: a TLV header overruns the header");
        uint8_t t = hdr[off];
        uint16_t l = (uint16_t)(hdr[off + 1] << 8 | hdr[off + 2]);
        off += 3;
        if (l > end - off)
            return fail(why, "v2: a TLV overruns the header");
        const uint8_t *v = hdr + off;
        int e = 0;
        if (ssl) {
            if (t == PP2_SUBTYPE_SSL_VERSION)
                e = set_once(&r->ssl_version, v, l, why, "v2: PP2_SUBTYPE_SSL_VERSION twice");
        } else if (t == PP2_TYPE_ALPN) {
            e = set_once(&r->alpn, v, l, why, "v2: PP2_TYPE_ALPN twice");
        } else if (t == PP2_TYPE_AUTHORITY) {
            e = set_once(&r->authority, v, l, why, "v2: PP2_TYPE_AUTHORITY twice");
        } else if (t == PP2_TYPE_CRC32C) {
            if (l != 4)
                return fail(why, "v2: PP2_TYPE_CRC32C is not 4 bytes");
            if (r->crc_checked)
                return fail(why, "v2: PP2_TYPE_CRC32C twice");
            static const uint8_t zero[4];
            uint32_t c = crc32c_update(~0u, hdr, off);
            c = crc32c_update(c, zero, 4);
            c = ~crc32c_update(c, hdr + off + 4, total - off - 4);
            uint32_t want = (uint32_t)v[0] << 24 | (uint32_t)v[1] << 16 | (uint32_t)v[2] << 8 | v[3];
            if (c != want)
                return fail(why, "v2: PP2_TYPE_CRC32C does not match");
            r->crc_checked = 1;
        } else if (t == PP2_TYPE_UNIQUE_ID) {
            if (l > 128)
                return fail(why, "v2: PP2_TYPE_UNIQUE_ID longer than 128 bytes");
            e = set_once(&r->unique_id, v, l, why, "v2: PP2_TYPE_UNIQUE_ID twice");
        } else if (t == PP2_TYPE_SSL) {
            if (r->has_ssl)
                return fail(why, "v2: PP2_TYPE_SSL twice");
            if (l < 5)
                return fail(why, "v2: PP2_TYPE_SSL shorter than 5 bytes");
            r->has_ssl = 1;
            r->ssl_client = v[0];
            r->ssl_verify = (uint32_t)v[1] << 24 | (uint32_t)v[2] << 16 | (uint32_t)v[3] << 8 | v[4];
            e = walk_tlvs(hdr, total, off + 5, off + l, 1, r, why);
        } else if (t == PP2_TYPE_NETNS) {
            e = set_once(&r->netns, v, l, why, "v2: PP2_TYPE_NETNS twice");
        } /* PP2_TYPE_NOOP and unknown types: skipped */
        if (e)
            return e;
        off += l;
    }
    return 0;
}

static int parse_v2(const uint8_t *p, size_t n, nsv__pp_result *r, const char **why)
{
    size_t k = n < 12 ? n : 12;
    if (memcmp(p, v2sig, k) != 0)
        return fail(why, "v2: bad signature");
    if (n < 16)
        return NSV__PP_NEED;
    if (p[12] >> 4 != 2)
        return fail(why, "v2: version is not 2");
    int cmd = p[12] & 0xF;
    if (cmd > 1)
        return fail(why, "v2: command is neither LOCAL nor PROXY");
    size_t len = (size_t)p[14] << 8 | p[15], total = 16 + len;
    if (total > NSV__PP_V2_MAX)
        return fail(why, "v2: header longer than 4096 bytes");
    if (n < total)
        return NSV__PP_NEED;
    memset(r, 0, sizeof *r);
    r->version = 2;
    int fam = p[13] >> 4, proto = p[13] & 0xF;
    if (cmd == 0 || fam == 0) { /* LOCAL (the front's own check), or no address told */
        if (proto > 2 || fam > 3)
            return fail(why, "v2: unknown family or transport");
        r->local = 1;
        return (int)total;
    }
    if (proto != 1)
        return fail(why, "v2: transport is not STREAM");
    size_t alen;
    if (fam == 1) {
        alen = 12;
        if (len < alen)
            return fail(why, "v2: AF_INET address block too short");
        struct sockaddr_in *s = (struct sockaddr_in *)&r->src, *d = (struct sockaddr_in *)&r->dst;
        s->sin_family = d->sin_family = AF_INET;
        memcpy(&s->sin_addr, p + 16, 4);
        memcpy(&d->sin_addr, p + 20, 4);
        memcpy(&s->sin_port, p + 24, 2);
        memcpy(&d->sin_port, p + 26, 2);
        r->family = AF_INET;
    } else if (fam == 2) {
        alen = 36;
        if (len < alen)
            return fail(why, "v2: AF_INET6 address block too short");
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)&r->src, *d = (struct sockaddr_in6 *)&r->dst;
        s->sin6_family = d->sin6_family = AF_INET6;
        memcpy(&s->sin6_addr, p + 16, 16);
        memcpy(&d->sin6_addr, p + 32, 16);
        memcpy(&s->sin6_port, p + 48, 2);
        memcpy(&d->sin6_port, p + 50, 2);
        r->family = AF_INET6;
    } else if (fam == 3) {
        alen = 216;
        if (len < alen)
            return fail(why, "v2: AF_UNIX address block too short");
        struct sockaddr_un *s = (struct sockaddr_un *)&r->src, *d = (struct sockaddr_un *)&r->dst;
        s->sun_family = d->sun_family = AF_UNIX;
        memcpy(s->sun_path, p + 16, 108);
        memcpy(d->sun_path, p + 124, 108);
        s->sun_path[107] = d->sun_path[107] = 0;
        r->family = AF_UNIX;
    } else {
        return fail(why, "v2: unknown address family");
    }
    int e = walk_tlvs(p, total, 16 + alen, total, 0, r, why);
    return e ? e : (int)total;
}

int nsv__pp_parse(const uint8_t *p, size_t n, int accept, nsv__pp_result *r, const char **why)
{
    *why = NULL;
    if (n == 0)
        return NSV__PP_NEED;
    if (p[0] == 'P' && (accept & NSV__PP_ACCEPT_V1))
        return parse_v1(p, n, r, why);
    if (p[0] == 0x0D && (accept & NSV__PP_ACCEPT_V2))
        return parse_v2(p, n, r, why);
    return fail(why, accept == NSV__PP_ACCEPT_V1 ? "not a PROXY v1 header"
                     : accept == NSV__PP_ACCEPT_V2 ? "not a PROXY v2 header" : "not a PROXY header");
}
