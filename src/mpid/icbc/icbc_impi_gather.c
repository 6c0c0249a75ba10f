/*
 * Gather, Scatter and what is built on them, on a communicator that spans
 * several IMPI clients (docs/impi.md):
 *
 *   Gather(v)    each client's blocks meet at its master (the root, in the
 *                root's client), in rank order; every other master sends
 *                its client's blocks to the root as one message
 *                (IMPI_TAG_GATHER/GATHERV), which puts each block in place
 *   Scatter(v)   the reverse: one message per other client to its master,
 *                which hands each of its ranks its block
 *   Allgather(v) Gather(v) to rank 0, then Bcast
 *   Reduce_scatter(_block)  Reduce to rank 0, then Scatterv
 *
 * One message per client crosses the WAN, however many processes a client
 * has: gathering is the "short" algorithm of the IMPI draft, used for every
 * size, since a block gathered at the master crosses the WAN once either
 * way. The masters talk to the root linearly: a tree would forward blocks
 * through other masters, carrying every byte over the WAN more than once.
 * Blocks travel as bytes between the phases (every ICBC process has the same
 * representation); a process that does not know the sizes of its client's
 * blocks (Gatherv's and Scatterv's masters) learns them in a message first.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_impi.h"
#include "icbc_impi_coll.h"

/* Whether R is the master of a client other than MINE. */
static int other_master(const impi_coll_group_t *g, int r, int mine)
{
    return g->client[r] != mine && impi_coll_local_master(g, r) == r;
}

static int client_size(const impi_coll_group_t *g, int c)
{
    int n = 0;

    for (int r = 0; r < g->size; r++)
        n += g->client[r] == c;
    return n;
}

/* Requests of one phase, waited for together (a slot stays NULL when its
 * start failed). */
typedef struct {
    MPIR_Request **req;
    int n;
} req_list_t;

static int req_list_init(req_list_t *l, int max)
{
    l->n = 0;
    l->req = MPL_calloc(MPL_MAX(1, max), sizeof(MPIR_Request *), MPL_MEM_COLL);
    return l->req ? MPI_SUCCESS : MPI_ERR_NO_MEM;
}

static int req_list_wait(req_list_t *l, MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPIDI_ICBC_impi_waitall(l->req, l->n, errflag);

    MPL_free(l->req);
    l->req = NULL;
    l->n = 0;
    return mpi_errno;
}

/* ---- Gather --------------------------------------------------------------- */

/* Where the root lays out the other clients' blocks in its buffer: each
 * client's in rank order, the clients in the order of their masters; rank
 * r's block starts at OFFS[r] (-1 for ranks of the root's client). A
 * master's client begins at the master's own offset. */
static void gathered_offsets(const impi_coll_group_t *g, int mine, const MPI_Aint *bytes,
                             MPI_Aint *offs)
{
    MPI_Aint off = 0;

    for (int r = 0; r < g->size; r++)
        offs[r] = -1;
    for (int m = 0; m < g->size; m++) {
        if (!other_master(g, m, mine))
            continue;
        for (int r = 0; r < g->size; r++)
            if (g->client[r] == g->client[m]) {
                offs[r] = off;
                off += bytes[r];
            }
    }
}

/* At the root: each other client's blocks, one message per client from its
 * master, into TMP as gathered_offsets lays them out. */
static int gather_from_masters(const impi_coll_group_t *g, int tag, const MPI_Aint *bytes,
                               const MPI_Aint *offs, char *tmp, MPIR_Comm *comm,
                               MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS, mine = g->client[comm->rank];
    req_list_t reqs;

    mpi_errno = req_list_init(&reqs, g->size);
    MPIR_ERR_CHECK(mpi_errno);
    for (int m = 0; m < g->size; m++) {
        MPI_Aint n = 0;
        if (!other_master(g, m, mine))
            continue;
        for (int r = 0; r < g->size; r++)
            if (g->client[r] == g->client[m])
                n += bytes[r];
        mpi_errno = MPIC_Irecv(tmp + offs[m], n, MPI_BYTE, m, tag, comm, &reqs.req[reqs.n++]);
        MPIR_ERR_CHECK(mpi_errno);
    }
fn_fail:
    if (mpi_errno == MPI_SUCCESS)
        return req_list_wait(&reqs, errflag);
    req_list_wait(&reqs, errflag);
    return mpi_errno;
}

/* At a master of a client without the root: its client's blocks, in rank
 * order, into one buffer, sent to the root. OWN is this rank's block (OWN_BYTES);
 * a rank's block size is BLOCK, or (VARYING) told by the rank first. */
static int gather_at_master(const impi_coll_group_t *g, const void *own, MPI_Aint own_count,
                            MPI_Datatype own_type, MPI_Aint block, int varying, int root, int tag,
                            MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS, rank = comm->rank, mine = g->client[rank];
    MPI_Aint *bytes = MPL_malloc(sizeof(MPI_Aint) * g->size, MPL_MEM_COLL), total = 0, off = 0;
    char *tmp = NULL;
    req_list_t reqs = { NULL, 0 };

    MPIR_ERR_CHKANDJUMP(bytes == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    for (int r = 0; r < g->size; r++) {
        bytes[r] = 0;
        if (g->client[r] != mine)
            continue;
        if (r == rank || !varying)
            bytes[r] = block;
        else {
            mpi_errno = MPIDI_ICBC_impi_recv(&bytes[r], 1, MPI_AINT, r, LOCAL_TAG_GATHER, comm,
                                             ICBC_IMPI_CTX_COLL, errflag);
            MPIR_ERR_CHECK(mpi_errno);
        }
        total += bytes[r];
    }
    tmp = MPL_malloc(MPL_MAX(1, total), MPL_MEM_BUFFER);
    MPIR_ERR_CHKANDJUMP(tmp == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    mpi_errno = req_list_init(&reqs, g->size);
    MPIR_ERR_CHECK(mpi_errno);
    for (int r = 0; r < g->size; r++) {
        if (g->client[r] != mine)
            continue;
        if (r == rank)
            mpi_errno = MPIR_Localcopy(own, own_count, own_type, tmp + off, bytes[r], MPI_BYTE);
        else
            mpi_errno = MPIC_Irecv(tmp + off, bytes[r], MPI_BYTE, r, LOCAL_TAG_GATHER, comm,
                                   &reqs.req[reqs.n++]);
        MPIR_ERR_CHECK(mpi_errno);
        off += bytes[r];
    }
    mpi_errno = req_list_wait(&reqs, errflag);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno =
        MPIDI_ICBC_impi_send(tmp, total, MPI_BYTE, root, tag, comm, ICBC_IMPI_CTX_COLL, errflag);
fn_fail:
    if (reqs.req)
        req_list_wait(&reqs, errflag);
    MPL_free(tmp);
    MPL_free(bytes);
    return mpi_errno;
}

/* Gather and Gatherv: COUNTS and DISPLS are NULL for Gather (blocks of
 * RECVCOUNT, in rank order). */
static int gather(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype, void *recvbuf,
                  MPI_Aint recvcount, const MPI_Aint *counts, const MPI_Aint *displs,
                  MPI_Datatype recvtype, int root, MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS, rank = comm->rank;
    impi_coll_group_t g = MPIDI_ICBC_impi_group(comm);
    int mine = g.client[rank], varying = counts != NULL;
    int tag = varying ? IMPI_TAG_GATHERV : IMPI_TAG_GATHER;

    if (MPIDI_ICBC_COMM(comm).impi_lam)
        return MPIDI_ICBC_lam_gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, counts,
                                     displs, recvtype, root, comm, errflag);
    MPI_Aint *bytes = NULL, *offs = NULL, total = 0, rsize, rext, ssize;
    char *tmp = NULL;
    req_list_t reqs = { NULL, 0 };

    if (rank != root) {
        int master = impi_coll_local_master(&g, rank);
        MPIR_Datatype_get_size_macro(sendtype, ssize);
        if (mine == g.client[root])
            return MPIDI_ICBC_impi_send(sendbuf, sendcount, sendtype, root, LOCAL_TAG_GATHER, comm,
                                        ICBC_IMPI_CTX_COLL, errflag);
        if (rank == master)
            return gather_at_master(&g, sendbuf, sendcount, sendtype, sendcount * ssize, varying,
                                    root, tag, comm, errflag);
        if (varying) {
            MPI_Aint b = sendcount * ssize;
            mpi_errno = MPIDI_ICBC_impi_send(&b, 1, MPI_AINT, master, LOCAL_TAG_GATHER, comm,
                                             ICBC_IMPI_CTX_COLL, errflag);
            MPIR_ERR_CHECK(mpi_errno);
        }
        return MPIDI_ICBC_impi_send(sendbuf, sendcount, sendtype, master, LOCAL_TAG_GATHER, comm,
                                    ICBC_IMPI_CTX_COLL, errflag);
    }

    /* the root */
    MPIR_Datatype_get_size_macro(recvtype, rsize);
    MPIR_Datatype_get_extent_macro(recvtype, rext);
#define BLOCK_COUNT(r) (varying ? counts[r] : recvcount)
#define BLOCK_AT(r) ((char *) recvbuf + (varying ? displs[r] : (r) *recvcount) * rext)
    bytes = MPL_malloc(sizeof(MPI_Aint) * g.size, MPL_MEM_COLL);
    offs = MPL_malloc(sizeof(MPI_Aint) * g.size, MPL_MEM_COLL);
    MPIR_ERR_CHKANDJUMP(bytes == NULL || offs == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    for (int r = 0; r < g.size; r++) {
        bytes[r] = BLOCK_COUNT(r) * rsize;
        if (g.client[r] != mine)
            total += bytes[r];
    }
    tmp = MPL_malloc(MPL_MAX(1, total), MPL_MEM_BUFFER);
    MPIR_ERR_CHKANDJUMP(tmp == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    /* this client's ranks straight into place, the other clients' at once */
    mpi_errno = req_list_init(&reqs, g.size);
    MPIR_ERR_CHECK(mpi_errno);
    for (int r = 0; r < g.size; r++)
        if (r != root && g.client[r] == mine) {
            mpi_errno = MPIC_Irecv(BLOCK_AT(r), BLOCK_COUNT(r), recvtype, r, LOCAL_TAG_GATHER, comm,
                                   &reqs.req[reqs.n++]);
            MPIR_ERR_CHECK(mpi_errno);
        }
    if (sendbuf != MPI_IN_PLACE) {
        mpi_errno = MPIR_Localcopy(sendbuf, sendcount, sendtype, BLOCK_AT(root), BLOCK_COUNT(root),
                                   recvtype);
        MPIR_ERR_CHECK(mpi_errno);
    }
    gathered_offsets(&g, mine, bytes, offs);
    mpi_errno = gather_from_masters(&g, tag, bytes, offs, tmp, comm, errflag);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = req_list_wait(&reqs, errflag);
    MPIR_ERR_CHECK(mpi_errno);
    for (int r = 0; r < g.size; r++)
        if (offs[r] >= 0) {
            mpi_errno = MPIR_Localcopy(tmp + offs[r], bytes[r], MPI_BYTE, BLOCK_AT(r),
                                       BLOCK_COUNT(r), recvtype);
            MPIR_ERR_CHECK(mpi_errno);
        }
#undef BLOCK_COUNT
#undef BLOCK_AT
fn_fail:
    if (reqs.req)
        req_list_wait(&reqs, errflag);
    MPL_free(tmp);
    MPL_free(offs);
    MPL_free(bytes);
    return mpi_errno;
}

int MPIDI_ICBC_impi_gather(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                           void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype, int root,
                           MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    return gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, NULL, NULL, recvtype, root,
                  comm, errflag);
}

int MPIDI_ICBC_impi_gatherv(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                            void *recvbuf, const MPI_Aint *recvcounts, const MPI_Aint *displs,
                            MPI_Datatype recvtype, int root, MPIR_Comm *comm,
                            MPIR_Errflag_t *errflag)
{
    return gather(sendbuf, sendcount, sendtype, recvbuf, 0, recvcounts, displs, recvtype, root,
                  comm, errflag);
}

/* ---- Scatter -------------------------------------------------------------- */

/* At a master of a client without the root: its client's blocks from the
 * root in one message (after their sizes, VARYING), each handed on. */
static int scatter_at_master(const impi_coll_group_t *g, void *recvbuf, MPI_Aint recvcount,
                             MPI_Datatype recvtype, int varying, int root, int tag, MPIR_Comm *comm,
                             MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS, rank = comm->rank, mine = g->client[rank];
    int n = client_size(g, mine), i = 0;
    MPI_Aint *bytes = MPL_malloc(sizeof(MPI_Aint) * n, MPL_MEM_COLL), total = 0, off = 0, rsize;
    char *tmp = NULL;
    req_list_t reqs = { NULL, 0 };

    MPIR_ERR_CHKANDJUMP(bytes == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    MPIR_Datatype_get_size_macro(recvtype, rsize);
    if (varying) {
        mpi_errno =
            MPIDI_ICBC_impi_recv(bytes, n, MPI_AINT, root, tag, comm, ICBC_IMPI_CTX_COLL, errflag);
        MPIR_ERR_CHECK(mpi_errno);
    } else {
        for (int k = 0; k < n; k++)
            bytes[k] = recvcount * rsize;
    }
    for (int k = 0; k < n; k++)
        total += bytes[k];
    tmp = MPL_malloc(MPL_MAX(1, total), MPL_MEM_BUFFER);
    MPIR_ERR_CHKANDJUMP(tmp == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    mpi_errno =
        MPIDI_ICBC_impi_recv(tmp, total, MPI_BYTE, root, tag, comm, ICBC_IMPI_CTX_COLL, errflag);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = req_list_init(&reqs, n);
    MPIR_ERR_CHECK(mpi_errno);
    for (int r = 0; r < g->size; r++) {
        if (g->client[r] != mine)
            continue;
        if (r == rank)
            mpi_errno = MPIR_Localcopy(tmp + off, bytes[i], MPI_BYTE, recvbuf, recvcount, recvtype);
        else
            mpi_errno = MPIC_Isend(tmp + off, bytes[i], MPI_BYTE, r, LOCAL_TAG_SCATTER, comm,
                                   &reqs.req[reqs.n++], errflag);
        MPIR_ERR_CHECK(mpi_errno);
        off += bytes[i++];
    }
    mpi_errno = req_list_wait(&reqs, errflag);
fn_fail:
    if (reqs.req)
        req_list_wait(&reqs, errflag);
    MPL_free(tmp);
    MPL_free(bytes);
    return mpi_errno;
}

/* Scatter and Scatterv: COUNTS and DISPLS are NULL for Scatter. */
static int scatter(const void *sendbuf, MPI_Aint sendcount, const MPI_Aint *counts,
                   const MPI_Aint *displs, MPI_Datatype sendtype, void *recvbuf, MPI_Aint recvcount,
                   MPI_Datatype recvtype, int root, MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS, rank = comm->rank;
    impi_coll_group_t g = MPIDI_ICBC_impi_group(comm);
    int mine = g.client[rank], varying = counts != NULL;
    int tag = varying ? IMPI_TAG_SCATTERV : IMPI_TAG_SCATTER;
    MPI_Aint ssize, sext, *sizes = NULL, nsizes = 0;
    char *tmp = NULL;
    req_list_t reqs = { NULL, 0 };

    if (MPIDI_ICBC_COMM(comm).impi_lam)
        return MPIDI_ICBC_lam_scatter(sendbuf, sendcount, counts, displs, sendtype, recvbuf,
                                      recvcount, recvtype, root, comm, errflag);

    if (rank != root) {
        int master = impi_coll_local_master(&g, rank);
        if (mine == g.client[root])
            return MPIDI_ICBC_impi_recv(recvbuf, recvcount, recvtype, root, LOCAL_TAG_SCATTER, comm,
                                        ICBC_IMPI_CTX_COLL, errflag);
        if (rank == master)
            return scatter_at_master(&g, recvbuf, recvcount, recvtype, varying, root, tag, comm,
                                     errflag);
        return MPIDI_ICBC_impi_recv(recvbuf, recvcount, recvtype, master, LOCAL_TAG_SCATTER, comm,
                                    ICBC_IMPI_CTX_COLL, errflag);
    }

    /* the root */
    MPIR_Datatype_get_size_macro(sendtype, ssize);
    MPIR_Datatype_get_extent_macro(sendtype, sext);
#define BLOCK_COUNT(r) (varying ? counts[r] : sendcount)
#define BLOCK_AT(r) ((const char *) sendbuf + (varying ? displs[r] : (r) *sendcount) * sext)
    {
        MPI_Aint total = 0;
        for (int r = 0; r < g.size; r++)
            if (g.client[r] != mine)
                total += BLOCK_COUNT(r) * ssize;
        tmp = MPL_malloc(MPL_MAX(1, total), MPL_MEM_BUFFER);
        sizes = MPL_malloc(sizeof(MPI_Aint) * g.size, MPL_MEM_COLL);
        MPIR_ERR_CHKANDJUMP(tmp == NULL || sizes == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    }
    mpi_errno = req_list_init(&reqs, 2 * g.size);
    MPIR_ERR_CHECK(mpi_errno);
    {
        MPI_Aint off = 0;
        for (int m = 0; m < g.size; m++) {
            MPI_Aint start = off, *my_sizes = sizes + nsizes;
            int n = 0;
            if (!other_master(&g, m, mine))
                continue;
            for (int r = 0; r < g.size; r++)
                if (g.client[r] == g.client[m]) {
                    MPI_Aint b = BLOCK_COUNT(r) * ssize;
                    mpi_errno = MPIR_Localcopy(BLOCK_AT(r), BLOCK_COUNT(r), sendtype, tmp + off, b,
                                               MPI_BYTE);
                    MPIR_ERR_CHECK(mpi_errno);
                    my_sizes[n++] = b;
                    off += b;
                }
            nsizes += n;
            if (varying) {
                mpi_errno =
                    MPIC_Isend(my_sizes, n, MPI_AINT, m, tag, comm, &reqs.req[reqs.n++], errflag);
                MPIR_ERR_CHECK(mpi_errno);
            }
            mpi_errno = MPIC_Isend(tmp + start, off - start, MPI_BYTE, m, tag, comm,
                                   &reqs.req[reqs.n++], errflag);
            MPIR_ERR_CHECK(mpi_errno);
        }
    }
    for (int r = 0; r < g.size; r++)
        if (r != root && g.client[r] == mine) {
            mpi_errno = MPIC_Isend(BLOCK_AT(r), BLOCK_COUNT(r), sendtype, r, LOCAL_TAG_SCATTER,
                                   comm, &reqs.req[reqs.n++], errflag);
            MPIR_ERR_CHECK(mpi_errno);
        }
    if (recvbuf != MPI_IN_PLACE) {
        mpi_errno = MPIR_Localcopy(BLOCK_AT(root), BLOCK_COUNT(root), sendtype, recvbuf, recvcount,
                                   recvtype);
        MPIR_ERR_CHECK(mpi_errno);
    }
#undef BLOCK_COUNT
#undef BLOCK_AT
    mpi_errno = req_list_wait(&reqs, errflag);
fn_fail:
    if (reqs.req)
        req_list_wait(&reqs, errflag);
    MPL_free(sizes);
    MPL_free(tmp);
    return mpi_errno;
}

int MPIDI_ICBC_impi_scatter(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                            void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype, int root,
                            MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    return scatter(sendbuf, sendcount, NULL, NULL, sendtype, recvbuf, recvcount, recvtype, root,
                   comm, errflag);
}

int MPIDI_ICBC_impi_scatterv(const void *sendbuf, const MPI_Aint *sendcounts,
                             const MPI_Aint *displs, MPI_Datatype sendtype, void *recvbuf,
                             MPI_Aint recvcount, MPI_Datatype recvtype, int root, MPIR_Comm *comm,
                             MPIR_Errflag_t *errflag)
{
    return scatter(sendbuf, 0, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root,
                   comm, errflag);
}

/* ---- built on them ---------------------------------------------------------- */

int MPIDI_ICBC_impi_allgather(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                              void *recvbuf, MPI_Aint recvcount, MPI_Datatype recvtype,
                              MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    int mpi_errno;
    MPI_Aint rext;

    MPIR_Datatype_get_extent_macro(recvtype, rext);
    if (sendbuf == MPI_IN_PLACE && comm->rank != 0) {
        /* this rank's block is in place: send it from there */
        sendbuf = (char *) recvbuf + comm->rank * recvcount * rext;
        sendcount = recvcount;
        sendtype = recvtype;
    }
    mpi_errno = MPIDI_ICBC_impi_gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                       0, comm, errflag);
    if (mpi_errno == MPI_SUCCESS)
        mpi_errno = MPIDI_ICBC_impi_bcast(recvbuf, comm->local_size * recvcount, recvtype, 0, comm,
                                          errflag);
    return mpi_errno;
}

int MPIDI_ICBC_impi_allgatherv(const void *sendbuf, MPI_Aint sendcount, MPI_Datatype sendtype,
                               void *recvbuf, const MPI_Aint *recvcounts, const MPI_Aint *displs,
                               MPI_Datatype recvtype, MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS, size = comm->local_size, rank = comm->rank;
    MPI_Aint rext, rsize, total = 0, off = 0;
    char *packed = NULL;

    if (MPIDI_ICBC_COMM(comm).impi_lam)
        return MPIDI_ICBC_lam_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                                         recvtype, comm, errflag);

    MPIR_Datatype_get_extent_macro(recvtype, rext);
    MPIR_Datatype_get_size_macro(recvtype, rsize);
    if (sendbuf == MPI_IN_PLACE && rank != 0) {
        sendbuf = (char *) recvbuf + displs[rank] * rext;
        sendcount = recvcounts[rank];
        sendtype = recvtype;
    }
    mpi_errno = MPIDI_ICBC_impi_gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                                        recvtype, 0, comm, errflag);
    MPIR_ERR_CHECK(mpi_errno);
    /* the blocks lie where DISPLS puts them: they go out packed, in rank order */
    for (int r = 0; r < size; r++)
        total += recvcounts[r] * rsize;
    packed = MPL_malloc(MPL_MAX(1, total), MPL_MEM_BUFFER);
    MPIR_ERR_CHKANDJUMP(packed == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    for (int r = 0; rank == 0 && r < size; r++) {
        mpi_errno = MPIR_Localcopy((char *) recvbuf + displs[r] * rext, recvcounts[r], recvtype,
                                   packed + off, recvcounts[r] * rsize, MPI_BYTE);
        MPIR_ERR_CHECK(mpi_errno);
        off += recvcounts[r] * rsize;
    }
    mpi_errno = MPIDI_ICBC_impi_bcast(packed, total, MPI_BYTE, 0, comm, errflag);
    MPIR_ERR_CHECK(mpi_errno);
    for (int r = 0; rank != 0 && r < size; r++) {
        if (r != rank || sendbuf != (char *) recvbuf + displs[r] * rext) {
            mpi_errno =
                MPIR_Localcopy(packed + off, recvcounts[r] * rsize, MPI_BYTE,
                               (char *) recvbuf + displs[r] * rext, recvcounts[r], recvtype);
            MPIR_ERR_CHECK(mpi_errno);
        }
        off += recvcounts[r] * rsize;
    }
fn_fail:
    MPL_free(packed);
    return mpi_errno;
}

int MPIDI_ICBC_impi_reduce_scatter(const void *sendbuf, void *recvbuf, const MPI_Aint *recvcounts,
                                   MPI_Datatype dt, MPI_Op op, MPIR_Comm *comm,
                                   MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS, size = comm->local_size, rank = comm->rank;
    MPI_Aint total = 0, *displs = MPL_malloc(sizeof(MPI_Aint) * size, MPL_MEM_COLL);
    void *sum_base = NULL, *sum = NULL;
    /* in place, the whole input vector is in RECVBUF */
    const void *contrib = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;

    MPIR_ERR_CHKANDJUMP(displs == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    for (int r = 0; r < size; r++) {
        displs[r] = total;
        total += recvcounts[r];
    }
    if (rank == 0) {
        sum = MPIDI_ICBC_impi_tmp_buf(total, dt, &sum_base);
        MPIR_ERR_CHKANDJUMP(sum == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    }
    mpi_errno = MPIDI_ICBC_impi_reduce(contrib, sum, total, dt, op, 0, comm, errflag);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIDI_ICBC_impi_scatterv(sum, recvcounts, displs, dt, recvbuf, recvcounts[rank], dt,
                                         0, comm, errflag);
fn_fail:
    MPL_free(sum_base);
    MPL_free(displs);
    return mpi_errno;
}

int MPIDI_ICBC_impi_reduce_scatter_block(const void *sendbuf, void *recvbuf, MPI_Aint recvcount,
                                         MPI_Datatype dt, MPI_Op op, MPIR_Comm *comm,
                                         MPIR_Errflag_t *errflag)
{
    int mpi_errno, size = comm->local_size;
    MPI_Aint *counts = MPL_malloc(sizeof(MPI_Aint) * size, MPL_MEM_COLL);

    if (counts == NULL)
        return MPI_ERR_NO_MEM;
    for (int r = 0; r < size; r++)
        counts[r] = recvcount;
    mpi_errno = MPIDI_ICBC_impi_reduce_scatter(sendbuf, recvbuf, counts, dt, op, comm, errflag);
    MPL_free(counts);
    return mpi_errno;
}
