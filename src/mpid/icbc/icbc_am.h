/*
 * Send side of the active-message contract on the direct path.
 *
 * Every message is one active message of the cluster's fabric (mx_fabric.h:
 * UCX or libfabric) whose header is the icbc wire header followed by the
 * MPIDIG header, and whose data is the payload. Header + payload up to the
 * eager limit travel eagerly; larger payloads use the fabric's rendezvous,
 * and the receiver pulls them straight into the matched receive buffer (a
 * transport rendezvous: see icbc_am_recv.c).
 */
#ifndef ICBC_AM_H_INCLUDED
#define ICBC_AM_H_INCLUDED

#include "icbc_impl.h"
#include "icbc_proto.h"
#include "icbc_pacing.h"

/* Completion of an am_isend: release what the request owned, then tell MPIDIG. */
MPL_STATIC_INLINE_PREFIX void MPIDI_ICBC_am_isend_done(MPIR_Request *sreq, icbc_status_t status)
{
    if (status != ICBC_OK) {
        sreq->status.MPI_ERROR = MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__,
                                                      __LINE__, MPI_ERR_OTHER, "**icbc_send",
                                                      "**icbc_send %s", icbc_status_str(status));
    }
    MPIDI_ICBC_proto_send_done(sreq);
}

MPL_STATIC_INLINE_PREFIX void MPIDI_ICBC_am_isend_cb(void *arg, icbc_status_t status)
{
    MPIDI_ICBC_am_isend_done((MPIR_Request *) arg, status);
}

MPL_STATIC_INLINE_PREFIX void MPIDI_ICBC_am_send_hdr_cb(void *arg, icbc_status_t status)
{
    MPL_free(arg);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_am_isend(int rank, MPIR_Comm *comm, int handler_id,
                                               const void *am_hdr, MPI_Aint am_hdr_sz,
                                               const void *data, MPI_Aint count,
                                               MPI_Datatype datatype, int src_vci, int dst_vci,
                                               MPIR_Request *sreq)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_ICBC_am_request_t *amreq = &MPIDI_ICBC_AMREQ(sreq);
    icbc_peer_t *peer;
    const MPIDI_ICBC_proto_t *proto;
    mx_fabric_ep_t *ep;
    int dt_contig;
    size_t data_sz;
    MPI_Aint dt_true_lb;
    MPIR_Datatype *dt_ptr;
    const void *payload;
    void *hdr;
    size_t hdr_len = ICBC_WIRE_AM_HDR_SIZE + am_hdr_sz;
    icbc_status_t st;

    MPIR_FUNC_ENTER;

    peer = MPIDI_ICBC_comm_rank_to_peer(comm, rank);
    if (unlikely(peer && (proto = MPIDI_ICBC_proto_of(peer)))) {
        /* through routers or TCP, or to another MPI: icbc_proto.h */
        MPIDI_ICBC_pace_comm(comm);
        mpi_errno = proto->am_isend(peer, handler_id, am_hdr, am_hdr_sz, data, count, datatype,
                                    src_vci, dst_vci, sreq);
        goto fn_exit;
    }
    mpi_errno = MPIDI_ICBC_comm_rank_to_ep(comm, rank, &peer, &ep);
    MPIR_ERR_CHECK(mpi_errno);

    MPIDI_Datatype_get_info(count, datatype, dt_contig, data_sz, dt_ptr, dt_true_lb);

    /* The header must stay valid until the fabric completes the send (it
     * may copy neither header nor payload of a pending operation). */
    amreq->handler_id = handler_id;
    if (hdr_len <= sizeof(amreq->inline_hdr)) {
        hdr = amreq->inline_hdr;
    } else {
        amreq->hdr_buf = MPL_malloc(hdr_len, MPL_MEM_BUFFER);
        MPIR_ERR_CHKANDJUMP(amreq->hdr_buf == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
        hdr = amreq->hdr_buf;
    }
    MPIDI_ICBC_pack_wire(hdr, MPIR_Process.rank, handler_id, am_hdr, am_hdr_sz, data_sz, src_vci,
                         dst_vci);

    MPL_pointer_attr_t attr;
    MPIR_GPU_query_pointer_attr(data, &attr);
    if (dt_contig && attr.type != MPL_GPU_POINTER_DEV) {
        payload = MPIR_get_contig_ptr(data, dt_true_lb);
    } else {
        MPI_Aint packed;
        amreq->pack_buf = MPL_malloc(data_sz ? data_sz : 1, MPL_MEM_BUFFER);
        MPIR_ERR_CHKANDJUMP(amreq->pack_buf == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
        mpi_errno = MPIR_Typerep_pack(data, count, datatype, 0, amreq->pack_buf, data_sz, &packed);
        MPIR_ERR_CHECK(mpi_errno);
        MPIR_Assert(packed == (MPI_Aint) data_sz);
        payload = amreq->pack_buf;
    }

    st = mx_fabric_am_send(
        ep, MPIDI_ICBC_AM_ID, hdr, hdr_len, payload, data_sz,
        (data_sz == 0 || (MPI_Aint) (am_hdr_sz + data_sz) <= MPIDI_ICBC_global.eager_limit)
            ? MX_FABRIC_SEND_EAGER
            : MX_FABRIC_SEND_RNDV,
        MPIDI_ICBC_am_isend_cb, sreq);
    if (st != ICBC_OK) {
        MPIDI_ICBC_am_isend_done(sreq, st);
        MPIDI_ICBC_ERR_PEER_SETANDJUMP(mpi_errno, rank, icbc_status_str(st));
    }

fn_exit:
    MPIR_FUNC_EXIT;
    return mpi_errno;
fn_fail:
    goto fn_exit;
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_am_isend_reply(MPIR_Comm *comm, int src_rank, int handler_id,
                                                     const void *am_hdr, MPI_Aint am_hdr_sz,
                                                     const void *data, MPI_Aint count,
                                                     MPI_Datatype datatype, int src_vci,
                                                     int dst_vci, MPIR_Request *sreq)
{
    return MPIDI_NM_am_isend(src_rank, comm, handler_id, am_hdr, am_hdr_sz, data, count, datatype,
                             src_vci, dst_vci, sreq);
}

/* Header-only message. First try to complete it immediately from the stack;
 * only when the fabric must queue it is the header copied to the heap. */
MPL_STATIC_INLINE_PREFIX int MPIDI_NM_am_send_hdr(int rank, MPIR_Comm *comm, int handler_id,
                                                  const void *am_hdr, MPI_Aint am_hdr_sz,
                                                  int src_vci, int dst_vci)
{
    int mpi_errno = MPI_SUCCESS;
    icbc_peer_t *peer;
    const MPIDI_ICBC_proto_t *proto;
    mx_fabric_ep_t *ep;
    size_t hdr_len = ICBC_WIRE_AM_HDR_SIZE + am_hdr_sz;
    uint64_t stack_hdr[MPIDI_ICBC_INLINE_HDR_BYTES / sizeof(uint64_t)];
    void *hdr = stack_hdr;
    icbc_status_t st;

    MPIR_FUNC_ENTER;

    peer = MPIDI_ICBC_comm_rank_to_peer(comm, rank);
    if (unlikely(peer && (proto = MPIDI_ICBC_proto_of(peer)))) {
        MPIDI_ICBC_pace_comm(comm);
        mpi_errno = proto->send_hdr(peer, handler_id, am_hdr, am_hdr_sz, src_vci, dst_vci);
        goto fn_exit;
    }
    mpi_errno = MPIDI_ICBC_comm_rank_to_ep(comm, rank, &peer, &ep);
    MPIR_ERR_CHECK(mpi_errno);

    if (hdr_len <= sizeof(stack_hdr)) {
        MPIDI_ICBC_pack_wire(hdr, MPIR_Process.rank, handler_id, am_hdr, am_hdr_sz, 0, src_vci,
                             dst_vci);
        st = mx_fabric_am_send(ep, MPIDI_ICBC_AM_ID, hdr, hdr_len, NULL, 0,
                               MX_FABRIC_SEND_IMMEDIATE, NULL, NULL);
        if (st == ICBC_OK)
            goto fn_exit;
        if (st != ICBC_ERR_BUSY)
            goto send_failed;
    }

    /* Queued send: the header must outlive this call. */
    hdr = MPL_malloc(hdr_len, MPL_MEM_BUFFER);
    MPIR_ERR_CHKANDJUMP(hdr == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    MPIDI_ICBC_pack_wire(hdr, MPIR_Process.rank, handler_id, am_hdr, am_hdr_sz, 0, src_vci,
                         dst_vci);
    st = mx_fabric_am_send(ep, MPIDI_ICBC_AM_ID, hdr, hdr_len, NULL, 0, MX_FABRIC_SEND_EAGER,
                           MPIDI_ICBC_am_send_hdr_cb, hdr);
    if (st != ICBC_OK) {
        MPL_free(hdr);
        goto send_failed;
    }

fn_exit:
    MPIR_FUNC_EXIT;
    return mpi_errno;
send_failed:
    mpi_errno = MPIDI_ICBC_ERR_PEER(rank, icbc_status_str(st));
fn_fail:
    goto fn_exit;
}

MPL_STATIC_INLINE_PREFIX int MPIDI_NM_am_send_hdr_reply(MPIR_Comm *comm, int src_rank,
                                                        int handler_id, const void *am_hdr,
                                                        MPI_Aint am_hdr_sz, int src_vci,
                                                        int dst_vci)
{
    return MPIDI_NM_am_send_hdr(src_rank, comm, handler_id, am_hdr, am_hdr_sz, src_vci, dst_vci);
}

MPL_STATIC_INLINE_PREFIX MPI_Aint MPIDI_NM_am_hdr_max_sz(void)
{
    return (MPI_Aint) MPIDI_ICBC_global.max_am_header - ICBC_WIRE_AM_HDR_SIZE;
}

MPL_STATIC_INLINE_PREFIX MPI_Aint MPIDI_NM_am_eager_limit(void)
{
    return MPIDI_ICBC_global.eager_limit;
}

MPL_STATIC_INLINE_PREFIX MPI_Aint MPIDI_NM_am_eager_buf_limit(void)
{
    return MPIDI_ICBC_global.eager_limit;
}

/* Every send is "eager" for MPIDIG: payloads above the eager limit take the
 * transport rendezvous, which needs no MPIDIG RTS/CTS round trip. */
MPL_STATIC_INLINE_PREFIX bool MPIDI_NM_am_check_eager(MPI_Aint am_hdr_sz, MPI_Aint data_sz,
                                                      const void *data, MPI_Aint count,
                                                      MPI_Datatype datatype, MPIR_Request *sreq)
{
    return am_hdr_sz <= MPIDI_NM_am_hdr_max_sz();
}

/* Unexpected rendezvous messages are pulled once MPIDIG matches them. */
MPL_STATIC_INLINE_PREFIX MPIDIG_recv_data_copy_cb MPIDI_NM_am_get_data_copy_cb(uint32_t attr)
{
    return MPIDI_ICBC_rndv_pull;
}

#endif /* ICBC_AM_H_INCLUDED */
