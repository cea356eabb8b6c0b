/* http_client_host.c - NSV_HTTP_HOST_HEADER: the host's own Host line goes
 * out instead of the URL's authority (checked as an authority), while the
 * connection and its pool follow the URL; without the flag a Host line is
 * refused. Callback mode, one loop: the server answering is the same
 * nsv_server and echoes the Host it received. */
#include "tap.h"
#include <nanosrv.h>
#include <stdio.h>
#include <string.h>

#define N 3
static int64_t ids[N];
static char got[N][128];
static int ended, errors;

static void cb(nsv_server *s, const nsv_event *ev, const char *arena, void *ud)
{
    (void)ud;
    if (ev->type == NSV_EV_REQUEST) {
        uint32_t vlen = 0;
        int64_t off = nsv_ev_header(ev, arena, "Host", 4, &vlen);
        nsv_reply(s, ev->conn, 200, NULL, 0, off >= 0 ? arena + off : "", off >= 0 ? vlen : 0);
        return;
    }
    for (int i = 0; i < N; i++) {
        if ((int64_t)ev->conn != ids[i])
            continue;
        if (ev->type == NSV_EV_HTTP_BODY) {
            size_t have = strlen(got[i]);
            if (have + ev->body_len < sizeof got[i])
                memcpy(got[i] + have, arena + ev->body_off, ev->body_len);
            if (ev->flags & NSV_EVF_EOF)
                ended++;
        } else if (ev->type == NSV_EV_ERROR) {
            errors++;
            ended++;
        }
    }
    if (ended == N || ev->type == NSV_EV_TIMER)
        nsv_stop(s);
}

int main(void)
{
    nsv_server *s = nsv_server_new();
    int lid = nsv_listen(s, "http://127.0.0.1:0", 18);
    char url[64];
    int n = snprintf(url, sizeof url, "http://127.0.0.1:%d/h", nsv_listener_port(s, lid));
    nsv_set_int(s, NSV_OPT_HTTP_CONNS_PER_ORIGIN, 1);
#define REQ(h, f) nsv_http_request(s, "GET", 3, url, (size_t)n, h, strlen(h), NULL, 0, -1, f)
    is_int(REQ("Host: a.example\r\n", 0), NSV_EINVAL, "a Host line without the flag -> EINVAL");
    is_int(REQ("Accept: */*\r\n", NSV_HTTP_HOST_HEADER), NSV_EINVAL, "the flag without a Host line -> EINVAL");
    ok(strstr(nsv_last_error_detail(s), "without a Host line") != NULL, "detail: %s", nsv_last_error_detail(s));
    is_int(REQ("Host: a.example\r\nHost: b.example\r\n", NSV_HTTP_HOST_HEADER), NSV_EINVAL, "two Host lines -> EINVAL");
    is_int(REQ("Host: \r\n", NSV_HTTP_HOST_HEADER), NSV_EINVAL, "an empty Host -> EINVAL");
    is_int(REQ("Host: bad host\r\n", NSV_HTTP_HOST_HEADER), NSV_EINVAL, "a Host that is no authority -> EINVAL");
    is_int(REQ("Host: a.example:99999\r\n", NSV_HTTP_HOST_HEADER), NSV_EINVAL, "a bad port -> EINVAL");
    nsv_set_callback(s, cb, NULL);
    ids[0] = REQ("Accept: */*\r\nhost:  Front.Example:8443 \r\nX-A: 1\r\n", NSV_HTTP_HOST_HEADER);
    ids[1] = REQ("Host: [::1]:80\r\n", NSV_HTTP_HOST_HEADER);
    ids[2] = REQ("", 0);
    ok(ids[0] > 0 && ids[1] > 0 && ids[2] > 0, "three requests started");
    nsv_timer_add(s, 5000, 0, 0); /* bound */
    nsv_run(s);
    is_int(errors, 0, "no error");
    is_mem(got[0], strlen(got[0]), "Front.Example:8443", "the host's Host went out (trimmed), not the URL's");
    is_mem(got[1], strlen(got[1]), "[::1]:80", "an IPv6 authority");
    char want[32];
    snprintf(want, sizeof want, "127.0.0.1:%d", nsv_listener_port(s, lid));
    is_mem(got[2], strlen(got[2]), want, "without the flag: the URL's authority");
    nsv_server_free(s);
    return done_testing();
}
