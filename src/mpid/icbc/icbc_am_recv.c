/*
 * Receive side of the direct path: the UCX active-message callback and the
 * transport rendezvous that pulls large payloads into the matched buffer.
 *
 *   eager message      -> MPIDIG handler with the payload, synchronous copy
 *   rendezvous message -> MPIDIG handler with IS_ASYNC|IS_RNDV; once MPIDIG
 *                         has matched it (now, or later through
 *                         am_get_data_copy_cb) MPIDI_ICBC_rndv_pull() asks
 *                         UCX to deliver the payload in place; completion
 *                         calls the request's target completion callback.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_xfer.h"
#include "icbc_am.h"
#include "mpidig_recvq.h"

/* Largest header the callback copies to an aligned stack buffer; larger ones
 * (RMA with flattened datatypes) go through the heap. */
#define ICBC_RECV_STACK_HDR 256

/* A receive whose payload came through this netmod completes. MPIDIG keeps
 * one unexpected queue for shm and netmod: an MPI_ANY_SOURCE receive posted
 * through shm may take our unexpected rendezvous message and mark it local,
 * and its completion (e.g. the synchronous-send acknowledgement) would then
 * go out through shm to a remote rank. The data came from the network, so
 * the replies must go back through it. */
static void recv_mark_remote(MPIR_Request *rreq)
{
#ifndef MPIDI_CH4_DIRECT_NETMOD
    MPIDI_REQUEST(rreq, is_local) = 0;
#endif
}

/* The receive layout of RREQ as MPIDIG gives it to a transport that copies
 * asynchronously. For a non-contiguous buffer larger than the message,
 * MPIDIG sizes the iovec array for the whole buffer but fills it only for
 * the message's bytes; the unfilled tail would later be summed as buffer
 * space. Keep only the entries that hold the message. */
void MPIDI_ICBC_get_recv_layout(MPIR_Request *rreq, int *is_contig, int *is_gpu, void **p_data,
                                MPI_Aint *p_data_sz)
{
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
}

static void rndv_complete(MPIR_Request *rreq, ucs_status_t status)
{
    MPIDI_ICBC_am_request_t *amreq = &MPIDI_ICBC_AMREQ(rreq);
    void *bounce = amreq->bounce_buf;
    size_t size = amreq->rndv_size;

    amreq->bounce_buf = NULL;
    amreq->rndv_desc = NULL;
    recv_mark_remote(rreq);
    MPIDIG_recv_setup(rreq);
    if (status != UCS_OK) {
        rreq->status.MPI_ERROR = MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__,
                                                      __LINE__, MPI_ERR_OTHER, "**icbc_recv",
                                                      "**icbc_recv %s", ucs_status_string(status));
    } else if (bounce) {
        MPIDIG_recv_copy_seg(bounce, size, rreq);
    }
    MPL_free(bounce);
    MPIDIG_REQUEST(rreq, req->target_cmpl_cb)(rreq);
}

static void rndv_pull_cb(void *request, ucs_status_t status, size_t length, void *user_data)
{
    rndv_complete((MPIR_Request *) user_data, status);
    ucp_request_free(request);
}

int MPIDI_ICBC_rndv_pull(MPIR_Request *rreq)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_ICBC_am_request_t *amreq = &MPIDI_ICBC_AMREQ(rreq);
    int is_contig, is_gpu;
    void *p_data;
    MPI_Aint p_data_sz;
    void *dest;
    ucs_status_ptr_t ucp_req;

    MPIR_FUNC_ENTER;

    if (amreq->xkind == MPIDI_ICBC_XKIND_IMPI) {
        /* matched head of a long IMPI message: ask for the rest */
        mpi_errno = MPIDI_ICBC_impi_matched(rreq);
        goto fn_exit;
    }
    if (amreq->xkind) {
        /* matched RTS of a striped message: answer with a receive slot */
        mpi_errno = MPIDI_ICBC_xfer_matched(rreq);
        goto fn_exit;
    }

    MPIDI_ICBC_get_recv_layout(rreq, &is_contig, &is_gpu, &p_data, &p_data_sz);
    if (is_contig && !is_gpu && (size_t) p_data_sz >= amreq->rndv_size) {
        dest = p_data;
    } else {
        /* non-contiguous, device or too small (truncation): stage, then copy */
        amreq->bounce_buf = MPL_malloc(amreq->rndv_size, MPL_MEM_BUFFER);
        MPIR_ERR_CHKANDJUMP(amreq->bounce_buf == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
        dest = amreq->bounce_buf;
    }

    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.recv_am = rndv_pull_cb,
        .user_data = rreq,
    };
    ucp_req = ucp_am_recv_data_nbx(MPIDI_ICBC_global.worker, amreq->rndv_desc, dest,
                                   amreq->rndv_size, &param);
    if (ucp_req == NULL) {
        rndv_complete(rreq, UCS_OK);
    } else if (UCS_PTR_IS_ERR(ucp_req)) {
        rndv_complete(rreq, UCS_PTR_STATUS(ucp_req));
    }

fn_exit:
    MPIR_FUNC_EXIT;
    return mpi_errno;
fn_fail:
    goto fn_exit;
}

ucs_status_t MPIDI_ICBC_am_recv_cb(void *arg, const void *header, size_t header_length, void *data,
                                   size_t length, const ucp_am_recv_param_t *param)
{
    return MPIDI_ICBC_am_deliver(header, header_length, data, length,
                                 (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0, -1);
}

ucs_status_t MPIDI_ICBC_am_deliver(const void *header, size_t header_length, void *data,
                                   size_t length, int is_rndv, int src)
{
    icbc_am_hdr_t wh;
    uint64_t stack_hdr[ICBC_RECV_STACK_HDR / sizeof(uint64_t)];
    void *am_hdr = stack_hdr;
    void *heap_hdr = NULL;
    void *heap_data = NULL;
    uint32_t attr = 0;
    ucs_status_t ret = UCS_OK;

    if (icbc_am_hdr_parse(header, header_length, MPIDI_AM_HANDLERS_MAX,
                          (uint32_t) MPIDI_ICBC_global.peers.size, &wh) != ICBC_OK ||
        wh.kind != ICBC_MSG_AM || wh.data_sz != length ||
        (src >= 0 && wh.src_rank != (uint32_t) src) ||
        MPIDIG_global.target_msg_cbs[wh.handler_id] == NULL) {
        /* Not ours, damaged or from a newer peer: drop it, never trust it. */
        icbc_warn("dropped a malformed active message (%zu header bytes, %zu data bytes)",
                  header_length, length);
        return UCS_OK; /* UCX drops a rendezvous descriptor that was not pulled */
    }

    /* MPIDIG headers are structs: hand them over aligned. */
    if (wh.am_hdr_sz > sizeof(stack_hdr)) {
        heap_hdr = MPL_malloc(wh.am_hdr_sz, MPL_MEM_BUFFER);
        if (heap_hdr == NULL)
            return UCS_ERR_NO_MEMORY;
        am_hdr = heap_hdr;
    }
    memcpy(am_hdr, (const char *) header + ICBC_WIRE_AM_HDR_SIZE, wh.am_hdr_sz);
    MPIDIG_AM_ATTR_SET_VCIS(attr, wh.src_vci, wh.dst_vci);

    if (!is_rndv) {
        if (length > 0 && ((uintptr_t) data & (sizeof(uint64_t) - 1))) {
            heap_data = MPL_malloc(length, MPL_MEM_BUFFER);
            if (heap_data == NULL) {
                ret = UCS_ERR_NO_MEMORY;
                goto done;
            }
            memcpy(heap_data, data, length);
            data = heap_data;
        }
        MPIDIG_global.target_msg_cbs[wh.handler_id](am_hdr, data, length, attr, NULL);
    } else {
        MPIR_Request *rreq = NULL;

        attr |= MPIDIG_AM_ATTR__IS_ASYNC | MPIDIG_AM_ATTR__IS_RNDV;
        MPIDIG_global.target_msg_cbs[wh.handler_id](am_hdr, NULL, length, attr, &rreq);
        if (rreq == NULL)
            goto done; /* UCS_OK: UCX drops the descriptor */
        MPIDI_ICBC_AMREQ(rreq).rndv_desc = data;
        MPIDI_ICBC_AMREQ(rreq).rndv_size = length;
        ret = UCS_INPROGRESS; /* UCX keeps the descriptor for the pull */
        if (MPIDIG_recv_initialized(rreq))
            MPIDI_ICBC_rndv_pull(rreq);
        /* else: MPIDIG calls MPIDI_ICBC_rndv_pull when a receive matches */
    }

done:
    MPL_free(heap_data);
    MPL_free(heap_hdr);
    return ret;
}

/* A receive MPIDIG holds in its posted queue has no message yet, so no
 * transport can fail it: when the path to its source is gone for good, it
 * would wait until the job is ended. It ends now with the transfer's error, as
 * MPIDIG's own cancel ends one, so that MPI_Wait returns the error to the
 * application. MPI_ANY_SOURCE receives stay: another process may match them. */
void MPIDI_ICBC_fail_posted_recvs(int rank, const char *why)
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
            rreq->status.MPI_ERROR = MPIDI_ICBC_xfer_error(rank, why);
            MPIR_STATUS_SET_COUNT(rreq->status, 0);
            MPID_Request_complete(rreq);
        }
    }
}
