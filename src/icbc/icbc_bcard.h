/*
 * Business card: what one ICBC process tells every other at start-up through
 * PMI. Fixed-width fields in network byte order with a magic and a version,
 * so a corrupt or foreign card is detected instead of trusted.
 *
 *   offset  size  field
 *   0       4     magic "ICBC"
 *   4       2     version (ICBC_BCARD_VERSION)
 *   6       2     node name length n (1..ICBC_BCARD_MAX_NAME)
 *   8       4     fabric address length m
 *   12      n     node name (not NUL-terminated)
 *   12+n    m     fabric transport address (opaque, e.g. a UCP worker address)
 */
#ifndef ICBC_BCARD_H
#define ICBC_BCARD_H

#include <stddef.h>
#include <stdint.h>

#include "icbc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ICBC_BCARD_MAGIC 0x49434243u /* "ICBC" */
#define ICBC_BCARD_VERSION 1
#define ICBC_BCARD_HEADER_SIZE 12
#define ICBC_BCARD_MAX_NAME 63

typedef struct icbc_bcard {
    char node[ICBC_BCARD_MAX_NAME + 1];  /* NUL-terminated */
    const void *fabric_addr;             /* points into the parsed buffer */
    size_t fabric_addr_len;
} icbc_bcard_t;

/* Bytes needed to encode a card with this node name and address. */
size_t icbc_bcard_size(const char *node, size_t fabric_addr_len);

/* Encode into buf (capacity cap); *len_p receives the encoded length. */
icbc_status_t icbc_bcard_encode(const char *node, const void *fabric_addr, size_t fabric_addr_len,
                                void *buf, size_t cap, size_t *len_p);

/* Parse len bytes (trailing padding allowed). Checks every length before use;
 * on ICBC_ERR_INVALID, err (if not NULL) says what was wrong. */
icbc_status_t icbc_bcard_parse(const void *buf, size_t len, icbc_bcard_t *card,
                               char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_BCARD_H */
