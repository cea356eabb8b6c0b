/* event_access.c - pure readers over an event record and its arena. */
#include "../internal.h"
#include <string.h>

/* A NULL argument; NSV_ENOTFOUND (an answer, not a refusal) sets no detail:
 * these readers run per request. */
static int null_arg(const char *fn, const nsv_event *ev, const char *arena)
{
    return nsv__set_detail(NULL, NSV_EINVAL, "%s: %s is NULL", fn, !ev ? "ev" : !arena ? "arena" : "name");
}

/* Walk the normalized header block: "Name: value\r\n" lines. */
static int next_header(const char *p, uint32_t end, uint32_t *pos, uint32_t *no, uint32_t *nl,
                       uint32_t *vo, uint32_t *vl)
{
    uint32_t i = *pos;
    if (i >= end)
        return 0;
    uint32_t s = i;
    while (i < end && p[i] != ':')
        i++;
    if (i + 1 >= end)
        return 0;
    *no = s;
    *nl = i - s;
    i += 2; /* ": " */
    uint32_t v = i;
    while (i + 1 < end && !(p[i] == '\r' && p[i + 1] == '\n'))
        i++;
    *vo = v;
    *vl = i - v;
    *pos = i + 2;
    return 1;
}

int64_t nsv_ev_header(const nsv_event *ev, const char *arena, const char *name, size_t nlen,
                      uint32_t *vlen)
{
    if (!ev || !arena || !name)
        return null_arg("nsv_ev_header", ev, arena);
    uint32_t pos = ev->headers_off, end = ev->headers_off + ev->headers_len;
    uint32_t no, nl, vo, vl;
    while (next_header(arena, end, &pos, &no, &nl, &vo, &vl)) {
        if (nl == nlen && nsv__strncaseeq(arena + no, name, nlen)) {
            if (vlen)
                *vlen = vl;
            return vo;
        }
    }
    return NSV_ENOTFOUND;
}

int nsv_ev_header_at(const nsv_event *ev, const char *arena, uint32_t idx, uint32_t *name_off,
                     uint32_t *name_len, uint32_t *val_off, uint32_t *val_len)
{
    if (!ev || !arena)
        return null_arg("nsv_ev_header_at", ev, arena);
    uint32_t pos = ev->headers_off, end = ev->headers_off + ev->headers_len;
    uint32_t no, nl, vo, vl;
    for (uint32_t i = 0; next_header(arena, end, &pos, &no, &nl, &vo, &vl); i++) {
        if (i == idx) {
            if (name_off) *name_off = no;
            if (name_len) *name_len = nl;
            if (val_off) *val_off = vo;
            if (val_len) *val_len = vl;
            return NSV_OK;
        }
    }
    return NSV_ENOTFOUND;
}

/* Params block: "name\0value\0" pairs. */
static int next_param(const char *p, uint32_t end, uint32_t *pos, uint32_t *no, uint32_t *nl,
                      uint32_t *vo, uint32_t *vl)
{
    uint32_t i = *pos;
    if (i >= end)
        return 0;
    const char *z = memchr(p + i, 0, end - i);
    if (!z)
        return 0;
    *no = i;
    *nl = (uint32_t)(z - p) - i;
    i = (uint32_t)(z - p) + 1;
    const char *z2 = memchr(p + i, 0, end - i);
    if (!z2)
        return 0;
    *vo = i;
    *vl = (uint32_t)(z2 - p) - i;
    *pos = (uint32_t)(z2 - p) + 1;
    return 1;
}

int64_t nsv_ev_param(const nsv_event *ev, const char *arena, uint32_t idx, uint32_t *vlen)
{
    if (!ev || !arena)
        return null_arg("nsv_ev_param", ev, arena);
    uint32_t pos = ev->params_off, end = ev->params_off + ev->params_len;
    uint32_t no, nl, vo, vl;
    for (uint32_t i = 0; next_param(arena, end, &pos, &no, &nl, &vo, &vl); i++)
        if (i == idx) {
            if (vlen)
                *vlen = vl;
            return vo;
        }
    return NSV_ENOTFOUND;
}

int64_t nsv_ev_param_by_name(const nsv_event *ev, const char *arena, const char *name, size_t nlen,
                             uint32_t *vlen)
{
    if (!ev || !arena || !name)
        return null_arg("nsv_ev_param_by_name", ev, arena);
    uint32_t pos = ev->params_off, end = ev->params_off + ev->params_len;
    uint32_t no, nl, vo, vl;
    while (next_param(arena, end, &pos, &no, &nl, &vo, &vl))
        if (nl == nlen && memcmp(arena + no, name, nlen) == 0) {
            if (vlen)
                *vlen = vl;
            return vo;
        }
    return NSV_ENOTFOUND;
}
