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
/* The context a collective's message travels on (the CTX argument below):
 * MPICH's collective context of the communicator, its point-to-point one
 * (IMPI's Reduce), or the one LAM/MPI runs the collectives it composes from
 * point-to-point on (icbc_impi_lam.c). */
enum {
    ICBC_IMPI_CTX_COLL = 0,
    ICBC_IMPI_CTX_PT2PT = 1,
    ICBC_IMPI_CTX_LAM = 2,
};

/* MPICH's context id of LAM's collective context: the communicator's id
 * with subcommunicator type 3, which MPICH gives only to the short-lived
 * communicator of MPI_Intercomm_merge, built on an intercommunicator's id
 * (never one with a LAM client). On the wire to LAM's processes it is
 * LAM's -(id) - 1 (icbc_path_impi.c). */
#define ICBC_CTX_OFFSET_LAM (3 << MPIR_CONTEXT_SUBCOMM_SHIFT)

impi_coll_group_t MPIDI_ICBC_impi_group(MPIR_Comm *comm);

/* A message of a phase, on COMM's collective context (MPIC), or with PT2PT
 * on its point-to-point one (LAM's reduce). */
int MPIDI_ICBC_impi_send(const void *buf, MPI_Aint count, MPI_Datatype dt, int dest, int tag,
                         MPIR_Comm *comm, int ctx, MPIR_Errflag_t *errflag);
int MPIDI_ICBC_impi_recv(void *buf, MPI_Aint count, MPI_Datatype dt, int src, int tag,
                         MPIR_Comm *comm, int ctx, MPIR_Errflag_t *errflag);
int MPIDI_ICBC_impi_isend(const void *buf, MPI_Aint count, MPI_Datatype dt, int dest, int tag,
                          MPIR_Comm *comm, int ctx, MPIR_Request **req, MPIR_Errflag_t *errflag);
int MPIDI_ICBC_impi_irecv(void *buf, MPI_Aint count, MPI_Datatype dt, int src, int tag,
                          MPIR_Comm *comm, int ctx, MPIR_Request **req);

/* Waits for the requests of REQ[0..N) that were started (a slot left NULL
 * by a start that failed is skipped). */
int MPIDI_ICBC_impi_waitall(MPIR_Request **req, int n, MPIR_Errflag_t *errflag);
/* The end of a collective that started the N requests of REQ (the caller's
 * array, freed here with them): waits for every one; returns MPI_ERRNO, or
 * the first request's error when MPI_ERRNO is MPI_SUCCESS. */
int MPIDI_ICBC_impi_finish(MPIR_Request **req, int n, int mpi_errno, MPIR_Errflag_t *errflag);

/* A buffer for COUNT of DT, shifted by the type's true lower bound (*BASE
 * is what to free). */
void *MPIDI_ICBC_impi_tmp_buf(MPI_Aint count, MPI_Datatype dt, void **base);

/* The collectives as LAM/MPI 7.1.4 composes them from point-to-point, for a
 * communicator with a LAM client (icbc_impi_lam.c). */
int MPIDI_ICBC_lam_gather(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                          void *recvbuf, MPI_Aint count, const MPI_Aint *counts,
                          const MPI_Aint *displs, MPI_Datatype recvtype, int root, MPIR_Comm *comm,
                          MPIR_Errflag_t *errflag);
int MPIDI_ICBC_lam_scatter(const void *sendbuf, MPI_Aint count, const MPI_Aint *counts,
                           const MPI_Aint *displs, MPI_Datatype sendtype, void *recvbuf,
                           MPI_Aint recvcount, MPI_Datatype recvtype, int root, MPIR_Comm *comm,
                           MPIR_Errflag_t *errflag);
int MPIDI_ICBC_lam_allgatherv(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                              void *recvbuf, const MPI_Aint *recvcounts, const MPI_Aint *displs,
                              MPI_Datatype recvtype, MPIR_Comm *comm, MPIR_Errflag_t *errflag);

#endif /* ICBC_IMPI_COLL_H_INCLUDED */
