/*
 * Embedded router: on a host that the router file lists as a router, the
 * first compute process of the node runs the router core (src/router) in a
 * thread of its own, so "every node is a router" needs no daemon. When a
 * standalone icbc-router already holds the router's addresses, its
 * listeners cannot open and the process simply uses that router.
 *
 * Started before the business-card exchange, whose barrier makes every
 * router of the job listen before any process registers.
 */
#include <mpidimpl.h>
#include "icbc_impl.h"
#include "core/icbc_bind.h"
#include "core/icbc_netif.h"
#include "core/icbc_routerfile.h"
#include "router/router.h"

#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

static struct {
    icbc_routerfile_t *rf;
    icbc_router_t *router;
    pthread_t thread;
    int running;
    char placement[160]; /* where this process runs, when a router shares its host */
    char router_host[ICBC_RF_HOST_MAX + 1]; /* this host, when the router file has a router on it */
} embedded;

const char *MPIDI_ICBC_router_embed_placement(void)
{
    return embedded.placement;
}

/* A process on a router's host that nothing bound leaves the router's
 * CPUs to it (router-bind, or the CVAR), and says where it runs. */
static void place_process(const icbc_routerfile_t *rf, const char *host)
{
    const icbc_rf_router_t *rt;
    const char *spec;
    char iface[IF_NAMESIZE + 1] = "", where[64];
    int cluster, moved;

    if ((rt = icbc_routerfile_find_router(rf, host, &cluster)) == NULL)
        return;
    snprintf(embedded.router_host, sizeof(embedded.router_host), "%s", rt->host);
    spec = MPIR_CVAR_CH4_ICBC_ROUTER_BIND && MPIR_CVAR_CH4_ICBC_ROUTER_BIND[0]
               ? MPIR_CVAR_CH4_ICBC_ROUTER_BIND
               : icbc_routerfile_cluster(rf, (size_t) cluster)->router_bind;
    if (spec[0] == '\0' || strcmp(spec, "none") == 0)
        return;
    if (icbc_netif_holding((const struct sockaddr *) &rt->wan.sa, iface, sizeof(iface)) != ICBC_OK)
        iface[0] = '\0';
    moved = icbc_bind_avoid(spec, iface[0] ? iface : NULL, where, sizeof(where));
    snprintf(embedded.placement, sizeof(embedded.placement), "CPUs %s (%s)", where,
             moved ? "the router's left to it" : "as it was bound before MPI_Init");
    icbc_info("runs on %s; router %s of this host: router-bind %s", embedded.placement, rt->host,
              spec);
}

void MPIDI_ICBC_router_embed_place_told(const char *const *hosts, const char *const *cpus, int n)
{
    char list[256] = "", where[64];
    size_t len = 0;
    int moved;

    if (embedded.placement[0] || !embedded.router_host[0])
        return; /* placed by the router file or the CVAR already, or no router here */
    for (int k = 0; k < n; k++)
        if (cpus[k][0] && strcmp(hosts[k], embedded.router_host) == 0 &&
            len + strlen(cpus[k]) + 2 < sizeof(list))
            len +=
                (size_t) snprintf(list + len, sizeof(list) - len, "%s%s", len ? "," : "", cpus[k]);
    if (len == 0)
        return;
    moved = icbc_bind_avoid(list, NULL, where, sizeof(where));
    snprintf(embedded.placement, sizeof(embedded.placement), "CPUs %s (%s)", where,
             moved ? "the router's left to it" : "as it was bound before MPI_Init");
    icbc_info("runs on %s; router %s of this host: bound to CPU(s) %s (told by the router)",
              embedded.placement, embedded.router_host, list);
}

/* True when something listens on ADDR already (a router daemon, or the
 * embedded router of another job on this host). SO_REUSEADDR: sockets of an
 * earlier router in TIME_WAIT do not count. */
static int addr_in_use(const icbc_rf_addr_t *a)
{
    int one = 1, in_use, fd = socket(a->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    in_use = bind(fd, (const struct sockaddr *) &a->sa, a->salen) != 0 && errno == EADDRINUSE;
    close(fd);
    return in_use;
}

static void *router_thread(void *arg)
{
    icbc_router_run(embedded.router);
    return NULL;
}

int MPIDI_ICBC_router_embed_start(void)
{
    char err[ICBC_RF_ERR_LEN + 128];
    char host[ICBC_RF_HOST_MAX + 1];
    char why[ICBC_RF_ERR_LEN + 256];
    const icbc_rf_router_t *rt;
    int cluster, rc;

    if (icbc_routerfile_load_env(&embedded.rf, err, sizeof(err)) != ICBC_OK)
        return MPI_SUCCESS; /* no router file: nothing to embed (errors come from xpath) */
    if (icbc_routerfile_num_clusters(embedded.rf) < 2 ||
        icbc_routerfile_self_host(host, sizeof(host)) != ICBC_OK)
        goto none;
    place_process(embedded.rf, host);
    if (!MPIR_CVAR_CH4_ICBC_EMBEDDED_ROUTER || MPIR_Process.local_rank != 0 ||
        (rt = icbc_routerfile_find_router(embedded.rf, host, &cluster)) == NULL)
        goto none;

    if (addr_in_use(&rt->fabric) || addr_in_use(&rt->wan)) {
        /* a daemon (or another job's router) serves this host: use it */
        if (getenv("ICBC_LOG_LEVEL"))
            icbc_info("uses the router already listening on %s / %s", rt->fabric.text,
                      rt->wan.text);
        goto none;
    }
    icbc_router_config_t cfg = {
        .rf = embedded.rf,
        .host = host,
        .max_memory = (size_t) MPL_MAX(MPIR_CVAR_CH4_ICBC_ROUTER_MEMORY, 1) << 20,
        .streams = MPL_MAX(MPIR_CVAR_CH4_ICBC_ROUTER_STREAMS, 1),
        .max_pulls = MPL_MAX(MPIR_CVAR_CH4_ICBC_ROUTER_PULLS, 1),
        .bind = MPIR_CVAR_CH4_ICBC_ROUTER_BIND && MPIR_CVAR_CH4_ICBC_ROUTER_BIND[0]
                    ? MPIR_CVAR_CH4_ICBC_ROUTER_BIND
                    : NULL,
        .bind_thread = 1, /* the process's other threads stay where they are */
        /* as its processes when the user chose; else the interface of its
         * own fabric address */
        .ucx_devices = (MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES && MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES[0])
                           ? MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES
                           : NULL,
    };
    if (icbc_router_create(&cfg, &embedded.router, err, sizeof(err)) != ICBC_OK) {
        /* MPICH keeps a line of an error stack short: the reason first */
        snprintf(why, sizeof(why), "rank %d cannot start the embedded router of host %s: %s",
                 MPIR_Process.rank, host, err);
        goto fail;
    }
    rc = pthread_create(&embedded.thread, NULL, router_thread, NULL);
    if (rc != 0) {
        icbc_router_destroy(embedded.router);
        embedded.router = NULL;
        snprintf(why, sizeof(why),
                 "rank %d cannot start the embedded router thread of host "
                 "%s: %s",
                 MPIR_Process.rank, host, strerror(rc));
        goto fail;
    }
    embedded.running = 1;
    return MPI_SUCCESS;

none:
    icbc_routerfile_free(embedded.rf);
    embedded.rf = NULL;
    return MPI_SUCCESS;

fail:
    icbc_routerfile_free(embedded.rf);
    embedded.rf = NULL;
    return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_FATAL, __func__, __LINE__, MPI_ERR_OTHER,
                                "**icbc_cfg", "**icbc_cfg %s", why);
}

void MPIDI_ICBC_router_embed_stop(void)
{
    if (embedded.running) {
        /* Let the processes of the cluster close their connections first:
         * the side that closes first keeps the TIME_WAIT, and the router's
         * fixed address must be free for the next job. */
        icbc_router_stats_t st;
        for (int i = 0; i < 300; i++) {
            icbc_router_get_stats(embedded.router, &st);
            if (st.registered == 0)
                break;
            usleep(10000);
        }
        icbc_router_stop(embedded.router);
        pthread_join(embedded.thread, NULL);
        icbc_router_destroy(embedded.router);
        embedded.running = 0;
    }
    if (embedded.rf)
        icbc_routerfile_free(embedded.rf);
    memset(&embedded, 0, sizeof(embedded));
}
