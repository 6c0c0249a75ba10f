/*
 * Collectives on communicators that span several IMPI clients
 * (docs/impi.md): Barrier, Bcast, Reduce and Allreduce with the IMPI
 * algorithms, so that they meet another MPI's (LAM/MPI 7.1.4) on the wire:
 *
 *   local phase   inside this client, between its ranks of the communicator
 *                 and their master (its lowest rank there), tags of our own
 *   global phase  the clients' masters (src/impi/coll.c: linear up to
 *                 MAXLINEAR, a tree above) with IMPI's tags: 110 barrier,
 *                 120 bcast on the collective context id, 190 reduce on the
 *                 point-to-point one, as LAM puts them
 *   local phase   again (barrier, bcast)
 *
 * Reduce with a commutative operation combines inside each client first; a
 * non-commutative one is combined at the root in rank order. Allreduce is
 * Reduce to rank 0 and Bcast from it, as LAM composes it. MPICH's ch4 hands
 * these four to the netmod for a communicator that spans clients
 * (MPIDI_NM_COLL_TAKES, contrib/mpich/patches/0005); the other collectives
 * run MPICH's algorithms over IMPI point-to-point (between ICBC clients
 * they work; LAM has no others across clients).
 *
 * MPI_Finalize begins with this barrier on MPI_COMM_WORLD, as IMPI requires
 * (LAM/MPI's IMPI_Finalize): MPI_Finalize deletes the attributes of
 * MPI_COMM_SELF before anything else is torn down, so it runs in the delete
 * callback of an attribute the netmod puts on MPI_COMM_SELF when it is
 * committed, while MPI_COMM_WORLD still carries messages.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_impi.h"
#include "icbc_impi_coll.h"

static int finalize_keyval = MPI_KEYVAL_INVALID;

/* ---- which communicators span clients ------------------------------------ */

static int comm_spans(MPIR_Comm *comm)
{
    int first = -1;

    MPIDI_ICBC_COMM(comm).impi_client = NULL;
    MPIDI_ICBC_COMM(comm).impi_spans = 0;
    MPIDI_ICBC_COMM(comm).impi_lam = 0;
    if (!MPIDI_ICBC_impi.active || comm->comm_kind != MPIR_COMM_KIND__INTRACOMM)
        return MPI_SUCCESS;
    int *client = MPL_malloc(sizeof(int) * comm->local_size, MPL_MEM_COMM);
    if (client == NULL)
        return MPI_ERR_NO_MEM;
    for (int r = 0; r < comm->local_size; r++) {
        int host;
        icbc_peer_t *peer = MPIDI_ICBC_comm_rank_to_peer(comm, r);
        MPIDI_ICBC_impi_where(peer ? peer->rank : MPIR_Process.rank, &client[r], &host);
        /* a client that gave no representation of its own is LAM/MPI */
        if (!(MPIDI_ICBC_impi.layout.datarep_mask & (1u << client[r])))
            MPIDI_ICBC_COMM(comm).impi_lam = 1;
        if (first < 0)
            first = client[r];
        else if (client[r] != first)
            MPIDI_ICBC_COMM(comm).impi_spans = 1;
    }
    if (MPIDI_ICBC_COMM(comm).impi_spans)
        MPIDI_ICBC_COMM(comm).impi_client = client;
    else
        MPL_free(client);
    return MPI_SUCCESS;
}

void MPIDI_ICBC_impi_comm_freed(MPIR_Comm *comm)
{
    MPL_free(MPIDI_ICBC_COMM(comm).impi_client);
    MPIDI_ICBC_COMM(comm).impi_client = NULL;
    MPIDI_ICBC_COMM(comm).impi_spans = 0;
    MPIDI_ICBC_COMM(comm).impi_lam = 0;
}

impi_coll_group_t MPIDI_ICBC_impi_group(MPIR_Comm *comm)
{
    impi_coll_group_t g = { comm->local_size, MPIDI_ICBC_COMM(comm).impi_client,
                            MPIDI_ICBC_impi.layout.coll_maxlinear };
    return g;
}

/* ---- messages of the phases ----------------------------------------------- */

/* The context offset of CTX (ICBC_IMPI_CTX_*) in MPICH's terms on COMM. */
static int ctx_offset(MPIR_Comm *comm, int ctx)
{
    if (ctx == ICBC_IMPI_CTX_LAM) /* LAM's processes switch contexts now */
        MPIDI_ICBC_impi_lam_degrade(comm->context_id);
    return ctx == ICBC_IMPI_CTX_COLL    ? MPIR_CONTEXT_INTRA_COLL
           : ctx == ICBC_IMPI_CTX_PT2PT ? MPIR_CONTEXT_INTRA_PT2PT
                                        : ICBC_CTX_OFFSET_LAM;
}

int MPIDI_ICBC_impi_isend(const void *buf, MPI_Aint count, MPI_Datatype dt, int dest, int tag,
                          MPIR_Comm *comm, int ctx, MPIR_Request **req, MPIR_Errflag_t *errflag)
{
    /* MPIC marks the messages of a collective that failed elsewhere in its
     * tag; another MPI would not know that mark, so only the collective
     * context (ICBC clients among themselves, local phases) carries it */
    if (ctx == ICBC_IMPI_CTX_COLL)
        return MPIC_Isend(buf, count, dt, dest, tag, comm, req, errflag);
    *req = NULL;
    return MPID_Isend(buf, count, dt, dest, tag, comm, ctx_offset(comm, ctx), req);
}

int MPIDI_ICBC_impi_irecv(void *buf, MPI_Aint count, MPI_Datatype dt, int src, int tag,
                          MPIR_Comm *comm, int ctx, MPIR_Request **req)
{
    if (ctx == ICBC_IMPI_CTX_COLL)
        return MPIC_Irecv(buf, count, dt, src, tag, comm, req);
    *req = NULL;
    return MPID_Irecv(buf, count, dt, src, tag, comm, ctx_offset(comm, ctx), req);
}

int MPIDI_ICBC_impi_send(const void *buf, MPI_Aint count, MPI_Datatype dt, int dest, int tag,
                         MPIR_Comm *comm, int ctx, MPIR_Errflag_t *errflag)
{
    int mpi_errno;
    MPIR_Request *req = NULL;

    if (ctx == ICBC_IMPI_CTX_COLL)
        return MPIC_Send(buf, count, dt, dest, tag, comm, errflag);
    mpi_errno = MPID_Send(buf, count, dt, dest, tag, comm, ctx_offset(comm, ctx), &req);
    if (mpi_errno == MPI_SUCCESS && req)
        mpi_errno = MPIDI_ICBC_impi_waitall(&req, 1, errflag);
    return mpi_errno;
}

int MPIDI_ICBC_impi_recv(void *buf, MPI_Aint count, MPI_Datatype dt, int src, int tag,
                         MPIR_Comm *comm, int ctx, MPIR_Errflag_t *errflag)
{
    int mpi_errno;
    MPIR_Request *req = NULL;

    if (ctx == ICBC_IMPI_CTX_COLL)
        return MPIC_Recv(buf, count, dt, src, tag, comm, MPI_STATUS_IGNORE, errflag);
    mpi_errno =
        MPID_Recv(buf, count, dt, src, tag, comm, ctx_offset(comm, ctx), MPI_STATUS_IGNORE, &req);
    if (mpi_errno == MPI_SUCCESS && req)
        mpi_errno = MPIDI_ICBC_impi_waitall(&req, 1, errflag);
    return mpi_errno;
}

int MPIDI_ICBC_impi_waitall(MPIR_Request **req, int n, MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS;

    /* each one, so that every started request is waited for and freed
     * whatever another one ends with */
    for (int k = 0; k < n; k++) {
        if (req[k] == NULL)
            continue;
        int err = MPIC_Wait(req[k], errflag);
        if (err == MPI_SUCCESS && req[k]->status.MPI_ERROR != MPI_SUCCESS)
            err = req[k]->status.MPI_ERROR;
        if (mpi_errno == MPI_SUCCESS)
            mpi_errno = err;
        MPIR_Request_free(req[k]);
        req[k] = NULL;
    }
    return mpi_errno;
}

int MPIDI_ICBC_impi_finish(MPIR_Request **req, int n, int mpi_errno, MPIR_Errflag_t *errflag)
{
    int err = MPIDI_ICBC_impi_waitall(req, n, errflag);

    MPL_free(req);
    return mpi_errno != MPI_SUCCESS ? mpi_errno : err;
}

void *MPIDI_ICBC_impi_tmp_buf(MPI_Aint count, MPI_Datatype dt, void **base)
{
    MPI_Aint true_lb, true_extent, extent;

    MPIR_Type_get_true_extent_impl(dt, &true_lb, &true_extent);
    MPIR_Datatype_get_extent_macro(dt, extent);
    *base = MPL_malloc(MPL_MAX(1, count * MPL_MAX(extent, true_extent)), MPL_MEM_BUFFER);
    return *base ? (char *) *base - true_lb : NULL;
}

/* ---- the collectives ---------------------------------------------------- */

int MPIDI_ICBC_impi_barrier(MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS;
    impi_coll_group_t g = MPIDI_ICBC_impi_group(comm);
    int rank = comm->rank, master = impi_coll_local_master(&g, rank), n;
    impi_coll_step_t steps[IMPI_COLL_STEPS_MAX];

    if (rank != master) {
        mpi_errno = MPIDI_ICBC_impi_send(NULL, 0, MPI_BYTE, master, LOCAL_TAG_BARRIER, comm,
                                         ICBC_IMPI_CTX_COLL, errflag);
        MPIR_ERR_CHECK(mpi_errno);
        return MPIDI_ICBC_impi_recv(NULL, 0, MPI_BYTE, master, LOCAL_TAG_BARRIER, comm,
                                    ICBC_IMPI_CTX_COLL, errflag);
    }
    for (int r = 0; r < g.size; r++)
        if (r != rank && g.client[r] == g.client[rank]) {
            mpi_errno = MPIDI_ICBC_impi_recv(NULL, 0, MPI_BYTE, r, LOCAL_TAG_BARRIER, comm,
                                             ICBC_IMPI_CTX_COLL, errflag);
            MPIR_ERR_CHECK(mpi_errno);
        }
    n = impi_coll_barrier(&g, rank, steps);
    for (int k = 0; k < n; k++) {
        if (steps[k].op == IMPI_COLL_SEND)
            mpi_errno = MPIDI_ICBC_impi_send(NULL, 0, MPI_BYTE, steps[k].peer, IMPI_TAG_BARRIER,
                                             comm, ICBC_IMPI_CTX_COLL, errflag);
        else
            mpi_errno = MPIDI_ICBC_impi_recv(NULL, 0, MPI_BYTE, steps[k].peer, IMPI_TAG_BARRIER,
                                             comm, ICBC_IMPI_CTX_COLL, errflag);
        MPIR_ERR_CHECK(mpi_errno);
    }
    for (int r = 0; r < g.size; r++)
        if (r != rank && g.client[r] == g.client[rank]) {
            mpi_errno = MPIDI_ICBC_impi_send(NULL, 0, MPI_BYTE, r, LOCAL_TAG_BARRIER, comm,
                                             ICBC_IMPI_CTX_COLL, errflag);
            MPIR_ERR_CHECK(mpi_errno);
        }
fn_fail:
    return mpi_errno;
}

int MPIDI_ICBC_impi_bcast(void *buf, MPI_Aint count, MPI_Datatype dt, int root, MPIR_Comm *comm,
                          MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS;
    impi_coll_group_t g = MPIDI_ICBC_impi_group(comm);
    int rank = comm->rank, mine = g.client[rank], n;
    /* the root stands in for its client's master */
    int local_root = mine == g.client[root] ? root : impi_coll_local_master(&g, rank);
    impi_coll_step_t steps[IMPI_COLL_STEPS_MAX];

    if (rank != local_root)
        return MPIDI_ICBC_impi_recv(buf, count, dt, local_root, LOCAL_TAG_BCAST, comm,
                                    ICBC_IMPI_CTX_COLL, errflag);
    n = impi_coll_bcast(&g, rank, root, steps);
    for (int k = 0; k < n; k++) {
        if (steps[k].op == IMPI_COLL_SEND)
            mpi_errno = MPIDI_ICBC_impi_send(buf, count, dt, steps[k].peer, IMPI_TAG_BCAST, comm,
                                             ICBC_IMPI_CTX_COLL, errflag);
        else
            mpi_errno = MPIDI_ICBC_impi_recv(buf, count, dt, steps[k].peer, IMPI_TAG_BCAST, comm,
                                             ICBC_IMPI_CTX_COLL, errflag);
        MPIR_ERR_CHECK(mpi_errno);
    }
    for (int r = 0; r < g.size; r++)
        if (r != rank && g.client[r] == mine) {
            mpi_errno = MPIDI_ICBC_impi_send(buf, count, dt, r, LOCAL_TAG_BCAST, comm,
                                             ICBC_IMPI_CTX_COLL, errflag);
            MPIR_ERR_CHECK(mpi_errno);
        }
fn_fail:
    return mpi_errno;
}

/* A non-commutative operation: every contribution to the root, combined
 * there in rank order. */
static int reduce_ordered(const void *contrib, void *recvbuf, MPI_Aint count, MPI_Datatype dt,
                          MPI_Op op, int root, MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS, size = comm->local_size;
    void *base = NULL, *in;

    if (comm->rank != root)
        return MPIDI_ICBC_impi_send(contrib, count, dt, root, LOCAL_TAG_REDUCE, comm,
                                    ICBC_IMPI_CTX_COLL, errflag);
    in = MPIDI_ICBC_impi_tmp_buf(count, dt, &base);
    MPIR_ERR_CHKANDJUMP(in == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    /* the root's own contribution must not be overwritten before its turn */
    if (contrib == recvbuf && root != size - 1) {
        void *mine_base = NULL, *mine = MPIDI_ICBC_impi_tmp_buf(count, dt, &mine_base);
        MPIR_ERR_CHKANDJUMP(mine == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
        mpi_errno = MPIR_Localcopy(recvbuf, count, dt, mine, count, dt);
        if (mpi_errno == MPI_SUCCESS)
            mpi_errno = reduce_ordered(mine, recvbuf, count, dt, op, root, comm, errflag);
        MPL_free(mine_base);
        goto fn_fail;
    }
    /* recvbuf = x[0] op (x[1] op (... x[size-1])), from the last rank down */
    for (int r = size - 1; r >= 0; r--) {
        const void *x = contrib;
        if (r != root) {
            mpi_errno = MPIDI_ICBC_impi_recv(in, count, dt, r, LOCAL_TAG_REDUCE, comm,
                                             ICBC_IMPI_CTX_COLL, errflag);
            MPIR_ERR_CHECK(mpi_errno);
            x = in;
        }
        if (r == size - 1)
            mpi_errno =
                x == recvbuf ? MPI_SUCCESS : MPIR_Localcopy(x, count, dt, recvbuf, count, dt);
        else
            mpi_errno = MPIR_Reduce_local(x, recvbuf, count, dt, op);
        MPIR_ERR_CHECK(mpi_errno);
    }
fn_fail:
    MPL_free(base);
    return mpi_errno;
}

int MPIDI_ICBC_impi_reduce(const void *sendbuf, void *recvbuf, MPI_Aint count, MPI_Datatype dt,
                           MPI_Op op, int root, MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    int mpi_errno = MPI_SUCCESS;
    impi_coll_group_t g = MPIDI_ICBC_impi_group(comm);
    int rank = comm->rank, mine = g.client[rank], n;
    int target = mine == g.client[root] ? root : impi_coll_local_master(&g, rank);
    const void *contrib = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    void *acc_base = NULL, *in_base = NULL, *acc, *in = NULL;
    impi_coll_step_t steps[IMPI_COLL_STEPS_MAX];

    if (!MPIR_Op_is_commutative(op))
        return reduce_ordered(contrib, recvbuf, count, dt, op, root, comm, errflag);
    /* local phase: this client's part to its target (the root, or the master) */
    if (rank != target)
        return MPIDI_ICBC_impi_send(contrib, count, dt, target, LOCAL_TAG_REDUCE, comm,
                                    ICBC_IMPI_CTX_COLL, errflag);
    acc = rank == root ? recvbuf : MPIDI_ICBC_impi_tmp_buf(count, dt, &acc_base);
    in = MPIDI_ICBC_impi_tmp_buf(count, dt, &in_base);
    MPIR_ERR_CHKANDJUMP(acc == NULL || in == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    if (contrib != acc) {
        mpi_errno = MPIR_Localcopy(contrib, count, dt, acc, count, dt);
        MPIR_ERR_CHECK(mpi_errno);
    }
    for (int r = 0; r < g.size; r++)
        if (r != rank && g.client[r] == mine) {
            mpi_errno = MPIDI_ICBC_impi_recv(in, count, dt, r, LOCAL_TAG_REDUCE, comm,
                                             ICBC_IMPI_CTX_COLL, errflag);
            MPIR_ERR_CHECK(mpi_errno);
            mpi_errno = MPIR_Reduce_local(in, acc, count, dt, op);
            MPIR_ERR_CHECK(mpi_errno);
        }
    /* global phase, on the point-to-point context as LAM sends it */
    n = impi_coll_reduce(&g, rank, root, steps);
    for (int k = 0; k < n; k++) {
        if (steps[k].op == IMPI_COLL_SEND) {
            mpi_errno = MPIDI_ICBC_impi_send(acc, count, dt, steps[k].peer, IMPI_TAG_REDUCE, comm,
                                             ICBC_IMPI_CTX_PT2PT, errflag);
        } else {
            mpi_errno = MPIDI_ICBC_impi_recv(in, count, dt, steps[k].peer, IMPI_TAG_REDUCE, comm,
                                             ICBC_IMPI_CTX_PT2PT, errflag);
            if (mpi_errno == MPI_SUCCESS && steps[k].op == IMPI_COLL_RECV_REDUCE)
                mpi_errno = MPIR_Reduce_local(in, acc, count, dt, op);
        }
        MPIR_ERR_CHECK(mpi_errno);
    }
fn_fail:
    MPL_free(acc_base);
    MPL_free(in_base);
    return mpi_errno;
}

int MPIDI_ICBC_impi_allreduce(const void *sendbuf, void *recvbuf, MPI_Aint count, MPI_Datatype dt,
                              MPI_Op op, MPIR_Comm *comm, MPIR_Errflag_t *errflag)
{
    int mpi_errno;
    /* Reduce to rank 0, then Bcast from it, as LAM composes Allreduce */
    const void *contrib = sendbuf == MPI_IN_PLACE && comm->rank != 0 ? recvbuf : sendbuf;

    mpi_errno = MPIDI_ICBC_impi_reduce(contrib, recvbuf, count, dt, op, 0, comm, errflag);
    if (mpi_errno == MPI_SUCCESS)
        mpi_errno = MPIDI_ICBC_impi_bcast(recvbuf, count, dt, 0, comm, errflag);
    return mpi_errno;
}

/* ---- MPI_Finalize --------------------------------------------------------- */

static int finalize_barrier(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    MPIR_Errflag_t errflag = MPIR_ERR_NONE;
    int mpi_errno;

    if (!MPIDI_ICBC_COMM(MPIR_Process.comm_world).impi_spans)
        return MPI_SUCCESS; /* one client: no other to meet */
    mpi_errno = MPIDI_ICBC_impi_barrier(MPIR_Process.comm_world, &errflag);

    if (mpi_errno != MPI_SUCCESS)
        icbc_error("the IMPI barrier of MPI_Finalize failed; the other clients may wait for "
                   "this one");
    return mpi_errno;
}

int MPIDI_ICBC_impi_comm_committed(MPIR_Comm *comm)
{
    int mpi_errno = MPI_SUCCESS;
    MPII_Keyval *kv;

    mpi_errno = comm_spans(comm);
    MPIR_ERR_CHECK(mpi_errno);
    if (comm == MPIR_Process.comm_world) {
        mpi_errno = MPIDI_ICBC_impi_world_attrs(comm);
        MPIR_ERR_CHECK(mpi_errno);
    }
    if (!MPIDI_ICBC_impi.active || comm != MPIR_Process.comm_self ||
        finalize_keyval != MPI_KEYVAL_INVALID)
        return MPI_SUCCESS;
    mpi_errno = MPIR_Comm_create_keyval_impl(MPI_COMM_NULL_COPY_FN, finalize_barrier,
                                             &finalize_keyval, NULL);
    MPIR_ERR_CHECK(mpi_errno);
    MPII_Keyval_get_ptr(finalize_keyval, kv);
    mpi_errno = MPIR_Comm_set_attr_impl(comm, kv, NULL, MPIR_ATTR_PTR);
    MPIR_ERR_CHECK(mpi_errno);
fn_fail:
    return mpi_errno;
}
