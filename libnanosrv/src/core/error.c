/* error.c - names and messages of the NSV_E* codes, from one list. */
#include "../internal.h"

#define NSV__ERRORS(X)                                                                  \
    X(NSV_OK, "success")                                                                \
    X(NSV_EINVAL, "invalid argument")                                                   \
    X(NSV_ENOMEM, "out of memory")                                                      \
    X(NSV_ESTALE, "connection id is unknown or the connection is closed")              \
    X(NSV_ESTATE, "operation not valid in the connection's current state")             \
    X(NSV_ECLOSED, "the peer closed the connection")                                   \
    X(NSV_EURL, "malformed or unsupported URL")                                         \
    X(NSV_EADDRINUSE, "address already in use")                                         \
    X(NSV_ESYS, "system call failed")                                                   \
    X(NSV_ENOBUFS, "buffer too small")                                                  \
    X(NSV_EAGAIN, "output limit reached, try again after it drains")                   \
    X(NSV_ENOTSUP, "not supported by this build or object")                            \
    X(NSV_ERANGE, "value out of range")                                                 \
    X(NSV_ENOTFOUND, "not found")                                                       \
    X(NSV_ETOOBIG, "data larger than the configured limit")                            \
    X(NSV_ETIMEDOUT, "operation timed out")                                             \
    X(NSV_ECONNREFUSED, "connection refused")                                           \
    X(NSV_ETLS, "TLS failure")                                                          \
    X(NSV_ESTOPPED, "server is stopped or stopping")                                    \
    X(NSV_EPARSE, "malformed input")                                                    \
    X(NSV_EEXIST, "already exists")

const char *nsv_strerror(int err)
{
    switch (err) {
#define X(code, msg)                                                                    \
    case code:                                                                          \
        return msg;
        NSV__ERRORS(X)
#undef X
    }
    return "unknown error";
}

const char *nsv_errname(int err)
{
    switch (err) {
#define X(code, msg)                                                                    \
    case code:                                                                          \
        return #code;
        NSV__ERRORS(X)
#undef X
    }
    return "NSV_EUNKNOWN";
}
