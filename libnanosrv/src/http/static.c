/* static.c - files from disk as HTTP answers: the mounts of nsv_serve_dir,
 * matched before routing, and the answer of nsv_reply_file. Opening and
 * choosing the file (nsv__static_resolve) may run on any thread; answering
 * (nsv__static_send) runs on the connection's loop. */
#include "http.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SMALL_FILE (64 * 1024) /* read into the output with its head: one write */
#define OPEN_FLAGS (O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)

/* ---- request headers the answer depends on ---- */

static int hname(const char *n, size_t nl, const char *want)
{
    size_t wl = strlen(want);
    return nl == wl && nsv__strncaseeq(n, want, wl);
}

void nsv__sreq_header(nsv__sreq *q, const char *n, size_t nl, const char *v, size_t vl)
{
    if (nl < 5 || nl > 19)
        return;
    if (hname(n, nl, "if-none-match"))
        q->inm = v, q->inm_len = (uint32_t)vl;
    else if (hname(n, nl, "if-modified-since"))
        q->ims = v, q->ims_len = (uint32_t)vl;
    else if (hname(n, nl, "range"))
        q->range = v, q->range_len = (uint32_t)vl;
    else if (hname(n, nl, "if-range"))
        q->if_range = v, q->if_range_len = (uint32_t)vl;
    else if (hname(n, nl, "accept-encoding"))
        q->ae = v, q->ae_len = (uint32_t)vl;
}

/* A request's header block ("Name: value\r\n" lines, as events carry it). */
void nsv__sreq_block(nsv__sreq *q, const char *b, size_t n)
{
    memset(q, 0, sizeof *q);
    size_t i = 0;
    while (i < n) {
        const char *eol = memchr(b + i, '\n', n - i);
        size_t end = eol ? (size_t)(eol - b) : n;
        const char *colon = memchr(b + i, ':', end - i);
        if (colon) {
            size_t nl = (size_t)(colon - (b + i));
            const char *v = colon + 1;
            size_t vl = (size_t)(b + end - v);
            while (vl && (*v == ' ' || *v == '\t'))
                v++, vl--;
            while (vl && (v[vl - 1] == '\r' || v[vl - 1] == ' ' || v[vl - 1] == '\t'))
                vl--;
            nsv__sreq_header(q, b + i, nl, v, vl);
        }
        i = end + 1;
    }
}

/* ---- opening files under a root ---- */

static atomic_int no_openat2;

/* The file system path an open descriptor names (via /proc). */
static int fd_path(int fd, char *out, size_t cap)
{
    char proc[40];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, out, cap - 1);
    if (n <= 0 || (size_t)n >= cap - 1)
        return -1;
    out[n] = 0;
    return 0;
}

/* Open rel (relative, normalised: no "..") under the directory dirfd. A
 * symlink on the way may not lead out of it unless NSV_STATIC_SYMLINKS:
 * openat2's RESOLVE_BENEATH decides in the kernel, in the same walk that
 * opens the file (no window between a check and the open). It also refuses
 * absolute symlinks that stay inside; those (and kernels without openat2)
 * take the slow way: an O_PATH descriptor (which opens nothing), the path it
 * landed on compared with the root's, then a reopen of that very inode.
 * dirfd AT_FDCWD: rel is used as given (nsv_reply_file without a root).
 * Returns a descriptor or NSV_ENOTFOUND. */
int nsv__static_open(int dirfd, const char *rel, uint32_t flags)
{
    const char *p = *rel ? rel : ".";
    if (dirfd == AT_FDCWD || (flags & NSV_STATIC_SYMLINKS)) {
        int fd = openat(dirfd, p, OPEN_FLAGS);
        return fd >= 0 ? fd : NSV_ENOTFOUND;
    }
    if (!atomic_load_explicit(&no_openat2, memory_order_relaxed)) {
        struct open_how how = {.flags = OPEN_FLAGS, .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
        long fd = syscall(SYS_openat2, dirfd, p, &how, sizeof how);
        if (fd >= 0)
            return (int)fd;
        if (errno == ENOSYS)
            atomic_store_explicit(&no_openat2, 1, memory_order_relaxed);
        else if (errno != EXDEV)
            return NSV_ENOTFOUND;
    }
    int pfd = openat(dirfd, p, O_PATH | O_CLOEXEC);
    if (pfd < 0)
        return NSV_ENOTFOUND;
    char root[PATH_MAX], at[PATH_MAX];
    int fd = -1;
    if (fd_path(dirfd, root, sizeof root) == 0 && fd_path(pfd, at, sizeof at) == 0) {
        size_t rl = strlen(root);
        if (rl == 1) /* the root is "/" */
            rl = 0;
        if (strncmp(at, root, rl) == 0 && (at[rl] == '/' || at[rl] == 0)) {
            char proc[40];
            snprintf(proc, sizeof proc, "/proc/self/fd/%d", pfd);
            fd = open(proc, OPEN_FLAGS);
        }
    }
    close(pfd);
    return fd >= 0 ? fd : NSV_ENOTFOUND;
}

/* ---- Accept-Encoding ---- */

/* q-value in thousandths (RFC 9110 12.4.2), or -1 when malformed. */
static int qvalue(const char *v, size_t n)
{
    if (n == 0 || (v[0] != '0' && v[0] != '1'))
        return -1;
    int q = (v[0] - '0') * 1000;
    if (n == 1)
        return q;
    if (v[1] != '.' || n > 5)
        return -1;
    int scale = 100;
    for (size_t i = 2; i < n; i++, scale /= 10) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        q += (v[i] - '0') * scale;
    }
    return q > 1000 ? -1 : q;
}

/* Weight the client gives br (want 1) or gzip (want 2); 0 refuses it. */
static void accepted(const char *v, size_t n, int *br, int *gz)
{
    int star = -1;
    *br = *gz = -1;
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t s = i;
        while (i < n && nsv__is_tchar((unsigned char)v[i]))
            i++;
        size_t tl = i - s;
        int q = 1000;
        while (i < n && v[i] != ',') { /* parameters: only q counts */
            while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ';'))
                i++;
            size_t ps = i;
            while (i < n && v[i] != ',' && v[i] != ';')
                i++;
            size_t pl = i - ps;
            while (pl && (v[ps + pl - 1] == ' ' || v[ps + pl - 1] == '\t'))
                pl--;
            if (pl >= 2 && (v[ps] == 'q' || v[ps] == 'Q') && v[ps + 1] == '=') {
                int qq = qvalue(v + ps + 2, pl - 2);
                q = qq < 0 ? 0 : qq; /* a malformed weight does not make a coding welcome */
            }
        }
        if (tl == 2 && nsv__strncaseeq(v + s, "br", 2))
            *br = q;
        else if ((tl == 4 && nsv__strncaseeq(v + s, "gzip", 4)) || (tl == 6 && nsv__strncaseeq(v + s, "x-gzip", 6)))
            *gz = q > *gz ? q : *gz;
        else if (tl == 1 && v[s] == '*')
            star = q;
        if (tl == 0 && i < n && v[i] != ',')
            i++; /* a stray byte: step over it */
    }
    if (*br < 0)
        *br = star < 0 ? 0 : star;
    if (*gz < 0)
        *gz = star < 0 ? 0 : star;
}

/* ---- choosing the file ---- */

/* Open rel[0, *rlen) under dirfd as a regular file: a directory gives its
 * index.html (rel grows by it, rel has room for it and ".br"). Returns the
 * descriptor with *st, or NSV_ENOTFOUND; *dir_fd gets the directory's
 * descriptor when it has no index.html (the caller lists it or not), else -1. */
static int open_file(int dirfd, char *rel, size_t *rlen, uint32_t flags, struct stat *st, int *dir_fd,
                     uint8_t *index)
{
    *dir_fd = -1;
    *index = 0;
    int fd = nsv__static_open(dirfd, rel, flags);
    if (fd < 0)
        return fd;
    if (fstat(fd, st) != 0) {
        close(fd);
        return NSV_ENOTFOUND;
    }
    if (S_ISDIR(st->st_mode)) {
        int idx = -1;
        /* The directory was opened safely: index.html is looked up in it, a
         * symlink there judged again from the root. */
        size_t n = *rlen;
        memcpy(rel + n, n ? "/index.html" : "index.html", n ? 12 : 11);
        idx = nsv__static_open(dirfd, rel, flags);
        if (idx >= 0 && (fstat(idx, st) != 0 || !S_ISREG(st->st_mode))) {
            close(idx);
            idx = NSV_ENOTFOUND;
        }
        if (idx < 0) {
            rel[n] = 0;
            *dir_fd = fd;
            return NSV_ENOTFOUND;
        }
        close(fd);
        *rlen = n + (n ? 11 : 10);
        *index = 1;
        return idx;
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        return NSV_ENOTFOUND;
    }
    return fd;
}

/* Pick what answers rel: the file, or with NSV_STATIC_PRECOMPRESSED its
 * NAME.br / NAME.gz when the client accepts that coding. Fills f (which
 * then owns a descriptor). NSV_ENOTFOUND when there is no such file;
 * *dir_fd as for open_file. rel needs room for "/index.html.br" more. */
int nsv__static_resolve(int dirfd, char *rel, size_t rlen, uint32_t flags, const nsv__sreq *q,
                        nsv__sfile *f, int *dir_fd)
{
    struct stat st;
    rel[rlen] = 0;
    int fd = open_file(dirfd, rel, &rlen, flags, &st, dir_fd, &f->index);
    if (fd < 0)
        return fd;
    f->fd = fd;
    f->enc = 0;
    f->vary = 0;
    f->mime = (int16_t)nsv__mime_index(rel, rlen);
    if (flags & NSV_STATIC_PRECOMPRESSED) {
        f->vary = 1;
        int br = 0, gz = 0;
        if (q->ae)
            accepted(q->ae, q->ae_len, &br, &gz);
        for (int pass = 0; pass < 2; pass++) {
            int want_br = (pass == 0) == (br >= gz); /* the higher weight first; br on a tie */
            if ((want_br ? br : gz) <= 0)
                continue;
            memcpy(rel + rlen, want_br ? ".br" : ".gz", 4);
            int vfd = nsv__static_open(dirfd, rel, flags);
            rel[rlen] = 0;
            struct stat vs;
            if (vfd >= 0 && fstat(vfd, &vs) == 0 && S_ISREG(vs.st_mode)) {
                close(fd);
                f->fd = vfd;
                f->enc = want_br ? 1 : 2;
                break;
            }
            if (vfd >= 0)
                close(vfd);
        }
    }
    return NSV_OK;
}

/* ---- validators and ranges ---- */

static int etag_of(const struct stat *st, char *o)
{
    return snprintf(o, 48, "\"%llx-%llx\"", (unsigned long long)st->st_mtim.tv_sec,
                    (unsigned long long)st->st_size);
}

/* An If-None-Match list against our (strong) tag with the weak comparison:
 * "W/" is ignored on both sides; "*" matches any. */
static int inm_match(const char *v, size_t n, const char *tag, size_t tl)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        if (i == n)
            break;
        if (v[i] == '*')
            return 1;
        if (n - i >= 2 && v[i] == 'W' && v[i + 1] == '/')
            i += 2;
        if (i == n || v[i] != '"')
            return 0; /* malformed: no match */
        size_t s = i++;
        while (i < n && v[i] != '"')
            i++;
        if (i == n)
            return 0;
        i++;
        if (i - s == tl && memcmp(v + s, tag, tl) == 0)
            return 1;
    }
    return 0;
}

/* IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") to Unix seconds; -1 if not one. */
static int64_t parse_date(const char *v, size_t n)
{
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    if (n != 29 || v[3] != ',' || v[4] != ' ' || v[7] != ' ' || v[11] != ' ' || v[16] != ' ' ||
        v[19] != ':' || v[22] != ':' || memcmp(v + 25, " GMT", 4) != 0)
        return -1;
    static const int digits[] = {5, 6, 12, 13, 14, 15, 17, 18, 20, 21, 23, 24};
    for (size_t i = 0; i < NSV__ARRAY_LEN(digits); i++)
        if (v[digits[i]] < '0' || v[digits[i]] > '9')
            return -1;
    int mon = -1;
    for (int i = 0; i < 12; i++)
        if (memcmp(v + 8, months + 3 * i, 3) == 0)
            mon = i + 1;
    if (mon < 0)
        return -1;
    int64_t d = (v[5] - '0') * 10 + (v[6] - '0');
    int64_t y = (v[12] - '0') * 1000 + (v[13] - '0') * 100 + (v[14] - '0') * 10 + (v[15] - '0');
    int hh = (v[17] - '0') * 10 + (v[18] - '0'), mi = (v[20] - '0') * 10 + (v[21] - '0');
    int ss = (v[23] - '0') * 10 + (v[24] - '0');
    if (d < 1 || d > 31 || hh > 23 || mi > 59 || ss > 60)
        return -1;
    /* Days from civil (H. Hinnant), the inverse of nsv__imf_fixdate's. */
    y -= mon <= 2;
    int64_t era = y / 400, yoe = y - era * 400;
    int64_t doy = (153 * (mon > 2 ? mon - 3 : mon + 9) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return (era * 146097 + doe - 719468) * 86400 + hh * 3600 + mi * 60 + ss;
}

static int parse_u63(const char *v, size_t n, size_t *i, uint64_t *out)
{
    size_t s = *i;
    uint64_t x = 0;
    while (*i < n && v[*i] >= '0' && v[*i] <= '9') {
        if (*i - s >= 18)
            return -1;
        x = x * 10 + (uint64_t)(v[*i] - '0');
        (*i)++;
    }
    *out = x;
    return *i > s ? 0 : -1;
}

/* One "bytes=" range against size. 1: [*a, *b] to send (206); 0: ignore
 * the header (malformed, several ranges, another unit: send it all); -1:
 * unsatisfiable (416). */
static int parse_range(const char *v, size_t n, uint64_t size, uint64_t *a, uint64_t *b)
{
    if (n < 6 || !nsv__strncaseeq(v, "bytes=", 6) || memchr(v, ',', n))
        return 0;
    size_t i = 6;
    while (i < n && (v[i] == ' ' || v[i] == '\t'))
        i++;
    uint64_t x = 0, y = 0;
    int has_x = i < n && v[i] != '-';
    if (has_x && parse_u63(v, n, &i, &x) != 0)
        return 0;
    if (i == n || v[i] != '-')
        return 0;
    i++;
    int has_y = i < n && v[i] >= '0' && v[i] <= '9';
    if (has_y && parse_u63(v, n, &i, &y) != 0)
        return 0;
    while (i < n && (v[i] == ' ' || v[i] == '\t'))
        i++;
    if (i != n || (!has_x && !has_y))
        return 0;
    if (!has_x) { /* suffix: the last y bytes */
        if (y == 0 || size == 0)
            return -1;
        *a = y >= size ? 0 : size - y;
        *b = size - 1;
        return 1;
    }
    if (has_y && y < x)
        return 0; /* invalid: ignored */
    if (x >= size)
        return -1;
    *a = x;
    *b = has_y && y < size ? y : size - 1;
    return 1;
}

/* ---- the answer ---- */

static char *put_str(char *p, const char *s)
{
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

/* The host's block: its Content-Type replaces ours; Content-Length and
 * Transfer-Encoding are the library's to write. Call after nsv__headers_scan. */
int nsv__static_host_block(nsv_server *s, const char *h, size_t n, int *has_ctype)
{
    *has_ctype = 0;
    size_t i = 0;
    while (i < n) {
        const char *eol = memchr(h + i, '\n', n - i);
        size_t end = eol ? (size_t)(eol - h) + 1 : n;
        const char *colon = memchr(h + i, ':', end - i);
        size_t nl = colon ? (size_t)(colon - (h + i)) : 0;
        if (hname(h + i, nl, "content-type"))
            *has_ctype = 1;
        else if (hname(h + i, nl, "content-length") || hname(h + i, nl, "transfer-encoding"))
            return nsv__set_detail(s, NSV_EINVAL, "nsv_reply_file: headers has %.*s; the library frames the file "
                                   "itself", (int)nl, h + i);
        i = end;
    }
    return 0;
}

/* Answer c's pending request with f (whose descriptor this takes: closed
 * or attached to the connection on every path). status 0 follows the
 * conditional and Range headers (200, 206, 304, 416); another status sends
 * the whole file with it. cc: "Cache-Control: ...\r\n" or empty; hdrs: the
 * host's block (checked by the caller); hflags NSV__SF_HOST_CTYPE when it
 * has a Content-Type, NSV__SF_PLAIN for a file without our validators
 * (the caller passes no request headers then, so no condition applies). */
int nsv__static_send(nsv__loop *l, nsv__conn *c, int status, nsv__sfile *f, const nsv__sreq *q,
                     const char *cc, size_t cclen, const char *hdrs, size_t hlen, int hflags)
{
    int host_ctype = hflags & NSV__SF_HOST_CTYPE, plain = hflags & NSV__SF_PLAIN;
    nsv_server *s = l->srv;
    int fd = f->fd;
    f->fd = -1;
    struct stat st;
    if (c->state != NSV__C_PENDING || fstat(fd, &st) != 0) {
        close(fd);
        return c->state != NSV__C_PENDING
                   ? nsv__set_detail(s, NSV_ESTATE, "nsv_reply_file: connection 0x%llx has no request waiting "
                                     "for a reply", (unsigned long long)nsv__conn_id(l, c))
                   : nsv__set_detail(s, NSV_ESYS, "nsv_reply_file: fstat: %s", strerror(errno));
    }
    uint64_t size = (uint64_t)st.st_size, a = 0, b = size ? size - 1 : 0;
    char tag[48], lm[30];
    int tl = etag_of(&st, tag);
    nsv__imf_fixdate((int64_t)st.st_mtim.tv_sec, lm);
    lm[29] = 0;
    int code = status ? status : 200;
    if (status == 0) {
        if (q->inm ? inm_match(q->inm, q->inm_len, tag, (size_t)tl)
                   : q->ims && parse_date(q->ims, q->ims_len) >= (int64_t)st.st_mtim.tv_sec)
            code = 304;
        int use_range = code == 200 && q->range;
        if (use_range && q->if_range) {
            /* If-Range: the range only if the representation is still the
             * one the client has (an exact strong tag or date). */
            if (q->if_range_len && q->if_range[0] == '"')
                use_range = q->if_range_len == (uint32_t)tl && memcmp(q->if_range, tag, (size_t)tl) == 0;
            else
                use_range = parse_date(q->if_range, q->if_range_len) == (int64_t)st.st_mtim.tv_sec;
        }
        if (use_range) {
            int r = parse_range(q->range, q->range_len, size, &a, &b);
            code = r > 0 ? 206 : r < 0 ? 416 : 200;
        }
    }
    uint64_t len = code == 206 ? b - a + 1 : size;
    /* Our lines, then the host's. */
    char small[1024];
    size_t cap = 512 + cclen + hlen;
    char *blk = cap <= sizeof small ? small : nsv__malloc(&s->alloc, cap);
    if (!blk) {
        close(fd);
        return NSV_ENOMEM;
    }
    char *p = blk;
    if (!host_ctype && code != 304 && code != 416) {
        p = put_str(p, "Content-Type: ");
        p = put_str(p, nsv__mime_by_index(f->mime));
        p = put_str(p, "\r\n");
    }
    if (code != 304 && code != 416)
        p += sprintf(p, "Content-Length: %llu\r\n", (unsigned long long)len);
    if (code == 206)
        p += sprintf(p, "Content-Range: bytes %llu-%llu/%llu\r\n", (unsigned long long)a, (unsigned long long)b,
                     (unsigned long long)size);
    else if (code == 416)
        p += sprintf(p, "Content-Range: bytes */%llu\r\n", (unsigned long long)size);
    if (!plain) {
        p += sprintf(p, "Last-Modified: %s\r\nETag: %s\r\n", lm, tag);
        if (code != 304)
            p = put_str(p, "Accept-Ranges: bytes\r\n");
    }
    if (f->enc)
        p = put_str(p, f->enc == 1 ? "Content-Encoding: br\r\n" : "Content-Encoding: gzip\r\n");
    if (f->vary)
        p = put_str(p, "Vary: Accept-Encoding\r\n");
    if (cclen)
        memcpy(p, cc, cclen), p += cclen;
    if (hlen)
        memcpy(p, hdrs, hlen), p += hlen;
    int body = code != 304 && code != 416 && !c->head && len > 0;
    int r = nsv__reply(l, c, code, blk, (size_t)(p - blk), NULL, 0,
                       code == 304 || code == 416 ? NSV__REPLY_FULL : NSV__REPLY_FILE);
    if (blk != small)
        nsv__free(&s->alloc, blk);
    if (r != NSV_OK || !body) {
        close(fd);
        return r;
    }
    if (len <= SMALL_FILE) {
        /* Small: read behind its head, both leave in one write. */
        ssize_t n = -1;
        if (nsv__buf_reserve(l, &c->out, (size_t)len) == 0) {
            do
                n = pread(fd, c->out.p + c->out.len, (size_t)len, (off_t)a);
            while (n < 0 && errno == EINTR);
        }
        close(fd);
        if (n > 0)
            c->out.len += (uint32_t)n;
        if (n != (ssize_t)len) { /* shrank or failed: the promised length cannot be kept */
            c->keepalive = 0;
            c->closing = 1;
            c->state = NSV__C_NONE;
        }
        return NSV_OK;
    }
    nsv__conn_attach_file(c, fd, a, len);
    return NSV_OK;
}

/* ---- mounts ---- */

static int reply_text(nsv__loop *l, nsv__conn *c, int status, const char *extra, const char *body)
{
    char h[2200];
    int n = snprintf(h, sizeof h, "Content-Type: text/plain; charset=utf-8\r\n%s", extra ? extra : "");
    if (n < 0 || (size_t)n >= sizeof h)
        return nsv__error_reply(l, c, 500);
    return nsv__reply(l, c, status, h, (size_t)n, body, strlen(body), NSV__REPLY_FULL);
}

static void html_escape(char **p, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (s[i]) {
        case '&': *p = put_str(*p, "&amp;"); break;
        case '<': *p = put_str(*p, "&lt;"); break;
        case '>': *p = put_str(*p, "&gt;"); break;
        case '"': *p = put_str(*p, "&quot;"); break;
        case '\'': *p = put_str(*p, "&#39;"); break;
        default: *(*p)++ = s[i];
        }
    }
}

static void url_escape(char **p, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
            ch == '.' || ch == '_' || ch == '~') {
            *(*p)++ = (char)ch;
        } else {
            *(*p)++ = '%';
            *(*p)++ = hex[ch >> 4];
            *(*p)++ = hex[ch & 15];
        }
    }
}

static int cmp_names(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

/* An HTML listing of the directory dfd (taken), for the URL path upath. */
static int list_dir(nsv__loop *l, nsv__conn *c, int dfd, const char *upath, size_t ulen, uint32_t flags)
{
    const nsv__alloc *al = &l->srv->alloc;
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return nsv__error_reply(l, c, 500);
    }
    char **names = NULL;
    size_t nn = 0, cap = 0, bytes = 0;
    struct dirent *e;
    int fail = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' && (!(flags & NSV_STATIC_DOTFILES) || !e->d_name[1] ||
                                    (e->d_name[1] == '.' && !e->d_name[2])))
            continue;
        int isdir = e->d_type == DT_DIR;
        if (e->d_type == DT_UNKNOWN || e->d_type == DT_LNK) {
            struct stat st;
            isdir = fstatat(dirfd(d), e->d_name, &st, 0) == 0 && S_ISDIR(st.st_mode);
        }
        size_t n = strlen(e->d_name);
        if (nn == cap) {
            size_t nc = cap ? cap * 2 : 64;
            char **nw = nsv__realloc(al, names, nc * sizeof *nw);
            if (!nw) {
                fail = 1;
                break;
            }
            names = nw, cap = nc;
        }
        char *s = nsv__malloc(al, n + 2);
        if (!s) {
            fail = 1;
            break;
        }
        memcpy(s, e->d_name, n);
        s[n] = isdir ? '/' : 0;
        s[n + 1] = 0;
        names[nn++] = s;
        bytes += n;
    }
    closedir(d);
    char *html = NULL;
    if (!fail) {
        qsort(names, nn, sizeof *names, cmp_names);
        /* Each name byte grows to at most 6 (&quot;) shown and 3 in the link. */
        html = nsv__malloc(al, 300 + ulen * 12 + bytes * 9 + nn * 40);
    }
    int r;
    if (!html) {
        r = nsv__error_reply(l, c, 503);
    } else {
        char *p = html;
        p = put_str(p, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of ");
        html_escape(&p, upath, ulen);
        p = put_str(p, "</title></head>\n<body><h1>Index of ");
        html_escape(&p, upath, ulen);
        p = put_str(p, "</h1>\n<ul>\n<li><a href=\"../\">../</a></li>\n");
        for (size_t i = 0; i < nn; i++) {
            size_t n = strlen(names[i]);
            int dir = n && names[i][n - 1] == '/';
            p = put_str(p, "<li><a href=\"");
            url_escape(&p, names[i], n - (size_t)dir);
            if (dir)
                *p++ = '/';
            p = put_str(p, "\">");
            html_escape(&p, names[i], n);
            p = put_str(p, "</a></li>\n");
        }
        p = put_str(p, "</ul></body></html>\n");
        static const char hdr[] = "Content-Type: text/html; charset=utf-8\r\n";
        r = nsv__reply(l, c, 200, hdr, sizeof hdr - 1, html, (size_t)(p - html), NSV__REPLY_FULL);
        nsv__free(al, html);
    }
    for (size_t i = 0; i < nn; i++)
        nsv__free(al, names[i]);
    nsv__free(al, names);
    return r;
}

/* 301 to the same path with a '/' added (and the query kept). */
static int redirect_slash(nsv__loop *l, nsv__conn *c, const nsv__request *r)
{
    size_t need = r->path_len + r->query_len + 32;
    char small[1100];
    char *h = need <= sizeof small ? small : nsv__malloc(&l->srv->alloc, need);
    if (!h)
        return nsv__error_reply(l, c, 503);
    char *p = put_str(h, "Location: ");
    memcpy(p, r->path, r->path_len), p += r->path_len;
    *p++ = '/';
    if (r->query) {
        *p++ = '?';
        memcpy(p, r->query, r->query_len), p += r->query_len;
    }
    p = put_str(p, "\r\n");
    static const char body[] = "Moved Permanently\n";
    int rc;
    char *full = NULL;
    size_t hl = (size_t)(p - h);
    /* The Location bytes come from the request line, which the parser
     * checked: no CR, LF or other control byte can split the head. */
    full = nsv__malloc(&l->srv->alloc, hl + 48);
    if (!full) {
        rc = nsv__error_reply(l, c, 503);
    } else {
        memcpy(full, "Content-Type: text/plain; charset=utf-8\r\n", 41);
        memcpy(full + 41, h, hl);
        rc = nsv__reply(l, c, 301, full, hl + 41, body, sizeof body - 1, NSV__REPLY_FULL);
        nsv__free(&l->srv->alloc, full);
    }
    if (h != small)
        nsv__free(&l->srv->alloc, h);
    return rc;
}

/* The mount whose prefix starts path, the longest; *bare when path is the
 * prefix without its final '/'. */
static const nsv__mount *mount_of(const nsv_server *s, const char *path, size_t n, int *bare)
{
    const nsv__mount *best = NULL;
    *bare = 0;
    for (int i = 0; i < s->nmounts; i++) {
        const nsv__mount *m = &s->mounts[i];
        if (best && m->plen <= best->plen)
            continue;
        if (n >= m->plen && memcmp(path, m->prefix, m->plen) == 0)
            best = m, *bare = 0;
        else if (n + 1 == m->plen && memcmp(path, m->prefix, n) == 0)
            best = m, *bare = 1;
    }
    return best;
}

/* A request under a mount, answered here: 1 answered (or the connection is
 * gone), 0 not a mount's (or a miss that falls through to the routes). */
int nsv__static_request(nsv__loop *l, nsv__conn *c, const nsv__request *r)
{
    int bare;
    const nsv__mount *m = mount_of(l->srv, r->path, r->path_len, &bare);
    if (!m)
        return 0;
    int through = !!(m->flags & NSV_STATIC_FALLTHROUGH);
    int get = (r->method_len == 3 && memcmp(r->method, "GET", 3) == 0) || c->head;
    if (!get) {
        if (through)
            return 0;
        c->state = NSV__C_PENDING;
        reply_text(l, c, 405, "Allow: GET, HEAD\r\n", "Method Not Allowed\n");
        return 1;
    }
    c->state = NSV__C_PENDING;
    if (bare) {
        redirect_slash(l, c, r);
        return 1;
    }
    char rel[PATH_MAX + 32];
    const char *sub = r->path + m->plen;
    size_t sublen = r->path_len - m->plen;
    int64_t rl = nsv__static_path(sub, sublen, !!(m->flags & NSV_STATIC_DOTFILES), rel, PATH_MAX);
    nsv__sfile f;
    int dfd = -1;
    nsv__sreq q;
    if (rl >= 0) {
        memset(&q, 0, sizeof q);
        for (size_t i = 0; i < r->num_headers; i++)
            nsv__sreq_header(&q, r->headers[i].name, r->headers[i].name_len, r->headers[i].value,
                             r->headers[i].value_len);
        if (nsv__static_resolve(m->dirfd, rel, (size_t)rl, m->flags, &q, &f, &dfd) == NSV_OK) {
            if (f.index && rl > 0 && r->path[r->path_len - 1] != '/') {
                /* A directory named without its '/': relative links in its
                 * index.html need the slash form (as nginx answers). */
                close(f.fd);
                redirect_slash(l, c, r);
                return 1;
            }
            nsv__static_send(l, c, 0, &f, &q, m->cc, m->cclen, NULL, 0, 0);
            return 1;
        }
        if (dfd >= 0) { /* a directory without index.html */
            int slash = r->path_len > 0 && r->path[r->path_len - 1] == '/';
            if (!slash && rl > 0) {
                close(dfd);
                redirect_slash(l, c, r);
                return 1;
            }
            if (m->flags & NSV_STATIC_LIST) {
                list_dir(l, c, dfd, r->path, r->path_len, m->flags);
                return 1;
            }
            close(dfd);
        }
    }
    if (through) {
        c->state = NSV__C_READ; /* not answered: the request goes on to the routes */
        return 0;
    }
    reply_text(l, c, 404, NULL, "Not Found\n");
    return 1;
}

void nsv__static_free(nsv_server *s)
{
    for (int i = 0; i < s->nmounts; i++) {
        nsv__free(&s->alloc, s->mounts[i].prefix);
        nsv__free(&s->alloc, s->mounts[i].cc);
        close(s->mounts[i].dirfd);
    }
    nsv__free(&s->alloc, s->mounts);
    s->mounts = NULL;
    s->nmounts = 0;
}
