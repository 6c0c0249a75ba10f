/*
 * The TCP path: one bt_lib connection per peer, opened on first use, to the
 * address the peer published in its business card; used for other clusters
 * under policy alltoall and for every other node under policy tcp. It has
 * one lane; a message waits in the process when the connection is full.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_path.h"
#include "core/icbc_freelist.h"
#include "core/icbc_queue.h"
#include "core/icbc_pace.h"
#include "bt_lib/bt_lib.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#define P MPIDI_ICBC_paths

/* Per peer: the TCP connection we send on. */
typedef struct {
    bt_conn_t *conn;
    int ready;
    int failed;
    icbc_queue_t waiting; /* MPIDI_ICBC_waiting_t for room: the ordered lane never refuses */
} tcp_peer_t;

/* Per accepted or opened connection: the receive in progress. */
typedef struct tcp_conn {
    int rank; /* peer we opened it to, -1 for accepted ones */
    MPIDI_ICBC_xrecv_t x;
    int in_msg;
    struct tcp_conn *next_all; /* every one, freed in finalize */
} tcp_conn_t;

static struct {
    bt_poller_t *poller;
    bt_listener_t *listener;
    icbc_bcard_tcp_t tcp_ep[2];
    int ntcp;
    tcp_peer_t *peers; /* per rank */
    int *wan_ranks;    /* ranks we opened a connection to in another cluster: what pacing
                        * touches, without walking every rank on each paced send */
    int nwan;
    tcp_conn_t *conns; /* every tcp_conn_t, for finalize */
    bt_opts_t opts;
    uint64_t pacing; /* bytes/s towards other clusters (icbc_pace.c); 0: opts.pacing_rate */
} tcp;

static const MPIDI_ICBC_path_up_t *above; /* the layer above */

/* ---- send --------------------------------------------------------------- */

/* Completions of lane sends while bt_lib has them: one per chunk in
 * flight, from a free list (none allocated per chunk once it holds the
 * traffic's depth). */
static icbc_freelist_t done_list;

static MPIDI_ICBC_path_done_t *done_new(MPIDI_ICBC_xdone_cb_t cb, void *arg)
{
    MPIDI_ICBC_path_done_t *d;

    if (done_list.size == 0)
        icbc_freelist_init(&done_list, sizeof(*d), 256);
    d = icbc_freelist_get(&done_list);
    MPIR_Assert(d);
    d->cb = cb;
    d->arg = arg;
    return d;
}

static void tcp_send_done(bt_conn_t *c, icbc_status_t status, void *arg)
{
    MPIDI_ICBC_path_done_t d = *(MPIDI_ICBC_path_done_t *) arg;

    icbc_freelist_put(&done_list, arg);
    if (d.cb)
        d.cb(d.arg, status);
}

static int tcp_connect(icbc_peer_t *peer);

static void tcp_flush(int rank)
{
    tcp_peer_t *t = &tcp.peers[rank];

    while (!icbc_queue_empty(&t->waiting) && t->ready) {
        MPIDI_ICBC_waiting_t *m = ICBC_CONTAINER(t->waiting.head, MPIDI_ICBC_waiting_t, qe);
        struct iovec iov = { .iov_base = (void *) m->payload, .iov_len = m->len };
        MPIDI_ICBC_path_done_t *d = done_new(m->cb, m->arg);
        icbc_status_t st =
            bt_conn_send(t->conn, m->hdr, m->hdr_len, &iov, m->len ? 1 : 0, tcp_send_done, d);
        if (st == ICBC_ERR_BUSY) {
            icbc_freelist_put(&done_list, d);
            return;
        }
        icbc_queue_pop(&t->waiting);
        if (st != ICBC_OK)
            tcp_send_done(t->conn, st, d);
        MPL_free(m);
    }
}

static void tcp_fail_pending(int rank)
{
    tcp_peer_t *t = &tcp.peers[rank];

    icbc_queue_elem_t *e;

    while ((e = icbc_queue_pop(&t->waiting)) != NULL) {
        MPIDI_ICBC_waiting_t *m = ICBC_CONTAINER(e, MPIDI_ICBC_waiting_t, qe);
        if (m->cb)
            m->cb(m->arg, ICBC_ERR_PEER_FAILED);
        MPL_free(m);
    }
}

static int tcp_send(icbc_peer_t *peer, int ordered, const uint8_t *hdr, size_t hdr_len,
                    const void *payload, size_t len, MPIDI_ICBC_xdone_cb_t cb, void *arg, int *busy)
{
    tcp_peer_t *t = &tcp.peers[peer->rank];
    int mpi_errno;

    if (t->conn == NULL && !t->failed) {
        mpi_errno = tcp_connect(peer);
        if (mpi_errno)
            return mpi_errno;
    }
    if (t->failed)
        return MPIDI_ICBC_ERR_PEER(peer->rank, "its TCP connection failed");
    if (t->ready && icbc_queue_empty(&t->waiting)) {
        struct iovec iov = { .iov_base = (void *) payload, .iov_len = len };
        MPIDI_ICBC_path_done_t *d = done_new(cb, arg);
        icbc_status_t st = bt_conn_send(t->conn, hdr, hdr_len, &iov, len ? 1 : 0, tcp_send_done, d);
        if (st == ICBC_OK)
            return MPI_SUCCESS;
        icbc_freelist_put(&done_list, d);
        if (st != ICBC_ERR_BUSY)
            return MPIDI_ICBC_ERR_PEER(peer->rank, icbc_status_str(st));
    }
    if (!ordered) {
        *busy = 1;
        return MPI_SUCCESS;
    }
    return MPIDI_ICBC_waiting_push(&t->waiting, peer->rank, hdr, hdr_len, payload, len, cb, arg);
}

/* The route header of a message to PEER on LANE. */
static void route_hdr(const icbc_peer_t *peer, int lane, size_t inner_len, size_t len,
                      icbc_route_hdr_t *rh)
{
    icbc_route_hdr_t h = {
        .type = ICBC_ROUTE_MSG,
        .flags = lane == MPIDI_ICBC_LANE_ORDERED ? ICBC_ROUTE_F_ORDERED : 0,
        .src_cluster = (uint16_t) (P.cluster < 0 ? 0 : P.cluster),
        .dst_cluster = (uint16_t) (peer->cluster < 0 ? 0 : peer->cluster),
        .src_rank = (uint32_t) MPIR_Process.rank,
        .dst_rank = (uint32_t) peer->rank,
        .job = P.job,
        .inner_len = (uint32_t) inner_len,
        .payload_len = len,
    };
    *rh = h;
}

static int tcp_path_send(icbc_peer_t *peer, int lane, const void *inner, size_t inner_len,
                         const void *payload, size_t len, MPIDI_ICBC_xdone_cb_t cb, void *arg,
                         int *busy)
{
    icbc_route_hdr_t rh;
    uint8_t hdr[ICBC_ROUTE_HDR_SIZE + 4096 + 64];

    *busy = 0;
    if (peer->state == ICBC_PEER_FAILED)
        return MPIDI_ICBC_ERR_PEER(peer->rank, "failed earlier");
    MPIR_Assert(inner_len <= sizeof(hdr) - ICBC_ROUTE_HDR_SIZE);
    route_hdr(peer, lane, inner_len, len, &rh);
    icbc_route_hdr_pack(&rh, hdr);
    memcpy(hdr + ICBC_ROUTE_HDR_SIZE, inner, inner_len);
    return tcp_send(peer, lane == MPIDI_ICBC_LANE_ORDERED, hdr, ICBC_ROUTE_HDR_SIZE + inner_len,
                    payload, len, cb, arg, busy);
}

static int tcp_nlanes(icbc_peer_t *peer)
{
    return 1;
}

/* ---- receive ------------------------------------------------------------ */

/* ---- TCP receive -------------------------------------------------------- */

static void tcp_on_ready(bt_conn_t *c, void *arg)
{
    tcp_conn_t *tc = arg;

    if (tc && tc->rank >= 0) {
        tcp.peers[tc->rank].ready = 1;
        tcp_flush(tc->rank);
    }
}

static bt_recv_action_t tcp_on_header(bt_conn_t *c, const void *hdr, size_t hdr_len,
                                      uint64_t payload_len, void **dest, void *arg)
{
    tcp_conn_t *tc = arg;
    icbc_route_hdr_t rh;

    *dest = NULL;
    if (icbc_route_hdr_parse(hdr, hdr_len, &rh) != ICBC_OK || rh.type != ICBC_ROUTE_MSG ||
        rh.job != P.job || rh.dst_rank != (uint32_t) MPIR_Process.rank ||
        rh.src_rank >= (uint32_t) MPIDI_ICBC_global.peers.size ||
        ICBC_ROUTE_HDR_SIZE + (size_t) rh.inner_len != hdr_len || rh.payload_len != payload_len) {
        icbc_warn("closes TCP connection from %s: bad message", bt_conn_peer_text(c));
        bt_conn_shutdown(c);
        return BT_RECV_DISCARD;
    }
    if (above->recv_begin((int) rh.src_rank, (const uint8_t *) hdr + ICBC_ROUTE_HDR_SIZE,
                          rh.inner_len, payload_len, NULL, &tc->x, dest)) {
        bt_conn_shutdown(c);
        return BT_RECV_DISCARD;
    }
    tc->in_msg = 1;
    return *dest ? BT_RECV_INTO : BT_RECV_DISCARD;
}

static void tcp_on_payload(bt_conn_t *c, void *arg)
{
    tcp_conn_t *tc = arg;

    if (tc->in_msg) {
        tc->in_msg = 0;
        above->recv_end(&tc->x, 1);
    }
}

static void tcp_on_writable(bt_conn_t *c, void *arg)
{
    tcp_conn_t *tc = arg;

    if (tc && tc->rank >= 0)
        tcp_flush(tc->rank);
}

static void tcp_on_close(bt_conn_t *c, icbc_status_t status, const char *msg, void *arg)
{
    tcp_conn_t *tc = arg;

    if (tc->in_msg) {
        tc->in_msg = 0;
        above->recv_end(&tc->x, 0);
    }
    if (tc->rank >= 0) {
        tcp_peer_t *t = &tcp.peers[tc->rank];
        t->failed = 1;
        t->ready = 0;
        tcp_fail_pending(tc->rank);
        if (!MPIDI_ICBC_global.finalizing)
            above->peer_failed(tc->rank, msg ? msg : "TCP connection closed");
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

static void tcp_on_accept(bt_listener_t *l, bt_conn_t *c, void *arg)
{
    tcp_conn_t *tc = MPL_calloc(1, sizeof(*tc), MPL_MEM_OTHER);

    if (tc == NULL) {
        bt_conn_destroy(c);
        return;
    }
    tc->rank = -1;
    tc->next_all = tcp.conns;
    tcp.conns = tc;
    bt_conn_set_arg(c, tc);
}

static int tcp_connect(icbc_peer_t *peer)
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
        return MPIDI_ICBC_ERR_PEER(
            peer->rank,
            "it published no TCP address reachable from this cluster (no external interface?)");
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
    icbc_status_t st = bt_connect(tcp.poller, (struct sockaddr *) &ss, sl, &tcp.opts, &tcp_cbs, tc,
                                  &tcp.peers[peer->rank].conn);
    if (st == ICBC_OK) {
        tc->next_all = tcp.conns;
        tcp.conns = tc;
        if (role == ICBC_BCARD_TCP_WAN) {
            tcp.wan_ranks[tcp.nwan++] = peer->rank;
            if (tcp.pacing > 0)
                bt_conn_set_pacing(tcp.peers[peer->rank].conn, tcp.pacing);
        }
    } else {
        MPL_free(tc);
        tcp.peers[peer->rank].failed = 1;
        return MPIDI_ICBC_ERR_PEER(peer->rank, icbc_status_str(st));
    }
    return MPI_SUCCESS;
}

/* Connections to other clusters are paced at BITS_PER_S from now on (0: as
 * MPIR_CVAR_CH4_ICBC_TCP_PACING says): the kernel spreads each message out,
 * where the process's own bucket (icbc_pace.c) only spaces them. */
static void tcp_set_pacing(uint64_t bits_per_s)
{
    uint64_t rate = icbc_pace_socket_rate(bits_per_s);

    tcp.pacing = rate;
    for (int i = 0; i < tcp.nwan; i++)
        bt_conn_set_pacing(tcp.peers[tcp.wan_ranks[i]].conn,
                           rate > 0 ? rate : tcp.opts.pacing_rate);
}

/* Bytes the paced connections have not put on the wire yet (0 while they
 * are not paced). */
static size_t tcp_unsent(void)
{
    size_t n = 0;

    if (tcp.pacing == 0)
        return 0;
    for (int i = 0; i < tcp.nwan; i++)
        n += bt_conn_unsent(tcp.peers[tcp.wan_ranks[i]].conn);
    return n;
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

static void set_tcp_ep(icbc_bcard_tcp_t *ep, int role, const struct sockaddr_storage *ss,
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
    if (have_fab && MPIDI_ICBC_path_ucx_devices()) {
        char dev[IF_NAMESIZE + 1];
        snprintf(dev, sizeof(dev), "%s", MPIDI_ICBC_path_ucx_devices());
        dev[strcspn(dev, ":,")] = '\0';
        have_fab = iface_addr(dev, &fab);
    }
    if (have_wan && nc <= 1)
        have_wan = iface_addr(NULL, &wan);
    if (have_fab && have_wan == 0) {
        fab = wan;
        have_fab = 0;
    }
    tcp.ntcp = 0;
    if (have_wan == 0)
        set_tcp_ep(&tcp.tcp_ep[tcp.ntcp++], ICBC_BCARD_TCP_WAN, &wan, port);
    if (have_fab == 0)
        set_tcp_ep(&tcp.tcp_ep[tcp.ntcp++], ICBC_BCARD_TCP_FABRIC, &fab, port);
}

/* Opens the listening socket before the card exchange: its addresses go
 * into this process's business card. */
int MPIDI_ICBC_path_tcp_listen(void)
{
    struct sockaddr_in any = { .sin_family = AF_INET };
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);

    if (P.keylen == 0)
        return MPIDI_ICBC_path_cfg_error("policies alltoall and tcp need a key file (router "
                                         "file 'key' line) to authenticate TCP connections");
    bt_opts_init(&tcp.opts);
    tcp.opts.key = P.key;
    tcp.opts.keylen = P.keylen;
    tcp.opts.id = "icbc process";
    tcp.opts.nodelay = 1;
    tcp.opts.pacing_rate = (uint64_t) MPIR_CVAR_CH4_ICBC_TCP_PACING * 1000000 / 8;
    if (bt_poller_create(&tcp.poller) != ICBC_OK ||
        bt_listen(tcp.poller, (struct sockaddr *) &any, sizeof(any), &tcp.opts, &tcp_cbs,
                  tcp_on_accept, NULL, &tcp.listener) != ICBC_OK ||
        bt_listener_addr(tcp.listener, &ss, &sl) != ICBC_OK)
        return MPIDI_ICBC_path_cfg_error("cannot open a TCP listening socket");
    choose_tcp_addrs(ntohs(((struct sockaddr_in *) &ss)->sin_port));
    return MPI_SUCCESS;
}

const icbc_bcard_tcp_t *MPIDI_ICBC_path_card_tcp(int *n)
{
    *n = tcp.ntcp;
    return tcp.tcp_ep;
}

int MPIDI_ICBC_path_tcp_open(int size, const MPIDI_ICBC_path_up_t *above_)
{
    above = above_;
    tcp.peers = MPL_calloc(size, sizeof(*tcp.peers), MPL_MEM_OTHER);
    tcp.wan_ranks = MPL_malloc(size * sizeof(*tcp.wan_ranks), MPL_MEM_OTHER);
    return tcp.peers && tcp.wan_ranks ? MPI_SUCCESS
                                      : MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_FATAL, __func__,
                                                             __LINE__, MPI_ERR_OTHER, "**nomem", 0);
}

static int tcp_active(void)
{
    return tcp.poller != NULL;
}

static int tcp_progress(void)
{
    int events = tcp.poller ? bt_poller_wait(tcp.poller, 0) : 0;
    return events > 0 ? events : 0;
}

static void tcp_dump(FILE *f)
{
    int open = 0, failed = 0, queued = 0;

    for (int r = 0; tcp.peers && r < MPIDI_ICBC_global.peers.size; r++) {
        open += tcp.peers[r].conn != NULL && !tcp.peers[r].failed;
        failed += tcp.peers[r].failed;
        icbc_queue_for_each (m, &tcp.peers[r].waiting)
            queued++;
    }
    fprintf(f,
            "  tcp: %d connection(s) open, %d failed, %d message(s) waiting for room, "
            "%llu slab(s) of send completions\n",
            open, failed, queued, (unsigned long long) done_list.nslabs);
}

static void tcp_finalize(void)
{
    if (tcp.peers) {
        /* let queued frames drain before the connections close */
        for (int spin = 0; spin < 2000; spin++) {
            int busy = 0;
            for (int r = 0; r < MPIDI_ICBC_global.peers.size; r++)
                if (tcp.peers[r].conn && !tcp.peers[r].failed &&
                    (!icbc_queue_empty(&tcp.peers[r].waiting) || bt_conn_queued(tcp.peers[r].conn)))
                    busy = 1;
            if (!busy)
                break;
            bt_poller_wait(tcp.poller, 1);
        }
    }
    if (tcp.listener)
        bt_listener_destroy(tcp.listener);
    if (tcp.poller)
        bt_poller_destroy(tcp.poller);
    while (tcp.conns) {
        tcp_conn_t *tc = tcp.conns;
        tcp.conns = tc->next_all;
        if (tc->in_msg) {
            /* a message cut off by the end of the job: only its memory */
            MPL_free(tc->x.buf);
            free(tc->x.chunk.staging);
        }
        MPL_free(tc);
    }
    MPL_free(tcp.peers);
    MPL_free(tcp.wan_ranks);
    memset(&tcp, 0, sizeof(tcp));
    /* the poller is gone: no send completion is left to fire */
    icbc_freelist_destroy(&done_list);
    memset(&done_list, 0, sizeof(done_list));
}

const MPIDI_ICBC_path_ops_t MPIDI_ICBC_path_tcp_ops = {
    .name = "tcp",
    .send = tcp_path_send,
    .nlanes = tcp_nlanes,
    .active = tcp_active,
    .progress = tcp_progress,
    .dump = tcp_dump,
    .finalize = tcp_finalize,
    .set_pacing = tcp_set_pacing,
    .unsent = tcp_unsent,
};
