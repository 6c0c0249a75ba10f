/*
 * Receive side of the direct path: the fabric's active-message handler and
 * the transport rendezvous that pulls large payloads into the matched buffer.
 *
 *   eager message      -> MPIDIG handler with the payload, synchronous copy
 *   rendezvous message -> MPIDIG handler with IS_ASYNC|IS_RNDV; once MPIDIG
 *                         has matched it (now, or later through
 *                         am_get_data_copy_cb) MPIDI_ICBC_rndv_pull() asks
 *                         the fabric for the payload in place; completion
 *                         calls the request's target completion callback.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_am.h"
#include "icbc_recv.h"

/* Largest header the callback copies to an aligned stack buffer; larger ones
 * (RMA with flattened datatypes) go through the heap. */
#define ICBC_RECV_STACK_HDR 256

static void rndv_complete(MPIR_Request *rreq, icbc_status_t status)
{
    MPIDI_ICBC_am_request_t *amreq = &MPIDI_ICBC_AMREQ(rreq);
    void *bounce = amreq->bounce_buf;
    size_t size = amreq->rndv_size;

    amreq->bounce_buf = NULL;
    amreq->rndv_desc = NULL;
    amreq->xproto = NULL;
    MPIDI_ICBC_recv_mark_remote(rreq);
    MPIDIG_recv_setup(rreq);
    if (status != ICBC_OK) {
        rreq->status.MPI_ERROR = MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__,
                                                      __LINE__, MPI_ERR_OTHER, "**icbc_recv",
                                                      "**icbc_recv %s", icbc_status_str(status));
    } else if (bounce) {
        MPIDIG_recv_copy_seg(bounce, size, rreq);
    }
    MPL_free(bounce);
    MPIDIG_REQUEST(rreq, req->target_cmpl_cb)(rreq);
}

static void rndv_pull_cb(void *arg, icbc_status_t status)
{
    rndv_complete((MPIR_Request *) arg, status);
}

/* A rendezvous message matched: the fabric brings its payload into the buffer. */
static int fabric_matched(MPIR_Request *rreq)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_ICBC_am_request_t *amreq = &MPIDI_ICBC_AMREQ(rreq);
    int is_contig, is_gpu;
    void *p_data;
    MPI_Aint p_data_sz;
    void *dest;
    void *desc = amreq->rndv_desc;
    icbc_status_t st;

    MPIR_FUNC_ENTER;

    MPIDI_ICBC_get_recv_layout(rreq, &is_contig, &is_gpu, &p_data, &p_data_sz);
    if (is_contig && !is_gpu && (size_t) p_data_sz >= amreq->rndv_size) {
        dest = p_data;
    } else {
        /* non-contiguous, device or too small (truncation): stage, then copy */
        amreq->bounce_buf = MPL_malloc(amreq->rndv_size, MPL_MEM_BUFFER);
        MPIR_ERR_CHKANDJUMP(amreq->bounce_buf == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
        dest = amreq->bounce_buf;
    }

    /* The descriptor is the pull's from here, whatever its outcome. */
    amreq->rndv_desc = NULL;
    st = mx_fabric_am_recv(MPIDI_ICBC_global.fabric, desc, dest, amreq->rndv_size, rndv_pull_cb,
                           rreq);
    if (st != ICBC_OK)
        rndv_complete(rreq, st);

fn_exit:
    MPIR_FUNC_EXIT;
    return mpi_errno;
fn_fail:
    goto fn_exit;
}

const MPIDI_ICBC_proto_t MPIDI_ICBC_proto_fabric = {
    .name = "fabric",
    .am_isend = NULL, /* inline in icbc_am.h */
    .send_hdr = NULL,
    .matched = fabric_matched,
};

int MPIDI_ICBC_am_recv_cb(mx_fabric_t *f, const mx_fabric_am_t *am, void *arg)
{
    (void) f;
    (void) arg;
    return MPIDI_ICBC_am_deliver(am->hdr, am->hdr_len, am->data, am->len, am->rndv, -1);
}

int MPIDI_ICBC_am_deliver(const void *header, size_t header_length, void *data, size_t length,
                          int is_rndv, int src)
{
    icbc_am_hdr_t wh;
    uint64_t stack_hdr[ICBC_RECV_STACK_HDR / sizeof(uint64_t)];
    void *am_hdr = stack_hdr;
    void *heap_hdr = NULL;
    void *heap_data = NULL;
    uint32_t attr = 0;
    int ret = 0;

    if (icbc_am_hdr_parse(header, header_length, MPIDI_AM_HANDLERS_MAX,
                          (uint32_t) MPIDI_ICBC_global.peers.size, &wh) != ICBC_OK ||
        wh.kind != ICBC_MSG_AM || wh.data_sz != length ||
        (src >= 0 && wh.src_rank != (uint32_t) src) ||
        MPIDIG_global.target_msg_cbs[wh.handler_id] == NULL) {
        /* Not ours, damaged or from a newer peer: drop it, never trust it. */
        icbc_warn("dropped a malformed active message (%zu header bytes, %zu data bytes)",
                  header_length, length);
        return 0; /* the fabric drops a rendezvous descriptor that was not kept */
    }

    /* MPIDIG headers are structs: hand them over aligned. */
    if (wh.am_hdr_sz > sizeof(stack_hdr)) {
        heap_hdr = MPL_malloc(wh.am_hdr_sz, MPL_MEM_BUFFER);
        if (heap_hdr == NULL)
            return 0;
        am_hdr = heap_hdr;
    }
    memcpy(am_hdr, (const char *) header + ICBC_WIRE_AM_HDR_SIZE, wh.am_hdr_sz);
    MPIDIG_AM_ATTR_SET_VCIS(attr, wh.src_vci, wh.dst_vci);

    if (!is_rndv) {
        if (length > 0 && ((uintptr_t) data & (sizeof(uint64_t) - 1))) {
            heap_data = MPL_malloc(length, MPL_MEM_BUFFER);
            if (heap_data == NULL)
                goto done;
            memcpy(heap_data, data, length);
            data = heap_data;
        }
        MPIDIG_global.target_msg_cbs[wh.handler_id](am_hdr, data, length, attr, NULL);
    } else {
        MPIR_Request *rreq = NULL;

        attr |= MPIDIG_AM_ATTR__IS_ASYNC | MPIDIG_AM_ATTR__IS_RNDV;
        MPIDIG_global.target_msg_cbs[wh.handler_id](am_hdr, NULL, length, attr, &rreq);
        if (rreq == NULL)
            goto done; /* not kept: the fabric drops the descriptor */
        MPIDI_ICBC_AMREQ(rreq).xproto = &MPIDI_ICBC_proto_fabric;
        MPIDI_ICBC_AMREQ(rreq).rndv_desc = data;
        MPIDI_ICBC_AMREQ(rreq).rndv_size = length;
        ret = 1; /* kept for the pull */
        if (MPIDIG_recv_initialized(rreq))
            MPIDI_ICBC_rndv_pull(rreq);
        /* else: MPIDIG calls MPIDI_ICBC_rndv_pull when a receive matches */
    }

done:
    MPL_free(heap_data);
    MPL_free(heap_hdr);
    return ret;
}
