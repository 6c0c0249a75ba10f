/*
 * The connections between IMPI hosts after start-up (docs/impi.md): every
 * pair of hosts has one TCP connection; the host of higher rank connects,
 * from the address it advertised (LAM recognises a connection by its source
 * address), and first sends its host rank as 4 big-endian bytes. An IMPI
 * host's port faces the WAN, so what a connecting peer claims is checked
 * against the job's layout before the connection carries anything.
 */
#ifndef ICBC_IMPI_HOSTCONN_H
#define ICBC_IMPI_HOSTCONN_H

#include <stddef.h>
#include <stdint.h>

#include "icbc_status.h"
#include "impi_client.h"

#ifdef __cplusplus
extern "C" {
#endif

#define IMPI_HOST_RANK_SIZE 4

/* Whether host SELF opens the connection to host PEER. */
static inline int impi_host_connects(int self, int peer)
{
    return self > peer;
}

/* The IPv4 address of host H (bytes 12..15 of its 16-byte address), in
 * network order. */
uint32_t impi_host_v4(const impi_host_t *h);
/* Whether hosts A and B advertised one IPv4 address. */
static inline int impi_host_v4_equal(const impi_host_t *a, const impi_host_t *b)
{
    return impi_host_v4(a) == impi_host_v4(b);
}

/* The first bytes of a connection host SELF accepted: RANK (4 bytes) is the
 * connecting host's rank, SRC_V4 the connection's source address (network
 * order), CONNECTED a byte per host of the job (non-zero: connected
 * already). ICBC_OK with *HOST the peer's index when the rank names a host
 * of the job above SELF (only higher hosts connect), that host advertised
 * SRC_V4, and it has no connection yet; ICBC_ERR_INVALID with the reason
 * in ERR otherwise. */
icbc_status_t impi_host_accept_check(const impi_layout_t *layout, int self, const uint8_t *rank,
                                     uint32_t src_v4, const uint8_t *connected, int *host,
                                     char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_IMPI_HOSTCONN_H */
