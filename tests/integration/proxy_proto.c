/* proxy_proto.c - the PROXY protocol in front of a listener
 * (NSV_LOPT_PROXY_PROTOCOL): the parser on its own (v1 and v2, TLVs,
 * CRC32C, the strict refusals), then raw sockets acting as the front: v1
 * and v2 headers in one segment and split into 1-byte segments, the
 * request or TLS ClientHello that follows in the same segment, garbage,
 * a front that sends nothing (timeout), NSV_LOPT_PROXY_FROM, ALLOW/DENY
 * against the header's client, a v2 LOCAL health check, the peer and the
 * front's fields of REQUEST and TCP_OPEN events, https:// behind the
 * header (curl --haproxy-protocol, and curl through a relay that puts a v2
 * header before its ClientHello), a sharded server, real fronts (HAProxy
 * send-proxy-v2 with CRC32C, nginx stream proxy_protocol), and freeing the
 * server with connections still at the edge. */
#include "tap.h"
#include "nsvnet.h"
#include "util/proxy_proto.h"
#include <nanosrv.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define S(x) x, sizeof(x) - 1
#define PP(x) (const uint8_t *)(x), sizeof(x) - 1

static const uint8_t SIG[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};

/* ---- building v2 headers ---- */

typedef struct { uint8_t b[1024]; size_t n; } hdr;

static void put(hdr *h, const void *p, size_t n) { memcpy(h->b + h->n, p, n), h->n += n; }
static void put16(hdr *h, unsigned v) { uint8_t x[2] = {(uint8_t)(v >> 8), (uint8_t)v}; put(h, x, 2); }
static void tlv(hdr *h, uint8_t t, const void *v, size_t n) { put(h, &t, 1), put16(h, (unsigned)n), put(h, v, n); }

/* Starts a v2 header: cmd (0 LOCAL, 1 PROXY), family byte; fix_len ends it. */
static void v2_start(hdr *h, int cmd, uint8_t fam)
{
    h->n = 0;
    put(h, SIG, 12);
    uint8_t vc[2] = {(uint8_t)(0x20 | cmd), fam};
    put(h, vc, 2);
    put16(h, 0);
}
static void v2_fix_len(hdr *h) { h->b[14] = (uint8_t)((h->n - 16) >> 8), h->b[15] = (uint8_t)(h->n - 16); }

static void v2_inet(hdr *h, const char *src, unsigned sport, const char *dst, unsigned dport)
{
    uint8_t a[4];
    inet_pton(AF_INET, src, a), put(h, a, 4);
    inet_pton(AF_INET, dst, a), put(h, a, 4);
    put16(h, sport), put16(h, dport);
}

static uint32_t crc32c(const uint8_t *p, size_t n)
{
    uint32_t c = ~0u;
    while (n--) {
        c ^= *p++;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    }
    return ~c;
}

/* A v2 PROXY header for client src:sport -> 198.51.100.2:443 with the
 * TLVs a TLS-terminating front sends. */
static void v2_full(hdr *h, const char *src, unsigned sport, int crc)
{
    v2_start(h, 1, 0x11);
    v2_inet(h, src, sport, "198.51.100.2", 443);
    tlv(h, 0x01, S("h2"));
    tlv(h, 0x02, S("shop.example"));
    tlv(h, 0x04, S("\0\0\0"));
    hdr ssl = {.n = 0};
    uint8_t head[5] = {1, 0, 0, 0, 0};
    put(&ssl, head, 5);
    tlv(&ssl, 0x21, S("TLSv1.3"));
    tlv(&ssl, 0x22, S("alice"));
    tlv(h, 0x20, ssl.b, ssl.n);
    tlv(h, 0xE3, S("vendor"));
    if (crc)
        tlv(h, 0x03, S("\0\0\0\0"));
    v2_fix_len(h);
    if (crc) {
        uint32_t c = crc32c(h->b, h->n);
        uint8_t x[4] = {(uint8_t)(c >> 24), (uint8_t)(c >> 16), (uint8_t)(c >> 8), (uint8_t)c};
        memcpy(h->b + h->n - 4, x, 4);
    }
}

/* ---- the parser alone ---- */

static int parse(const uint8_t *p, size_t n, int accept, nsv__pp_result *r)
{
    const char *why;
    return nsv__pp_parse(p, n, accept, r, &why);
}

static int perr(const char *s, int accept)
{
    nsv__pp_result r;
    return parse((const uint8_t *)s, strlen(s), accept, &r) == NSV__PP_ERROR;
}

static void test_parser_v1(void)
{
    nsv__pp_result r;
    static const char l4[] = "PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nGET /";
    int h = parse(PP(l4), 3, &r);
    is_int(h, sizeof l4 - 1 - 5, "v1 TCP4: the header's length, not the request after it");
    struct sockaddr_in *s4 = (struct sockaddr_in *)&r.src, *d4 = (struct sockaddr_in *)&r.dst;
    char a[64];
    inet_ntop(AF_INET, &s4->sin_addr, a, sizeof a);
    ok(r.version == 1 && !r.local && r.family == AF_INET && !strcmp(a, "192.0.2.1") &&
           ntohs(s4->sin_port) == 56324 && ntohs(d4->sin_port) == 443,
       "v1 TCP4: client 192.0.2.1:56324, destination port 443");
    static const char l6[] = "PROXY TCP6 2001:db8::1 ::ffff:10.1.2.3 0 65535\r\n";
    h = parse(PP(l6), 1, &r);
    inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&r.dst)->sin6_addr, a, sizeof a);
    ok(h == (int)sizeof l6 - 1 && r.family == AF_INET6 && !strcmp(a, "::ffff:10.1.2.3") &&
           ntohs(((struct sockaddr_in6 *)&r.src)->sin6_port) == 0,
       "v1 TCP6 with ports 0 and 65535, v4-mapped destination");
    ok(parse(PP("PROXY UNKNOWN\r\n"), 1, &r) == 15 && r.local, "v1 UNKNOWN: the socket's own addresses");
    ok(parse(PP("PROXY UNKNOWN whatever follows\r\n"), 1, &r) == 32 && r.local, "v1 UNKNOWN: the rest is ignored");
    static const char longest[] = "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
                                  "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
    is_int(parse(PP(longest), 1, &r), 104, "v1: the longest real line");
    char big[160];
    memcpy(big, "PROXY UNKNOWN ", 14);
    memset(big + 14, 'x', sizeof big - 14);
    memcpy(big + 105, "\r\n", 2);
    is_int(parse((uint8_t *)big, 107, 1, &r), 107, "v1: 107 bytes with CRLF is the limit");
    memset(big + 105, 'x', 2);
    ok(parse((uint8_t *)big, 106, 1, &r) == NSV__PP_ERROR, "v1: no CRLF within 107 bytes: refused");
    is_int(parse(PP("PROXY TCP4 192.0.2.1 198.5"), 1, &r), NSV__PP_NEED, "v1: a prefix needs more");
    is_int(parse(PP("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r"), 1, &r), NSV__PP_NEED, "v1: CR without its LF yet");
    ok(perr("PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n", 1), "v1: two spaces refused");
    ok(perr("PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n", 1), "v1: a trailing space refused");
    ok(perr("PROXY TCP4 1.2.3.4 5.6.7.8 080 2\r\n", 1), "v1: a leading zero in a port refused");
    ok(perr("PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n", 1), "v1: port 65536 refused");
    ok(perr("PROXY TCP4 1.2.3.4 5.6.7.8 +1 2\r\n", 1), "v1: a signed port refused");
    ok(perr("PROXY TCP4 ::1 ::1 1 2\r\n", 1), "v1: IPv6 addresses under TCP4 refused");
    ok(perr("PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n", 1), "v1: IPv4 addresses under TCP6 refused");
    ok(perr("PROXY TCP4 1.2.3.04 5.6.7.8 1 2\r\n", 1), "v1: a leading zero in an address refused");
    ok(perr("PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", 1), "v1: a missing port refused");
    ok(perr("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", 1), "v1: LF without CR refused");
    ok(perr("PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n", 1), "v1: UDP4 refused");
    ok(perr("proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n", 1), "v1: lower case refused");
    ok(perr("PROXX", 1), "v1: a wrong prefix is refused before the line ends");
    ok(perr("GET / HTTP/1.1\r\n", 3), "no header at all: refused at the first byte");
    ok(perr("PROXY UNKNOWN\r\n", 2), "v1 refused when only v2 is accepted");
}

static void test_parser_v2(void)
{
    nsv__pp_result r;
    hdr h;
    v2_full(&h, "203.0.113.7", 40000, 1);
    is_int(parse(h.b, h.n, 2, &r), (int)h.n, "v2 PROXY with TLVs and a CRC32C: parsed whole");
    char a[64];
    inet_ntop(AF_INET, &((struct sockaddr_in *)&r.src)->sin_addr, a, sizeof a);
    ok(!strcmp(a, "203.0.113.7") && ntohs(((struct sockaddr_in *)&r.src)->sin_port) == 40000, "v2: client address");
    is_mem(r.alpn.p, r.alpn.len, "h2", "v2: PP2_TYPE_ALPN");
    is_mem(r.authority.p, r.authority.len, "shop.example", "v2: PP2_TYPE_AUTHORITY");
    is_mem(r.ssl_version.p, r.ssl_version.len, "TLSv1.3", "v2: PP2_SUBTYPE_SSL_VERSION inside PP2_TYPE_SSL");
    ok(r.has_ssl && r.ssl_client == 1 && r.ssl_verify == 0 && r.crc_checked, "v2: SSL client/verify, CRC checked");
    for (size_t k = 0; k < h.n; k++)
        if (parse(h.b, k, 2, &r) != NSV__PP_NEED) {
            ok(0, "v2: prefix of %zu bytes does not ask for more", k);
            break;
        } else if (k == h.n - 1) {
            ok(1, "v2: every prefix asks for more");
        }
    h.b[h.n - 1] ^= 1;
    ok(parse(h.b, h.n, 2, &r) == NSV__PP_ERROR, "v2: a wrong CRC32C refused");
    v2_start(&h, 1, 0x11);
    v2_inet(&h, "1.2.3.4", 1, "5.6.7.8", 2);
    uint8_t over[] = {0x02, 0x00, 0x09, 'a', 'b'};
    put(&h, over, sizeof over);
    v2_fix_len(&h);
    ok(parse(h.b, h.n, 2, &r) == NSV__PP_ERROR, "v2: a TLV overrunning the header refused");
    v2_start(&h, 1, 0x11);
    v2_inet(&h, "1.2.3.4", 1, "5.6.7.8", 2);
    uint8_t half[] = {0x04, 0x00};
    put(&h, half, 2);
    v2_fix_len(&h);
    ok(parse(h.b, h.n, 2, &r) == NSV__PP_ERROR, "v2: a cut TLV header refused");
    v2_start(&h, 1, 0x11);
    v2_inet(&h, "1.2.3.4", 1, "5.6.7.8", 2);
    hdr ssl = {.n = 0};
    uint8_t sh[5] = {1, 0, 0, 0, 0}, bad[] = {0x21, 0x00, 0x20, 'T'};
    put(&ssl, sh, 5), put(&ssl, bad, sizeof bad);
    tlv(&h, 0x20, ssl.b, ssl.n);
    v2_fix_len(&h);
    ok(parse(h.b, h.n, 2, &r) == NSV__PP_ERROR, "v2: a sub-TLV overrunning PP2_TYPE_SSL refused");
    v2_start(&h, 0, 0x00);
    ok(parse(h.b, h.n, 3, &r) == 16 && r.local && r.version == 2, "v2 LOCAL: the socket's own addresses");
    v2_start(&h, 1, 0x12);
    v2_inet(&h, "1.2.3.4", 1, "5.6.7.8", 2);
    v2_fix_len(&h);
    ok(parse(h.b, h.n, 2, &r) == NSV__PP_ERROR, "v2: DGRAM refused");
    v2_start(&h, 1, 0x11);
    put(&h, "12345678", 8);
    v2_fix_len(&h);
    ok(parse(h.b, h.n, 2, &r) == NSV__PP_ERROR, "v2: an AF_INET block shorter than 12 bytes refused");
    v2_start(&h, 2, 0x11);
    ok(parse(h.b, h.n, 2, &r) == NSV__PP_ERROR, "v2: command 2 refused");
    v2_start(&h, 1, 0x11);
    h.b[12] = 0x11;
    ok(parse(h.b, h.n, 2, &r) == NSV__PP_ERROR, "v2: version 1 in the binary form refused");
    v2_start(&h, 1, 0x11);
    h.b[14] = 0x10, h.b[15] = 0x00; /* 4096 + 16 */
    ok(parse(h.b, 16, 2, &r) == NSV__PP_ERROR, "v2: longer than 4096 bytes refused from its first 16");
    v2_start(&h, 1, 0x11);
    h.b[3] = 0;
    ok(parse(h.b, 4, 2, &r) == NSV__PP_ERROR, "v2: a wrong signature refused before it is complete");
    v2_start(&h, 1, 0x21);
    uint8_t a6[16] = {0};
    a6[15] = 1;
    put(&h, a6, 16), put(&h, a6, 16), put16(&h, 5), put16(&h, 6);
    v2_fix_len(&h);
    ok(parse(h.b, h.n, 3, &r) == (int)h.n && r.family == AF_INET6, "v2 AF_INET6");
    ok(parse(h.b, h.n, 1, &r) == NSV__PP_ERROR, "v2 refused when only v1 is accepted");
}

/* ---- a server behind a front made of raw sockets ---- */

static uint64_t metric(nsv_server *s, int m)
{
    uint64_t v[NSV_M_COUNT];
    int n = nsv_metrics(s, v, NSV_M_COUNT);
    return n > m ? v[m] : UINT64_MAX;
}

static void nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* What a REQUEST (or TCP_OPEN) carried, copied out of the arena. */
typedef struct {
    int got;
    uint32_t flags, port;
    uint64_t conn;
    char peer[64], path[64], tls[512];
    uint32_t tls_len;
} seen;

static void copy_ev(const nsv_event *e, seen *o)
{
    o->got = 1;
    o->flags = e->flags;
    o->port = e->peer_port;
    o->conn = e->conn;
    snprintf(o->peer, sizeof o->peer, "%.*s", (int)e->peer_len, arena + e->peer_off);
    snprintf(o->path, sizeof o->path, "%.*s", (int)e->path_len, arena + e->path_off);
    o->tls_len = e->tls_len < sizeof o->tls ? e->tls_len : 0;
    memcpy(o->tls, arena + e->tls_off, o->tls_len);
}

/* The nine fields of the block joined by '|' (NULs shown as '|'). */
static const char *fields(const seen *o, char *buf, size_t cap)
{
    size_t n = o->tls_len < cap - 1 ? o->tls_len : cap - 1;
    for (size_t i = 0; i < n; i++)
        buf[i] = o->tls[i] ? o->tls[i] : '|';
    buf[n] = 0;
    return buf;
}

/* Polls s until a REQUEST arrives (answered 200 "ok"), copying it to *o;
 * any other event (but CLOSE) counted in *others. */
static seen early_req; /* a REQUEST polled while sending slowly */

static int await_request(nsv_server *s, seen *o, int *others)
{
    if (early_req.got) {
        *o = early_req;
        memset(&early_req, 0, sizeof early_req);
        return 1;
    }
    for (int t = 0; t < 200; t++) {
        int n = nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, 10);
        for (int i = 0; i < n; i++) {
            if (evs[i].type == NSV_EV_REQUEST) {
                copy_ev(&evs[i], o);
                nsv_reply(s, evs[i].conn, 200, NULL, 0, S("ok"));
                return 1;
            }
            if (others && evs[i].type != NSV_EV_CLOSE)
                (*others)++;
        }
    }
    return 0;
}

/* Polls s until the server closes fd (EOF or reset): 1, or 0 when it is
 * still open after the rounds. Events polled meanwhile count in *events. */
static int closed_by_server(nsv_server *s, int fd, int *events, int rounds)
{
    for (int t = 0; t < rounds; t++) {
        int n = nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, 10);
        for (int i = 0; i < n; i++)
            if (events && evs[i].type != NSV_EV_CLOSE)
                (*events)++;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 0) > 0) {
            char b[256];
            ssize_t r = recv(fd, b, sizeof b, MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno == ECONNRESET))
                return 1;
        }
    }
    return 0;
}

/* Sends p byte by byte, polling s between the bytes; a REQUEST that the
 * last byte completes is answered and kept for await_request, any other
 * event (but CLOSE) counts in *events. */
static void send_slowly(nsv_server *s, int fd, const uint8_t *p, size_t n, int *events)
{
    for (size_t i = 0; i < n; i++) {
        sendn(fd, p + i, 1);
        int k = nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, i % 8 == 0 ? 2 : 0);
        for (int j = 0; j < k; j++) {
            if (evs[j].type == NSV_EV_REQUEST && i == n - 1) {
                copy_ev(&evs[j], &early_req); /* the last byte completed it */
                nsv_reply(s, evs[j].conn, 200, NULL, 0, S("ok"));
            } else if (events && evs[j].type != NSV_EV_CLOSE) {
                (*events)++;
            }
        }
    }
}

/* The local port of a client socket: the front's port the server sees. */
static int local_port(int fd)
{
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    getsockname(fd, (struct sockaddr *)&me, &ml);
    return ntohs(me.sin_port);
}

static nsv_server *proxy_server(const char *url, int version, int *port, int *lid)
{
    nsv_server *s = nsv_server_new();
    *lid = nsv_listen(s, url, strlen(url));
    *port = nsv_listener_port(s, *lid);
    is_int(nsv_listener_set_int(s, *lid, NSV_LOPT_PROXY_PROTOCOL, version), 0, "%s: PROXY protocol %d on", url,
           version);
    return s;
}

static void test_v1_http(void)
{
    int port, lid;
    nsv_server *s = proxy_server("http://127.0.0.1:0", NSV_PROXY_V1, &port, &lid);
    is_int(nsv_listener_get_int(s, lid, NSV_LOPT_PROXY_PROTOCOL), NSV_PROXY_V1, "get_int reads it back");
    int fd = client(port);
    int fport = 0;
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    getsockname(fd, (struct sockaddr *)&me, &ml);
    fport = ntohs(me.sin_port);
    sendall(fd, "PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nGET /one HTTP/1.1\r\nHost: x\r\n\r\n");
    seen o = {0};
    char buf[4096], f[600], want[200];
    ok(await_request(s, &o, NULL), "v1 header and request in one segment: the request arrives");
    is_mem(o.path, strlen(o.path), "/one", "the request after the header is whole");
    is_mem(o.peer, strlen(o.peer), "192.0.2.1", "peer is the header's client");
    is_int(o.port, 56324, "peer_port is the header's source port");
    ok(o.flags & NSV_EVF_PROXY, "NSV_EVF_PROXY set");
    ok(!(o.flags & NSV_EVF_TLS), "NSV_EVF_TLS not set on plain HTTP");
    snprintf(want, sizeof want, "||127.0.0.1|%d|198.51.100.2|443||||", fport);
    fields(&o, f, sizeof f);
    is_mem(f, strlen(f), want, "block: sni, subject empty; front = the socket's peer; dst; no TLVs in v1");
    int n = read_polling(s, fd, buf, sizeof buf, 100, 10, "ok");
    ok(n > 0 && strstr(buf, "200 OK") && strstr(buf, "\r\n\r\nok"), "the reply reaches the front");
    /* Keep-alive: the next request on the same connection is no header. */
    sendall(fd, "GET /two HTTP/1.1\r\nHost: x\r\n\r\n");
    memset(&o, 0, sizeof o);
    ok(await_request(s, &o, NULL) && !strcmp(o.path, "/two") && !strcmp(o.peer, "192.0.2.1"),
       "the second request keeps the header's client");
    read_polling(s, fd, buf, sizeof buf, 100, 10, "ok");
    close(fd);

    /* Split into 1-byte segments, header and request. */
    fd = client(port);
    nodelay(fd);
    static const char req[] = "PROXY TCP6 2001:db8::7 2001:db8::1 1234 80\r\nGET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
    int early = 0;
    send_slowly(s, fd, (const uint8_t *)req, sizeof req - 1, &early);
    memset(&o, 0, sizeof o);
    ok(await_request(s, &o, NULL) && !strcmp(o.path, "/slow"), "v1 sent 1 byte at a time: the request arrives");
    is_mem(o.peer, strlen(o.peer), "2001:db8::7", "an IPv6 client from a TCP6 line");
    is_int(o.port, 1234, "its port");
    read_polling(s, fd, buf, sizeof buf, 100, 10, "ok");
    close(fd);

    /* Garbage: closed, counted, never an event. */
    uint64_t errs = metric(s, NSV_M_PROXY_ERRORS);
    fd = client(port);
    sendall(fd, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    int events = 0;
    ok(closed_by_server(s, fd, &events, 200), "a request without a header: closed");
    is_int(events, 0, "and the host saw nothing of it");
    is_int(metric(s, NSV_M_PROXY_ERRORS) - errs, 1, "NSV_M_PROXY_ERRORS counts it");
    close(fd);
    fd = client(port);
    nodelay(fd);
    send_slowly(s, fd, (const uint8_t *)"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n", 34, &events);
    ok(closed_by_server(s, fd, &events, 200) && events == 0, "a malformed line sent slowly: closed, no event");
    close(fd);
    /* v2 on a v1 listener. */
    hdr h;
    v2_full(&h, "203.0.113.7", 1, 0);
    fd = client(port);
    sendn(fd, h.b, h.n);
    ok(closed_by_server(s, fd, &events, 200) && events == 0, "a v2 header on a v1 listener: closed");
    close(fd);
    /* Over 107 bytes without CRLF. */
    char big[200];
    memset(big, 'x', sizeof big);
    memcpy(big, "PROXY UNKNOWN ", 14);
    fd = client(port);
    sendn(fd, big, sizeof big);
    ok(closed_by_server(s, fd, &events, 200) && events == 0, "a line past 107 bytes: closed");
    close(fd);
    /* EOF in the middle of the header. */
    fd = client(port);
    sendall(fd, "PROXY TCP4 1.2.3.4");
    shutdown(fd, SHUT_WR);
    ok(closed_by_server(s, fd, &events, 200) && events == 0, "EOF inside the header: closed");
    close(fd);
    nsv_server_free(s);
}

static void test_v2_http(void)
{
    int port, lid;
    nsv_server *s = proxy_server("http://127.0.0.1:0", NSV_PROXY_V2, &port, &lid);
    hdr h;
    v2_full(&h, "203.0.113.7", 40000, 1);
    static const char req[] = "GET /v2 HTTP/1.1\r\nHost: x\r\n\r\n";
    put(&h, req, sizeof req - 1);
    int fd = client(port);
    nodelay(fd);
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    getsockname(fd, (struct sockaddr *)&me, &ml);
    int early = 0;
    send_slowly(s, fd, h.b, h.n, &early);
    seen o = {0};
    char buf[4096], f[600], want[200];
    ok(await_request(s, &o, NULL), "v2 header with TLVs and CRC32C, 1 byte at a time: the request arrives");
    is_int(early, 0, "nothing reached the host before the header was whole");
    ok(!strcmp(o.path, "/v2") && !strcmp(o.peer, "203.0.113.7") && o.port == 40000,
       "v2: path, peer and port from the header");
    snprintf(want, sizeof want, "||127.0.0.1|%d|198.51.100.2|443|TLSv1.3|shop.example|h2|", ntohs(me.sin_port));
    fields(&o, f, sizeof f);
    is_mem(f, strlen(f), want, "block: front, dst, ssl version, authority and alpn from the TLVs");
    read_polling(s, fd, buf, sizeof buf, 100, 10, "ok");
    ok(strstr(buf, "\r\n\r\nok") != NULL, "v2: the reply reaches the front");
    close(fd);

    /* LOCAL: a health check from the front. */
    v2_start(&h, 0, 0x00);
    put(&h, req, sizeof req - 1);
    fd = client(port);
    sendn(fd, h.b, h.n);
    memset(&o, 0, sizeof o);
    ok(await_request(s, &o, NULL), "v2 LOCAL: the request arrives");
    ok(!strcmp(o.peer, "127.0.0.1") && !(o.flags & NSV_EVF_PROXY) && o.tls_len == 0,
       "v2 LOCAL: the socket's own peer, no NSV_EVF_PROXY, no block");
    read_polling(s, fd, buf, sizeof buf, 100, 10, "ok");
    close(fd);

    /* A TLV overrunning the header: closed, nothing delivered. */
    v2_start(&h, 1, 0x11);
    v2_inet(&h, "1.2.3.4", 1, "5.6.7.8", 2);
    uint8_t over[] = {0x02, 0x00, 0x09, 'a', 'b'};
    put(&h, over, sizeof over);
    v2_fix_len(&h);
    put(&h, req, sizeof req - 1);
    fd = client(port);
    sendn(fd, h.b, h.n);
    int events = 0;
    ok(closed_by_server(s, fd, &events, 200) && events == 0, "v2 with an overrunning TLV: closed, no event");
    close(fd);

    /* Timeout: a front that connects and says nothing, and one that stops
     * halfway through the header. */
    is_int(nsv_listener_set_int(s, lid, NSV_LOPT_PROXY_TIMEOUT_MS, 150), 0, "PROXY_TIMEOUT_MS 150");
    is_int(nsv_listener_get_int(s, lid, NSV_LOPT_PROXY_TIMEOUT_MS), 150, "read back");
    uint64_t to = metric(s, NSV_M_TIMEOUT_OTHER), errs = metric(s, NSV_M_PROXY_ERRORS);
    fd = client(port);
    ok(closed_by_server(s, fd, &events, 300) && events == 0, "a silent front: closed after the timeout");
    close(fd);
    fd = client(port);
    v2_full(&h, "203.0.113.7", 40000, 0);
    sendn(fd, h.b, 20);
    ok(closed_by_server(s, fd, &events, 300) && events == 0, "half a header, then silence: closed");
    close(fd);
    is_int(metric(s, NSV_M_TIMEOUT_OTHER) - to, 2, "NSV_M_TIMEOUT_OTHER counts both");
    is_int(metric(s, NSV_M_PROXY_ERRORS) - errs, 2, "and NSV_M_PROXY_ERRORS too");
    nsv_server_free(s);
}

/* PROXY_FROM against the socket's peer; ALLOW/DENY against the header. */
static void test_lists(void)
{
    int port, lid;
    nsv_server *s = proxy_server("http://127.0.0.1:0", NSV_PROXY_ANY, &port, &lid);
    char buf[4096];
    seen o;
    int events = 0;
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_PROXY_FROM, S("10.0.0.0/8")), 0, "PROXY_FROM 10.0.0.0/8");
    uint64_t denied = metric(s, NSV_M_CONNS_DENIED);
    int fd = client(port);
    sendall(fd, "PROXY TCP4 192.0.2.1 198.51.100.2 1 2\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n");
    ok(closed_by_server(s, fd, &events, 200) && events == 0, "a front outside PROXY_FROM: closed, no event");
    is_int(metric(s, NSV_M_CONNS_DENIED) - denied, 1, "counted as denied");
    close(fd);
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_PROXY_FROM, S("10.0.0.0/8, 127.0.0.1")), 0,
           "PROXY_FROM with 127.0.0.1 added");
    fd = client(port);
    sendall(fd, "PROXY TCP4 192.0.2.1 198.51.100.2 1 2\r\nGET /from HTTP/1.1\r\nHost: x\r\n\r\n");
    memset(&o, 0, sizeof o);
    ok(await_request(s, &o, NULL) && !strcmp(o.peer, "192.0.2.1"), "a front inside PROXY_FROM is served");
    read_polling(s, fd, buf, sizeof buf, 100, 10, "ok");
    close(fd);

    /* The header's client is what ALLOW and DENY see, not the front. */
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_ALLOW, S("198.51.100.0/24")), 0, "ALLOW 198.51.100.0/24");
    denied = metric(s, NSV_M_CONNS_DENIED);
    fd = client(port);
    sendall(fd, "PROXY TCP4 192.0.2.1 198.51.100.2 1 2\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n");
    ok(closed_by_server(s, fd, &events, 200) && events == 0, "header client outside ALLOW: closed, no event");
    close(fd);
    fd = client(port);
    sendall(fd, "PROXY TCP4 198.51.100.9 198.51.100.2 1 2\r\nGET /in HTTP/1.1\r\nHost: x\r\n\r\n");
    memset(&o, 0, sizeof o);
    ok(await_request(s, &o, NULL) && !strcmp(o.peer, "198.51.100.9"), "header client inside ALLOW: served");
    read_polling(s, fd, buf, sizeof buf, 100, 10, "ok");
    close(fd);
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_DENY, S("198.51.100.9")), 0, "DENY 198.51.100.9");
    fd = client(port);
    sendall(fd, "PROXY TCP4 198.51.100.9 198.51.100.2 1 2\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n");
    ok(closed_by_server(s, fd, &events, 200) && events == 0, "a client in ALLOW and DENY: closed");
    close(fd);
    /* v4-mapped client in a v2 AF_INET6 header against a v4 entry. */
    hdr h;
    v2_start(&h, 1, 0x21);
    uint8_t a6[16] = {0}, d6[16] = {0};
    a6[10] = a6[11] = 0xFF, a6[12] = 198, a6[13] = 51, a6[14] = 100, a6[15] = 10;
    d6[15] = 1;
    put(&h, a6, 16), put(&h, d6, 16), put16(&h, 7), put16(&h, 8);
    v2_fix_len(&h);
    static const char req[] = "GET /mapped HTTP/1.1\r\nHost: x\r\n\r\n";
    put(&h, req, sizeof req - 1);
    fd = client(port);
    sendn(fd, h.b, h.n);
    memset(&o, 0, sizeof o);
    ok(await_request(s, &o, NULL) && !strcmp(o.peer, "::ffff:198.51.100.10"),
       "a v4-mapped client in a v2 header matches the IPv4 ALLOW entry");
    read_polling(s, fd, buf, sizeof buf, 100, 10, "ok");
    close(fd);
    is_int(metric(s, NSV_M_CONNS_DENIED) - denied, 2, "the two refused clients counted as denied");
    /* A LOCAL health check is judged by the socket's own peer. */
    v2_start(&h, 0, 0x00);
    put(&h, req, sizeof req - 1);
    fd = client(port);
    sendn(fd, h.b, h.n);
    ok(closed_by_server(s, fd, &events, 200) && events == 0, "LOCAL from a front outside ALLOW: closed");
    close(fd);
    is_int(nsv_listener_set_str(s, lid, NSV_LOPT_ALLOW, NULL, 0), 0, "ALLOW cleared");
    fd = client(port);
    sendn(fd, h.b, h.n);
    memset(&o, 0, sizeof o);
    ok(await_request(s, &o, NULL) && !strcmp(o.peer, "127.0.0.1"), "then LOCAL is served");
    read_polling(s, fd, buf, sizeof buf, 100, 10, "ok");
    close(fd);
    nsv_server_free(s);
}

/* tcp://: TCP_OPEN carries NSV_EVF_PROXY, the header's client and the
 * block; the bytes after the header are the first TCP_DATA, whole. */
static void test_tcp(void)
{
    int port, lid;
    nsv_server *s = proxy_server("tcp://127.0.0.1:0", NSV_PROXY_V1, &port, &lid);
    int fd = client(port);
    sendall(fd, "PROXY TCP4 192.0.2.44 198.51.100.2 5555 443\r\nhello after the header");
    seen open = {0};
    char data[256] = "";
    for (int t = 0; t < 200 && !data[0]; t++) {
        int n = nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, 10);
        for (int i = 0; i < n; i++) {
            if (evs[i].type == NSV_EV_TCP_OPEN)
                copy_ev(&evs[i], &open);
            if (evs[i].type == NSV_EV_TCP_DATA && evs[i].body_len)
                snprintf(data, sizeof data, "%.*s", (int)evs[i].body_len, arena + evs[i].body_off);
        }
    }
    ok(open.got && (open.flags & NSV_EVF_PROXY), "TCP_OPEN with NSV_EVF_PROXY");
    ok(!strcmp(open.peer, "192.0.2.44") && open.port == 5555, "TCP_OPEN: the header's client");
    char f[600], want[128];
    snprintf(want, sizeof want, "||127.0.0.1|%d|198.51.100.2|443||||", local_port(fd));
    fields(&open, f, sizeof f);
    is_mem(f, strlen(f), want, "TCP_OPEN: the block with the front's fields");
    is_mem(data, strlen(data), "hello after the header", "TCP_DATA: the bytes after the header, none lost");
    close(fd);
    nsv_server_free(s);
}

/* ---- TLS behind the header ---- */

static char dir[64];

static int make_cert(void)
{
    snprintf(dir, sizeof dir, "/tmp/nsv-pp-%d", (int)getpid());
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
             "-keyout %s/k.pem -out %s/c.pem -days 30 -subj /CN=localhost >/dev/null 2>&1",
             dir, dir, dir);
    return system(cmd) == 0;
}

static nsv_server *tls_server(int *port, int version)
{
    nsv_server *s = nsv_server_new();
    char p[128];
    snprintf(p, sizeof p, "%s/c.pem", dir);
    nsv_set_str(s, NSV_OPT_TLS_CERT_FILE, p, strlen(p));
    snprintf(p, sizeof p, "%s/k.pem", dir);
    nsv_set_str(s, NSV_OPT_TLS_KEY_FILE, p, strlen(p));
    int lid = nsv_listen(s, S("https://127.0.0.1:0"));
    if (lid < 0) {
        diag("https listen: %s", nsv_last_error_detail(s));
        nsv_server_free(s);
        return NULL;
    }
    *port = nsv_listener_port(s, lid);
    nsv_listener_set_int(s, lid, NSV_LOPT_PROXY_PROTOCOL, version);
    return s;
}

/* Runs curl with args (NULL-terminated) against s, answering its request;
 * *o gets the request, out curl's output. Returns curl's exit status. */
static int curl_run(nsv_server *s, char *const argv[], seen *o, char *out, size_t cap,
                    int relay_listen, int relay_port)
{
    int pfd[2];
    if (pipe(pfd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 1);
        int dn = open("/dev/null", O_WRONLY);
        dup2(dn, 2);
        close(pfd[0]);
        execvp("curl", argv);
        _exit(127);
    }
    close(pfd[1]);
    int a = -1, b = -1; /* the relay: curl's side, the server's side */
    size_t on = 0;
    int status = -1, done = 0;
    hdr h;
    for (int t = 0; t < 1500 && !done; t++) {
        if (relay_listen >= 0 && a < 0) {
            struct pollfd lp = {.fd = relay_listen, .events = POLLIN};
            if (poll(&lp, 1, 0) > 0) {
                a = accept(relay_listen, NULL, NULL);
                /* The ClientHello first, so header and hello leave in one send. */
                struct pollfd cp = {.fd = a, .events = POLLIN};
                char hello[4096];
                ssize_t n = poll(&cp, 1, 5000) > 0 ? read(a, hello, sizeof hello) : -1;
                b = client(relay_port);
                v2_full(&h, "203.0.113.50", 4433, 1);
                if (n > 0 && (size_t)n <= sizeof h.b - h.n)
                    put(&h, hello, (size_t)n);
                sendn(b, h.b, h.n);
            }
        }
        int n = nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, 5);
        for (int i = 0; i < n; i++)
            if (evs[i].type == NSV_EV_REQUEST) {
                copy_ev(&evs[i], o);
                nsv_reply(s, evs[i].conn, 200, NULL, 0, S("tls ok"));
            }
        if (a >= 0) {
            struct pollfd ps[2] = {{.fd = a, .events = POLLIN}, {.fd = b, .events = POLLIN}};
            if (poll(ps, 2, 0) > 0) {
                char x[16384];
                for (int k = 0; k < 2; k++)
                    if (ps[k].revents) {
                        ssize_t r = read(ps[k].fd, x, sizeof x);
                        if (r <= 0)
                            shutdown(ps[1 - k].fd, SHUT_WR);
                        else
                            sendn(ps[1 - k].fd, x, (size_t)r);
                    }
            }
        }
        struct pollfd pp = {.fd = pfd[0], .events = POLLIN};
        while (poll(&pp, 1, 0) > 0) {
            ssize_t r = read(pfd[0], out + on, cap - 1 - on);
            if (r <= 0)
                break;
            on += (size_t)r;
        }
        if (waitpid(pid, &status, WNOHANG) == pid)
            done = 1;
    }
    if (!done) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    ssize_t r;
    while (on < cap - 1 && (r = read(pfd[0], out + on, cap - 1 - on)) > 0)
        on += (size_t)r;
    out[on] = 0;
    close(pfd[0]);
    if (a >= 0)
        close(a), close(b);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_tls(void)
{
    if (!nsv_tls_available() || system("curl --version >/dev/null 2>&1") != 0 || !make_cert()) {
        printf("ok %d # skip TLS, curl or openssl not available\n", ++tap_n);
        return;
    }
    int port;
    nsv_server *s = tls_server(&port, NSV_PROXY_ANY);
    if (!s) {
        ok(0, "https listener");
        return;
    }
    char url[96], out[4096], f[600];
    snprintf(url, sizeof url, "https://127.0.0.1:%d/curl", port);
    char *argv1[] = {"curl", "-sk", "--max-time", "10", "--haproxy-protocol", url, NULL};
    seen o = {0};
    int rc = curl_run(s, argv1, &o, out, sizeof out, -1, 0);
    ok(rc == 0 && !strcmp(out, "tls ok"), "curl --haproxy-protocol https://: answered (rc %d, '%s')", rc, out);
    ok((o.flags & (NSV_EVF_TLS | NSV_EVF_PROXY)) == (NSV_EVF_TLS | NSV_EVF_PROXY), "NSV_EVF_TLS and NSV_EVF_PROXY");
    ok(!strcmp(o.peer, "127.0.0.1") && !strcmp(o.path, "/curl"), "peer from curl's v1 header");

    /* A relay as the front: a v2 header and curl's ClientHello in one send. */
    int rport = 0;
    int rl = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in ra = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(rl, (struct sockaddr *)&ra, sizeof ra);
    listen(rl, 4);
    socklen_t rsl = sizeof ra;
    getsockname(rl, (struct sockaddr *)&ra, &rsl);
    rport = ntohs(ra.sin_port);
    snprintf(url, sizeof url, "https://localhost:%d/relay", rport);
    char *argv2[] = {"curl", "-sk", "--max-time", "10", url, NULL};
    memset(&o, 0, sizeof o);
    rc = curl_run(s, argv2, &o, out, sizeof out, rl, port);
    ok(rc == 0 && !strcmp(out, "tls ok"), "v2 header + ClientHello in one segment: answered (rc %d)", rc);
    ok(!strcmp(o.peer, "203.0.113.50") && o.port == 4433 && (o.flags & NSV_EVF_TLS) && (o.flags & NSV_EVF_PROXY),
       "TLS behind v2: peer from the header, TLS and PROXY flags");
    fields(&o, f, sizeof f);
    ok(!strncmp(f, "localhost||127.0.0.1|", 21) && strstr(f, "|198.51.100.2|443|TLSv1.3|shop.example|h2|"),
       "block: SNI of this TLS connection, then the front's fields (%s)", f);
    close(rl);
    nsv_server_free(s);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        diag("could not remove %s", dir);
}

/* Sharded: every worker reads headers; peers match their own header. */
static void test_sharded(void)
{
    nsv_server *s = nsv_server_new_sharded(2);
    int lid = nsv_listen(s, S("http://127.0.0.1:0"));
    int port = nsv_listener_port(s, lid);
    is_int(nsv_listener_set_int(s, lid, NSV_LOPT_PROXY_PROTOCOL, NSV_PROXY_V2), 0, "sharded: PROXY v2 on");
    enum { N = 8 };
    int fds[N];
    for (int i = 0; i < N; i++) {
        hdr h;
        char src[32], req[64];
        snprintf(src, sizeof src, "10.0.0.%d", i + 1);
        v2_start(&h, 1, 0x11);
        v2_inet(&h, src, 1000 + (unsigned)i, "10.9.9.9", 80);
        v2_fix_len(&h);
        int n = snprintf(req, sizeof req, "GET /%d HTTP/1.1\r\nHost: x\r\n\r\n", i + 1);
        put(&h, req, (size_t)n);
        fds[i] = client(port);
        nodelay(fds[i]);
        sendn(fds[i], h.b, 10); /* split: the rest follows */
        sendn(fds[i], h.b + 10, h.n - 10);
    }
    int bad = client(port);
    sendall(bad, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    int good = 0, got = 0, other = 0;
    for (int t = 0; t < 300 && got < N; t++) {
        int n = nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, 10);
        for (int i = 0; i < n; i++) {
            if (evs[i].type != NSV_EV_REQUEST) {
                other += evs[i].type != NSV_EV_CLOSE;
                continue;
            }
            got++;
            char want[64], path[32], peer[64];
            snprintf(path, sizeof path, "%.*s", (int)evs[i].path_len, arena + evs[i].path_off);
            snprintf(peer, sizeof peer, "%.*s", (int)evs[i].peer_len, arena + evs[i].peer_off);
            snprintf(want, sizeof want, "10.0.0.%s", path + 1);
            good += !strcmp(peer, want) && evs[i].peer_port == 999u + (unsigned)atoi(path + 1) &&
                    (evs[i].flags & NSV_EVF_PROXY);
            nsv_reply(s, evs[i].conn, 200, NULL, 0, S("ok"));
        }
    }
    is_int(got, N, "sharded: every request arrives");
    is_int(good, N, "sharded: each peer and port is its own header's");
    is_int(other, 0, "the connection without a header produced no event");
    for (int i = 0; i < N; i++) {
        char buf[1024];
        int n = read_all(fds[i], buf, sizeof buf, 5000, 50);
        if (n <= 0 || !strstr(buf, "\r\n\r\nok")) {
            ok(0, "sharded: reply %d", i);
            break;
        }
        if (i == N - 1)
            ok(1, "sharded: every reply reaches its front");
        close(fds[i]);
    }
    char b[64];
    is_int(read_all(bad, b, sizeof b, 5000, 50), 0, "sharded: the headerless connection is closed unanswered");
    close(bad);
    uint64_t errs = metric(s, NSV_M_PROXY_ERRORS);
    is_int(errs, 1, "sharded: one PROXY error across the workers");
    is_int(nsv_listener_set_int(s, lid, NSV_LOPT_PROXY_PROTOCOL, 0), NSV_ESTATE, "sharded: ESTATE once workers run");
    nsv_server_free(s);
}

/* A free loopback port for a front to bind (closed again at once). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(fd, (struct sockaddr *)&a, sizeof a);
    socklen_t sl = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &sl);
    close(fd);
    return ntohs(a.sin_port);
}

/* Real fronts: HAProxy with send-proxy-v2 (and its CRC32C and unique-id
 * TLVs) and nginx's stream module with proxy_protocol (v1) in front of the
 * server; a request through each arrives with the front's client. */
static void test_real_front(const char *name, const char *conf_fmt, char *const *argv_fmt, int version)
{
    char path[96], conf[1024], cmd[160];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", argv_fmt[0]);
    if (system(cmd) != 0) {
        printf("ok %d # skip %s not installed\n", ++tap_n, name);
        return;
    }
    int port, lid;
    nsv_server *s = proxy_server("http://127.0.0.1:0", version, &port, &lid);
    int fport = free_port();
    snprintf(path, sizeof path, "/tmp/nsv-pp-%s-%d", name, (int)getpid());
    snprintf(cmd, sizeof cmd, "mkdir -p %s", path);
    if (system(cmd) != 0)
        diag("mkdir %s failed", path);
    int n = snprintf(conf, sizeof conf, conf_fmt, path, fport, port);
    char cfile[128];
    snprintf(cfile, sizeof cfile, "%s/front.conf", path);
    FILE *f = fopen(cfile, "w");
    fwrite(conf, 1, (size_t)n, f);
    fclose(f);
    char *argv[8];
    for (int i = 0; argv_fmt[i] && i < 7; i++)
        argv[i] = strcmp(argv_fmt[i], "@conf") == 0 ? cfile : strcmp(argv_fmt[i], "@dir") == 0 ? path : argv_fmt[i];
    argv[7] = NULL;
    for (int i = 0; i < 7; i++)
        if (!argv_fmt[i]) {
            argv[i] = NULL;
            break;
        }
    pid_t pid = fork();
    if (pid == 0) {
        int dn = open("/dev/null", O_WRONLY);
        dup2(dn, 1), dup2(dn, 2);
        execvp(argv[0], argv);
        _exit(127);
    }
    int fd = -1;
    for (int t = 0; t < 200 && fd < 0; t++) { /* until the front listens */
        fd = client(fport);
        if (fd < 0)
            usleep(20000);
    }
    seen o = {0};
    if (fd >= 0) {
        sendall(fd, "GET /front HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        await_request(s, &o, NULL);
    }
    ok(o.got && !strcmp(o.path, "/front") && (o.flags & NSV_EVF_PROXY), "%s: the request arrives through it", name);
    ok(!strcmp(o.peer, "127.0.0.1") && o.port == (uint32_t)local_port(fd), "%s: peer and port are the client's (%s %u)",
       name, o.peer, o.port);
    char buf[2048];
    if (fd >= 0) {
        read_polling(s, fd, buf, sizeof buf, 200, 10, "\r\n\r\nok");
        ok(strstr(buf, "\r\n\r\nok") != NULL, "%s: the reply comes back", name);
        close(fd);
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    nsv_server_free(s);
    snprintf(cmd, sizeof cmd, "rm -rf %s", path);
    if (system(cmd) != 0)
        diag("rm %s failed", path);
}

static void test_real_fronts(void)
{
    static const char haproxy[] = "global\n    pidfile %s/haproxy.pid\n"
                                  "defaults\n    mode tcp\n    timeout connect 2s\n    timeout client 10s\n"
                                  "    timeout server 10s\n"
                                  "frontend f\n    bind 127.0.0.1:%d\n    unique-id-format req-%%rt\n"
                                  "    default_backend b\n"
                                  "backend b\n    server s 127.0.0.1:%d send-proxy-v2 proxy-v2-options crc32c,unique-id\n";
    char *hargv[] = {"haproxy", "-db", "-f", "@conf", NULL};
    test_real_front("haproxy", haproxy, hargv, NSV_PROXY_V2);
    static const char nginx[] = "daemon off;\npid %s/nginx.pid;\nerror_log stderr;\n"
                                "load_module /usr/lib/nginx/modules/ngx_stream_module.so;\nevents {}\n"
                                "stream {\n    server {\n        listen 127.0.0.1:%d;\n"
                                "        proxy_pass 127.0.0.1:%d;\n        proxy_protocol on;\n    }\n}\n";
    char *nargv[] = {"nginx", "-p", "@dir", "-c", "@conf", NULL};
    test_real_front("nginx", nginx, nargv, NSV_PROXY_V1);
}

/* Freeing the server with connections still at the edge (one waiting for
 * the rest of its header, one served through a header and kept alive, on
 * both a single loop and a sharded server) leaves nothing behind (the
 * AddressSanitizer build checks for leaks). */
static void test_free_open(int workers)
{
    nsv_server *s = workers ? nsv_server_new_sharded(workers) : nsv_server_new();
    int lid = nsv_listen(s, S("http://127.0.0.1:0"));
    int port = nsv_listener_port(s, lid);
    nsv_listener_set_int(s, lid, NSV_LOPT_PROXY_PROTOCOL, NSV_PROXY_V2);
    hdr h;
    v2_full(&h, "203.0.113.9", 9, 0);
    int half = client(port), kept = client(port);
    sendn(half, h.b, 20);
    static const char req[] = "GET /kept HTTP/1.1\r\nHost: x\r\n\r\n";
    put(&h, req, sizeof req - 1);
    sendn(kept, h.b, h.n);
    seen o = {0};
    ok(await_request(s, &o, NULL) && !strcmp(o.peer, "203.0.113.9"), "%s: a kept-alive connection through a header",
       workers ? "sharded" : "single loop");
    char buf[512];
    ok(read_polling(s, kept, buf, sizeof buf, 200, 10, "\r\n\r\nok") > 0 && strstr(buf, "\r\n\r\nok"),
       "its reply arrives");
    for (int t = 0; t < 5; t++) /* the half header read meanwhile */
        nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, 10);
    nsv_server_free(s);
    ok(1, "freed with a half header and a proxied connection open");
    close(half), close(kept);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    if (getenv("NSV_TEST_DEBUG")) /* why a connection was closed, on stderr */
        nsv_set_log_level(NSV_LOG_DEBUG);
    test_parser_v1();
    test_parser_v2();
    test_v1_http();
    test_v2_http();
    test_lists();
    test_tcp();
    test_tls();
    test_sharded();
    test_real_fronts();
    test_free_open(0);
    test_free_open(2);
    return done_testing();
}
