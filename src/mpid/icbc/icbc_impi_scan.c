/*
 * Scan and Exscan on a communicator that spans several IMPI clients
 * (docs/impi.md): a chain in rank order (IMPI_TAG_SCAN). Rank r takes the
 * prefix of ranks 0..r-1 from rank r-1, combines its own value on the right
 * (so a non-commutative operation is applied in rank order) and hands the
 * prefix on to rank r+1. IMPI orders MPI_COMM_WORLD by client, so there
 * the chain crosses the WAN once per client boundary; every other hop is
 * inside a client. LAM/MPI composes both the same way, on its own context
 * and tags (icbc_impi_lam.c), which a communicator with a LAM client takes.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_impi.h"
#include "icbc_impi_coll.h"

#define CHAIN_CTX(comm) (MPIDI_ICBC_COMM(comm).impi_lam ? ICBC_IMPI_CTX_LAM : ICBC_IMPI_CTX_COLL)

int MPIDI_ICBC_impi_scan(const void *sendbuf, void *recvbuf, MPI_Aint count, MPI_Datatype dt,
                         MPI_Op op, MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS, rank = comm->rank, size = comm->local_size;
    int ctx = CHAIN_CTX(comm), tag = MPIDI_ICBC_COMM(comm).impi_lam ? LAM_TAG_SCAN : IMPI_TAG_SCAN;
    void *prefix_base = NULL, *prefix;

    if (sendbuf != MPI_IN_PLACE) {
        mpi_errno = MPIR_Localcopy(sendbuf, count, dt, recvbuf, count, dt);
        MPIR_ERR_CHECK(mpi_errno);
    }
    if (rank > 0) {
        prefix = MPIDI_ICBC_impi_tmp_buf(count, dt, &prefix_base);
        MPIR_ERR_CHKANDJUMP(prefix == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
        mpi_errno = MPIDI_ICBC_impi_recv(prefix, count, dt, rank - 1, tag, comm, ctx, errflag);
        MPIR_ERR_CHECK(mpi_errno);
        /* recvbuf = prefix op mine */
        mpi_errno = MPIR_Reduce_local(prefix, recvbuf, count, dt, op);
        MPIR_ERR_CHECK(mpi_errno);
    }
    if (rank < size - 1)
        mpi_errno = MPIDI_ICBC_impi_send(recvbuf, count, dt, rank + 1, tag, comm, ctx, errflag);
fn_fail:
    MPL_free(prefix_base);
    return mpi_errno;
}

int MPIDI_ICBC_impi_exscan(const void *sendbuf, void *recvbuf, MPI_Aint count, MPI_Datatype dt,
                           MPI_Op op, MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS, rank = comm->rank, size = comm->local_size;
    int ctx = CHAIN_CTX(comm),
        tag = MPIDI_ICBC_COMM(comm).impi_lam ? LAM_TAG_EXSCAN : IMPI_TAG_SCAN;
    const void *mine = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    void *next_base = NULL, *next = NULL;

    if (rank == 0) /* its recvbuf is undefined */
        return size > 1 ? MPIDI_ICBC_impi_send(mine, count, dt, 1, tag, comm, ctx, errflag)
                        : MPI_SUCCESS;
    if (rank < size - 1) {
        /* keep this rank's value before the prefix lands on it (in place) */
        next = MPIDI_ICBC_impi_tmp_buf(count, dt, &next_base);
        MPIR_ERR_CHKANDJUMP(next == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
        mpi_errno = MPIR_Localcopy(mine, count, dt, next, count, dt);
        MPIR_ERR_CHECK(mpi_errno);
    }
    mpi_errno = MPIDI_ICBC_impi_recv(recvbuf, count, dt, rank - 1, tag, comm, ctx, errflag);
    MPIR_ERR_CHECK(mpi_errno);
    if (rank < size - 1) {
        /* next = prefix op mine */
        mpi_errno = MPIR_Reduce_local(recvbuf, next, count, dt, op);
        MPIR_ERR_CHECK(mpi_errno);
        mpi_errno = MPIDI_ICBC_impi_send(next, count, dt, rank + 1, tag, comm, ctx, errflag);
    }
fn_fail:
    MPL_free(next_base);
    return mpi_errno;
}
