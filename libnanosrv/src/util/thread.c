/* thread.c - the library's own threads (workers, name lookups) start with
 * every signal blocked, so the host's handlers run on the host's threads. */
#include "../internal.h"
#include <signal.h>

int nsv__thread_start(pthread_t *t, const pthread_attr_t *at, void *(*fn)(void *), void *arg)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the new thread inherits this mask */
    int r = pthread_create(t, at, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return r;
}
