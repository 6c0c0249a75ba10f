/*
 * Messages on the paths that do not use UCX end to end: routed (through the
 * routers of both clusters) and TCP (policies alltoall and tcp).
 *
 * Small messages travel whole, in order, on the pair's fixed lane. Larger
 * ones use the striping rendezvous:
 *
 *   sender                                   receiver
 *   RTS {cookie, size, MPI header}  ---->    MPIDIG matches (now or later)
 *                                   <----    CTS {cookie, slot, gen}
 *   CHUNK {slot, gen, offset} x N   ---->    each written at its offset,
 *   over every lane                          complete when all bytes arrived
 *
 * A chunk names its slot and offset, so chunks may take any lane, arrive in
 * any order, and could be sent again through another router.
 *
 * icbc_xfer.c implements the protocol; icbc_xpath.c provides the lanes.
 */
#ifndef ICBC_XFER_H_INCLUDED
#define ICBC_XFER_H_INCLUDED

#include "icbc_impl.h"

/* The pair's ordered lane (control messages and whole small messages). */
#define MPIDI_ICBC_LANE_ORDERED (-1)

/* Completion of one lane send: ok = 0 when the message was lost. */
typedef void (*MPIDI_ICBC_xdone_cb_t) (void *arg, int ok);

/* ---- lanes (icbc_xpath.c) ---------------------------------------------- */

/* Sends INNER (copied) and PAYLOAD (referenced until CB) to PEER on LANE
 * (MPIDI_ICBC_LANE_ORDERED, or 0 .. nlanes-1 for chunks). *BUSY is set when
 * the lane cannot take more now (nothing was sent; retry after progress). */
int MPIDI_ICBC_xpath_send(icbc_peer_t * peer, int lane, const void *inner, size_t inner_len,
                          const void *payload, size_t len, MPIDI_ICBC_xdone_cb_t cb, void *arg,
                          int *busy);
/* Number of chunk lanes towards PEER (routers to stripe over, or 1). */
int MPIDI_ICBC_xpath_nlanes(icbc_peer_t * peer);

/* ---- protocol (icbc_xfer.c) -------------------------------------------- */

int MPIDI_ICBC_xfer_init(void);
void MPIDI_ICBC_xfer_finalize(void);

int MPIDI_ICBC_xfer_am_isend(icbc_peer_t * peer, int handler_id, const void *am_hdr,
                             MPI_Aint am_hdr_sz, const void *data, MPI_Aint count,
                             MPI_Datatype datatype, int src_vci, int dst_vci,
                             MPIR_Request * sreq);
int MPIDI_ICBC_xfer_send_hdr(icbc_peer_t * peer, int handler_id, const void *am_hdr,
                             MPI_Aint am_hdr_sz, int src_vci, int dst_vci);

/* A message whose payload is in memory (eager UCX data): handled at once. */
void MPIDI_ICBC_xrecv_whole(int src_rank, const void *inner, size_t inner_len,
                            const void *payload, size_t len);

/* Streaming receive (TCP, or a UCX rendezvous pull): begin tells where the
 * payload goes (*dest NULL: drop it), end runs once it is there. Returns 0,
 * or -1 when the message is malformed or forged (the caller closes the
 * connection it came on). */
typedef struct {
    int kind;
    int src_rank;
    void *buf;                  /* AM: staging of the payload */
    size_t len;
    uint32_t slot;
    uint32_t gen;
    uint64_t am_hdr[4096 / 8];  /* AM: aligned copy of the MPI header */
    uint16_t handler_id;
    uint8_t src_vci, dst_vci;
    uint16_t am_hdr_sz;
} MPIDI_ICBC_xrecv_t;

int MPIDI_ICBC_xrecv_begin(int src_rank, const void *inner, size_t inner_len,
                           uint64_t payload_len, MPIDI_ICBC_xrecv_t * x, void **dest);
void MPIDI_ICBC_xrecv_end(MPIDI_ICBC_xrecv_t * x, int ok);

/* UCX delivery of a routed message (from a router's endpoint). */
ucs_status_t MPIDI_ICBC_xrecv_ucx(int src_rank, const void *inner, size_t inner_len, void *data,
                                  size_t len, int is_rndv);

/* CTS for a matched RTS (also MPIDIG's data-copy callback). */
int MPIDI_ICBC_xfer_matched(MPIR_Request * rreq);

/* Retry sends that found their lane busy; expire stalled transfers. */
void MPIDI_ICBC_xfer_progress(void);

/* Striped sends and receive slots in flight, for a hang's diagnosis. */
void MPIDI_ICBC_xfer_dump(FILE * f);

/* PEER failed (or the path to it): every transfer with it ends in an error. */
void MPIDI_ICBC_xfer_peer_failed(int rank, const char *why);

#endif /* ICBC_XFER_H_INCLUDED */
