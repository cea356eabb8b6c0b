/* big_reply.c - long mode (make test-long, not make test): a 3 GiB reply
 * served twice over loopback to a client process that reads and checks
 * every byte; afterwards the server's resident memory must be back near
 * where it started (the 4 GiB output buffer is not kept). Needs about
 * 7 GiB of memory while the reply is queued (the host's body plus the
 * library's copy). */
#include "tap.h"
#include <nanosrv.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)
#define BODY (3 * GiB)
#define ROUNDS 2

static nsv_event evs[64];
static char arena[1 << 16];
static uint64_t pending; /* a request seen while serving the previous reply */

/* One poll; a REQUEST is kept in pending. */
static void step(nsv_server *s, int ms)
{
    int n = nsv_poll(s, evs, 64, arena, sizeof arena, ms);
    for (int i = 0; i < n; i++)
        if (evs[i].type == NSV_EV_REQUEST)
            pending = evs[i].conn;
}

/* VmRSS or VmHWM of this process in KiB. */
static long status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':')
            v = atol(line + kl + 1);
    if (f)
        fclose(f);
    return v;
}

static unsigned char pattern(size_t i) { return (unsigned char)(i % 251); }

/* Client process: ROUNDS requests, each response read to its end and
 * checked byte by byte. Writes one line per round to out: "bytes ok". */
static void client(int port, int out)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        _exit(2);
    char *buf = malloc(MiB);
    for (int round = 0; round < ROUNDS; round++) {
        const char *req = "GET /big HTTP/1.1\r\nHost: x\r\n\r\n";
        if (write(fd, req, strlen(req)) != (ssize_t)strlen(req))
            _exit(3);
        /* head */
        size_t hn = 0;
        char *end = NULL;
        while (!end) {
            ssize_t r = read(fd, buf + hn, 1); /* byte by byte: never past the head */
            if (r <= 0)
                _exit(4);
            hn++;
            buf[hn] = 0;
            end = hn >= 4 && !memcmp(buf + hn - 4, "\r\n\r\n", 4) ? buf + hn : NULL;
            if (hn > 8000)
                _exit(5);
        }
        char *cl = strstr(buf, "Content-Length: ");
        unsigned long long want = cl ? strtoull(cl + 16, NULL, 10) : 0;
        unsigned long long got = 0, bad = 0;
        while (got < want) {
            size_t n = want - got < MiB ? (size_t)(want - got) : MiB;
            ssize_t r = read(fd, buf, n);
            if (r <= 0)
                break;
            for (ssize_t i = 0; i < r; i++)
                bad += (unsigned char)buf[i] != pattern((size_t)got + (size_t)i);
            got += (unsigned long long)r;
        }
        char line[128];
        int ln = snprintf(line, sizeof line, "%llu %llu %llu\n", want, got, bad);
        if (write(out, line, (size_t)ln) != ln)
            _exit(6);
    }
    close(fd);
    _exit(0);
}

int main(void)
{
    alarm(900);
    nsv_server *s = nsv_server_new();
    int lid = nsv_listen(s, "http://127.0.0.1:0", 18);
    nsv_route(s, "GET", 3, "/big", 4, 1, 0);
    int port = nsv_listener_port(s, lid);
    ok(port > 0, "listening on %d", port);

    int pfd[2];
    if (pipe(pfd) != 0)
        return 1;
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        client(port, pfd[1]);
    }
    close(pfd[1]);
    FILE *res = fdopen(pfd[0], "r");

    long base = status_kb("VmRSS");
    diag("server RSS before: %ld MiB", base / 1024);
    for (int round = 0; round < ROUNDS; round++) {
        /* The host's body, filled with the pattern; freed once queued. */
        unsigned char *body = mmap(NULL, BODY, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (body == MAP_FAILED) {
            ok(0, "mmap 3 GiB body");
            return done_testing();
        }
        for (size_t i = 0; i < BODY; i++)
            body[i] = pattern(i);
        for (int tries = 0; tries < 3000 && !pending; tries++)
            step(s, 10);
        uint64_t conn = pending;
        pending = 0;
        if (!ok(conn != 0, "round %d: request", round))
            break;
        int64_t t0 = nsv_millis();
        is_int(nsv_reply(s, conn, 200, "Content-Type: application/octet-stream\r\n", 40, (char *)body, BODY),
               NSV_OK, "round %d: 3 GiB reply queued", round);
        long queued_rss = status_kb("VmRSS");
        munmap(body, BODY);
        /* Serve until the client has read it all (bounded: 10 minutes). */
        char line[128] = "";
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        for (int tries = 0; tries < 60000; tries++) {
            step(s, 10);
            if (poll(&p, 1, 0) > 0)
                break;
        }
        for (int tries = 0; tries < 20; tries++) /* let the loop finish the flush */
            step(s, 5);
        unsigned long long want = 0, got = 0, bad = 1;
        if (fgets(line, sizeof line, res))
            sscanf(line, "%llu %llu %llu", &want, &got, &bad);
        int64_t ms = nsv_millis() - t0;
        is_int(want, BODY, "round %d: Content-Length 3 GiB", round);
        is_int(got, BODY, "round %d: client read %llu bytes", round, got);
        is_int(bad, 0, "round %d: every byte as sent", round);
        long after = status_kb("VmRSS");
        diag("round %d: RSS with the reply queued %ld MiB, after it was sent %ld MiB; %lld ms, %.0f MiB/s", round,
             queued_rss / 1024, after / 1024, (long long)ms, ms ? (double)BODY / MiB * 1000.0 / (double)ms : 0.0);
        ok(after < base + 256 * 1024, "round %d: RSS after the reply %ld MiB, well below 3 GiB", round, after / 1024);
    }
    diag("server peak RSS (VmHWM): %ld MiB", status_kb("VmHWM") / 1024);
    int st = 0;
    waitpid(pid, &st, 0);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "client exited cleanly (status %d)", st);
    fclose(res);
    nsv_server_free(s);
    return done_testing();
}
