/* shed.c - which connection to close to make room at NSV_OPT_MAX_CONNS
 * (NSV_OPT_SHED), read from the fields HTTP keeps in nsv__conn (loop.h).
 *
 * HTTP keeps its request state in c->state (NSV__C_READ only while an HTTP
 * server connection waits for a request; 0 for every other protocol),
 * c->req_started (a byte of the next request came), c->head_len (its head is
 * complete), c->served (a request was answered) and c->deadline, which it
 * sets when the connection turns idle (now + idle_timeout_ms, at the end of
 * an answer) and at the first byte of a head (now + request_timeout_ms), so
 * the deadline tells how long a connection has waited. A connection is
 * inside its first head from its accept (c->accepted): one that has sent
 * nothing yet, is in its TLS handshake or has not sent the PROXY header
 * its listener waits for is a slow client as much as one that trickles. */
#include "loop.h"
#include "metrics.h"
#include <sys/ioctl.h>

enum { IDLE = 0, HEAD = 1, NONE = 2 };

/* Accepted, and its listener's protocol has not started yet: the edge's
 * PROXY header wait (loop/edge.c) swaps in its own table until then. */
static int prelude(const nsv_server *s, const nsv__conn *c)
{
    return c->listener < s->nlisteners && c->proto != s->listeners[c->listener].proto && !c->seen && !c->closing;
}

/* An HTTP server connection waiting for a request with nothing to send:
 * no reply in progress, no request at the host, no streamed body, not on
 * its way out. */
static int waiting(const nsv__conn *c)
{
    return c->state == NSV__C_READ && !c->closing && !c->lingering && !c->bstream && !c->httpc &&
           nsv__out_empty(c);
}

/* IDLE: answered, no byte of the next request. HEAD: inside an unfinished
 * head (a slowloris), the first one counting from the accept. */
static int kind(const nsv_server *s, const nsv__conn *c)
{
    if (!c->proto)
        return NONE;
    if (!waiting(c))
        return prelude(s, c) ? HEAD : NONE;
    if (!c->req_started)
        return c->in.len != c->in.off ? NONE : c->served ? IDLE : HEAD;
    return c->head_len == 0 ? HEAD : NONE;
}

/* Order within a kind: the one waiting longest first. */
static int64_t since(const nsv_server *s, const nsv__conn *c, int k)
{
    if (k == IDLE)
        return c->deadline; /* one idle timeout for all */
    return c->served ? c->deadline - s->request_timeout_ms : c->accepted;
}

/* Bytes may be in the socket already, not read yet (their event comes
 * later in this batch): a request, or the PROXY header, that has just come
 * makes such a connection neither idle nor slow. */
static int unread_input(const nsv__conn *c)
{
    int n = 0;
    return ioctl(c->fd, FIONREAD, &n) == 0 && n > 0;
}

/* One pass over the loop's slots keeps the NSV__SHED_PICK connections to
 * close first, in order: every idle one before every slow one. A linear
 * scan: it runs only at max_conns, where the alternative is refusing the
 * client, while keeping connections ordered by idle time would cost every
 * request on the hot path. The list serves the connections accepted in
 * the same loop iteration (a burst costs one scan per NSV__SHED_PICK closed,
 * and one in all when nothing may be). */
static void scan(nsv__loop *l)
{
    const nsv_server *s = l->srv;
    nsv__conn *best[NSV__SHED_PICK];
    int64_t key[NSV__SHED_PICK];
    int bk[NSV__SHED_PICK], n = 0, more = 0;
    for (uint32_t i = 0; i < l->nslots; i++) {
        nsv__conn *c = NSV__CONN(l, i);
        int k = kind(s, c);
        if (k == NONE)
            continue;
        int64_t t = since(s, c, k);
        int at = n;
        if (n == NSV__SHED_PICK) {
            more = 1;
            if (k > bk[n - 1] || (k == bk[n - 1] && t >= key[n - 1]))
                continue;
            at--; /* the last kept gives way */
        } else {
            n++;
        }
        for (; at > 0 && (k < bk[at - 1] || (k == bk[at - 1] && t < key[at - 1])); at--) {
            best[at] = best[at - 1];
            key[at] = key[at - 1];
            bk[at] = bk[at - 1];
        }
        best[at] = c;
        key[at] = t;
        bk[at] = k;
    }
    for (int i = 0; i < n; i++)
        l->shed.ids[i] = nsv__conn_id(l, best[i]) << 1 | (uint64_t)bk[i];
    l->shed.n = (uint8_t)n;
    l->shed.next = 0;
    l->shed.more = (uint8_t)more;
    l->shed.at = l->now;
}

/* Close one of this loop's connections to make room for a new one: the
 * idle keep-alive connection idle longest, else the one longest inside an
 * unfinished head. 1 if one was closed, 0 if none may be. */
int nsv__shed(nsv__loop *l)
{
    if (l->shed.at != l->now || (l->shed.next == l->shed.n && l->shed.more))
        scan(l);
    for (int rescanned = 0;; rescanned = 1) {
        while (l->shed.next < l->shed.n) {
            uint64_t e = l->shed.ids[l->shed.next++];
            nsv__conn *c = nsv__conn_get(l, e >> 1);
            int k = (int)(e & 1);
            /* Still what it was at the scan (it may have sent a request since). */
            if (!c || kind(l->srv, c) != k || ((k == IDLE || !c->req_started) && unread_input(c)))
                continue;
            nsv__log(NSV_LOG_DEBUG, "max_conns reached: closing %s connection from %.*s port %u to make room",
                     k == IDLE ? "an idle keep-alive" : "a slow (unfinished request head)", (int)c->peer_len,
                     c->peer, (unsigned)c->peer_port);
            NSV__COUNT(l, NSV_M_CONNS_EVICTED);
            nsv__conn_close(l, c);
            return 1;
        }
        if (rescanned || !l->shed.more)
            return 0;
        scan(l);
    }
}
