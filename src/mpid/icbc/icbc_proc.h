/* Process identity queries of the netmod API. */
#ifndef ICBC_PROC_H_INCLUDED
#define ICBC_PROC_H_INCLUDED

#include "icbc_impl.h"

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_rank_is_local(int rank, MPIR_Comm *comm)
{
    return MPIDIU_rank_is_local(rank, comm);
}

/* Global process id = (address-vector table, index in it); the local group
 * of an intercommunicator is looked up in its local map. */
MPL_STATIC_INLINE_PREFIX int MPIDI_NM_comm_get_gpid(MPIR_Comm *comm_ptr, int idx,
                                                    uint64_t *gpid_ptr, bool is_remote)
{
    int lpid, avtid;

    if (comm_ptr->comm_kind == MPIR_COMM_KIND__INTERCOMM && !is_remote)
        MPIDIU_comm_rank_to_pid_local(comm_ptr, idx, &lpid, &avtid);
    else
        MPIDIU_comm_rank_to_pid(comm_ptr, idx, &lpid, &avtid);
    *gpid_ptr = MPIDIU_GPID_CREATE(avtid, lpid);
    return MPI_SUCCESS;
}

#endif /* ICBC_PROC_H_INCLUDED */
