/* mime.c - media types of static files by file name extension. */
#include "../internal.h"
#include <string.h>

/* Text types carry the charset so browsers do not guess it. */
static const struct {
    const char *ext;
    const char *type;
} mime[] = {
    {"html", "text/html; charset=utf-8"},
    {"htm", "text/html; charset=utf-8"},
    {"css", "text/css; charset=utf-8"},
    {"js", "text/javascript; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"},
    {"json", "application/json"},
    {"map", "application/json"},
    {"webmanifest", "application/manifest+json"},
    {"txt", "text/plain; charset=utf-8"},
    {"md", "text/markdown; charset=utf-8"},
    {"csv", "text/csv; charset=utf-8"},
    {"xml", "application/xml"},
    {"svg", "image/svg+xml"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"avif", "image/avif"},
    {"ico", "image/x-icon"},
    {"bmp", "image/bmp"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"ttf", "font/ttf"},
    {"otf", "font/otf"},
    {"wasm", "application/wasm"},
    {"pdf", "application/pdf"},
    {"zip", "application/zip"},
    {"gz", "application/gzip"},
    {"tar", "application/x-tar"},
    {"mp4", "video/mp4"},
    {"webm", "video/webm"},
    {"ogg", "audio/ogg"},
    {"mp3", "audio/mpeg"},
    {"wav", "audio/wav"},
    {"m4a", "audio/mp4"},
};

#define OCTET "application/octet-stream"

/* Index of name's type in the table, or -1 for the default. */
int nsv__mime_index(const char *name, size_t len)
{
    if (!name)
        return -1;
    size_t dot = len;
    for (size_t i = len; i-- > 0;) {
        if (name[i] == '.') {
            dot = i;
            break;
        }
        if (name[i] == '/')
            break;
    }
    if (dot == len || dot + 1 == len || len - dot - 1 > 12)
        return -1;
    const char *e = name + dot + 1;
    size_t elen = len - dot - 1;
    for (size_t i = 0; i < NSV__ARRAY_LEN(mime); i++)
        if (strlen(mime[i].ext) == elen && nsv__strncaseeq(e, mime[i].ext, elen))
            return (int)i;
    return -1;
}

const char *nsv__mime_by_index(int i)
{
    return i >= 0 && (size_t)i < NSV__ARRAY_LEN(mime) ? mime[i].type : OCTET;
}

NSV_API const char *nsv_mime_type(const char *name, size_t len) { return nsv__mime_by_index(nsv__mime_index(name, len)); }
