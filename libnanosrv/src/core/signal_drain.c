/* signal_drain.c - nsv_drain_on_signal: a SIGTERM (or another of a few
 * termination signals) drains a server; a second SIGINT stops it.
 *
 * The handler may run on any thread, at any moment, so it only reads a
 * fixed table through lock-free atomics and calls nsv_drain_start /
 * nsv_stop, which are async-signal-safe (atomics, clock_gettime, close,
 * epoll_ctl and write; no allocation, no locks). Registration and removal
 * take a mutex the handler never touches.
 *
 * A freed server must never be reached: an entry's users count (busy) is
 * raised by the handler before it reads the server pointer, and removal
 * clears the pointer before it waits for busy to fall to 0. With sequential
 * consistency either the handler sees NULL or the remover sees it busy and
 * waits (a few instructions: the handler never blocks). A handler that
 * interrupts the remover's own thread finishes before the wait resumes. */
#include "server.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>

#define MAX_REGS 16

typedef struct reg {
    _Atomic(nsv_server *) srv; /* NULL: free slot */
    atomic_int signo;
    atomic_int timeout_ms;
    atomic_int busy;           /* handlers inside this entry now */
} reg;

static reg regs[MAX_REGS];
static pthread_mutex_t regs_lock = PTHREAD_MUTEX_INITIALIZER;
/* Per signal, under regs_lock: registrations and the disposition found
 * before the first one, restored when the last one goes. */
static int sig_users[NSIG];
static struct sigaction sig_prev[NSIG];

static void on_signal(int signo)
{
    int saved = errno;
    for (int i = 0; i < MAX_REGS; i++) {
        reg *r = &regs[i];
        if (atomic_load(&r->signo) != signo)
            continue;
        atomic_fetch_add(&r->busy, 1);
        nsv_server *s = atomic_load(&r->srv);
        /* Re-read signo: the slot may have been reused meanwhile. */
        if (s && atomic_load(&r->signo) == signo) {
            if (atomic_load(&s->drain_claimed)) {
                /* A drain is under way. Only ^C again forces it: one TERM
                 * often arrives twice (timeout(1) and systemd signal the
                 * process and its group, container inits forward), and that
                 * must not drop the requests in flight; the drain's own
                 * timeout bounds it. uvicorn draws the same line. */
                if (signo == SIGINT)
                    nsv_stop(s);
            } else
                nsv_drain_start(s, atomic_load(&r->timeout_ms));
        }
        atomic_fetch_sub(&r->busy, 1);
    }
    errno = saved;
}

static int allowed(int signo)
{
    return signo == SIGINT || signo == SIGTERM || signo == SIGHUP || signo == SIGQUIT || signo == SIGUSR1 ||
           signo == SIGUSR2;
}

/* Empty slot i (regs_lock held) and restore the signal's disposition when
 * no server is left on it. */
static void drop(nsv_server *s, int i)
{
    reg *r = &regs[i];
    int signo = atomic_load(&r->signo);
    atomic_store(&r->srv, NULL);
    while (atomic_load(&r->busy))
        sched_yield();
    atomic_store(&r->signo, 0);
    atomic_fetch_sub(&s->signal_regs, 1);
    if (--sig_users[signo] == 0)
        sigaction(signo, &sig_prev[signo], NULL);
}

static int find(nsv_server *s, int signo)
{
    for (int i = 0; i < MAX_REGS; i++)
        if (atomic_load(&regs[i].srv) == s && atomic_load(&regs[i].signo) == signo)
            return i;
    return -1;
}

int nsv_drain_on_signal(nsv_server *s, int signo, int timeout_ms)
{
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_drain_on_signal: srv is NULL");
    if (!allowed(signo))
        return nsv__set_detail(s, NSV_EINVAL, "nsv_drain_on_signal: signal %d is not one of SIGINT (%d), "
                               "SIGTERM (%d), SIGHUP (%d), SIGQUIT (%d), SIGUSR1 (%d), SIGUSR2 (%d)", signo,
                               SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2);
    pthread_mutex_lock(&regs_lock);
    int i = find(s, signo), r = NSV_OK;
    if (timeout_ms < 0) {
        if (i < 0)
            r = nsv__set_detail(s, NSV_ENOTFOUND, "nsv_drain_on_signal: the server has no handler for "
                                "signal %d to remove", signo);
        else
            drop(s, i);
        goto out;
    }
    if (i >= 0) { /* again: a new timeout for the next first delivery */
        atomic_store(&regs[i].timeout_ms, timeout_ms);
        goto out;
    }
    for (i = 0; i < MAX_REGS && (atomic_load(&regs[i].srv) || atomic_load(&regs[i].signo)); i++)
        ;
    if (i == MAX_REGS) {
        r = nsv__set_detail(s, NSV_ENOMEM, "nsv_drain_on_signal: the process has %d signal drain "
                            "registrations, the most it keeps; remove one (timeout_ms < 0) or free its "
                            "server first", MAX_REGS);
        goto out;
    }
    if (sig_users[signo] == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(signo, &sa, &sig_prev[signo]) != 0) {
            r = nsv__set_detail(s, NSV_ESYS, "nsv_drain_on_signal: sigaction(%d): %s", signo, strerror(errno));
            goto out;
        }
    }
    sig_users[signo]++;
    reg *g = &regs[i];
    atomic_store(&g->timeout_ms, timeout_ms);
    atomic_store(&g->signo, signo);
    atomic_fetch_add(&s->signal_regs, 1);
    atomic_store(&g->srv, s); /* last: the handler acts once it sees the server */
out:
    pthread_mutex_unlock(&regs_lock);
    return r;
}

void nsv__signal_forget(nsv_server *s)
{
    pthread_mutex_lock(&regs_lock);
    for (int i = 0; i < MAX_REGS; i++)
        if (atomic_load(&regs[i].srv) == s)
            drop(s, i);
    pthread_mutex_unlock(&regs_lock);
}
