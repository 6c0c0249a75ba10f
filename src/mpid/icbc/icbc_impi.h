/*
 * An ICBC job as one client of an IMPI job (docs/impi.md).
 *
 * Started with ICBC_IMPI_SERVER=ADDR:PORT and ICBC_IMPI_CLIENT=K (and
 * ICBC_IMPI_KEY=N when the server has a key), the job runs IMPI start-up
 * inside MPI_Init, before MPICH sizes its tables (MPIR_pmi_world_join,
 * contrib/mpich/patches/0004): its process of PMI rank 0 speaks to
 * impi-server for the client, every node is one IMPI host (its processes
 * reach the host's agent over local links, icbc_path_impi.c), and
 * MPI_COMM_WORLD becomes the IMPI world in IMPI order (client, host,
 * process). The job's own processes keep their PMI order, from world rank
 * first_rank of this client on.
 */
#ifndef ICBC_IMPI_H_INCLUDED
#define ICBC_IMPI_H_INCLUDED

#include "impi/impi_client.h"
#include "impi/impi_rx.h"

#include <stdio.h>

typedef struct {
    int active;     /* this job is an IMPI client */
    int client;     /* its client rank */
    int first_rank; /* world rank of its PMI rank 0 */
    int pmi_rank, pmi_size;
    impi_layout_t layout; /* the whole job */
    impi_client_t *conn;  /* PMI rank 0: the connection to impi-server */
    int listen_fd;        /* this host's IMPI port; -1: none */
} MPIDI_ICBC_impi_t;

extern MPIDI_ICBC_impi_t MPIDI_ICBC_impi;

/* Whether world rank R belongs to another client of the IMPI job. */
static inline int MPIDI_ICBC_impi_foreign(int r)
{
    return MPIDI_ICBC_impi.active && (r < MPIDI_ICBC_impi.first_rank ||
                                      r >= MPIDI_ICBC_impi.first_rank + MPIDI_ICBC_impi.pmi_size);
}

/* The machine (icbc_bcard_machine_id) world rank R of an IMPI job runs on,
 * as its client said at start-up; 0: unknown (a client of another MPI). */
static inline uint64_t MPIDI_ICBC_impi_machine(int r)
{
    return MPIDI_ICBC_impi.layout.machines ? MPIDI_ICBC_impi.layout.machines[r] : 0;
}

/* A collective composed as LAM/MPI composes it ran on the communicator of
 * context C: LAM sends everything of that communicator on its collective
 * context from now on (icbc_proto_impi.c). */
void MPIDI_ICBC_impi_lam_degrade(MPIR_Context_id_t c);

/* The client and host of world rank R (an IMPI job). */
void MPIDI_ICBC_impi_where(int r, int *client, int *host);

/* A communicator was committed: on MPI_COMM_SELF of an IMPI job, the
 * attribute whose deletion runs the barrier IMPI requires of MPI_Finalize
 * (icbc_impi_coll.c). */
int MPIDI_ICBC_impi_comm_committed(MPIR_Comm *comm);
void MPIDI_ICBC_impi_comm_freed(MPIR_Comm *comm);

/* IMPI's attributes on MPI_COMM_WORLD, when it is committed
 * (icbc_impi_attr.c). */
int MPIDI_ICBC_impi_world_attrs(MPIR_Comm *world);

/* Whether world rank R speaks ICBC's protocol: a process of this job or of
 * another ICBC client (one that gave its data representation); a client of
 * another MPI (LAM/MPI) gives none. */
static inline int MPIDI_ICBC_impi_speaks_icbc(int r)
{
    int client, host;

    MPIDI_ICBC_impi_where(r, &client, &host);
    return (MPIDI_ICBC_impi.layout.datarep_mask >> client) & 1;
}

#define MPIDI_ICBC_IMPI_NOT_ICBC_WHY                                                               \
    "it is a process of an IMPI client of another MPI, and IMPI carries point-to-point messages "  \
    "only (no one-sided operations)"

/* ---- the IMPI protocol over the host connections ---------------------- */

/* What the host connections (icbc_path_impi.c) hand to the IMPI protocol
 * (icbc_proto_impi.c), attached when the protocol opens. */
typedef struct {
    /* An IMPI packet from HOST, held to the layout; not ICBC_OK: it breaks
     * the protocol for ERR, and the host's connection closes. */
    icbc_status_t (*packet)(int host, const impi_rx_pkt_t *pkt, char *err, size_t errlen);
    /* HOST is lost (its processes have failed): what is in flight with it
     * ends, with WHY. */
    void (*host_lost)(int host, const char *why);
    void (*dump)(FILE *f);
    /* Every progress of the host connections: what the protocol held back
     * while they were full (MPIDI_ICBC_IMPI_BACKLOG) may go. */
    void (*writable)(void);
} MPIDI_ICBC_impi_up_t;

/* Bytes a process lets wait for a host connection before it holds its data
 * back (the striping engine's chunks, IMPI's DATA packets), so that what
 * waits in user space stays bounded; what must not wait (the ordered lane,
 * answers and PROTOACKs, which open the peers' windows) goes anyway. */
#define MPIDI_ICBC_IMPI_BACKLOG (4u << 20)

/* The host connections (icbc_path_impi.c). */
void MPIDI_ICBC_impi_attach(const MPIDI_ICBC_impi_up_t *up);
/* An IMPI packet for HOST: HEAD (its header, maybe more) and PAYLOAD.
 * ICBC_ERR_BUSY, nothing sent: more than HOLD_ABOVE bytes (0: no bound)
 * wait to go towards HOST (on the agent's connection to it in the node's
 * first process, to the agent for every host in the others). */
icbc_status_t MPIDI_ICBC_impi_emit(int host, const uint8_t *head, size_t head_len,
                                   const void *payload, size_t len, size_t hold_above);
/* HOST broke the protocol: its connection closes, its processes fail. */
void MPIDI_ICBC_impi_host_failed(int host, const char *why);

/* The IMPI protocol (icbc_proto_impi.c): opened once the host connections
 * are, before any progress; closed after them. */
int MPIDI_ICBC_proto_impi_open(void);
void MPIDI_ICBC_proto_impi_finalize(void);

/* At MPI_Finalize, once every process of this job is past its last
 * message: PMI rank 0 tells impi-server FINI; every process closes its port. */
void MPIDI_ICBC_impi_finalize(void);

#endif /* ICBC_IMPI_H_INCLUDED */
