/*
 * Out-of-line netmod API that icbc hands to MPIDIG (windows, partitioned
 * requests, memory) or that needs no netmod work (object hooks). Dynamic
 * processes fail with a clear error: the icbc peer table spans one world.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_impi.h"

int MPIDI_ICBC_comm_set_hints(MPIR_Comm *comm_ptr, MPIR_Info *info)
{
    return MPI_SUCCESS;
}

int MPIDI_ICBC_mpi_comm_commit_pre_hook(MPIR_Comm *comm)
{
    return MPI_SUCCESS;
}

int MPIDI_ICBC_mpi_comm_commit_post_hook(MPIR_Comm *comm)
{
    return MPIDI_ICBC_impi_comm_committed(comm);
}

int MPIDI_ICBC_mpi_comm_free_hook(MPIR_Comm *comm)
{
    MPIDI_ICBC_impi_comm_freed(comm);
    return MPI_SUCCESS;
}

int MPIDI_ICBC_mpi_type_commit_hook(MPIR_Datatype *datatype_p)
{
    return MPI_SUCCESS;
}

int MPIDI_ICBC_mpi_type_free_hook(MPIR_Datatype *datatype_p)
{
    return MPI_SUCCESS;
}

int MPIDI_ICBC_mpi_op_commit_hook(MPIR_Op *op_p)
{
    return MPI_SUCCESS;
}

int MPIDI_ICBC_mpi_op_free_hook(MPIR_Op *op_p)
{
    return MPI_SUCCESS;
}

/* Dynamic processes */

static int no_dynamic_processes(void)
{
    int mpi_errno = MPI_SUCCESS;
    MPIR_ERR_SET(mpi_errno, MPI_ERR_SPAWN, "**icbc_nodynamic");
    return mpi_errno;
}

int MPIDI_ICBC_get_local_upids(MPIR_Comm *comm, int **local_upid_size, char **local_upids)
{
    return no_dynamic_processes();
}

int MPIDI_ICBC_upids_to_gpids(int size, int *remote_upid_size, char *remote_upids,
                              uint64_t *remote_gpids)
{
    return no_dynamic_processes();
}

int MPIDI_ICBC_dynamic_send(uint64_t remote_gpid, int tag, const void *buf, int size, int timeout)
{
    return no_dynamic_processes();
}

int MPIDI_ICBC_dynamic_recv(int tag, void *buf, int size, int timeout)
{
    return no_dynamic_processes();
}

/* Partitioned communication: MPIDIG over active messages */

int MPIDI_ICBC_mpi_psend_init(const void *buf, int partitions, MPI_Aint count,
                              MPI_Datatype datatype, int rank, int tag, MPIR_Comm *comm,
                              MPIR_Info *info, MPIDI_av_entry_t *av, MPIR_Request **req_p)
{
    return MPIDIG_mpi_psend_init(buf, partitions, count, datatype, rank, tag, comm, info, req_p);
}

int MPIDI_ICBC_mpi_precv_init(void *buf, int partitions, MPI_Aint count, MPI_Datatype datatype,
                              int rank, int tag, MPIR_Comm *comm, MPIR_Info *info,
                              MPIDI_av_entry_t *av, MPIR_Request **req_p)
{
    return MPIDIG_mpi_precv_init(buf, partitions, count, datatype, rank, tag, comm, info, req_p);
}

/* Memory */

void *MPIDI_ICBC_mpi_alloc_mem(MPI_Aint size, MPIR_Info *info)
{
    return MPIDIG_mpi_alloc_mem(size, info);
}

int MPIDI_ICBC_mpi_free_mem(void *ptr)
{
    return MPIDIG_mpi_free_mem(ptr);
}

/* RMA windows: MPIDIG over active messages; the netmod only lists them for
 * its diagnostic dump (icbc_dump.c) */

int MPIDI_ICBC_mpi_win_create_hook(MPIR_Win *win)
{
    MPIDI_ICBC_dump_win_add(win);
    return MPI_SUCCESS;
}

int MPIDI_ICBC_mpi_win_allocate_hook(MPIR_Win *win)
{
    MPIDI_ICBC_dump_win_add(win);
    return MPI_SUCCESS;
}

int MPIDI_ICBC_mpi_win_allocate_shared_hook(MPIR_Win *win)
{
    MPIDI_ICBC_dump_win_add(win);
    return MPI_SUCCESS;
}

int MPIDI_ICBC_mpi_win_create_dynamic_hook(MPIR_Win *win)
{
    MPIDI_ICBC_dump_win_add(win);
    return MPI_SUCCESS;
}

int MPIDI_ICBC_mpi_win_attach_hook(MPIR_Win *win, void *base, MPI_Aint size)
{
    return MPI_SUCCESS;
}

int MPIDI_ICBC_mpi_win_detach_hook(MPIR_Win *win, const void *base)
{
    return MPI_SUCCESS;
}

int MPIDI_ICBC_mpi_win_free_hook(MPIR_Win *win)
{
    MPIDI_ICBC_dump_win_del(win);
    return MPI_SUCCESS;
}

int MPIDI_ICBC_mpi_win_set_info(MPIR_Win *win, MPIR_Info *info)
{
    return MPIDIG_mpi_win_set_info(win, info);
}

int MPIDI_ICBC_mpi_win_get_info(MPIR_Win *win, MPIR_Info **info_p)
{
    return MPIDIG_mpi_win_get_info(win, info_p);
}

int MPIDI_ICBC_mpi_win_free(MPIR_Win **win_p)
{
    return MPIDIG_mpi_win_free(win_p);
}

int MPIDI_ICBC_mpi_win_create(void *base, MPI_Aint length, int disp_unit, MPIR_Info *info,
                              MPIR_Comm *comm_ptr, MPIR_Win **win_p)
{
    return MPIDIG_mpi_win_create(base, length, disp_unit, info, comm_ptr, win_p);
}

int MPIDI_ICBC_mpi_win_attach(MPIR_Win *win, void *base, MPI_Aint size)
{
    return MPIDIG_mpi_win_attach(win, base, size);
}

int MPIDI_ICBC_mpi_win_allocate_shared(MPI_Aint size, int disp_unit, MPIR_Info *info,
                                       MPIR_Comm *comm_ptr, void **baseptr_p, MPIR_Win **win_p)
{
    return MPIDIG_mpi_win_allocate_shared(size, disp_unit, info, comm_ptr, baseptr_p, win_p);
}

int MPIDI_ICBC_mpi_win_detach(MPIR_Win *win, const void *base)
{
    return MPIDIG_mpi_win_detach(win, base);
}

int MPIDI_ICBC_mpi_win_allocate(MPI_Aint size, int disp_unit, MPIR_Info *info, MPIR_Comm *comm,
                                void *baseptr, MPIR_Win **win_p)
{
    return MPIDIG_mpi_win_allocate(size, disp_unit, info, comm, baseptr, win_p);
}

int MPIDI_ICBC_mpi_win_create_dynamic(MPIR_Info *info, MPIR_Comm *comm, MPIR_Win **win_p)
{
    return MPIDIG_mpi_win_create_dynamic(info, comm, win_p);
}
