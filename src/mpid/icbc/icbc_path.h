/*
 * The paths to peers outside the direct fabric path, behind one interface.
 *
 * A path kind (icbc_path_t) has one ops table; a peer's kind is chosen once,
 * after the card exchange (icbc_path.c), and every message to it goes
 * through that table. A path moves bytes on lanes:
 *
 *   lane MPIDI_ICBC_LANE_ORDERED  the pair's ordered lane: whole messages,
 *                                 RTS and CTS, in MPI order; never refuses
 *   lanes 0 .. nlanes-1           chunks of striped messages, any order;
 *                                 may refuse (busy) under back-pressure
 *
 * and hands what arrives to the layer above through the callbacks it was
 * given at open (MPIDI_ICBC_path_up_t): recv_begin (header: where does the
 * payload go), the payload written there (in one piece or streamed),
 * recv_end; and tells it of lost peers and lanes the same way. A path knows
 * nothing of the protocols that travel on its lanes.
 *
 * Implementations: icbc_path_routed.c (through the routers), icbc_path_tcp.c
 * (bt_lib connections), icbc_path_impi.c (IMPI host connections to the
 * processes of other IMPI clients). The protocol a message takes is chosen
 * above the paths (icbc_proto.h): IMPI's towards a client of another MPI,
 * ICBC's (whole messages and the striping rendezvous) otherwise.
 */
#ifndef ICBC_PATH_H_INCLUDED
#define ICBC_PATH_H_INCLUDED

#include <ucp/api/ucp.h>

#include "core/icbc_queue.h"
#include "core/icbc_peer.h"
#include "core/icbc_route.h"
#include "core/icbc_routerfile.h"
#include "core/icbc_netif.h"
#include "core/icbc_stripe.h"
#include "core/icbc_wire.h"

/* The pair's ordered lane. */
#define MPIDI_ICBC_LANE_ORDERED (-1)
/* Small reports that may be lost (adaptive placement's DELIVERED): the
 * pair's router, not numbered or kept; routed path only. */
#define MPIDI_ICBC_LANE_CONTROL (-2)

/* Path kinds that can have an ops table. */
#define ICBC_PATH_KINDS (ICBC_PATH_IMPI + 1)

/* Completion of one lane send: STATUS is ICBC_OK, or why the message was
 * lost. The type of mx_client's and the seq lane's completions, so that a
 * path passes it through without a record of its own. */
typedef void (*MPIDI_ICBC_xdone_cb_t)(void *arg, icbc_status_t status);

/* A message that waits, in order, for room on its connection (the TCP
 * path) or for the pacing bucket: its own copy of its header, the caller's
 * payload (referenced until CB). */
typedef struct MPIDI_ICBC_waiting {
    icbc_queue_elem_t qe;
    int rank;
    const void *payload;
    size_t len;
    MPIDI_ICBC_xdone_cb_t cb;
    void *arg;
    size_t hdr_len;
    uint8_t hdr[];
} MPIDI_ICBC_waiting_t;

/* Appends a message for RANK to Q; an MPI error code when out of memory.
 * Popped ones are MPL_free'd by their taker. */
int MPIDI_ICBC_waiting_push(icbc_queue_t *q, int rank, const void *hdr, size_t hdr_len,
                            const void *payload, size_t len, MPIDI_ICBC_xdone_cb_t cb, void *arg);

/* A message being received, held by the path that receives it and filled
 * in by the layer above (recv_begin .. recv_end). */
typedef struct {
    int kind; /* what recv_end still has to do; 0: nothing */
    int src_rank;
    size_t len;
    void *buf;              /* AM: staging of the payload (owned) */
    int buf_small;          /* BUF is one of the small staging buffers */
    icbc_stripe_rx_t chunk; /* CHUNK: the engine's receive of it */
    icbc_am_hdr_t wh;
    uint64_t am_hdr[4096 / 8]; /* aligned copy of the MPI header */
} MPIDI_ICBC_xrecv_t;

/* What a path hands up, given at open: the only way from a path to the
 * protocols above it. */
typedef struct MPIDI_ICBC_path_up {
    /* A message from SRC_RANK arrived with header INNER: *DEST is where its
     * PAYLOAD_LEN bytes go (NULL: nothing to receive, or drop them);
     * recv_end follows once they are there. PAYLOAD: the payload when
     * already in memory, else NULL. -1: malformed or forged (reported; a
     * connection it came on should be closed). */
    int (*recv_begin)(int src_rank, const void *inner, size_t inner_len, uint64_t payload_len,
                      const void *payload, MPIDI_ICBC_xrecv_t *x, void **dest);
    void (*recv_end)(MPIDI_ICBC_xrecv_t *x, int ok);
    /* recv_begin + copy + recv_end, for a payload in memory */
    void (*recv_whole)(int src_rank, const void *inner, size_t inner_len, const void *payload,
                       size_t len);
    /* A message a router delivered on the fabric (eager DATA, or a
     * rendezvous descriptor if IS_RNDV); 1: DATA is kept (mx_fabric.h). */
    int (*recv_fabric)(int src_rank, const void *inner, size_t inner_len, void *data, size_t len,
                       int is_rndv);
    /* RANK, or the path to it, failed: every exchange with it ends in an
     * MPI error naming WHY. */
    void (*peer_failed)(int rank, const char *why);
    /* Failover: chunk lane LANE is lost (what it carried and is not
     * confirmed goes again by the others), or carries chunks again. */
    void (*lane_lost)(int lane);
    void (*lane_revived)(int lane);
} MPIDI_ICBC_path_up_t;

typedef struct MPIDI_ICBC_path_ops {
    const char *name;
    /* Sends INNER (copied) and PAYLOAD (referenced until CB) to PEER on
     * LANE. *BUSY: a chunk lane cannot take more now; nothing was sent. An
     * MPI error code when the path to PEER is broken. */
    int (*send)(icbc_peer_t *peer, int lane, const void *inner, size_t inner_len,
                const void *payload, size_t len, MPIDI_ICBC_xdone_cb_t cb, void *arg, int *busy);
    /* Chunk lanes towards PEER (at least 1). */
    int (*nlanes)(icbc_peer_t *peer);
    /* Whether this process uses the path at all (after init_world). */
    int (*active)(void);
    /* Polls the path; returns how many events it handled. */
    int (*progress)(void);
    void (*dump)(FILE *f);
    void (*finalize)(void);
    /* Optional: paces what the path sends to other clusters at BITS_PER_S
     * (0: off), and the bytes it was given and has not put on the wire. */
    void (*set_pacing)(uint64_t bits_per_s);
    size_t (*unsent)(void);
    /* Optional: the one chunk lane towards PEER (a policy with one router
     * per process), -1: any. */
    int (*lane_for)(icbc_peer_t *peer);
    /* Optional: the lane of a striped message of one chunk to PEER (the
     * pair's ordered lane), -1: any (icbc_stripe_ops_t.home_lane). */
    int (*home_lane)(icbc_peer_t *peer);
    /* Optional: sends the acknowledgements this process owes now; 1 when
     * every message it sent on the path has been acknowledged (or its
     * peer failed). Finalize polls it before the process manager's barrier. */
    int (*settled)(void);
} MPIDI_ICBC_path_ops_t;

extern const MPIDI_ICBC_path_ops_t MPIDI_ICBC_path_routed_ops;
extern const MPIDI_ICBC_path_ops_t MPIDI_ICBC_path_tcp_ops;
extern const MPIDI_ICBC_path_ops_t MPIDI_ICBC_path_impi_ops;

/* What the paths share, set up by icbc_path.c. */
typedef struct {
    icbc_routerfile_t *rf; /* NULL: one cluster, no router file */
    icbc_rf_policy_t policy;
    int cluster;  /* ours, -1 without a router file */
    uint64_t job; /* same in every process of the job */
    unsigned char key[ICBC_RF_KEY_MAX];
    size_t keylen;
    int nrouters; /* of our cluster */
    int failover; /* routed messages survive lost routers (MPIR_CVAR_CH4_ICBC_FAILOVER, policy
                   * aggregate or static, some cluster with more than one router): the same
                   * in every process of the job */
    char fabric_devs[ICBC_NETIF_LIST_MAX]; /* UCX devices towards our routers; "": none */
    const MPIDI_ICBC_path_ops_t *ops[ICBC_PATH_KINDS];
    const MPIDI_ICBC_path_up_t *up; /* given to every path at open */
} MPIDI_ICBC_paths_t;

extern MPIDI_ICBC_paths_t MPIDI_ICBC_paths;

/* The ops of PEER's path; NULL for the direct and shared-memory paths. */
MPL_STATIC_INLINE_PREFIX const MPIDI_ICBC_path_ops_t *MPIDI_ICBC_path_of(const icbc_peer_t *peer)
{
    return (unsigned) peer->path < ICBC_PATH_KINDS ? MPIDI_ICBC_paths.ops[peer->path] : NULL;
}

MPL_STATIC_INLINE_PREFIX int MPIDI_ICBC_path_send(icbc_peer_t *peer, int lane, const void *inner,
                                                  size_t inner_len, const void *payload, size_t len,
                                                  MPIDI_ICBC_xdone_cb_t cb, void *arg, int *busy)
{
    return MPIDI_ICBC_path_of(peer)->send(peer, lane, inner, inner_len, payload, len, cb, arg,
                                          busy);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_ICBC_path_nlanes(icbc_peer_t *peer)
{
    return MPIDI_ICBC_path_of(peer)->nlanes(peer);
}

/* ---- shared by the implementations (icbc_path.c) ------------------------- */

int MPIDI_ICBC_path_cfg_error(const char *why);
/* Whether every path is settled (MPIDI_ICBC_path_ops_t.settled). */
int MPIDI_ICBC_path_settled(void);
int MPIDI_ICBC_path_routers_used(void);
int MPIDI_ICBC_path_fabric_api(void);
int MPIDI_ICBC_path_tcp_used(void);
/* Paces path KIND at BITS_PER_S (0: off), when it is open and paces. */
void MPIDI_ICBC_path_set_pacing(int kind, uint64_t bits_per_s);
/* Bytes path KIND was given and has not put on the wire yet (0 when it
 * keeps no such count). */
size_t MPIDI_ICBC_path_unsent(int kind);

/* A lane send's completion, kept while the transport has the message. */
typedef struct {
    MPIDI_ICBC_xdone_cb_t cb;
    void *arg;
} MPIDI_ICBC_path_done_t;

/* Set-up steps of the implementations. */
int MPIDI_ICBC_path_routed_open(const MPIDI_ICBC_path_up_t *up);
int MPIDI_ICBC_path_tcp_listen(void);
int MPIDI_ICBC_path_tcp_open(int size, const MPIDI_ICBC_path_up_t *up);
int MPIDI_ICBC_path_impi_open(const MPIDI_ICBC_path_up_t *up);

#endif /* ICBC_PATH_H_INCLUDED */
