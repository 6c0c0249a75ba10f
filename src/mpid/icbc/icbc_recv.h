/*
 * Where a received payload goes, for every protocol whose payload arrives
 * after MPIDIG matched its header (the striping rendezvous, IMPI's long
 * messages): the receive buffer's layout, pieces placed at their message
 * offsets, the receive's completion, and receives posted for a lost peer.
 */
#ifndef ICBC_RECV_H_INCLUDED
#define ICBC_RECV_H_INCLUDED

#include "icbc_impl.h"

/* A receive whose payload came through this netmod completes. MPIDIG keeps
 * one unexpected queue for shm and netmod: an MPI_ANY_SOURCE receive posted
 * through shm may take our unexpected rendezvous message and mark it local,
 * and its completion (e.g. the synchronous-send acknowledgement) would then
 * go out through shm to a remote rank. The data came from the network, so
 * the replies must go back through it. */
MPL_STATIC_INLINE_PREFIX void MPIDI_ICBC_recv_mark_remote(MPIR_Request *rreq)
{
#ifndef MPIDI_CH4_DIRECT_NETMOD
    MPIDI_REQUEST(rreq, is_local) = 0;
#endif
}

/* MPIDIG's receive layout of RREQ, trimmed to the message; placement by
 * MPIDI_ICBC_recv_place starts at the layout's first byte. */
void MPIDI_ICBC_get_recv_layout(MPIR_Request *rreq, int *is_contig, int *is_gpu, void **p_data,
                                MPI_Aint *p_data_sz);
/* Copies bytes OFFSET .. OFFSET+LEN of RREQ's message to where they go in
 * its buffer (any order; nearly in order is fastest). */
void MPIDI_ICBC_recv_place(MPIR_Request *rreq, uint64_t offset, const void *data, size_t len);
/* RREQ's payload is in place (MPI_ERROR: MPI_SUCCESS), or lost with that
 * error: the receive completes. */
void MPIDI_ICBC_recv_done(MPIR_Request *rreq, int mpi_error);
/* Receives posted for world rank RANK that no message has matched yet end
 * with MPI_ERROR (the path to RANK is gone for good). */
void MPIDI_ICBC_fail_posted_recvs(int rank, int mpi_error);

#endif /* ICBC_RECV_H_INCLUDED */
