/* tls.c - TLS over mbedTLS (2.28 and 3.x APIs): option storage, per-loop
 * configurations, non-blocking server and client sessions, and the data
 * path behind nsv__io_recv / nsv__io_send. See tls.h for the contract. */
#include "tls.h"
#include "../loop/metrics.h"
#ifdef NSV_WITH_MBEDTLS /* else tls.h provides the stubs */
#include <mbedtls/version.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/oid.h>
#include <mbedtls/pk.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/ssl.h>
#include <mbedtls/ssl_cache.h>
#include <mbedtls/ssl_ticket.h>
#include <mbedtls/x509_crt.h>
#if MBEDTLS_VERSION_NUMBER >= 0x03000000 && defined(MBEDTLS_PSA_CRYPTO_C)
#include <psa/crypto.h>
#define NSV__TLS_PSA 1
#endif
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#define NSTR (NSV_OPT_TLS_CLIENT_CA_PEM - NSV_OPT_TLS_CERT_FILE + 1)
#define IDX(opt) ((opt) - NSV_OPT_TLS_CERT_FILE)
#define MAX_PEM (8u << 20) /* a system CA bundle is ~200 KiB */
#define SYSTEM_CA "/etc/ssl/certs/ca-certificates.crt"

/* ---- session resumption (per server) ---- */

/* One ticket key context and one session cache for the whole server, so a
 * client resumes whichever worker its next connection lands on. Every loop's
 * configuration points at them. Each has its own mutex: mbedTLS locks them
 * itself only when built with MBEDTLS_THREADING_C (Debian's is), and the
 * ticket context calls the shared random generator when it rotates keys. */
typedef struct tls_resume {
    pthread_mutex_t ticket_lock, cache_lock;
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_ssl_ticket_context ticket;
    mbedtls_ssl_cache_context cache;
    int tickets, cache_on;
} tls_resume;

/* ---- option strings (per server) ---- */

/* _FILE options are read when set, so every loop parses the same bytes
 * later (and the files need not stay readable, e.g. after dropping
 * privileges). pem[] holds NUL-terminated PEM text (mbedTLS wants the NUL
 * counted in the length); pass holds the key password. */
typedef struct tls_opts {
    pthread_mutex_t lock;   /* the host sets options, loops read them */
    char *pem[NSTR];        /* by IDX of the _PEM option (file options land there) */
    size_t len[NSTR];
    int server_frozen;      /* a TLS listener parsed them */
    int verify_client;      /* NSV_OPT_TLS_VERIFY_CLIENT as it was then */
    int client_frozen;      /* an outbound session parsed them */
    tls_resume *res;        /* NULL: tickets and cache both off */
} tls_opts;

static void resume_free(nsv_server *s, tls_resume *rs);

/* ---- per-loop mbedTLS objects ---- */

typedef struct tls_side {
    mbedtls_ssl_config conf;
    mbedtls_x509_crt chain, ca;
    mbedtls_pk_context key;
} tls_side;

typedef struct tls_loop {
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    tls_side srv;                /* https/wss listeners: ALPN http/1.1 */
    mbedtls_ssl_config srv_raw;  /* tls:// listeners: same keys, no ALPN */
    tls_side cli[2];             /* outbound sessions: [0] verify nothing, [1] chain and name */
    int srv_ready, cli_ready[2];
    uint64_t *pend, *pend_spare; /* ids with decrypted bytes waiting */
    uint32_t npend, cap, cap_spare;
} tls_loop;

/* ---- per-connection session ---- */

typedef struct tls_sess {
    mbedtls_ssl_context ssl; /* first member: callbacks get &ssl and cast */
    int fd;
    uint8_t done;            /* handshake complete */
    uint8_t eof;             /* peer closed (close_notify or EOF) */
    uint8_t queued;          /* on the loop's pending list */
    uint8_t client;
    uint8_t corked;          /* handshake bytes held back with MSG_MORE */
    uint8_t resumed;         /* server: a ticket or cached session was accepted */
    uint32_t wlen;           /* length of a write mbedTLS holds after WANT_WRITE */
    uint16_t sni_len, subj_len;
    uint8_t ip_len;          /* client to an IP address: 4 or 16, else 0 */
    unsigned char ip[16];
    char sni[256];
    char subj[384];
} tls_sess;

static const char *alpn_http[] = {"http/1.1", NULL};
static const char *alpn_h2[] = {"h2", "http/1.1", NULL}; /* NSV_OPT_HTTP2 has NSV_H2_TLS */

#if MBEDTLS_VERSION_NUMBER < 0x03000000
/* mbedTLS 2.x picks the ECDHE curve in the client's order. Its P-256 has
 * fixed-point tables, but the server builds them afresh for every
 * handshake's ephemeral key, so X25519 costs less per handshake (1.26 ms
 * against 1.56 ms for key pair and shared secret on Debian's 2.28; bench/
 * METHOD.md "tls"): it comes first, and clients, which list it first too,
 * get it. The NIST curves follow for clients without it. */
static const mbedtls_ecp_group_id ecdhe_curves[] = {
#ifdef MBEDTLS_ECP_DP_CURVE25519_ENABLED
    MBEDTLS_ECP_DP_CURVE25519,
#endif
#ifdef MBEDTLS_ECP_DP_SECP256R1_ENABLED
    MBEDTLS_ECP_DP_SECP256R1,
#endif
#ifdef MBEDTLS_ECP_DP_SECP384R1_ENABLED
    MBEDTLS_ECP_DP_SECP384R1,
#endif
#ifdef MBEDTLS_ECP_DP_SECP521R1_ENABLED
    MBEDTLS_ECP_DP_SECP521R1,
#endif
    MBEDTLS_ECP_DP_NONE,
};
#endif

/* ---- mbedTLS 2.28 / 3.x differences ---- */

static int parse_key(mbedtls_pk_context *pk, const char *pem, size_t len, const char *pw,
                     mbedtls_ctr_drbg_context *rng)
{
    size_t pwlen = pw ? strlen(pw) : 0;
#if MBEDTLS_VERSION_NUMBER >= 0x03000000
    return mbedtls_pk_parse_key(pk, (const unsigned char *)pem, len, (const unsigned char *)pw, pwlen,
                                mbedtls_ctr_drbg_random, rng);
#else
    (void)rng;
    return mbedtls_pk_parse_key(pk, (const unsigned char *)pem, len, (const unsigned char *)pw, pwlen);
#endif
}

static int check_pair(mbedtls_pk_context *pub, mbedtls_pk_context *prv, mbedtls_ctr_drbg_context *rng)
{
#if MBEDTLS_VERSION_NUMBER >= 0x03000000
    return mbedtls_pk_check_pair(pub, prv, mbedtls_ctr_drbg_random, rng);
#else
    (void)rng;
    return mbedtls_pk_check_pair(pub, prv);
#endif
}

/* TLS 1.2 at least; the maximum stays the library's (1.3 where built in). */
static void min_tls12(mbedtls_ssl_config *conf)
{
#if MBEDTLS_VERSION_NUMBER >= 0x03020000
    mbedtls_ssl_conf_min_tls_version(conf, MBEDTLS_SSL_VERSION_TLS1_2);
#else
    mbedtls_ssl_conf_min_version(conf, MBEDTLS_SSL_MAJOR_VERSION_3, MBEDTLS_SSL_MINOR_VERSION_3);
#endif
}

#ifdef NSV__TLS_PSA
static pthread_once_t psa_once = PTHREAD_ONCE_INIT;
static int psa_status;
static void psa_init(void) { psa_status = psa_crypto_init() == PSA_SUCCESS ? 0 : -1; }
#endif

/* 3.x with TLS 1.3 needs PSA crypto initialised once per process. */
static int crypto_init(void)
{
#ifdef NSV__TLS_PSA
    pthread_once(&psa_once, psa_init);
    return psa_status;
#else
    return 0;
#endif
}

static int tls_error(nsv_server *s, int ret, const char *what)
{
    char msg[160];
    mbedtls_strerror(ret, msg, sizeof msg);
    return nsv__set_detail(s, NSV_ETLS, "%s: %s (-0x%04x)", what, msg, (unsigned)-ret);
}

/* ---- options ---- */

static tls_opts *opts_get(nsv_server *s)
{
    /* Created by the host thread (nsv_set_str / nsv_listen) before loops
     * can need it, or by a loop for outbound sessions: guard the creation. */
    static pthread_mutex_t create = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&create);
    tls_opts *o = s->tls;
    if (!o) {
        o = nsv__calloc(&s->alloc, sizeof *o);
        if (o) {
            pthread_mutex_init(&o->lock, NULL);
            s->tls = o;
        }
    }
    pthread_mutex_unlock(&create);
    return o;
}

static void opt_clear(nsv_server *s, tls_opts *o, int i)
{
    if (o->pem[i]) {
        mbedtls_platform_zeroize(o->pem[i], o->len[i]);
        nsv__free(&s->alloc, o->pem[i]);
    }
    o->pem[i] = NULL;
    o->len[i] = 0;
}

static int opt_store(nsv_server *s, tls_opts *o, int i, const char *v, size_t len)
{
    char *p = nsv__malloc(&s->alloc, len + 1);
    if (!p)
        return nsv__set_detail(s, NSV_ENOMEM, "nsv_set_str: no memory for a %zu-byte value", len);
    memcpy(p, v, len);
    p[len] = 0;
    opt_clear(s, o, i);
    o->pem[i] = p;
    o->len[i] = len;
    return NSV_OK;
}

/* Read a whole PEM file into option slot i. */
static int opt_load_file(nsv_server *s, tls_opts *o, int i, const char *path, size_t plen)
{
    char name[4096];
    if (plen >= sizeof name)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_set_str: file name is %zu bytes; at most %zu",
                               plen, sizeof name - 1);
    if (memchr(path, 0, plen))
        return nsv__set_detail(s, NSV_EINVAL, "nsv_set_str: file name contains a NUL byte at byte %zu",
                               (size_t)((const char *)memchr(path, 0, plen) - path));
    memcpy(name, path, plen);
    name[plen] = 0;
    FILE *f = fopen(name, "rb");
    if (!f)
        return nsv__set_detail(s, NSV_ETLS, "cannot open %s: %s", name, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > MAX_PEM) {
        fclose(f);
        return nsv__set_detail(s, NSV_ETLS, "%s: not a regular file of at most %u bytes", name, MAX_PEM);
    }
    size_t n = (size_t)st.st_size;
    char *p = nsv__malloc(&s->alloc, n + 1);
    if (!p) {
        fclose(f);
        return nsv__set_detail(s, NSV_ENOMEM, "nsv_set_str: no memory for %s (%zu bytes)", name, n);
    }
    size_t got = fread(p, 1, n, f);
    fclose(f);
    if (got != n) {
        nsv__free(&s->alloc, p);
        return nsv__set_detail(s, NSV_ETLS, "cannot read %s", name);
    }
    p[n] = 0;
    opt_clear(s, o, i);
    o->pem[i] = p;
    o->len[i] = n;
    return NSV_OK;
}

/* Each _FILE option stores into the slot of its _PEM twin. */
static int pem_slot(int opt)
{
    switch (opt) {
    case NSV_OPT_TLS_CERT_FILE: return IDX(NSV_OPT_TLS_CERT_PEM);
    case NSV_OPT_TLS_KEY_FILE: return IDX(NSV_OPT_TLS_KEY_PEM);
    case NSV_OPT_TLS_CA_FILE: return IDX(NSV_OPT_TLS_CA_PEM);
    case NSV_OPT_TLS_CLIENT_CA_FILE: return IDX(NSV_OPT_TLS_CLIENT_CA_PEM);
    default: return IDX(opt);
    }
}

int nsv__tls_set_str(nsv_server *s, int opt, const char *v, size_t len)
{
    tls_opts *o = opts_get(s);
    if (!o)
        return nsv__set_detail(s, NSV_ENOMEM, "nsv_set_str: no memory for the TLS options");
    int client = opt == NSV_OPT_TLS_CLIENT_CA_FILE || opt == NSV_OPT_TLS_CLIENT_CA_PEM;
    int slot = pem_slot(opt), is_file = slot != IDX(opt), r = NSV_OK;
    pthread_mutex_lock(&o->lock);
    if (client ? o->client_frozen : o->server_frozen)
        r = nsv__set_detail(s, NSV_ESTATE, "nsv_set_str: the %s TLS options are in use (frozen by the "
                            "first %s) and can no longer change", client ? "outbound" : "listener",
                            client ? "outbound TLS connection" : "TLS nsv_listen");
    else if (!v || !len)
        opt_clear(s, o, slot);
    else if (is_file)
        r = opt_load_file(s, o, slot, v, len);
    else
        r = opt_store(s, o, slot, v, len);
    pthread_mutex_unlock(&o->lock);
    return r;
}

void nsv__tls_server_free(nsv_server *s)
{
    tls_opts *o = s->tls;
    if (!o)
        return;
    for (int i = 0; i < NSTR; i++)
        opt_clear(s, o, i);
    resume_free(s, o->res);
    pthread_mutex_destroy(&o->lock);
    nsv__free(&s->alloc, o);
    s->tls = NULL;
}

/* ---- building configurations ---- */

static void side_init(tls_side *sd)
{
    mbedtls_ssl_config_init(&sd->conf);
    mbedtls_x509_crt_init(&sd->chain);
    mbedtls_x509_crt_init(&sd->ca);
    mbedtls_pk_init(&sd->key);
}

static void side_free(tls_side *sd)
{
    mbedtls_ssl_config_free(&sd->conf);
    mbedtls_x509_crt_free(&sd->chain);
    mbedtls_x509_crt_free(&sd->ca);
    mbedtls_pk_free(&sd->key);
}

static int parse_crt(nsv_server *s, mbedtls_x509_crt *crt, const tls_opts *o, int opt, const char *what)
{
    int i = IDX(opt);
    int r = mbedtls_x509_crt_parse(crt, (const unsigned char *)o->pem[i], o->len[i] + 1);
    if (r < 0)
        return tls_error(s, r, what);
    if (r > 0) /* PEM chains: the number of certificates that failed */
        return nsv__set_detail(s, NSV_ETLS, "%s: %d certificate(s) could not be parsed", what, r);
    return NSV_OK;
}

/* SNI: remember the name for the host (one certificate serves all names).
 * Only printable ASCII is kept, so the event block stays "sni\0subject\0". */
static int on_sni(void *p, mbedtls_ssl_context *ssl, const unsigned char *name, size_t len)
{
    (void)p;
    tls_sess *t = (tls_sess *)ssl;
    if (len >= sizeof t->sni)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (name[i] <= 0x20 || name[i] >= 0x7f)
            return 0;
    memcpy(t->sni, name, len);
    t->sni_len = (uint16_t)len;
    return 0;
}

/* ---- session resumption ---- */

/* The session whose handshake this thread is driving: the ticket and cache
 * callbacks get no SSL context, so they mark the session through this. */
static _Thread_local tls_sess *hs_cur;

static int ticket_write(void *p, const mbedtls_ssl_session *sess, unsigned char *start,
                        const unsigned char *end, size_t *tlen, uint32_t *lifetime)
{
    tls_resume *rs = p;
    pthread_mutex_lock(&rs->ticket_lock);
    int r = mbedtls_ssl_ticket_write(&rs->ticket, sess, start, end, tlen, lifetime);
    pthread_mutex_unlock(&rs->ticket_lock);
    return r;
}

/* Success here means mbedTLS resumes: it sets handshake->resume right after. */
static int ticket_parse(void *p, mbedtls_ssl_session *sess, unsigned char *buf, size_t len)
{
    tls_resume *rs = p;
    pthread_mutex_lock(&rs->ticket_lock);
    int r = mbedtls_ssl_ticket_parse(&rs->ticket, sess, buf, len);
    pthread_mutex_unlock(&rs->ticket_lock);
    if (r == 0 && hs_cur)
        hs_cur->resumed = 1;
    return r;
}

#if MBEDTLS_VERSION_NUMBER < 0x03000000
/* 2.x resumes a cached session only if the suite negotiated for this
 * ClientHello matches the cached one: check the same before counting. */
static int cache_get(void *p, mbedtls_ssl_session *sess)
{
    tls_resume *rs = p;
    pthread_mutex_lock(&rs->cache_lock);
    int r = mbedtls_ssl_cache_get(&rs->cache, sess);
    pthread_mutex_unlock(&rs->cache_lock);
    const mbedtls_ssl_session *neg = hs_cur ? hs_cur->ssl.session_negotiate : NULL;
    if (r == 0 && neg && neg->ciphersuite == sess->ciphersuite && neg->compression == sess->compression)
        hs_cur->resumed = 1;
    return r;
}

static int cache_set(void *p, const mbedtls_ssl_session *sess)
{
    tls_resume *rs = p;
    pthread_mutex_lock(&rs->cache_lock);
    int r = mbedtls_ssl_cache_set(&rs->cache, sess);
    pthread_mutex_unlock(&rs->cache_lock);
    return r;
}
#else
static int cache_get(void *p, unsigned char const *id, size_t id_len, mbedtls_ssl_session *sess)
{
    tls_resume *rs = p;
    pthread_mutex_lock(&rs->cache_lock);
    int r = mbedtls_ssl_cache_get(&rs->cache, id, id_len, sess);
    pthread_mutex_unlock(&rs->cache_lock);
    if (r == 0 && hs_cur)
        hs_cur->resumed = 1;
    return r;
}

static int cache_set(void *p, unsigned char const *id, size_t id_len, const mbedtls_ssl_session *sess)
{
    tls_resume *rs = p;
    pthread_mutex_lock(&rs->cache_lock);
    int r = mbedtls_ssl_cache_set(&rs->cache, id, id_len, sess);
    pthread_mutex_unlock(&rs->cache_lock);
    return r;
}
#endif

static void resume_free(nsv_server *s, tls_resume *rs)
{
    if (!rs)
        return;
    mbedtls_ssl_ticket_free(&rs->ticket);
    mbedtls_ssl_cache_free(&rs->cache);
    mbedtls_ctr_drbg_free(&rs->drbg);
    mbedtls_entropy_free(&rs->entropy);
    pthread_mutex_destroy(&rs->ticket_lock);
    pthread_mutex_destroy(&rs->cache_lock);
    nsv__free(&s->alloc, rs);
}

/* From the options as they are at the first TLS nsv_listen. *out stays
 * NULL when tickets and cache are both off. */
static int resume_create(nsv_server *s, tls_resume **out)
{
    *out = NULL;
    int tickets = s->tls_tickets != 0, cache_on = s->tls_session_cache > 0;
    if (!tickets && !cache_on)
        return NSV_OK;
    tls_resume *rs = nsv__calloc(&s->alloc, sizeof *rs);
    if (!rs)
        return nsv__set_detail(s, NSV_ENOMEM, "no memory for the TLS session state");
    pthread_mutex_init(&rs->ticket_lock, NULL);
    pthread_mutex_init(&rs->cache_lock, NULL);
    mbedtls_entropy_init(&rs->entropy);
    mbedtls_ctr_drbg_init(&rs->drbg);
    mbedtls_ssl_ticket_init(&rs->ticket);
    mbedtls_ssl_cache_init(&rs->cache);
    static const unsigned char pers[] = "libnanosrv tickets";
    int r = mbedtls_ctr_drbg_seed(&rs->drbg, mbedtls_entropy_func, &rs->entropy, pers, sizeof pers - 1);
    if (r) {
        resume_free(s, rs);
        return tls_error(s, r, "random generator");
    }
    /* Keys rotate every lifetime; the previous key still decrypts, so a
     * ticket is accepted for up to one lifetime whenever it was issued. */
    uint32_t life = (uint32_t)s->tls_ticket_lifetime_s;
    if (tickets && (r = mbedtls_ssl_ticket_setup(&rs->ticket, mbedtls_ctr_drbg_random, &rs->drbg,
                                                  MBEDTLS_CIPHER_AES_256_GCM, life)) != 0) {
        resume_free(s, rs);
        return tls_error(s, r, "session ticket keys");
    }
    if (cache_on) {
        mbedtls_ssl_cache_set_max_entries(&rs->cache, (int)s->tls_session_cache);
        mbedtls_ssl_cache_set_timeout(&rs->cache, (int)life);
    }
    rs->tickets = tickets;
    rs->cache_on = cache_on;
    *out = rs;
    return NSV_OK;
}

static void resume_conf(mbedtls_ssl_config *conf, tls_resume *rs)
{
    if (!rs)
        return;
    if (rs->tickets)
        mbedtls_ssl_conf_session_tickets_cb(conf, ticket_write, ticket_parse, rs);
    if (rs->cache_on)
        mbedtls_ssl_conf_session_cache(conf, rs, cache_get, cache_set);
}

/* Server side: chain, key, optional client CA; caller holds o->lock. */
static int build_server(nsv_server *s, tls_loop *tl, const tls_opts *o)
{
    tls_side *sd = &tl->srv;
    if (!o->pem[IDX(NSV_OPT_TLS_CERT_PEM)] || !o->pem[IDX(NSV_OPT_TLS_KEY_PEM)])
        return nsv__set_detail(s, NSV_ETLS, "a TLS listener needs NSV_OPT_TLS_CERT_FILE/_PEM and "
                                            "NSV_OPT_TLS_KEY_FILE/_PEM");
    int r = parse_crt(s, &sd->chain, o, NSV_OPT_TLS_CERT_PEM, "certificate");
    if (r)
        return r;
    int k = IDX(NSV_OPT_TLS_KEY_PEM);
    r = parse_key(&sd->key, o->pem[k], o->len[k] + 1, o->pem[IDX(NSV_OPT_TLS_KEY_PASSWORD)], &tl->drbg);
    if (r)
        return tls_error(s, r, "private key");
    if ((r = check_pair(&sd->chain.pk, &sd->key, &tl->drbg)) != 0)
        return tls_error(s, r, "certificate and private key do not match");
    int verify = o->verify_client;
    if (verify) {
        if (!o->pem[IDX(NSV_OPT_TLS_CA_PEM)])
            return nsv__set_detail(s, NSV_ETLS, "NSV_OPT_TLS_VERIFY_CLIENT needs NSV_OPT_TLS_CA_FILE/_PEM");
        if ((r = parse_crt(s, &sd->ca, o, NSV_OPT_TLS_CA_PEM, "client CA")) != 0)
            return r;
    }
    mbedtls_ssl_config *confs[2] = {&sd->conf, &tl->srv_raw};
    for (int i = 0; i < 2; i++) {
        mbedtls_ssl_config *conf = confs[i];
        r = mbedtls_ssl_config_defaults(conf, MBEDTLS_SSL_IS_SERVER, MBEDTLS_SSL_TRANSPORT_STREAM,
                                        MBEDTLS_SSL_PRESET_DEFAULT);
        if (r)
            return tls_error(s, r, "TLS configuration");
        mbedtls_ssl_conf_rng(conf, mbedtls_ctr_drbg_random, &tl->drbg);
        min_tls12(conf);
#if MBEDTLS_VERSION_NUMBER < 0x03000000
        if (ecdhe_curves[0] != MBEDTLS_ECP_DP_NONE)
            mbedtls_ssl_conf_curves(conf, ecdhe_curves);
#endif
        if ((r = mbedtls_ssl_conf_own_cert(conf, &sd->chain, &sd->key)) != 0)
            return tls_error(s, r, "certificate");
        if (verify)
            mbedtls_ssl_conf_ca_chain(conf, &sd->ca, NULL);
        mbedtls_ssl_conf_authmode(conf, verify == 2 ? MBEDTLS_SSL_VERIFY_REQUIRED
                                        : verify == 1 ? MBEDTLS_SSL_VERIFY_OPTIONAL
                                                      : MBEDTLS_SSL_VERIFY_NONE);
        mbedtls_ssl_conf_sni(conf, on_sni, NULL);
        resume_conf(conf, o->res);
    }
    if ((r = mbedtls_ssl_conf_alpn_protocols(&sd->conf, (s->http2 & NSV_H2_TLS) ? alpn_h2 : alpn_http)) != 0)
        return tls_error(s, r, "ALPN");
    return NSV_OK;
}

/* Client side: CA (option or system bundle) unless verification is off.
 * verify picks the configuration (tl->cli[verify]). */
static int build_client(nsv_server *s, tls_loop *tl, const tls_opts *o, int verify)
{
    tls_side *sd = &tl->cli[verify];
    int r;
    if (verify) {
        if (o->pem[IDX(NSV_OPT_TLS_CLIENT_CA_PEM)])
            r = parse_crt(s, &sd->ca, o, NSV_OPT_TLS_CLIENT_CA_PEM, "server CA");
        else if ((r = mbedtls_x509_crt_parse_file(&sd->ca, SYSTEM_CA)) < 0)
            r = tls_error(s, r, "system CA bundle " SYSTEM_CA);
        else
            r = NSV_OK; /* a bundle may hold a few certificates mbedTLS cannot read */
        if (r)
            return r;
    }
    r = mbedtls_ssl_config_defaults(&sd->conf, MBEDTLS_SSL_IS_CLIENT, MBEDTLS_SSL_TRANSPORT_STREAM,
                                    MBEDTLS_SSL_PRESET_DEFAULT);
    if (r)
        return tls_error(s, r, "TLS configuration");
    mbedtls_ssl_conf_rng(&sd->conf, mbedtls_ctr_drbg_random, &tl->drbg);
    min_tls12(&sd->conf);
    if (verify)
        mbedtls_ssl_conf_ca_chain(&sd->conf, &sd->ca, NULL);
    mbedtls_ssl_conf_authmode(&sd->conf, verify ? MBEDTLS_SSL_VERIFY_REQUIRED : MBEDTLS_SSL_VERIFY_NONE);
    return NSV_OK;
}

static void loop_tls_destroy(nsv_server *s, tls_loop *tl)
{
    side_free(&tl->srv);
    mbedtls_ssl_config_free(&tl->srv_raw);
    side_free(&tl->cli[0]);
    side_free(&tl->cli[1]);
    mbedtls_ctr_drbg_free(&tl->drbg);
    mbedtls_entropy_free(&tl->entropy);
    nsv__free(&s->alloc, tl->pend);
    nsv__free(&s->alloc, tl->pend_spare);
    nsv__free(&s->alloc, tl);
}

static tls_loop *loop_tls_create(nsv_server *s)
{
    if (crypto_init() != 0) {
        nsv__set_detail(s, NSV_ETLS, "PSA crypto initialisation failed");
        return NULL;
    }
    tls_loop *tl = nsv__calloc(&s->alloc, sizeof *tl);
    if (!tl)
        return NULL;
    mbedtls_entropy_init(&tl->entropy);
    mbedtls_ctr_drbg_init(&tl->drbg);
    side_init(&tl->srv);
    mbedtls_ssl_config_init(&tl->srv_raw);
    side_init(&tl->cli[0]);
    side_init(&tl->cli[1]);
    static const unsigned char pers[] = "libnanosrv";
    int r = mbedtls_ctr_drbg_seed(&tl->drbg, mbedtls_entropy_func, &tl->entropy, pers, sizeof pers - 1);
    if (r) {
        tls_error(s, r, "random generator");
        loop_tls_destroy(s, tl);
        return NULL;
    }
    return tl;
}

/* The loop's objects, created on first use by the loop's own thread. */
static tls_loop *loop_tls(nsv__loop *l)
{
    if (!l->tls)
        l->tls = loop_tls_create(l->srv);
    return l->tls;
}

void nsv__tls_loop_free(nsv__loop *l)
{
    if (l->tls)
        loop_tls_destroy(l->srv, l->tls);
    l->tls = NULL;
}

/* Check the listener options once in the caller's thread (so errors come
 * back from nsv_listen); each loop parses its own copy at its first accept. */
int nsv__tls_server_init(nsv_server *s)
{
    tls_opts *o = opts_get(s);
    if (!o)
        return NSV_ENOMEM;
    pthread_mutex_lock(&o->lock);
    int r = NSV_OK;
    if (!o->server_frozen) {
        o->verify_client = (int)s->tls_verify_client; /* loops build from this snapshot */
        tls_loop *tmp = NULL;
        if ((r = resume_create(s, &o->res)) == NSV_OK) {
            tmp = loop_tls_create(s);
            r = tmp ? build_server(s, tmp, o) : NSV_ETLS;
        }
        if (tmp)
            loop_tls_destroy(s, tmp);
        if (r != NSV_OK) { /* nsv_listen may be called again after a fix */
            resume_free(s, o->res);
            o->res = NULL;
        }
        o->server_frozen = r == NSV_OK;
    }
    pthread_mutex_unlock(&o->lock);
    return r;
}

/* ---- sessions ---- */

/* mbedTLS sends each handshake message on its own; during the handshake
 * they are held back (MSG_MORE) and pushed as one flight by uncork(). */
static int bio_send(void *ctx, const unsigned char *buf, size_t len)
{
    tls_sess *t = ctx;
    ssize_t n = send(t->fd, buf, len, MSG_NOSIGNAL | (t->done ? 0 : MSG_MORE));
    if (n >= 0) {
        t->corked |= !t->done;
        return (int)n;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return MBEDTLS_ERR_SSL_WANT_WRITE;
    return errno == EPIPE || errno == ECONNRESET ? MBEDTLS_ERR_NET_CONN_RESET : MBEDTLS_ERR_NET_SEND_FAILED;
}

static void uncork(tls_sess *t)
{
    if (!t->corked)
        return;
    int one = 1; /* setting TCP_NODELAY flushes pending output (tcp(7)) */
    setsockopt(t->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    t->corked = 0;
}

static int bio_recv(void *ctx, unsigned char *buf, size_t len)
{
    ssize_t n = recv(((tls_sess *)ctx)->fd, buf, len, 0);
    if (n >= 0)
        return (int)n;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return MBEDTLS_ERR_SSL_WANT_READ;
    return errno == ECONNRESET ? MBEDTLS_ERR_NET_CONN_RESET : MBEDTLS_ERR_NET_RECV_FAILED;
}

static int sess_new(nsv__loop *l, nsv__conn *c, const mbedtls_ssl_config *conf, tls_sess **out)
{
    tls_sess *t = nsv__calloc(&l->srv->alloc, sizeof *t);
    if (!t)
        return NSV_ENOMEM;
    mbedtls_ssl_init(&t->ssl);
    int r = mbedtls_ssl_setup(&t->ssl, conf);
    if (r) {
        mbedtls_ssl_free(&t->ssl);
        nsv__free(&l->srv->alloc, t);
        return r == MBEDTLS_ERR_SSL_ALLOC_FAILED ? NSV_ENOMEM : tls_error(l->srv, r, "TLS session");
    }
    t->fd = c->fd;
    mbedtls_ssl_set_bio(&t->ssl, t, bio_send, bio_recv, NULL);
    c->tls = t;
    *out = t;
    return NSV_OK;
}

int nsv__tls_accept(nsv__loop *l, nsv__conn *c, int kind)
{
    tls_loop *tl = loop_tls(l);
    if (!tl)
        return NSV_ENOMEM;
    if (!tl->srv_ready) {
        tls_opts *o = opts_get(l->srv);
        if (!o)
            return NSV_ENOMEM;
        pthread_mutex_lock(&o->lock);
        int r = build_server(l->srv, tl, o);
        pthread_mutex_unlock(&o->lock);
        if (r) {
            nsv__log(NSV_LOG_ERROR, "TLS listener: %s", nsv_last_error_detail(l->srv));
            return r;
        }
        tl->srv_ready = 1;
    }
    tls_sess *t;
    return sess_new(l, c, kind == NSV__TLS_RAW ? &tl->srv_raw : &tl->srv.conf, &t);
}

#if MBEDTLS_VERSION_NUMBER < 0x03000000
/* Does the certificate list this address as an iPAddress subjectAltName?
 * mbedTLS 2 keeps only dNSName and otherName entries, so the extension is
 * read here from the raw v3 extensions (mbedTLS 3.5 checks it itself). */
static int cert_has_ip(const mbedtls_x509_crt *crt, const unsigned char *ip, size_t iplen)
{
    unsigned char *p = crt->v3_ext.p, *end;
    size_t len;
    if (!p || !crt->v3_ext.len)
        return 0;
    end = p + crt->v3_ext.len;
    if (mbedtls_asn1_get_tag(&p, end, &len, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE))
        return 0;
    end = p + len;
    while (p < end) {
        if (mbedtls_asn1_get_tag(&p, end, &len, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE))
            return 0;
        unsigned char *ext_end = p + len;
        if (mbedtls_asn1_get_tag(&p, ext_end, &len, MBEDTLS_ASN1_OID))
            return 0;
        int san = len == MBEDTLS_OID_SIZE(MBEDTLS_OID_SUBJECT_ALT_NAME) &&
                  memcmp(p, MBEDTLS_OID_SUBJECT_ALT_NAME, len) == 0;
        p += len;
        if (!san) {
            p = ext_end;
            continue;
        }
        int critical;
        (void)mbedtls_asn1_get_bool(&p, ext_end, &critical); /* optional; p stays on another tag */
        if (mbedtls_asn1_get_tag(&p, ext_end, &len, MBEDTLS_ASN1_OCTET_STRING) ||
            mbedtls_asn1_get_tag(&p, ext_end, &len, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE))
            return 0;
        unsigned char *names_end = p + len;
        while (p < names_end) {
            unsigned char tag = *p++;
            if (mbedtls_asn1_get_len(&p, names_end, &len))
                return 0;
            if (tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_X509_SAN_IP_ADDRESS) && len == iplen &&
                memcmp(p, ip, iplen) == 0)
                return 1;
            p += len;
        }
        return 0;
    }
    return 0;
}

/* Verification of a server reached by address: the leaf must list it. */
static int verify_ip(void *arg, mbedtls_x509_crt *crt, int depth, uint32_t *flags)
{
    const tls_sess *t = arg;
    if (depth == 0 && !cert_has_ip(crt, t->ip, t->ip_len))
        *flags |= MBEDTLS_X509_BADCERT_CN_MISMATCH;
    return 0;
}
#endif

int nsv__tls_client_start(nsv__loop *l, nsv__conn *c, const char *host, size_t hlen, int verify)
{
    char name[256];
    if (hlen >= sizeof name || (hlen && memchr(host, 0, hlen)))
        return nsv__set_detail(l->srv, NSV_EINVAL, "bad TLS host name");
    if (verify < 0)
        verify = l->srv->tls_verify_server != 0;
    verify = verify != 0;
    tls_loop *tl = loop_tls(l);
    if (!tl)
        return NSV_ENOMEM;
    if (!tl->cli_ready[verify]) {
        tls_opts *o = opts_get(l->srv);
        if (!o)
            return NSV_ENOMEM;
        pthread_mutex_lock(&o->lock);
        o->client_frozen = 1;
        side_free(&tl->cli[verify]); /* a failed earlier attempt may have left parts */
        side_init(&tl->cli[verify]);
        int r = build_client(l->srv, tl, o, verify);
        pthread_mutex_unlock(&o->lock);
        if (r)
            return r;
        tl->cli_ready[verify] = 1;
    }
    tls_sess *t;
    int r = sess_new(l, c, &tl->cli[verify].conf, &t);
    if (r)
        return r;
    t->client = 1;
    if (hlen)
        memcpy(name, host, hlen);
    name[hlen] = 0;
    memcpy(t->sni, name, hlen);
    t->sni_len = (uint16_t)hlen;
    /* An IP address is no host name: no SNI for it (RFC 6066 3), and the
     * certificate must list it as an iPAddress subjectAltName (RFC 6125),
     * which verify_ip checks since mbedTLS 2 compares names only. */
#if MBEDTLS_VERSION_NUMBER < 0x03000000
    char bare[64];
    size_t blen = hlen;
    const char *b = name;
    if (hlen > 2 && name[0] == '[' && name[hlen - 1] == ']')
        b = name + 1, blen = hlen - 2;
    if (blen && blen < sizeof bare) {
        memcpy(bare, b, blen);
        bare[blen] = 0;
        if (inet_pton(AF_INET, bare, t->ip) == 1)
            t->ip_len = 4;
        else if (inet_pton(AF_INET6, bare, t->ip) == 1)
            t->ip_len = 16;
    }
    if (t->ip_len && verify)
        mbedtls_ssl_set_verify(&t->ssl, verify_ip, t);
#endif
    /* No name: no SNI, and verification checks the chain only (NULL says
     * so explicitly, which newer mbedTLS requires). */
    if ((r = mbedtls_ssl_set_hostname(&t->ssl, hlen && !t->ip_len ? name : NULL)) != 0) {
        nsv__tls_free(l, c);
        return tls_error(l->srv, r, "TLS host name");
    }
    return NSV_OK;
}

/* Handshake complete: keep what the host may read later. */
static void established(nsv__loop *l, nsv__conn *c, tls_sess *t)
{
    t->done = 1;
    if (!t->client) {
        NSV__COUNT(l, NSV_M_TLS_HANDSHAKES);
        if (t->resumed)
            NSV__COUNT(l, NSV_M_TLS_RESUMED);
    }
    const mbedtls_x509_crt *peer = t->client ? NULL : mbedtls_ssl_get_peer_cert(&t->ssl);
    if (peer && mbedtls_ssl_get_verify_result(&t->ssl) == 0) {
        int n = mbedtls_x509_dn_gets(t->subj, sizeof t->subj, &peer->subject);
        t->subj_len = n > 0 ? (uint16_t)n : 0;
    }
    nsv__log(NSV_LOG_VERBOSE, "TLS %s with %s: %s %s", t->client ? "connected" : "accepted", c->peer,
             mbedtls_ssl_get_version(&t->ssl), mbedtls_ssl_get_ciphersuite(&t->ssl));
    /* During the handshake EPOLLOUT meant "mbedTLS wants to write"; now it
     * means queued output again. */
    nsv__conn_set_events(l, c, c->reading, c->out.len > c->out.off);
}

/* One handshake step: 1 complete, 0 in progress, or an mbedTLS error. */
static int hs_step(nsv__loop *l, nsv__conn *c, tls_sess *t)
{
    for (;;) {
        hs_cur = t;
        int r = mbedtls_ssl_handshake(&t->ssl);
        hs_cur = NULL;
        if (r == 0 || r == MBEDTLS_ERR_SSL_WANT_READ)
            uncork(t); /* the flight is complete: the peer must answer it */
        if (r == 0) {
            established(l, c, t);
            return 1;
        }
        if (r == MBEDTLS_ERR_SSL_WANT_READ) {
            nsv__conn_set_events(l, c, 1, 0);
            return 0;
        }
        if (r == MBEDTLS_ERR_SSL_WANT_WRITE) {
            nsv__conn_set_events(l, c, 1, 1);
            return 0;
        }
#ifdef MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET
        if (r == MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET)
            continue;
#endif
        return r;
    }
}

static void hs_failed(nsv__loop *l, nsv__conn *c, int r)
{
    atomic_fetch_add(&l->srv->tls_failures, 1); /* NSV_OPT_TLS_HANDSHAKE_FAILURES: both sides, as before */
    if (c->tls && !((tls_sess *)c->tls)->client)
        NSV__COUNT(l, NSV_M_TLS_FAILURES); /* beside tls_handshakes: the server side */
    if (c->await_tls) { /* outbound: the host hears why its connect failed */
        char msg[400];
        memcpy(msg, "TLS: ", 5);
        mbedtls_strerror(r, msg + 5, 195);
        size_t n = strlen(msg);
        uint32_t vf = r == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED ? mbedtls_ssl_get_verify_result(&((tls_sess *)c->tls)->ssl) : 0;
        if (vf && vf != (uint32_t)-1) { /* which checks failed, e.g. the name */
            int k = mbedtls_x509_crt_verify_info(msg + n + 2, sizeof msg - n - 2, "", vf);
            if (k > 0) {
                msg[n] = ':', msg[n + 1] = ' ';
                n += 2 + (size_t)k;
                while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
                    n--;
                for (size_t i = 0; i < n; i++)
                    if (msg[i] == '\n')
                        msg[i] = ';';
            }
        }
        if (c->httpc)
            l->srv->httpc_hooks->conn_error(l, c, NSV_ETLS, msg, n);
        else
            nsv__evq_emit(l, c, NSV_EV_ERROR, NSV_ETLS, 0, msg, n);
    }
    if (nsv_log_level() >= NSV_LOG_DEBUG) {
        char msg[160];
        mbedtls_strerror(r, msg, sizeof msg);
        nsv__log(NSV_LOG_DEBUG, "TLS handshake with %s:%u failed: %s", c->peer, c->peer_port, msg);
    }
}

int nsv__tls_handshake(nsv__loop *l, nsv__conn *c)
{
    tls_sess *t = c->tls;
    if (!t || t->done)
        return 1;
    int r = hs_step(l, c, t);
    if (r >= 0)
        return r ? 2 : 0;
    hs_failed(l, c, r);
    nsv__conn_close(l, c);
    return -1;
}

/* For the data path: 0 ready, -1 with errno (EAGAIN while in progress). */
static int ensure_ready(nsv__loop *l, nsv__conn *c, tls_sess *t)
{
    if (t->done)
        return 0;
    int r = hs_step(l, c, t);
    if (r == 1)
        return 0;
    if (r == 0) {
        errno = EAGAIN;
        return -1;
    }
    hs_failed(l, c, r);
    errno = EPROTO;
    return -1;
}

static int buffered(const tls_sess *t)
{
    return mbedtls_ssl_get_bytes_avail(&t->ssl) > 0 || mbedtls_ssl_check_pending(&t->ssl);
}

static void pend_add(nsv__loop *l, nsv__conn *c, tls_sess *t)
{
    tls_loop *tl = l->tls;
    if (t->queued || !tl)
        return;
    if (tl->npend == tl->cap) {
        uint32_t cap = tl->cap ? tl->cap * 2 : 16;
        uint64_t *p = nsv__realloc(&l->srv->alloc, tl->pend, cap * sizeof *p);
        if (!p)
            return; /* the bytes wait for the peer's next record */
        tl->pend = p;
        tl->cap = cap;
    }
    tl->pend[tl->npend++] = nsv__conn_id(l, c);
    t->queued = 1;
}

int nsv__tls_has_ready(nsv__loop *l)
{
    tls_loop *tl = l->tls;
    for (uint32_t i = 0; tl && i < tl->npend; i++) {
        nsv__conn *c = nsv__conn_get(l, tl->pend[i]);
        if (c && c->tls && c->reading)
            return 1;
    }
    return 0;
}

void nsv__tls_run_pending(nsv__loop *l, nsv__tls_event_fn fn)
{
    tls_loop *tl = l->tls;
    if (!tl || !tl->npend)
        return;
    /* Swap lists: handlers may queue connections again. */
    uint64_t *ids = tl->pend;
    uint32_t n = tl->npend, cap = tl->cap;
    tl->pend = tl->pend_spare;
    tl->cap = tl->cap_spare;
    tl->npend = 0;
    for (uint32_t i = 0; i < n; i++) {
        nsv__conn *c = nsv__conn_get(l, ids[i]);
        tls_sess *t = c ? c->tls : NULL;
        if (!t)
            continue;
        t->queued = 0;
        if (!buffered(t))
            continue;
        if (!c->reading) { /* the reader paused: wait until it reads again */
            pend_add(l, c, t);
            continue;
        }
        fn(l, c->slot, EPOLLIN);
    }
    tl->pend_spare = ids;
    tl->cap_spare = cap;
}

ssize_t nsv__tls_recv(nsv__loop *l, nsv__conn *c, char *buf, size_t n)
{
    tls_sess *t = c->tls;
    if (ensure_ready(l, c, t) != 0)
        return -1;
    if (t->eof)
        return 0;
    /* Fill the caller's buffer: records already decrypted would otherwise
     * sit where epoll cannot see them. */
    size_t got = 0;
    int err = 0;
    while (got < n) {
        int r = mbedtls_ssl_read(&t->ssl, (unsigned char *)buf + got, n - got);
        if (r > 0) {
            got += (size_t)r;
            continue;
        }
        if (r == MBEDTLS_ERR_SSL_WANT_READ || r == MBEDTLS_ERR_SSL_WANT_WRITE)
            break;
#ifdef MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET
        if (r == MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET)
            continue;
#endif
        if (r == 0 || r == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY || r == MBEDTLS_ERR_SSL_CONN_EOF)
            t->eof = 1;
        else
            err = r;
        break;
    }
    if (got) {
        if (got == n && !t->eof && buffered(t))
            pend_add(l, c, t);
        return (ssize_t)got;
    }
    if (t->eof)
        return 0;
    if (err) {
        nsv__log(NSV_LOG_DEBUG, "TLS read from %s:%u: -0x%04x", c->peer, c->peer_port, (unsigned)-err);
        errno = err == MBEDTLS_ERR_NET_CONN_RESET ? ECONNRESET : EPROTO;
        return -1;
    }
    errno = EAGAIN;
    return -1;
}

ssize_t nsv__tls_send(nsv__loop *l, nsv__conn *c, const char *buf, size_t n)
{
    tls_sess *t = c->tls;
    if (ensure_ready(l, c, t) != 0)
        return -1;
    /* After WANT_WRITE mbedTLS holds an encrypted record and must be called
     * with the same data; it then reports the length it was given. The
     * output buffer may have grown meanwhile, so repeat the length. */
    if (t->wlen && t->wlen < n)
        n = t->wlen;
    int r = mbedtls_ssl_write(&t->ssl, (const unsigned char *)buf, n);
    if (r >= 0) {
        t->wlen = 0;
        return r;
    }
    if (r == MBEDTLS_ERR_SSL_WANT_WRITE || r == MBEDTLS_ERR_SSL_WANT_READ) {
        t->wlen = (uint32_t)(n > UINT32_MAX ? UINT32_MAX : n);
        errno = EAGAIN;
        return -1;
    }
    errno = r == MBEDTLS_ERR_NET_CONN_RESET ? ECONNRESET : EPIPE;
    return -1;
}

void nsv__tls_free(nsv__loop *l, nsv__conn *c)
{
    tls_sess *t = c->tls;
    if (!t)
        return;
    /* close_notify lets the peer tell a complete close from a cut one; it
     * is sent only if the socket takes it at once. */
    if (t->done && !t->eof && !t->wlen)
        mbedtls_ssl_close_notify(&t->ssl);
    mbedtls_ssl_free(&t->ssl);
    nsv__free(&l->srv->alloc, t);
    c->tls = NULL;
}

const char *nsv__tls_alpn(const nsv__conn *c)
{
    const tls_sess *t = c->tls;
    return t && t->done ? mbedtls_ssl_get_alpn_protocol(&t->ssl) : NULL;
}

uint32_t nsv__tls_info_len(const nsv__conn *c)
{
    const tls_sess *t = c->tls;
    return t ? (uint32_t)t->sni_len + t->subj_len + 2 : 0;
}

uint32_t nsv__tls_info_put(const nsv__conn *c, char *dst)
{
    const tls_sess *t = c->tls;
    if (!t)
        return 0;
    memcpy(dst, t->sni, t->sni_len);
    dst[t->sni_len] = 0;
    memcpy(dst + t->sni_len + 1, t->subj, t->subj_len);
    dst[t->sni_len + 1 + t->subj_len] = 0;
    return (uint32_t)t->sni_len + t->subj_len + 2;
}

#endif /* NSV_WITH_MBEDTLS */
