/* access.h - access records (NSV_OPT_ACCESS_LOG): each worker captures what
 * a record needs when a request's head completes, into a buffer kept per
 * connection slot and reused (the request's bytes may be gone when its
 * answer completes), and queues the record when the answer is complete or
 * the connection closes first; nsv_access_take (core/access_log.c) moves
 * them out from any thread. Only runs while the option is > 0. */
#ifndef NSV_HTTP_ACCESS_H
#define NSV_HTTP_ACCESS_H

#include "http.h"

typedef struct nsv__access_q nsv__access_q;

#define NSV__ACCESS_METHOD_MAX 64   /* bytes of each string a record keeps */
#define NSV__ACCESS_TARGET_MAX 4096
#define NSV__ACCESS_UA_MAX 512
#define NSV__ACCESS_REFERER_MAX 1024

/* now_us: CLOCK_MONOTONIC µs read by the caller, 0 when it read none. */
void nsv__access_head(nsv__loop *l, nsv__conn *c, const nsv__request *r, int64_t now_us);
void nsv__access_status(nsv__loop *l, nsv__conn *c, int status, int64_t now_us);
void nsv__access_done(nsv__loop *l, nsv__conn *c, int64_t now_us);
void nsv__access_closed(nsv__loop *l, nsv__conn *c);
/* Whole records, oldest first over every worker, into dst (nsv_access_take). */
int64_t nsv__access_take(nsv_server *s, char *dst, size_t cap);

#endif
