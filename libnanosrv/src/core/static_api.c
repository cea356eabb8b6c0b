/* static_api.c - the public calls of static files: nsv_serve_dir (a mount,
 * set up before the server runs) and nsv_reply_file (the file is opened in
 * the calling thread, so a missing one is reported there; the answer is
 * written on the connection's loop). nsv_mime_type is in util/mime.c. */
#include "server.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#define KNOWN_FLAGS (NSV_STATIC_LIST | NSV_STATIC_SYMLINKS | NSV_STATIC_PRECOMPRESSED | NSV_STATIC_FALLTHROUGH | \
                     NSV_STATIC_DOTFILES | NSV_STATIC_PLAIN)
#define CC_MAX 1024

/* A NUL-terminated copy of a file system path. */
static int path_copy(nsv_server *s, const char *fn, const char *what, const char *p, size_t n, char *out)
{
    if (n == 0)
        return nsv__set_detail(s, NSV_EINVAL, "%s: %s is empty", fn, what);
    if (n >= PATH_MAX)
        return nsv__set_detail(s, NSV_EINVAL, "%s: %s is %zu bytes, longer than PATH_MAX", fn, what, n);
    if (memchr(p, 0, n))
        return nsv__set_detail(s, NSV_EINVAL, "%s: %s contains a NUL byte", fn, what);
    memcpy(out, p, n);
    out[n] = 0;
    return 0;
}

NSV_API int nsv_serve_dir(nsv_server *s, const char *prefix, size_t plen, const char *dir, size_t dlen,
                          const char *cache_control, size_t clen, uint32_t flags)
{
    static const char fn[] = "nsv_serve_dir";
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "%s: srv is NULL", fn);
    if (!prefix || plen == 0 || prefix[0] != '/' || prefix[plen - 1] != '/')
        return nsv__set_detail(s, NSV_EINVAL, "%s: prefix \"%.*s\" must start and end with '/' (e.g. \"/static/\")",
                               fn, prefix ? (int)(plen > 200 ? 200 : plen) : 0, prefix ? prefix : "");
    if (plen > 1024)
        return nsv__set_detail(s, NSV_EINVAL, "%s: prefix is %zu bytes; at most 1024", fn, plen);
    for (size_t i = 0; i < plen; i++) {
        unsigned char ch = (unsigned char)prefix[i];
        if (ch <= 0x20 || ch >= 0x7f || ch == '?' || ch == '#' || ch == '%' || ch == '\\')
            return nsv__set_detail(s, NSV_EINVAL, "%s: prefix has byte 0x%02x at %zu; it is matched against the "
                                   "raw request path, so use plain (unencoded) path characters", fn, ch, i);
    }
    if (!dir)
        return nsv__set_detail(s, NSV_EINVAL, "%s: dir is NULL", fn);
    if (clen && !cache_control)
        return nsv__set_detail(s, NSV_EINVAL, "%s: cache_control is NULL with clen %zu", fn, clen);
    if (clen > CC_MAX)
        return nsv__set_detail(s, NSV_EINVAL, "%s: cache_control is %zu bytes; at most %d", fn, clen, CC_MAX);
    if (flags & ~(uint32_t)KNOWN_FLAGS)
        return nsv__set_detail(s, NSV_EINVAL, "%s: unknown flags 0x%x", fn, (unsigned)(flags & ~(uint32_t)KNOWN_FLAGS));
    if (flags & NSV_STATIC_PLAIN)
        return nsv__set_detail(s, NSV_EINVAL, "%s: NSV_STATIC_PLAIN is for nsv_reply_file (a mount always answers "
                               "conditional and Range requests)", fn);
    char path[PATH_MAX];
    int r = path_copy(s, fn, "dir", dir, dlen, path);
    if (r)
        return r;
    char cc[CC_MAX + 20];
    size_t cclen = 0;
    if (clen) {
        memcpy(cc, "Cache-Control: ", 15);
        memcpy(cc + 15, cache_control, clen);
        memcpy(cc + 15 + clen, "\r\n", 2);
        cclen = 15 + clen + 2;
        nsv__hscan hs;
        if (nsv__headers_scan(s, cc, cclen, &hs) != 0)
            return nsv__set_detail(s, NSV_EINVAL, "%s: cache_control holds a control byte (CR, LF, NUL, ...)", fn);
    }
    for (int i = 0; i < s->nmounts; i++)
        if (s->mounts[i].plen == plen && memcmp(s->mounts[i].prefix, prefix, plen) == 0)
            return nsv__set_detail(s, NSV_EINVAL, "%s: prefix \"%.*s\" is mounted already (mount %d)", fn,
                                   (int)plen, prefix, i);
    int dfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return nsv__set_detail(s, NSV_ENOTFOUND, "%s: %s: %s", fn, path, strerror(errno));
    r = nsv__setup_begin(s, fn, "mount directories");
    if (r) {
        close(dfd);
        return r;
    }
    nsv__mount *ms = nsv__realloc(&s->alloc, s->mounts, (size_t)(s->nmounts + 1) * sizeof *ms);
    char *pc = nsv__malloc(&s->alloc, plen);
    char *cp = cclen ? nsv__malloc(&s->alloc, cclen) : NULL;
    if (ms)
        s->mounts = ms;
    if (!ms || !pc || (cclen && !cp)) {
        nsv__free(&s->alloc, pc);
        nsv__free(&s->alloc, cp);
        close(dfd);
        nsv__setup_end(s);
        return nsv__set_detail(s, NSV_ENOMEM, "%s: out of memory", fn);
    }
    memcpy(pc, prefix, plen);
    if (cclen)
        memcpy(cp, cc, cclen);
    int id = s->nmounts;
    ms[id] = (nsv__mount){.prefix = pc, .plen = (uint32_t)plen, .dirfd = dfd, .cc = cp, .cclen = (uint32_t)cclen,
                          .flags = flags};
    s->nmounts++;
    nsv__setup_end(s);
    return id;
}

NSV_API int nsv_reply_file(nsv_server *s, uint64_t conn, int status, const char *root, size_t rlen,
                           const char *path, size_t plen, const char *req_headers, size_t rhlen,
                           const char *headers, size_t hlen, uint32_t flags)
{
    static const char fn[] = "nsv_reply_file";
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "%s: srv is NULL", fn);
    if (!path && plen)
        return nsv__set_detail(s, NSV_EINVAL, "%s: path is NULL with plen %zu", fn, plen);
    if (!root && rlen)
        return nsv__set_detail(s, NSV_EINVAL, "%s: root is NULL with rlen %zu", fn, rlen);
    if (!req_headers && rhlen)
        return nsv__set_detail(s, NSV_EINVAL, "%s: req_headers is NULL with rhlen %zu", fn, rhlen);
    if (!headers && hlen)
        return nsv__set_detail(s, NSV_EINVAL, "%s: headers is NULL with hlen %zu", fn, hlen);
    if (flags & ~(uint32_t)KNOWN_FLAGS)
        return nsv__set_detail(s, NSV_EINVAL, "%s: unknown flags 0x%x", fn, (unsigned)(flags & ~(uint32_t)KNOWN_FLAGS));
    if (status != 0 && (status < 200 || status > 999 || status == 204 || status == 304))
        return nsv__set_detail(s, NSV_EINVAL, "%s: status %d; 0 (as the request asks) or 200..999 with a body "
                               "(not 204 or 304)", fn, status);
    if (NSV__ID_LOOP(conn) >= (uint32_t)s->nloops || NSV__ID_GEN(conn) == 0)
        return nsv__set_detail(s, NSV_ESTALE, "%s: 0x%llx is not a connection id of this server", fn,
                               (unsigned long long)conn);
    int host_ctype = 0;
    if (hlen) {
        nsv__hscan hs;
        if (nsv__headers_scan(s, headers, hlen, &hs) != 0 || nsv__static_host_block(s, headers, hlen, &host_ctype) != 0)
            return NSV_EINVAL; /* the detail names the byte and the rule */
    }
    /* A plain file answers no condition: the request's headers are not
     * consulted at all (a precompressed sibling is still chosen by
     * Accept-Encoding, which the request's headers carry). */
    int plain = !!(flags & NSV_STATIC_PLAIN);
    nsv__sreq q;
    nsv__sreq_block(&q, req_headers, rhlen);
    char rel[PATH_MAX + 32];
    int64_t n;
    int dirfd = AT_FDCWD;
    if (rlen) {
        char rp[PATH_MAX];
        int r = path_copy(s, fn, "root", root, rlen, rp);
        if (r)
            return r;
        dirfd = open(rp, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dirfd < 0)
            return nsv__set_detail(s, NSV_ENOTFOUND, "%s: root %s: %s", fn, rp, strerror(errno));
        n = nsv__static_path(path, plen, !!(flags & NSV_STATIC_DOTFILES), rel, PATH_MAX);
        if (n < 0) {
            close(dirfd);
            return nsv__set_detail(s, NSV_ENOTFOUND, "%s: path \"%.*s\" is refused under a root (\"..\", encoded "
                                   "'/', '\\', control bytes, invalid UTF-8%s)", fn, (int)(plen > 200 ? 200 : plen),
                                   path, flags & NSV_STATIC_DOTFILES ? "" : ", dot files");
        }
    } else {
        int r = path_copy(s, fn, "path", path, plen, rel);
        if (r)
            return r;
        n = (int64_t)plen;
    }
    nsv__sfile f;
    int dfd = -1;
    int r = nsv__static_resolve(dirfd, rel, (size_t)n, flags, &q, &f, &dfd);
    if (dfd >= 0)
        close(dfd);
    if (dirfd != AT_FDCWD)
        close(dirfd);
    if (r < 0)
        return nsv__set_detail(s, NSV_ENOTFOUND, "%s: no file \"%.*s\"%s", fn, (int)(plen > 200 ? 200 : plen),
                               path, rlen ? " under the root" : "");
    return nsv__conn_call_file(s, conn, status, headers, hlen, plain ? NULL : req_headers, plain ? 0 : rhlen,
                               NSV__FILE_ARG(f.fd, f.enc, f.vary, host_ctype | plain << 1, f.mime));
}
