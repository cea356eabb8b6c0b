/* session.c - one HTTP/2 session over a connection (nghttp2 server side):
 * its settings and the defences nghttp2 enforces for it. */
#include "h2.h"

#ifdef NSV_WITH_NGHTTP2
#include <nghttp2/nghttp2.h>

int nsv__h2_config(const nsv_server *s, void *ivp, void **optp)
{
    nghttp2_settings_entry *iv = ivp;
    nghttp2_option *o;
    if (nghttp2_option_new(&o) != 0)
        return NSV_ENOMEM;
    /* Window updates wait until the stream's HTTP layer consumed the bytes,
     * so a host that reads a body slowly holds the client back. */
    nghttp2_option_set_no_auto_window_update(o, 1);
    /* Rapid reset (CVE-2023-44487): a burst of h2_max_resets, refilled at
     * that many per second; past it the session ends with ENHANCE_YOUR_CALM. */
    nghttp2_option_set_stream_reset_rate_limit(o, (uint64_t)s->h2_max_resets, (uint64_t)s->h2_max_resets);
    nghttp2_option_set_max_continuations(o, NSV__H2_MAX_CONTINUATIONS);
    nghttp2_option_set_max_settings(o, NSV__H2_MAX_SETTINGS);
    nghttp2_option_set_max_outbound_ack(o, NSV__H2_MAX_OUTBOUND_ACK);
    nghttp2_option_set_max_deflate_dynamic_table_size(o, (size_t)s->h2_hpack_table);
    iv[0] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, (uint32_t)s->h2_max_streams};
    iv[1] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, (uint32_t)s->h2_window};
    iv[2] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, (uint32_t)s->h2_hpack_table};
    iv[3] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)s->max_header_bytes};
    *optp = o;
    return 4;
}
#endif
