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
 * context from now on (icbc_path_impi.c). */
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

/* At MPI_Finalize, once every process of this job is past its last
 * message: PMI rank 0 tells impi-server FINI; every process closes its port. */
void MPIDI_ICBC_impi_finalize(void);

#endif /* ICBC_IMPI_H_INCLUDED */
