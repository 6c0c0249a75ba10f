/*
 * Pacing: a process's sending towards other clusters held to a rate, the
 * MATB (maximum allowed transmission bandwidth) of GridMPI: the WAN's rate
 * divided by the processes that send across it at the same time. Senders
 * that each keep to it leave no burst for the WAN's buffer to drop.
 *
 * A token bucket counted in bytes on the wire (a payload byte costs
 * ICBC_PACE_WIRE_BYTES / ICBC_PACE_SEGMENT_PAYLOAD). It fills at the rate
 * up to a burst of
 * ICBC_PACE_BURST_SECONDS of sending. A send may start while the bucket
 * is not in debt, and takes its whole length: a large message puts the
 * bucket in debt, and the next send waits until the debt is repaid. Over
 * any T seconds at most burst + rate * T bytes, plus one message, leave.
 *
 * MPI-independent; time is passed in (seconds).
 */
#ifndef ICBC_PACE_H
#define ICBC_PACE_H

#include <stddef.h>
#include <stdint.h>

#include "icbc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ICBC_PACE_BURST_SECONDS 0.002
/* Rates are rates on the wire, as the WAN's is: a full TCP segment carries
 * 1448 payload bytes in 1538 bytes of Ethernet frame, preamble and gap
 * (IPv4, TCP with timestamps, MTU 1500). A bucket paced at the WAN's rate
 * over its senders would otherwise fill the WAN past its rate by 6 %. */
#define ICBC_PACE_WIRE_BYTES 1538.0
#define ICBC_PACE_SEGMENT_PAYLOAD 1448.0
#define ICBC_PACE_BURST_MIN 9000.0 /* bytes: one jumbo frame at the least */
/* The IP packet of a full segment: what the kernel's SO_MAX_PACING_RATE
 * counts (1448 payload bytes, 52 of TCP and IP headers). */
#define ICBC_PACE_PACKET_BYTES 1500.0

/* SO_MAX_PACING_RATE, bytes/s, that puts BITS_PER_S on the wire. Set to
 * the wire rate itself, four sockets paced at a fourth of the WAN's rate
 * would fill it 2.5 % past its rate while they all send. */
static inline uint64_t icbc_pace_socket_rate(uint64_t bits_per_s)
{
    return (uint64_t) ((double) bits_per_s / 8.0 * ICBC_PACE_PACKET_BYTES / ICBC_PACE_WIRE_BYTES);
}

typedef struct icbc_pace {
    double rate;           /* bytes/s; 0: off */
    double burst;          /* bytes */
    double tokens;         /* bytes; negative: debt */
    double t;              /* when tokens was last brought up to date */
    uint64_t bytes, waits; /* charged; refusals (may_send returned 0) */
} icbc_pace_t;

void icbc_pace_init(icbc_pace_t *p);
/* Paces at BITS_PER_S from NOW on (0: off). A debt is kept, also while off
 * (repaid at the next rate over the time off); tokens beyond the new burst
 * are dropped. */
void icbc_pace_set_rate(icbc_pace_t *p, uint64_t bits_per_s, double now);
static inline int icbc_pace_on(const icbc_pace_t *p)
{
    return p->rate > 0;
}
/* Rate in bits/s (0: off). */
uint64_t icbc_pace_rate(const icbc_pace_t *p);
/* 1 when a send may start at NOW (always, when off). */
int icbc_pace_may_send(icbc_pace_t *p, double now);
/* A send of BYTES of payload started (charged with their framing). */
void icbc_pace_charge(icbc_pace_t *p, size_t bytes);
/* Seconds from NOW until a send may start (0: now). */
double icbc_pace_wait(const icbc_pace_t *p, double now);

/* Parses a rate in bits/s: a decimal number with an optional unit bit,
 * kbit, mbit, gbit (powers of 1000), e.g. "400mbit", "1.5gbit", "0".
 * At most 10^15 bits/s. */
icbc_status_t icbc_pace_parse_rate(const char *text, uint64_t *bits_per_s);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_PACE_H */
