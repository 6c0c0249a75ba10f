/*
 * Pacing of this process's sending to other clusters (icbc_pacing.c,
 * docs/pacing.md): the striping engine and the ordered lane ask here before
 * a message to another cluster leaves.
 */
#ifndef ICBC_PACING_H_INCLUDED
#define ICBC_PACING_H_INCLUDED

#include "core/icbc_pace.h"
#include "core/icbc_peer.h"
#include "icbc_path.h"

extern int ICBC_PACING_MATB;

int MPIDI_ICBC_pace_init(void);
void MPIDI_ICBC_pace_finalize(void);
void MPIDI_ICBC_pace_progress(void);
void MPIDI_ICBC_pace_dump(FILE *f);

/* A message is sent on COMM: its ICBC_PACING_MATB attribute (none:
 * MPI_COMM_WORLD's, else 0) is the rate from now on. */
void MPIDI_ICBC_pace_comm(MPIR_Comm *comm);
/* Whether messages to PEER are paced now (another cluster, and a rate set
 * or messages still held). */
int MPIDI_ICBC_pace_paces(const icbc_peer_t *peer);
/* Chunks: whether one may leave now; a chunk that left is charged. */
int MPIDI_ICBC_pace_may_go(void);
void MPIDI_ICBC_pace_charge(size_t len);
/* A whole message on the ordered lane: sent now, or *HELD until the bucket
 * allows (in order behind the others held); INNER is copied. */
int MPIDI_ICBC_pace_ordered(icbc_peer_t *peer, const void *inner, size_t inner_len,
                            const void *payload, size_t len, MPIDI_ICBC_xdone_cb_t cb, void *arg,
                            int *held);

/* Rate-managed collective on COMM (MPIR_CVAR_CH4_ICBC_PACED_ALLTOALL):
 * begin sets MATB = WAN rate / COMM's processes in this cluster, end puts
 * back *SAVED. */
int MPIDI_ICBC_pace_coll_begin(MPIR_Comm *comm, uint64_t *saved);
void MPIDI_ICBC_pace_coll_end(uint64_t saved);

#endif /* ICBC_PACING_H_INCLUDED */
