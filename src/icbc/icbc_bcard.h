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
 *   12+n+m  1     number k of TCP endpoints (0..ICBC_BCARD_MAX_TCP; absent = 0)
 *   then k  20    TCP endpoint: role (icbc_bcard_tcp_role_t), family (4 or 6),
 *                 port, address (4 or 16 bytes, zero-padded to 16)
 *   then    8     machine id (absent = 0, unknown)
 *
 * The TCP endpoints are where the process accepts bt_lib connections for the
 * alltoall and tcp policies: one reached from other clusters (WAN side), one
 * from its own cluster (fabric side). Zero padding after the fabric address
 * reads as "no TCP endpoints".
 *
 * The machine id tells which processes share one operating system and so
 * its cores, also when they sit on different emulated nodes (network
 * namespaces of one host): MPI's node is the network identity, the machine
 * is the CPU budget.
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

#define ICBC_BCARD_MAX_TCP 4
#define ICBC_BCARD_TCP_SIZE 20

typedef enum {
    ICBC_BCARD_TCP_WAN = 1,    /* reached by processes of other clusters */
    ICBC_BCARD_TCP_FABRIC = 2, /* reached by processes of the same cluster */
} icbc_bcard_tcp_role_t;

typedef struct icbc_bcard_tcp {
    uint8_t role;     /* icbc_bcard_tcp_role_t */
    uint8_t family;   /* 4 or 6 */
    uint16_t port;    /* host order */
    uint8_t addr[16]; /* network order; IPv4 in the first 4 bytes */
} icbc_bcard_tcp_t;

typedef struct icbc_bcard {
    char node[ICBC_BCARD_MAX_NAME + 1]; /* NUL-terminated */
    const void *fabric_addr;            /* points into the parsed buffer */
    size_t fabric_addr_len;
    int ntcp;
    icbc_bcard_tcp_t tcp[ICBC_BCARD_MAX_TCP];
    uint64_t machine; /* 0: unknown */
} icbc_bcard_t;

/* Bytes needed to encode a card with this node name and address. */
size_t icbc_bcard_size(const char *node, size_t fabric_addr_len);

/* Encode into buf (capacity cap); *len_p receives the encoded length. */
icbc_status_t icbc_bcard_encode(const char *node, const void *fabric_addr, size_t fabric_addr_len,
                                void *buf, size_t cap, size_t *len_p);

/* The same with NTCP TCP endpoints (0..ICBC_BCARD_MAX_TCP) and the machine
 * id appended. */
size_t icbc_bcard_size_tcp(const char *node, size_t fabric_addr_len, int ntcp);
icbc_status_t icbc_bcard_encode_tcp(const char *node, const void *fabric_addr,
                                    size_t fabric_addr_len, const icbc_bcard_tcp_t *tcp, int ntcp,
                                    uint64_t machine, void *buf, size_t cap, size_t *len_p);

/* This machine's id: the kernel's boot id (one per running kernel, shared
 * by all its network namespaces), folded to 64 bits; 0 when unreadable. */
uint64_t icbc_bcard_machine_id(void);
/* The same from the text of a boot id (a UUID); 0 when malformed. */
uint64_t icbc_bcard_machine_id_parse(const char *uuid);

/* The endpoint with ROLE, or NULL. */
const icbc_bcard_tcp_t *icbc_bcard_find_tcp(const icbc_bcard_t *card, icbc_bcard_tcp_role_t role);

/* Parse len bytes (trailing padding allowed). Checks every length before use;
 * on ICBC_ERR_INVALID, err (if not NULL) says what was wrong. */
icbc_status_t icbc_bcard_parse(const void *buf, size_t len, icbc_bcard_t *card, char *err,
                               size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_BCARD_H */
