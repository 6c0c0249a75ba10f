/*
 * Peer table: the one place that maps a world rank to what ICBC knows about
 * that process — its node, its cluster, the path chosen for it and the
 * transport endpoint of that path. The MPI glue keeps only an index into this
 * table in each address-vector entry.
 *
 * The table can grow after start-up (icbc_peer_table_grow) so that a world
 * may later include processes that PMI does not know about (IMPI clients).
 */
#ifndef ICBC_PEER_H
#define ICBC_PEER_H

#include <stddef.h>

#include "icbc_bcard.h"
#include "icbc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ICBC_PATH_NONE = 0,   /* not yet chosen */
    ICBC_PATH_SHM,        /* same node: MPICH's shared-memory module, not ours */
    ICBC_PATH_DIRECT,     /* same cluster: fabric transport */
    ICBC_PATH_ROUTED,     /* other ICBC cluster: through routers */
    ICBC_PATH_TCP_DIRECT, /* TCP between the processes (policies alltoall and tcp) */
    ICBC_PATH_IMPI,       /* foreign cluster reached with IMPI */
} icbc_path_t;

const char *icbc_path_name(icbc_path_t path);

typedef enum {
    ICBC_PEER_OK = 0,
    ICBC_PEER_FAILED, /* its connection failed; sends to it return an error */
} icbc_peer_state_t;

typedef struct icbc_peer {
    int rank;    /* world rank */
    int cluster; /* cluster index, -1 when no router file names it */
    icbc_path_t path;
    icbc_peer_state_t state;
    char node[64];     /* node name from its business card */
    void *fabric_addr; /* owned copy of its fabric address */
    size_t fabric_addr_len;
    void *ep; /* transport endpoint of the path, created on first use */
    int ntcp; /* TCP endpoints from its business card */
    icbc_bcard_tcp_t tcp[ICBC_BCARD_MAX_TCP];
} icbc_peer_t;

typedef struct icbc_peer_table {
    int size;
    int capacity;
    icbc_peer_t *peers;
} icbc_peer_table_t;

icbc_status_t icbc_peer_table_init(icbc_peer_table_t *table, int size);
/* Adds peers with ranks size..new_size-1; existing entries keep their contents
 * but may move, so do not hold icbc_peer_t pointers across a grow. */
icbc_status_t icbc_peer_table_grow(icbc_peer_table_t *table, int new_size);
void icbc_peer_table_destroy(icbc_peer_table_t *table);

static inline icbc_peer_t *icbc_peer_get(icbc_peer_table_t *table, int rank)
{
    return (rank >= 0 && rank < table->size) ? &table->peers[rank] : NULL;
}

/* Copies node name and address into the peer (replacing earlier ones). */
icbc_status_t icbc_peer_set_address(icbc_peer_t *peer, const char *node, const void *fabric_addr,
                                    size_t fabric_addr_len);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_PEER_H */
