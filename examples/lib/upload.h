/* upload.h - POST /upload of the echo-server and the demo: a
 * multipart/form-data body parsed while it streams in
 * (NSV_ROUTE_STREAM_BODY + nsv_multipart_*), each part hashed as it
 * passes, so a file of any size costs one read of memory.
 * Answers a JSON array, one object per part in order:
 * {"name", "filename" (null if none), "content_type" (null if none), "size",
 * "sha256"}; a malformed body gets 400, a body that is not multipart 415. */
#ifndef EXAMPLES_UPLOAD_H
#define EXAMPLES_UPLOAD_H

#include "sha256.h"
#include <nanosrv.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct upload {
    uint64_t conn;
    nsv_multipart *mp;
    sha256 sum;
    uint64_t size;
    char *json;
    size_t jlen, jcap;
} upload;

#define UPLOAD_SLOTS 4096
static upload *uploads[UPLOAD_SLOTS];
static pthread_mutex_t uploads_lock = PTHREAD_MUTEX_INITIALIZER; /* handlers may run on workers */
static _Atomic int uploads_n; /* uploads in the table: with none, a CLOSE probes nothing */

static upload **upload_slot(uint64_t conn, int for_new)
{
    for (uint64_t i = 0; i < UPLOAD_SLOTS; i++) {
        upload **u = &uploads[(conn * 0x9E3779B97F4A7C15ull + i) % UPLOAD_SLOTS];
        if (*u ? (*u)->conn == conn : for_new)
            return u;
    }
    return NULL;
}

static upload *upload_take(uint64_t conn)
{
    if (!uploads_n)
        return NULL;
    pthread_mutex_lock(&uploads_lock);
    upload **s = upload_slot(conn, 0);
    upload *u = s ? *s : NULL;
    pthread_mutex_unlock(&uploads_lock);
    return u;
}

static void upload_end(upload *u)
{
    pthread_mutex_lock(&uploads_lock);
    upload **s = upload_slot(u->conn, 0);
    if (s)
        *s = NULL, uploads_n--;
    pthread_mutex_unlock(&uploads_lock);
    nsv_multipart_free(u->mp);
    free(u->json);
    free(u);
}

static void upload_put(upload *u, const char *p, size_t n)
{
    if (u->jlen + n > u->jcap) {
        u->jcap = (u->jlen + n) * 2 + 256;
        u->json = realloc(u->json, u->jcap);
    }
    memcpy(u->json + u->jlen, p, n);
    u->jlen += n;
}

static void upload_str(upload *u, const char *s, size_t n, int present)
{
    if (!present) {
        upload_put(u, "null", 4);
        return;
    }
    upload_put(u, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char esc[8];
        if (ch == '"' || ch == '\\')
            upload_put(u, (const char[]){'\\', (char)ch}, 2);
        else if (ch < 0x20)
            upload_put(u, esc, (size_t)snprintf(esc, sizeof esc, "\\u%04x", ch));
        else
            upload_put(u, (const char *)&ch, 1);
    }
    upload_put(u, "\"", 1);
}

static void upload_fail(nsv_server *s, upload *u, int status, const char *why)
{
    nsv_reply(s, u->conn, status, "Content-Type: text/plain\r\n", 26, why, strlen(why));
    upload_end(u);
}

/* The head of POST /upload. */
static void upload_begin(nsv_server *s, const nsv_event *ev, const char *a)
{
    uint32_t ctlen = 0, off = 0, blen = 0;
    int64_t ct = nsv_ev_header(ev, a, "Content-Type", 12, &ctlen);
    int r = ct < 0 ? NSV_ENOTFOUND : nsv_multipart_boundary(a + ct, ctlen, &off, &blen);
    if (r != 0) {
        const char *why = r == NSV_ENOTFOUND ? "not multipart/form-data\n" : "bad multipart boundary\n";
        nsv_reply(s, ev->conn, r == NSV_ENOTFOUND ? 415 : 400, "Content-Type: text/plain\r\n", 26, why, strlen(why));
        return;
    }
    upload *u = calloc(1, sizeof *u);
    u->conn = ev->conn;
    u->mp = nsv_multipart_new(a + ct + off, blen, 0, 10000);
    upload_put(u, "[", 1);
    pthread_mutex_lock(&uploads_lock);
    upload **slot = u->mp ? upload_slot(ev->conn, 1) : NULL;
    if (slot)
        *slot = u, uploads_n++;
    pthread_mutex_unlock(&uploads_lock);
    if (!slot) {
        nsv_reply(s, ev->conn, 503, NULL, 0, "busy\n", 5);
        nsv_multipart_free(u->mp);
        free(u->json);
        free(u);
        return;
    }
    if (!(ev->flags & NSV_EVF_STREAM_BODY)) /* no body at all */
        upload_fail(s, u, 400, "empty multipart body\n");
}

static void upload_records(upload *u, const nsv_multipart_event *e, int n, const char *ar)
{
    for (int i = 0; i < n; i++) {
        if (e[i].type == NSV_MP_PART) {
            upload_put(u, u->jlen > 1 ? ",{\"name\":" : "{\"name\":", u->jlen > 1 ? 9 : 8);
            upload_str(u, ar + e[i].name_off, e[i].name_len, 1);
            upload_put(u, ",\"filename\":", 12);
            upload_str(u, ar + e[i].filename_off, e[i].filename_len, !!(e[i].flags & NSV_MPF_FILENAME));
            upload_put(u, ",\"content_type\":", 16);
            upload_str(u, ar + e[i].content_type_off, e[i].content_type_len,
                       !!(e[i].flags & NSV_MPF_CONTENT_TYPE));
            sha256_init(&u->sum);
            u->size = 0;
        } else if (e[i].type == NSV_MP_DATA) {
            sha256_update(&u->sum, ar + e[i].data_off, e[i].data_len);
            u->size += e[i].data_len;
        } else if (e[i].type == NSV_MP_PART_END) {
            char tail[128], hex[65];
            sha256_hex(&u->sum, hex);
            upload_put(u, tail, (size_t)snprintf(tail, sizeof tail, ",\"size\":%llu,\"sha256\":\"%s\"}",
                                                 (unsigned long long)u->size, hex));
        }
    }
}

/* A piece of the body of POST /upload. */
static void upload_body(nsv_server *s, const nsv_event *ev, const char *a)
{
    upload *u = upload_take(ev->conn);
    if (!u)
        return; /* already answered */
    static _Thread_local nsv_multipart_event recs[64];
    static _Thread_local char *ar;
    static _Thread_local size_t arcap;
    if (!ar)
        ar = malloc(arcap = 256 * 1024);
    const char *p = a + ev->body_off;
    size_t left = ev->body_len;
    while (left) {
        size_t used = 0;
        int n = nsv_multipart_feed(u->mp, p, left, recs, 64, ar, arcap, &used);
        if (n == NSV_ENOBUFS) {
            arcap = (size_t)nsv_multipart_need(u->mp) + 4096;
            ar = realloc(ar, arcap);
            continue;
        }
        if (n < 0) {
            char why[300];
            snprintf(why, sizeof why, "%s\n", nsv_last_error_detail(NULL));
            upload_fail(s, u, 400, why);
            return;
        }
        upload_records(u, recs, n, ar);
        p += used;
        left -= used;
    }
    if (!(ev->flags & NSV_EVF_EOF))
        return;
    if (nsv_multipart_finish(u->mp) != 0) {
        upload_fail(s, u, 400, "missing final boundary\n");
        return;
    }
    upload_put(u, "]", 1);
    nsv_reply(s, u->conn, 200, "Content-Type: application/json\r\n", 32, u->json, u->jlen);
    upload_end(u);
}

/* The connection closed before the body ended. */
static void upload_gone(uint64_t conn)
{
    upload *u = upload_take(conn);
    if (u)
        upload_end(u);
}

#endif
