/*
 * Striping engine: the MPI-independent half of the striping rendezvous on the
 * routed and TCP paths (protocol in docs/paths.md).
 *
 *   sender                                   receiver
 *   RTS {cookie, size, MPI header}  ---->    the MPI layer matches it
 *                                   <----    CTS {cookie, slot, gen}
 *   CHUNK {slot, gen, offset} x N   ---->    each written at its offset,
 *   over every lane                          complete when all bytes arrived
 *
 * The engine owns the table of striped sends (named on the wire by a cookie:
 * index and generation) and the table of receive slots (index and
 * generation). Nothing from the network names a pointer, so a stale,
 * duplicated or forged CTS or chunk is recognised and dropped.
 *
 * It cuts a send into chunks, hands them to the lanes of the caller's path
 * (ops->send_chunk), retries chunks a busy lane refused, accounts the bytes
 * of each receive, rejects chunks that overlap what arrived, and fails
 * transfers whose peer has said nothing for the timeout.
 *
 * Failover (config.failover): a send then ends only when the receiver
 * confirms it (ops->confirm on the receiver, icbc_stripe_send_confirmed on
 * the sender), so the sender keeps the lane of every chunk until then. When
 * a lane is lost (icbc_stripe_lane_lost: a router gone), every chunk that
 * went by it and is not confirmed, or was still with it, is handed to the
 * other lanes again; the receiver counts each chunk once (a second copy is
 * a duplicate by its offset; two copies that stream at once both write the
 * same bytes, and the receive completes only after both ended, or after the
 * timeout when one goes silent) and confirms again when chunks of a receive
 * it completed arrive late (the first confirmation may have been lost with
 * the lane).
 *
 * The caller owns the wire: it sends RTS and CTS itself and feeds the
 * engine what arrives. Time is passed in (seconds, any monotonic origin), so
 * the engine has no clock of its own and tests drive it.
 *
 * Re-entrancy: ops->send_chunk may report the chunk sent (call
 * icbc_stripe_chunk_sent) before it returns; completion callbacks may start
 * new sends and receives. The tables may grow during any call, so callers
 * keep cookies and slot numbers, never pointers into the engine.
 */
#ifndef ICBC_STRIPE_H
#define ICBC_STRIPE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "icbc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* States of a striped send. X-macro: yields the enum and its names. */
#define ICBC_STRIPE_SEND_STATES(_)                                                                 \
    _(FREE)     /* table entry unused */                                                           \
    _(WAIT_CTS) /* RTS sent; no chunk may leave before the CTS */                                  \
    _(SENDING)  /* chunks are being handed to lanes */                                             \
    _(BLOCKED)  /* chunks wait for progress: every lane refused one, or some go again */           \
    _(DRAINING) /* all chunks handed out (or failed), completions due */                           \
    _(WAIT_ACK) /* failover: every chunk reported sent, the receiver's confirmation due */

/* States of a receive slot. */
#define ICBC_STRIPE_SLOT_STATES(_)                                                                 \
    _(FREE)      /* slot unused */                                                                 \
    _(RECEIVING) /* CTS sent; chunks are accounted until all arrived */

#define ICBC_STRIPE_ENUM_(name) ICBC_STRIPE_SEND_##name,
typedef enum { ICBC_STRIPE_SEND_STATES(ICBC_STRIPE_ENUM_) } icbc_stripe_send_state_t;
#undef ICBC_STRIPE_ENUM_
#define ICBC_STRIPE_ENUM_(name) ICBC_STRIPE_SLOT_##name,
typedef enum { ICBC_STRIPE_SLOT_STATES(ICBC_STRIPE_ENUM_) } icbc_stripe_slot_state_t;
#undef ICBC_STRIPE_ENUM_

const char *icbc_stripe_send_state_str(icbc_stripe_send_state_t state);
const char *icbc_stripe_slot_state_str(icbc_stripe_slot_state_t state);

/* A CTS slot that says "the receiver dropped this message: send nothing". */
#define ICBC_STRIPE_SLOT_DISCARD UINT32_MAX

/* Lanes the engine can tell apart (lane loss is a bit per lane). */
#define ICBC_STRIPE_LANES_MAX 64

/* Bounds of the chunk size a receiver may ask for in its CTS. */
#define ICBC_STRIPE_CHUNK_MIN 4096u
#define ICBC_STRIPE_CHUNK_MAX (64u << 20)

/* What a CTS says: the receive slot, and the length of every chunk but the
 * last (the receiver's chunk size, so that it stages at most one chunk and
 * recognises a duplicate by its offset). */
typedef struct icbc_stripe_cts {
    uint32_t slot;
    uint32_t gen;
    uint64_t chunk_size;
} icbc_stripe_cts_t;

/* One chunk as the sender hands it to a lane (the caller packs it into its
 * CHUNK header). */
typedef struct icbc_stripe_chunk {
    uint32_t slot;
    uint32_t gen;
    uint64_t offset;
    size_t len;
} icbc_stripe_chunk_t;

typedef struct icbc_stripe_ops {
    /* Hand CHUNK (its bytes at DATA, valid until the chunk is reported
     * sent) to LANE (0 .. nlanes-1) of PEER. ICBC_OK: the lane took it and
     * the caller will call icbc_stripe_chunk_sent(TOKEN) exactly once,
     * maybe before returning. ICBC_ERR_BUSY: not taken, try another lane
     * or later. Any other status: the path is broken, the send fails. */
    icbc_status_t (*send_chunk)(void *ctx, int peer, int lane, const icbc_stripe_chunk_t *chunk,
                                const void *data, uint64_t token);
    /* Number of lanes towards PEER (at least 1). */
    int (*nlanes)(void *ctx, int peer);
    /* A send ended: ICBC_OK when every chunk was delivered to a lane
     * and reported sent, or the receiver discarded the message. WHY names
     * the cause of an error (static string). */
    void (*send_complete)(void *ctx, void *user, icbc_status_t status, const char *why);
    /* A receive ended: ICBC_OK when all its bytes are in place. */
    void (*recv_complete)(void *ctx, void *user, icbc_status_t status, const char *why);
    /* Receives without a contiguous destination: put LEN bytes at byte
     * OFFSET of the message. Called once per chunk, in arrival order. */
    void (*place)(void *ctx, void *user, uint64_t offset, const void *data, size_t len);
    /* Failover only: tell PEER that its send COOKIE arrived whole (the
     * caller sends the confirmation). Runs when a receive completes, and
     * again for chunks of a receive completed not long ago. */
    void (*confirm)(void *ctx, int peer, uint64_t cookie);
    /* Optional: the one lane PEER's chunks take now (a policy that sends
     * each process's traffic through one router, moved when it is lost);
     * -1 or no function: any lane. */
    int (*lane_for)(void *ctx, int peer);
    /* Optional: the lane a message of one chunk to PEER takes while it is
     * up (-1: none), e.g. the sender's own router: a message that cannot
     * be striped then spreads over the lanes by its sender, which keeps
     * the lanes evenly loaded when many senders send at once, where each
     * sender's own view of the lanes' load would send them to the same
     * one. */
    int (*home_lane)(void *ctx, int peer);
} icbc_stripe_ops_t;

/* Which lane a chunk goes to. */
typedef enum {
    /* the next lane in turn; a busy lane passes the chunk to the following
     * one (each lane's window of chunks in flight drives the share) */
    ICBC_STRIPE_PLACE_WINDOW = 0,
    /* the next lane in turn, strictly: a busy lane holds the send until it
     * takes the chunk (every lane carries the same share) */
    ICBC_STRIPE_PLACE_ROUND_ROBIN = 1,
    /* the lane that would finish the chunk first, from the bytes it holds
     * and the rate at which it has delivered lately: a lane with a quarter
     * of the others' rate gets about a quarter of their share, a lane that
     * stalls gets none until it moves again */
    ICBC_STRIPE_PLACE_ADAPTIVE = 2,
} icbc_stripe_placement_t;

const char *icbc_stripe_placement_str(icbc_stripe_placement_t placement);
/* The placement named NAME ("window", "round-robin", "adaptive");
 * ICBC_ERR_INVALID for any other name. */
icbc_status_t icbc_stripe_placement_from_str(const char *name, icbc_stripe_placement_t *placement);

typedef struct icbc_stripe_config {
    size_t chunk_size;  /* bytes per chunk this process receives (asked for in CTS) */
    double timeout;     /* seconds a peer may stay silent; 0: never fail */
    uint32_t first_gen; /* generation of new entries (0: 1); tests start near wrap */
    int failover;       /* 1: sends end when confirmed; a lost lane's chunks go again
                         * on the others (needs ops->confirm) */
    icbc_stripe_placement_t placement;
    double rate_window; /* adaptive: seconds over which a lane's rate is measured
                         * (0: 0.25) */
    int feedback;       /* adaptive: the far end reports what each lane delivered
                         * (icbc_stripe_lane_delivered); a lane's load is then the bytes
                         * handed to it and not delivered yet, its rate what it delivered,
                         * so bytes queued beyond the lane (in a router) count too */
} icbc_stripe_config_t;

typedef struct icbc_stripe icbc_stripe_t;

icbc_status_t icbc_stripe_create(const icbc_stripe_config_t *config, const icbc_stripe_ops_t *ops,
                                 void *ctx, icbc_stripe_t **stripe_p);
/* Frees the tables; transfers still active are dropped without callbacks. */
void icbc_stripe_destroy(icbc_stripe_t *stripe);

/* ---- sender -------------------------------------------------------------- */

/* Registers a striped send of SIZE bytes at BASE (valid until
 * send_complete) to PEER; *COOKIE goes into the RTS. */
icbc_status_t icbc_stripe_send_start(icbc_stripe_t *stripe, int peer, const void *base, size_t size,
                                     void *user, double now, uint64_t *cookie);
/* The RTS could not be sent: forget the send, no callback. */
void icbc_stripe_send_cancel(icbc_stripe_t *stripe, uint64_t cookie);
/* A CTS arrived from PEER: chunks start to flow. ICBC_ERR_INVALID when it
 * names no send of that peer waiting for one, or asks for a chunk size out
 * of bounds (dropped; the caller logs). */
icbc_status_t icbc_stripe_cts(icbc_stripe_t *stripe, int peer, uint64_t cookie,
                              const icbc_stripe_cts_t *cts, double now);
/* A lane finished with the chunk of TOKEN; OK = 0 when it was lost (with
 * failover, the chunk goes again on another lane). */
void icbc_stripe_chunk_sent(icbc_stripe_t *stripe, uint64_t token, int ok, double now);
/* Failover: PEER confirmed that the send COOKIE arrived whole; it ends once
 * its lanes have reported every chunk. ICBC_ERR_INVALID when it names no
 * such send of that peer (a duplicate or late confirmation: ignore it). */
icbc_status_t icbc_stripe_send_confirmed(icbc_stripe_t *stripe, int peer, uint64_t cookie,
                                         double now);

/* ---- receiver ------------------------------------------------------------ */

/* Opens a slot for SIZE bytes from PEER, whose send is COOKIE (from its
 * RTS; confirmations name it). DEST: where the message goes, or NULL to have
 * each chunk staged (one chunk at a time) and placed through ops->place.
 * *CTS is what the caller sends back. */
icbc_status_t icbc_stripe_recv_start(icbc_stripe_t *stripe, int peer, uint64_t cookie, size_t size,
                                     void *dest, void *user, double now, icbc_stripe_cts_t *cts);

/* A chunk being received (streamed from a connection, or pulled). */
typedef struct icbc_stripe_rx {
    uint32_t slot;
    uint32_t gen;
    int peer;
    uint64_t offset;
    size_t len;
    void *staging; /* owned: the chunk of a receive without DEST */
} icbc_stripe_rx_t;

/* A CHUNK header arrived from PEER. ICBC_OK: *DATA_DEST is where its LEN
 * bytes go; call icbc_stripe_chunk_end once they are there (or were lost:
 * with failover the receive then waits for the chunk to come again).
 * ICBC_ERR_NOT_FOUND: no such receive (a late chunk of a failed receive, or
 * forged): drop the bytes. ICBC_ERR_INVALID: not a chunk of the message
 * (offset or length off the CTS's chunk size), or one already received (a
 * duplicate): drop the bytes, the receive goes on. */
icbc_status_t icbc_stripe_chunk_begin(icbc_stripe_t *stripe, int peer,
                                      const icbc_stripe_chunk_t *chunk, icbc_stripe_rx_t *rx,
                                      void **data_dest);
void icbc_stripe_chunk_end(icbc_stripe_t *stripe, icbc_stripe_rx_t *rx, int ok, double now);
/* begin + copy + end, for a chunk already in memory. */
icbc_status_t icbc_stripe_chunk_data(icbc_stripe_t *stripe, int peer,
                                     const icbc_stripe_chunk_t *chunk, const void *data,
                                     double now);

/* ---- both ---------------------------------------------------------------- */

/* Anything at all arrived from PEER: its transfers are not stalled. */
void icbc_stripe_peer_seen(icbc_stripe_t *stripe, int peer, double now);
/* Retries sends a busy lane refused; once a second, fails transfers whose
 * peer was silent for the timeout. */
void icbc_stripe_progress(icbc_stripe_t *stripe, double now);
/* Every transfer with PEER ends with ICBC_ERR_PEER_FAILED and WHY. */
void icbc_stripe_peer_failed(icbc_stripe_t *stripe, int peer, const char *why);
/* LANE (of every peer) is gone: no chunk is handed to it any more; with
 * failover, the chunks it carried that are not confirmed go again on the
 * other lanes (from progress). A send with no lane left fails. */
void icbc_stripe_lane_lost(icbc_stripe_t *stripe, int lane, double now);
/* LANE carries chunks again (a router back). */
void icbc_stripe_lane_revived(icbc_stripe_t *stripe, int lane);
/* Feedback: a receiver got BYTES of chunks that went by LANE. */
void icbc_stripe_lane_delivered(icbc_stripe_t *stripe, int lane, size_t bytes, double now);

typedef struct icbc_stripe_stats {
    int active_sends, active_slots, blocked_sends;
    uint64_t chunks_sent, chunks_received;
    uint64_t dropped_cts, dropped_chunks, duplicate_chunks;
    uint64_t stalled_sends, stalled_recvs;
    uint64_t chunks_lost;   /* reported lost by a lane, or on a lane that was lost */
    uint64_t chunks_resent; /* handed to a lane again */
    uint64_t lanes_lost;    /* icbc_stripe_lane_lost calls */
    uint64_t confirmations; /* ops->confirm calls, late ones included */
    uint64_t late_chunks;   /* chunks of a completed receive (confirmed again) */
} icbc_stripe_stats_t;

/* What the engine knows of a lane (adaptive placement measures it). */
typedef struct icbc_stripe_lane_stats {
    uint64_t inflight;    /* bytes handed to it and not reported yet */
    uint64_t undelivered; /* feedback: bytes handed to it, not reported delivered */
    uint64_t sent;        /* bytes it reported sent, in all */
    double rate;          /* bytes/s it delivered lately; 0: not measured yet */
    int down;
} icbc_stripe_lane_stats_t;

void icbc_stripe_lane_stats(const icbc_stripe_t *stripe, int lane, icbc_stripe_lane_stats_t *stats);

void icbc_stripe_stats(const icbc_stripe_t *stripe, icbc_stripe_stats_t *stats);
/* Every active transfer, one line each (and the recent state transitions
 * in debug builds), for a hang's diagnosis. */
void icbc_stripe_dump(const icbc_stripe_t *stripe, FILE *f, double now);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_STRIPE_H */
