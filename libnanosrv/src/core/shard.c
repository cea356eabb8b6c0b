/* shard.c - sharded servers: N worker threads, each running its own loop.
 *
 * Workers own their connections. Other threads act on a connection through
 * a per-worker command queue (mutex + eventfd wakeup); a per-slot atomic
 * ticket lets them detect stale ids and double replies synchronously.
 * Events go to per-worker queues; the host drains them all (nsv_poll) or one
 * (nsv_poll_worker), and a pipe tells host loops that events are waiting. */
#include "server.h"
#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>


/* nsv__on_some_loop from a thread that is not a worker: the worker runs
 * here() and keeps its detail for the calling thread. */
struct some_loop {
    int64_t (*here)(nsv__loop *l, const void *args);
    const void *args;
    int64_t result;
    char detail[400];
};

static void some_loop_fn(nsv__loop *l, void *arg)
{
    struct some_loop *r = arg;
    r->result = r->here(l, r->args);
    if (r->result < 0)
        snprintf(r->detail, sizeof r->detail, "%s", nsv_last_error_detail(l->srv));
}

static _Thread_local nsv__loop *tl_loop;
static int ensure_started(nsv_server *s);

nsv__loop *nsv__shard_current(nsv_server *s)
{
    return tl_loop && tl_loop->srv == s ? tl_loop : NULL;
}

static void notify_host(nsv_server *s)
{
    if (atomic_load_explicit(&s->notify_armed, memory_order_acquire) &&
        atomic_exchange(&s->notify_armed, 0)) {
        char x = 1;
        ssize_t w = write(s->notify[1], &x, 1);
        (void)w;
    }
}

/* A call queued by another thread, run on the owning worker. The caller
 * was already told it succeeded: a connection that cannot take its answer
 * or its bytes (memory, output cap) is closed with an error event, never
 * left waiting or silently short of data. A reply whose framing only the
 * worker could judge (a Content-Length that must match the body unless the
 * request was HEAD, a chunk past it) fails the same way; a reply that never
 * started is answered with a 500 instead. */
static void conn_cmd(nsv__loop *l, const nsv__cmd *c)
{
    l->forwarded = 1;
    int r = nsv__conn_op(l, c);
    l->forwarded = 0;
    int framing = (r == NSV_EINVAL || r == NSV_ETOOBIG) &&
                  ((c->op >= NSV__OP_REPLY && c->op <= NSV__OP_END) || c->op == NSV__OP_FILE);
    nsv__conn *cc = (r == NSV_ENOMEM || r == NSV_EAGAIN || framing) ? nsv__conn_get(l, c->id) : NULL;
    if (!cc)
        return;
    const char *msg = framing ? nsv_last_error_detail(l->srv) : "queued call failed: output limit or memory";
    nsv__evq_emit(l, cc, NSV_EV_ERROR, r, 0, msg, strlen(msg));
    if (cc->state == NSV__C_PENDING)
        nsv__error_reply(l, cc, 500);
    else if (c->op != NSV__OP_END) /* a short END already closes after what was sent */
        nsv__conn_close(l, cc);
}


/* Check and advance a connection's ticket from another thread. from 4 means
 * any state (only the id is checked). An upgrade (from PENDING to WS) of a
 * request that is not a valid handshake moves the ticket to IDLE instead,
 * since the worker will answer 400/426, and returns NSV_EPARSE. */
static int ticket_step(nsv_server *s, uint64_t id, unsigned from, unsigned to)
{
    nsv__loop *l = s->loops[NSV__ID_LOOP(id)];
    uint32_t slot = NSV__ID_SLOT(id), gen = NSV__ID_GEN(id);
    if (slot / NSV__CHUNK >= NSV__MAX_CHUNKS || gen == 0 || gen > NSV__GEN_MAX)
        return NSV_ESTALE;
    _Atomic uint32_t *tk = atomic_load_explicit(&l->tickets[slot / NSV__CHUNK], memory_order_acquire);
    if (!tk)
        return NSV_ESTALE;
    _Atomic uint32_t *t = &tk[slot % NSV__CHUNK];
    uint32_t cur = atomic_load_explicit(t, memory_order_acquire);
    if (cur >> NSV__T_SHIFT != gen)
        return NSV_ESTALE;
    if (from == 4) /* any state */
        return NSV_OK;
    if ((cur & NSV__T_STATE) != from)
        return NSV_ESTATE;
    int bad_upgrade = to == NSV__T_WS && from == NSV__T_PENDING && !(cur & NSV__T_WSOK);
    if (bad_upgrade)
        to = NSV__T_IDLE;
    if (cur != ((gen << NSV__T_SHIFT) | to) &&
        !atomic_compare_exchange_strong(t, &cur, (gen << NSV__T_SHIFT) | to))
        return (cur >> NSV__T_SHIFT) != gen ? NSV_ESTALE : NSV_ESTATE;
    return bad_upgrade ? NSV_EPARSE : NSV_OK;
}

int nsv__shard_forward(nsv_server *s, const nsv__cmd *k)
{
    uint32_t op = k->op;
    uint64_t id = k->id;
    size_t hlen = k->hlen, blen = k->blen;
    if (!s->sharded)
        return NSV_ESTALE;
    if (op == NSV__OP_TCP_SEND && blen == 0)
        return ticket_step(s, id, 4, 4); /* empty send: only validate the id */
    if (hlen > NSV__BUF_MAX || blen > NSV__BUF_MAX || hlen + blen > NSV__BUF_MAX)
        return nsv__set_detail(s, NSV_ETOOBIG, "%zu bytes passed to a worker; a connection's output "
                               "holds at most %u", hlen + blen, NSV__BUF_MAX);
    int r;
    if (op == NSV__OP_REPLY || op == NSV__OP_START) {
        /* Everything the worker would reject is checked here: once the
         * ticket moves, the reply must not fail there, or the request waits forever. */
        nsv__hscan hs = {0};
        if (hlen && nsv__headers_scan(s, k->h, hlen, &hs) != 0)
            return NSV_EINVAL;
        if ((r = nsv__reply_check(s, k->status, &hs, op == NSV__OP_START)) != 0)
            return r;
    }
    switch (op) {
    case NSV__OP_REPLY:
    case NSV__OP_FILE: r = ticket_step(s, id, NSV__T_PENDING, NSV__T_IDLE); break;
    case NSV__OP_START: r = ticket_step(s, id, NSV__T_PENDING, NSV__T_STREAM); break;
    case NSV__OP_REASON: r = ticket_step(s, id, NSV__T_PENDING, NSV__T_PENDING); break;
    case NSV__OP_CONTINUE: /* nsv_continue (arg 1) needs a request waiting */
        r = k->arg ? ticket_step(s, id, NSV__T_PENDING, NSV__T_PENDING) : ticket_step(s, id, 4, 4);
        break;
    case NSV__OP_CHUNK: r = ticket_step(s, id, NSV__T_STREAM, NSV__T_STREAM); break;
    case NSV__OP_END: r = ticket_step(s, id, NSV__T_STREAM, NSV__T_IDLE); break;
    case NSV__OP_WS_UPGRADE: r = ticket_step(s, id, NSV__T_PENDING, NSV__T_WS); break;
    case NSV__OP_WS_SEND:
    case NSV__OP_WS_CLOSE: r = ticket_step(s, id, NSV__T_WS, NSV__T_WS); break;
    default: r = ticket_step(s, id, 4, 4); break;
    }
    if (r && r != NSV_EPARSE)
        return r;
    /* NSV_EPARSE: an invalid handshake; the worker still sends the 400/426. */
    nsv__cmd c = *k;
    c.fn = conn_cmd;
    int pr = nsv__cmd_push(s->loops[NSV__ID_LOOP(id)], &c, k->h, k->b);
    return pr ? pr : r;
}

/* Round trip to a worker, which owns the connection table. */
int64_t nsv__on_some_loop(nsv_server *s, const char *call, int64_t (*here)(nsv__loop *l, const void *args),
                          const void *args)
{
    if (!s->sharded)
        return here(s->loops[0], args);
    nsv__loop *self = nsv__shard_current(s);
    if (self)
        return here(self, args);
    if (atomic_load(&s->stop) || atomic_load(&s->draining))
        return here(s->loops[0], args); /* answers NSV_ESTOPPED before it touches the loop */
    struct some_loop r = {.here = here, .args = args};
    int rc = nsv__shard_call(s, some_loop_fn, &r);
    if (rc)
        return nsv__set_detail(s, rc, "%s: the server stopped before a worker took the call", call);
    if (r.result < 0)
        nsv__set_detail(s, (int)r.result, "%s", r.detail);
    return r.result;
}

/* Run fn(loop, arg) on a worker chosen in turn and wait for it (nsv_connect,
 * nsv_http_request and nsv_ws_connect from a thread that is not a worker,
 * through nsv__on_some_loop).
 * NSV_ESTOPPED when the server stopped before the worker took it. */
struct call_req {
    void (*fn)(nsv__loop *l, void *arg);
    void *arg;
    int done;
    pthread_mutex_t m;
    pthread_cond_t cv;
};

static void call_cmd(nsv__loop *l, const nsv__cmd *c)
{
    struct call_req *r = (struct call_req *)(uintptr_t)c->arg;
    r->fn(l, r->arg);
    pthread_mutex_lock(&r->m);
    r->done = 1;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->m);
}

int nsv__shard_call(nsv_server *s, void (*fn)(nsv__loop *l, void *arg), void *arg)
{
    int r = ensure_started(s);
    if (r)
        return r;
    static atomic_uint rr;
    nsv__loop *l = s->loops[atomic_fetch_add(&rr, 1) % (unsigned)s->nloops];
    struct call_req req = {.fn = fn, .arg = arg};
    pthread_mutex_init(&req.m, NULL);
    pthread_cond_init(&req.cv, NULL);
    nsv__cmd c = {.fn = call_cmd, .arg = (uint64_t)(uintptr_t)&req};
    r = nsv__cmd_push(l, &c, NULL, NULL);
    if (r == 0) {
        /* The record lives on this stack: leave only once the worker ran it
         * or can no longer run it (stopped and out of its loop), never while
         * it may still be queued. */
        pthread_mutex_lock(&req.m);
        while (!req.done && !(atomic_load(&s->stop) && __atomic_load_n(&l->started, __ATOMIC_ACQUIRE) != 1)) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 100 * 1000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&req.cv, &req.m, &ts);
        }
        int done = req.done;
        pthread_mutex_unlock(&req.m);
        r = done ? 0 : NSV_ESTOPPED;
    }
    pthread_mutex_destroy(&req.m);
    pthread_cond_destroy(&req.cv);
    return r;
}

/* One copy of the message per worker; each sends to its own connections. */
int nsv__shard_broadcast(nsv_server *s, int32_t route, int opcode, const char *data, size_t len)
{
    if (len > UINT32_MAX)
        return nsv__set_detail(s, NSV_ETOOBIG, "nsv_ws_broadcast: %zu bytes; a sharded broadcast carries "
                               "at most 4294967295", len);
    nsv__loop *self = nsv__shard_current(s);
    int n = 0;
    for (int i = 0; i < s->nloops; i++) {
        if (s->loops[i] == self) {
            n += nsv__ws_broadcast_loop(self, route, opcode, data, len);
            continue;
        }
        nsv__cmd c = {.fn = conn_cmd, .op = NSV__OP_WS_BCAST, .status = route, .arg = (uint64_t)opcode,
                      .blen = len};
        int r = nsv__cmd_push(s->loops[i], &c, NULL, data);
        if (r)
            return r;
    }
    return n;
}

/* nsv_wakeup (and nsv_stop, nsv_drain_start) on this worker's pollers. */
static void wake_pollers(nsv__loop *l)
{
    atomic_store(&l->wake_pollers, 0);
    pthread_mutex_lock(&l->qlock);
    pthread_cond_broadcast(&l->qcond);
    pthread_mutex_unlock(&l->qlock);
}

static void *worker_main(void *arg)
{
    nsv__loop *l = arg;
    nsv_server *s = l->srv;
    tl_loop = l;
    while (!atomic_load(&s->stop)) {
        nsv__loop_turn(l);
        nsv__cmd_run(l);
        nsv__throttle_check(l);
        nsv__loop_flush_dirty(l);
        nsv__loop_run_once(l, 1000);
        nsv__cmd_run(l);
        nsv__loop_flush_dirty(l);
        nsv__drain_check(l);
        if (l->pushed) {
            l->pushed = 0;
            notify_host(s);
        }
        if (atomic_load_explicit(&l->wake_pollers, memory_order_relaxed))
            wake_pollers(l);
    }
    /* Out of the loop: no queued call runs any more (nsv__shard_call waits
     * for this). The thread is still joined through loops[i]->thread. */
    __atomic_store_n(&l->started, 2, __ATOMIC_RELEASE);
    notify_host(s);
    wake_pollers(l); /* stopped: a per-worker poller returns at once */
    return NULL;
}

int nsv__shard_start(nsv_server *s, int workers)
{
    if (workers == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        workers = n > 0 ? (int)n : 1;
    }
    if (workers > NSV__MAX_LOOPS)
        workers = NSV__MAX_LOOPS;
    s->sharded = 1;
    s->notify[0] = s->notify[1] = -1;
    pthread_mutex_init(&s->start_lock, NULL);
    if (pipe2(s->notify, O_NONBLOCK | O_CLOEXEC) != 0)
        return nsv__set_detail(NULL, NSV_ESYS, "nsv_server_new_sharded: pipe2: %s", strerror(errno));
    for (int i = 0; i < workers; i++) {
        nsv__loop *l = nsv__loop_new(s, i);
        if (l && nsv__http_loop_init(l) != 0) {
            nsv__loop_free(l);
            l = NULL;
        }
        if (!l)
            return nsv__set_detail(NULL, NSV_ENOMEM, "nsv_server_new_sharded: cannot create worker %d of %d",
                                   i, workers);
        s->loops[i] = l;
        s->nloops = i + 1;
    }
    return NSV_OK;
}

/* Workers start with the first poll/run, after options, routes and
 * listeners are set, so configuration never races with them. */
static int ensure_started(nsv_server *s)
{
    if (__atomic_load_n(&s->workers_started, __ATOMIC_ACQUIRE))
        return NSV_OK; /* every poll comes here: no lock once running */
    pthread_mutex_lock(&s->start_lock);
    int r = NSV_OK;
    if (!s->workers_started) {
        for (int i = 0; i < s->nloops; i++) {
            s->loops[i]->host_turns = !s->cb; /* pull mode: events go to another thread */
            /* 1 before the thread runs: it sets 2 when it leaves its loop. */
            __atomic_store_n(&s->loops[i]->started, 1, __ATOMIC_RELEASE);
            if (nsv__thread_start(&s->loops[i]->thread, NULL, worker_main, s->loops[i]) != 0) {
                __atomic_store_n(&s->loops[i]->started, 0, __ATOMIC_RELEASE);
                r = nsv__set_detail(s, NSV_ESYS, "pthread_create: %s", strerror(errno));
                atomic_store(&s->stop, 1);
                break;
            }
        }
        __atomic_store_n(&s->workers_started, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&s->start_lock);
    return r;
}

int nsv__shard_started(nsv_server *s)
{
    return s->sharded && __atomic_load_n(&s->workers_started, __ATOMIC_ACQUIRE);
}

/* Setup calls (nsv_route, nsv_listen, nsv_set_int, nsv_set_str,
 * nsv_set_callback) change state the workers read without locks, so a
 * sharded server refuses them once its workers run. NSV_OK holds start_lock
 * until nsv__setup_end, so the workers cannot start halfway through. A
 * single loop is set up from the thread that runs it: always NSV_OK. */
int nsv__setup_begin(nsv_server *s, const char *call, const char *what)
{
    if (!s->sharded)
        return NSV_OK;
    if (nsv__shard_started(s))
        goto running;
    pthread_mutex_lock(&s->start_lock);
    if (!s->workers_started)
        return NSV_OK;
    pthread_mutex_unlock(&s->start_lock);
running:
    return nsv__set_detail(s, NSV_ESTATE,
                           "%s: the sharded server's workers are running; %s before the first "
                           "nsv_poll (or nsv_poll_worker, nsv_run, nsv_fd, nsv_drain, nsv_connect)",
                           call, what);
}

void nsv__setup_end(nsv_server *s)
{
    if (s->sharded)
        pthread_mutex_unlock(&s->start_lock);
}

void nsv__shard_stop(nsv_server *s)
{
    atomic_store(&s->stop, 1);
    for (int i = 0; i < s->nloops; i++) {
        nsv__loop_wake(s->loops[i]);
        if (__atomic_load_n(&s->loops[i]->started, __ATOMIC_ACQUIRE))
            pthread_join(s->loops[i]->thread, NULL);
        __atomic_store_n(&s->loops[i]->started, 0, __ATOMIC_RELEASE);
    }
    if (s->notify[0] >= 0)
        close(s->notify[0]);
    if (s->notify[1] >= 0)
        close(s->notify[1]);
    pthread_mutex_destroy(&s->start_lock);
}

/* Expect: 100-continue on a worker whose events another thread polls. The
 * host must have one turn to answer early (e.g. 413) before the client is
 * told to send the body, and its turn is its poll, not the worker's
 * iteration, which ends at once. So the requests a poll hands out are noted
 * here, and the poller's next call on the same worker sends them
 * NSV__OP_CONTINUE, queued behind whatever the host answered meanwhile
 * (an answer turns the 100 off). Beyond 512 such requests in one batch
 * the rest get no 100 Continue; clients send the body after their own
 * wait (curl: 1 s). Called with qlock held.
 * WebSockets use the same list: a connection whose violation must wait
 * until the host answered the messages before it is put here by its
 * worker (ws/ws_conn.c, fail_soon) and fails at the second
 * NSV__OP_CONTINUE it gets (nsv__ws_turn). */
#define CONT_DUE 512
static uint32_t cont_take(nsv__loop *l, uint64_t *due)
{
    uint32_t n = l->cont_n;
    if (n)
        memcpy(due, l->cont_ids, n * sizeof *due);
    l->cont_n = 0;
    return n;
}

static uint32_t cont_note(nsv__loop *l, const nsv_event *evs, int n, const char *arena, uint64_t *due,
                          uint32_t ndue)
{
    for (int i = 0; i < n; i++) {
        uint32_t vl;
        if (evs[i].type != NSV_EV_REQUEST || !(evs[i].flags & NSV_EVF_STREAM_BODY) ||
            nsv_ev_header(&evs[i], arena, "expect", 6, &vl) < 0)
            continue;
        if (l->cont_n < sizeof l->cont_ids / sizeof l->cont_ids[0])
            l->cont_ids[l->cont_n++] = evs[i].conn;
        else if (ndue < CONT_DUE) /* no room to wait a turn: now rather than never */
            due[ndue++] = evs[i].conn;
    }
    return ndue;
}

static void cont_send(nsv__loop *l, const uint64_t *due, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        nsv__cmd c = {.fn = conn_cmd, .op = NSV__OP_CONTINUE, .id = due[i]};
        nsv__cmd_push(l, &c, NULL, NULL);
    }
}

/* One worker's events into the host's batch (qlock held), with the
 * 100 Continue bookkeeping above. */
static int copy_out(nsv__loop *l, nsv_event *evs, int max, char *arena, size_t cap, size_t *aoff,
                    uint64_t *due, uint32_t *ndue)
{
    *ndue = l->cont_n ? cont_take(l, due) : 0;
    int n = l->events.count ? nsv__evq_copy_out(l, evs, max, arena, cap, aoff) : 0;
    if (n > 0 && l->host_turns)
        *ndue = cont_note(l, evs, n, arena, due, *ndue);
    return n;
}

static int copy_from(nsv__loop *l, nsv_event *evs, int max, char *arena, size_t cap, size_t *aoff)
{
    uint64_t due[CONT_DUE];
    uint32_t ndue;
    pthread_mutex_lock(&l->qlock);
    int n = copy_out(l, evs, max, arena, cap, aoff, due, &ndue);
    pthread_mutex_unlock(&l->qlock);
    cont_send(l, due, ndue);
    return n;
}

static int drain_all(nsv_server *s, nsv_event *evs, int max, char *arena, size_t cap)
{
    static _Thread_local uint32_t start;
    size_t aoff = 0;
    int total = 0;
    start++;
    for (int k = 0; k < s->nloops && total < max; k++) {
        nsv__loop *l = s->loops[(start + (uint32_t)k) % (uint32_t)s->nloops];
        int n = copy_from(l, evs + total, max - total, arena, cap, &aoff);
        if (n == NSV_ENOBUFS) {
            if (total == 0)
                return n;
            break;
        }
        total += n;
    }
    return total;
}

static void drain_pipe(nsv_server *s)
{
    char buf[256];
    while (read(s->notify[0], buf, sizeof buf) > 0)
        ;
}

int nsv__shard_poll(nsv_server *s, nsv_event *evs, int max, char *arena, size_t cap, int timeout_ms)
{
    int r = ensure_started(s);
    if (r)
        return r;
    int64_t deadline = timeout_ms > 0 ? nsv_millis() + timeout_ms : 0;
    for (;;) {
        int n = drain_all(s, evs, max, arena, cap);
        if (n != 0)
            return n;
        if (atomic_load(&s->stop))
            return NSV_ESTOPPED;
        /* Arm the pipe, then look again so an event pushed meanwhile is not missed. */
        atomic_store(&s->notify_armed, 1);
        n = drain_all(s, evs, max, arena, cap);
        if (n != 0 || timeout_ms == 0)
            return n;
        int wait = -1;
        if (timeout_ms > 0) {
            int64_t left = deadline - nsv_millis();
            if (left <= 0)
                return 0;
            wait = (int)left;
        }
        struct pollfd p = {.fd = s->notify[0], .events = POLLIN};
        poll(&p, 1, wait);
        drain_pipe(s);
        /* Events, or 0 after a wakeup/timeout: callers loop anyway. */
        n = drain_all(s, evs, max, arena, cap);
        if (n == 0 && atomic_load(&s->stop))
            return NSV_ESTOPPED;
        return n;
    }
}

int nsv_poll_worker(nsv_server *s, int worker, nsv_event *evs, int max, char *arena, size_t cap,
                    int timeout_ms)
{
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_poll_worker: srv is NULL");
    if (max < 0)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_poll_worker: max_events is %d; must be >= 0", max);
    if (max > 0 && !evs)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_poll_worker: events is NULL with max_events %d", max);
    if (max > 0 && !arena)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_poll_worker: arena is NULL with max_events %d", max);
    if (!s->sharded && worker != 0)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_poll_worker: worker %d on a single-loop server; only "
                               "worker 0 exists", worker);
    if (!s->sharded)
        return nsv_poll(s, evs, max, arena, cap, timeout_ms);
    if (worker < 0 || worker >= s->nloops)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_poll_worker: worker %d is outside 0..%d", worker,
                               s->nloops - 1);
    int r = ensure_started(s);
    if (r)
        return r;
    nsv__loop *l = s->loops[worker];
    size_t aoff = 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ns = ts.tv_nsec + (int64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000;
    ts.tv_sec += ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    pthread_mutex_lock(&l->qlock);
    /* Wait for an event of this worker, nsv_wakeup or nsv_stop (both
     * broadcast), or the timeout; like nsv_poll, a wakeup returns 0. A
     * negative timeout waits in 1 s slices, so a stop whose broadcast was
     * missed (nsv_wakeup only tries the lock) still ends the wait. */
    while (l->events.count == 0 && timeout_ms != 0 && !atomic_load(&s->stop)) {
        if (timeout_ms < 0) {
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
        }
        l->qwaiters++;
        int w = pthread_cond_timedwait(&l->qcond, &l->qlock, &ts);
        l->qwaiters--;
        if (w != ETIMEDOUT || timeout_ms > 0)
            break;
    }
    uint64_t due[CONT_DUE];
    uint32_t ndue;
    int n = copy_out(l, evs, max, arena, cap, &aoff, due, &ndue);
    int64_t need = n == NSV_ENOBUFS ? nsv__evq_need(l) : 0;
    pthread_mutex_unlock(&l->qlock);
    cont_send(l, due, ndue);
    if (n == NSV_ENOBUFS)
        return nsv__set_detail(s, n, "nsv_poll_worker: the next event needs %lld arena bytes; arena_cap "
                               "is %zu", (long long)need, cap);
    if (n == 0 && atomic_load(&s->stop))
        return nsv__set_detail(s, NSV_ESTOPPED, "nsv_poll_worker: the server is stopped (nsv_stop or "
                               "a finished drain)");
    return n;
}

int64_t nsv__shard_need(nsv_server *s)
{
    for (int i = 0; i < s->nloops; i++) {
        pthread_mutex_lock(&s->loops[i]->qlock);
        int64_t n = nsv__evq_need(s->loops[i]);
        pthread_mutex_unlock(&s->loops[i]->qlock);
        if (n)
            return n;
    }
    return 0;
}

int nsv__shard_fd(nsv_server *s)
{
    int r = ensure_started(s);
    if (r)
        return r;
    atomic_store(&s->notify_armed, 1);
    return s->notify[0];
}

int nsv__shard_run(nsv_server *s)
{
    int r = ensure_started(s);
    if (r)
        return r;
    while (!atomic_load(&s->stop)) {
        struct pollfd p = {.fd = s->notify[0], .events = POLLIN};
        atomic_store(&s->notify_armed, 1);
        poll(&p, 1, 200);
        if (!s->cb) /* pull mode under run(): events stay queued for nsv_poll */
            continue;
        drain_pipe(s);
    }
    return NSV_OK;
}

int nsv__shard_drain_wait(nsv_server *s)
{
    int r = ensure_started(s);
    if (r)
        return r;
    while (!atomic_load(&s->stop)) {
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    return NSV_OK;
}
