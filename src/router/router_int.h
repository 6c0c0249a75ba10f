/*
 * Router internals shared by router.c (loop, timers, stats), fabric.c
 * (processes: registration, receive), trunk.c (WAN streams) and forward.c
 * (message queues, memory bound, UNREACHABLE).
 *
 * A message (rt_msg_t) enters from one side and waits in the queue
 * (rt_queue_t) of its output: a trunk stream or a registered process.
 * Queues are FIFO and only their head is handed to the transport, once its
 * payload is in memory, so order per queue is arrival order. Payload memory
 * is charged against max_memory; whoever needs memory and cannot get it
 * waits, trunk streams in mem_waiters and rendezvous pulls in pull_waiters,
 * and is served in arrival order when memory is released; pulls also wait
 * while max_pulls of them are in flight. Eager data cannot be refused once
 * UCX delivered it; each process's eager window (CREDIT) bounds it instead.
 */
#ifndef RT_ROUTER_INT_H
#define RT_ROUTER_INT_H

#include <net/if.h>
#include <pthread.h>
#include <stdint.h>

#include "bt_lib.h"
#include "icbc_bind.h"
#include "icbc_route.h"
#include "icbc_routerfile.h"
#include "icbc_hmap.h"
#include "mx_server.h"
#include "router.h"
#include "icbc_list.h"
#include "icbc_clock.h"

typedef struct rt_queue rt_queue_t;
typedef struct rt_trunk rt_trunk_t;
typedef struct rt_stream rt_stream_t;
typedef struct rt_peer rt_peer_t;

/* Something that waits for payload memory: go() runs once NEED bytes were
 * charged on its behalf. */
typedef struct rt_waiter {
    icbc_list_t link;
    size_t need;
    void (*go)(struct rt_waiter *w);
    int pull;     /* a rendezvous pull: also bounded by max_pulls */
    uint64_t seq; /* arrival order across both waiter lists */
} rt_waiter_t;

typedef enum {
    PAY_NONE, /* no payload */
    PAY_UCX,  /* eager data kept from UCX: mx_server_data_release */
    PAY_POOL, /* malloc'ed buffer charged to the memory bound: free */
} rt_pay_t;

typedef enum {
    MSG_WAIT_MEM, /* rendezvous payload not pulled yet (holds desc) */
    MSG_PULLING,
    MSG_READY,   /* payload in memory, may be handed on */
    MSG_SENDING, /* handed to the transport; freed by its completion */
} rt_msg_state_t;

typedef enum { FROM_FABRIC, FROM_TRUNK, FROM_ROUTER } rt_origin_t;

typedef struct rt_msg {
    icbc_list_t qlink; /* in q->msgs */
    rt_waiter_t wait;  /* in router->mem_waiters while MSG_WAIT_MEM */
    struct icbc_router *r;
    rt_queue_t *q; /* output queue, NULL once handed on */
    icbc_route_hdr_t rh;
    uint8_t *hdr; /* route + inner header, owned */
    size_t hdr_len;
    void *payload; /* owner: this message, as KIND says */
    size_t len;
    rt_pay_t kind;
    void *desc;     /* rendezvous descriptor while MSG_WAIT_MEM */
    size_t charged; /* bytes charged to the memory bound */
    size_t credit;  /* eager window bytes the source gets back when freed */
    rt_msg_state_t state;
    rt_origin_t origin;
    double arrived; /* ms, monotonic: deadline of a wait for a trunk */
    int to_trunk;   /* stats: the output is a trunk */
} rt_msg_t;

/* Q_WAIT: messages for a cluster with no trunk up, waiting for one. */
typedef enum { Q_STREAM, Q_PEER, Q_WAIT } rt_queue_kind_t;

struct rt_queue {
    icbc_list_t msgs;
    icbc_list_t pump_link; /* in router->to_pump: pump from the loop */
    uint64_t bytes;        /* payload bytes queued, not yet handed on */
    rt_queue_kind_t kind;
    void *owner; /* rt_stream_t or rt_peer_t */
};

/* Reachability of one other cluster through this router's trunks. A cluster
 * whose last trunk failed (not closed in order) is announced unreachable to
 * the registered processes once the trunk wait has passed without a trunk
 * coming back, and reachable again when one does. */
typedef struct rt_reach {
    double lost_at; /* ms, monotonic: last trunk failed; 0: not lost */
    int announced;  /* processes were told it is unreachable */
} rt_reach_t;

/* Type tag at the start of every bt_lib connection argument. */
typedef enum { CONN_ROUTER, CONN_STREAM, CONN_DEAD } rt_conn_tag_t;

struct rt_stream {
    rt_conn_tag_t tag; /* CONN_STREAM */
    rt_trunk_t *t;
    int index;
    bt_conn_t *conn;  /* NULL when down */
    int ready;        /* authenticated */
    int busy;         /* bt_conn_send said BUSY; waiting for on_writable */
    rt_queue_t q;     /* messages to the other cluster */
    rt_waiter_t wait; /* receive side waiting for memory */
    size_t reserved;  /* memory charged for the next frame's payload */
    rt_msg_t *rx;     /* frame being received */
    char id[96];      /* our bt_lib id on this stream */
};

struct rt_trunk {
    struct icbc_router *r;
    int cluster; /* the other cluster */
    int peer;    /* index of the other router in its cluster */
    const icbc_rf_router_t *peer_rf;
    int initiator; /* we connect (our cluster index is lower) */
    int nstreams;
    rt_stream_t *streams;
    int up; /* every stream authenticated */
    int was_up;
    double retry_at; /* initiator: next connect attempt (ms, monotonic) */
    double backoff_ms;
    int failures; /* connect failures since the last up, for the log */
    /* statistics (stats-json "trunks") */
    uint64_t msgs_out, bytes_out, msgs_in, bytes_in;
    uint64_t downs; /* times it went down after being up */
};

struct rt_peer {
    struct icbc_router *r;
    mx_peer_t *mp;
    int registered;
    uint64_t job;
    uint32_t rank;
    unsigned char nonce[ICBC_ROUTE_NONCE_SIZE];
    double deadline;         /* REGISTER due by then (ms, monotonic) */
    icbc_list_t unreg_link;  /* in router->unregistered until registered */
    icbc_list_t all_link;    /* in router->peers */
    rt_queue_t out;          /* messages to this process */
    size_t credit_due;       /* eager bytes handed on, not credited yet */
    icbc_list_t credit_link; /* in router->credit_pending while a CREDIT is due */
    struct rt_pstat *ps;     /* its statistics (kept after it leaves); NULL: none */
    uint64_t pace;           /* bits/s it sends through us to other clusters (PACE); 0: none */
};

/* Statistics of a process, by (job, rank), kept for the router's life
 * (stats-json "processes"): messages it sent us, and we handed it. */
typedef struct rt_pstat {
    icbc_list_t link; /* in router->pstats */
    uint64_t job;
    uint32_t rank;
    uint64_t msgs_from, bytes_from, msgs_to, bytes_to;
} rt_pstat_t;

struct icbc_router {
    icbc_router_config_t cfg;
    const icbc_routerfile_t *rf;
    int cluster; /* own cluster index */
    int index;   /* own router index in the cluster */
    const icbc_rf_router_t *self;
    char name[64];                    /* "a/0 (host a0)" for logs */
    char fabric_dev[IF_NAMESIZE + 1]; /* interface of the fabric address (UCX device) */
    char wan_dev[IF_NAMESIZE + 1];    /* interface of the WAN address ("" unknown) */
    icbc_bind_t bind;                 /* where the router runs (--bind) */
    unsigned char key[ICBC_RF_KEY_MAX];
    size_t keylen;

    bt_poller_t *poller;
    bt_listener_t *listener;
    mx_server_t *fabric;
    int stop_fd; /* eventfd */
    volatile int stopping;
    volatile int stats_wanted; /* icbc_router_request_stats, from a signal handler */

    rt_trunk_t *trunks;
    int ntrunks;
    rt_queue_t *trunk_wait; /* per cluster: messages waiting for a trunk (Q_WAIT) */
    rt_reach_t *reach;      /* per cluster: lost since when, announced */

    icbc_hmap_t registry;       /* (job, rank) -> rt_peer_t */
    uint64_t pace_sum;          /* bits/s: the registered processes' PACE rates */
    icbc_hmap_t unreach_logged; /* (job, cluster << 32 | rank) already logged */
    icbc_hmap_t pstat_map;      /* (job, rank) -> rt_pstat_t */
    icbc_list_t pstats;         /* every rt_pstat_t, in order of first registration */
    icbc_list_t unregistered;   /* rt_peer_t by deadline */
    icbc_list_t peers;          /* every rt_peer_t */
    icbc_list_t to_pump;        /* queues to pump once UCX callbacks returned */
    icbc_list_t credit_pending; /* processes owed a CREDIT, sent from the loop */
    int destroying;

    /* memory bound */
    size_t charged;           /* payload bytes held */
    size_t charged_pool;      /* of which pulled or read into our buffers */
    icbc_list_t mem_waiters;  /* trunk streams waiting to read a payload */
    icbc_list_t pull_waiters; /* rendezvous pulls waiting for memory or a pull slot */
    uint64_t wait_seq;
    int kicking, kick_again;
    int pulls;          /* rendezvous pulls in flight (at most cfg.max_pulls) */
    size_t rss_read;    /* cfg.max_rss: resident bytes when last read, */
    size_t rss_granted; /* plus payload memory granted since */
    double rss_at;      /* ms, monotonic, of that read; 0: read again */

    rt_conn_tag_t conn_tag;  /* CONN_ROUTER: argument of accepted, unclaimed connections */
    bt_conn_t *cb_stack[16]; /* connections whose bt_lib callback is running */
    int cb_depth;
    bt_conn_t **dead; /* connections to destroy from the loop */
    size_t ndead, capdead;

    icbc_router_stats_t st;  /* owned by the loop thread */
    icbc_router_stats_t pub; /* copy for other threads, under pub_lock */
    pthread_mutex_t pub_lock;
    double next_stats;
    double next_guard;     /* ms, monotonic: next scan of the UCX ports' connections */
    double next_keepalive; /* ms, monotonic: next CREDIT to every registered process */
};

/* Resident bytes of this process (/proc/self/statm), 0 if unknown. */
size_t rt_resident_bytes(void);

/* forward.c */
void rt_queue_init(rt_queue_t *q, rt_queue_kind_t kind, void *owner);
rt_msg_t *rt_msg_new(struct icbc_router *r, const void *hdr, size_t hdr_len,
                     const icbc_route_hdr_t *rh, rt_origin_t origin);
void rt_msg_free(rt_msg_t *m);
void rt_enqueue(rt_queue_t *q, rt_msg_t *m);
void rt_pump(rt_queue_t *q);
/* Pump Q from the loop, not now (inside a UCX receive callback). */
void rt_pump_later(struct icbc_router *r, rt_queue_t *q);
void rt_pump_deferred(struct icbc_router *r);
/* Every message of Q is undeliverable: UNREACHABLE to its source, freed. */
void rt_queue_fail(rt_queue_t *q);
/* M (in a queue or not) is undeliverable: UNREACHABLE to its source, freed
 * (or, while its payload is being pulled, once the pull ends). */
void rt_msg_fail(rt_msg_t *m, const char *why);
/* The output queue for a message to (job, dst_cluster, dst_rank), or NULL. */
rt_queue_t *rt_route(struct icbc_router *r, const icbc_route_hdr_t *rh);
void rt_unreachable(struct icbc_router *r, const icbc_route_hdr_t *lost, const char *why);
int rt_mem_try(struct icbc_router *r, size_t n); /* charges N (pool) if allowed */
void rt_mem_charge_eager(struct icbc_router *r, size_t n);
void rt_mem_release(struct icbc_router *r, size_t n, int pool);
void rt_mem_wait(struct icbc_router *r, rt_waiter_t *w);
void rt_mem_kick(struct icbc_router *r);
void rt_on_sent(void *arg, icbc_status_t status);   /* mx_server send completion */
void rt_on_pulled(void *arg, icbc_status_t status); /* mx_server pull completion */

/* fabric.c */
extern const mx_server_cbs_t rt_fabric_cbs;
rt_peer_t *rt_lookup(struct icbc_router *r, uint64_t job, uint32_t rank);
void rt_fabric_timers(struct icbc_router *r, double now, double *next);
void rt_fabric_destroy(struct icbc_router *r);
/* CLUSTER_STATE for CLUSTER to every registered process. */
void rt_fabric_cluster_state(struct icbc_router *r, int cluster, int reachable);
/* An eager MSG of (JOB, RANK) costing N window bytes (0: none) left the router. */
void rt_fabric_credit(struct icbc_router *r, uint64_t job, uint32_t rank, size_t n);
/* Sends the CREDITs that came due (from the loop, never in a UCX callback). */
void rt_fabric_send_credits(struct icbc_router *r);

/* trunk.c */
icbc_status_t rt_trunks_create(struct icbc_router *r, char *err, size_t errlen);
void rt_trunks_destroy(struct icbc_router *r);
/* Orderly end: CLOSE on every stream, then a bounded wait for the closes. */
void rt_trunks_shutdown(struct icbc_router *r);
void rt_trunk_timers(struct icbc_router *r, double now, double *next);
rt_stream_t *rt_trunk_pick(struct icbc_router *r, const icbc_route_hdr_t *rh);
/* Paces every trunk stream at pace_sum (or --pacing when no
 * process asked): after a change of pace_sum. */
void rt_trunk_pacing(struct icbc_router *r);
icbc_status_t rt_stream_send(rt_stream_t *s, rt_msg_t *m); /* OK, BUSY, or failure */
void rt_destroy_dead(struct icbc_router *r);

#endif /* RT_ROUTER_INT_H */
