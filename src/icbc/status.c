/* Names of icbc_status_t values, for logs and MPI error strings; the error text helper. */
#include "icbc_status.h"

#include <stdio.h>

const char *icbc_status_str(icbc_status_t status)
{
    switch (status) {
    case ICBC_OK: return "success";
    case ICBC_ERR_INVALID: return "invalid input";
    case ICBC_ERR_NO_MEMORY: return "out of memory";
    case ICBC_ERR_IO: return "I/O error";
    case ICBC_ERR_NOT_FOUND: return "not found";
    case ICBC_ERR_UNREACHABLE: return "unreachable";
    case ICBC_ERR_PEER_FAILED: return "peer failed";
    case ICBC_ERR_AUTH: return "authentication failed";
    case ICBC_ERR_BUSY: return "busy";
    case ICBC_ERR_TRUNCATED: return "message truncated";
    case ICBC_ERR_UNSUPPORTED: return "unsupported";
    case ICBC_ERR_TIMEOUT: return "timed out";
    }
    return "unknown status";
}

icbc_status_t icbc_verr(icbc_status_t st, char *err, size_t errlen, const char *prefix,
                        const char *fmt, va_list ap)
{
    int n = 0;

    if (err == NULL || errlen == 0)
        return st;
    if (prefix) {
        n = snprintf(err, errlen, "%s", prefix);
        if (n < 0 || (size_t) n >= errlen)
            return st;
    }
    vsnprintf(err + n, errlen - (size_t) n, fmt, ap);
    return st;
}

icbc_status_t icbc_err(icbc_status_t st, char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    icbc_verr(st, err, errlen, NULL, fmt, ap);
    va_end(ap);
    return st;
}
