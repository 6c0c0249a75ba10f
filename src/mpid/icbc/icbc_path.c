/*
 * Paths to peers outside the direct fabric path: which path each peer takes
 * (router file + policy), chosen once per peer after the card exchange, and
 * the one interface every kind of path implements (icbc_path.h):
 *
 *   routed   icbc_path_routed.c: through the routers of both clusters
 *   tcp      icbc_path_tcp.c: a bt_lib connection between the processes
 *
 * Every routed or TCP message carries the route header, so a receiver checks
 * job and ranks before it looks further.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "icbc_path.h"
#include "icbc_impi.h"
#include "core/icbc_netprobe.h"

#include <netinet/in.h>

MPIDI_ICBC_paths_t MPIDI_ICBC_paths;
#define P MPIDI_ICBC_paths

int MPIDI_ICBC_path_cfg_error(const char *why)
{
    return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_FATAL, __func__, __LINE__, MPI_ERR_OTHER,
                                "**icbc_cfg", "**icbc_cfg %s", why);
}

static int policy_uses_routers(void)
{
    return P.policy == ICBC_RF_POLICY_AGGREGATE || P.policy == ICBC_RF_POLICY_STATIC;
}

/* The job spans clusters under a routed policy: this process may talk to
 * routers (it registers with them in MPIDI_ICBC_path_init_world). */
int MPIDI_ICBC_path_routers_used(void)
{
    return P.rf && policy_uses_routers() && icbc_routerfile_num_clusters(P.rf) > 1;
}

/* The 'fabric-api' of this process's cluster in the router file
 * (ICBC_RF_FABRIC_*); ICBC_RF_FABRIC_UCX without one. */
int MPIDI_ICBC_path_fabric_api(void)
{
    return P.rf && P.cluster >= 0 ? icbc_routerfile_cluster(P.rf, P.cluster)->fabric_api
                                  : ICBC_RF_FABRIC_UCX;
}

int MPIDI_ICBC_path_tcp_used(void)
{
    return P.policy == ICBC_RF_POLICY_TCP ||
           (P.policy == ICBC_RF_POLICY_ALLTOALL && P.rf && icbc_routerfile_num_clusters(P.rf) > 1);
}

/* ---- set-up ------------------------------------------------------------- */

/* An IMPI client's host address faces the other clients (the server's
 * side, often a WAN): UCX, which is not made to face strangers
 * (docs/router.md, SECURITY), stays off its interface when another one
 * reaches the job's other nodes too. DEVS is a ',' list. */
static void keep_off_impi_face(char *devs)
{
    char face[IF_NAMESIZE], out[ICBC_NETIF_LIST_MAX] = "", *save = NULL, *dev;
    struct sockaddr_in sa = { .sin_family = AF_INET };

    if (!MPIDI_ICBC_impi.active || !strchr(devs, ','))
        return;
    memcpy(&sa.sin_addr, MPIDI_ICBC_impi.layout.procs[MPIR_Process.rank].host + 12, 4);
    if (icbc_netif_holding((struct sockaddr *) &sa, face, sizeof(face)) != ICBC_OK)
        return;
    for (dev = strtok_r(devs, ",", &save); dev; dev = strtok_r(NULL, ",", &save))
        if (strcmp(dev, face) != 0)
            snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s", out[0] ? "," : "", dev);
    snprintf(devs, ICBC_NETIF_LIST_MAX, "%s", out);
}

/* A job without a router file: the interfaces that reach a process of
 * another node at start-up (icbc_netprobe.h), so that UCX offers no
 * address a peer cannot reach (a management network that does not route
 * between nodes). Every process of the job (the process manager's view)
 * takes part in the exchange, or none: what decides it is the job's alone
 * (no router file, the same variables everywhere). */
static int probe_fabric(void)
{
    int mpi_errno = MPI_SUCCESS;
    int rank, size, peer = -1;
    icbc_netprobe_t probe;
    icbc_netprobe_card_t *cards = NULL;

    if (MPIR_CVAR_CH4_ICBC_NET_PROBE_TIMEOUT <= 0 ||
        (MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES && MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES[0]) ||
        getenv("UCX_NET_DEVICES"))
        return MPI_SUCCESS;
    MPIR_pmi_view(&rank, &size);
    if (size < 2)
        return MPI_SUCCESS;
    if (icbc_netprobe_listen(&probe) != ICBC_OK)
        probe.card.n = 0; /* still takes part: the others wait for its card */
    cards = MPL_malloc(sizeof(*cards) * size, MPL_MEM_OTHER);
    MPIR_ERR_CHKANDJUMP(cards == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    mpi_errno = MPIR_pmi_allgather(&probe.card, sizeof(probe.card), cards, sizeof(probe.card),
                                   MPIR_PMI_DOMAIN_ALL);
    MPIR_ERR_CHECK(mpi_errno);
    /* the next process in PMI order on another node */
    for (int k = 1; k < size && peer < 0; k++)
        if (!icbc_netprobe_same_node(&probe.card, &cards[(rank + k) % size]))
            peer = (rank + k) % size;
    if (peer >= 0 && probe.card.n > 0) {
        if (icbc_netprobe_try(&probe.card, &cards[peer], MPIR_CVAR_CH4_ICBC_NET_PROBE_TIMEOUT,
                              P.fabric_devs, sizeof(P.fabric_devs)) > 0) {
            keep_off_impi_face(P.fabric_devs);
            icbc_info("UCX devices from the start-up trial with process %d on another node: %s",
                      peer, P.fabric_devs);
        } else
            icbc_warn("no network interface of this host reached process %d of the job on "
                      "another node in %d ms; UCX chooses its devices",
                      peer, MPIR_CVAR_CH4_ICBC_NET_PROBE_TIMEOUT);
    }
    /* the listeners stay until every process has tried */
    mpi_errno = MPIR_pmi_barrier();
fn_fail:
    icbc_netprobe_close(&probe);
    MPL_free(cards);
    return mpi_errno;
}

int MPIDI_ICBC_path_init_local(void)
{
    int mpi_errno = MPI_SUCCESS;
    char err[ICBC_RF_ERR_LEN + 64];
    icbc_status_t st;

    memset(&P, 0, sizeof(P));
    P.ops[ICBC_PATH_ROUTED] = &MPIDI_ICBC_path_routed_ops;
    P.ops[ICBC_PATH_TCP_DIRECT] = &MPIDI_ICBC_path_tcp_ops;
    P.ops[ICBC_PATH_IMPI] = &MPIDI_ICBC_path_impi_ops;
    P.cluster = -1;
    P.policy = ICBC_RF_POLICY_AGGREGATE;
    st = icbc_routerfile_load_env(&P.rf, err, sizeof(err));
    if (st == ICBC_ERR_NOT_FOUND) {
        P.rf = NULL; /* one cluster, no routers */
    } else if (st != ICBC_OK) {
        return MPIDI_ICBC_path_cfg_error(err);
    } else {
        P.policy = icbc_routerfile_policy(P.rf);
    }
    if (MPIR_CVAR_CH4_ICBC_POLICY && MPIR_CVAR_CH4_ICBC_POLICY[0]) {
        if (icbc_rf_policy_from_string(MPIR_CVAR_CH4_ICBC_POLICY, &P.policy) != ICBC_OK) {
            snprintf(err, sizeof(err),
                     "MPIR_CVAR_CH4_ICBC_POLICY=%s is not one of aggregate, "
                     "static, alltoall, tcp",
                     MPIR_CVAR_CH4_ICBC_POLICY);
            return MPIDI_ICBC_path_cfg_error(err);
        }
        if (P.rf && icbc_routerfile_check_policy(P.rf, P.policy, err, sizeof(err)) != ICBC_OK)
            return MPIDI_ICBC_path_cfg_error(err);
    }
    if (P.rf) {
        char host[ICBC_RF_HOST_MAX + 1];
        if (icbc_routerfile_self_cluster(P.rf, &P.cluster, host, sizeof(host), err, sizeof(err)) !=
            ICBC_OK)
            return MPIDI_ICBC_path_cfg_error(err);
        P.nrouters = (int) icbc_routerfile_cluster(P.rf, P.cluster)->nrouters;
        for (size_t c = 0; c < icbc_routerfile_num_clusters(P.rf); c++)
            if (icbc_routerfile_cluster(P.rf, c)->nrouters > 1)
                P.failover = MPIR_CVAR_CH4_ICBC_FAILOVER && policy_uses_routers();
        st = icbc_routerfile_read_key(P.rf, P.key, sizeof(P.key), &P.keylen, err, sizeof(err));
        if (st != ICBC_OK && st != ICBC_ERR_NOT_FOUND)
            return MPIDI_ICBC_path_cfg_error(err);
        /* UCX on the fabric alone (docs/router.md, SECURITY); the CVAR overrides. */
        if (!(MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES && MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES[0])) {
            st = icbc_netif_fabric_devices(P.rf, P.cluster, P.fabric_devs, sizeof(P.fabric_devs),
                                           err, sizeof(err));
            if (st != ICBC_OK && st != ICBC_ERR_NOT_FOUND)
                return MPIDI_ICBC_path_cfg_error(err);
        }
    }
    if (P.rf == NULL) {
        mpi_errno = probe_fabric();
        if (mpi_errno)
            return mpi_errno;
    }
    if (MPIDI_ICBC_path_tcp_used())
        mpi_errno = MPIDI_ICBC_path_tcp_listen();
    return mpi_errno;
}

const char *MPIDI_ICBC_path_ucx_devices(void)
{
    if (MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES && MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES[0])
        return MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES;
    return P.fabric_devs[0] ? P.fabric_devs : NULL;
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
int MPIDI_ICBC_path_init_world(const void *card0, size_t card0_len,
                               const struct MPIDI_ICBC_path_up *up)
{
    int mpi_errno = MPI_SUCCESS;
    char err[ICBC_RF_ERR_LEN + 128];
    int size = MPIDI_ICBC_global.peers.size;
    int any_routed = 0;

    P.up = up;

    /* Every process computes the same job id from rank 0's card, which
     * holds its fabric address: unique per run. */
    P.job = fnv1a(card0, card0_len);
    for (int r = 0; r < size; r++) {
        icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, r);
        peer->cluster = P.cluster;
        if (peer->path == ICBC_PATH_IMPI) {
            peer->cluster = -1; /* another IMPI client: in no cluster of the router file */
            continue;
        }
        if (P.rf) {
            peer->cluster = icbc_routerfile_find_host(P.rf, peer->node);
            if (peer->cluster < 0) {
                snprintf(err, sizeof(err), "%s: host '%s' of rank %d is in no cluster",
                         icbc_routerfile_name(P.rf), peer->node, r);
                return MPIDI_ICBC_path_cfg_error(err);
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
    if (MPIDI_ICBC_path_tcp_used()) {
        mpi_errno = MPIDI_ICBC_path_tcp_open(size, P.up);
        MPIR_ERR_CHECK(mpi_errno);
    }
    /* Register with the routers of our cluster whenever the job spans
     * clusters under a routed policy; others may route to us. A client of
     * an IMPI job reaches the other clients by IMPI: only its own
     * processes in other clusters need the routers. */
    if (MPIDI_ICBC_path_routers_used() &&
        (any_routed || (P.nrouters > 0 && !MPIDI_ICBC_impi.active))) {
        mpi_errno = MPIDI_ICBC_path_routed_open(P.up);
        MPIR_ERR_CHECK(mpi_errno);
    }
    if (MPIDI_ICBC_impi.active) {
        mpi_errno = MPIDI_ICBC_path_impi_open(P.up);
        MPIR_ERR_CHECK(mpi_errno);
    }
    for (int k = 0; k < ICBC_PATH_KINDS; k++)
        if (P.ops[k] && P.ops[k]->active())
            MPIDI_ICBC_global.xpath = 1;
    /* nobody may route to a process that has not registered yet */
    if (MPIDI_ICBC_global.xpath) {
        mpi_errno = MPIR_pmi_barrier();
        MPIR_ERR_CHECK(mpi_errno);
    }
fn_fail:
    return mpi_errno;
}

/* ---- every path --------------------------------------------------------- */

int MPIDI_ICBC_waiting_push(icbc_queue_t *q, int rank, const void *hdr, size_t hdr_len,
                            const void *payload, size_t len, MPIDI_ICBC_xdone_cb_t cb, void *arg)
{
    MPIDI_ICBC_waiting_t *w = MPL_malloc(sizeof(*w) + hdr_len, MPL_MEM_OTHER);

    if (w == NULL)
        return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                    MPI_ERR_OTHER, "**nomem", 0);
    *w = (MPIDI_ICBC_waiting_t){
        .rank = rank, .payload = payload, .len = len, .cb = cb, .arg = arg, .hdr_len = hdr_len
    };
    memcpy(w->hdr, hdr, hdr_len);
    icbc_queue_push(q, &w->qe);
    return MPI_SUCCESS;
}

int MPIDI_ICBC_path_progress(void)
{
    int events = 0;

    for (int k = 0; k < ICBC_PATH_KINDS; k++)
        if (P.ops[k])
            events += P.ops[k]->progress();
    return events;
}

void MPIDI_ICBC_path_dump(FILE *f)
{
    fprintf(f, "  policy %s, cluster %d, %d router(s)\n", icbc_rf_policy_name(P.policy), P.cluster,
            P.nrouters);
    for (int k = 0; k < ICBC_PATH_KINDS; k++)
        if (P.ops[k] && P.ops[k]->active())
            P.ops[k]->dump(f);
}

void MPIDI_ICBC_path_set_pacing(int kind, uint64_t bits_per_s)
{
    if (P.ops[kind] && P.ops[kind]->set_pacing)
        P.ops[kind]->set_pacing(bits_per_s);
}

size_t MPIDI_ICBC_path_unsent(int kind)
{
    return P.ops[kind] && P.ops[kind]->unsent ? P.ops[kind]->unsent() : 0;
}

int MPIDI_ICBC_path_settled(void)
{
    for (int k = 0; k < ICBC_PATH_KINDS; k++)
        if (P.ops[k] && P.ops[k]->settled && P.ops[k]->active() && !P.ops[k]->settled())
            return 0;
    return 1;
}

void MPIDI_ICBC_path_finalize(void)
{
    for (int k = 0; k < ICBC_PATH_KINDS; k++)
        if (P.ops[k])
            P.ops[k]->finalize();
    if (P.rf)
        icbc_routerfile_free(P.rf);
    memset(&P, 0, sizeof(P));
}
