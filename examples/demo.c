/* demo.c - what `make run` starts: a page, a JSON API with route params,
 * a streamed response and the echo routes, on http://127.0.0.1:8080. */
#include <nanosrv.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { R_INDEX, R_USER, R_STREAM, R_ECHO, R_HEALTH, R_WS };

static const char page[] =
    "<!doctype html><html><head><meta charset=utf-8><title>libnanosrv demo</title></head>"
    "<body style=\"font-family:sans-serif;max-width:40em;margin:2em auto\">"
    "<h1>libnanosrv</h1><p>An embeddable HTTP/1.1, WebSocket and TCP server library in C.</p>"
    "<ul><li><a href=\"/api/users/42?fields=name\">/api/users/42</a> &mdash; route params as JSON</li>"
    "<li><a href=\"/stream\">/stream</a> &mdash; a chunked response</li>"
    "<li><code>curl -d hello localhost:8080/echo</code> &mdash; echo</li>"
    "<li><a href=\"/health\">/health</a></li></ul>"
    "<h2>WebSocket echo</h2><input id=m value=\"hello\"><button onclick=\"s.send(m.value)\">send</button>"
    "<pre id=o></pre><script>var s=new WebSocket('ws://'+location.host+'/ws');"
    "s.onmessage=function(e){o.textContent+=e.data+'\\n'};</script></body></html>\n";

static nsv_server *srv;
static void on_signal(int sig) { (void)sig; nsv_stop(srv); }

static void handle(const nsv_event *e, const char *a)
{
    char buf[512];
    switch (e->route) {
    case R_INDEX:
        nsv_reply(srv, e->conn, 200, "Content-Type: text/html; charset=utf-8\r\n", 40, page, sizeof page - 1);
        break;
    case R_USER: {
        uint32_t len = 0;
        int64_t off = nsv_ev_param_by_name(e, a, "id", 2, &len);
        int n = snprintf(buf, sizeof buf, "{\"id\":\"%.*s\",\"query\":\"%.*s\",\"peer\":\"%.*s\"}\n",
                         off < 0 ? 0 : (int)(len > 64 ? 64 : len), off < 0 ? "" : a + off,
                         (int)(e->query_len > 64 ? 64 : e->query_len), a + e->query_off,
                         (int)e->peer_len, a + e->peer_off);
        nsv_reply(srv, e->conn, 200, "Content-Type: application/json\r\n", 32, buf, (size_t)n);
        break;
    }
    case R_STREAM:
        nsv_reply_start(srv, e->conn, 200, "Content-Type: text/plain\r\n", 26);
        for (int i = 1; i <= 5; i++) {
            int n = snprintf(buf, sizeof buf, "chunk %d of 5\n", i);
            nsv_send_chunk(srv, e->conn, buf, (size_t)n);
        }
        nsv_reply_end(srv, e->conn);
        break;
    case R_ECHO:
        nsv_reply(srv, e->conn, 200, NULL, 0, a + e->body_off, e->body_len);
        break;
    case R_HEALTH:
        nsv_reply(srv, e->conn, 200, "Content-Type: application/json\r\n", 32, "{\"ok\":true}\n", 12);
        break;
    case R_WS: /* WS_MESSAGE events come with the route */
        break;
    default:
        nsv_reply(srv, e->conn, 404, "Content-Type: text/plain\r\n", 26, "not found\n", 10);
    }
}

int main(int argc, char **argv)
{
    int port = argc > 2 && !strcmp(argv[1], "--port") ? atoi(argv[2]) : 8080;
    srv = nsv_server_new();
    nsv_route(srv, "GET", 3, "/", 1, R_INDEX, 0);
    nsv_route(srv, "GET", 3, "/api/users/:id", 14, R_USER, 0);
    nsv_route(srv, "GET", 3, "/stream", 7, R_STREAM, 0);
    nsv_route(srv, "POST", 4, "/echo", 5, R_ECHO, 0);
    nsv_route(srv, "GET", 3, "/health", 7, R_HEALTH, 0);
    nsv_route(srv, "GET", 3, "/ws", 3, R_WS, NSV_ROUTE_WEBSOCKET);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    int lid = nsv_listen(srv, url, strlen(url));
    if (lid < 0) {
        fprintf(stderr, "demo: %s: %s\n", nsv_strerror(lid), nsv_last_error_detail(srv));
        return 1;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    printf("listening on %d\ndemo: open http://127.0.0.1:%d/\n", nsv_listener_port(srv, lid),
           nsv_listener_port(srv, lid));
    fflush(stdout);
    static nsv_event evs[128];
    static char arena[2 << 20];
    int n;
    while ((n = nsv_poll(srv, evs, 128, arena, sizeof arena, 1000)) >= 0)
        for (int i = 0; i < n; i++) {
            if (evs[i].type == NSV_EV_REQUEST)
                handle(&evs[i], arena);
            else if (evs[i].type == NSV_EV_WS_MESSAGE)
                nsv_ws_send(srv, evs[i].conn, evs[i].code, arena + evs[i].body_off, evs[i].body_len);
        }
    signal(SIGTERM, SIG_IGN); /* a late signal must not reach the freed server */
    signal(SIGINT, SIG_IGN);
    nsv_server_free(srv);
    return 0;
}
