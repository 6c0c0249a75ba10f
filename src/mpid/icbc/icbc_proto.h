/*
 * Protocols: how an MPIDIG message travels to a peer, apart from the
 * transports (icbc_path.h) that carry its bytes.
 *
 *   MPIDI_ICBC_proto_fabric the direct path: one active message of the
 *                          cluster's fabric (UCX or libfabric), its
 *                          rendezvous for large payloads (icbc_am.h sends
 *                          inline, icbc_am_recv.c receives)
 *   MPIDI_ICBC_proto_icbc  ICBC's own protocol on a path's lanes: whole
 *                          messages, the striping rendezvous
 *                          (icbc_proto_icbc.c)
 *   MPIDI_ICBC_proto_impi  IMPI's, towards the processes of other IMPI
 *                          clients (icbc_proto_impi.c)
 *
 * A peer's protocol follows from its path (MPIDI_ICBC_proto_of). A receive
 * whose header came first and whose payload waits for MPIDIG's match keeps
 * the protocol it came by (MPIDI_ICBC_am_request_t.xproto): the match is
 * one call, proto->matched.
 */
#ifndef ICBC_PROTO_H_INCLUDED
#define ICBC_PROTO_H_INCLUDED

#include "icbc_impl.h"
#include "icbc_path.h"

typedef struct MPIDI_ICBC_proto {
    const char *name;
    /* Sends MPIDIG's message (header AM_HDR, payload DATA) to PEER;
     * completes SREQ through MPIDIG's origin callback. */
    int (*am_isend)(icbc_peer_t *peer, int handler_id, const void *am_hdr, MPI_Aint am_hdr_sz,
                    const void *data, MPI_Aint count, MPI_Datatype datatype, int src_vci,
                    int dst_vci, MPIR_Request *sreq);
    /* Sends a header-only message to PEER. */
    int (*send_hdr)(icbc_peer_t *peer, int handler_id, const void *am_hdr, MPI_Aint am_hdr_sz,
                    int src_vci, int dst_vci);
    /* MPIDIG matched RREQ, whose header came by this protocol: bring the
     * payload into the receive buffer; completion calls the request's
     * target completion callback. */
    int (*matched)(MPIR_Request *rreq);
} MPIDI_ICBC_proto_t;

extern const MPIDI_ICBC_proto_t MPIDI_ICBC_proto_fabric;
extern const MPIDI_ICBC_proto_t MPIDI_ICBC_proto_icbc;
extern const MPIDI_ICBC_proto_t MPIDI_ICBC_proto_impi;

/* A send finished, by any protocol: release what the request owned, tell
 * MPIDIG. */
MPL_STATIC_INLINE_PREFIX void MPIDI_ICBC_proto_send_done(MPIR_Request *sreq)
{
    MPIDI_ICBC_am_request_free_send_bufs(sreq);
    MPIDIG_global.origin_cbs[MPIDI_ICBC_AMREQ(sreq).handler_id](sreq);
}

/* MPIDIG matched a receive whose payload has not come (its data-copy
 * callback): the protocol the header came by brings it. */
MPL_STATIC_INLINE_PREFIX int MPIDI_ICBC_rndv_pull(MPIR_Request *rreq)
{
    return MPIDI_ICBC_AMREQ(rreq).xproto->matched(rreq);
}

/* The protocol towards PEER; NULL for the direct path, whose UCX sends are
 * inline (icbc_am.h). */
MPL_STATIC_INLINE_PREFIX const MPIDI_ICBC_proto_t *MPIDI_ICBC_proto_of(const icbc_peer_t *peer)
{
    if (peer->path == ICBC_PATH_IMPI)
        return &MPIDI_ICBC_proto_impi;
    return MPIDI_ICBC_path_of(peer) ? &MPIDI_ICBC_proto_icbc : NULL;
}

#endif /* ICBC_PROTO_H_INCLUDED */
