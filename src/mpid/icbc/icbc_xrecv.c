/*
 * Messages on the routed and TCP paths, receive side: one entry for every
 * path. xrecv_begin parses the wire header once, checks it against its
 * sender and says where the payload goes; xrecv_end finishes the message
 * once its payload is there (or was lost). A path whose payload is already
 * in memory calls xrecv_whole.
 *
 *   AM     delivered to MPIDIG (from memory when it is there, else staged)
 *   RTS    handed to MPIDIG; once matched, the engine opens a slot: CTS
 *   CTS    to the engine, which starts the chunks
 *   CHUNK  the engine says where it goes (the user buffer at its offset, or
 *          one chunk of staging for a non-contiguous buffer) and counts it
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_xfer.h"
#include "core/icbc_freelist.h"

#define X MPIDI_ICBC_xfer

/* A whole message whose payload is streamed in (a TCP connection, pieces
 * of IMPI packets) is staged before MPIDIG takes it: payloads up to this
 * size in buffers from a free list, larger ones in their own. */
#define XRECV_SMALL 4096
static icbc_freelist_t small_bufs;

static void *small_get(void)
{
    if (small_bufs.size == 0)
        icbc_freelist_init(&small_bufs, XRECV_SMALL, 16);
    return icbc_freelist_get(&small_bufs);
}

static void dropped(int src, const char *what)
{
    icbc_warn("dropped %s from rank %d", what, src);
}

/* ---- striped receives: the engine's callbacks ---------------------------- */

void MPIDI_ICBC_xrecv_striped_complete(void *ctx, void *user, icbc_status_t status, const char *why)
{
    MPIR_Request *rreq = user;

    MPIDI_ICBC_recv_done(rreq, status == ICBC_OK
                                   ? MPI_SUCCESS
                                   : MPIDI_ICBC_xfer_error(MPIDI_ICBC_AMREQ(rreq).xpeer, why));
}

/* A chunk of a receive without one contiguous destination. */
void MPIDI_ICBC_xrecv_striped_place(void *ctx, void *user, uint64_t offset, const void *data,
                                    size_t len)
{
    MPIDI_ICBC_recv_place(user, offset, data, len);
}

/* An RTS matched a receive: open a slot and answer with its CTS. */
int MPIDI_ICBC_xfer_matched(MPIR_Request *rreq)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_ICBC_am_request_t *amreq = &MPIDI_ICBC_AMREQ(rreq);
    int is_contig, is_gpu;
    void *p_data;
    MPI_Aint p_data_sz;
    icbc_stripe_cts_t cts;

    MPIDI_ICBC_get_recv_layout(rreq, &is_contig, &is_gpu, &p_data, &p_data_sz);
    /* in place when the buffer is contiguous host memory that holds it all;
     * else (pieces, device memory, a short buffer) chunk by chunk */
    void *dest = is_contig && !is_gpu && (size_t) p_data_sz >= amreq->rndv_size ? p_data : NULL;
    MPIR_ERR_CHKANDJUMP(icbc_stripe_recv_start(X.stripe, amreq->xpeer, amreq->xcookie,
                                               amreq->rndv_size, dest, rreq, icbc_clock_coarse(),
                                               &cts) != ICBC_OK,
                        mpi_errno, MPI_ERR_OTHER, "**nomem");
    MPIDI_ICBC_xfer_send_cts(amreq->xpeer, amreq->xcookie, &cts);
fn_fail:
    return mpi_errno;
}

void MPIDI_ICBC_xfer_send_cts(int src, uint64_t cookie, const icbc_stripe_cts_t *cts)
{
    uint8_t inner[ICBC_WIRE_HDR_LEN(ICBC_MSG_CTS)];
    icbc_am_hdr_t wh = {
        .kind = ICBC_MSG_CTS,
        .src_rank = (uint32_t) MPIR_Process.rank,
        .cookie = cookie,
        .slot = cts->slot,
        .gen = cts->gen,
        .chunk_size = (uint32_t) cts->chunk_size,
    };
    icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, src);

    icbc_am_hdr_pack(&wh, inner);
    if (MPIDI_ICBC_xfer_send_ordered(peer, inner, sizeof(inner), NULL, 0, NULL, NULL) !=
            MPI_SUCCESS &&
        cts->slot != ICBC_STRIPE_SLOT_DISCARD)
        MPIDI_ICBC_xfer_peer_failed(src, "cannot answer its request to send");
}

static void recv_rts(MPIDI_ICBC_xrecv_t *x)
{
    MPIR_Request *rreq = NULL;
    uint32_t attr = 0;

    MPIDIG_AM_ATTR_SET_VCIS(attr, x->wh.src_vci, x->wh.dst_vci);
    attr |= MPIDIG_AM_ATTR__IS_ASYNC | MPIDIG_AM_ATTR__IS_RNDV;
    MPIDIG_global.target_msg_cbs[x->wh.handler_id](x->am_hdr, NULL, x->wh.data_sz, attr, &rreq);
    if (rreq == NULL) {
        icbc_stripe_cts_t discard = { .slot = ICBC_STRIPE_SLOT_DISCARD };
        MPIDI_ICBC_xfer_send_cts(x->src_rank, x->wh.cookie, &discard);
        return;
    }
    MPIDI_ICBC_am_request_t *amreq = &MPIDI_ICBC_AMREQ(rreq);
    amreq->xproto = &MPIDI_ICBC_proto_icbc;
    amreq->xpeer = x->src_rank;
    amreq->xcookie = x->wh.cookie;
    amreq->rndv_size = x->wh.data_sz;
    if (MPIDIG_recv_initialized(rreq))
        MPIDI_ICBC_xfer_matched(rreq);
    /* else MPIDIG calls MPIDI_ICBC_rndv_pull -> MPIDI_ICBC_xfer_matched on match */
}

static void recv_cts(MPIDI_ICBC_xrecv_t *x)
{
    icbc_stripe_cts_t cts = {
        .slot = x->wh.slot,
        .gen = x->wh.gen,
        .chunk_size = x->wh.chunk_size,
    };

    if (icbc_stripe_cts(X.stripe, x->src_rank, x->wh.cookie, &cts, icbc_clock_coarse()) != ICBC_OK)
        dropped(x->src_rank, "a CTS for no send waiting for one");
}

static void deliver_am(MPIDI_ICBC_xrecv_t *x, void *payload, size_t len)
{
    uint32_t attr = 0;

    MPIDIG_AM_ATTR_SET_VCIS(attr, x->wh.src_vci, x->wh.dst_vci);
    MPIDIG_global.target_msg_cbs[x->wh.handler_id](x->am_hdr, payload, len, attr, NULL);
}

/* ---- the one receive entry ----------------------------------------------- */

/* Parses and checks the header of a message from SRC against its payload
 * length; copies the MPI header aligned. */
static int parse(int src, const void *inner, size_t inner_len, uint64_t payload_len,
                 MPIDI_ICBC_xrecv_t *x)
{
    icbc_am_hdr_t *wh = &x->wh;

    if (icbc_am_hdr_parse(inner, inner_len, MPIDI_AM_HANDLERS_MAX,
                          (uint32_t) MPIDI_ICBC_global.peers.size, wh) != ICBC_OK ||
        (int) wh->src_rank != src || wh->am_hdr_sz > sizeof(x->am_hdr))
        return -1;
    if ((wh->kind == ICBC_MSG_AM || wh->kind == ICBC_MSG_CHUNK) && wh->data_sz != payload_len)
        return -1;
    if ((wh->kind == ICBC_MSG_RTS || ICBC_MSG_KIND_BARE(wh->kind)) && payload_len != 0)
        return -1;
    if ((wh->kind == ICBC_MSG_AM || wh->kind == ICBC_MSG_RTS) &&
        MPIDIG_global.target_msg_cbs[wh->handler_id] == NULL)
        return -1;
    memcpy(x->am_hdr, (const char *) inner + ICBC_WIRE_HDR_LEN(wh->kind), wh->am_hdr_sz);
    return 0;
}

/* Whole messages in memory whose payload is not aligned for MPIDIG (after
 * a route header and ICBC's) are delivered from here: no allocation per
 * message. */
static struct {
    uint64_t bytes[(64 << 10) / 8];
    int busy; /* a delivery from it is under way */
} stage;

int MPIDI_ICBC_xrecv_begin(int src_rank, const void *inner, size_t inner_len, uint64_t payload_len,
                           const void *payload, MPIDI_ICBC_xrecv_t *x, void **dest)
{
    *dest = NULL;
    x->kind = 0;
    x->buf = NULL;
    x->buf_small = 0;
    if (parse(src_rank, inner, inner_len, payload_len, x)) {
        dropped(src_rank, "a malformed message");
        return -1;
    }
    icbc_stripe_peer_seen(X.stripe, src_rank, icbc_clock_coarse());
    x->src_rank = src_rank;
    x->len = payload_len;
    switch (x->wh.kind) {
    case ICBC_MSG_AM:
        if (payload && (payload_len == 0 || ((uintptr_t) payload & 7) == 0)) {
            /* in memory and aligned for MPIDIG's headers: no copy */
            deliver_am(x, (void *) payload, payload_len);
            return 0;
        }
        if (payload && payload_len <= sizeof(stage.bytes) && !stage.busy) {
            /* in memory, not aligned: aligned in the staging buffer, which
             * MPIDIG has done with when the delivery returns */
            stage.busy = 1;
            memcpy(stage.bytes, payload, payload_len);
            deliver_am(x, stage.bytes, payload_len);
            stage.busy = 0;
            return 0;
        }
        if (payload_len) {
            x->buf_small = payload_len <= XRECV_SMALL;
            x->buf = x->buf_small ? small_get() : MPL_malloc(payload_len, MPL_MEM_BUFFER);
            if (x->buf == NULL)
                return -1;
            *dest = x->buf;
        }
        x->kind = ICBC_MSG_AM;
        return 0;
    case ICBC_MSG_RTS: recv_rts(x); return 0;
    case ICBC_MSG_CTS: recv_cts(x); return 0;
    case ICBC_MSG_SYNC:
        /* everything SRC sent before this on the ordered lane has been
         * delivered: say so on ours */
        MPIDI_ICBC_xfer_send_bare(src_rank, ICBC_MSG_SYNC_ACK, x->wh.cookie);
        return 0;
    case ICBC_MSG_SYNC_ACK: MPIDI_ICBC_xfer_sync_acked(src_rank, x->wh.cookie); return 0;
    case ICBC_MSG_CONFIRM:
        /* a second one (the receiver confirms again for late chunks) names
         * no send any more: nothing to do */
        icbc_stripe_send_confirmed(X.stripe, src_rank, x->wh.cookie, icbc_clock_coarse());
        return 0;
    case ICBC_MSG_ACK: return 0; /* the routed path takes them before they get here */
    case ICBC_MSG_DELIVERED:
        if (x->wh.lane < ICBC_STRIPE_LANES_MAX)
            icbc_stripe_lane_delivered(X.stripe, x->wh.lane, x->wh.bytes, icbc_clock_coarse());
        return 0;
    case ICBC_MSG_CHUNK: {
        icbc_stripe_chunk_t c = {
            .slot = x->wh.slot,
            .gen = x->wh.gen,
            .offset = x->wh.offset,
            .len = payload_len,
        };
        icbc_status_t st = icbc_stripe_chunk_begin(X.stripe, src_rank, &c, &x->chunk, dest);
        if (st == ICBC_OK) {
            x->kind = ICBC_MSG_CHUNK;
        } else if (st == ICBC_ERR_NOT_FOUND) {
            /* late chunk of a failed receive (or, with failover, a copy of
             * one sent again after its receive completed): drop it, keep the
             * path */
            if (!MPIDI_ICBC_paths.failover)
                dropped(src_rank, "a chunk for no receive");
        } else if (!MPIDI_ICBC_paths.failover) {
            dropped(src_rank, "a chunk off its message's grid or already received");
        } /* with failover, a chunk sent again arrives twice now and then (counted) */
        return 0;
    }
    }
    return -1;
}

void MPIDI_ICBC_xrecv_end(MPIDI_ICBC_xrecv_t *x, int ok)
{
    switch (x->kind) {
    case ICBC_MSG_AM:
        if (ok)
            deliver_am(x, x->buf, x->len);
        if (x->buf_small)
            icbc_freelist_put(&small_bufs, x->buf);
        else
            MPL_free(x->buf);
        x->buf = NULL;
        break;
    case ICBC_MSG_CHUNK:
        icbc_stripe_chunk_end(X.stripe, &x->chunk, ok, icbc_clock_coarse());
        /* the sender's adaptive placement: this lane delivered it */
        if (ok && x->wh.lane != ICBC_WIRE_NO_LANE)
            MPIDI_ICBC_xfer_send_delivered(x->src_rank, x->wh.lane, x->len);
        break;
    }
    x->kind = 0;
}

void MPIDI_ICBC_xrecv_whole(int src_rank, const void *inner, size_t inner_len, const void *payload,
                            size_t len)
{
    MPIDI_ICBC_xrecv_t x;
    void *dest;

    if (MPIDI_ICBC_xrecv_begin(src_rank, inner, inner_len, len, payload, &x, &dest))
        return;
    if (dest)
        memcpy(dest, payload, len);
    MPIDI_ICBC_xrecv_end(&x, 1);
}

/* ---- UCX delivery from a router ------------------------------------------ */

/* Receives of chunks UCX pulls in, one per chunk in flight: from a free
 * list (none allocated per chunk once it holds the traffic's depth). */
static icbc_freelist_t pulls;

static MPIDI_ICBC_xrecv_t *pull_new(void)
{
    if (pulls.size == 0)
        icbc_freelist_init(&pulls, sizeof(MPIDI_ICBC_xrecv_t), 16);
    return icbc_freelist_get(&pulls);
}

static void pull_free(MPIDI_ICBC_xrecv_t *x)
{
    icbc_freelist_put(&pulls, x);
}

uint64_t MPIDI_ICBC_xrecv_pull_slabs(void)
{
    return pulls.nslabs;
}

void MPIDI_ICBC_xrecv_finalize(void)
{
    icbc_freelist_destroy(&pulls);
    memset(&pulls, 0, sizeof(pulls));
    icbc_freelist_destroy(&small_bufs);
    memset(&small_bufs, 0, sizeof(small_bufs));
}

static void chunk_pull_done(void *arg, icbc_status_t st)
{
    MPIDI_ICBC_xrecv_t *x = arg;

    MPIDI_ICBC_xrecv_end(x, st == ICBC_OK);
    pull_free(x);
}

int MPIDI_ICBC_xrecv_fabric(int src_rank, const void *inner, size_t inner_len, void *data,
                            size_t len, int is_rndv)
{
    MPIDI_ICBC_xrecv_t *x;
    void *dest;

    if (!is_rndv) {
        MPIDI_ICBC_xrecv_whole(src_rank, inner, inner_len, data, len);
        return 0;
    }
    if (inner_len > 1 && ((const uint8_t *) inner)[1] == ICBC_MSG_AM) {
        /* a whole message the router sent by rendezvous: the direct path's
         * receive matches it now and pulls it in place, keeping MPI's order
         * with the messages behind it */
        return MPIDI_ICBC_am_deliver(inner, inner_len, data, len, 1, src_rank);
    }
    /* a chunk: pulled straight to where the engine places it */
    x = pull_new();
    if (x == NULL)
        return 0; /* the fabric drops the descriptor; the receive stalls and fails */
    if (MPIDI_ICBC_xrecv_begin(src_rank, inner, inner_len, len, NULL, x, &dest) || !dest) {
        MPIDI_ICBC_xrecv_end(x, 0);
        pull_free(x);
        return 0;
    }
    /* The descriptor is the pull's from here, whatever its outcome. */
    if (mx_fabric_am_recv(MPIDI_ICBC_global.fabric, data, dest, len, chunk_pull_done, x) !=
        ICBC_OK) {
        MPIDI_ICBC_xrecv_end(x, 0);
        pull_free(x);
    }
    return 1;
}
