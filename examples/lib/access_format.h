/* access_format.h - access log lines from nsv_access_take records, in
 * nginx's "common" and "combined" formats or as one JSON object per line
 * (docs/OPERATIONS.md, "Access log"; the bindings write the same bytes).
 *
 *   common:   $remote_addr - - [$time_local] "$request" $status $bytes_out
 *   combined: common + ' "$http_referer" "$http_user_agent"'
 *   json:     {"time":"2026-12-02T03:33:00.123Z","peer":..,"port":..,"method":..,
 *              "target":..,"status":..,"bytes_out":..,"bytes_in":..,
 *              "duration_ms":0.123,"user_agent":..,"referer":..}
 *
 * The byte count is the record's bytes_out, the whole answer as framed on
 * the wire (head included): nginx's $body_bytes_sent counts the body only,
 * which the library does not record separately. Empty fields are "-" in
 * the nginx formats and "" in JSON; status 0 means the connection closed
 * before an answer. Escaping follows nginx: in the nginx formats '"', '\\'
 * and bytes below 0x20 or from 0x7f up are written \xHH (log_format
 * escape=default); in JSON '"' and '\\' are escaped, \b \f \n \r \t short,
 * other bytes below 0x20 \u00HH, valid UTF-8 passes, and a byte that is
 * not part of valid UTF-8 is written \u00HH, so every line is valid JSON.
 *
 * access_log_write keeps its buffers in static storage: call it from one
 * thread at a time. */
#ifndef EXAMPLES_ACCESS_FORMAT_H
#define EXAMPLES_ACCESS_FORMAT_H

#include <nanosrv.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum { ACCESS_OFF = 0, ACCESS_COMMON = 1, ACCESS_COMBINED = 2, ACCESS_JSON = 3 };

/* "common", "combined" or "json" -> ACCESS_*, -1 for another name. */
static int access_format_by_name(const char *name)
{
    if (!strcmp(name, "common"))
        return ACCESS_COMMON;
    if (!strcmp(name, "combined"))
        return ACCESS_COMBINED;
    if (!strcmp(name, "json"))
        return ACCESS_JSON;
    return -1;
}

/* Output cursor: writes stop at the end of the buffer (the caller's buffer
 * holds the longest line, so nothing is cut in practice). */
typedef struct {
    char *p;
    size_t n, cap;
} access_out;

static void ao_put(access_out *o, const char *s, size_t n)
{
    if (n > o->cap - o->n)
        n = o->cap - o->n;
    memcpy(o->p + o->n, s, n);
    o->n += n;
}

static void ao_str(access_out *o, const char *s) { ao_put(o, s, strlen(s)); }

static void ao_fmt_u64(access_out *o, uint64_t v)
{
    char t[24];
    int n = snprintf(t, sizeof t, "%llu", (unsigned long long)v);
    ao_put(o, t, (size_t)n);
}

/* nginx's escape=default: '"', '\\', and bytes outside 0x20..0x7e as \xHH;
 * an empty field is "-". */
static void ao_nginx(access_out *o, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    if (!n) {
        ao_put(o, "-", 1);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x7f) {
            char e[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};
            ao_put(o, e, 4);
        } else {
            ao_put(o, (const char *)&c, 1);
        }
    }
}

/* Length of the valid UTF-8 sequence at s (1..4), 0 when it is not one. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    size_t len;
    uint32_t cp;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        len = 2, cp = s[0] & 0x1f;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        len = 3, cp = s[0] & 0x0f;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        len = 4, cp = s[0] & 0x07;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0; /* overlong forms and surrogates */
    return len;
}

static void ao_json(access_out *o, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    ao_put(o, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = utf8_seq((const unsigned char *)s + i, n - i);
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\b' ? "\\b" : c == '\f' ? "\\f"
                        : c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
        if (esc) {
            ao_str(o, esc);
            i++;
        } else if (c < 0x20 || !k) {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            ao_put(o, e, 6);
            i++;
        } else {
            ao_put(o, s + i, k);
            i += k;
        }
    }
    ao_put(o, "\"", 1);
}

/* One line (with its '\n') for record r into out; returns its length. */
static size_t access_format_line(int fmt, const nsv_access_record *r, char *out, size_t cap)
{
    const char *method = (const char *)(r + 1), *target = method + r->method_len;
    const char *peer = target + r->target_len, *ua = peer + r->peer_len, *referer = ua + r->ua_len;
    access_out o = {out, 0, cap - 1};
    time_t sec = (time_t)(r->time_ms / 1000);
    struct tm tm;
    char t[64];
    if (fmt == ACCESS_JSON) {
        gmtime_r(&sec, &tm);
        size_t tn = strftime(t, sizeof t, "%Y-%m-%dT%H:%M:%S", &tm);
        tn += (size_t)snprintf(t + tn, sizeof t - tn, ".%03dZ", (int)(r->time_ms % 1000));
        ao_str(&o, "{\"time\":\"");
        ao_put(&o, t, tn);
        ao_str(&o, "\",\"peer\":");
        ao_json(&o, peer, r->peer_len);
        ao_str(&o, ",\"port\":");
        ao_fmt_u64(&o, r->peer_port);
        ao_str(&o, ",\"method\":");
        ao_json(&o, method, r->method_len);
        ao_str(&o, ",\"target\":");
        ao_json(&o, target, r->target_len);
        ao_str(&o, ",\"status\":");
        ao_fmt_u64(&o, (uint64_t)(r->status < 0 ? 0 : r->status));
        ao_str(&o, ",\"bytes_out\":");
        ao_fmt_u64(&o, r->bytes_out);
        ao_str(&o, ",\"bytes_in\":");
        ao_fmt_u64(&o, r->bytes_in);
        ao_str(&o, ",\"duration_ms\":");
        int dn = snprintf(t, sizeof t, "%u.%03u", r->duration_us / 1000, r->duration_us % 1000);
        ao_put(&o, t, (size_t)dn);
        ao_str(&o, ",\"user_agent\":");
        ao_json(&o, ua, r->ua_len);
        ao_str(&o, ",\"referer\":");
        ao_json(&o, referer, r->referer_len);
        ao_str(&o, "}");
    } else {
        localtime_r(&sec, &tm); /* nginx's $time_local */
        size_t tn = strftime(t, sizeof t, "%d/%b/%Y:%H:%M:%S %z", &tm);
        ao_nginx(&o, peer, r->peer_len);
        ao_str(&o, " - - [");
        ao_put(&o, t, tn);
        ao_str(&o, "] \"");
        if (r->method_len || r->target_len) {
            ao_nginx(&o, method, r->method_len);
            ao_put(&o, " ", 1);
            ao_nginx(&o, target, r->target_len);
            ao_str(&o, r->flags & NSV_EVF_HTTP2 ? " HTTP/2.0" : r->flags & NSV_EVF_HTTP10 ? " HTTP/1.0" : " HTTP/1.1");
        } else {
            ao_put(&o, "-", 1);
        }
        ao_str(&o, "\" ");
        ao_fmt_u64(&o, (uint64_t)(r->status < 0 ? 0 : r->status));
        ao_put(&o, " ", 1);
        ao_fmt_u64(&o, r->bytes_out);
        if (fmt == ACCESS_COMBINED) {
            ao_str(&o, " \"");
            ao_nginx(&o, referer, r->referer_len);
            ao_str(&o, "\" \"");
            ao_nginx(&o, ua, r->ua_len);
            ao_str(&o, "\"");
        }
    }
    out[o.n++] = '\n';
    return o.n;
}

/* Takes every waiting record of srv and writes its line to f, then
 * flushes f once. Returns the number of lines, or a negative NSV_E* from
 * nsv_access_take. Bounded: at most 64 takes per call. */
static int access_log_write(nsv_server *srv, int fmt, FILE *f)
{
    static uint64_t recs[65536 / 8]; /* records are 8-byte aligned */
    /* the longest line: every string escaped 4 (nginx) or 6 (JSON) times */
    static char line[6 * (4096 + 512 + 1024 + 64 + 64) + 512];
    int lines = 0;
    for (int round = 0; round < 64; round++) {
        int64_t n = nsv_access_take(srv, (char *)recs, sizeof recs);
        if (n <= 0) {
            if (n < 0 && !lines)
                return (int)n;
            break;
        }
        for (int64_t off = 0; off + (int64_t)sizeof(nsv_access_record) <= n;) {
            const nsv_access_record *r = (const nsv_access_record *)((const char *)recs + off);
            if (r->size < sizeof *r || off + r->size > n)
                break; /* never happens with a well-formed take */
            fwrite(line, 1, access_format_line(fmt, r, line, sizeof line), f);
            lines++;
            off += r->size;
        }
    }
    if (lines)
        fflush(f);
    return lines;
}

#endif
