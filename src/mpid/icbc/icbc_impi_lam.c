/*
 * Collectives on a communicator with a LAM/MPI 7.1.4 client (docs/impi.md).
 * LAM runs only Barrier, Bcast and Reduce with IMPI's algorithms across
 * clients; every other collective it composes from point-to-point messages
 * on its collective context, linearly (its lam_basic module). On such a
 * communicator every rank composes them the same way, on the same context
 * (ICBC_IMPI_CTX_LAM) and tags (LAM_TAG_*), so that the LAM processes find
 * the messages they wait for:
 *
 *   Gather(v)     every rank sends its block to the root, which takes them
 *                 in rank order
 *   Scatter(v)    the root sends each rank its block in rank order
 *   Allgather     Gather to rank 0, then IMPI's Bcast of the whole vector
 *   Allgatherv    Gatherv to every root in turn
 *   Alltoall(v)   every pair directly (icbc_impi_alltoall.c)
 *   Scan, Exscan  the chain in rank order (icbc_impi_scan.c)
 *   Reduce_scatter  IMPI's Reduce to rank 0, then Scatterv from it
 *
 * Nothing here is faster than the forms ICBC clients use among themselves:
 * every block crosses the WAN on its own. It is what LAM understands.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_impi.h"
#include "icbc_impi_coll.h"

/* Block R of a Gather(v) or Scatter(v) buffer: COUNTS and DISPLS are NULL
 * for Gather and Scatter (blocks of COUNT, in rank order). */
#define BLOCK_COUNT(r) (counts ? counts[r] : count)
#define BLOCK_DISPL(r) (counts ? displs[r] : (MPI_Aint) (r) *count)

/* Gather(v) (TO_ROOT) or Scatter(v): the root takes each rank's block of
 * ROOTBUF from it, or gives it, in rank order; every other rank sends or
 * receives its one block, LEAF. */
static int linear_at_root(int to_root, void *rootbuf, MPI_Aint count, const MPI_Aint *counts,
                          const MPI_Aint *displs, MPI_Datatype roottype, void *leaf,
                          MPI_Aint leafcount, MPI_Datatype leaftype, int root, MPIR_Comm *comm,
                          MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS, rank = comm->rank, size = comm->local_size, n = 0;
    int tag = to_root ? (counts ? LAM_TAG_GATHERV : LAM_TAG_GATHER)
                      : (counts ? LAM_TAG_SCATTERV : LAM_TAG_SCATTER);
    MPI_Aint ext;
    MPIR_Request **req;

    if (rank != root && to_root)
        return MPIDI_ICBC_impi_send(leaf, leafcount, leaftype, root, tag, comm, ICBC_IMPI_CTX_LAM,
                                    errflag);
    if (rank != root)
        return MPIDI_ICBC_impi_recv(leaf, leafcount, leaftype, root, tag, comm, ICBC_IMPI_CTX_LAM,
                                    errflag);
    req = MPL_calloc(MPL_MAX(1, size), sizeof(MPIR_Request *), MPL_MEM_COLL);
    MPIR_ERR_CHKANDJUMP(req == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    MPIR_Datatype_get_extent_macro(roottype, ext);
    /* LAM's root serves one rank after the other; the peers differ, so
     * posting them all at once matches the same messages */
    for (int r = 0; r < size; r++) {
        char *at = (char *) rootbuf + BLOCK_DISPL(r) * ext;
        if (r == rank) {
            if (leaf != MPI_IN_PLACE && to_root)
                mpi_errno = MPIR_Localcopy(leaf, leafcount, leaftype, at, BLOCK_COUNT(r), roottype);
            else if (leaf != MPI_IN_PLACE)
                mpi_errno = MPIR_Localcopy(at, BLOCK_COUNT(r), roottype, leaf, leafcount, leaftype);
            MPIR_ERR_CHECK(mpi_errno);
            continue;
        }
        if (to_root)
            mpi_errno = MPIDI_ICBC_impi_irecv(at, BLOCK_COUNT(r), roottype, r, tag, comm,
                                              ICBC_IMPI_CTX_LAM, &req[n++]);
        else
            mpi_errno = MPIDI_ICBC_impi_isend(at, BLOCK_COUNT(r), roottype, r, tag, comm,
                                              ICBC_IMPI_CTX_LAM, &req[n++], errflag);
        MPIR_ERR_CHECK(mpi_errno);
    }
fn_fail:
    return MPIDI_ICBC_impi_finish(req, n, mpi_errno, errflag);
}

int MPIDI_ICBC_lam_gather(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                          void *recvbuf, MPI_Aint count, const MPI_Aint *counts,
                          const MPI_Aint *displs, MPI_Datatype recvtype, int root, MPIR_Comm *comm,
                          MPIR_Errflag_t *errflag)
{
    return linear_at_root(1, recvbuf, count, counts, displs, recvtype, (void *) sendbuf, sendcount,
                          sendtype, root, comm, errflag);
}

int MPIDI_ICBC_lam_scatter(const void *sendbuf, MPI_Aint count, const MPI_Aint *counts,
                           const MPI_Aint *displs, MPI_Datatype sendtype, void *recvbuf,
                           MPI_Aint recvcount, MPI_Datatype recvtype, int root, MPIR_Comm *comm,
                           MPIR_Errflag_t *errflag)
{
    return linear_at_root(0, (void *) sendbuf, count, counts, displs, sendtype, recvbuf, recvcount,
                          recvtype, root, comm, errflag);
}

int MPIDI_ICBC_lam_allgatherv(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                              void *recvbuf, const MPI_Aint *recvcounts, const MPI_Aint *displs,
                              MPI_Datatype recvtype, MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS, rank = comm->rank, in_place = sendbuf == MPI_IN_PLACE;
    MPI_Aint rext;

    MPIR_Datatype_get_extent_macro(recvtype, rext);
    if (in_place) {
        /* this rank's block is in place: it is sent from there */
        sendbuf = (char *) recvbuf + displs[rank] * rext;
        sendcount = recvcounts[rank];
        sendtype = recvtype;
    }
    for (int root = 0; root < comm->local_size && mpi_errno == MPI_SUCCESS; root++)
        mpi_errno = MPIDI_ICBC_lam_gather(root == rank && in_place ? MPI_IN_PLACE : sendbuf,
                                          sendcount, sendtype, recvbuf, 0, recvcounts, displs,
                                          recvtype, root, comm, errflag);
    return mpi_errno;
}
