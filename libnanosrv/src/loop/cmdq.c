/* cmdq.c - the loop's command queue: work other threads hand to a loop
 * (calls on its connections from host threads, sockets handed off by an
 * acceptor, finished name lookups). Producers lock, append and wake the
 * loop through its eventfd; the loop swaps the buffer out under the lock
 * and runs each command's function, so the queue knows nothing of what the
 * commands do. */
#include "loop.h"
#include <string.h>
#include <unistd.h>

void nsv__loop_wake(nsv__loop *l)
{
    uint64_t one = 1;
    ssize_t w = write(l->wakefd, &one, sizeof one); /* async-signal-safe */
    (void)w;
}

static size_t entry_size(const nsv__cmd *c) { return (sizeof *c + c->hlen + c->blen + 7) & ~(size_t)7; }

int nsv__cmd_push(nsv__loop *l, const nsv__cmd *c, const char *h, const char *b)
{
    size_t need = entry_size(c);
    pthread_mutex_lock(&l->cmdlock);
    if (l->cmd_cap - l->cmd_len < need) {
        size_t cap = l->cmd_cap ? l->cmd_cap * 2 : 64 * 1024;
        while (cap - l->cmd_len < need)
            cap *= 2;
        char *p = nsv__realloc(&l->srv->alloc, l->cmd, cap);
        if (!p) {
            pthread_mutex_unlock(&l->cmdlock);
            return NSV_ENOMEM;
        }
        l->cmd = p;
        l->cmd_cap = cap;
    }
    char *d = l->cmd + l->cmd_len;
    int was_empty = l->cmd_len == 0;
    memcpy(d, c, sizeof *c);
    if (c->hlen)
        memcpy(d + sizeof *c, h, c->hlen);
    if (c->blen)
        memcpy(d + sizeof *c + c->hlen, b, c->blen);
    l->cmd_len += need;
    atomic_store(&l->has_cmd, 1);
    pthread_mutex_unlock(&l->cmdlock);
    if (was_empty)
        nsv__loop_wake(l); /* the loop empties the queue on every wakeup */
    return NSV_OK;
}

/* Loop side: run the commands queued since the last iteration. */
void nsv__cmd_run(nsv__loop *l)
{
    if (!atomic_load_explicit(&l->has_cmd, memory_order_acquire))
        return;
    pthread_mutex_lock(&l->cmdlock);
    atomic_store(&l->has_cmd, 0);
    char *p = l->cmd;
    size_t len = l->cmd_len, cap = l->cmd_cap;
    l->cmd = l->cmd_spare;
    l->cmd_cap = l->cmd_spare_cap;
    l->cmd_len = 0;
    pthread_mutex_unlock(&l->cmdlock);
    for (size_t off = 0; off < len;) {
        nsv__cmd c;
        memcpy(&c, p + off, sizeof c);
        c.h = p + off + sizeof c;
        c.b = c.h + c.hlen;
        c.fn(l, &c);
        off += entry_size(&c);
    }
    l->cmd_spare = p;
    l->cmd_spare_cap = cap;
}

static void adopt_cmd(nsv__loop *l, const nsv__cmd *c)
{
    struct sockaddr_storage ss;
    memcpy(&ss, c->h, sizeof ss);
    nsv__loop_adopt(l, (int)c->arg, c->status, &ss);
}

/* An acceptor hands an accepted socket to the next loop (round robin). */
void nsv__loop_handoff(nsv__loop *from, int fd, int lidx, const struct sockaddr_storage *ss)
{
    nsv_server *s = from->srv;
    nsv__loop *to = s->loops[from->handoff_next++ % (uint32_t)s->nloops];
    if (to == from) {
        nsv__loop_adopt(from, fd, lidx, ss);
        return;
    }
    nsv__cmd c = {.fn = adopt_cmd, .status = lidx, .arg = (uint64_t)fd, .hlen = sizeof *ss};
    if (nsv__cmd_push(to, &c, (const char *)ss, NULL) != 0) {
        close(fd);
        atomic_fetch_sub(&s->nconns, 1);
    }
}
