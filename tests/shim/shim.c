/* shim.c - LD_PRELOAD library that makes the socket calls of a server
 * misbehave the way the kernel is allowed to: send, recv and accept4 fail
 * with EINTR or EAGAIN at a steady rate, sends are cut short and receives
 * return a few bytes at a time. Faults come from a per-call counter, so a
 * run is repeatable; NSV_SHIM_OFF=1 turns them off. Used by
 * tests/integration/test_shim.py. */
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/types.h>

static atomic_ulong ncalls;

static int off(void)
{
    static int v = -1;
    if (v < 0)
        v = getenv("NSV_SHIM_OFF") != NULL;
    return v;
}

/* 0 = pass, 1 = EINTR, 2 = EAGAIN, 3 = short */
static int fault(void)
{
    if (off())
        return 0;
    unsigned long k = atomic_fetch_add(&ncalls, 1);
    if (k % 7 == 3)
        return 1;
    if (k % 11 == 5)
        return 2;
    return k % 2 ? 3 : 0;
}

static size_t cut(size_t len)
{
    unsigned long k = atomic_load(&ncalls);
    size_t m = 1 + (k * 7919) % 97; /* 1..97 bytes */
    return len < m ? len : m;
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
    static ssize_t (*real)(int, const void *, size_t, int);
    if (!real)
        real = (ssize_t(*)(int, const void *, size_t, int))dlsym(RTLD_NEXT, "send");
    switch (fault()) {
    case 1: errno = EINTR; return -1;
    case 2: errno = EAGAIN; return -1;
    case 3: return real(fd, buf, cut(len), flags);
    }
    return real(fd, buf, len, flags);
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
    static ssize_t (*real)(int, void *, size_t, int);
    if (!real)
        real = (ssize_t(*)(int, void *, size_t, int))dlsym(RTLD_NEXT, "recv");
    switch (fault()) {
    case 1: errno = EINTR; return -1;
    case 2: errno = EAGAIN; return -1;
    case 3: return real(fd, buf, cut(len), flags);
    }
    return real(fd, buf, len, flags);
}

int accept4(int fd, struct sockaddr *addr, socklen_t *alen, int flags)
{
    static int (*real)(int, struct sockaddr *, socklen_t *, int);
    if (!real)
        real = (int (*)(int, struct sockaddr *, socklen_t *, int))dlsym(RTLD_NEXT, "accept4");
    switch (fault()) {
    case 1: errno = EINTR; return -1;
    case 2: errno = EAGAIN; return -1;
    }
    return real(fd, addr, alen, flags);
}
