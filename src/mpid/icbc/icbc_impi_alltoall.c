/*
 * Alltoall and Alltoallv on a communicator that spans several IMPI clients
 * (docs/impi.md): every pair exchanges its blocks directly, all at once
 * (IMPI_TAG_ALLTOALL/ALLTOALLV). There is no master phase: every block
 * for another client must cross the WAN anyway, and staging a client's
 * blocks at its master would send all of them through one process and one
 * connection instead of through every host's own.
 *
 * In place, the blocks to send are taken out of RECVBUF first, packed.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_impi.h"
#include "icbc_impi_coll.h"

/* The exchange: block r of SENDBUF (SCOUNTS[r] of STYPE at SDISPLS[r]
 * extents) to rank r, block r of RECVBUF from it. */
static int exchange(const void *sendbuf, const MPI_Aint *scounts, const MPI_Aint *sdispls,
                    MPI_Datatype stype, void *recvbuf, const MPI_Aint *rcounts,
                    const MPI_Aint *rdispls, MPI_Datatype rtype, int tag, int ctx, MPIR_Comm *comm,
                    MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS, rank = comm->rank, size = comm->local_size, n = 0;
    MPI_Aint sext, rext;
    MPIR_Request **req = MPL_calloc(2 * size, sizeof(MPIR_Request *), MPL_MEM_COLL);

    MPIR_ERR_CHKANDJUMP(req == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    MPIR_Datatype_get_extent_macro(stype, sext);
    MPIR_Datatype_get_extent_macro(rtype, rext);
    /* start with the next rank up, so that not every rank sends to rank 0 first */
    for (int k = 1; k < size; k++) {
        int from = (rank - k + size) % size;
        mpi_errno = MPIDI_ICBC_impi_irecv((char *) recvbuf + rdispls[from] * rext, rcounts[from],
                                          rtype, from, tag, comm, ctx, &req[n++]);
        MPIR_ERR_CHECK(mpi_errno);
    }
    for (int k = 1; k < size; k++) {
        int to = (rank + k) % size;
        mpi_errno = MPIDI_ICBC_impi_isend((const char *) sendbuf + sdispls[to] * sext, scounts[to],
                                          stype, to, tag, comm, ctx, &req[n++], errflag);
        MPIR_ERR_CHECK(mpi_errno);
    }
    mpi_errno = MPIR_Localcopy((const char *) sendbuf + sdispls[rank] * sext, scounts[rank], stype,
                               (char *) recvbuf + rdispls[rank] * rext, rcounts[rank], rtype);
fn_fail:
    return MPIDI_ICBC_impi_finish(req, n, mpi_errno, errflag);
}

/* In place: RECVBUF's blocks packed into *PACKED, and the counts and
 * displacements (in bytes) that describe them there. */
static int pack_in_place(void *recvbuf, const MPI_Aint *rcounts, const MPI_Aint *rdispls,
                         MPI_Datatype rtype, int size, char **packed, MPI_Aint *counts,
                         MPI_Aint *displs)
{
    MPI_Aint rext, rsize, total = 0;
    int mpi_errno;

    MPIR_Datatype_get_extent_macro(rtype, rext);
    MPIR_Datatype_get_size_macro(rtype, rsize);
    for (int r = 0; r < size; r++) {
        counts[r] = rcounts[r] * rsize;
        displs[r] = total;
        total += counts[r];
    }
    *packed = MPL_malloc(MPL_MAX(1, total), MPL_MEM_BUFFER);
    if (*packed == NULL)
        return MPI_ERR_NO_MEM;
    for (int r = 0; r < size; r++) {
        mpi_errno = MPIR_Localcopy((char *) recvbuf + rdispls[r] * rext, rcounts[r], rtype,
                                   *packed + displs[r], counts[r], MPI_BYTE);
        if (mpi_errno != MPI_SUCCESS)
            return mpi_errno;
    }
    return MPI_SUCCESS;
}

/* Alltoallv with TAG: a send buffer of MPI_IN_PLACE is the receive buffer's
 * blocks, packed first (every rank sends before it receives). */
static int alltoallv_tagged(const void *sendbuf, const MPI_Aint *sendcounts,
                            const MPI_Aint *sdispls, MPI_Datatype sendtype, void *recvbuf,
                            const MPI_Aint *recvcounts, const MPI_Aint *rdispls,
                            MPI_Datatype recvtype, int tag, MPIR_Comm *comm,
                            MPIR_Errflag_t *errflag)
{
    /* with a LAM client, LAM's context (and the caller gave LAM's tag) */
    int ctx = MPIDI_ICBC_COMM(comm).impi_lam ? ICBC_IMPI_CTX_LAM : ICBC_IMPI_CTX_COLL;
    int mpi_errno, size = comm->local_size;
    MPI_Aint *counts, *displs;
    char *packed = NULL;

    if (sendbuf != MPI_IN_PLACE)
        return exchange(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                        recvtype, tag, ctx, comm, errflag);
    counts = MPL_malloc(sizeof(MPI_Aint) * 2 * size, MPL_MEM_COLL);
    if (counts == NULL)
        return MPI_ERR_NO_MEM;
    displs = counts + size;
    mpi_errno =
        pack_in_place(recvbuf, recvcounts, rdispls, recvtype, size, &packed, counts, displs);
    if (mpi_errno == MPI_SUCCESS)
        mpi_errno = exchange(packed, counts, displs, MPI_BYTE, recvbuf, recvcounts, rdispls,
                             recvtype, tag, ctx, comm, errflag);
    MPL_free(packed);
    MPL_free(counts);
    return mpi_errno;
}

int MPIDI_ICBC_impi_alltoallv(const void *sendbuf, const MPI_Aint *sendcounts,
                              const MPI_Aint *sdispls, MPI_Datatype sendtype, void *recvbuf,
                              const MPI_Aint *recvcounts, const MPI_Aint *rdispls,
                              MPI_Datatype recvtype, MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    return alltoallv_tagged(
        sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
        MPIDI_ICBC_COMM(comm).impi_lam ? LAM_TAG_ALLTOALLV : IMPI_TAG_ALLTOALLV, comm, errflag);
}

/* Alltoall is Alltoallv with equal blocks, on its own tag. */
int MPIDI_ICBC_impi_alltoall(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                             void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                             MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    int mpi_errno, size = comm->local_size;
    MPI_Aint *v = MPL_malloc(sizeof(MPI_Aint) * 4 * size, MPL_MEM_COLL);
    MPI_Aint *scounts = v, *sdispls = v + size, *rcounts = v + 2 * size, *rdispls = v + 3 * size;

    if (v == NULL)
        return MPI_ERR_NO_MEM;
    for (int r = 0; r < size; r++) {
        scounts[r] = sendcount;
        sdispls[r] = r * sendcount;
        rcounts[r] = recvcount;
        rdispls[r] = r * recvcount;
    }
    mpi_errno = alltoallv_tagged(
        sendbuf, scounts, sdispls, sendtype, recvbuf, rcounts, rdispls, recvtype,
        MPIDI_ICBC_COMM(comm).impi_lam ? LAM_TAG_ALLTOALL : IMPI_TAG_ALLTOALL, comm, errflag);
    MPL_free(v);
    return mpi_errno;
}
