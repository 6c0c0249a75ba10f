/*
 * What the netmod's IMPI collectives share (icbc_impi_coll.c,
 * icbc_impi_gather.c, icbc_impi_alltoall.c, icbc_impi_scan.c): the
 * communicator as the global phase sees it, and the messages of the phases.
 */
#ifndef ICBC_IMPI_COLL_H_INCLUDED
#define ICBC_IMPI_COLL_H_INCLUDED

#include "impi/impi_coll.h"

/* Tags of the local phases: between processes of one client only, on the
 * collective context, where no application message goes. */
#define LOCAL_TAG_BARRIER 1110
#define LOCAL_TAG_BCAST 1120
#define LOCAL_TAG_GATHER 1130
#define LOCAL_TAG_SCATTER 1150
#define LOCAL_TAG_REDUCE 1190

/* The client of each rank of COMM (which spans clients). */
impi_coll_group_t MPIDI_ICBC_impi_group(MPIR_Comm *comm);

/* A message of a phase, on COMM's collective context (MPIC), or with PT2PT
 * on its point-to-point one (LAM's reduce). */
int MPIDI_ICBC_impi_send(const void *buf, MPI_Aint count, MPI_Datatype dt, int dest, int tag,
                         MPIR_Comm *comm, int pt2pt, MPIR_Errflag_t *errflag);
int MPIDI_ICBC_impi_recv(void *buf, MPI_Aint count, MPI_Datatype dt, int src, int tag,
                         MPIR_Comm *comm, int pt2pt, MPIR_Errflag_t *errflag);

/* Waits for the requests of REQ[0..N) that were started (a slot left NULL
 * by a start that failed is skipped). */
int MPIDI_ICBC_impi_waitall(MPIR_Request **req, int n, MPIR_Errflag_t *errflag);

/* A buffer for COUNT of DT, shifted by the type's true lower bound (*BASE
 * is what to free). */
void *MPIDI_ICBC_impi_tmp_buf(MPI_Aint count, MPI_Datatype dt, void **base);

#endif /* ICBC_IMPI_COLL_H_INCLUDED */
