/* version.c - run-time version and layout checks for bindings. */
#include "../internal.h"
#include <assert.h>

/* The event record is part of the ABI: bindings hard-code this layout. */
static_assert(sizeof(nsv_event) == 112, "nsv_event layout changed");
static_assert(offsetof(nsv_event, type) == 16, "nsv_event layout changed");
static_assert(offsetof(nsv_event, method_off) == 40, "nsv_event layout changed");
static_assert(offsetof(nsv_event, peer_port) == 96, "nsv_event layout changed");
static_assert(offsetof(nsv_event, tls_off) == 104, "nsv_event layout changed");
static_assert(sizeof(nsv_url) == 40, "nsv_url layout changed");

uint32_t nsv_version(void) { return NSV_VERSION_NUMBER; }
const char *nsv_version_string(void) { return NSV_VERSION_STRING; }
int nsv_abi_version(void) { return NSV_ABI_VERSION; }
size_t nsv_event_size(void) { return sizeof(nsv_event); }

int nsv_tls_available(void)
{
#ifdef NSV_WITH_MBEDTLS
    return 1;
#else
    return 0;
#endif
}

int nsv_http2_available(void)
{
#ifdef NSV_WITH_NGHTTP2
    return 1;
#else
    return 0;
#endif
}
