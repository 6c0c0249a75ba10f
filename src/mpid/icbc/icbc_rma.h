/*
 * RMA: MPIDIG's active-message implementation (the am_fallback header), except
 * for accumulate-family operations whose target is this process itself.
 *
 * With one process per node, ch4 sends every accumulate through the netmod
 * (MPIDI_WINATTR_ACCU_NO_SHM), so that all updates of a window are applied by
 * the one process that owns it. MPIDIG then hands an update of the process's
 * own window to the shared-memory active-message queue of that same process,
 * which is applied only when that queue is next polled, after the netmod.
 * An update another process sends later, as a consequence of the first
 * (e.g. an MCS lock: "next = none" on my own window, then swap the tail at
 * rank 0, whose new owner writes "next = me" into my window), can be
 * applied first and then be overwritten by the older one: the lock is lost
 * and every process waits for ever.
 *
 * Here such an operation is applied at once, in the call, by the process
 * that owns the memory (the shared-memory module's path for its own rank).
 * That is atomic with the updates MPIDIG applies on behalf of others: those
 * run in this process's progress, under the same VCI lock. A window whose
 * memory is shared with other processes of the node keeps MPIDIG's path:
 * its atomicity is the shared-memory mutex's business.
 */
#ifndef ICBC_RMA_H_INCLUDED
#define ICBC_RMA_H_INCLUDED

#define MPIDI_NM_mpi_accumulate MPIDI_ICBC_am_accumulate
#define MPIDI_NM_mpi_raccumulate MPIDI_ICBC_am_raccumulate
#define MPIDI_NM_mpi_get_accumulate MPIDI_ICBC_am_get_accumulate
#define MPIDI_NM_mpi_rget_accumulate MPIDI_ICBC_am_rget_accumulate
#define MPIDI_NM_mpi_fetch_and_op MPIDI_ICBC_am_fetch_and_op
#define MPIDI_NM_mpi_compare_and_swap MPIDI_ICBC_am_compare_and_swap
#define MPIDI_NM_mpi_win_complete MPIDI_ICBC_am_win_complete /* icbc_win.h */
#include "netmod_am_fallback_rma.h"
#undef MPIDI_NM_mpi_accumulate
#undef MPIDI_NM_mpi_raccumulate
#undef MPIDI_NM_mpi_get_accumulate
#undef MPIDI_NM_mpi_rget_accumulate
#undef MPIDI_NM_mpi_fetch_and_op
#undef MPIDI_NM_mpi_compare_and_swap
#undef MPIDI_NM_mpi_win_complete

#ifdef MPIDI_CH4_DIRECT_NETMOD
#define MPIDI_ICBC_RMA_TO_SELF(win, winattr, target_rank) 0
#else
#define MPIDI_ICBC_RMA_TO_SELF(win, winattr, target_rank)                                          \
    (!((winattr) &MPIDI_WINATTR_SHM_ALLOCATED) && (target_rank) == (win)->comm_ptr->rank)
#endif

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_accumulate(const void *origin_addr, int origin_count,
                                                     MPI_Datatype origin_datatype, int target_rank,
                                                     MPI_Aint target_disp, int target_count,
                                                     MPI_Datatype target_datatype, MPI_Op op,
                                                     MPIR_Win *win, MPIDI_av_entry_t *addr,
                                                     MPIDI_winattr_t winattr)
{
#ifndef MPIDI_CH4_DIRECT_NETMOD
    if (MPIDI_ICBC_RMA_TO_SELF(win, winattr, target_rank))
        return MPIDI_SHM_mpi_accumulate(origin_addr, origin_count, origin_datatype, target_rank,
                                        target_disp, target_count, target_datatype, op, win,
                                        winattr);
#endif
    return MPIDI_ICBC_am_accumulate(origin_addr, origin_count, origin_datatype, target_rank,
                                    target_disp, target_count, target_datatype, op, win, addr,
                                    winattr);
}

MPL_STATIC_INLINE_PREFIX int
MPIDI_NM_mpi_raccumulate(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype,
                         int target_rank, MPI_Aint target_disp, int target_count,
                         MPI_Datatype target_datatype, MPI_Op op, MPIR_Win *win,
                         MPIDI_av_entry_t *addr, MPIDI_winattr_t winattr, MPIR_Request **request)
{
#ifndef MPIDI_CH4_DIRECT_NETMOD
    if (MPIDI_ICBC_RMA_TO_SELF(win, winattr, target_rank))
        return MPIDI_SHM_mpi_raccumulate(origin_addr, origin_count, origin_datatype, target_rank,
                                         target_disp, target_count, target_datatype, op, win,
                                         winattr, request);
#endif
    return MPIDI_ICBC_am_raccumulate(origin_addr, origin_count, origin_datatype, target_rank,
                                     target_disp, target_count, target_datatype, op, win, addr,
                                     winattr, request);
}

MPL_STATIC_INLINE_PREFIX int
MPIDI_NM_mpi_get_accumulate(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype,
                            void *result_addr, int result_count, MPI_Datatype result_datatype,
                            int target_rank, MPI_Aint target_disp, int target_count,
                            MPI_Datatype target_datatype, MPI_Op op, MPIR_Win *win,
                            MPIDI_av_entry_t *addr, MPIDI_winattr_t winattr)
{
#ifndef MPIDI_CH4_DIRECT_NETMOD
    if (MPIDI_ICBC_RMA_TO_SELF(win, winattr, target_rank))
        return MPIDI_SHM_mpi_get_accumulate(origin_addr, origin_count, origin_datatype, result_addr,
                                            result_count, result_datatype, target_rank, target_disp,
                                            target_count, target_datatype, op, win, winattr);
#endif
    return MPIDI_ICBC_am_get_accumulate(origin_addr, origin_count, origin_datatype, result_addr,
                                        result_count, result_datatype, target_rank, target_disp,
                                        target_count, target_datatype, op, win, addr, winattr);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_rget_accumulate(
    const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, void *result_addr,
    int result_count, MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp,
    int target_count, MPI_Datatype target_datatype, MPI_Op op, MPIR_Win *win,
    MPIDI_av_entry_t *addr, MPIDI_winattr_t winattr, MPIR_Request **request)
{
#ifndef MPIDI_CH4_DIRECT_NETMOD
    if (MPIDI_ICBC_RMA_TO_SELF(win, winattr, target_rank))
        return MPIDI_SHM_mpi_rget_accumulate(
            origin_addr, origin_count, origin_datatype, result_addr, result_count, result_datatype,
            target_rank, target_disp, target_count, target_datatype, op, win, winattr, request);
#endif
    return MPIDI_ICBC_am_rget_accumulate(
        origin_addr, origin_count, origin_datatype, result_addr, result_count, result_datatype,
        target_rank, target_disp, target_count, target_datatype, op, win, addr, winattr, request);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_mpi_fetch_and_op(const void *origin_addr, void *result_addr,
                                                       MPI_Datatype datatype, int target_rank,
                                                       MPI_Aint target_disp, MPI_Op op,
                                                       MPIR_Win *win, MPIDI_av_entry_t *addr,
                                                       MPIDI_winattr_t winattr)
{
#ifndef MPIDI_CH4_DIRECT_NETMOD
    if (MPIDI_ICBC_RMA_TO_SELF(win, winattr, target_rank))
        return MPIDI_SHM_mpi_fetch_and_op(origin_addr, result_addr, datatype, target_rank,
                                          target_disp, op, win, winattr);
#endif
    return MPIDI_ICBC_am_fetch_and_op(origin_addr, result_addr, datatype, target_rank, target_disp,
                                      op, win, addr, winattr);
}

MPL_STATIC_INLINE_PREFIX int
MPIDI_NM_mpi_compare_and_swap(const void *origin_addr, const void *compare_addr, void *result_addr,
                              MPI_Datatype datatype, int target_rank, MPI_Aint target_disp,
                              MPIR_Win *win, MPIDI_av_entry_t *addr, MPIDI_winattr_t winattr)
{
#ifndef MPIDI_CH4_DIRECT_NETMOD
    if (MPIDI_ICBC_RMA_TO_SELF(win, winattr, target_rank))
        return MPIDI_SHM_mpi_compare_and_swap(origin_addr, compare_addr, result_addr, datatype,
                                              target_rank, target_disp, win, winattr);
#endif
    return MPIDI_ICBC_am_compare_and_swap(origin_addr, compare_addr, result_addr, datatype,
                                          target_rank, target_disp, win, addr, winattr);
}

#endif /* ICBC_RMA_H_INCLUDED */
