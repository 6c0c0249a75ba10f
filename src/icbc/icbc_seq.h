/*
 * Numbered ordered lanes: exactly-once, in-order delivery of a pair's
 * ordered messages across a change of route (router failover).
 *
 *   sender                                   receiver
 *   seq 1, 2, 3 ... (each kept)    ---->     delivered in order; an early
 *   through router k                         one is held, a duplicate dropped
 *                                  <----     ACK {highest delivered in order}
 *   router k lost: every kept message that went by it goes again by another
 *
 * Each process numbers its ordered messages to each peer from 1 (0 on the
 * wire means "not numbered"; numbers wrap past 2^32 - 1 to 1). The sender
 * keeps a copy of every message until the receiver acknowledges it, so the
 * caller may resend what a lost route carried, in order, on another; the
 * receiver delivers each number once, in order, holding what arrives early
 * (a resent message can arrive after a later one that took a new route).
 *
 * MPI-independent and wire-agnostic: the caller puts the number into its
 * own header (the copy's header bytes are the caller's to patch), sends,
 * and feeds arrivals and acknowledgements in. Time is passed in.
 */
#ifndef ICBC_SEQ_H
#define ICBC_SEQ_H

#include <stddef.h>
#include <stdint.h>

#include "icbc_list.h"
#include "icbc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A message kept by the sender, or held early by the receiver. */
typedef struct icbc_seq_msg {
    icbc_list_t link;
    int peer;
    uint32_t seq;
    int route;    /* sender: the route it last went by (the caller's number) */
    int sends;    /* sender: sends of it not completed yet */
    int acked;    /* sender: the receiver has it; freed once no send is left */
    uint8_t *hdr; /* HDR_LEN bytes, then LEN payload bytes at PAYLOAD */
    size_t hdr_len;
    uint8_t *payload;
    size_t len;
    /* the caller's, untouched: what to tell once the message has left */
    void (*user_cb)(void *arg, icbc_status_t status);
    void *user_arg;
} icbc_seq_msg_t;

typedef struct icbc_seq_config {
    int npeers;
    uint32_t ack_every; /* acknowledge at least every this many messages (0: 32) */
    double ack_delay;   /* ... or this many seconds after the first not acknowledged (0: 0.002) */
    uint32_t max_ahead; /* a number further ahead than this is refused (0: 1 << 20) */
    uint32_t first;     /* number of every pair's first message (0: 1); both sides
                         * must agree: tests start near the wrap */
} icbc_seq_config_t;

typedef struct icbc_seq icbc_seq_t;

icbc_status_t icbc_seq_create(const icbc_seq_config_t *config, icbc_seq_t **seq_p);
/* Frees every kept and held message. */
void icbc_seq_destroy(icbc_seq_t *seq);

/* ---- sender -------------------------------------------------------------- */

/* Numbers a message to PEER and keeps a copy of HDR and PAYLOAD; the copy's
 * number is m->seq, its route ROUTE, one send counted. NULL: out of memory. */
icbc_seq_msg_t *icbc_seq_keep(icbc_seq_t *seq, int peer, int route, const void *hdr, size_t hdr_len,
                              const void *payload, size_t len);
/* A send of M completed (whatever its outcome): M may be freed here, once
 * acknowledged. */
void icbc_seq_send_done(icbc_seq_t *seq, icbc_seq_msg_t *m);
/* PEER delivered everything up to UPTO. ICBC_ERR_INVALID (nothing changes)
 * when UPTO is not a number sent to PEER and not yet acknowledged. */
icbc_status_t icbc_seq_acked(icbc_seq_t *seq, int peer, uint32_t upto);
/* Calls RESEND(ARG, M) for every message to PEER not acknowledged whose
 * route is ROUTE (any route: -1), in number order; RESEND sets m->route,
 * counts the send (m->sends++) and returns 0, or returns nonzero to stop. */
int icbc_seq_for_each_kept(icbc_seq_t *seq, int peer, int route,
                           int (*resend)(void *arg, icbc_seq_msg_t *m), void *arg);

/* ---- receiver ------------------------------------------------------------ */

typedef enum {
    ICBC_SEQ_DELIVER,   /* the next in order: deliver it now, then icbc_seq_ready */
    ICBC_SEQ_DUPLICATE, /* delivered before: drop it */
    ICBC_SEQ_EARLY,     /* ahead of a missing one: icbc_seq_hold it */
    ICBC_SEQ_INVALID,   /* 0, or too far ahead: drop it, report */
} icbc_seq_arrival_t;

/* Message number SEQ arrived from PEER. DELIVER counts it delivered. */
icbc_seq_arrival_t icbc_seq_arrived(icbc_seq_t *seq, int peer, uint32_t seq_no, double now);
/* Keeps a copy of an early message until its turn (a second copy of the
 * same number is dropped). ICBC_ERR_NO_MEMORY: not kept. */
icbc_status_t icbc_seq_hold(icbc_seq_t *seq, int peer, uint32_t seq_no, const void *hdr,
                            size_t hdr_len, const void *payload, size_t len);
/* The held message of PEER whose turn it is now (counted delivered), or
 * NULL; deliver it, then icbc_seq_release it. */
icbc_seq_msg_t *icbc_seq_ready(icbc_seq_t *seq, int peer, double now);
void icbc_seq_release(icbc_seq_t *seq, icbc_seq_msg_t *m);

/* An acknowledgement due at NOW: 1 with *PEER and *UPTO (counted as sent),
 * 0 when none is. Call until it returns 0. */
int icbc_seq_take_ack(icbc_seq_t *seq, double now, int *peer, uint32_t *upto);

/* ---- both ---------------------------------------------------------------- */

/* PEER is gone: its kept and held messages are dropped (kept ones with a
 * send still out are freed when it completes). */
void icbc_seq_peer_reset(icbc_seq_t *seq, int peer);

typedef struct icbc_seq_stats {
    uint64_t kept, kept_bytes; /* kept now, not acknowledged */
    uint64_t resent;           /* for_each_kept calls that resent */
    uint64_t delivered, duplicates, held, held_now, invalid;
    uint64_t acks_sent, acks_received, acks_invalid;
} icbc_seq_stats_t;

void icbc_seq_stats(const icbc_seq_t *seq, icbc_seq_stats_t *stats);
/* Messages kept towards PEER (0 for a bad peer). */
size_t icbc_seq_kept_count(const icbc_seq_t *seq, int peer);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_SEQ_H */
