/*
 * Collectives the netmod runs itself: the blocking collectives of a
 * communicator that spans several IMPI clients take IMPI's algorithms
 * (icbc_impi_coll.c, icbc_impi_gather.c, icbc_impi_alltoall.c,
 * icbc_impi_scan.c), which another MPI's clients run too (Alltoallw, the
 * nonblocking and the neighbourhood collectives keep MPICH's, over IMPI
 * point-to-point); every other communicator gets MPICH's (MPIDIG's forms, renamed in netmod_inline.h).
 * ch4 hands such a communicator's collectives straight to the netmod
 * (MPIDI_NM_COLL_TAKES, contrib/mpich/patches/0005), not to its node-aware
 * compositions, whose sub-communicators no other MPI knows.
 */
#ifndef ICBC_COLL_H_INCLUDED
#define ICBC_COLL_H_INCLUDED

#include "icbc_impl.h"
#include "icbc_pacing.h"

#define MPIDI_NM_COLL_TAKES(comm) (MPIDI_ICBC_COMM(comm).impi_spans)

int MPIDI_ICBC_impi_barrier(MPIR_Comm *comm, MPIR_Errflag_t *errflag);
int MPIDI_ICBC_impi_bcast(void *buf, MPI_Aint count, MPI_Datatype dt, int root, MPIR_Comm *comm,
                          MPIR_Errflag_t *errflag);
int MPIDI_ICBC_impi_reduce(const void *sendbuf, void *recvbuf, MPI_Aint count, MPI_Datatype dt,
                           MPI_Op op, int root, MPIR_Comm *comm, MPIR_Errflag_t *errflag);
int MPIDI_ICBC_impi_allreduce(const void *sendbuf, void *recvbuf, MPI_Aint count, MPI_Datatype dt,
                              MPI_Op op, MPIR_Comm *comm, MPIR_Errflag_t *errflag);
int MPIDI_ICBC_impi_gather(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                           void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype, int root,
                           MPIR_Comm *comm, MPIR_Errflag_t *errflag);
int MPIDI_ICBC_impi_gatherv(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                            void *recvbuf, const MPI_Aint *recvcounts, const MPI_Aint *displs,
                            MPI_Datatype recvtype, int root, MPIR_Comm *comm,
                            MPIR_Errflag_t *errflag);
int MPIDI_ICBC_impi_scatter(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                            void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype, int root,
                            MPIR_Comm *comm, MPIR_Errflag_t *errflag);
int MPIDI_ICBC_impi_scatterv(const void *sendbuf, const MPI_Aint *sendcounts,
                             const MPI_Aint *displs, MPI_Datatype sendtype, void *recvbuf,
                             MPI_Aint recvcount, MPI_Datatype recvtype, int root, MPIR_Comm *comm,
                             MPIR_Errflag_t *errflag);
int MPIDI_ICBC_impi_allgather(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                              void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                              MPIR_Comm *comm, MPIR_Errflag_t *errflag);
int MPIDI_ICBC_impi_allgatherv(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                               void *recvbuf, const MPI_Aint *recvcounts, const MPI_Aint *displs,
                               MPI_Datatype recvtype, MPIR_Comm *comm, MPIR_Errflag_t *errflag);
int MPIDI_ICBC_impi_alltoall(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                             void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                             MPIR_Comm *comm, MPIR_Errflag_t *errflag);
int MPIDI_ICBC_impi_alltoallv(const void *sendbuf, const MPI_Aint *sendcounts,
                              const MPI_Aint *sdispls, MPI_Datatype sendtype, void *recvbuf,
                              const MPI_Aint *recvcounts, const MPI_Aint *rdispls,
                              MPI_Datatype recvtype, MPIR_Comm *comm, MPIR_Errflag_t *errflag);
int MPIDI_ICBC_impi_reduce_scatter(const void *sendbuf, void *recvbuf, const MPI_Aint *recvcounts,
                                   MPI_Datatype dt, MPI_Op op, MPIR_Comm *comm,
                                   MPIR_Errflag_t *errflag);
int MPIDI_ICBC_impi_reduce_scatter_block(const void *sendbuf, void *recvbuf, MPI_Aint recvcount,
                                         MPI_Datatype dt, MPI_Op op, MPIR_Comm *comm,
                                         MPIR_Errflag_t *errflag);
int MPIDI_ICBC_impi_scan(const void *sendbuf, void *recvbuf, MPI_Aint count, MPI_Datatype dt,
                         MPI_Op op, MPIR_Comm *comm, MPIR_Errflag_t *errflag);
int MPIDI_ICBC_impi_exscan(const void *sendbuf, void *recvbuf, MPI_Aint count, MPI_Datatype dt,
                           MPI_Op op, MPIR_Comm *comm, MPIR_Errflag_t *errflag);

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_barrier(MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    if (MPIDI_ICBC_COMM(comm).impi_spans)
        return MPIDI_ICBC_impi_barrier(comm, errflag);
    return MPIDI_ICBC_mpir_barrier(comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_bcast(void *buffer, MPI_Aint count, MPI_Datatype datatype,
                                                int root, MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    if (MPIDI_ICBC_COMM(comm).impi_spans)
        return MPIDI_ICBC_impi_bcast(buffer, count, datatype, root, comm, errflag);
    return MPIDI_ICBC_mpir_bcast(buffer, count, datatype, root, comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_reduce(const void *sendbuf, void *recvbuf, MPI_Aint count,
                                                 MPI_Datatype datatype, MPI_Op op, int root,
                                                 MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    if (MPIDI_ICBC_COMM(comm).impi_spans)
        return MPIDI_ICBC_impi_reduce(sendbuf, recvbuf, count, datatype, op, root, comm, errflag);
    return MPIDI_ICBC_mpir_reduce(sendbuf, recvbuf, count, datatype, op, root, comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_allreduce(const void *sendbuf, void *recvbuf,
                                                    MPI_Aint count, MPI_Datatype datatype,
                                                    MPI_Op op, MPIR_Comm *comm,
                                                    MPIR_Errflag_t *errflag)
{
    if (MPIDI_ICBC_COMM(comm).impi_spans)
        return MPIDI_ICBC_impi_allreduce(sendbuf, recvbuf, count, datatype, op, comm, errflag);
    return MPIDI_ICBC_mpir_allreduce(sendbuf, recvbuf, count, datatype, op, comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_gather(const void *sendbuf, MPI_Aint sendcount,
                                                 MPI_Datatype sendtype, void *recvbuf,
                                                 MPI_Aint recvcount, MPI_Datatype recvtype,
                                                 int root, MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    if (MPIDI_ICBC_COMM(comm).impi_spans)
        return MPIDI_ICBC_impi_gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                      root, comm, errflag);
    return MPIDI_ICBC_mpir_gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                                  comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int
MPIDI_NM_mpi_gatherv(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype, void *recvbuf,
                     const MPI_Aint *recvcounts, const MPI_Aint *displs, MPI_Datatype recvtype,
                     int root, MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    if (MPIDI_ICBC_COMM(comm).impi_spans)
        return MPIDI_ICBC_impi_gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                                       recvtype, root, comm, errflag);
    return MPIDI_ICBC_mpir_gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                                   recvtype, root, comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_scatter(const void *sendbuf, MPI_Aint sendcount,
                                                  MPI_Datatype sendtype, void *recvbuf,
                                                  MPI_Aint recvcount, MPI_Datatype recvtype,
                                                  int root, MPIR_Comm *comm,
                                                  MPIR_Errflag_t *errflag)
{
    if (MPIDI_ICBC_COMM(comm).impi_spans)
        return MPIDI_ICBC_impi_scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                       root, comm, errflag);
    return MPIDI_ICBC_mpir_scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                                   comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_scatterv(const void *sendbuf, const MPI_Aint *sendcounts,
                                                   const MPI_Aint *displs, MPI_Datatype sendtype,
                                                   void *recvbuf, MPI_Aint recvcount,
                                                   MPI_Datatype recvtype, int root, MPIR_Comm *comm,
                                                   MPIR_Errflag_t *errflag)
{
    if (MPIDI_ICBC_COMM(comm).impi_spans)
        return MPIDI_ICBC_impi_scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount,
                                        recvtype, root, comm, errflag);
    return MPIDI_ICBC_mpir_scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount,
                                    recvtype, root, comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_allgather(const void *sendbuf, MPI_Aint sendcount,
                                                    MPI_Datatype sendtype, void *recvbuf,
                                                    MPI_Aint recvcount, MPI_Datatype recvtype,
                                                    MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    if (MPIDI_ICBC_COMM(comm).impi_spans)
        return MPIDI_ICBC_impi_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                         comm, errflag);
    return MPIDI_ICBC_mpir_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                     comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_allgatherv(const void *sendbuf, MPI_Aint sendcount,
                                                     MPI_Datatype sendtype, void *recvbuf,
                                                     const MPI_Aint *recvcounts,
                                                     const MPI_Aint *displs, MPI_Datatype recvtype,
                                                     MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    if (MPIDI_ICBC_COMM(comm).impi_spans)
        return MPIDI_ICBC_impi_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                                          recvtype, comm, errflag);
    return MPIDI_ICBC_mpir_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                                      recvtype, comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_alltoall(const void *sendbuf, MPI_Aint sendcount,
                                                   MPI_Datatype sendtype, void *recvbuf,
                                                   MPI_Aint recvcount, MPI_Datatype recvtype,
                                                   MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    if (MPIDI_ICBC_COMM(comm).impi_spans)
        return MPIDI_ICBC_impi_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                        comm, errflag);
    uint64_t saved;
    int paced = MPIDI_ICBC_pace_coll_begin(comm, &saved);
    int mpi_errno = MPIDI_ICBC_mpir_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                             recvtype, comm, errflag);
    if (paced)
        MPIDI_ICBC_pace_coll_end(saved);
    return mpi_errno;
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_alltoallv(const void *sendbuf, const MPI_Aint *sendcounts,
                                                    const MPI_Aint *sdispls, MPI_Datatype sendtype,
                                                    void *recvbuf, const MPI_Aint *recvcounts,
                                                    const MPI_Aint *rdispls, MPI_Datatype recvtype,
                                                    MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    if (MPIDI_ICBC_COMM(comm).impi_spans)
        return MPIDI_ICBC_impi_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                                         recvcounts, rdispls, recvtype, comm, errflag);
    uint64_t saved;
    int paced = MPIDI_ICBC_pace_coll_begin(comm, &saved);
    int mpi_errno = MPIDI_ICBC_mpir_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                                              recvcounts, rdispls, recvtype, comm, errflag);
    if (paced)
        MPIDI_ICBC_pace_coll_end(saved);
    return mpi_errno;
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_reduce_scatter(const void *sendbuf, void *recvbuf,
                                                         const MPI_Aint recvcounts[],
                                                         MPI_Datatype datatype, MPI_Op op,
                                                         MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    if (MPIDI_ICBC_COMM(comm).impi_spans)
        return MPIDI_ICBC_impi_reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm,
                                              errflag);
    return MPIDI_ICBC_mpir_reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm,
                                          errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_reduce_scatter_block(const void *sendbuf, void *recvbuf,
                                                               MPI_Aint recvcount,
                                                               MPI_Datatype datatype, MPI_Op op,
                                                               MPIR_Comm *comm,
                                                               MPIR_Errflag_t *errflag)
{
    if (MPIDI_ICBC_COMM(comm).impi_spans)
        return MPIDI_ICBC_impi_reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm,
                                                    errflag);
    return MPIDI_ICBC_mpir_reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm,
                                                errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_scan(const void *sendbuf, void *recvbuf, MPI_Aint count,
                                               MPI_Datatype datatype, MPI_Op op, MPIR_Comm *comm,
                                               MPIR_Errflag_t *errflag)
{
    if (MPIDI_ICBC_COMM(comm).impi_spans)
        return MPIDI_ICBC_impi_scan(sendbuf, recvbuf, count, datatype, op, comm, errflag);
    return MPIDI_ICBC_mpir_scan(sendbuf, recvbuf, count, datatype, op, comm, errflag);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_exscan(const void *sendbuf, void *recvbuf, MPI_Aint count,
                                                 MPI_Datatype datatype, MPI_Op op, MPIR_Comm *comm,
                                                 MPIR_Errflag_t *errflag)
{
    if (MPIDI_ICBC_COMM(comm).impi_spans)
        return MPIDI_ICBC_impi_exscan(sendbuf, recvbuf, count, datatype, op, comm, errflag);
    return MPIDI_ICBC_mpir_exscan(sendbuf, recvbuf, count, datatype, op, comm, errflag);
}

#endif /* ICBC_COLL_H_INCLUDED */
