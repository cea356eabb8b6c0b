/* static.c - static files from C: nsv_serve_dir's setup checks, listings
 * (HTML-escaped) on and off, dot files, fallthrough to the host, and
 * nsv_reply_file from the host (root-relative and plain paths, a status of
 * the host's, its Content-Type, HEAD, NSV_ENOTFOUND with nothing sent),
 * on a single loop and from the polling thread of a sharded server. */
#include "tap.h"
#include "nsvnet.h"
#include <nanosrv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static void put_file(const char *rel, const char *data)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    FILE *f = fopen(p, "wb");
    if (f) {
        fputs(data, f);
        fclose(f);
    }
}

static void make_tree(void)
{
    snprintf(dir, sizeof dir, "/tmp/nsv-static-c-XXXXXX");
    if (!mkdtemp(dir))
        exit(1);
    char p[512];
    snprintf(p, sizeof p, "%s/sub", dir);
    mkdir(p, 0755);
    put_file("hello.txt", "hello\n");
    put_file(".hidden", "dot\n");
    put_file("sub/<b>&x.txt", "x\n");
    put_file("sub/plain.css", "p{}\n");
    put_file("page.html", "<p>page</p>\n");
}

/* One request on a fresh connection; the whole answer (Connection: close). */
static int fetch(nsv_server *s, int port, const char *req, char *buf, size_t cap)
{
    int fd = client(port);
    sendall(fd, req);
    int n = s ? read_polling(s, fd, buf, cap, 200, 10, NULL) : read_all(fd, buf, cap, 5000, 500);
    close(fd);
    return n;
}

static int status_of(const char *buf) { return strncmp(buf, "HTTP/1.1 ", 9) == 0 ? atoi(buf + 9) : -1; }

static void setup_checks(void)
{
    nsv_server *s = nsv_server_new();
    is_int(nsv_serve_dir(s, "static/", 7, dir, strlen(dir), NULL, 0, 0), NSV_EINVAL, "prefix must start with '/'");
    is_int(nsv_serve_dir(s, "/static", 7, dir, strlen(dir), NULL, 0, 0), NSV_EINVAL, "prefix must end with '/'");
    is_int(nsv_serve_dir(s, "/a b/", 5, dir, strlen(dir), NULL, 0, 0), NSV_EINVAL, "prefix with a space");
    is_int(nsv_serve_dir(s, "/x/", 3, "/nonexistent-dir-xyz", 20, NULL, 0, 0), NSV_ENOTFOUND, "missing dir");
    char f[300];
    snprintf(f, sizeof f, "%s/hello.txt", dir);
    is_int(nsv_serve_dir(s, "/x/", 3, f, strlen(f), NULL, 0, 0), NSV_ENOTFOUND, "a file is not a directory");
    is_int(nsv_serve_dir(s, "/x/", 3, dir, strlen(dir), "a\r\nb", 4, 0), NSV_EINVAL, "CRLF in cache_control");
    is_int(nsv_serve_dir(s, "/x/", 3, dir, strlen(dir), NULL, 0, 1u << 20), NSV_EINVAL, "unknown flags");
    is_int(nsv_serve_dir(s, "/x/", 3, dir, strlen(dir), NULL, 0, NSV_STATIC_PLAIN), NSV_EINVAL,
           "NSV_STATIC_PLAIN is for nsv_reply_file only");
    is_int(nsv_serve_dir(s, "/x/", 3, dir, strlen(dir), NULL, 0, 0), 0, "first mount id 0");
    is_int(nsv_serve_dir(s, "/x/", 3, dir, strlen(dir), NULL, 0, 0), NSV_EINVAL, "the same prefix twice");
    is_int(nsv_serve_dir(s, "/y/", 3, dir, strlen(dir), NULL, 0, 0), 1, "second mount id 1");
    ok(strstr(nsv_last_error_detail(s), "") != NULL, "detail readable");
    nsv_server_free(s);
    ok(!strcmp(nsv_mime_type("a.HTML", 6), "text/html; charset=utf-8"), "mime: html, any case");
    ok(!strcmp(nsv_mime_type("x/app.mjs", 9), "text/javascript; charset=utf-8"), "mime: mjs");
    ok(!strcmp(nsv_mime_type("f.woff2", 7), "font/woff2"), "mime: woff2");
    ok(!strcmp(nsv_mime_type("noext", 5), "application/octet-stream"), "mime: no extension");
    ok(!strcmp(nsv_mime_type("dir.d/file", 10), "application/octet-stream"), "mime: a dot in a directory only");
    ok(!strcmp(nsv_mime_type(NULL, 0), "application/octet-stream"), "mime: NULL");
}

static void single_loop(void)
{
    nsv_server *s = nsv_server_new();
    int port;
    http_listen(s, &port);
    is_int(nsv_serve_dir(s, "/s/", 3, dir, strlen(dir), "max-age=60", 10, NSV_STATIC_LIST | NSV_STATIC_DOTFILES), 0,
           "mount /s/ with listings and dot files");
    is_int(nsv_serve_dir(s, "/n/", 3, dir, strlen(dir), NULL, 0, 0), 1, "mount /n/ plain");
    is_int(nsv_serve_dir(s, "/f/", 3, dir, strlen(dir), NULL, 0, NSV_STATIC_FALLTHROUGH), 2, "mount /f/ falling through");
    static char buf[65536];

    fetch(s, port, "GET /s/sub/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", buf, sizeof buf);
    is_int(status_of(buf), 200, "listing: 200");
    ok(strstr(buf, "&lt;b&gt;&amp;x.txt") != NULL, "listing: the name HTML-escaped");
    ok(strstr(buf, "href=\"%3Cb%3E%26x.txt\"") != NULL, "listing: the link percent-encoded");
    ok(strstr(buf, "<b>&x") == NULL, "listing: no raw markup from a file name");
    ok(strstr(buf, "plain.css") != NULL, "listing: other names");
    fetch(s, port, "GET /s/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", buf, sizeof buf);
    ok(strstr(buf, ".hidden") && strstr(buf, "sub/"), "listing with dot files shows them; directories end in '/'");
    fetch(s, port, "GET /n/sub/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", buf, sizeof buf);
    is_int(status_of(buf), 404, "no listing without NSV_STATIC_LIST");
    fetch(s, port, "GET /s/.hidden HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", buf, sizeof buf);
    ok(status_of(buf) == 200 && strstr(buf, "\r\n\r\ndot\n"), "NSV_STATIC_DOTFILES serves .hidden");
    ok(strstr(buf, "Cache-Control: max-age=60\r\n") != NULL, "the mount's Cache-Control line");
    fetch(s, port, "GET /n/.hidden HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", buf, sizeof buf);
    is_int(status_of(buf), 404, "dot files 404 by default");
    fetch(s, port, "GET /n/hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", buf, sizeof buf);
    ok(status_of(buf) == 200 && strstr(buf, "Content-Length: 6\r\n") && strstr(buf, "\r\n\r\nhello\n"),
       "a file: 200, length, body");
    ok(strstr(buf, "Cache-Control") == NULL, "no Cache-Control when the mount has none");

    /* fallthrough: a miss reaches the host as a REQUEST */
    int fd = client(port);
    sendall(fd, "GET /f/nothing.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    nsv_event ev;
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 200, 10), "fallthrough: the miss is a REQUEST for the host");
    nsv_reply(s, ev.conn, 200, NULL, 0, "from host", 9);
    read_polling(s, fd, buf, sizeof buf, 200, 10, "from host");
    ok(strstr(buf, "from host") != NULL, "fallthrough: the host's answer");
    sendall(fd, "GET /f/hello.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    read_polling(s, fd, buf, sizeof buf, 200, 10, "hello\n");
    ok(strstr(buf, "hello\n") != NULL, "fallthrough mount still serves its files (keep-alive)");
    sendall(fd, "POST /f/hello.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 200, 10), "fallthrough: another method goes to the host");
    nsv_reply(s, ev.conn, 201, NULL, 0, NULL, 0);
    read_polling(s, fd, buf, sizeof buf, 200, 10, "\r\n\r\n");
    is_int(status_of(buf), 201, "fallthrough: the host's 201");

    /* nsv_reply_file from the host */
    sendall(fd, "GET /app/anything HTTP/1.1\r\nHost: x\r\nRange: bytes=1-3\r\n\r\n");
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 200, 10), "a request for the host");
    const char *hdrs = arena + ev.headers_off;
    is_int(nsv_reply_file(s, ev.conn, 0, dir, strlen(dir), "/missing.txt", 12, hdrs, ev.headers_len, NULL, 0, 0),
           NSV_ENOTFOUND, "nsv_reply_file: missing -> NSV_ENOTFOUND");
    is_int(nsv_reply_file(s, ev.conn, 0, dir, strlen(dir), "/../etc/passwd", 14, hdrs, ev.headers_len, NULL, 0, 0),
           NSV_ENOTFOUND, "nsv_reply_file: '..' under a root -> NSV_ENOTFOUND");
    is_int(nsv_reply_file(s, ev.conn, 0, dir, strlen(dir), "/hello.txt", 10, hdrs, ev.headers_len,
                          "Content-Length: 3\r\n", 19, 0), NSV_EINVAL, "nsv_reply_file: Content-Length of the host's refused");
    is_int(nsv_reply_file(s, ev.conn, 0, dir, strlen(dir), "/hello.txt", 10, hdrs, ev.headers_len,
                          "X-Bad\r\n", 7, 0), NSV_EINVAL, "nsv_reply_file: a malformed header block refused");
    is_int(nsv_reply_file(s, ev.conn, 304, dir, strlen(dir), "/hello.txt", 10, NULL, 0, NULL, 0, 0), NSV_EINVAL,
           "nsv_reply_file: status 304 refused");
    is_int(nsv_reply_file(s, ev.conn, 0, dir, strlen(dir), "/hello.txt", 10, hdrs, ev.headers_len,
                          "X-From: host\r\n", 14, 0), 0, "nsv_reply_file: queued (still pending after the refusals)");
    read_polling(s, fd, buf, sizeof buf, 200, 10, "ell");
    ok(status_of(buf) == 206 && strstr(buf, "Content-Range: bytes 1-3/6\r\n") && strstr(buf, "X-From: host\r\n") &&
           strstr(buf, "\r\n\r\nell"), "nsv_reply_file: the request's Range honoured, the host's header added");
    is_int(nsv_reply_file(s, ev.conn, 0, dir, strlen(dir), "/hello.txt", 10, NULL, 0, NULL, 0, 0), NSV_ESTATE,
           "nsv_reply_file: a second answer -> NSV_ESTATE");

    sendall(fd, "GET /app/err HTTP/1.1\r\nHost: x\r\n\r\n");
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 200, 10), "another request");
    char abs[300];
    snprintf(abs, sizeof abs, "%s/page.html", dir);
    is_int(nsv_reply_file(s, ev.conn, 404, NULL, 0, abs, strlen(abs), NULL, 0,
                          "Content-Type: text/x-custom\r\n", 29, 0), 0, "nsv_reply_file: a plain path with status 404");
    read_polling(s, fd, buf, sizeof buf, 200, 10, "page</p>");
    ok(status_of(buf) == 404 && strstr(buf, "Content-Type: text/x-custom\r\n") &&
           !strstr(buf, "text/html") && strstr(buf, "<p>page</p>"),
       "the host's status and Content-Type (replacing the guess), the file's body");

    /* NSV_STATIC_PLAIN: the file as a plain body; the application keeps its
     * own validators, so the library adds none and answers no condition. */
    sendall(fd, "GET /app/plain HTTP/1.1\r\nHost: x\r\nRange: bytes=1-3\r\nIf-None-Match: *\r\n\r\n");
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 200, 10), "a request answered with a plain file");
    hdrs = arena + ev.headers_off;
    is_int(nsv_reply_file(s, ev.conn, 0, dir, strlen(dir), "/hello.txt", 10, hdrs, ev.headers_len,
                          "ETag: \"app\"\r\n", 13, NSV_STATIC_PLAIN), 0, "NSV_STATIC_PLAIN: queued");
    read_polling(s, fd, buf, sizeof buf, 200, 10, "hello\n");
    ok(status_of(buf) == 200 && strstr(buf, "Content-Length: 6\r\n") && strstr(buf, "ETag: \"app\"\r\n") &&
           !strstr(buf, "Last-Modified") && !strstr(buf, "Accept-Ranges") && !strstr(buf, "Content-Range") &&
           strstr(buf, "\r\n\r\nhello\n"),
       "NSV_STATIC_PLAIN: 200 with the whole file, only the host's ETag, no Range or If-None-Match applied");
    sendall(fd, "GET /app/plain404 HTTP/1.1\r\nHost: x\r\n\r\n");
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 200, 10), "another request for a plain file");
    is_int(nsv_reply_file(s, ev.conn, 299, dir, strlen(dir), "/hello.txt", 10, NULL, 0, NULL, 0, NSV_STATIC_PLAIN),
           0, "NSV_STATIC_PLAIN with a status");
    read_polling(s, fd, buf, sizeof buf, 200, 10, "hello\n");
    ok(status_of(buf) == 299 && !strstr(buf, "ETag") && strstr(buf, "Content-Type: text/plain"),
       "NSV_STATIC_PLAIN: the host's status, the guessed Content-Type, no ETag");

    sendall(fd, "HEAD /app/head HTTP/1.1\r\nHost: x\r\n\r\n");
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 200, 10), "a HEAD request");
    is_int(nsv_reply_file(s, ev.conn, 0, dir, strlen(dir), "page.html", 9, NULL, 0, NULL, 0, 0), 0, "HEAD answered");
    read_polling(s, fd, buf, sizeof buf, 200, 10, "\r\n\r\n");
    ok(strstr(buf, "Content-Length: 12\r\n") && strstr(buf, "\r\n\r\n")[4] == 0, "HEAD: the length, no body");
    sendall(fd, "GET /n/hello.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    read_polling(s, fd, buf, sizeof buf, 200, 10, "hello\n");
    ok(status_of(buf) == 200 && strstr(buf, "hello\n"), "keep-alive continues after HEAD");
    close(fd);
    nsv_server_free(s);
}

static void sharded(void)
{
    nsv_server *s = nsv_server_new_sharded(2);
    int port;
    http_listen(s, &port);
    is_int(nsv_serve_dir(s, "/s/", 3, dir, strlen(dir), NULL, 0, 0), 0, "sharded: mount");
    nsv_poll(s, evs, NSVNET_EVS, arena, sizeof arena, 0); /* starts the workers */
    is_int(nsv_serve_dir(s, "/late/", 6, dir, strlen(dir), NULL, 0, 0), NSV_ESTATE, "sharded: no mount once running");
    static char buf[65536];
    int served = 0;
    for (int i = 0; i < 8; i++) { /* connections land on both workers */
        fetch(NULL, port, "GET /s/hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", buf, sizeof buf);
        served += status_of(buf) == 200 && strstr(buf, "\r\n\r\nhello\n") != NULL;
    }
    is_int(served, 8, "sharded: the mount serves on every worker");
    int fd = client(port);
    sendall(fd, "GET /app/x HTTP/1.1\r\nHost: x\r\nIf-None-Match: *\r\n\r\n");
    nsv_event ev;
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 200, 10), "sharded: a request for the host");
    char hb[1024];
    size_t hl = ev.headers_len < sizeof hb ? ev.headers_len : sizeof hb;
    memcpy(hb, arena + ev.headers_off, hl);
    is_int(nsv_reply_file(s, ev.conn, 0, dir, strlen(dir), "nope", 4, hb, hl, NULL, 0, 0), NSV_ENOTFOUND,
           "sharded, polling thread: NSV_ENOTFOUND synchronously");
    is_int(nsv_reply_file(s, ev.conn, 0, dir, strlen(dir), "hello.txt", 9, hb, hl, NULL, 0, 0), 0,
           "sharded, polling thread: forwarded to the worker");
    read_all(fd, buf, sizeof buf, 5000, 200);
    is_int(status_of(buf), 304, "sharded: If-None-Match: * -> 304 from the worker");
    is_int(nsv_reply_file(s, ev.conn, 0, dir, strlen(dir), "hello.txt", 9, NULL, 0, NULL, 0, 0), NSV_ESTATE,
           "sharded: a second answer -> NSV_ESTATE");
    sendall(fd, "GET /app/y HTTP/1.1\r\nHost: x\r\n\r\n");
    ok(wait_event(s, NSV_EV_REQUEST, &ev, 200, 10), "sharded: next request on the connection");
    is_int(nsv_reply_file(s, ev.conn, 0, dir, strlen(dir), "hello.txt", 9, NULL, 0, NULL, 0, 0), 0, "sharded: 200");
    read_all(fd, buf, sizeof buf, 5000, 200);
    ok(status_of(buf) == 200 && strstr(buf, "\r\n\r\nhello\n"), "sharded: the file from the worker");
    close(fd);
    nsv_server_free(s);
}

int main(void)
{
    make_tree();
    setup_checks();
    single_loop();
    sharded();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        diag("could not remove %s", dir);
    return done_testing();
}
