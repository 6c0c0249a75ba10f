/*
 * Internal declarations of the icbc netmod: global state, helpers shared by
 * the inline hot path (icbc_am.h, icbc_progress.h) and the .c files.
 */
#ifndef ICBC_IMPL_H_INCLUDED
#define ICBC_IMPL_H_INCLUDED

#include <mpidimpl.h>
#include "mpidch4r.h"
#include "ch4_impl.h"

#include <signal.h>
#include <stdio.h>
#include "mx_router/mx_fabric.h"

#include "core/icbc_peer.h"
#include "core/icbc_clock.h"
#include "core/icbc_log.h"
#include "core/icbc_wire.h"
#include "core/icbc_bcard.h"

/* Active-message id of all icbc traffic on the direct path (MX_AM_ROUTE
 * is the routers'). */
#define MPIDI_ICBC_AM_ID 0

typedef struct {
    mx_fabric_t *fabric; /* the cluster's fabric: UCX or libfabric */
    icbc_peer_table_t peers;
    size_t max_am_header; /* largest AM header (wire + MPIDIG header) */
    MPI_Aint eager_limit; /* header + payload at or below: eager; above: rendezvous */
    int yield_when_idle;
    unsigned idle_polls;     /* empty polls in a row (icbc_progress.h) */
    int seen_progress_count; /* MPIDI_VCI(0).progress_count at the last idle poll */
    long idle_sleep_ns;      /* first sleep per empty poll after a long idle run; 0: only yield */
    long idle_sleep_max_ns;  /* the sleep doubles per empty poll up to this */
    long idle_sleep_cur_ns;  /* the next sleep of this idle run */
    int finalizing;
    int xpath; /* routed or TCP paths in use: progress them */
} MPIDI_ICBC_global_t;

extern MPIDI_ICBC_global_t MPIDI_ICBC_global;

#define MPIDI_ICBC_AMREQ(req) ((req)->dev.ch4.am.netmod_am.icbc)
#define MPIDI_ICBC_AV(av) ((av)->netmod.icbc)
#define MPIDI_ICBC_COMM(comm) ((comm)->dev.ch4.netmod.icbc)

/* A send's own copies of its header and packed payload, released when it
 * completes or its request is freed. */
MPL_STATIC_INLINE_PREFIX void MPIDI_ICBC_am_request_free_send_bufs(MPIR_Request *req)
{
    MPL_free(MPIDI_ICBC_AMREQ(req).hdr_buf);
    MPIDI_ICBC_AMREQ(req).hdr_buf = NULL;
    MPL_free(MPIDI_ICBC_AMREQ(req).pack_buf);
    MPIDI_ICBC_AMREQ(req).pack_buf = NULL;
}

/* Connect to a peer on first use (icbc_peer_ep.c). */
int MPIDI_ICBC_peer_connect(icbc_peer_t *peer, mx_fabric_ep_t **ep_p);

/* Receive side of the direct path's active message (icbc_am_recv.c). */
int MPIDI_ICBC_am_recv_cb(mx_fabric_t *f, const mx_fabric_am_t *am, void *arg);
/* Delivery of one direct-path message (also routed whole messages that a
 * router sent by rendezvous); SRC >= 0 must match the wire header. Returns
 * 1 when DATA (a rendezvous descriptor) is kept for the pull. */
int MPIDI_ICBC_am_deliver(const void *header, size_t header_length, void *data, size_t length,
                          int is_rndv, int src);

/* Routed and TCP paths (icbc_path.c, icbc_path.h). */
int MPIDI_ICBC_path_init_local(void);
const icbc_bcard_tcp_t *MPIDI_ICBC_path_card_tcp(int *n);
/* UCX devices between nodes: MPIR_CVAR_CH4_ICBC_UCX_NET_DEVICES, else the
 * fabric device(s) towards our cluster's routers; NULL: UCX's choice. */
const char *MPIDI_ICBC_path_ucx_devices(void);
/* Opens the paths this process uses; they hand what arrives to UP. */
struct MPIDI_ICBC_path_up;
int MPIDI_ICBC_path_init_world(const void *card0, size_t card0_len,
                               const struct MPIDI_ICBC_path_up *up);
/* Returns how many events it handled (0: nothing happened). */
int MPIDI_ICBC_path_progress(void);
/* What runs after the paths' progress: pacing's held messages, and the
 * ICBC protocol's timers (busy lanes retried, stalled transfers). */
void MPIDI_ICBC_pace_progress(void);
void MPIDI_ICBC_xfer_progress(void);
void MPIDI_ICBC_path_finalize(void);

/* An empty progress poll in yield-when-idle mode (icbc_init.c). */
void MPIDI_ICBC_progress_idle(void);

/* Diagnostic dump on a signal (icbc_dump.c). */
extern volatile sig_atomic_t MPIDI_ICBC_dump_requested;
void MPIDI_ICBC_dump_init(void);
void MPIDI_ICBC_dump(void);
void MPIDI_ICBC_dump_win_add(MPIR_Win *win);
void MPIDI_ICBC_dump_win_del(MPIR_Win *win);
void MPIDI_ICBC_path_dump(FILE *f);

/* Router thread on router hosts (icbc_router_embed.c). */
int MPIDI_ICBC_router_embed_start(void);
void MPIDI_ICBC_router_embed_stop(void);
/* Where this process runs when a router shares its host ("" otherwise). */
const char *MPIDI_ICBC_router_embed_placement(void);
/* After registering with N routers (on HOSTS): those of this host bound by
 * their own --bind told their CPUS (REGISTER_ACK); a process that nothing
 * bound and that the router file did not place leaves them to the routers,
 * and says so in the log. */
void MPIDI_ICBC_router_embed_place_told(const char *const *hosts, const char *const *cpus, int n);

/* The MPI error of an exchange with world rank RANK that failed for WHY
 * (errnames.txt: "cannot communicate with rank RANK: WHY"), and the two
 * ways to leave a function with it. */
#define MPIDI_ICBC_ERR_PEER(rank, why)                                                             \
    MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__, MPI_ERR_OTHER,     \
                         "**icbc_peer", "**icbc_peer %d %s", (int) (rank), (why))
#define MPIDI_ICBC_ERR_PEER_SETANDJUMP(err, rank, why)                                             \
    do {                                                                                           \
        (err) = MPIDI_ICBC_ERR_PEER(rank, why);                                                    \
        goto fn_fail;                                                                              \
    } while (0)
#define MPIDI_ICBC_ERR_PEER_CHKANDJUMP(cond, err, rank, why)                                       \
    do {                                                                                           \
        if (cond)                                                                                  \
            MPIDI_ICBC_ERR_PEER_SETANDJUMP(err, rank, why);                                        \
    } while (0)

MPL_STATIC_INLINE_PREFIX icbc_peer_t *MPIDI_ICBC_comm_rank_to_peer(MPIR_Comm *comm, int rank)
{
    MPIDI_av_entry_t *av = MPIDIU_comm_rank_to_av(comm, rank);
    return icbc_peer_get(&MPIDI_ICBC_global.peers, MPIDI_ICBC_AV(av).peer);
}

MPL_STATIC_INLINE_PREFIX int MPIDI_ICBC_comm_rank_to_ep(MPIR_Comm *comm, int rank,
                                                        icbc_peer_t **peer_p, mx_fabric_ep_t **ep_p)
{
    MPIDI_av_entry_t *av = MPIDIU_comm_rank_to_av(comm, rank);
    icbc_peer_t *peer = icbc_peer_get(&MPIDI_ICBC_global.peers, MPIDI_ICBC_AV(av).peer);

    *peer_p = peer;
    if (likely(peer && peer->ep && peer->state == ICBC_PEER_OK)) {
        *ep_p = (mx_fabric_ep_t *) peer->ep;
        return MPI_SUCCESS;
    }
    return MPIDI_ICBC_peer_connect(peer, ep_p);
}

/* An AM's wire header followed by its MPI header, at BUF. */
MPL_STATIC_INLINE_PREFIX void MPIDI_ICBC_pack_wire(void *buf, int rank_self, int handler_id,
                                                   const void *am_hdr, MPI_Aint am_hdr_sz,
                                                   MPI_Aint data_sz, int src_vci, int dst_vci)
{
    icbc_am_hdr_t wh = {
        .kind = ICBC_MSG_AM,
        .handler_id = (uint16_t) handler_id,
        .src_vci = (uint8_t) src_vci,
        .dst_vci = (uint8_t) dst_vci,
        .am_hdr_sz = (uint16_t) am_hdr_sz,
        .src_rank = (uint32_t) rank_self,
        .data_sz = (uint64_t) data_sz,
    };
    icbc_am_hdr_pack(&wh, buf);
    if (am_hdr_sz)
        memcpy((char *) buf + ICBC_WIRE_AM_HDR_SIZE, am_hdr, am_hdr_sz);
}

#endif /* ICBC_IMPL_H_INCLUDED */
