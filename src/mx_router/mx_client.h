/*
 * mx_client: the compute process's half of the routed transport to the
 * routers of its cluster. It runs on a fabric the caller owns (the
 * netmod's; mx_fabric.h, UCX or libfabric), needs no MPI, never blocks
 * inside a callback, and leaves progress to the caller
 * (mx_fabric_progress), except in mx_client_create and mx_client_destroy,
 * which drive the fabric until registration or shutdown finish or their
 * deadline passes.
 *
 * mx_client_create connects to every router given, answers each CHALLENGE
 * with a REGISTER proof and waits for every REGISTER_ACK; it fails with one
 * message naming the router and the cause (unreachable, refused, timeout).
 *
 * Messages from the routers (MSG, UNREACHABLE) arrive through on_msg. The
 * payload is either eager data or, if m->rndv, a rendezvous descriptor.
 * Return 0 from on_msg when done with eager data (it is gone after the
 * call), or 1 to keep m->data: then give eager data back with
 * mx_client_data_release, and pull a descriptor with mx_client_recv_data
 * (or drop it with mx_client_data_release) after on_msg returned. A
 * descriptor on_msg does not keep (return 0) is dropped by the fabric, and the
 * router's send of it completes; never release it and return 0 as well.
 * UNREACHABLE carries the lost message's route header as its inner header
 * and no payload. CLUSTER_STATE (a router lost, or regained, every trunk to
 * another cluster) arrives through on_cluster_state.
 *
 * Back-pressure: the router can refuse neither eager data nor a rendezvous
 * announcement once the fabric delivered it, so two windows per router bound what
 * one process can make it hold. At most rndv_window rendezvous sends are
 * posted at a time (the router holds a descriptor for each until it
 * pulls the payload), and eager sends stay within the eager window the
 * router gave in REGISTER_ACK, the router returning CREDIT as it hands
 * them on. Later sends to that router wait in the client in order and are
 * posted as earlier ones complete or credit comes back (from fabric
 * callbacks); losing the router fails them.
 *
 * One client per fabric: it installs the handler of MX_AM_ROUTE.
 */
#ifndef MX_CLIENT_H
#define MX_CLIENT_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "icbc_route.h"
#include "icbc_routerfile.h"
#include "icbc_status.h"
#include "mx_fabric.h"
#include "mx_router.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mx_client mx_client_t;

typedef struct mx_client_msg {
    icbc_route_hdr_t route; /* parsed and checked route header */
    const void *inner;      /* inner header, valid during the call */
    size_t inner_len;
    void *data; /* payload, or the rendezvous descriptor if rndv */
    size_t len;
    int rndv;
    int router; /* index of the router it came through */
} mx_client_msg_t;

/* Completion of a send or a pull; may run before the posting call returns. */
typedef void (*mx_client_cb_t)(void *arg, icbc_status_t status);

typedef struct mx_client_params {
    mx_fabric_t *fabric;
    const icbc_rf_router_t *routers; /* the routers of this process's cluster */
    size_t nrouters;
    uint16_t cluster; /* this process's cluster index */
    uint64_t job;
    uint32_t rank;
    const unsigned char *key; /* the router file's key (copied) */
    size_t keylen;
    int timeout_ms;     /* registration deadline; 0: 10000 */
    size_t rndv_thresh; /* larger payloads go by rendezvous; 0: default */
    /* Rendezvous sends in flight per router (the router holds a
     * descriptor for each until it pulls the payload); later sends to that
     * router wait here, in order. 0: MX_RNDV_WINDOW_DEFAULT. */
    int rndv_window;
    /* A registered router that sends nothing for this long while the
     * process polls (mx_client_watch) is lost: routers send at least every
     * MX_ROUTER_KEEPALIVE_MS. 0: never. */
    int silence_ms;
    /* A router lost after registration is connected and registered again
     * every this many ms until it answers (a restarted daemon); on_router_back
     * then tells the owner. With it, a router that cannot be reached at
     * start (not one that refuses) is tried so too, once one other
     * registered. 0: never, and every router must register at start. */
    int reconnect_ms;
    int (*on_msg)(const mx_client_msg_t *m, void *arg);
    /* The endpoint to ROUTER failed after registration (router gone), or
     * the router fell silent (silence_ms). Sends to it fail from now on. */
    void (*on_router_lost)(int router, icbc_status_t status, void *arg);
    /* ROUTER, lost before, is registered again: sends to it work again. */
    void (*on_router_back)(int router, void *arg);
    /* ROUTER can no longer (REACHABLE 0) or again (1) reach CLUSTER. */
    void (*on_cluster_state)(int router, uint16_t cluster, int reachable, void *arg);
    void *arg;
} mx_client_params_t;

icbc_status_t mx_client_create(const mx_client_params_t *params, mx_client_t **out, char *err,
                               size_t errlen);
/* Sends DEREGISTER to the live routers and closes the endpoints (bounded wait). */
void mx_client_destroy(mx_client_t *c);

/* One MSG to (DST_CLUSTER, DST_RANK) through ROUTER. INNER is copied;
 * PAYLOAD must stay valid until CB(ARG) runs. FLAGS: ICBC_ROUTE_F_ORDERED
 * for messages that must stay in order with the pair's other ordered ones.
 * ICBC_ERR_INVALID: inner header too large (see mx_client_max_inner) or
 * payload above ICBC_ROUTE_PAYLOAD_MAX; ICBC_ERR_PEER_FAILED: router lost. */
icbc_status_t mx_client_send(mx_client_t *c, int router, uint16_t dst_cluster, uint32_t dst_rank,
                             uint16_t flags, const void *inner, size_t inner_len,
                             const void *payload, size_t len, mx_client_cb_t cb, void *arg);

/* Whether a send of LEN payload bytes to ROUTER would wait in the client
 * (its window is full, or sends already wait): a caller that can place the
 * message elsewhere (a chunk) may prefer another router. */
int mx_client_would_wait(const mx_client_t *c, int router, size_t len);

/* Pulls a rendezvous payload (m->data of on_msg) into BUF. */
icbc_status_t mx_client_recv_data(mx_client_t *c, void *desc, void *buf, size_t len,
                                  mx_client_cb_t cb, void *arg);
void mx_client_data_release(mx_client_t *c, void *data);

/* Call from the process's progress loop: finds routers silent for
 * silence_ms, and registers again with lost ones (reconnect_ms). Time
 * between calls more than a second apart does not count (the process was
 * not listening; what arrived is still queued). */
void mx_client_watch(mx_client_t *c);

size_t mx_client_max_inner(const mx_client_t *c);
/* One line per router: state, windows, sends waiting (a hang's diagnosis). */
void mx_client_dump(const mx_client_t *c, FILE *f);
size_t mx_client_num_routers(const mx_client_t *c);
int mx_client_router_alive(const mx_client_t *c, int router);
/* The CPUs ROUTER said it is bound to when it accepted this process, as a
 * list ("3"); "" when it is not bound or did not say. */
const char *mx_client_router_cpus(const mx_client_t *c, int router);

/* Tells ROUTER that this process sends to other clusters through it at
 * BITS_PER_S from now on (PACE; 0: not paced); told again after a new
 * registration. */
icbc_status_t mx_client_pace(mx_client_t *c, int router, uint64_t bits_per_s);

#ifdef __cplusplus
}
#endif

#endif /* MX_CLIENT_H */
