/*
 * Collectives across IMPI clients (docs/impi.md): the barrier on
 * MPI_COMM_WORLD that IMPI requires of MPI_Finalize (LAM/MPI's
 * IMPI_Finalize), with the IMPI algorithm: local phase inside this client,
 * the clients' masters among themselves (src/impi/coll.c: linear up to
 * MAXLINEAR, a tree above; tag 110 on the world's collective context id,
 * 1), local phase again.
 *
 * MPI_Finalize deletes the attributes of MPI_COMM_SELF before anything else
 * is torn down, so the barrier runs in the delete callback of an attribute
 * the netmod puts on MPI_COMM_SELF when it is committed, while
 * MPI_COMM_WORLD still carries messages.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_impi.h"
#include "impi/impi_coll.h"

static int finalize_keyval = MPI_KEYVAL_INVALID;

/* The global phase of the barrier on MPI_COMM_WORLD (this process a master). */
static int world_barrier_global(void)
{
    int mpi_errno = MPI_SUCCESS;
    const impi_layout_t *l = &MPIDI_ICBC_impi.layout;
    MPIR_Errflag_t errflag = MPIR_ERR_NONE;
    impi_coll_step_t steps[IMPI_COLL_STEPS_MAX];
    int *client = MPL_malloc(sizeof(int) * l->nprocs_total, MPL_MEM_OTHER);
    int n;

    MPIR_ERR_CHKANDJUMP(client == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    for (int h = 0; h < l->nhosts_total; h++)
        for (uint32_t k = 0; k < l->hosts[h].nprocs; k++)
            client[l->hosts[h].first_rank + (int) k] = l->hosts[h].client;
    impi_coll_group_t g = { l->nprocs_total, client, l->coll_maxlinear };
    n = impi_coll_barrier(&g, MPIR_Process.rank, steps);
    for (int k = 0; k < n && mpi_errno == MPI_SUCCESS; k++) {
        if (steps[k].op == IMPI_COLL_SEND)
            mpi_errno = MPIC_Send(NULL, 0, MPI_BYTE, steps[k].peer, IMPI_TAG_BARRIER,
                                  MPIR_Process.comm_world, &errflag);
        else
            mpi_errno = MPIC_Recv(NULL, 0, MPI_BYTE, steps[k].peer, IMPI_TAG_BARRIER,
                                  MPIR_Process.comm_world, MPI_STATUS_IGNORE, &errflag);
    }
fn_fail:
    MPL_free(client);
    return mpi_errno;
}

static int finalize_barrier(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    int mpi_errno;

    /* local phase: every process of this client is in MPI_Finalize */
    mpi_errno = MPIR_pmi_barrier();
    if (mpi_errno == MPI_SUCCESS && MPIDI_ICBC_impi.pmi_rank == 0)
        mpi_errno = world_barrier_global();
    if (mpi_errno != MPI_SUCCESS)
        icbc_error("the IMPI barrier of MPI_Finalize failed; the other clients may wait for "
                   "this one");
    /* and again: none leaves before every client has arrived */
    if (MPIR_pmi_barrier() != MPI_SUCCESS && mpi_errno == MPI_SUCCESS)
        mpi_errno = MPI_ERR_OTHER;
    return mpi_errno;
}

int MPIDI_ICBC_impi_comm_committed(MPIR_Comm *comm)
{
    int mpi_errno = MPI_SUCCESS;
    MPII_Keyval *kv;

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
