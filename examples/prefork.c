/* prefork.c - a pre-fork supervisor: one listening socket, N worker
 * processes serving it, restarts without refusing a connection.
 *
 *   prefork --workers N [--port P] [--drain-ms N]
 *
 * The supervisor binds 0.0.0.0:P (P 0 picks a free port), or, with no
 * --port, takes the socket of systemd socket activation (descriptor 3,
 * nsv_inherited_fds) when there is one, else port 8080. It forks N workers;
 * each runs a single-loop server on that same socket (nsv_listen_fd) and
 * answers GET / with "worker PID\n", so a client sees which one served it.
 * A worker tells the supervisor it is ready with one byte on a pipe;
 * "listening on PORT" is printed once all are.
 *
 * - A worker that dies is replaced (at most one start per worker slot
 *   every 200 ms, so a worker that cannot start does not spin the CPU).
 * - SIGHUP replaces the workers one at a time: the new one is started and
 *   ready before the old one gets SIGTERM. The socket stays open in the
 *   supervisor and in the new worker all along, so connections queue in
 *   its backlog and none is refused; the old worker closes its copy at the
 *   drain's start and finishes the requests it has.
 * - SIGTERM or SIGINT: the supervisor closes its copy of the socket, sends
 *   SIGTERM to every worker (each drains for --drain-ms, default 5000) and
 *   exits 0 once they are gone (SIGKILL for any left 2 s past the drain).
 * - Should the supervisor die, its workers get SIGTERM (PR_SET_PDEATHSIG).
 *
 * Why one shared socket and not SO_REUSEPORT sockets per worker: a worker
 * that closes its own SO_REUSEPORT socket resets the connections waiting
 * in that socket's queue, so a restart would drop some. */
#include <nanosrv.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MAX_WORKERS = 64, READY_TIMEOUT_MS = 10000 };

struct worker {
    pid_t pid;         /* 0: slot empty */
    int64_t started;   /* ms, for the restart pacing */
};

static struct worker workers[MAX_WORKERS];
static pid_t retiring[MAX_WORKERS * 2]; /* old workers draining after SIGHUP */
static int nworkers = 2, listen_fd = -1, drain_ms = 5000;

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* ---- a worker ---- */

static int worker_main(int ready_fd)
{
    nsv_server *srv = nsv_server_new();
    int lid = srv ? nsv_listen_fd(srv, "http://0.0.0.0:0", 16, listen_fd) : NSV_ENOMEM;
    if (lid < 0) {
        fprintf(stderr, "prefork: worker %d: %s (%s)\n", (int)getpid(), nsv_strerror(lid),
                srv ? nsv_last_error_detail(srv) : "");
        return 1;
    }
    nsv_set_int(srv, NSV_OPT_MAX_BODY, 4096); /* it answers GETs */
    nsv_route(srv, "GET", 3, "/", 1, 1, 0);
    nsv_drain_on_signal(srv, SIGTERM, drain_ms);
    nsv_drain_on_signal(srv, SIGINT, drain_ms);
    char body[32];
    int blen = snprintf(body, sizeof body, "worker %d\n", (int)getpid());
    if (write(ready_fd, "r", 1) != 1)
        return 1;
    close(ready_fd);
    static nsv_event evs[64];
    size_t cap = 1 << 16;
    char *arena = malloc(cap);
    for (;;) {
        int n = nsv_poll(srv, evs, 64, arena, cap, 1000);
        if (n == NSV_ENOBUFS) { /* the next event is larger than the arena */
            cap = (size_t)nsv_poll_need(srv);
            arena = realloc(arena, cap);
            continue;
        }
        if (n < 0)
            break; /* NSV_ESTOPPED: the drain is over */
        for (int i = 0; i < n; i++) {
            if (evs[i].type != NSV_EV_REQUEST)
                continue;
            if (evs[i].route == 1)
                nsv_reply(srv, evs[i].conn, 200, "Content-Type: text/plain\r\n", 26, body, (size_t)blen);
            else
                nsv_reply(srv, evs[i].conn, 404, "Content-Type: text/plain\r\n", 26, "not found\n", 10);
        }
    }
    nsv_server_free(srv);
    free(arena);
    return 0;
}

/* ---- the supervisor ---- */

/* Forks a worker into slot i and waits for its ready byte. Returns its pid,
 * or -1 when it failed to start (it is reaped later like any child). */
static pid_t start_worker(int i, const sigset_t *oldmask)
{
    int p[2];
    if (pipe(p) < 0)
        return -1;
    workers[i].started = now_ms();
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        close(p[0]);
        /* a worker must not outlive a supervisor killed outright */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(1);
        signal(SIGHUP, SIG_DFL);
        sigprocmask(SIG_SETMASK, oldmask, NULL);
        _exit(worker_main(p[1]));
    }
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        return -1;
    }
    workers[i].pid = pid;
    struct pollfd pf = {p[0], POLLIN, 0};
    char c = 0;
    int ready = poll(&pf, 1, READY_TIMEOUT_MS) == 1 && read(p[0], &c, 1) == 1;
    close(p[0]);
    if (!ready) {
        fprintf(stderr, "prefork: worker %d did not get ready\n", (int)pid);
        kill(pid, SIGKILL);
        return -1;
    }
    return pid;
}

static void retire(pid_t pid)
{
    for (size_t k = 0; k < sizeof retiring / sizeof retiring[0]; k++)
        if (!retiring[k]) {
            retiring[k] = pid;
            break;
        }
    kill(pid, SIGTERM);
}

/* Reaps exited children; returns how many worker slots became empty. */
static int reap(int stopping)
{
    int emptied = 0, st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        for (size_t k = 0; k < sizeof retiring / sizeof retiring[0]; k++)
            if (retiring[k] == pid)
                retiring[k] = 0, pid = 0;
        for (int i = 0; pid && i < nworkers; i++)
            if (workers[i].pid == pid) {
                if (!stopping)
                    fprintf(stderr, "prefork: worker %d %s %d; starting another\n", (int)pid,
                            WIFSIGNALED(st) ? "killed by signal" : "exited with",
                            WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
                workers[i].pid = 0;
                emptied++;
            }
    }
    return emptied;
}

static int children_left(void)
{
    int n = 0;
    for (int i = 0; i < nworkers; i++)
        n += workers[i].pid != 0;
    for (size_t k = 0; k < sizeof retiring / sizeof retiring[0]; k++)
        n += retiring[k] != 0;
    return n;
}

static int bind_port(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 1024) < 0) {
        perror("prefork: bind");
        return -1;
    }
    return fd;
}

static int bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
        return -1;
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return 0;
}

int main(int argc, char **argv)
{
    int port = -1;
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && !strcmp(argv[i], "--workers"))
            nworkers = atoi(v);
        else if (v && !strcmp(argv[i], "--port"))
            port = atoi(v);
        else if (v && !strcmp(argv[i], "--drain-ms"))
            drain_ms = atoi(v);
        else {
            fprintf(stderr, "usage: %s --workers N [--port P] [--drain-ms N]\n", argv[0]);
            return 2;
        }
    }
    if (nworkers < 1 || nworkers > MAX_WORKERS || drain_ms < 0) {
        fprintf(stderr, "prefork: --workers takes 1 to %d, --drain-ms a count of ms\n", MAX_WORKERS);
        return 2;
    }
    int inherited = port < 0 ? nsv_inherited_fds(1) : 0;
    if (inherited > 0)
        listen_fd = 3; /* systemd's socket; the unit should pass exactly one */
    else if ((listen_fd = bind_port(port < 0 ? 8080 : port)) < 0)
        return 1;

    /* Signals are taken synchronously (sigtimedwait), so nothing runs in a
     * handler and fork never races one; workers get the old mask back. */
    sigset_t set, oldmask;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, &oldmask);
    signal(SIGPIPE, SIG_IGN);

    for (int i = 0; i < nworkers; i++)
        if (start_worker(i, &oldmask) < 0) {
            fprintf(stderr, "prefork: the first workers must start\n");
            for (int k = 0; k < nworkers; k++)
                if (workers[k].pid)
                    kill(workers[k].pid, SIGKILL);
            return 1;
        }
    printf("listening on %d\n", bound_port(listen_fd));
    fflush(stdout);

    int64_t stop_deadline = 0;
    for (;;) {
        struct timespec wait = {0, 200 * 1000000};
        int sig = sigtimedwait(&set, NULL, &wait);
        if (sig == SIGTERM || sig == SIGINT) {
            if (!stop_deadline) {
                stop_deadline = now_ms() + drain_ms + 2000;
                close(listen_fd); /* refused once the workers closed theirs too */
                for (int i = 0; i < nworkers; i++)
                    if (workers[i].pid)
                        kill(workers[i].pid, SIGTERM);
            }
        } else if (sig == SIGHUP && !stop_deadline) {
            fprintf(stderr, "prefork: SIGHUP: replacing the workers one at a time\n");
            for (int i = 0; i < nworkers; i++) {
                pid_t old = workers[i].pid;
                workers[i].pid = 0;
                if (start_worker(i, &oldmask) < 0) { /* keep the old one serving */
                    workers[i].pid = old;
                    continue;
                }
                if (old)
                    retire(old);
            }
        }
        reap(stop_deadline != 0);
        if (stop_deadline) {
            if (!children_left())
                return 0;
            if (now_ms() >= stop_deadline) {
                for (int i = 0; i < nworkers; i++)
                    if (workers[i].pid)
                        kill(workers[i].pid, SIGKILL);
                for (size_t k = 0; k < sizeof retiring / sizeof retiring[0]; k++)
                    if (retiring[k])
                        kill(retiring[k], SIGKILL);
            }
            continue;
        }
        for (int i = 0; i < nworkers; i++)
            if (!workers[i].pid && now_ms() - workers[i].started >= 200)
                start_worker(i, &oldmask);
    }
}
