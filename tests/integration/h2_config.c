/* h2_config.c - NSV_OPT_HTTP2 matches what the build holds, and the HTTP/2
 * session's settings and defences follow the server's options. */
#include "nanosrv.h"
#include "tap.h"
#include "h2/h2.h"
#ifdef NSV_WITH_NGHTTP2
#include <nghttp2/nghttp2.h>
#endif

int main(void)
{
    nsv_server *s = nsv_server_new();
    ok(s != NULL, "server made");
    int avail = nsv_http2_available();
#ifdef NSV_WITH_NGHTTP2
    is_int(avail, 1, "built with nghttp2: HTTP/2 available");
    is_int(nsv_set_int(s, NSV_OPT_HTTP2, NSV_H2_ALL), NSV_OK, "NSV_OPT_HTTP2 accepted");
    is_int(nsv_set_int(s, NSV_OPT_H2_MAX_STREAMS, 7), NSV_OK, "h2_max_streams set");
    is_int(nsv_set_int(s, NSV_OPT_H2_WINDOW, 70000), NSV_OK, "h2_window set");
    is_int(nsv_set_int(s, NSV_OPT_H2_HPACK_TABLE, 1024), NSV_OK, "h2_hpack_table set");
    is_int((int)nsv_get_int(s, NSV_OPT_H2_BODY_BUFFER), 8 << 20, "h2_body_buffer: 8 MiB by default");
    is_int(nsv_set_int(s, NSV_OPT_H2_BODY_BUFFER, 65535), NSV_ERANGE, "h2_body_buffer: under 64 KiB refused");
    is_int(nsv_set_int(s, NSV_OPT_H2_BODY_BUFFER, 1 << 20), NSV_OK, "h2_body_buffer set");
    is_int((int)nsv_get_int(s, NSV_OPT_H2_BODY_BUFFER), 1 << 20, "h2_body_buffer read back");
    nghttp2_settings_entry iv[8];
    void *opt = NULL;
    int n = nsv__h2_config((const nsv_server *)s, iv, &opt);
    is_int(n, 4, "four settings");
    ok(opt != NULL, "nghttp2 options made");
    int seen = 0;
    for (int i = 0; i < n; i++) {
        if (iv[i].settings_id == NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
            seen |= (iv[i].value == 7) << 0;
        if (iv[i].settings_id == NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE)
            seen |= (iv[i].value == 70000) << 1;
        if (iv[i].settings_id == NGHTTP2_SETTINGS_HEADER_TABLE_SIZE)
            seen |= (iv[i].value == 1024) << 2;
        if (iv[i].settings_id == NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE)
            seen |= (iv[i].value == (uint32_t)nsv_get_int(s, NSV_OPT_MAX_HEADER_BYTES)) << 3;
    }
    is_int(seen, 15, "settings follow the options");
    nghttp2_option_del(opt);
#else
    is_int(avail, 0, "built without nghttp2: HTTP/2 not available");
    is_int(nsv_set_int(s, NSV_OPT_HTTP2, NSV_H2_ALL), NSV_ENOTSUP, "NSV_OPT_HTTP2 refused");
    is_int(nsv_set_int(s, NSV_OPT_HTTP2, 0), NSV_OK, "NSV_OPT_HTTP2 = 0 still accepted");
#endif
    nsv_server_free(s);
    return done_testing();
}
