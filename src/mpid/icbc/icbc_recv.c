/*
 * Where a received payload goes (icbc_recv.h).
 */
#include <mpidimpl.h>
#include "icbc_recv.h"
#include "mpidig_recvq.h"

/* The receive layout of RREQ as MPIDIG gives it to a transport that copies
 * asynchronously. For a non-contiguous buffer larger than the message,
 * MPIDIG sizes the iovec array for the whole buffer but fills it only for
 * the message's bytes; the unfilled tail would later be summed as buffer
 * space. Keep only the entries that hold the message. */
void MPIDI_ICBC_get_recv_layout(MPIR_Request *rreq, int *is_contig, int *is_gpu, void **p_data,
                                MPI_Aint *p_data_sz)
{
    MPIDI_ICBC_am_request_t *amreq = &MPIDI_ICBC_AMREQ(rreq);

    MPIDIG_get_recv_data(is_contig, is_gpu, p_data, p_data_sz, rreq);
    if (!*is_contig) {
        MPIDIG_rreq_async_t *p = &(MPIDIG_REQUEST(rreq, req->recv_async));
        MPI_Aint covered = 0;
        int i;

        for (i = 0; i < p->iov_num && covered < p->in_data_sz; i++)
            covered += p->iov_ptr[i].iov_len;
        p->iov_num = i;
        *p_data_sz = i;
    }
    amreq->xplace_iov = 0;
    amreq->xplace_off = 0;
}

/* Pieces arrive nearly in order, so the walk over the buffer's pieces
 * starts from where the last one began. Bytes past the buffer are dropped;
 * MPIDIG_recv_setup reports the truncation at completion. */
void MPIDI_ICBC_recv_place(MPIR_Request *rreq, uint64_t offset, const void *data, size_t len)
{
    MPIDI_ICBC_am_request_t *amreq = &MPIDI_ICBC_AMREQ(rreq);
    MPIDIG_rreq_async_t *p = &MPIDIG_REQUEST(rreq, req->recv_async);
    const struct iovec *iov = p->recv_type == MPIDIG_RECV_CONTIG ? &p->iov_one : p->iov_ptr;
    int n = p->recv_type == MPIDIG_RECV_CONTIG ? 1 : p->iov_num;
    const char *src = data;
    int i = 0;
    uint64_t pos = 0; /* message offset of iov[i] */

    if (amreq->xplace_off <= offset) {
        i = amreq->xplace_iov;
        pos = amreq->xplace_off;
    }
    while (i < n && pos + iov[i].iov_len <= offset)
        pos += iov[i++].iov_len;
    amreq->xplace_iov = i;
    amreq->xplace_off = pos;
    for (; len > 0 && i < n; pos += iov[i++].iov_len) {
        size_t skip = offset - pos;
        size_t take = MPL_MIN(len, iov[i].iov_len - skip);
        MPIR_Typerep_copy((char *) iov[i].iov_base + skip, src, take);
        src += take;
        offset += take;
        len -= take;
    }
}

void MPIDI_ICBC_recv_done(MPIR_Request *rreq, int mpi_error)
{
    MPIDI_ICBC_recv_mark_remote(rreq);
    /* sets the status count, or the truncation error of a short buffer */
    MPIDIG_recv_setup(rreq);
    if (mpi_error != MPI_SUCCESS)
        rreq->status.MPI_ERROR = mpi_error;
    MPIDI_ICBC_AMREQ(rreq).xproto = NULL;
    MPIDIG_REQUEST(rreq, req->target_cmpl_cb)(rreq);
}

/* A receive MPIDIG holds in its posted queue has no message yet, so no
 * transport can fail it: when the path to its source is gone for good, it
 * would wait until the job is ended. It ends now with the error, as
 * MPIDIG's own cancel ends one, so that MPI_Wait returns the error to the
 * application. MPI_ANY_SOURCE receives stay: another process may match them. */
void MPIDI_ICBC_fail_posted_recvs(int rank, int mpi_error)
{
    for (int v = 0; v < MPIDI_global.n_vcis; v++) {
        MPIR_Request **list = &MPIDI_global.per_vci[v].posted_list;
        MPIR_Request *rreq, *tmp;

        DL_FOREACH_SAFE (*list, rreq, tmp) {
            int source = MPIDIG_REQUEST(rreq, u.recv.source);
            icbc_peer_t *peer;

            if (rreq->comm == NULL || source < 0 ||
                (peer = MPIDI_ICBC_comm_rank_to_peer(rreq->comm, source)) == NULL ||
                peer->rank != rank)
                continue;
            MPIDIG_delete_posted(rreq, list);
            MPIR_Datatype_release_if_not_builtin(MPIDIG_REQUEST(rreq, datatype));
            rreq->status.MPI_ERROR = mpi_error;
            MPIR_STATUS_SET_COUNT(rreq->status, 0);
            MPID_Request_complete(rreq);
        }
    }
}
