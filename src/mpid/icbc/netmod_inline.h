/*
 * The icbc netmod's inline API. All MPI matching, RMA, partitioned and
 * collective operations go through MPIDIG's active-message layer (the
 * am_fallback headers); icbc supplies the active-message transport below it,
 * and applies accumulates to the process's own window at once (icbc_rma.h).
 * On communicators that span IMPI clients, Barrier, Bcast, Reduce and
 * Allreduce run IMPI's algorithms (icbc_coll.h).
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
#include "netmod_am_fallback.h"
#undef MPIDI_NM_mpi_barrier
#undef MPIDI_NM_mpi_bcast
#undef MPIDI_NM_mpi_reduce
#undef MPIDI_NM_mpi_allreduce
#include "icbc_coll.h"

#include "icbc_progress.h"
#include "icbc_request.h"
#include "icbc_am.h"
#include "icbc_win.h"
#include "icbc_proc.h"

#include "icbc_noinline.h"

#endif /* NETMOD_INLINE_H_INCLUDED */
