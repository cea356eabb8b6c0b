/* tcp.c - raw TCP through the C ABI: outbound connects (ok, refused, name
 * lookup, timeout against a full backlog), writability events in order,
 * pause/resume, half-close, abort, stale ids. */
#include "tap.h"
#include <nanosrv.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

static nsv_event evs[256];
static char arena[4 << 20];

/* Every polled event is logged (with its bytes) so a wait can match events
 * that arrived earlier in any order; each logged event is consumed once. */
static nsv_event logv[4096];
static int logn, used[4096];
static char logdata[8 << 20];
static size_t logoff;

static void log_batch(int n)
{
    for (int i = 0; i < n && logn < 4096; i++) {
        nsv_event e = evs[i];
        size_t len = e.body_len + e.peer_len;
        if (logoff + len > sizeof logdata)
            logoff = 0; /* old bytes are not looked at again */
        memcpy(logdata + logoff, arena + e.body_off, e.body_len);
        memcpy(logdata + logoff + e.body_len, arena + e.peer_off, e.peer_len);
        e.body_off = (uint32_t)logoff;
        e.peer_off = (uint32_t)(logoff + e.body_len);
        logoff += len;
        used[logn] = 0;
        logv[logn++] = e;
    }
}

static int wait_for(nsv_server *s, uint32_t type, uint64_t conn, nsv_event *out, int ms)
{
    int64_t end = nsv_millis() + ms;
    for (;;) {
        for (int i = 0; i < logn; i++)
            if (!used[i] && logv[i].type == type && (!conn || logv[i].conn == conn)) {
                used[i] = 1;
                *out = logv[i];
                return 1;
            }
        if (nsv_millis() >= end)
            return 0;
        int n = nsv_poll(s, evs, 256, arena, sizeof arena, 20);
        log_batch(n > 0 ? n : 0);
    }
}

static int plain_listener(int backlog, int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, (struct sockaddr *)&a, sizeof a);
    listen(fd, backlog);
    socklen_t sl = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &sl);
    *port = ntohs(a.sin_port);
    return fd;
}

int main(void)
{
    nsv_server *s = nsv_server_new();
    nsv_set_int(s, NSV_OPT_CONNECT_TIMEOUT_MS, 700);
    is_int(nsv_listen(s, "tcp://127.0.0.1", 15), NSV_EURL, "tcp:// without a port -> EURL");
    int lid = nsv_listen(s, "tcp://127.0.0.1:0", 17);
    ok(lid >= 0, "tcp listener");
    int port = nsv_listener_port(s, lid);
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    is_int(nsv_connect(s, "http://x:1", 10), NSV_EURL, "connect needs tcp://");
    is_int(nsv_connect(s, "tcp://127.0.0.1", 15), NSV_EURL, "connect needs a port");

    /* loopback pair: outbound connection to our own listener */
    int64_t out = nsv_connect(s, url, strlen(url));
    ok(out > 0, "connect returns an id at once");
    is_int(nsv_send(s, (uint64_t)out, "early", 5), NSV_OK, "send before connected is queued");
    nsv_event ev, acc;
    ok(wait_for(s, NSV_EV_TCP_CONNECTED, (uint64_t)out, &ev, 2000), "TCP_CONNECTED");
    ok(wait_for(s, NSV_EV_TCP_OPEN, 0, &acc, 2000), "TCP_OPEN on the listener side");
    is_mem(logdata + acc.peer_off, acc.peer_len, "127.0.0.1", "peer address on TCP_OPEN");
    ok(wait_for(s, NSV_EV_TCP_DATA, acc.conn, &ev, 2000), "queued bytes arrive");
    is_mem(logdata + ev.body_off, ev.body_len, "early", "bytes intact");

    /* writability: nobody reads the accepted side while we pause it */
    is_int(nsv_pause_read(s, acc.conn, 1), NSV_OK, "pause reading the accepted side");
    is_int(nsv_set_water_marks(s, (uint64_t)out, 10, 20), NSV_ERANGE, "low above high -> ERANGE");
    is_int(nsv_set_water_marks(s, (uint64_t)out, 256 * 1024, 64 * 1024), NSV_OK, "water marks set");
    static char chunk[65536];
    memset(chunk, 'z', sizeof chunk);
    int sent = 0, got_low = 0, order_ok = 1;
    for (int i = 0; i < 200 && !got_low; i++) {
        if (nsv_send(s, (uint64_t)out, chunk, sizeof chunk) == NSV_OK)
            sent += (int)sizeof chunk;
        int n = nsv_poll(s, evs, 256, arena, sizeof arena, 5);
        for (int k = 0; k < n; k++)
            if (evs[k].type == NSV_EV_TCP_WRITABLE && evs[k].conn == (uint64_t)out) {
                if (evs[k].code != 0)
                    order_ok = 0;
                got_low = 1;
            }
    }
    ok(got_low && order_ok, "TCP_WRITABLE code 0 after crossing the high water mark (%d bytes sent)", sent);
    ok(nsv_conn_queued(s, (uint64_t)out) >= 256 * 1024, "queued gauge above high water (%lld)",
       (long long)nsv_conn_queued(s, (uint64_t)out));
    is_int(nsv_pause_read(s, acc.conn, 0), NSV_OK, "resume reading");
    long received = 0;
    int writable = 0;
    for (int64_t end = nsv_millis() + 5000; nsv_millis() < end && (received < sent || !writable);) {
        int n = nsv_poll(s, evs, 256, arena, sizeof arena, 20);
        for (int k = 0; k < n; k++) {
            if (evs[k].type == NSV_EV_TCP_DATA && evs[k].conn == acc.conn)
                received += evs[k].body_len;
            if (evs[k].type == NSV_EV_TCP_WRITABLE && evs[k].conn == (uint64_t)out)
                writable = evs[k].code == 1;
        }
    }
    is_int(received, sent, "every byte arrives after resume");
    ok(writable, "TCP_WRITABLE code 1 once drained to the low water mark");

    /* half-close from the outbound side */
    is_int(nsv_shutdown(s, (uint64_t)out), NSV_OK, "shutdown (half-close)");
    is_int(nsv_send(s, (uint64_t)out, "x", 1), NSV_ESTATE, "send after shutdown -> ESTATE");
    ok(wait_for(s, NSV_EV_TCP_DATA, acc.conn, &ev, 2000) && (ev.flags & NSV_EVF_EOF), "peer sees EOF");
    is_int(nsv_send(s, acc.conn, "reply", 5), NSV_OK, "the other side can still send");
    ok(wait_for(s, NSV_EV_TCP_DATA, (uint64_t)out, &ev, 2000), "half-closed side still receives");
    is_mem(logdata + ev.body_off, ev.body_len, "reply", "reply intact");
    is_int(nsv_abort(s, acc.conn), NSV_OK, "abort");
    ok(wait_for(s, NSV_EV_CLOSE, (uint64_t)out, &ev, 2000), "aborted peer -> CLOSE on the other side");
    is_int(nsv_send(s, acc.conn, "x", 1), NSV_ESTALE, "send on an aborted id -> ESTALE");

    /* refused */
    int cport;
    int cfd = plain_listener(1, &cport);
    close(cfd); /* now nothing listens there */
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", cport);
    int64_t r = nsv_connect(s, url, strlen(url));
    ok(r > 0, "connect to a closed port returns an id");
    ok(wait_for(s, NSV_EV_ERROR, (uint64_t)r, &ev, 2000), "then an ERROR event");
    is_int(ev.code, NSV_ECONNREFUSED, "code ECONNREFUSED");
    ok(wait_for(s, NSV_EV_CLOSE, (uint64_t)r, &ev, 1000), "then CLOSE");

    /* name lookup on a helper thread */
    snprintf(url, sizeof url, "tcp://localhost:%d", port);
    r = nsv_connect(s, url, strlen(url));
    ok(r > 0 && wait_for(s, NSV_EV_TCP_CONNECTED, (uint64_t)r, &ev, 3000), "connect by name (localhost)");
    nsv_abort(s, (uint64_t)r);
    r = nsv_connect(s, "tcp://no-such-host.invalid:80", 29);
    ok(r > 0 && wait_for(s, NSV_EV_ERROR, (uint64_t)r, &ev, 10000) && ev.code == NSV_ENOTFOUND,
       "unknown name -> ERROR NSV_ENOTFOUND");

    /* full backlog: the SYN is dropped, the connect times out */
    int bport;
    int bfd = plain_listener(0, &bport);
    int fill[4];
    for (int i = 0; i < 4; i++) {
        fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)bport)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        connect(fill[i], (struct sockaddr *)&a, sizeof a);
    }
    usleep(100000);
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", bport);
    int64_t t0 = nsv_millis();
    r = nsv_connect(s, url, strlen(url));
    int timed = wait_for(s, NSV_EV_ERROR, (uint64_t)r, &ev, 5000);
    int64_t dt = nsv_millis() - t0;
    ok(timed && ev.code == NSV_ETIMEDOUT, "connect to a full backlog -> ERROR NSV_ETIMEDOUT (code %d)", ev.code);
    ok(dt >= 600 && dt < 3000, "after the 700 ms connect timeout (%lld ms)", (long long)dt);
    for (int i = 0; i < 4; i++)
        close(fill[i]);
    close(bfd);
    nsv_server_free(s);
    return done_testing();
}
