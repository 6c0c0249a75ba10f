/*
 * The icbc netmod's inline API. All MPI matching, RMA, partitioned and
 * collective operations go through MPIDIG's active-message layer (the
 * am_fallback headers); icbc supplies the active-message transport below it,
 * and applies accumulates to the process's own window at once (icbc_rma.h).
 * On communicators that span IMPI clients, the blocking collectives run
 * IMPI's algorithms (icbc_coll.h).
 */
#ifndef NETMOD_INLINE_H_INCLUDED
#define NETMOD_INLINE_H_INCLUDED

#include "icbc_rma.h"

/* MPIDIG's forms of the collectives the IMPI path runs itself on a
 * communicator that spans IMPI clients (icbc_coll.h) keep other names */
#define MPIDI_NM_mpi_barrier MPIDI_ICBC_mpir_barrier
#define MPIDI_NM_mpi_bcast MPIDI_ICBC_mpir_bcast
#define MPIDI_NM_mpi_reduce MPIDI_ICBC_mpir_reduce
#define MPIDI_NM_mpi_allreduce MPIDI_ICBC_mpir_allreduce
#define MPIDI_NM_mpi_gather MPIDI_ICBC_mpir_gather
#define MPIDI_NM_mpi_gatherv MPIDI_ICBC_mpir_gatherv
#define MPIDI_NM_mpi_scatter MPIDI_ICBC_mpir_scatter
#define MPIDI_NM_mpi_scatterv MPIDI_ICBC_mpir_scatterv
#define MPIDI_NM_mpi_allgather MPIDI_ICBC_mpir_allgather
#define MPIDI_NM_mpi_allgatherv MPIDI_ICBC_mpir_allgatherv
#define MPIDI_NM_mpi_alltoall MPIDI_ICBC_mpir_alltoall
#define MPIDI_NM_mpi_alltoallv MPIDI_ICBC_mpir_alltoallv
#define MPIDI_NM_mpi_reduce_scatter MPIDI_ICBC_mpir_reduce_scatter
#define MPIDI_NM_mpi_reduce_scatter_block MPIDI_ICBC_mpir_reduce_scatter_block
#define MPIDI_NM_mpi_scan MPIDI_ICBC_mpir_scan
#define MPIDI_NM_mpi_exscan MPIDI_ICBC_mpir_exscan
#include "netmod_am_fallback.h"
#undef MPIDI_NM_mpi_barrier
#undef MPIDI_NM_mpi_bcast
#undef MPIDI_NM_mpi_reduce
#undef MPIDI_NM_mpi_allreduce
#undef MPIDI_NM_mpi_gather
#undef MPIDI_NM_mpi_gatherv
#undef MPIDI_NM_mpi_scatter
#undef MPIDI_NM_mpi_scatterv
#undef MPIDI_NM_mpi_allgather
#undef MPIDI_NM_mpi_allgatherv
#undef MPIDI_NM_mpi_alltoall
#undef MPIDI_NM_mpi_alltoallv
#undef MPIDI_NM_mpi_reduce_scatter
#undef MPIDI_NM_mpi_reduce_scatter_block
#undef MPIDI_NM_mpi_scan
#undef MPIDI_NM_mpi_exscan
#include "icbc_coll.h"

#include "icbc_progress.h"
#include "icbc_request.h"
#include "icbc_am.h"
#include "icbc_win.h"
#include "icbc_proc.h"

#include "icbc_noinline.h"

#endif /* NETMOD_INLINE_H_INCLUDED */
