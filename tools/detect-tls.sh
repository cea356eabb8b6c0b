#!/bin/sh
# Prints how the build can use mbedTLS, or nothing when it cannot:
#   pkg-config   the mbedtls, mbedx509 and mbedcrypto .pc files exist
#                (mbedTLS 3.x; flags come from pkg-config)
#   compile      no .pc files (Debian's libmbedtls-dev 2.x ships none), but a
#                program including <mbedtls/ssl.h> compiles and links with
#                -lmbedtls -lmbedx509 -lmbedcrypto
# Called by the Makefile on every run, so installing or removing
# libmbedtls-dev is noticed by the next `make`. CC and PKG_CONFIG as in make.
CC=${CC:-cc}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
if "$PKG_CONFIG" --exists mbedtls mbedx509 mbedcrypto 2>/dev/null; then
    echo pkg-config
    exit 0
fi
tmp=$(mktemp -d 2>/dev/null) || exit 0
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/t.c" <<'C'
#include <mbedtls/ssl.h>
int main(void)
{
    mbedtls_ssl_context ssl;
    mbedtls_ssl_init(&ssl);
    mbedtls_ssl_free(&ssl);
    return 0;
}
C
if $CC -o "$tmp/t" "$tmp/t.c" -lmbedtls -lmbedx509 -lmbedcrypto >/dev/null 2>&1; then
    echo compile
fi
exit 0
