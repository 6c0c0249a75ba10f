/*
 * icbc netmod start-up and shutdown: the cluster's fabric, the business
 * card exchange that fills the peer table, and the run-time knobs
 * (MPIR_CVAR_CH4_ICBC_*); connection on first use is icbc_peer_ep.c.
 *
 * Every CVAR of the netmod is declared in the block below, one catalogue
 * for users and for MPI_T, whichever file reads it.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "mpidu_bc.h"
#include "core/icbc_bcard.h"
#include "icbc_xfer.h"
#include "icbc_pacing.h"
#include "icbc_impi.h"

#include <net/if.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

/* Finalize waits at most this long for peers to acknowledge the last
 * messages (MPIDI_ICBC_path_settled): a router's loss is seen and its
 * messages go again within it, a peer that is gone ends it. */
#define FINALIZE_SETTLE_S 10.0

/*
=== BEGIN_MPI_T_CVAR_INFO_BLOCK ===

categories :
    - name : CH4_ICBC
      description : Variables of the icbc netmod (ICBC, MPICH for clusters of clusters)

cvars:
    - name        : MPIR_CVAR_CH4_ICBC_EAGER_LIMIT
      category    : CH4_ICBC
      type        : int
      default     : 65536
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Direct path: messages whose MPI header plus payload are at most this
        many bytes are sent eagerly; larger payloads use UCX's rendezvous and
        land directly in the receive buffer. Capped at
        MPIR_CVAR_CH4_AM_PACK_BUFFER_SIZE (an unexpected eager message must
        fit one of MPIDIG's buffers).

    - name        : MPIR_CVAR_CH4_ICBC_UCX_TLS
      category    : CH4_ICBC
      type        : string
      default     : "auto"
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        UCX transports used between nodes (UCX_TLS syntax, e.g. "tcp" or "rc,ud").
        "auto" keeps UCX_TLS when it is set and otherwise uses "^sm": every
        network transport but no shared memory, because same-node peers use
        MPICH's shared-memory module and UCX's shared-memory transports would
        silently bypass the network between containers or namespaces.

    - name        : MPIR_CVAR_CH4_ICBC_FABRIC_API
      category    : CH4_ICBC
      type        : string
      default     : "auto"
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        The fabric API between the nodes of this process's cluster: "ucx" or
        "ofi" (libfabric, FI_EP_RDM). "auto" (default): the cluster's
        fabric-api line in the router file, else ucx. The cluster's routers
        must speak the same API (the router file tells them).

    - name        : MPIR_CVAR_CH4_ICBC_OFI_PROVIDER
      category    : CH4_ICBC
      type        : string
      default     : ""
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        With the ofi fabric API: the libfabric provider when FI_PROVIDER is
        not set. Empty (default): "tcp;ofi_rxm". Its endpoint is bound to
        the first fabric device (MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES).

    - name        : MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES
      category    : CH4_ICBC
      type        : string
      default     : ""
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        UCX network devices used between nodes (UCX_NET_DEVICES syntax, e.g.
        "fab0" or "mlx5_0:1"). Empty (default): with a router file whose
        cluster of this process has routers, the interface(s) this host uses
        to reach their fabric= addresses, so that UCX listens on the fabric
        only and never on a WAN-facing or management interface; without a
        router file, UCX_NET_DEVICES, else the interfaces that reached a
        process on another node in MPI_Init's trial
        (MPIR_CVAR_CH4_ICBC_NET_PROBE_TIMEOUT). Also the device of an
        embedded router.

    - name        : MPIR_CVAR_CH4_ICBC_YIELD
      category    : CH4_ICBC
      type        : int
      default     : -1
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        Yield the processor when progress finds nothing to do: 1 always, 0
        never, -1 (default) when more MPI processes of the job share this
        machine (one kernel; emulated nodes in network namespaces of one host
        count together) than it has online cores.

    - name        : MPIR_CVAR_CH4_ICBC_IDLE_SLEEP
      category    : CH4_ICBC
      type        : int
      default     : 50
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        With yield-when-idle on (MPIR_CVAR_CH4_ICBC_YIELD): microseconds a
        process sleeps per progress poll once it has found nothing to do for
        256 polls in a row (until something happens). Yielding alone leaves a
        waiting process on the CPU whenever the scheduler picks it again.
        Processes with other ranks on their node sleep too (a shared-memory
        transfer then may wait one sleep per cell). 0: never sleep, only
        yield.

    - name        : MPIR_CVAR_CH4_ICBC_IDLE_SLEEP_MAX
      category    : CH4_ICBC
      type        : int
      default     : 50
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        The sleep of an idle process (MPIR_CVAR_CH4_ICBC_IDLE_SLEEP) doubles
        per empty poll up to this many microseconds, and starts again from
        MPIR_CVAR_CH4_ICBC_IDLE_SLEEP when something happens: a process that
        waits long wakes up rarely, and oversleeps by at most what it has
        waited already. Values below MPIR_CVAR_CH4_ICBC_IDLE_SLEEP mean it
        (the default: no doubling). 16 processes of two emulated clusters on
        two cores, NPB CG.A: 400 cut the host's CPU use from 77 % to 57 % at
        the same speed with 10 Mbit/s NICs, but cost 17 % at 25 Mbit/s.

    - name        : MPIR_CVAR_CH4_ICBC_PEER_ERRORS
      category    : CH4_ICBC
      type        : boolean
      default     : false
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        Direct path: open UCX endpoints with peer error handling, so that a
        lost peer fails the operations towards it with an MPI error naming
        it. UCX then gives up zero-copy rendezvous over TCP (payloads are
        copied out of its receive buffers: measured 10-40% less bandwidth
        from 128 KiB up). Off (default), as in stock MPICH: a process that
        dies ends the job through the process manager.

    - name        : MPIR_CVAR_CH4_ICBC_FAULT_INJECT
      category    : CH4_ICBC
      type        : string
      default     : ""
      class       : none
      verbosity   : MPI_T_VERBOSITY_MPIDEV_DETAIL
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        For testing the error paths only. "bcard" makes this process publish a
        corrupt business card, so that its peers must fail MPI_Init with an
        error that names it. Empty (default): no fault.

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

    - name        : MPIR_CVAR_CH4_ICBC_NET_PROBE_TIMEOUT
      category    : CH4_ICBC
      type        : int
      default     : 500
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        A job without a router file and without
        MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES or UCX_NET_DEVICES: milliseconds
        MPI_Init tries connections from each network interface of this host
        to a process on another node of the job; UCX then uses the
        interfaces that connected. 0: no trial, UCX's choice of every
        interface.

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

    - name        : MPIR_CVAR_CH4_ICBC_FAILOVER
      category    : CH4_ICBC
      type        : boolean
      default     : true
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        With more than one router per cluster (policies aggregate and
        static): messages to other clusters survive the loss of routers.
        A striped send ends when the receiver confirms it, ordered messages
        are numbered and kept until the receiver acknowledges them, and what
        a lost router carried goes again through the others; a router that
        comes back is used again. Only when every router of the cluster is
        lost for 5 s do transfers to other clusters fail. Off: losing a
        router fails the transfers to other clusters, as with one router.

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

    - name        : MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER
      category    : CH4_ICBC
      type        : int
      default     : 1
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        1: on a router host of the router file, the node's first process runs
        the router in a thread when no icbc-router daemon holds the router's
        addresses; the thread ends with that process. 0: never (routers are
        daemons).

    - name        : MPIR_CVAR_CH4_ICBC_ROUTER_MEMORY
      category    : CH4_ICBC
      type        : int
      default     : 64
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        Bound, in MiB, on the payload an embedded router buffers; senders are
        held back (back-pressure) when it is reached.

    - name        : MPIR_CVAR_CH4_ICBC_ROUTER_STREAMS
      category    : CH4_ICBC
      type        : int
      default     : 4
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        TCP connections per trunk of an embedded router.

    - name        : MPIR_CVAR_CH4_ICBC_ROUTER_PULLS
      category    : CH4_ICBC
      type        : int
      default     : 4
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        Rendezvous payloads an embedded router pulls from processes at once;
        more wait their turn, so that each arrives whole soon and the trunk
        is fed without a gap.

    - name        : MPIR_CVAR_CH4_ICBC_ROUTER_BIND
      category    : CH4_ICBC
      type        : string
      default     : ""
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        Where an embedded router's thread runs: auto (a core near the NIC of
        its WAN address, from hwloc's topology), none, or a CPU list such as
        3; empty: the router file's router-bind for the cluster. Compute
        processes on a router's host that nothing bound leave those CPUs to
        the router.

    - name        : MPIR_CVAR_CH4_ICBC_PACED_ALLTOALL
      category    : CH4_ICBC
      type        : boolean
      default     : false
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        Rate-managed MPI_Alltoall and MPI_Alltoallv across clusters: for the
        duration of the collective each process paces its sending to other
        clusters at MATB = the WAN's rate (MPIR_CVAR_CH4_ICBC_WAN_RATE, else
        the router file's wan-rate) divided by the number of the
        communicator's processes in its cluster, and the rate it had before
        is restored after. Without a WAN rate the collectives are not paced.

    - name        : MPIR_CVAR_CH4_ICBC_WAN_RATE
      category    : CH4_ICBC
      type        : string
      default     : ""
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        Rate of the WAN between the clusters, in bits/s with an optional
        unit bit, kbit, mbit or gbit (e.g. 400mbit), for rate-managed
        collectives. Empty: the router file's wan-rate entry.

    - name        : MPIR_CVAR_CH4_ICBC_IMPI_HOST
      category    : CH4_ICBC
      type        : string
      default     : ""
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        IMPI jobs (ICBC_IMPI_SERVER set): the IPv4 address this process
        advertises as its IMPI host and listens on for the hosts of the
        other clients. Empty (default): the address this host reaches
        impi-server from.

    - name        : MPIR_CVAR_CH4_ICBC_IMPI_TIMEOUT
      category    : CH4_ICBC
      type        : int
      default     : 600
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        IMPI jobs: seconds MPI_Init waits for each answer of impi-server
        (the other clients start meanwhile) before it fails with an error
        naming the server.

    - name        : MPIR_CVAR_CH4_ICBC_DUMP_SIGNAL
      category    : CH4_ICBC
      type        : int
      default     : 12
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        Signal that makes a process print, on stderr, what its netmod is
        waiting for (routers and their windows, striped sends and receives,
        RMA operations outstanding per window and target, the first words of
        each window), every line starting with "icbc dump [RANK]:", for
        diagnosing a hung job (kill -USR2 PID). 12 (SIGUSR2) by default; 0: none. Not
        installed when the application already handles that signal.

=== END_MPI_T_CVAR_INFO_BLOCK ===
*/

static const char *self_node_name(char *buf, size_t len)
{
    const char *env = getenv("ICBC_NODE");

    if (env && *env) {
        snprintf(buf, len, "%s", env);
    } else if (gethostname(buf, len) != 0) {
        snprintf(buf, len, "rank%d", MPIR_Process.rank);
    }
    buf[len - 1] = '\0';
    return buf;
}

/* A device list that names a network interface this host does not have
 * would leave UCX without a transport and fail at the first message; say so
 * at MPI_Init instead. Names with ':' (e.g. "mlx5_0:1") are UCX's own. */
static int check_devices(const char *list)
{
    char buf[1024], *save = NULL, *dev;

    snprintf(buf, sizeof(buf), "%s", list);
    for (dev = strtok_r(buf, ",", &save); dev; dev = strtok_r(NULL, ",", &save)) {
        if (strchr(dev, ':') || !strcmp(dev, "all") || if_nametoindex(dev) != 0)
            continue;
        char host[256], why[1400];
        gethostname(host, sizeof(host));
        host[sizeof(host) - 1] = '\0';
        snprintf(why, sizeof(why),
                 "UCX device '%s' (MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES=%s) "
                 "is not a network interface of host %s",
                 dev, list, host);
        return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_FATAL, __func__, __LINE__, MPI_ERR_OTHER,
                                    "**icbc_cfg", "**icbc_cfg %s", why);
    }
    return MPI_SUCCESS;
}

/* The fabric API of this process's cluster (MPIR_CVAR_CH4_ICBC_FABRIC_API). */
static int fabric_api(mx_fabric_api_t *api)
{
    const char *want = MPIR_CVAR_CH4_ICBC_FABRIC_API;
    char why[256];

    if (want == NULL || want[0] == '\0' || !strcmp(want, "auto")) {
        *api = MPIDI_ICBC_path_fabric_api() == ICBC_RF_FABRIC_OFI ? MX_FABRIC_OFI : MX_FABRIC_UCX;
    } else if (mx_fabric_api_parse(want, api) != ICBC_OK) {
        snprintf(why, sizeof(why), "MPIR_CVAR_CH4_ICBC_FABRIC_API=%s: want auto, ucx or ofi", want);
        return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_FATAL, __func__, __LINE__, MPI_ERR_OTHER,
                                    "**icbc_cfg", "**icbc_cfg %s", why);
    }
    return MPI_SUCCESS;
}

/* The cluster's fabric: UCX or libfabric on the fabric device(s), active
 * messages of the direct path handled from here on. */
static int create_fabric(void)
{
    int mpi_errno = MPI_SUCCESS;
    const char *tls = MPIR_CVAR_CH4_ICBC_UCX_TLS;
    const char *devices = MPIDI_ICBC_path_ucx_devices();
    const char *provider = MPIR_CVAR_CH4_ICBC_OFI_PROVIDER;
    char iface[64] = "", err[512];
    mx_fabric_api_t api;

    mpi_errno = fabric_api(&api);
    MPIR_ERR_CHECK(mpi_errno);
    if (tls == NULL || !strcmp(tls, "auto"))
        tls = getenv("UCX_TLS") ? NULL : "^sm";
    if (devices) {
        mpi_errno = check_devices(devices);
        MPIR_ERR_CHECK(mpi_errno);
        snprintf(iface, sizeof(iface), "%.*s", (int) strcspn(devices, ","), devices);
    }
    mx_fabric_params_t params = {
        .api = api,
        /* routers may be killed and restarted under it */
        .peers_may_fail = MPIDI_ICBC_path_routers_used(),
        .peer_errors = MPIR_CVAR_CH4_ICBC_PEER_ERRORS != 0,
        .serialized = 1,
        .estimated_eps = (size_t) MPIR_Process.size,
        .ucx_tls = tls,
        .ucx_devices = devices,
        .ofi_provider = provider && provider[0] ? provider : NULL,
        .ofi_iface = iface[0] && !strchr(iface, ':') ? iface : NULL,
    };
    if (mx_fabric_create(&params, &(mx_fabric_cbs_t){ 0 }, NULL, &MPIDI_ICBC_global.fabric, err,
                         sizeof(err)) != ICBC_OK)
        MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**icbc_cfg", "**icbc_cfg %s", err);
    icbc_info("fabric: %s", mx_fabric_describe(MPIDI_ICBC_global.fabric));

    /* Bound the MPI header so that a wire header plus the MPI header always fits. */
    MPIDI_ICBC_global.max_am_header =
        MPL_MIN(mx_fabric_max_hdr(MPIDI_ICBC_global.fabric), 4096 + ICBC_WIRE_AM_HDR_SIZE);
    MPIR_ERR_CHKANDJUMP1(MPIDI_ICBC_global.max_am_header < ICBC_WIRE_AM_HDR_SIZE + 256, mpi_errno,
                         MPI_ERR_OTHER, "**icbc_cfg", "**icbc_cfg %s",
                         "the fabric's active-message header limit is too small");
    mx_fabric_set_am_handler(MPIDI_ICBC_global.fabric, MPIDI_ICBC_AM_ID, MPIDI_ICBC_am_recv_cb,
                             NULL);
fn_fail:
    return mpi_errno;
}

int MPIDI_ICBC_init_local(int *tag_bits)
{
    int mpi_errno = MPI_SUCCESS;

    MPIR_ERR_CHKANDJUMP1(MPIR_CVAR_CH4_ROOTS_ONLY_PMI, mpi_errno, MPI_ERR_OTHER, "**icbc_cfg",
                         "**icbc_cfg %s",
                         "MPIR_CVAR_CH4_ROOTS_ONLY_PMI is not supported by the icbc netmod");

    memset(&MPIDI_ICBC_global, 0, sizeof(MPIDI_ICBC_global));
    {
        /* every line this process logs (netmod, embedded router) names it */
        char ident[32];
        snprintf(ident, sizeof(ident), "icbc rank %d", MPIR_Process.rank);
        icbc_log_set_ident(ident);
    }
    MPIDI_ICBC_global.eager_limit =
        MPL_MIN(MPIR_CVAR_CH4_ICBC_EAGER_LIMIT, MPIR_CVAR_CH4_AM_PACK_BUFFER_SIZE);
    if (MPIDI_ICBC_global.eager_limit < 0)
        MPIDI_ICBC_global.eager_limit = 0;
    /* until the cards tell how many processes share this machine */
    MPIDI_ICBC_global.yield_when_idle = MPIR_CVAR_CH4_ICBC_YIELD > 0;

    /* router file, policy, TCP listener: before the fabric, so their errors come first */
    mpi_errno = MPIDI_ICBC_path_init_local();
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIDI_ICBC_xfer_init();
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIDI_ICBC_pace_init();
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIDI_ICBC_router_embed_start();
    MPIR_ERR_CHECK(mpi_errno);
    MPIDI_ICBC_dump_init();
    mpi_errno = create_fabric();
    MPIR_ERR_CHECK(mpi_errno);

    /* All matching happens in MPIDIG, which supports the full MPI tag range. */
    *tag_bits = MPIR_TAG_BITS_DEFAULT;

fn_exit:
    return mpi_errno;
fn_fail:
    goto fn_exit;
}

/* Yield when idle if asked to, or by default when more processes of this job
 * share the machine than it has cores: emulated nodes of one host are
 * several MPI nodes but one set of cores, so MPI's local size undercounts.
 * An IMPI job counts the processes of the other ICBC clients on this
 * machine too (P_ICBC_MACHINE): each client is its own mpiexec. */
static void set_yield_when_idle(int procs_on_machine)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);

    if (MPIR_CVAR_CH4_ICBC_YIELD >= 0)
        MPIDI_ICBC_global.yield_when_idle = MPIR_CVAR_CH4_ICBC_YIELD > 0;
    else
        MPIDI_ICBC_global.yield_when_idle = cores > 0 && procs_on_machine > cores;
    /* Ranks with peers on their node sleep too: shared-memory traffic makes
     * progress this netmod does not see (a large message moves cell by
     * cell), so such a transfer may wait one sleep per cell, but a node of
     * several yielding ranks keeps every core busy and starves the router
     * and the ranks that have work. */
    MPIDI_ICBC_global.idle_sleep_ns =
        MPL_MIN(MPL_MAX(MPIR_CVAR_CH4_ICBC_IDLE_SLEEP, 0), 999999) * 1000L;
    MPIDI_ICBC_global.idle_sleep_max_ns =
        MPL_MAX(MPL_MIN(MPIR_CVAR_CH4_ICBC_IDLE_SLEEP_MAX, 999999) * 1000L,
                MPIDI_ICBC_global.idle_sleep_ns);
}

/* Empty polls before an idle process yields, and before it sleeps: a reply
 * is often a few microseconds away, and a sleep costs at least the timer's
 * slack (50 us by default) on the next message. */
#define MPIDI_ICBC_IDLE_POLLS_BEFORE_YIELD 16
#define MPIDI_ICBC_IDLE_POLLS_BEFORE_SLEEP 256

void MPIDI_ICBC_progress_idle(void)
{
    /* requests completed elsewhere (shared memory, MPIDIG) are work too */
    int count = MPL_atomic_relaxed_load_int(&MPIDI_VCI(0).progress_count);
    if (count != MPIDI_ICBC_global.seen_progress_count) {
        MPIDI_ICBC_global.seen_progress_count = count;
        MPIDI_ICBC_global.idle_polls = 0;
        return;
    }
    if (MPIDI_ICBC_global.idle_polls < MPIDI_ICBC_IDLE_POLLS_BEFORE_SLEEP)
        MPIDI_ICBC_global.idle_polls++;
    if (MPIDI_ICBC_global.idle_polls < MPIDI_ICBC_IDLE_POLLS_BEFORE_YIELD)
        return;
    if (MPIDI_ICBC_global.idle_polls < MPIDI_ICBC_IDLE_POLLS_BEFORE_SLEEP ||
        MPIDI_ICBC_global.idle_sleep_ns == 0) {
        /* every idle run yields before it sleeps: its sleeps start short */
        MPIDI_ICBC_global.idle_sleep_cur_ns = MPIDI_ICBC_global.idle_sleep_ns;
        sched_yield();
        return;
    }
    /* The sleep doubles while nothing happens: a process that waits long
     * (a transfer across the WAN, a peer computing) wakes up rarely, and
     * sleeps at most as long again as it has already waited. */
    long ns = MPIDI_ICBC_global.idle_sleep_cur_ns;
    MPIDI_ICBC_global.idle_sleep_cur_ns = MPL_MIN(2 * ns, MPIDI_ICBC_global.idle_sleep_max_ns);
    struct timespec ts = { 0, ns }; /* < 1 s */
    nanosleep(&ts, NULL);
}

/* An IMPI job: the cards of this client's processes, in PMI order, each in
 * a slot of *RECV_LEN bytes of *TABLE (MPL_free'd by the caller). MPICH's
 * card table spans MPI_COMM_WORLD, which is larger than what PMI knows. */
static int gather_client_cards(const char *card, size_t card_len, void **table, int *recv_len)
{
    int mpi_errno = MPI_SUCCESS;
    int n = MPIDI_ICBC_impi.pmi_size, len = (int) card_len, *lens = NULL, max = 0;
    char *padded = NULL;

    lens = MPL_malloc(sizeof(int) * n, MPL_MEM_ADDRESS);
    MPIR_ERR_CHKANDJUMP(lens == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    mpi_errno = MPIR_pmi_allgather(&len, sizeof(len), lens, sizeof(len), MPIR_PMI_DOMAIN_ALL);
    MPIR_ERR_CHECK(mpi_errno);
    for (int i = 0; i < n; i++)
        max = MPL_MAX(max, lens[i]);
    padded = MPL_calloc(1, max, MPL_MEM_ADDRESS);
    *table = MPL_malloc((size_t) max * n, MPL_MEM_ADDRESS);
    MPIR_ERR_CHKANDJUMP(padded == NULL || *table == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    memcpy(padded, card, card_len);
    mpi_errno = MPIR_pmi_allgather(padded, max, *table, max, MPIR_PMI_DOMAIN_ALL);
    MPIR_ERR_CHECK(mpi_errno);
    *recv_len = max;
fn_exit:
    MPL_free(lens);
    MPL_free(padded);
    return mpi_errno;
fn_fail:
    goto fn_exit;
}

/* Exchange business cards and fill the peer table. */
static int exchange_cards(void)
{
    int mpi_errno = MPI_SUCCESS;
    int size = MPIR_Process.size, rank = MPIR_Process.rank;
    void *addr = NULL;
    size_t addr_len = 0;
    char node[ICBC_BCARD_MAX_NAME + 1];
    char *card = NULL;
    size_t card_len;
    void *table = NULL;
    int recv_len = 0;
    int table_created = 0;
    const icbc_bcard_tcp_t *tcp;
    int ntcp;
    uint64_t machine = icbc_bcard_machine_id();
    int same_machine = 0;

    addr_len = mx_fabric_address_max(MPIDI_ICBC_global.fabric);
    addr = MPL_malloc(addr_len, MPL_MEM_ADDRESS);
    MPIR_ERR_CHKANDJUMP(addr == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    MPIR_ERR_CHKANDJUMP1(mx_fabric_address(MPIDI_ICBC_global.fabric, addr, &addr_len) != ICBC_OK,
                         mpi_errno, MPI_ERR_OTHER, "**icbc_cfg", "**icbc_cfg %s",
                         "cannot get the fabric address of this process");
    self_node_name(node, sizeof(node));
    tcp = MPIDI_ICBC_path_card_tcp(&ntcp);
    card_len = icbc_bcard_size_tcp(node, addr_len, ntcp);
    MPIR_ERR_CHKANDJUMP1(card_len > MPID_MAX_BC_SIZE, mpi_errno, MPI_ERR_OTHER, "**icbc_cfg",
                         "**icbc_cfg %s",
                         "the fabric address does not fit a business card "
                         "(restrict MPIR_CVAR_CH4_ICBC_UCX_TLS)");
    card = MPL_malloc(card_len, MPL_MEM_ADDRESS);
    MPIR_ERR_CHKANDJUMP(card == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    MPIR_ERR_CHKANDJUMP1(icbc_bcard_encode_tcp(node, addr, addr_len, tcp, ntcp, machine, card,
                                               card_len, &card_len) != ICBC_OK,
                         mpi_errno, MPI_ERR_OTHER, "**icbc_cfg", "**icbc_cfg %s",
                         "cannot encode business card (node name too long?)");

    if (MPIR_CVAR_CH4_ICBC_FAULT_INJECT && !strcmp(MPIR_CVAR_CH4_ICBC_FAULT_INJECT, "bcard"))
        card[0] ^= 0xff; /* break the magic */

    if (MPIDI_ICBC_impi.active) {
        /* the cards of this client's processes only, over its own PMI */
        mpi_errno = gather_client_cards(card, card_len, &table, &recv_len);
        MPIR_ERR_CHECK(mpi_errno);
    } else {
        mpi_errno = MPIDU_bc_table_create(rank, size, MPIR_Process.node_map, card, (int) card_len,
                                          FALSE, FALSE, &table, &recv_len);
        MPIR_ERR_CHECK(mpi_errno);
        table_created = 1;
    }

    MPIR_ERR_CHKANDJUMP(icbc_peer_table_init(&MPIDI_ICBC_global.peers, size) != ICBC_OK, mpi_errno,
                        MPI_ERR_OTHER, "**nomem");
    for (int r = 0; r < size; r++) {
        icbc_bcard_t bc;
        char why[128];
        icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, r);
        int slot = MPIDI_ICBC_impi.active ? r - MPIDI_ICBC_impi.first_rank : r;

        MPIDI_ICBC_AV(&MPIDIU_get_av(0, r)).peer = r;
        if (MPIDI_ICBC_impi_foreign(r)) {
            int client, host;
            char name[ICBC_BCARD_MAX_NAME + 1];

            MPIDI_ICBC_impi_where(r, &client, &host);
            snprintf(name, sizeof(name), "impi-client%d-host%d", client, host);
            MPIR_ERR_CHKANDJUMP(icbc_peer_set_address(peer, name, NULL, 0) != ICBC_OK, mpi_errno,
                                MPI_ERR_OTHER, "**nomem");
            peer->path = ICBC_PATH_IMPI;
            /* another ICBC client's process on this machine busy-polls
             * the same cores */
            same_machine += (machine != 0 && MPIDI_ICBC_impi_machine(r) == machine);
            continue;
        }
        if (icbc_bcard_parse((char *) table + (size_t) slot * recv_len, recv_len, &bc, why,
                             sizeof(why)) != ICBC_OK) {
            MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**icbc_bcard", "**icbc_bcard %d %s", r,
                                 why);
        }
        MPIR_ERR_CHKANDJUMP(
            icbc_peer_set_address(peer, bc.node, bc.fabric_addr, bc.fabric_addr_len) != ICBC_OK,
            mpi_errno, MPI_ERR_OTHER, "**nomem");
        peer->path = MPIDI_av_is_local(&MPIDIU_get_av(0, r)) ? ICBC_PATH_SHM : ICBC_PATH_DIRECT;
        peer->ntcp = bc.ntcp;
        memcpy(peer->tcp, bc.tcp, sizeof(bc.tcp));
        same_machine += (machine != 0 && bc.machine == machine);
    }
    set_yield_when_idle(machine != 0 ? same_machine : MPIR_Process.local_size);

    /* Paths to other clusters; registration with the routers. The job id
     * comes from rank 0's card, exactly its encoded bytes: what pads a slot
     * of the table differs between nodes. */
    icbc_peer_t *peer0 = icbc_peer_get(&MPIDI_ICBC_global.peers,
                                       MPIDI_ICBC_impi.active ? MPIDI_ICBC_impi.first_rank : 0);
    size_t card0_len = icbc_bcard_size_tcp(peer0->node, peer0->fabric_addr_len, peer0->ntcp);
    MPIR_Assert(card0_len <= (size_t) recv_len);
    mpi_errno = MPIDI_ICBC_path_init_world(table, card0_len, &MPIDI_ICBC_xfer_up);
    MPIR_ERR_CHECK(mpi_errno);
    if (MPIDI_ICBC_impi.active) { /* its packets are read in progress, which has not run yet */
        mpi_errno = MPIDI_ICBC_proto_impi_open();
        MPIR_ERR_CHECK(mpi_errno);
    }

fn_exit:
    if (table_created)
        MPIDU_bc_table_destroy();
    else
        MPL_free(table);
    MPL_free(card);
    MPL_free(addr);
    return mpi_errno;
fn_fail:
    goto fn_exit;
}

int MPIDI_ICBC_init_world(void)
{
    int mpi_errno = MPI_SUCCESS;

    mpi_errno = exchange_cards();
    MPIR_ERR_CHECK(mpi_errno);
fn_fail:
    return mpi_errno;
}

int MPIDI_ICBC_post_init(void)
{
    return MPI_SUCCESS;
}

int MPIDI_ICBC_mpi_finalize_hook(void)
{
    int mpi_errno = MPI_SUCCESS;
    icbc_peer_table_t *peers = &MPIDI_ICBC_global.peers;

    /* Nothing progresses in the process manager's barrier below: a message
     * of ours lost with a router would never go again, and a peer still
     * waiting for it (in its last MPI call) would wait for ever. Progress
     * until the peers have acknowledged everything, bounded for a peer
     * that is gone. A fabric may also still hold the last messages of an
     * eager send that completed when its data was copied (libfabric
     * connects on first use and writes from its progress): progress until
     * it has handed them to the network. */
    double settle_until = icbc_clock_coarse() + FINALIZE_SETTLE_S;
    while ((!MPIDI_ICBC_path_settled() || !mx_fabric_sends_done(MPIDI_ICBC_global.fabric)) &&
           icbc_clock_coarse() < settle_until)
        MPIDI_NM_progress(0, 0);

    /* Every process must be past its last message before endpoints close:
     * a peer still sending to a closed endpoint would see an error. */
    mpi_errno = MPIR_pmi_barrier();
    MPIR_ERR_CHECK(mpi_errno);
    MPIDI_ICBC_global.finalizing = 1;

    MPIDI_ICBC_pace_finalize();
    MPIDI_ICBC_path_finalize();
    if (MPIDI_ICBC_impi.active)
        MPIDI_ICBC_proto_impi_finalize();
    MPIDI_ICBC_xfer_finalize();
    MPIDI_ICBC_impi_finalize();
    MPIDI_ICBC_router_embed_stop();

    for (int r = 0; r < peers->size; r++) {
        icbc_peer_t *peer = &peers->peers[r];
        if (!peer->ep)
            continue;
        mx_fabric_ep_close(peer->ep, 0);
        peer->ep = NULL;
    }
    /* closes what is still open and waits (bounded) for the closes */
    mx_fabric_destroy(MPIDI_ICBC_global.fabric);
    MPIDI_ICBC_global.fabric = NULL;
    MPIDI_ICBC_xrecv_finalize();
    icbc_peer_table_destroy(peers);

fn_exit:
    return mpi_errno;
fn_fail:
    goto fn_exit;
}
