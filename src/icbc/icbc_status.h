/*
 * Status codes of libicbc and its transports. Every function that can fail
 * returns one; the error is logged once where it is detected, and callers
 * propagate it. src/mpid/icbc translates them into MPI error codes.
 */
#ifndef ICBC_STATUS_H
#define ICBC_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ICBC_OK = 0,
    ICBC_ERR_INVALID = -1, /* malformed input: file, packet, card, option */
    ICBC_ERR_NO_MEMORY = -2,
    ICBC_ERR_IO = -3,          /* system call failed; errno-based detail in the log */
    ICBC_ERR_NOT_FOUND = -4,   /* named entity (host, peer, cluster) unknown */
    ICBC_ERR_UNREACHABLE = -5, /* transport could not reach the peer or device */
    ICBC_ERR_PEER_FAILED = -6, /* a peer or router died or closed its connection */
    ICBC_ERR_AUTH = -7,        /* authentication failed */
    ICBC_ERR_BUSY = -8,        /* back-pressure: try again after progress */
    ICBC_ERR_TRUNCATED = -9,   /* message larger than the receive buffer */
    ICBC_ERR_UNSUPPORTED = -10,
    ICBC_ERR_TIMEOUT = -11,
} icbc_status_t;

const char *icbc_status_str(icbc_status_t status);

#include <stdarg.h>
#include <stddef.h>

/* Why something failed, for the caller: PREFIX (NULL: none), then FMT's
 * text, into ERR (ERRLEN bytes, cut to fit; nothing when ERR is NULL or
 * ERRLEN 0). Returns ST, so that a check can end in
 * "return icbc_err(ICBC_ERR_INVALID, err, errlen, ...)": the one way
 * libicbc's parsers and connections say why. */
icbc_status_t icbc_err(icbc_status_t st, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
icbc_status_t icbc_verr(icbc_status_t st, char *err, size_t errlen, const char *prefix,
                        const char *fmt, va_list ap) __attribute__((format(printf, 5, 0)));

#ifdef __cplusplus
}
#endif

#endif /* ICBC_STATUS_H */
