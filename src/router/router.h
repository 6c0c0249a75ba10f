/*
 * icbc router core: forwards route messages between the compute processes
 * of its cluster (fabric side, UCX, src/mx_router) and the routers of the
 * other clusters (WAN side, TCP trunks, src/bt_lib). docs/router.md tells
 * what it does; icbc-router (router_main.c) is the daemon around it, and a
 * compute process may run it in a thread of its own.
 *
 * Threads: create, run and destroy belong to one thread; icbc_router_stop
 * and icbc_router_get_stats may be called from any thread (stop also from a
 * signal handler).
 */
#ifndef ICBC_ROUTER_H
#define ICBC_ROUTER_H

#include <stddef.h>
#include <stdint.h>

#include "icbc_routerfile.h"
#include "icbc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct icbc_router icbc_router_t;

#define ICBC_ROUTER_MAX_MEMORY_DEFAULT (64u << 20)
#define ICBC_ROUTER_MAX_PULLS_DEFAULT 4
#define ICBC_ROUTER_STREAMS_DEFAULT 4
#define ICBC_ROUTER_STREAMS_MAX 64
#define ICBC_ROUTER_REGISTER_MS_DEFAULT 5000
#define ICBC_ROUTER_MAX_UNREGISTERED_DEFAULT 4096
#define ICBC_ROUTER_TRUNK_WAIT_MS_DEFAULT 10000
#define ICBC_ROUTER_STREAM_QUEUE_DEFAULT (1u << 20)
#define ICBC_ROUTER_NOTSENT_LOWAT_DEFAULT (256 << 10)
#define ICBC_ROUTER_EAGER_WINDOW_MIN (64u << 10)
#define ICBC_ROUTER_EAGER_WINDOW_MAX (4u << 20)

typedef struct icbc_router_config {
    const icbc_routerfile_t *rf; /* borrowed; must outlive the router */
    const char *host;            /* which 'router' entry this is; NULL: this host */
    size_t max_memory;           /* bound on buffered payload bytes; 0: 64 MiB */
    size_t max_rss;              /* bound on the resident size of the whole process, for
                                  * a router that has its process to itself (daemon);
                                  * payloads wait while it would be exceeded; 0: none.
                                  * Sets malloc to return large buffers to the system. */
    int streams;                 /* TCP connections per trunk; 0: 4 */
    int max_pulls;               /* rendezvous pulls from processes in flight at once;
                                  * 0: 4 */
    uint64_t pacing_rate;        /* SO_MAX_PACING_RATE per stream, bytes/s; 0: off */
    int sndbuf, rcvbuf;          /* socket buffers of the trunks; 0: bt_lib default */
    size_t stream_queue;         /* bytes queued per trunk stream before it counts as
                                  * busy: no more pulls for it; 0: 1 MiB */
    int notsent_lowat;           /* TCP_NOTSENT_LOWAT of the trunks; 0: 256 KiB; < 0: off */
    double stats_interval;       /* seconds between stats lines; 0: none */
    const char *bind;            /* "auto", "none" or a CPU list (icbc_bind.h); NULL: none */
    int bind_thread;             /* bind the thread that runs the router (an embedded one),
                                  * not the whole process */
    const char *fabric_api;      /* "ucx" or "ofi"; NULL: the cluster's in the router file */
    const char *ofi_provider;    /* libfabric provider; NULL: $FI_PROVIDER, else tcp;ofi_rxm */
    const char *ucx_tls;         /* UCX_TLS if the environment sets none; NULL: "tcp" */
    const char *ucx_devices;     /* UCX_NET_DEVICES; NULL: the interface that holds the
                                  * router's fabric address (icbc_netif.h) */
    size_t rndv_thresh;          /* fabric payloads above this go by rendezvous; 0: 8 KiB */
    size_t eager_window;         /* eager bytes (AM header + payload) one process may have
                                  * in this router at once; 0: max_memory / 256, within
                                  * 64 KiB .. 4 MiB */
    int register_ms;             /* REGISTER deadline after connect; 0: 5000. Also the
                                  * age at which a connection to the UCX ports from a
                                  * host without a registered process is shut down */
    int max_unregistered;        /* such connections held at once; 0: 4096 */
    int trunk_wait_ms;           /* how long a message waits for a trunk to come up;
                                  * 0: 10000; < 0: not at all */
} icbc_router_config_t;

typedef struct icbc_router_stats {
    uint64_t msgs_out, bytes_out;     /* fabric -> WAN trunk */
    uint64_t msgs_in, bytes_in;       /* WAN trunk -> fabric */
    uint64_t msgs_local, bytes_local; /* fabric -> fabric (both ends in this cluster) */
    uint64_t unreachable;             /* messages that could not be delivered */
    uint64_t refused_fabric;          /* processes refused (bad or missing REGISTER) */
    uint64_t fabric_conns_closed;     /* UCX-port connections shut by the guard (mx_guard.h) */
    uint64_t refused_trunk;           /* trunk connections refused (authentication, identity) */
    uint64_t buffered, peak_buffered; /* payload bytes held now / at most */
    uint64_t registered;              /* processes registered now */
    uint64_t trunks, trunks_up;
    uint64_t clusters_unreachable;        /* other clusters announced unreachable now */
    uint64_t descs_held, peak_descs_held; /* rendezvous payloads announced, not pulled yet */
    long peak_rss_kb;
} icbc_router_stats_t;

/* Checks the configuration against the router file, opens the fabric
 * listener and the WAN listener. On failure ERR holds one line. */
icbc_status_t icbc_router_create(const icbc_router_config_t *cfg, icbc_router_t **out, char *err,
                                 size_t errlen);
/* This router's entry in the router file, and its cluster's index. */
const icbc_rf_router_t *icbc_router_entry(const icbc_router_t *r, int *cluster);
/* Runs the event loop until icbc_router_stop. */
/* Where the router runs and why (--bind), and the host's topology. */
const char *icbc_router_bind_text(const icbc_router_t *r, char *buf, size_t len);

icbc_status_t icbc_router_run(icbc_router_t *r);
/* Makes icbc_router_run return soon. Async-signal-safe. */
void icbc_router_stop(icbc_router_t *r);
/* Makes icbc_router_run log a stats line (and its JSON form) soon.
 * Async-signal-safe. */
void icbc_router_request_stats(icbc_router_t *r);
void icbc_router_destroy(icbc_router_t *r);

/* A consistent copy of the counters, as of the last loop iteration. */
void icbc_router_get_stats(icbc_router_t *r, icbc_router_stats_t *st);
/* The one-line form used by --stats-interval and at exit. */
void icbc_router_format_stats(const icbc_router_stats_t *st, char *buf, size_t len);
/* The same counters as one JSON object, named as the struct's fields; the
 * router logs it as "stats-json {...}" beside each stats line, for tools. */
void icbc_router_format_stats_json(const icbc_router_stats_t *st, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_ROUTER_H */
