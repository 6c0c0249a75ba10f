/*
 * Collectives the netmod runs itself: Barrier, Bcast, Reduce and Allreduce
 * on a communicator that spans several IMPI clients take IMPI's algorithms
 * (icbc_impi_coll.c), which another MPI's clients run too; every other
 * communicator gets MPICH's (MPIDIG's forms, renamed in netmod_inline.h).
 * ch4 hands such a communicator's collectives straight to the netmod
 * (MPIDI_NM_COLL_TAKES, contrib/mpich/patches/0005), not to its node-aware
 * compositions, whose sub-communicators no other MPI knows.
 */
#ifndef ICBC_COLL_H_INCLUDED
#define ICBC_COLL_H_INCLUDED

#define MPIDI_ICBC_COMM(comm) ((comm)->dev.ch4.netmod.icbc)

#define MPIDI_NM_COLL_TAKES(comm) (MPIDI_ICBC_COMM(comm).impi_spans)

int MPIDI_ICBC_impi_barrier(MPIR_Comm *comm, MPIR_Errflag_t *errflag);
int MPIDI_ICBC_impi_bcast(void *buf, MPI_Aint count, MPI_Datatype dt, int root, MPIR_Comm *comm,
                          MPIR_Errflag_t *errflag);
int MPIDI_ICBC_impi_reduce(const void *sendbuf, void *recvbuf, MPI_Aint count, MPI_Datatype dt,
                           MPI_Op op, int root, MPIR_Comm *comm, MPIR_Errflag_t *errflag);
int MPIDI_ICBC_impi_allreduce(const void *sendbuf, void *recvbuf, MPI_Aint count, MPI_Datatype dt,
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

#endif /* ICBC_COLL_H_INCLUDED */
