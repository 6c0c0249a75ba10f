/*
 * Paths to peers outside the direct fabric path: which path each peer takes
 * (router file + policy), and the lanes the transfer protocol (icbc_xfer.c)
 * sends on:
 *
 *   routed   lanes are the routers of this cluster (mx_client over UCX); the
 *            pair's ordered lane is one fixed router: (src + dst) mod R under
 *            policy aggregate, (own rank) mod R under static; chunks go over
 *            all routers (aggregate) or the fixed one (static).
 *   tcp      one bt_lib connection per peer, opened on first use, to the
 *            address the peer published in its business card; used for
 *            other clusters under alltoall and for every other node under tcp.
 *
 * Every routed or TCP message carries the route header, so a receiver checks
 * job and ranks before it looks further.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_xfer.h"
#include "core/icbc_routerfile.h"
#include "core/icbc_route.h"
#include "core/icbc_bcard.h"
#include "core/icbc_netif.h"
#include "mx_router/mx_client.h"
#include "bt_lib/bt_lib.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

/*
=== BEGIN_MPI_T_CVAR_INFO_BLOCK ===

cvars:
    - name        : MPIR_CVAR_CH4_ICBC_POLICY
      category    : CH4_ICBC
      type        : string
      default     : ""
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        How messages between clusters travel: "aggregate" (through the
        routers, large messages striped over all of them), "static" (one
        fixed router per process, no striping), "alltoall" (direct TCP between
        the processes of different clusters) or "tcp" (every message between
        nodes over TCP, also inside a cluster). Empty: the router file's
        policy line (default aggregate).

    - name        : MPIR_CVAR_CH4_ICBC_TCP_IFACE
      category    : CH4_ICBC
      type        : string
      default     : ""
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        Network interface whose address processes of other clusters connect
        to under the alltoall and tcp policies. Empty: the interface the
        kernel routes to the other clusters' routers through, else the first
        non-loopback IPv4 interface.

    - name        : MPIR_CVAR_CH4_ICBC_TCP_PACING
      category    : CH4_ICBC
      type        : int
      default     : 0
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        Pacing of this process's TCP connections to other clusters
        (SO_MAX_PACING_RATE), in Mbit/s; 0: off.

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

/* A message waiting for room on a TCP connection (the ordered lane never
 * refuses, so that order survives back-pressure). */
typedef struct tcp_pending {
    struct tcp_pending *next;
    const void *payload;
    size_t len;
    MPIDI_ICBC_xdone_cb_t cb;
    void *arg;
    size_t hdr_len;
    uint8_t hdr[];
} tcp_pending_t;

/* Per peer: the TCP connection we send on. */
typedef struct {
    bt_conn_t *conn;
    int ready;
    int failed;
    tcp_pending_t *head, *tail;
} tcp_peer_t;

/* Per accepted or opened connection: the receive in progress. */
typedef struct tcp_conn {
    int rank;                   /* peer we opened it to, -1 for accepted ones */
    MPIDI_ICBC_xrecv_t x;
    int in_msg;
    struct tcp_conn *next_all;  /* every one, freed in finalize */
} tcp_conn_t;

static struct {
    icbc_routerfile_t *rf;
    icbc_rf_policy_t policy;
    int cluster;                /* ours, -1 without a router file */
    uint64_t job;
    unsigned char key[ICBC_RF_KEY_MAX];
    size_t keylen;
    mx_client_t *mx;
    int nrouters;
    int use_tcp;
    bt_poller_t *poller;
    bt_listener_t *listener;
    icbc_bcard_tcp_t tcp_ep[2];
    int ntcp;
    tcp_peer_t *tcp;
    tcp_conn_t *conns;          /* every tcp_conn_t, for finalize */
    bt_opts_t opts;
    const icbc_bcard_t *cards;  /* during init only */
    char fabric_devs[ICBC_NETIF_LIST_MAX]; /* UCX devices towards our routers; "": none */
} P;

static int policy_uses_routers(void)
{
    return P.policy == ICBC_RF_POLICY_AGGREGATE || P.policy == ICBC_RF_POLICY_STATIC;
}

/* ---- lanes -------------------------------------------------------------- */

static int fixed_router(icbc_peer_t * peer)
{
    if (P.policy == ICBC_RF_POLICY_STATIC)
        return MPIR_Process.rank % P.nrouters;
    return (MPIR_Process.rank + peer->rank) % P.nrouters;
}

int MPIDI_ICBC_xpath_nlanes(icbc_peer_t * peer)
{
    if (peer->path == ICBC_PATH_ROUTED && P.policy == ICBC_RF_POLICY_AGGREGATE)
        return P.nrouters;
    return 1;
}

typedef struct {
    MPIDI_ICBC_xdone_cb_t cb;
    void *arg;
} mx_done_t;

static void mx_done(void *arg, icbc_status_t status)
{
    mx_done_t d = *(mx_done_t *) arg;
    MPL_free(arg);
    if (d.cb)
        d.cb(d.arg, status == ICBC_OK);
}

static void tcp_send_done(bt_conn_t * c, icbc_status_t status, void *arg)
{
    mx_done(arg, status);
}

static int tcp_connect(icbc_peer_t * peer);

static void tcp_flush(int rank)
{
    tcp_peer_t *t = &P.tcp[rank];

    while (t->head && t->ready) {
        tcp_pending_t *m = t->head;
        struct iovec iov = {.iov_base = (void *) m->payload,.iov_len = m->len };
        mx_done_t *d = MPL_malloc(sizeof(*d), MPL_MEM_OTHER);
        MPIR_Assert(d);
        d->cb = m->cb;
        d->arg = m->arg;
        icbc_status_t st = bt_conn_send(t->conn, m->hdr, m->hdr_len, &iov, m->len ? 1 : 0,
                                        tcp_send_done, d);
        if (st == ICBC_ERR_BUSY) {
            MPL_free(d);
            return;
        }
        t->head = m->next;
        if (t->head == NULL)
            t->tail = NULL;
        if (st != ICBC_OK)
            mx_done(d, st);
        MPL_free(m);
    }
}

static void tcp_fail_pending(int rank)
{
    tcp_peer_t *t = &P.tcp[rank];

    while (t->head) {
        tcp_pending_t *m = t->head;
        t->head = m->next;
        if (m->cb)
            m->cb(m->arg, 0);
        MPL_free(m);
    }
    t->tail = NULL;
}

static int tcp_send(icbc_peer_t * peer, int ordered, const uint8_t * hdr, size_t hdr_len,
                    const void *payload, size_t len, MPIDI_ICBC_xdone_cb_t cb, void *arg,
                    int *busy)
{
    tcp_peer_t *t = &P.tcp[peer->rank];
    int mpi_errno;

    if (t->conn == NULL && !t->failed) {
        mpi_errno = tcp_connect(peer);
        if (mpi_errno)
            return mpi_errno;
    }
    if (t->failed)
        return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                    MPI_ERR_OTHER, "**icbc_peer", "**icbc_peer %d %s",
                                    peer->rank, "its TCP connection failed");
    if (t->ready && t->head == NULL) {
        struct iovec iov = {.iov_base = (void *) payload,.iov_len = len };
        mx_done_t *d = MPL_malloc(sizeof(*d), MPL_MEM_OTHER);
        MPIR_Assert(d);
        d->cb = cb;
        d->arg = arg;
        icbc_status_t st = bt_conn_send(t->conn, hdr, hdr_len, &iov, len ? 1 : 0,
                                        tcp_send_done, d);
        if (st == ICBC_OK)
            return MPI_SUCCESS;
        MPL_free(d);
        if (st != ICBC_ERR_BUSY)
            return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                        MPI_ERR_OTHER, "**icbc_peer", "**icbc_peer %d %s",
                                        peer->rank, icbc_status_str(st));
    }
    if (!ordered) {
        *busy = 1;
        return MPI_SUCCESS;
    }
    tcp_pending_t *m = MPL_malloc(sizeof(*m) + hdr_len, MPL_MEM_OTHER);
    MPIR_Assert(m);
    m->next = NULL;
    m->payload = payload;
    m->len = len;
    m->cb = cb;
    m->arg = arg;
    m->hdr_len = hdr_len;
    memcpy(m->hdr, hdr, hdr_len);
    if (t->tail)
        t->tail->next = m;
    else
        t->head = m;
    t->tail = m;
    return MPI_SUCCESS;
}

int MPIDI_ICBC_xpath_send(icbc_peer_t * peer, int lane, const void *inner, size_t inner_len,
                          const void *payload, size_t len, MPIDI_ICBC_xdone_cb_t cb, void *arg,
                          int *busy)
{
    int ordered = (lane == MPIDI_ICBC_LANE_ORDERED);
    icbc_route_hdr_t rh = {
        .type = ICBC_ROUTE_MSG,
        .flags = ordered ? ICBC_ROUTE_F_ORDERED : 0,
        .src_cluster = (uint16_t) (P.cluster < 0 ? 0 : P.cluster),
        .dst_cluster = (uint16_t) (peer->cluster < 0 ? 0 : peer->cluster),
        .src_rank = (uint32_t) MPIR_Process.rank,
        .dst_rank = (uint32_t) peer->rank,
        .job = P.job,
        .inner_len = (uint32_t) inner_len,
        .payload_len = len,
    };

    *busy = 0;
    if (peer->state == ICBC_PEER_FAILED)
        return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                    MPI_ERR_OTHER, "**icbc_peer", "**icbc_peer %d %s",
                                    peer->rank, "failed earlier");
    if (peer->path == ICBC_PATH_ROUTED) {
        int router = ordered ? fixed_router(peer) :
            (P.policy == ICBC_RF_POLICY_STATIC ? fixed_router(peer) : lane);
        mx_done_t *d = MPL_malloc(sizeof(*d), MPL_MEM_OTHER);
        MPIR_Assert(d);
        d->cb = cb;
        d->arg = arg;
        icbc_status_t st = mx_client_send(P.mx, router, rh.dst_cluster, rh.dst_rank, rh.flags,
                                          inner, inner_len, payload, len, mx_done, d);
        if (st != ICBC_OK) {
            MPL_free(d);
            return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                        MPI_ERR_OTHER, "**icbc_router", "**icbc_router %d %s",
                                        router, icbc_status_str(st));
        }
        return MPI_SUCCESS;
    }

    MPIR_Assert(peer->path == ICBC_PATH_TCP_DIRECT);
    uint8_t hdr[ICBC_ROUTE_HDR_SIZE + 4096 + 64];
    MPIR_Assert(inner_len <= sizeof(hdr) - ICBC_ROUTE_HDR_SIZE);
    icbc_route_hdr_pack(&rh, hdr);
    memcpy(hdr + ICBC_ROUTE_HDR_SIZE, inner, inner_len);
    return tcp_send(peer, ordered, hdr, ICBC_ROUTE_HDR_SIZE + inner_len, payload, len, cb, arg,
                    busy);
}

/* ---- routed receive ----------------------------------------------------- */

static int mx_on_msg(const mx_client_msg_t * m, void *arg)
{
    const icbc_route_hdr_t *rh = &m->route;

    if (rh->job != P.job || rh->dst_rank != (uint32_t) MPIR_Process.rank ||
        rh->src_rank >= (uint32_t) MPIDI_ICBC_global.peers.size) {
        fprintf(stderr, "icbc: rank %d dropped a routed message for job %016llx rank %u\n",
                MPIR_Process.rank, (unsigned long long) rh->job, rh->dst_rank);
        return 0;       /* not kept: UCX drops a rendezvous descriptor itself */
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
    fprintf(stderr, "icbc: rank %d lost router %d of its cluster: %s; transfers to other "
            "clusters fail\n", MPIR_Process.rank, router, icbc_status_str(status));
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
    name = cluster < icbc_routerfile_num_clusters(P.rf) ?
        icbc_routerfile_cluster(P.rf, cluster)->name : "?";
    for (int r = 0; r < MPIDI_ICBC_global.peers.size; r++) {
        icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, r);
        if (peer->path == ICBC_PATH_ROUTED && peer->cluster == (int) cluster &&
            peer->state != ICBC_PEER_FAILED) {
            if (n++ == 0)
                fprintf(stderr, "icbc: rank %d: router %d of its cluster reports cluster %s "
                        "unreachable (every trunk there lost)\n", MPIR_Process.rank, router,
                        name);
            MPIDI_ICBC_xfer_peer_failed(r, "its cluster is unreachable through the routers");
        }
    }
}

/* ---- TCP receive -------------------------------------------------------- */

static void tcp_on_ready(bt_conn_t * c, void *arg)
{
    tcp_conn_t *tc = arg;

    if (tc && tc->rank >= 0) {
        P.tcp[tc->rank].ready = 1;
        tcp_flush(tc->rank);
    }
}

static bt_recv_action_t tcp_on_header(bt_conn_t * c, const void *hdr, size_t hdr_len,
                                      uint64_t payload_len, void **dest, void *arg)
{
    tcp_conn_t *tc = arg;
    icbc_route_hdr_t rh;

    *dest = NULL;
    if (icbc_route_hdr_parse(hdr, hdr_len, &rh) != ICBC_OK || rh.type != ICBC_ROUTE_MSG ||
        rh.job != P.job || rh.dst_rank != (uint32_t) MPIR_Process.rank ||
        rh.src_rank >= (uint32_t) MPIDI_ICBC_global.peers.size ||
        ICBC_ROUTE_HDR_SIZE + (size_t) rh.inner_len != hdr_len || rh.payload_len != payload_len) {
        fprintf(stderr, "icbc: rank %d closes TCP connection from %s: bad message\n",
                MPIR_Process.rank, bt_conn_peer_text(c));
        bt_conn_shutdown(c);
        return BT_RECV_DISCARD;
    }
    if (MPIDI_ICBC_xrecv_begin((int) rh.src_rank, (const uint8_t *) hdr + ICBC_ROUTE_HDR_SIZE,
                               rh.inner_len, payload_len, &tc->x, dest)) {
        bt_conn_shutdown(c);
        return BT_RECV_DISCARD;
    }
    tc->in_msg = 1;
    return *dest ? BT_RECV_INTO : BT_RECV_DISCARD;
}

static void tcp_on_payload(bt_conn_t * c, void *arg)
{
    tcp_conn_t *tc = arg;

    if (tc->in_msg) {
        tc->in_msg = 0;
        MPIDI_ICBC_xrecv_end(&tc->x, 1);
    }
}

static void tcp_on_writable(bt_conn_t * c, void *arg)
{
    tcp_conn_t *tc = arg;

    if (tc && tc->rank >= 0)
        tcp_flush(tc->rank);
}

static void tcp_on_close(bt_conn_t * c, icbc_status_t status, const char *msg, void *arg)
{
    tcp_conn_t *tc = arg;

    if (tc->in_msg) {
        tc->in_msg = 0;
        MPIDI_ICBC_xrecv_end(&tc->x, 0);
    }
    if (tc->rank >= 0) {
        tcp_peer_t *t = &P.tcp[tc->rank];
        t->failed = 1;
        t->ready = 0;
        tcp_fail_pending(tc->rank);
        if (!MPIDI_ICBC_global.finalizing)
            MPIDI_ICBC_xfer_peer_failed(tc->rank, msg ? msg : "TCP connection closed");
    }
    /* freed in finalize: a connection is not destroyed from its own callback */
}

static const bt_conn_cbs_t tcp_cbs = {
    .on_ready = tcp_on_ready,
    .on_header = tcp_on_header,
    .on_payload = tcp_on_payload,
    .on_writable = tcp_on_writable,
    .on_close = tcp_on_close,
};

static void tcp_on_accept(bt_listener_t * l, bt_conn_t * c, void *arg)
{
    tcp_conn_t *tc = MPL_calloc(1, sizeof(*tc), MPL_MEM_OTHER);

    if (tc == NULL) {
        bt_conn_destroy(c);
        return;
    }
    tc->rank = -1;
    tc->next_all = P.conns;
    P.conns = tc;
    bt_conn_set_arg(c, tc);
}

static int tcp_connect(icbc_peer_t * peer)
{
    const icbc_bcard_tcp_t *ep = NULL;
    struct sockaddr_storage ss;
    socklen_t sl;
    tcp_conn_t *tc;
    int role = (peer->cluster == P.cluster) ? ICBC_BCARD_TCP_FABRIC : ICBC_BCARD_TCP_WAN;

    for (int i = 0; i < peer->ntcp; i++)
        if (peer->tcp[i].role == role)
            ep = &peer->tcp[i];
    if (ep == NULL)
        return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                    MPI_ERR_OTHER, "**icbc_peer", "**icbc_peer %d %s",
                                    peer->rank, "it published no TCP address reachable from "
                                    "this cluster (no external interface?)");
    memset(&ss, 0, sizeof(ss));
    if (ep->family == 4) {
        struct sockaddr_in *sin = (struct sockaddr_in *) &ss;
        sin->sin_family = AF_INET;
        sin->sin_port = htons(ep->port);
        memcpy(&sin->sin_addr, ep->addr, 4);
        sl = sizeof(*sin);
    } else {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *) &ss;
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(ep->port);
        memcpy(&sin6->sin6_addr, ep->addr, 16);
        sl = sizeof(*sin6);
    }
    tc = MPL_calloc(1, sizeof(*tc), MPL_MEM_OTHER);
    MPIR_Assert(tc);
    tc->rank = peer->rank;
    icbc_status_t st = bt_connect(P.poller, (struct sockaddr *) &ss, sl, &P.opts, &tcp_cbs, tc,
                                  &P.tcp[peer->rank].conn);
    if (st == ICBC_OK) {
        tc->next_all = P.conns;
        P.conns = tc;
    } else {
        MPL_free(tc);
        P.tcp[peer->rank].failed = 1;
        return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                    MPI_ERR_OTHER, "**icbc_peer", "**icbc_peer %d %s",
                                    peer->rank, icbc_status_str(st));
    }
    return MPI_SUCCESS;
}

/* ---- set-up ------------------------------------------------------------- */

/* The local address the kernel would use to reach DST, by connecting a UDP
 * socket (nothing is sent). */
static int local_addr_towards(const struct sockaddr *dst, socklen_t dlen,
                              struct sockaddr_storage *out)
{
    int fd = socket(dst->sa_family, SOCK_DGRAM, 0);
    socklen_t ol = sizeof(*out);
    int ok;

    if (fd < 0)
        return -1;
    ok = connect(fd, dst, dlen) == 0 && getsockname(fd, (struct sockaddr *) out, &ol) == 0;
    close(fd);
    return ok ? 0 : -1;
}

static int iface_addr(const char *name, struct sockaddr_storage *out)
{
    struct ifaddrs *ifa, *i;
    int found = -1;

    if (getifaddrs(&ifa) != 0)
        return -1;
    for (i = ifa; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK))
            continue;
        if (name && strcmp(name, i->ifa_name))
            continue;
        memcpy(out, i->ifa_addr, sizeof(struct sockaddr_in));
        found = 0;
        break;
    }
    freeifaddrs(ifa);
    return found;
}

static void set_tcp_ep(icbc_bcard_tcp_t * ep, int role, const struct sockaddr_storage *ss,
                       uint16_t port)
{
    memset(ep, 0, sizeof(*ep));
    ep->role = (uint8_t) role;
    ep->port = port;
    if (ss->ss_family == AF_INET) {
        ep->family = 4;
        memcpy(ep->addr, &((const struct sockaddr_in *) ss)->sin_addr, 4);
    } else {
        ep->family = 6;
        memcpy(ep->addr, &((const struct sockaddr_in6 *) ss)->sin6_addr, 16);
    }
}

/* Addresses other processes reach our listener at: towards the routers of
 * another cluster (WAN role) and of our own (fabric role). */
static void choose_tcp_addrs(uint16_t port)
{
    struct sockaddr_storage wan, fab;
    int have_wan = -1, have_fab = -1;
    int nc = P.rf ? (int) icbc_routerfile_num_clusters(P.rf) : 0;

    if (MPIR_CVAR_CH4_ICBC_TCP_IFACE && MPIR_CVAR_CH4_ICBC_TCP_IFACE[0])
        have_wan = iface_addr(MPIR_CVAR_CH4_ICBC_TCP_IFACE, &wan);
    for (int c = 0; c < nc && have_wan; c++) {
        const icbc_rf_cluster_t *cl = icbc_routerfile_cluster(P.rf, c);
        if (c == P.cluster || cl->nrouters == 0)
            continue;
        have_wan = local_addr_towards((const struct sockaddr *) &cl->routers[0].wan.sa,
                                      cl->routers[0].wan.salen, &wan);
    }
    if (P.cluster >= 0) {
        const icbc_rf_cluster_t *cl = icbc_routerfile_cluster(P.rf, P.cluster);
        if (cl->nrouters)
            have_fab = local_addr_towards((const struct sockaddr *) &cl->routers[0].fabric.sa,
                                          cl->routers[0].fabric.salen, &fab);
    }
    if (have_fab && MPIDI_ICBC_xpath_ucx_devices()) {
        char dev[IF_NAMESIZE + 1];
        snprintf(dev, sizeof(dev), "%s", MPIDI_ICBC_xpath_ucx_devices());
        dev[strcspn(dev, ":,")] = '\0';
        have_fab = iface_addr(dev, &fab);
    }
    if (have_wan && nc <= 1)
        have_wan = iface_addr(NULL, &wan);
    if (have_fab && have_wan == 0) {
        fab = wan;
        have_fab = 0;
    }
    P.ntcp = 0;
    if (have_wan == 0)
        set_tcp_ep(&P.tcp_ep[P.ntcp++], ICBC_BCARD_TCP_WAN, &wan, port);
    if (have_fab == 0)
        set_tcp_ep(&P.tcp_ep[P.ntcp++], ICBC_BCARD_TCP_FABRIC, &fab, port);
}

static int xpath_error(const char *why)
{
    return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_FATAL, __func__, __LINE__, MPI_ERR_OTHER,
                                "**icbc_cfg", "**icbc_cfg %s", why);
}

int MPIDI_ICBC_xpath_init_local(void)
{
    int mpi_errno = MPI_SUCCESS;
    char err[ICBC_RF_ERR_LEN + 64];
    icbc_status_t st;

    memset(&P, 0, sizeof(P));
    P.cluster = -1;
    P.policy = ICBC_RF_POLICY_AGGREGATE;
    st = icbc_routerfile_load_env(&P.rf, err, sizeof(err));
    if (st == ICBC_ERR_NOT_FOUND) {
        P.rf = NULL;        /* one cluster, no routers */
    } else if (st != ICBC_OK) {
        return xpath_error(err);
    } else {
        P.policy = icbc_routerfile_policy(P.rf);
    }
    if (MPIR_CVAR_CH4_ICBC_POLICY && MPIR_CVAR_CH4_ICBC_POLICY[0]) {
        if (icbc_rf_policy_from_string(MPIR_CVAR_CH4_ICBC_POLICY, &P.policy) != ICBC_OK) {
            snprintf(err, sizeof(err), "MPIR_CVAR_CH4_ICBC_POLICY=%s is not one of aggregate, "
                     "static, alltoall, tcp", MPIR_CVAR_CH4_ICBC_POLICY);
            return xpath_error(err);
        }
        if (P.rf && icbc_routerfile_check_policy(P.rf, P.policy, err, sizeof(err)) != ICBC_OK)
            return xpath_error(err);
    }
    if (P.rf) {
        char host[ICBC_RF_HOST_MAX + 1];
        if (icbc_routerfile_self_cluster(P.rf, &P.cluster, host, sizeof(host), err,
                                         sizeof(err)) != ICBC_OK)
            return xpath_error(err);
        P.nrouters = (int) icbc_routerfile_cluster(P.rf, P.cluster)->nrouters;
        st = icbc_routerfile_read_key(P.rf, P.key, sizeof(P.key), &P.keylen, err, sizeof(err));
        if (st != ICBC_OK && st != ICBC_ERR_NOT_FOUND)
            return xpath_error(err);
        /* UCX on the fabric alone (docs/router.md, SECURITY); the CVAR overrides. */
        if (!(MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES && MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES[0])) {
            st = icbc_netif_fabric_devices(P.rf, P.cluster, P.fabric_devs,
                                           sizeof(P.fabric_devs), err, sizeof(err));
            if (st != ICBC_OK && st != ICBC_ERR_NOT_FOUND)
                return xpath_error(err);
        }
    }
    P.use_tcp = P.policy == ICBC_RF_POLICY_TCP ||
        (P.policy == ICBC_RF_POLICY_ALLTOALL && P.rf && icbc_routerfile_num_clusters(P.rf) > 1);
    if (P.use_tcp) {
        struct sockaddr_in any = {.sin_family = AF_INET };
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);

        if (P.keylen == 0)
            return xpath_error("policies alltoall and tcp need a key file (router file 'key' "
                               "line) to authenticate TCP connections");
        bt_opts_init(&P.opts);
        P.opts.key = P.key;
        P.opts.keylen = P.keylen;
        P.opts.id = "icbc process";
        P.opts.nodelay = 1;
        P.opts.pacing_rate = (uint64_t) MPIR_CVAR_CH4_ICBC_TCP_PACING * 1000000 / 8;
        if (bt_poller_create(&P.poller) != ICBC_OK ||
            bt_listen(P.poller, (struct sockaddr *) &any, sizeof(any), &P.opts, &tcp_cbs,
                      tcp_on_accept, NULL, &P.listener) != ICBC_OK ||
            bt_listener_addr(P.listener, &ss, &sl) != ICBC_OK)
            return xpath_error("cannot open a TCP listening socket");
        choose_tcp_addrs(ntohs(((struct sockaddr_in *) &ss)->sin_port));
    }
    return mpi_errno;
}

const char *MPIDI_ICBC_xpath_ucx_devices(void)
{
    if (MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES && MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES[0])
        return MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES;
    return P.fabric_devs[0] ? P.fabric_devs : NULL;
}

const icbc_bcard_tcp_t *MPIDI_ICBC_xpath_card_tcp(int *n)
{
    *n = P.ntcp;
    return P.tcp_ep;
}

static uint64_t fnv1a(const void *buf, size_t len)
{
    const uint8_t *p = buf;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* After the card exchange: paths of all peers; registration with routers. */
int MPIDI_ICBC_xpath_init_world(const void *card0, size_t card0_len)
{
    int mpi_errno = MPI_SUCCESS;
    char err[ICBC_RF_ERR_LEN + 128];
    int size = MPIDI_ICBC_global.peers.size;
    int any_routed = 0;

    /* Every process computes the same job id from rank 0's card, which
     * holds its UCX worker address: unique per run. */
    P.job = fnv1a(card0, card0_len);
    for (int r = 0; r < size; r++) {
        icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, r);
        peer->cluster = P.cluster;
        if (P.rf) {
            peer->cluster = icbc_routerfile_find_host(P.rf, peer->node);
            if (peer->cluster < 0) {
                snprintf(err, sizeof(err), "%s: host '%s' of rank %d is in no cluster",
                         icbc_routerfile_name(P.rf), peer->node, r);
                return xpath_error(err);
            }
        }
        if (r == MPIR_Process.rank || peer->path == ICBC_PATH_SHM)
            continue;
        if (P.policy == ICBC_RF_POLICY_TCP)
            peer->path = ICBC_PATH_TCP_DIRECT;
        else if (peer->cluster != P.cluster)
            peer->path = policy_uses_routers() ? ICBC_PATH_ROUTED : ICBC_PATH_TCP_DIRECT;
        if (peer->path == ICBC_PATH_ROUTED)
            any_routed = 1;
    }
    if (P.use_tcp) {
        P.tcp = MPL_calloc(size, sizeof(*P.tcp), MPL_MEM_OTHER);
        MPIR_ERR_CHKANDJUMP(P.tcp == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    }
    /* Register with the routers of our cluster whenever the job spans
     * clusters under a routed policy; others may route to us. */
    if (P.rf && policy_uses_routers() && icbc_routerfile_num_clusters(P.rf) > 1 &&
        (any_routed || P.nrouters > 0)) {
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
            return xpath_error(err);
        }
        if (mx_client_create(&mp, &P.mx, err, sizeof(err)) != ICBC_OK)
            return xpath_error(err);
        /* an RTS carries the MPI header after a longer wire header */
        size_t mi = mx_client_max_inner(P.mx);
        if (mi < ICBC_WIRE_HDR_LEN(ICBC_MSG_RTS) + 256)
            return xpath_error("the routers' UCX header limit is too small");
        MPIDI_ICBC_global.max_am_header = MPL_MIN(MPIDI_ICBC_global.max_am_header,
                                                  mi - ICBC_WIRE_RNDV_EXT_SIZE);
    }
    MPIDI_ICBC_global.xpath = (P.mx != NULL || P.poller != NULL);
    /* nobody may route to a process that has not registered yet */
    if (P.mx || P.use_tcp) {
        mpi_errno = MPIR_pmi_barrier();
        MPIR_ERR_CHECK(mpi_errno);
    }
  fn_fail:
    return mpi_errno;
}

int MPIDI_ICBC_xpath_progress(void)
{
    int events = 0;

    if (P.poller)
        events = bt_poller_wait(P.poller, 0);
    if (P.mx)
        mx_client_watch(P.mx);
    MPIDI_ICBC_xfer_progress();
    return events > 0 ? events : 0;
}

void MPIDI_ICBC_xpath_dump(FILE * f)
{
    fprintf(f, "  policy %s, cluster %d, %d router(s)%s\n", icbc_rf_policy_name(P.policy),
            P.cluster, P.nrouters, P.mx ? "" : ", no router connections");
    if (P.mx)
        mx_client_dump(P.mx, f);
}

int MPIDI_ICBC_xpath_active(void)
{
    return P.mx != NULL || P.poller != NULL;
}

void MPIDI_ICBC_xpath_finalize(void)
{
    if (P.tcp) {
        /* let queued frames drain before the connections close */
        for (int spin = 0; spin < 2000; spin++) {
            int busy = 0;
            for (int r = 0; r < MPIDI_ICBC_global.peers.size; r++)
                if (P.tcp[r].conn && !P.tcp[r].failed &&
                    (P.tcp[r].head || bt_conn_queued(P.tcp[r].conn)))
                    busy = 1;
            if (!busy)
                break;
            bt_poller_wait(P.poller, 1);
        }
    }
    if (P.mx)
        mx_client_destroy(P.mx);
    if (P.listener)
        bt_listener_destroy(P.listener);
    if (P.poller)
        bt_poller_destroy(P.poller);
    while (P.conns) {
        tcp_conn_t *tc = P.conns;
        P.conns = tc->next_all;
        if (tc->in_msg)
            MPL_free(tc->x.buf);
        MPL_free(tc);
    }
    MPL_free(P.tcp);
    if (P.rf)
        icbc_routerfile_free(P.rf);
    memset(&P, 0, sizeof(P));
}
