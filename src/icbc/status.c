/* Names of icbc_status_t values, for logs and MPI error strings. */
#include "icbc_status.h"

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
