/*
 * Window synchronisation: MPIDIG's, and for MPI_Win_complete the
 * confirmation that its notices reached the targets of other clusters.
 *
 * MPIDIG ends an access epoch by sending each target a COMPLETE notice and
 * returning. Over one network that notice reaches a target before anything
 * the target learns later from third parties; across clusters it travels
 * through one router while a barrier's messages may come through another,
 * so a target's MPI_Win_test after a barrier that followed MPI_Win_complete
 * could still see the epoch open (mpi4py's testStartCompletePostTest saw it
 * under policy static). Here MPI_Win_complete returns only once every
 * target on a routed or TCP path has confirmed that all this process sent
 * it before has arrived (MPIDI_ICBC_xfer_sync: one round trip per such
 * target, in parallel).
 */
#ifndef ICBC_WIN_H_INCLUDED
#define ICBC_WIN_H_INCLUDED

#include "icbc_impl.h"
#include "icbc_xfer.h"

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_win_complete(MPIR_Win *win)
{
    int mpi_errno = MPI_SUCCESS;
    MPIR_Group *group = MPIDIG_WIN(win, sync).sc.group;
    int *ranks = NULL, n = 0;

    if (MPIDI_ICBC_global.xpath && group != NULL) {
        /* the epoch's group, as ranks of the window's communicator: MPIDIG
         * releases it while it completes the epoch */
        ranks = MPL_malloc(sizeof(int) * group->size, MPL_MEM_RMA);
        MPIR_ERR_CHKANDJUMP(ranks == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
        mpi_errno = MPIDIG_fill_ranks_in_win_grp(win, group, ranks);
        MPIR_ERR_CHECK(mpi_errno);
        n = group->size;
    }
    mpi_errno = MPIDI_ICBC_am_win_complete(win);
    MPIR_ERR_CHECK(mpi_errno);
    if (n > 0)
        mpi_errno = MPIDI_ICBC_xfer_sync(win->comm_ptr, ranks, n);
fn_fail:
    MPL_free(ranks);
    return mpi_errno;
}

#endif /* ICBC_WIN_H_INCLUDED */
