/*
 * Messages on the routed and TCP paths, send side, and the MPI glue of the
 * striping engine (src/icbc/stripe.c): whole messages and RTS leave on the
 * pair's ordered lane; the engine cuts a striped payload into chunks once
 * the CTS arrived, and its completions end MPI requests here. The receive
 * side is icbc_xrecv.c; the protocol is described in icbc_xfer.h.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_xfer.h"
#include "icbc_pacing.h"

#include <unistd.h>

/*
=== BEGIN_MPI_T_CVAR_INFO_BLOCK ===

cvars:
    - name        : MPIR_CVAR_CH4_ICBC_STRIPE_THRESHOLD
      category    : CH4_ICBC
      type        : int
      default     : 65536
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Messages to other clusters (and all TCP-path messages) whose MPI header
        plus payload are below this many bytes travel whole on the fixed path
        of the process pair; larger ones use the rendezvous and are striped in
        chunks over all routers of the cluster. At most
        MPIR_CVAR_CH4_AM_PACK_BUFFER_SIZE (a whole message must fit the
        receiver's unpack buffer). A striped message pays a round trip across
        the WAN for its rendezvous, which a message of one chunk or less does
        not win back.

    - name        : MPIR_CVAR_CH4_ICBC_CHUNK_SIZE
      category    : CH4_ICBC
      type        : int
      default     : 262144
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        Bytes per chunk of a striped message (at least 4096). Each chunk
        carries its offset in the receive buffer and may take any router.

    - name        : MPIR_CVAR_CH4_ICBC_XFER_TIMEOUT
      category    : CH4_ICBC
      type        : int
      default     : 20
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        Seconds a striped transfer may wait while nothing at all arrives
        from its peer (no CTS, no chunk, no other message) before it fails
        with an MPI error, e.g. when a router died with chunks in flight.
        Transfers queued behind others on a busy path do not count as
        stalled. Also how long a router of this cluster may say nothing
        (a live one speaks every second) before it counts as lost, with
        the same consequence as a router that died. 0 disables both
        checks.

    - name        : MPIR_CVAR_CH4_ICBC_STRIPE_PLACEMENT
      category    : CH4_ICBC
      type        : string
      default     : "adaptive"
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        Which router each chunk of a striped message takes. "adaptive" (the
        default): the router that would deliver the chunk first, from the
        bytes it holds and the rate it delivered lately, as the receivers
        report them; a router with a quarter of the others' bandwidth gets
        about a quarter of their share, one that stalls gets none until it
        moves again. "window": the next in turn, passing over a router whose
        window of chunks in flight is full. "round-robin": strictly in turn,
        every router the same share (the slowest sets the pace).

=== END_MPI_T_CVAR_INFO_BLOCK ===
*/

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

static void chunk_lane_done(void *arg, int ok)
{
    icbc_stripe_chunk_sent(X.stripe, (uint64_t) (uintptr_t) arg, ok, icbc_clock_coarse());
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
    MPIDI_ICBC_am_isend_done_common(sreq);
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

static void ordered_done(void *arg, int ok)
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

static void whole_done(void *arg, int ok)
{
    MPIR_Request *sreq = arg;

    if (!ok)
        sreq->status.MPI_ERROR =
            MPIDI_ICBC_xfer_error(MPIDI_ICBC_AMREQ(sreq).xpeer, "message lost on its path");
    MPIDI_ICBC_am_isend_done_common(sreq);
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
    fprintf(f, "  free lists: %llu slab(s) of send completions, %llu of chunk receives\n",
            (unsigned long long) MPIDI_ICBC_path_done_slabs(),
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
