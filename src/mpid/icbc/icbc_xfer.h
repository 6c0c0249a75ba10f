/*
 * Messages on the paths that do not use UCX end to end: routed (through the
 * routers of both clusters) and TCP (policies alltoall and tcp).
 *
 * Small messages travel whole, in order, on the pair's ordered lane. Larger
 * ones use the striping rendezvous:
 *
 *   sender                                   receiver
 *   RTS {cookie, size, MPI header}  ---->    MPIDIG matches (now or later)
 *                                   <----    CTS {cookie, slot, gen, chunk size}
 *   CHUNK {slot, gen, offset} x N   ---->    each written at its offset,
 *   over every lane                          complete when all bytes arrived
 *
 * A chunk names its slot and offset, so chunks may take any lane, arrive in
 * any order, and could be sent again through another router.
 *
 *   icbc_proto_icbc.c  both sides; the MPI glue of the striping engine;
 *                      one receive entry (begin/end) for every path
 *   src/icbc/stripe.c  the engine: tables, chunks, accounting, stalls
 *   icbc_path*.c  the paths (lanes) the messages travel on
 */
#ifndef ICBC_XFER_H_INCLUDED
#define ICBC_XFER_H_INCLUDED

#include "icbc_impl.h"
#include "icbc_path.h"
#include "icbc_proto.h"
#include "icbc_recv.h"
#include "core/icbc_stripe.h"

typedef struct {
    icbc_stripe_t *stripe;
    MPI_Aint threshold;
    int feedback;     /* the engine's: chunks carry their lane, receivers report DELIVERED */
    double failed_at; /* first path failure, 0: none */
    char failure[160];
    /* MPIDI_ICBC_xfer_sync: the round, and per world rank the round it
     * waits for an answer from (0: none) */
    uint32_t sync_round;
    uint32_t *sync_wait;
    int sync_pending;
    int sync_failed; /* a rank lost during the round, -1: none */
} MPIDI_ICBC_xfer_t;

extern MPIDI_ICBC_xfer_t MPIDI_ICBC_xfer;

/* What the paths hand up to this protocol (icbc_path.h). */
extern const MPIDI_ICBC_path_up_t MPIDI_ICBC_xfer_up;

/* ---- send side (icbc_proto_icbc.c) ------------------------------------------ */

int MPIDI_ICBC_xfer_init(void);
void MPIDI_ICBC_xfer_finalize(void);

int MPIDI_ICBC_xfer_am_isend(icbc_peer_t *peer, int handler_id, const void *am_hdr,
                             MPI_Aint am_hdr_sz, const void *data, MPI_Aint count,
                             MPI_Datatype datatype, int src_vci, int dst_vci, MPIR_Request *sreq);
int MPIDI_ICBC_xfer_send_hdr(icbc_peer_t *peer, int handler_id, const void *am_hdr,
                             MPI_Aint am_hdr_sz, int src_vci, int dst_vci);
/* A message on the pair's ordered lane; PAYLOAD stays valid until CB (NULL:
 * header only). */
int MPIDI_ICBC_xfer_send_ordered(icbc_peer_t *peer, const void *inner, size_t inner_len,
                                 const void *payload, size_t len, MPIDI_ICBC_xdone_cb_t cb,
                                 void *arg);

/* A header-only message (SYNC, SYNC_ACK) to RANK on the ordered lane. */
int MPIDI_ICBC_xfer_send_bare(int rank, int kind, uint64_t cookie);
/* Returns once everything this process sent to the ranks RANKS of COMM on
 * routed or TCP paths has been delivered there (a SYNC behind it on each
 * pair's ordered lane, and its answer), or with an MPI error when one of
 * them is lost. */
int MPIDI_ICBC_xfer_sync(MPIR_Comm *comm, const int *ranks, int n);
void MPIDI_ICBC_xfer_sync_acked(int rank, uint64_t cookie);

/* Retry sends that found their lanes busy; expire stalled transfers. */
void MPIDI_ICBC_xfer_progress(void);

/* Striped sends and receive slots in flight, for a hang's diagnosis. */
void MPIDI_ICBC_xfer_dump(FILE *f);

/* The MPI error of a transfer with RANK that failed for WHY (names its
 * cluster). */
int MPIDI_ICBC_xfer_error(int rank, const char *why);
/* PEER failed (or the path to it): every transfer with it ends in an error. */
void MPIDI_ICBC_xfer_peer_failed(int rank, const char *why);
/* Failover: chunk LANE is lost (what it carried and is not confirmed goes
 * again by the others), or carries chunks again. */
void MPIDI_ICBC_xfer_lane_lost(int lane);
/* Feedback: BYTES of RANK's chunks arrived by its LANE (routed path). */
void MPIDI_ICBC_xfer_send_delivered(int rank, int lane, size_t bytes);
void MPIDI_ICBC_xfer_lane_revived(int lane);

/* ---- receive side (icbc_proto_icbc.c) -------------------------------------- */

/* A message from SRC_RANK arrived with header INNER: parses it once and
 * acts on it. PAYLOAD: its payload when already in memory, else NULL. Sets
 * *DEST to where the PAYLOAD_LEN bytes go (NULL: nothing to receive, or
 * drop them); xrecv_end follows once they are there. Returns -1 when the
 * message is malformed or forged (reported; a connection it came on should
 * be closed). */
int MPIDI_ICBC_xrecv_begin(int src_rank, const void *inner, size_t inner_len, uint64_t payload_len,
                           const void *payload, MPIDI_ICBC_xrecv_t *x, void **dest);
void MPIDI_ICBC_xrecv_end(MPIDI_ICBC_xrecv_t *x, int ok);
/* begin + copy + end, for a payload in memory. */
void MPIDI_ICBC_xrecv_whole(int src_rank, const void *inner, size_t inner_len, const void *payload,
                            size_t len);
/* Slabs of chunk receives allocated so far (each holds many). */
uint64_t MPIDI_ICBC_xrecv_pull_slabs(void);
/* Frees them once UCX is closed (no pull is left to complete). */
void MPIDI_ICBC_xrecv_finalize(void);
/* UCX delivery of a routed message (from a router's endpoint). */
int MPIDI_ICBC_xrecv_fabric(int src_rank, const void *inner, size_t inner_len, void *data,
                            size_t len, int is_rndv);

/* CTS for a matched RTS (also MPIDIG's data-copy callback). */
int MPIDI_ICBC_xfer_matched(MPIR_Request *rreq);
void MPIDI_ICBC_xfer_send_cts(int src, uint64_t cookie, const icbc_stripe_cts_t *cts);
/* The engine's receive callbacks (icbc_stripe_ops_t). */
void MPIDI_ICBC_xrecv_striped_complete(void *ctx, void *user, icbc_status_t status,
                                       const char *why);
void MPIDI_ICBC_xrecv_striped_place(void *ctx, void *user, uint64_t offset, const void *data,
                                    size_t len);

#endif /* ICBC_XFER_H_INCLUDED */
