/*
 * ICBC's own protocol on the routed and TCP paths (MPIDI_ICBC_proto_icbc),
 * both sides, and the MPI glue of the striping engine (src/icbc/stripe.c).
 * The wire and the state are described in icbc_xfer.h.
 *
 * Send: whole messages and RTS leave on the pair's ordered lane; the engine
 * cuts a striped payload into chunks once the CTS arrived, and its
 * completions end MPI requests here.
 *
 * Receive: one entry for every path. xrecv_begin parses the wire header
 * once, checks it against its sender and says where the payload goes;
 * xrecv_end finishes the message once its payload is there (or was lost).
 * A path whose payload is already in memory calls xrecv_whole.
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
#include "icbc_pacing.h"
#include "core/icbc_freelist.h"

#include <unistd.h>

MPIDI_ICBC_xfer_t MPIDI_ICBC_xfer;
#define X MPIDI_ICBC_xfer

/* The MPI error of a transfer with RANK that failed for WHY; the peer's
 * cluster is named where there are several. */
int MPIDI_ICBC_xfer_error(int rank, const char *why)
{
    icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, rank);
    const icbc_routerfile_t *rf = MPIDI_ICBC_paths.rf;
    char text[256];

    if (peer && rf && peer->cluster >= 0 &&
        (size_t) peer->cluster < icbc_routerfile_num_clusters(rf)) {
        snprintf(text, sizeof(text), "%s (rank %d is in cluster %s)", why, rank,
                 icbc_routerfile_cluster(rf, (size_t) peer->cluster)->name);
        why = text;
    }
    return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                MPI_ERR_OTHER, "**icbc_xfer", "**icbc_xfer %d %s", rank, why);
}

/* ---- the engine's lanes and completions -------------------------------- */

static void chunk_lane_done(void *arg, icbc_status_t status)
{
    icbc_stripe_chunk_sent(X.stripe, (uint64_t) (uintptr_t) arg, status == ICBC_OK,
                           icbc_clock_coarse());
}

static icbc_status_t stripe_send_chunk(void *ctx, int rank, int lane, const icbc_stripe_chunk_t *c,
                                       const void *data, uint64_t token)
{
    icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, rank);
    uint8_t inner[ICBC_WIRE_HDR_LEN(ICBC_MSG_CHUNK)];
    icbc_am_hdr_t wh = {
        .kind = ICBC_MSG_CHUNK,
        .src_rank = (uint32_t) MPIR_Process.rank,
        .lane = X.feedback ? (uint16_t) lane : ICBC_WIRE_NO_LANE, /* reported in DELIVERED */
        .data_sz = c->len,
        .slot = c->slot,
        .gen = c->gen,
        .offset = c->offset,
    };
    int busy = 0;

    int paced = MPIDI_ICBC_pace_paces(peer);

    if (paced && !MPIDI_ICBC_pace_may_go())
        return ICBC_ERR_BUSY; /* it waits in the engine until the bucket allows */
    icbc_am_hdr_pack(&wh, inner);
    if (MPIDI_ICBC_path_send(peer, lane, inner, sizeof(inner), data, c->len, chunk_lane_done,
                             (void *) (uintptr_t) token, &busy) != MPI_SUCCESS)
        return ICBC_ERR_PEER_FAILED;
    if (paced && !busy)
        MPIDI_ICBC_pace_charge(c->len + sizeof(inner));
    return busy ? ICBC_ERR_BUSY : ICBC_OK;
}

static int stripe_nlanes(void *ctx, int rank)
{
    return MPIDI_ICBC_path_nlanes(icbc_peer_get(&MPIDI_ICBC_global.peers, rank));
}

static void stripe_send_complete(void *ctx, void *user, icbc_status_t status, const char *why)
{
    MPIR_Request *sreq = user;

    if (status != ICBC_OK)
        sreq->status.MPI_ERROR = MPIDI_ICBC_xfer_error(MPIDI_ICBC_AMREQ(sreq).xpeer, why);
    MPIDI_ICBC_proto_send_done(sreq);
}

/* The receiver has the whole message: CONFIRM on the ordered lane (numbered
 * and kept there, so it survives a lost router too). */
static void stripe_confirm(void *ctx, int rank, uint64_t cookie)
{
    MPIDI_ICBC_xfer_send_bare(rank, ICBC_MSG_CONFIRM, cookie);
}

static int stripe_lane_for(void *ctx, int rank)
{
    icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, rank);
    const MPIDI_ICBC_path_ops_t *ops = MPIDI_ICBC_path_of(peer);

    return ops && ops->lane_for ? ops->lane_for(peer) : -1;
}

static int stripe_home_lane(void *ctx, int rank)
{
    icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, rank);
    const MPIDI_ICBC_path_ops_t *ops = MPIDI_ICBC_path_of(peer);

    return ops && ops->home_lane ? ops->home_lane(peer) : -1;
}

static const icbc_stripe_ops_t stripe_ops = {
    .send_chunk = stripe_send_chunk,
    .nlanes = stripe_nlanes,
    .send_complete = stripe_send_complete,
    .recv_complete = MPIDI_ICBC_xrecv_striped_complete,
    .place = MPIDI_ICBC_xrecv_striped_place,
    .confirm = stripe_confirm,
    .lane_for = stripe_lane_for,
    .home_lane = stripe_home_lane,
};

int MPIDI_ICBC_xfer_init(void)
{
    int mpi_errno = MPI_SUCCESS;
    icbc_stripe_config_t cfg = {
        .chunk_size = MPL_MAX(MPIR_CVAR_CH4_ICBC_CHUNK_SIZE, ICBC_STRIPE_CHUNK_MIN),
        .timeout = MPIR_CVAR_CH4_ICBC_XFER_TIMEOUT,
        .failover = MPIDI_ICBC_paths.failover,
    };

    if (icbc_stripe_placement_from_str(MPIR_CVAR_CH4_ICBC_STRIPE_PLACEMENT, &cfg.placement) !=
        ICBC_OK) {
        char why[192];
        snprintf(why, sizeof(why),
                 "MPIR_CVAR_CH4_ICBC_STRIPE_PLACEMENT=%s is not one of window, round-robin, "
                 "adaptive",
                 MPIR_CVAR_CH4_ICBC_STRIPE_PLACEMENT);
        return MPIDI_ICBC_path_cfg_error(why);
    }
    /* adaptive placement over routers: receivers report what each router
     * delivered, so bytes queued in a router count as its load */
    cfg.feedback = cfg.placement == ICBC_STRIPE_PLACE_ADAPTIVE &&
                   MPIDI_ICBC_paths.policy == ICBC_RF_POLICY_AGGREGATE && MPIDI_ICBC_paths.rf;
    memset(&X, 0, sizeof(X));
    X.feedback = cfg.feedback;
    X.threshold = MPL_MAX(MPIR_CVAR_CH4_ICBC_STRIPE_THRESHOLD, 0);
    if (X.threshold > (size_t) MPIR_CVAR_CH4_AM_PACK_BUFFER_SIZE) {
        /* a whole message must fit MPIDIG's unpack buffer at the receiver */
        char why[200];
        snprintf(why, sizeof(why),
                 "MPIR_CVAR_CH4_ICBC_STRIPE_THRESHOLD=%d is above "
                 "MPIR_CVAR_CH4_AM_PACK_BUFFER_SIZE=%d (a message sent whole must fit it)",
                 MPIR_CVAR_CH4_ICBC_STRIPE_THRESHOLD, MPIR_CVAR_CH4_AM_PACK_BUFFER_SIZE);
        return MPIDI_ICBC_path_cfg_error(why);
    }
    MPIR_ERR_CHKANDJUMP(icbc_stripe_create(&cfg, &stripe_ops, NULL, &X.stripe) != ICBC_OK,
                        mpi_errno, MPI_ERR_OTHER, "**nomem");
fn_fail:
    return mpi_errno;
}

void MPIDI_ICBC_xfer_finalize(void)
{
    MPL_free(X.sync_wait);
    icbc_stripe_destroy(X.stripe);
    memset(&X, 0, sizeof(X));
}

/* ---- whole messages and RTS ---------------------------------------------- */

static void ordered_done(void *arg, icbc_status_t status)
{
}

/* Whole messages (and RTS/CTS) on the ordered lane. The payload must stay
 * valid until CB; header-only messages pass cb = NULL. */
int MPIDI_ICBC_xfer_send_ordered(icbc_peer_t *peer, const void *inner, size_t inner_len,
                                 const void *payload, size_t len, MPIDI_ICBC_xdone_cb_t cb,
                                 void *arg)
{
    int busy = 0;
    int mpi_errno;

    if (MPIDI_ICBC_pace_paces(peer)) {
        int held;
        return MPIDI_ICBC_pace_ordered(peer, inner, inner_len, payload, len, cb ? cb : ordered_done,
                                       arg, &held);
    }
    /* The ordered lane queues instead of refusing: order beats back-pressure. */
    mpi_errno = MPIDI_ICBC_path_send(peer, MPIDI_ICBC_LANE_ORDERED, inner, inner_len, payload, len,
                                     cb ? cb : ordered_done, arg, &busy);
    MPIR_Assert(!busy);
    return mpi_errno;
}

static void whole_done(void *arg, icbc_status_t status)
{
    MPIR_Request *sreq = arg;

    if (status != ICBC_OK)
        sreq->status.MPI_ERROR =
            MPIDI_ICBC_xfer_error(MPIDI_ICBC_AMREQ(sreq).xpeer, "message lost on its path");
    MPIDI_ICBC_proto_send_done(sreq);
}

int MPIDI_ICBC_xfer_am_isend(icbc_peer_t *peer, int handler_id, const void *am_hdr,
                             MPI_Aint am_hdr_sz, const void *data, MPI_Aint count,
                             MPI_Datatype datatype, int src_vci, int dst_vci, MPIR_Request *sreq)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_ICBC_am_request_t *amreq = &MPIDI_ICBC_AMREQ(sreq);
    int dt_contig;
    size_t data_sz;
    MPI_Aint dt_true_lb;
    MPIR_Datatype *dt_ptr;
    const char *payload;
    int striped;
    uint64_t inner[ICBC_WIRE_HDR_MAX / 8 + 512];
    size_t inner_len;

    MPIDI_ICBC_ERR_PEER_CHKANDJUMP(peer->state == ICBC_PEER_FAILED, mpi_errno, peer->rank,
                                   "failed earlier");
    MPIR_Assert(am_hdr_sz <= 4096);
    MPIDI_Datatype_get_info(count, datatype, dt_contig, data_sz, dt_ptr, dt_true_lb);
    amreq->handler_id = handler_id;
    amreq->xpeer = peer->rank;

    MPL_pointer_attr_t attr;
    MPIR_GPU_query_pointer_attr(data, &attr);
    if (data_sz == 0) {
        payload = NULL;
    } else if (dt_contig && attr.type != MPL_GPU_POINTER_DEV) {
        payload = MPIR_get_contig_ptr(data, dt_true_lb);
    } else {
        MPI_Aint packed;
        amreq->pack_buf = MPL_malloc(data_sz, MPL_MEM_BUFFER);
        MPIR_ERR_CHKANDJUMP(amreq->pack_buf == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
        mpi_errno = MPIR_Typerep_pack(data, count, datatype, 0, amreq->pack_buf, data_sz, &packed);
        MPIR_ERR_CHECK(mpi_errno);
        MPIR_Assert(packed == (MPI_Aint) data_sz);
        payload = amreq->pack_buf;
    }

    striped = data_sz > 0 && (MPI_Aint) (am_hdr_sz + data_sz) >= X.threshold;
    icbc_am_hdr_t wh = {
        .kind = striped ? ICBC_MSG_RTS : ICBC_MSG_AM,
        .handler_id = (uint16_t) handler_id,
        .src_vci = (uint8_t) src_vci,
        .dst_vci = (uint8_t) dst_vci,
        .am_hdr_sz = (uint16_t) am_hdr_sz,
        .src_rank = (uint32_t) MPIR_Process.rank,
        .data_sz = data_sz,
    };
    inner_len = ICBC_WIRE_HDR_LEN(wh.kind) + am_hdr_sz;

    if (!striped) {
        icbc_am_hdr_pack(&wh, inner);
        memcpy((char *) inner + ICBC_WIRE_HDR_LEN(wh.kind), am_hdr, am_hdr_sz);
        mpi_errno = MPIDI_ICBC_xfer_send_ordered(peer, inner, inner_len, payload, data_sz,
                                                 whole_done, sreq);
        MPIR_ERR_CHECK(mpi_errno);
        goto fn_exit;
    }

    /* RTS: the engine keeps the send until the receiver's CTS names a slot */
    MPIR_ERR_CHKANDJUMP(icbc_stripe_send_start(X.stripe, peer->rank, payload, data_sz, sreq,
                                               icbc_clock_coarse(), &wh.cookie) != ICBC_OK,
                        mpi_errno, MPI_ERR_OTHER, "**nomem");
    icbc_am_hdr_pack(&wh, inner);
    memcpy((char *) inner + ICBC_WIRE_HDR_LEN(wh.kind), am_hdr, am_hdr_sz);
    mpi_errno = MPIDI_ICBC_xfer_send_ordered(peer, inner, inner_len, NULL, 0, NULL, NULL);
    if (mpi_errno) {
        icbc_stripe_send_cancel(X.stripe, wh.cookie);
        MPIR_ERR_CHECK(mpi_errno);
    }

fn_exit:
    return mpi_errno;
fn_fail:
    goto fn_exit;
}

int MPIDI_ICBC_xfer_send_hdr(icbc_peer_t *peer, int handler_id, const void *am_hdr,
                             MPI_Aint am_hdr_sz, int src_vci, int dst_vci)
{
    int mpi_errno = MPI_SUCCESS;
    uint64_t inner[ICBC_WIRE_AM_HDR_SIZE / 8 + 512];

    MPIDI_ICBC_ERR_PEER_CHKANDJUMP(peer->state == ICBC_PEER_FAILED, mpi_errno, peer->rank,
                                   "failed earlier");
    MPIR_Assert(am_hdr_sz <= 4096);
    MPIDI_ICBC_pack_wire(inner, MPIR_Process.rank, handler_id, am_hdr, am_hdr_sz, 0, src_vci,
                         dst_vci);
    mpi_errno = MPIDI_ICBC_xfer_send_ordered(peer, inner, ICBC_WIRE_AM_HDR_SIZE + am_hdr_sz, NULL,
                                             0, NULL, NULL);
fn_fail:
    return mpi_errno;
}

/* ---- sync: delivery confirmed --------------------------------------------- */

int MPIDI_ICBC_xfer_send_bare(int rank, int kind, uint64_t cookie)
{
    uint8_t inner[ICBC_WIRE_HDR_LEN(ICBC_MSG_SYNC)];
    icbc_am_hdr_t wh = {
        .kind = (uint8_t) kind,
        .src_rank = (uint32_t) MPIR_Process.rank,
        .cookie = cookie,
    };

    icbc_am_hdr_pack(&wh, inner);
    return MPIDI_ICBC_xfer_send_ordered(icbc_peer_get(&MPIDI_ICBC_global.peers, rank), inner,
                                        sizeof(inner), NULL, 0, NULL, NULL);
}

/* MPI orders the messages of one pair, nothing more: a notice rank A sends
 * rank C through one router can arrive after a message B sends C through
 * another router, although B sent it because of A's next message (e.g.
 * MPI_Win_complete, then a barrier: C's MPI_Win_test after the barrier
 * must see the epoch complete). A SYNC behind the notices on each pair's
 * ordered lane, and its answer, make the notices delivered before the
 * call that sent them returns. */
int MPIDI_ICBC_xfer_sync(MPIR_Comm *comm, const int *ranks, int n)
{
    int mpi_errno = MPI_SUCCESS;
    int size = MPIDI_ICBC_global.peers.size;

    if (X.sync_wait == NULL) {
        X.sync_wait = MPL_calloc(size, sizeof(*X.sync_wait), MPL_MEM_OTHER);
        MPIR_ERR_CHKANDJUMP(X.sync_wait == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    }
    X.sync_round = X.sync_round + 1 ? X.sync_round + 1 : 1;
    X.sync_pending = 0;
    X.sync_failed = -1;
    for (int i = 0; i < n; i++) {
        icbc_peer_t *peer = MPIDI_ICBC_comm_rank_to_peer(comm, ranks[i]);
        if (peer == NULL || MPIDI_ICBC_path_of(peer) == NULL || peer->rank == MPIR_Process.rank ||
            X.sync_wait[peer->rank] == X.sync_round)
            continue;
        mpi_errno = MPIDI_ICBC_xfer_send_bare(
            peer->rank, ICBC_MSG_SYNC, (uint64_t) X.sync_round << 32 | (uint32_t) peer->rank);
        MPIR_ERR_CHECK(mpi_errno);
        X.sync_wait[peer->rank] = X.sync_round;
        X.sync_pending++;
    }
    while (X.sync_pending > 0) {
        mpi_errno = MPID_Progress_test(NULL);
        MPIR_ERR_CHECK(mpi_errno);
        if (X.sync_failed >= 0)
            MPIDI_ICBC_ERR_PEER_SETANDJUMP(mpi_errno, X.sync_failed,
                                           "lost before it confirmed delivery");
    }
fn_exit:
    return mpi_errno;
fn_fail:
    /* a later round must not count answers of this one */
    for (int r = 0; X.sync_wait && r < size; r++)
        if (X.sync_wait[r] == X.sync_round)
            X.sync_wait[r] = 0;
    X.sync_pending = 0;
    goto fn_exit;
}

/* RANK answered the SYNC of COOKIE (round << 32 | RANK). */
void MPIDI_ICBC_xfer_sync_acked(int rank, uint64_t cookie)
{
    uint32_t round = (uint32_t) (cookie >> 32);

    if (X.sync_wait == NULL || rank >= MPIDI_ICBC_global.peers.size || X.sync_wait[rank] == 0 ||
        X.sync_wait[rank] != round || round != X.sync_round ||
        (uint32_t) cookie != (uint32_t) rank) {
        icbc_warn("dropped a SYNC_ACK from rank %d for no sync waiting for it", rank);
        return;
    }
    X.sync_wait[rank] = 0;
    X.sync_pending--;
}

/* ---- progress and failures --------------------------------------------- */

/* Transfers in flight and receives posted for a peer whose path died end
 * in MPI errors; a receive posted later, or one from MPI_ANY_SOURCE, would
 * wait forever. After a grace period that lets the errors reach the
 * application, the job ends with a message naming the cause (a path is
 * failed only when no way around the loss is left: the routed path's
 * failover moves traffic to the routers that remain). */
#define FAILURE_GRACE_SECONDS 5.0

static void abort_after_failure(void)
{
    char msg[256];

    snprintf(msg, sizeof(msg), "icbc: rank %d: %s; ending the job (no way around the loss)",
             MPIR_Process.rank, X.failure);
    icbc_error("%s; ending the job (no way around the loss)", X.failure);
    fflush(stderr);
    /* the process manager may drop output not yet forwarded when it tears
     * the job down: give this message a moment to get out */
    usleep(500000);
    MPID_Abort(NULL, MPI_ERR_OTHER, 1, msg);
}

void MPIDI_ICBC_xfer_progress(void)
{
    double t = icbc_clock_coarse();

    if (unlikely(X.failed_at > 0) && t - X.failed_at > FAILURE_GRACE_SECONDS &&
        !MPIDI_ICBC_global.finalizing)
        abort_after_failure();
    icbc_stripe_progress(X.stripe, t);
}

void MPIDI_ICBC_xfer_peer_failed(int rank, const char *why)
{
    icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, rank);

    if (peer == NULL)
        return;
    if (peer->state != ICBC_PEER_FAILED && !MPIDI_ICBC_global.finalizing) {
        icbc_error("lost its path to rank %d (node %s): %s", rank, peer->node, why);
        if (X.failed_at == 0) {
            X.failed_at = icbc_clock_coarse();
            snprintf(X.failure, sizeof(X.failure), "lost the path to rank %d (node %s): %s", rank,
                     peer->node, why);
        }
    }
    peer->state = ICBC_PEER_FAILED;
    MPIDI_ICBC_fail_posted_recvs(rank, MPIDI_ICBC_xfer_error(rank, why));
    if (X.sync_wait && X.sync_wait[rank] != 0 && X.sync_wait[rank] == X.sync_round) {
        X.sync_wait[rank] = 0;
        X.sync_pending--;
        X.sync_failed = rank;
    }
    icbc_stripe_peer_failed(X.stripe, rank, why);
}

/* Feedback: BYTES of RANK's chunks arrived by its LANE. */
void MPIDI_ICBC_xfer_send_delivered(int rank, int lane, size_t bytes)
{
    uint8_t inner[ICBC_WIRE_HDR_LEN(ICBC_MSG_DELIVERED)];
    icbc_am_hdr_t wh = {
        .kind = ICBC_MSG_DELIVERED,
        .src_rank = (uint32_t) MPIR_Process.rank,
        .lane = (uint16_t) lane,
        .bytes = bytes,
    };
    icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, rank);
    int busy;

    if (peer == NULL || peer->path != ICBC_PATH_ROUTED || peer->state == ICBC_PEER_FAILED)
        return;
    icbc_am_hdr_pack(&wh, inner);
    MPIDI_ICBC_path_send(peer, MPIDI_ICBC_LANE_CONTROL, inner, sizeof(inner), NULL, 0, ordered_done,
                         NULL, &busy);
}

void MPIDI_ICBC_xfer_lane_lost(int lane)
{
    icbc_stripe_lane_lost(X.stripe, lane, icbc_clock_coarse());
}

void MPIDI_ICBC_xfer_lane_revived(int lane)
{
    icbc_stripe_lane_revived(X.stripe, lane);
}

void MPIDI_ICBC_xfer_dump(FILE *f)
{
    icbc_stripe_dump(X.stripe, f, icbc_clock_coarse());
    fprintf(f, "  free list: %llu slab(s) of chunk receives\n",
            (unsigned long long) MPIDI_ICBC_xrecv_pull_slabs());
}

const MPIDI_ICBC_path_up_t MPIDI_ICBC_xfer_up = {
    .recv_begin = MPIDI_ICBC_xrecv_begin,
    .recv_end = MPIDI_ICBC_xrecv_end,
    .recv_whole = MPIDI_ICBC_xrecv_whole,
    .recv_fabric = MPIDI_ICBC_xrecv_fabric,
    .peer_failed = MPIDI_ICBC_xfer_peer_failed,
    .lane_lost = MPIDI_ICBC_xfer_lane_lost,
    .lane_revived = MPIDI_ICBC_xfer_lane_revived,
};

const MPIDI_ICBC_proto_t MPIDI_ICBC_proto_icbc = {
    .name = "icbc",
    .am_isend = MPIDI_ICBC_xfer_am_isend,
    .send_hdr = MPIDI_ICBC_xfer_send_hdr,
    .matched = MPIDI_ICBC_xfer_matched,
};

/* ==== receive side ======================================================== */

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
