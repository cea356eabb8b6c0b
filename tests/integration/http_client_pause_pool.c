/* http_client_pause_pool.c - a host that pauses a response in its
 * HTTP_RESPONSE callback when that response has no body (HEAD, 204): the
 * request ends at once and its connection goes back to the pool, which
 * must not keep the pause (the next request on it would never be read,
 * and no read timeout runs while paused). Callback mode, one loop: the
 * server answering is the same nsv_server. */
#include "tap.h"
#include <nanosrv.h>
#include <string.h>

static int64_t first, second;
static int first_done, second_status, second_done, errors;

static void cb(nsv_server *s, const nsv_event *ev, const char *arena, void *ud)
{
    (void)arena;
    (void)ud;
    if (ev->type == NSV_EV_REQUEST) {
        nsv_reply(s, ev->conn, 204, NULL, 0, NULL, 0);
        return;
    }
    int64_t id = (int64_t)ev->conn;
    if (ev->type == NSV_EV_HTTP_RESPONSE && id == first)
        nsv_http_pause(s, ev->conn, 1); /* what a host does to apply backpressure */
    if (ev->type == NSV_EV_HTTP_RESPONSE && id == second)
        second_status = ev->code;
    if (ev->type == NSV_EV_HTTP_BODY && (ev->flags & NSV_EVF_EOF)) {
        if (id == first)
            first_done = 1;
        if (id == second) {
            second_done = 1;
            nsv_stop(s);
        }
    }
    if (ev->type == NSV_EV_ERROR && (id == first || id == second)) {
        errors++;
        nsv_stop(s);
    }
    if (ev->type == NSV_EV_TIMER)
        nsv_stop(s); /* the bound of this test */
}

int main(void)
{
    nsv_server *s = nsv_server_new();
    int lid = nsv_listen(s, "http://127.0.0.1:0", 18);
    ok(lid >= 0, "listen");
    char url[64];
    int n = snprintf(url, sizeof url, "http://127.0.0.1:%d/x", nsv_listener_port(s, lid));
    nsv_set_int(s, NSV_OPT_HTTP_CONNS_PER_ORIGIN, 1); /* the second request must take the pooled connection */
    nsv_set_callback(s, cb, NULL);
    first = nsv_http_request(s, "GET", 3, url, (size_t)n, NULL, 0, NULL, 0, -1, 0);
    second = nsv_http_request(s, "GET", 3, url, (size_t)n, NULL, 0, NULL, 0, -1, 0);
    ok(first > 0 && second > 0, "two requests started");
    nsv_timer_add(s, 5000, 0, 0); /* a stall ends the test instead of hanging it */
    nsv_run(s);
    ok(first_done, "the paused bodiless response ended");
    is_int(second_status, 204, "the next request on the pooled connection got its answer");
    ok(second_done, "and ended");
    is_int(errors, 0, "no error");
    nsv_server_free(s);
    return done_testing();
}
