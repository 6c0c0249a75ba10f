/*
 * The routed path: messages to another cluster through the routers of both
 * clusters (mx_client over UCX to the routers of this one). Its lanes are
 * the routers of this cluster. The pair's ordered lane is one fixed router:
 * (src + dst) mod R under policy aggregate, (own rank) mod R under static;
 * chunks go over all routers (aggregate) or the fixed one (static).
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_xfer.h"
#include "mx_router/mx_client.h"

/*
=== BEGIN_MPI_T_CVAR_INFO_BLOCK ===

cvars:
    - name        : MPIR_CVAR_CH4_ICBC_ROUTED_WINDOW
      category    : CH4_ICBC
      type        : int
      default     : 32
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        Chunks (rendezvous sends) a process keeps in flight to each router
        of its cluster. A router holds a UCX descriptor for every announced
        chunk until it pulls the payload, so this bounds what one process
        makes a router hold; later sends to that router wait in the process,
        in order.

=== END_MPI_T_CVAR_INFO_BLOCK ===
*/

#define P MPIDI_ICBC_paths

static struct {
    mx_client_t *mx;
} routed;

/* ---- lanes -------------------------------------------------------------- */

static int fixed_router(icbc_peer_t *peer)
{
    if (P.policy == ICBC_RF_POLICY_STATIC)
        return MPIR_Process.rank % P.nrouters;
    return (MPIR_Process.rank + peer->rank) % P.nrouters;
}

static int routed_nlanes(icbc_peer_t *peer)
{
    return P.policy == ICBC_RF_POLICY_AGGREGATE ? P.nrouters : 1;
}

static int routed_send(icbc_peer_t *peer, int lane, const void *inner, size_t inner_len,
                       const void *payload, size_t len, MPIDI_ICBC_xdone_cb_t cb, void *arg,
                       int *busy)
{
    int ordered = (lane == MPIDI_ICBC_LANE_ORDERED);
    int router = ordered || P.policy == ICBC_RF_POLICY_STATIC ? fixed_router(peer) : lane;
    icbc_route_hdr_t rh;
    MPIDI_ICBC_path_done_t *d;
    icbc_status_t st;

    *busy = 0;
    if (peer->state == ICBC_PEER_FAILED)
        return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                    MPI_ERR_OTHER, "**icbc_peer", "**icbc_peer %d %s", peer->rank,
                                    "failed earlier");
    MPIDI_ICBC_path_route_hdr(peer, lane, inner_len, len, &rh);
    d = MPIDI_ICBC_path_done_new(cb, arg);
    st = mx_client_send(routed.mx, router, rh.dst_cluster, rh.dst_rank, rh.flags, inner, inner_len,
                        payload, len, MPIDI_ICBC_path_done_fire, d);
    if (st != ICBC_OK) {
        MPL_free(d);
        return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                    MPI_ERR_OTHER, "**icbc_router", "**icbc_router %d %s", router,
                                    icbc_status_str(st));
    }
    return MPI_SUCCESS;
}

/* ---- receive ------------------------------------------------------------ */

/* ---- routed receive ----------------------------------------------------- */

static int mx_on_msg(const mx_client_msg_t *m, void *arg)
{
    const icbc_route_hdr_t *rh = &m->route;

    if (rh->job != P.job || rh->dst_rank != (uint32_t) MPIR_Process.rank ||
        rh->src_rank >= (uint32_t) MPIDI_ICBC_global.peers.size) {
        icbc_warn("dropped a routed message for job %016llx rank %u", (unsigned long long) rh->job,
                  rh->dst_rank);
        return 0; /* not kept: UCX drops a rendezvous descriptor itself */
    }
    if (rh->type == ICBC_ROUTE_UNREACHABLE) {
        icbc_route_hdr_t lost;
        if (m->inner_len >= ICBC_ROUTE_HDR_SIZE &&
            icbc_route_hdr_parse(m->inner, m->inner_len, &lost) == ICBC_OK)
            MPIDI_ICBC_xfer_peer_failed((int) lost.dst_rank, "a router reports it unreachable");
        return 0;
    }
    return MPIDI_ICBC_xrecv_ucx((int) rh->src_rank, m->inner, m->inner_len, m->data, m->len,
                                m->rndv) == UCS_INPROGRESS;
}

static void mx_on_router_lost(int router, icbc_status_t status, void *arg)
{
    if (MPIDI_ICBC_global.finalizing)
        return;
    icbc_error("lost router %d of its cluster: %s; transfers to other clusters fail", router,
               icbc_status_str(status));
    for (int r = 0; r < MPIDI_ICBC_global.peers.size; r++) {
        icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, r);
        if (peer->path == ICBC_PATH_ROUTED)
            MPIDI_ICBC_xfer_peer_failed(r, "one of the routers of this cluster died");
    }
}

/* A router of this cluster lost every trunk to CLUSTER: without failover,
 * the peers there are lost, also to a process that only waits for them. */
static void mx_on_cluster_state(int router, uint16_t cluster, int reachable, void *arg)
{
    const char *name;
    int n = 0;

    if (MPIDI_ICBC_global.finalizing || reachable)
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
            MPIDI_ICBC_xfer_peer_failed(r, "its cluster is unreachable through the routers");
        }
    }
}

/* ---- set-up and the rest of the interface -------------------------------- */

/* Registers this process with the routers of its cluster. */
int MPIDI_ICBC_path_routed_open(void)
{
    char err[ICBC_RF_ERR_LEN + 128];

    const icbc_rf_cluster_t *cl = icbc_routerfile_cluster(P.rf, P.cluster);
    mx_client_params_t mp = {
        .worker = MPIDI_ICBC_global.worker,
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
        .on_router_lost = mx_on_router_lost,
        .on_cluster_state = mx_on_cluster_state,
    };
    if (P.keylen == 0) {
        snprintf(err, sizeof(err), "%s: routed policies need a 'key' line",
                 icbc_routerfile_name(P.rf));
        return MPIDI_ICBC_path_cfg_error(err);
    }
    if (mx_client_create(&mp, &routed.mx, err, sizeof(err)) != ICBC_OK)
        return MPIDI_ICBC_path_cfg_error(err);
    /* an RTS carries the MPI header after a longer wire header */
    size_t mi = mx_client_max_inner(routed.mx);
    if (mi < ICBC_WIRE_HDR_LEN(ICBC_MSG_RTS) + 256)
        return MPIDI_ICBC_path_cfg_error("the routers' UCX header limit is too small");
    MPIDI_ICBC_global.max_am_header =
        MPL_MIN(MPIDI_ICBC_global.max_am_header, mi - ICBC_WIRE_RNDV_EXT_SIZE);
    return MPI_SUCCESS;
}

static int routed_active(void)
{
    return routed.mx != NULL;
}

static int routed_progress(void)
{
    if (routed.mx)
        mx_client_watch(routed.mx);
    return 0;
}

static void routed_dump(FILE *f)
{
    mx_client_dump(routed.mx, f);
}

static void routed_finalize(void)
{
    if (routed.mx)
        mx_client_destroy(routed.mx);
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
};
