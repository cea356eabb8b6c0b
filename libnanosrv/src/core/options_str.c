/* options_str.c - string options (nsv_set_str): ids and names. The TLS
 * values live with the TLS code, the gzip media types with gzip.c. */
#include "server.h"
#include "../tls/tls.h"
#include <stdio.h>
#include <string.h>

static const struct {
    int id;
    const char *name;
} str_opts[] = {
    {NSV_OPT_TLS_CERT_FILE, "tls_cert_file"},
    {NSV_OPT_TLS_KEY_FILE, "tls_key_file"},
    {NSV_OPT_TLS_CERT_PEM, "tls_cert_pem"},
    {NSV_OPT_TLS_KEY_PEM, "tls_key_pem"},
    {NSV_OPT_TLS_CA_FILE, "tls_ca_file"},
    {NSV_OPT_TLS_CA_PEM, "tls_ca_pem"},
    {NSV_OPT_TLS_KEY_PASSWORD, "tls_key_password"},
    {NSV_OPT_TLS_CLIENT_CA_FILE, "tls_client_ca_file"},
    {NSV_OPT_TLS_CLIENT_CA_PEM, "tls_client_ca_pem"},
    {NSV_OPT_GZIP_TYPES, "gzip_types"},
};

/* Name lookup for nsv_opt_by_name (prefix already stripped). */
int nsv__str_opt_by_name(const char *name, size_t len)
{
    for (size_t i = 0; i < NSV__ARRAY_LEN(str_opts); i++)
        if (strlen(str_opts[i].name) == len && nsv__strncaseeq(str_opts[i].name, name, len))
            return str_opts[i].id;
    return nsv__set_detail(NULL, NSV_ENOTFOUND, "nsv_opt_by_name: no option is called '%.*s'",
                           (int)(len > 64 ? 64 : len), name);
}

int nsv_set_str(nsv_server *s, int opt, const char *v, size_t len)
{
    if (!s)
        return nsv__set_detail(NULL, NSV_EINVAL, "nsv_set_str: srv is NULL");
    if (!v && len)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_set_str: value is NULL with len %zu", len);
    const char *name = NULL;
    for (size_t i = 0; i < NSV__ARRAY_LEN(str_opts); i++)
        if (str_opts[i].id == opt)
            name = str_opts[i].name;
    if (!name)
        return nsv__set_detail(s, NSV_EINVAL, "nsv_set_str: option id %d is not a string option "
                               "(NSV_OPT_TLS_*, 100..108, NSV_OPT_GZIP_TYPES)", opt);
    if (opt == NSV_OPT_GZIP_TYPES) { /* read by the loops: set up front, like the integer options */
        int r = nsv__setup_begin(s, "nsv_set_str(gzip_types)", "set options");
        if (r)
            return r;
        r = nsv__gzip_set_types(s, v, len);
        nsv__setup_end(s);
        return r;
    }
    if (nsv__shard_started(s)) { /* the TLS values have their own lock; refused for one rule */
        char what[64];
        snprintf(what, sizeof what, "nsv_set_str(%s)", name);
        return nsv__setup_begin(s, what, "set options");
    }
    return nsv__tls_set_str(s, opt, v, len);
}
