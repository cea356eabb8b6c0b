/* static_api.c - placeholder entry points for static files; the
 * implementation replaces this file. */
#include "server.h"

NSV_API int nsv_serve_dir(nsv_server *srv, const char *prefix, size_t plen, const char *dir, size_t dlen,
                          const char *cache_control, size_t clen, uint32_t flags)
{
    (void)srv, (void)prefix, (void)plen, (void)dir, (void)dlen, (void)cache_control, (void)clen, (void)flags;
    return NSV_ENOTSUP;
}

NSV_API int nsv_reply_file(nsv_server *srv, uint64_t conn, int status, const char *root, size_t rlen,
                           const char *path, size_t plen, const char *req_headers, size_t rhlen,
                           const char *headers, size_t hlen, uint32_t flags)
{
    (void)srv, (void)conn, (void)status, (void)root, (void)rlen, (void)path, (void)plen;
    (void)req_headers, (void)rhlen, (void)headers, (void)hlen, (void)flags;
    return NSV_ENOTSUP;
}

NSV_API const char *nsv_mime_type(const char *name, size_t len)
{
    (void)name, (void)len;
    return "application/octet-stream";
}
