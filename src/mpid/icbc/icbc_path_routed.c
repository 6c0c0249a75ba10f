/*
 * The routed path: messages to another cluster through the routers of both
 * clusters (mx_client over UCX to the routers of this one). Its lanes are
 * the routers of this cluster. The pair's ordered lane is one fixed router,
 * (own rank) mod R under both policies; chunks go over all routers
 * (aggregate) or the fixed one (static). The sender's rank alone spreads
 * the processes of a cluster evenly over its routers whatever their
 * partners are: (src + dst) mod R put every pair (i, i + M) of a job of
 * 2M ranks on the even routers (CG's and MG's partners across clusters).
 *
 * Failover (MPIDI_ICBC_paths.failover): a router is usable while it is
 * registered, reports every cluster reachable, and sent no UNREACHABLE in
 * the last second. The fixed router is the first usable one from the
 * policy's choice on, so a pair moves when its router is lost. Ordered
 * messages are numbered per pair and kept until the receiver acknowledges
 * them (core/icbc_seq.h); when a router stops being usable, the kept
 * messages that went by it go again by the pair's new fixed router and the
 * striping engine sends again the unconfirmed chunks it carried. The
 * receiver delivers each number once, in order. With no usable router for
 * FAILOVER_GRACE seconds, the transfers to other clusters fail.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_path.h"
#include "core/icbc_seq.h"
#include "mx_router/mx_client.h"

#define P MPIDI_ICBC_paths

/* No usable router for this long: transfers to other clusters fail (a
 * restarted router may come back within it). */
#define FAILOVER_GRACE 5.0
/* A router that sent an UNREACHABLE back is not used for this long. */
#define UNREACHABLE_BACKOFF 1.0
/* Lost routers are registered again this often. */
#define RECONNECT_MS 1000

static struct {
    mx_client_t *mx;
    icbc_seq_t *seq;       /* failover: numbered ordered lanes */
    uint64_t *unreach;     /* per router: clusters it reports unreachable (bit each) */
    double *backoff_until; /* per router: an UNREACHABLE came back through it */
    uint64_t lanes_up;     /* routers the engine and the pairs use (bit each) */
    uint64_t pace;         /* bits/s this process sends to other clusters at (MATB); 0: off */
    int lanes_dirty;       /* something changed: look again in progress */
    double none_since;     /* no router usable since then; 0: one is */
    int failed_all;        /* transfers to other clusters were failed */
    uint64_t failovers;    /* routers that stopped being usable */
    uint64_t revivals;     /* routers usable again */
    uint64_t resent;       /* ordered messages sent again */
    uint64_t unreachable;  /* UNREACHABLE received */
} routed;

static const MPIDI_ICBC_path_up_t *above; /* the layer above */

/* ---- lanes -------------------------------------------------------------- */

static int router_usable(int k, double now)
{
    return mx_client_router_alive(routed.mx, k) && routed.unreach[k] == 0 &&
           now >= routed.backoff_until[k];
}

/* The pair's router to PEER, or with failover the first usable one from
 * it on; -1 when none is. */
static int fixed_router(icbc_peer_t *peer)
{
    int base = MPIR_Process.rank % P.nrouters;
    if (!P.failover)
        return base;
    for (int i = 0; i < P.nrouters; i++) {
        int r = (base + i) % P.nrouters;
        if ((routed.lanes_up >> r) & 1 && mx_client_router_alive(routed.mx, r))
            return r;
    }
    return -1;
}

static int routed_nlanes(icbc_peer_t *peer)
{
    return P.policy == ICBC_RF_POLICY_AGGREGATE || P.failover ? P.nrouters : 1;
}

/* Static with failover: every chunk takes the process's fixed router. */
static int routed_lane_for(icbc_peer_t *peer)
{
    return P.failover && P.policy == ICBC_RF_POLICY_STATIC ? fixed_router(peer) : -1;
}

/* A striped message of one chunk takes the sender's router under aggregate
 * too: in IS's Alltoallv (8 messages of 131 KB per rank across clusters at
 * 16 ranks, R = 2) placing each by the lanes' load ran 0.82 x static, in
 * turn 0.90 x (benchmarks/results/apps/aggregate-router-2009). */
static int routed_home_lane(icbc_peer_t *peer)
{
    return fixed_router(peer);
}

static int router_error(icbc_peer_t *peer, int router, const char *why)
{
    if (router < 0)
        return MPIDI_ICBC_ERR_PEER(peer->rank, "no router of this cluster is left to reach it");
    return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                MPI_ERR_OTHER, "**icbc_router", "**icbc_router %d %s", router, why);
}

/* Sends INNER and PAYLOAD to PEER through ROUTER on LANE: the router
 * client writes the route header. */
static icbc_status_t via_router(int router, const icbc_peer_t *peer, int lane, const void *inner,
                                size_t inner_len, const void *payload, size_t len,
                                MPIDI_ICBC_xdone_cb_t cb, void *arg)
{
    return mx_client_send(routed.mx, router, (uint16_t) (peer->cluster < 0 ? 0 : peer->cluster),
                          (uint32_t) peer->rank,
                          lane == MPIDI_ICBC_LANE_ORDERED ? ICBC_ROUTE_F_ORDERED : 0, inner,
                          inner_len, payload, len, cb, arg);
}

/* ---- numbered ordered lane (failover) ---------------------------------- */

/* A send of kept message M completed: the caller's completion runs at the
 * first (M holds a copy, so the caller's payload is free). */
static void numbered_sent(void *arg, icbc_status_t status)
{
    icbc_seq_msg_t *m = arg;
    MPIDI_ICBC_xdone_cb_t cb = m->user_cb;

    if (cb) {
        m->user_cb = NULL;
        cb(m->user_arg, ICBC_OK);
    }
    icbc_seq_send_done(routed.seq, m);
}

/* Posts kept message M to its peer through router M->route. A send that
 * fails here leaves M kept: the loss of its router sends it again. */
static void numbered_post(icbc_seq_msg_t *m)
{
    icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, m->peer);

    if (via_router(m->route, peer, MPIDI_ICBC_LANE_ORDERED, m->hdr, m->hdr_len, m->payload, m->len,
                   numbered_sent, m) != ICBC_OK)
        numbered_sent(m, ICBC_ERR_PEER_FAILED);
}

static int numbered_send(icbc_peer_t *peer, const void *inner, size_t inner_len,
                         const void *payload, size_t len, MPIDI_ICBC_xdone_cb_t cb, void *arg)
{
    int router = fixed_router(peer);
    icbc_seq_msg_t *m;

    if (router < 0)
        return router_error(peer, router, NULL);
    m = icbc_seq_keep(routed.seq, peer->rank, router, inner, inner_len, payload, len);
    if (m == NULL)
        return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                    MPI_ERR_OTHER, "**nomem", 0);
    icbc_am_hdr_set_seq(m->hdr, m->seq);
    m->user_cb = cb;
    m->user_arg = arg;
    numbered_post(m);
    return MPI_SUCCESS;
}

/* for_each_kept: M goes again by its peer's fixed router now. */
static int numbered_resend(void *arg, icbc_seq_msg_t *m)
{
    int router = fixed_router(icbc_peer_get(&MPIDI_ICBC_global.peers, m->peer));

    if (router < 0)
        return 1;
    m->route = router;
    m->sends++;
    routed.resent++;
    numbered_post(m);
    return 0;
}

static void send_ack(int rank, uint32_t upto)
{
    icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, rank);
    uint8_t inner[ICBC_WIRE_HDR_LEN(ICBC_MSG_ACK)];
    icbc_am_hdr_t wh = {
        .kind = ICBC_MSG_ACK,
        .src_rank = (uint32_t) MPIR_Process.rank,
        .acked = upto,
    };
    int router = fixed_router(peer);

    if (router < 0 || peer->state == ICBC_PEER_FAILED)
        return; /* a later acknowledgement covers this one */
    icbc_am_hdr_pack(&wh, inner);
    via_router(router, peer, MPIDI_ICBC_LANE_ORDERED, inner, sizeof(inner), NULL, 0, NULL, NULL);
}

static int routed_send(icbc_peer_t *peer, int lane, const void *inner, size_t inner_len,
                       const void *payload, size_t len, MPIDI_ICBC_xdone_cb_t cb, void *arg,
                       int *busy)
{
    int ordered = (lane == MPIDI_ICBC_LANE_ORDERED);
    int router;
    icbc_status_t st;

    *busy = 0;
    if (peer->state == ICBC_PEER_FAILED)
        return MPIDI_ICBC_ERR_PEER(peer->rank, "failed earlier");
    if (ordered && P.failover)
        return numbered_send(peer, inner, inner_len, payload, len, cb, arg);
    if (ordered || lane == MPIDI_ICBC_LANE_CONTROL ||
        (P.policy == ICBC_RF_POLICY_STATIC && !P.failover)) {
        router = fixed_router(peer);
    } else {
        router = lane;
        if (P.failover &&
            (!((routed.lanes_up >> lane) & 1) || !mx_client_router_alive(routed.mx, lane))) {
            /* lost since the engine chose it (or just now, not yet seen by
             * lanes_update): the engine learns in progress */
            routed.lanes_dirty = 1;
            *busy = 1;
            return MPI_SUCCESS;
        }
        /* a chunk waits in the engine, not behind this router's window: the
         * placement then chooses among the routers that take chunks now */
        if (mx_client_would_wait(routed.mx, router, len)) {
            *busy = 1;
            return MPI_SUCCESS;
        }
    }
    if (router < 0)
        return router_error(peer, router, NULL);
    st = via_router(router, peer, lane, inner, inner_len, payload, len, cb, arg);
    if (st != ICBC_OK) {
        if (P.failover && lane >= 0 && st == ICBC_ERR_PEER_FAILED) {
            routed.lanes_dirty = 1; /* a chunk waits for the lane's loss to be seen */
            *busy = 1;
            return MPI_SUCCESS;
        }
        return router_error(peer, router, icbc_status_str(st));
    }
    return MPI_SUCCESS;
}

/* Tells the routers their shares of this process's pace: all of it to the
 * fixed router under static, an equal part to each usable one under
 * aggregate (the chunks are spread over them). */
static void pace_routers(void)
{
    int usable = 0, fixed = -1;

    if (routed.mx == NULL)
        return;
    for (int k = 0; k < P.nrouters; k++)
        usable += (routed.lanes_up >> k) & 1;
    if (P.policy == ICBC_RF_POLICY_STATIC) {
        icbc_peer_t self = { .rank = MPIR_Process.rank };
        fixed = fixed_router(&self);
    }
    for (int k = 0; k < P.nrouters; k++) {
        uint64_t share = 0;
        if (routed.pace > 0 && (routed.lanes_up >> k) & 1)
            share = fixed >= 0 ? (k == fixed ? routed.pace : 0)
                               : routed.pace / (uint64_t) (usable ? usable : 1);
        mx_client_pace(routed.mx, k, share);
    }
}

static void routed_set_pacing(uint64_t bits_per_s)
{
    routed.pace = bits_per_s;
    pace_routers();
}

/* A router changed: which are usable now. One that stopped being usable
 * takes its chunks and kept messages with it (sent again by the others);
 * one usable again carries chunks again. */
static void lanes_update(double now)
{
    uint64_t up = 0;

    routed.lanes_dirty = 0;
    for (int k = 0; k < P.nrouters; k++) {
        if (routed.backoff_until[k] > 0 && now >= routed.backoff_until[k])
            routed.backoff_until[k] = 0;
        if (router_usable(k, now))
            up |= (uint64_t) 1 << k;
        else if (routed.backoff_until[k] > 0)
            routed.lanes_dirty = 1; /* look again when it ends */
    }
    uint64_t lost = routed.lanes_up & ~up, back = up & ~routed.lanes_up;
    routed.lanes_up = up;
    for (int k = 0; k < P.nrouters; k++) {
        if ((back >> k) & 1) {
            routed.revivals++;
            icbc_info("router %d of this cluster carries traffic again", k);
            above->lane_revived(k);
        }
    }
    for (int k = 0; k < P.nrouters; k++) {
        if (!((lost >> k) & 1))
            continue;
        routed.failovers++;
        icbc_warn("router %d of this cluster is not usable (%s); its traffic moves to the others",
                  k,
                  !mx_client_router_alive(routed.mx, k) ? "lost"
                  : routed.unreach[k]                   ? "reports a cluster unreachable"
                                                        : "sent messages back unreachable");
        above->lane_lost(k);
        for (int r = 0; r < MPIDI_ICBC_global.peers.size && up; r++)
            if (icbc_seq_kept_count(routed.seq, r) > 0)
                icbc_seq_for_each_kept(routed.seq, r, k, numbered_resend, NULL);
    }
    if ((lost | back) && routed.pace > 0)
        pace_routers(); /* the shares move with the traffic */
    if (up == 0 && routed.none_since == 0 && !routed.failed_all) {
        routed.none_since = now;
        icbc_error("no router of this cluster is usable; transfers to other clusters fail in "
                   "%.0f s unless one comes back",
                   FAILOVER_GRACE);
    } else if (up != 0) {
        routed.none_since = 0;
    }
}

/* Every router lost for the grace period: the peers in other clusters fail
 * (their MPI errors name each peer's cluster, MPIDI_ICBC_xfer_error). */
static void fail_all(void)
{
    routed.failed_all = 1;
    for (int r = 0; r < MPIDI_ICBC_global.peers.size; r++) {
        icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, r);
        if (peer->path != ICBC_PATH_ROUTED || peer->state == ICBC_PEER_FAILED)
            continue;
        /* one static reason: the engine keeps the pointer */
        above->peer_failed(r, "no router of this cluster reached its cluster for 5 s");
        icbc_seq_peer_reset(routed.seq, r);
    }
}

/* ---- routed receive ----------------------------------------------------- */

/* Numbered message SEQ_NO from SRC, its payload in memory: delivered once,
 * in order (held when early). */
static void numbered_arrived(int src, uint32_t seq_no, const void *inner, size_t inner_len,
                             const void *data, size_t len)
{
    double now = icbc_clock_coarse();
    icbc_seq_msg_t *h;

    switch (icbc_seq_arrived(routed.seq, src, seq_no, now)) {
    case ICBC_SEQ_DELIVER:
        above->recv_whole(src, inner, inner_len, data, len);
        while ((h = icbc_seq_ready(routed.seq, src, now)) != NULL) {
            above->recv_whole(src, h->hdr, h->hdr_len, h->payload, h->len);
            icbc_seq_release(routed.seq, h);
        }
        break;
    case ICBC_SEQ_EARLY:
        if (icbc_seq_hold(routed.seq, src, seq_no, inner, inner_len, data, len) != ICBC_OK)
            icbc_error("no memory to hold an early message from rank %d", src);
        break;
    case ICBC_SEQ_DUPLICATE: break;
    case ICBC_SEQ_INVALID:
        icbc_warn("dropped a message from rank %d numbered %u (out of its window)", src, seq_no);
        break;
    }
}

/* A numbered message whose payload the router sent by rendezvous: pulled
 * first, numbered once it is in memory (a pull broken by a lost router
 * counts as never arrived: the sender sends it again). */
typedef struct {
    int src;
    uint32_t seq;
    size_t len, inner_len;
    void *data;
    uint8_t inner[];
} numbered_pull_t;

static void numbered_pulled(void *arg, icbc_status_t status)
{
    numbered_pull_t *np = arg;

    if (status == ICBC_OK)
        numbered_arrived(np->src, np->seq, np->inner, np->inner_len, np->data, np->len);
    MPL_free(np->data);
    MPL_free(np);
}

static int numbered_receive(const mx_client_msg_t *m, int src, uint32_t seq_no)
{
    numbered_pull_t *np;

    if (!m->rndv) {
        numbered_arrived(src, seq_no, m->inner, m->inner_len, m->data, m->len);
        return 0;
    }
    np = MPL_malloc(sizeof(*np) + m->inner_len, MPL_MEM_BUFFER);
    if (np == NULL)
        return 0;
    np->data = MPL_malloc(m->len ? m->len : 1, MPL_MEM_BUFFER);
    if (np->data == NULL) {
        MPL_free(np);
        return 0;
    }
    np->src = src;
    np->seq = seq_no;
    np->len = m->len;
    np->inner_len = m->inner_len;
    memcpy(np->inner, m->inner, m->inner_len);
    if (mx_client_recv_data(routed.mx, m->data, np->data, m->len, numbered_pulled, np) != ICBC_OK) {
        MPL_free(np->data);
        MPL_free(np);
        return 0;
    }
    return 1;
}

static int mx_on_msg(const mx_client_msg_t *m, void *arg)
{
    const icbc_route_hdr_t *rh = &m->route;
    uint8_t kind;
    uint32_t seq_no;

    if (rh->job != P.job || rh->dst_rank != (uint32_t) MPIR_Process.rank ||
        rh->src_rank >= (uint32_t) MPIDI_ICBC_global.peers.size) {
        icbc_warn("dropped a routed message for job %016llx rank %u", (unsigned long long) rh->job,
                  rh->dst_rank);
        return 0; /* not kept: UCX drops a rendezvous descriptor itself */
    }
    if (rh->type == ICBC_ROUTE_UNREACHABLE) {
        icbc_route_hdr_t lost;
        if (m->inner_len < ICBC_ROUTE_HDR_SIZE ||
            icbc_route_hdr_parse(m->inner, m->inner_len, &lost) != ICBC_OK)
            return 0;
        routed.unreachable++;
        if (P.failover) {
            /* the way through that router is broken: what went by it goes
             * again by the others */
            routed.backoff_until[m->router] = icbc_clock_coarse() + UNREACHABLE_BACKOFF;
            routed.lanes_dirty = 1;
        } else {
            above->peer_failed((int) lost.dst_rank, "a router reports it unreachable");
        }
        return 0;
    }
    if (P.failover && (rh->flags & ICBC_ROUTE_F_ORDERED) &&
        icbc_am_hdr_peek(m->inner, m->inner_len, &kind, &seq_no) == ICBC_OK) {
        if (kind == ICBC_MSG_ACK) {
            icbc_am_hdr_t wh;
            if (icbc_am_hdr_parse(m->inner, m->inner_len, 1, MPIDI_ICBC_global.peers.size, &wh) ==
                    ICBC_OK &&
                wh.src_rank == rh->src_rank)
                icbc_seq_acked(routed.seq, (int) rh->src_rank, wh.acked);
            return 0;
        }
        if (seq_no != 0)
            return numbered_receive(m, (int) rh->src_rank, seq_no);
    }
    return above->recv_fabric((int) rh->src_rank, m->inner, m->inner_len, m->data, m->len, m->rndv);
}

static void mx_on_router_lost(int router, icbc_status_t status, void *arg)
{
    if (MPIDI_ICBC_global.finalizing)
        return;
    if (P.failover) {
        routed.lanes_dirty = 1; /* handled in progress, outside UCX's callback */
        return;
    }
    icbc_error("lost router %d of its cluster: %s; transfers to other clusters fail", router,
               icbc_status_str(status));
    for (int r = 0; r < MPIDI_ICBC_global.peers.size; r++) {
        icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, r);
        if (peer->path == ICBC_PATH_ROUTED)
            above->peer_failed(r, "one of the routers of this cluster died");
    }
}

static void mx_on_router_back(int router, void *arg)
{
    routed.unreach[router] = 0; /* it tells again what it cannot reach */
    routed.backoff_until[router] = 0;
    routed.lanes_dirty = 1;
}

/* A router of this cluster lost (or regained) every trunk to CLUSTER. With
 * failover it is not used while it cannot reach a cluster; without, the
 * peers there are lost, also to a process that only waits for them. */
static void mx_on_cluster_state(int router, uint16_t cluster, int reachable, void *arg)
{
    const char *name;
    int n = 0;

    if (MPIDI_ICBC_global.finalizing)
        return;
    if (P.failover) {
        uint64_t bit = (uint64_t) 1 << (cluster % 64);
        routed.unreach[router] =
            reachable ? routed.unreach[router] & ~bit : routed.unreach[router] | bit;
        routed.lanes_dirty = 1;
        return;
    }
    if (reachable)
        return;
    name = cluster < icbc_routerfile_num_clusters(P.rf)
               ? icbc_routerfile_cluster(P.rf, cluster)->name
               : "?";
    for (int r = 0; r < MPIDI_ICBC_global.peers.size; r++) {
        icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, r);
        if (peer->path == ICBC_PATH_ROUTED && peer->cluster == (int) cluster &&
            peer->state != ICBC_PEER_FAILED) {
            if (n++ == 0)
                icbc_error("router %d of its cluster reports cluster %s unreachable (every "
                           "trunk there lost)",
                           router, name);
            above->peer_failed(r, "its cluster is unreachable through the routers");
        }
    }
}

/* ---- set-up and the rest of the interface -------------------------------- */

/* Registers this process with the routers of its cluster. */
int MPIDI_ICBC_path_routed_open(const MPIDI_ICBC_path_up_t *above_)
{
    char err[ICBC_RF_ERR_LEN + 128];

    above = above_;
    const icbc_rf_cluster_t *cl = icbc_routerfile_cluster(P.rf, P.cluster);
    mx_client_params_t mp = {
        .fabric = MPIDI_ICBC_global.fabric,
        .routers = cl->routers,
        .nrouters = cl->nrouters,
        .cluster = (uint16_t) P.cluster,
        .job = P.job,
        .rank = (uint32_t) MPIR_Process.rank,
        .key = P.key,
        .keylen = P.keylen,
        .timeout_ms = 15000,
        /* whole messages must stay eager on the way to the router: a
         * pulled one could be overtaken by the next */
        .rndv_thresh = (size_t) MPL_MAX(MPIR_CVAR_CH4_ICBC_STRIPE_THRESHOLD, 0) + 4096,
        .rndv_window = MPL_MAX(MPIR_CVAR_CH4_ICBC_ROUTED_WINDOW, 1),
        /* a router that says nothing for a transfer timeout is lost */
        .silence_ms = MPL_MAX(MPIR_CVAR_CH4_ICBC_XFER_TIMEOUT, 0) * 1000,
        .on_msg = mx_on_msg,
        .reconnect_ms = P.failover ? RECONNECT_MS : 0,
        .on_router_lost = mx_on_router_lost,
        .on_router_back = mx_on_router_back,
        .on_cluster_state = mx_on_cluster_state,
    };
    if (P.keylen == 0) {
        snprintf(err, sizeof(err), "%s: routed policies need a 'key' line",
                 icbc_routerfile_name(P.rf));
        return MPIDI_ICBC_path_cfg_error(err);
    }
    if (P.nrouters > 64)
        return MPIDI_ICBC_path_cfg_error("more than 64 routers in a cluster");
    routed.unreach = MPL_calloc(P.nrouters, sizeof(*routed.unreach), MPL_MEM_OTHER);
    routed.backoff_until = MPL_calloc(P.nrouters, sizeof(*routed.backoff_until), MPL_MEM_OTHER);
    if (routed.unreach == NULL || routed.backoff_until == NULL)
        return MPIDI_ICBC_path_cfg_error("out of memory");
    if (P.failover) {
        icbc_seq_config_t sc = { .npeers = MPIDI_ICBC_global.peers.size };
        if (icbc_seq_create(&sc, &routed.seq) != ICBC_OK)
            return MPIDI_ICBC_path_cfg_error("out of memory");
    }
    routed.lanes_up = P.nrouters == 64 ? ~0ull : ((uint64_t) 1 << P.nrouters) - 1;
    if (mx_client_create(&mp, &routed.mx, err, sizeof(err)) != ICBC_OK)
        return MPIDI_ICBC_path_cfg_error(err);
    const char *hosts[64], *told[64];
    for (int k = 0; k < P.nrouters; k++) {
        hosts[k] = cl->routers[k].host;
        told[k] = mx_client_router_cpus(routed.mx, k);
    }
    MPIDI_ICBC_router_embed_place_told(hosts, told, P.nrouters);
    /* with failover a router down at start is left out until it registers:
     * the first progress finds it lost, as if it had died */
    for (int k = 0; k < P.nrouters; k++)
        if (!mx_client_router_alive(routed.mx, k))
            routed.lanes_dirty = 1;
    /* an RTS carries the MPI header after a longer wire header */
    size_t mi = mx_client_max_inner(routed.mx);
    if (mi < ICBC_WIRE_HDR_LEN(ICBC_MSG_RTS) + 256)
        return MPIDI_ICBC_path_cfg_error("the routers' UCX header limit is too small");
    MPIDI_ICBC_global.max_am_header =
        MPL_MIN(MPIDI_ICBC_global.max_am_header, mi - ICBC_WIRE_EXT_MAX);
    return MPI_SUCCESS;
}

static int routed_active(void)
{
    return routed.mx != NULL;
}

static int routed_progress(void)
{
    double now;
    int peer;
    uint32_t upto;

    if (routed.mx == NULL)
        return 0;
    mx_client_watch(routed.mx);
    if (!P.failover || MPIDI_ICBC_global.finalizing)
        return 0;
    now = icbc_clock_coarse();
    if (routed.lanes_dirty)
        lanes_update(now);
    while (icbc_seq_take_ack(routed.seq, now, &peer, &upto))
        send_ack(peer, upto);
    if (routed.none_since > 0 && now - routed.none_since > FAILOVER_GRACE && !routed.failed_all)
        fail_all();
    return 0;
}

/* Every acknowledgement owed goes now (a peer about to finalize waits for
 * them), and whether every numbered message this process sent to a peer
 * that has not failed was acknowledged. */
static int routed_settled(void)
{
    int peer;
    uint32_t upto;

    if (routed.seq == NULL)
        return 1;
    while (icbc_seq_take_ack(routed.seq, 1e300, &peer, &upto))
        send_ack(peer, upto);
    for (int r = 0; r < MPIDI_ICBC_global.peers.size; r++)
        if (icbc_seq_kept_count(routed.seq, r) > 0 &&
            icbc_peer_get(&MPIDI_ICBC_global.peers, r)->state != ICBC_PEER_FAILED)
            return 0;
    return 1;
}

static void routed_dump(FILE *f)
{
    mx_client_dump(routed.mx, f);
    if (routed.seq) {
        icbc_seq_stats_t ss;
        icbc_seq_stats(routed.seq, &ss);
        fprintf(f,
                "  failover: routers usable 0x%llx, failovers %llu, back %llu, UNREACHABLE %llu; "
                "ordered messages kept %llu (%llu bytes), sent again %llu, held early %llu, "
                "duplicates %llu, acks sent %llu received %llu\n",
                (unsigned long long) routed.lanes_up, (unsigned long long) routed.failovers,
                (unsigned long long) routed.revivals, (unsigned long long) routed.unreachable,
                (unsigned long long) ss.kept, (unsigned long long) ss.kept_bytes,
                (unsigned long long) routed.resent, (unsigned long long) ss.held_now,
                (unsigned long long) ss.duplicates, (unsigned long long) ss.acks_sent,
                (unsigned long long) ss.acks_received);
    }
}

static void routed_finalize(void)
{
    if (routed.mx)
        mx_client_destroy(routed.mx);
    /* after the client: its last completions may still name kept messages */
    icbc_seq_destroy(routed.seq);
    MPL_free(routed.unreach);
    MPL_free(routed.backoff_until);
    memset(&routed, 0, sizeof(routed));
}

const MPIDI_ICBC_path_ops_t MPIDI_ICBC_path_routed_ops = {
    .name = "routed",
    .send = routed_send,
    .nlanes = routed_nlanes,
    .active = routed_active,
    .progress = routed_progress,
    .dump = routed_dump,
    .finalize = routed_finalize,
    .lane_for = routed_lane_for,
    .home_lane = routed_home_lane,
    .settled = routed_settled,
    .set_pacing = routed_set_pacing,
};
