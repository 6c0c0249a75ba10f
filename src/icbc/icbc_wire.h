/*
 * Wire header of an ICBC active message, shared by every path (direct fabric,
 * routed, tcp-direct). Fixed-width fields in network byte order; one parse
 * function checks every field before the payload is trusted. Every field has
 * one meaning; a kind that needs other values has its own fields.
 *
 * Common part, every kind (24 bytes):
 *
 *   offset  size  field
 *   0       1     version (ICBC_WIRE_VERSION)
 *   1       1     kind (icbc_msg_kind_t)
 *   2       2     handler id (MPIDIG handler)
 *   4       1     source vci
 *   5       1     destination vci
 *   6       2     length of the MPI layer's header that follows the kind's part
 *   8       4     source world rank
 *   12      4     seq: this message's number on the pair's ordered lane
 *                 (routed path with failover: see icbc_seq.h); 0: not numbered
 *   16      8     payload length
 *
 * Then the kind's own part (ICBC_WIRE_EXT_SIZE(kind) bytes; bytes marked
 * zero must be zero):
 *
 *   AM         nothing; MPI header + whole payload
 *   RTS        24 cookie (8): names the send at the sender. MPI header, no
 *              payload; payload length = message size
 *   CTS        24 cookie (8), 32 slot (4), 36 generation (4): the receive at
 *              the receiver (a stale or forged chunk does not match), 40 chunk
 *              size (4): every chunk but the last is that long, so a duplicate
 *              is one bit to test; 44 zero (4). No MPI header, no payload
 *   CHUNK      24 slot (4), 28 generation (4), 32 offset (8) of this chunk in
 *              the message, 40 lane (2): the sender's lane (router) it went
 *              by, which the receiver reports in DELIVERED, or
 *              ICBC_WIRE_NO_LANE; 42 zero (6). No MPI header; payload = the
 *              chunk
 *   SYNC, SYNC_ACK  24 cookie (8). No MPI header, no payload. A SYNC goes on
 *              the pair's ordered lane; its SYNC_ACK says everything sent on
 *              that lane before it has been delivered (MPI_Win_complete's
 *              notices)
 *   CONFIRM    24 cookie (8): the striped send it names arrived whole
 *              (failover: the sender keeps its chunks until then)
 *   ACK        24 acked (4): the highest sequence number of the pair's
 *              ordered lane delivered in order (failover: the sender keeps
 *              every numbered message until it is acknowledged); 28 zero (4)
 *   DELIVERED  24 lane (2): a lane of the sender, 26 zero (6), 32 bytes (8):
 *              bytes of its chunks that arrived by that lane (adaptive
 *              placement's feedback)
 *
 * Version 1 carried a CTS's chunk size in the offset field, a CHUNK's lane in
 * the sequence number, DELIVERED's lane in the cookie and ACK's sequence
 * number in the cookie; a version 1 header is refused.
 */
#ifndef ICBC_WIRE_H
#define ICBC_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "icbc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ICBC_WIRE_VERSION 2
#define ICBC_WIRE_AM_HDR_SIZE 24 /* the common part */
#define ICBC_WIRE_EXT_MAX 24     /* the largest kind's part */
#define ICBC_WIRE_HDR_MAX (ICBC_WIRE_AM_HDR_SIZE + ICBC_WIRE_EXT_MAX)
#define ICBC_WIRE_NO_LANE 0xffff /* a CHUNK whose lane is not reported */
/* Bytes of KIND's own part. */
#define ICBC_WIRE_EXT_SIZE(kind)                                                                   \
    ((kind) == ICBC_MSG_AM                                ? 0                                      \
     : (kind) == ICBC_MSG_CTS || (kind) == ICBC_MSG_CHUNK ? 24                                     \
     : (kind) == ICBC_MSG_DELIVERED                       ? 16                                     \
                                                          : 8)
/* Bytes of wire header (without the MPI header) for KIND. */
#define ICBC_WIRE_HDR_LEN(kind) (ICBC_WIRE_AM_HDR_SIZE + ICBC_WIRE_EXT_SIZE(kind))

typedef enum {
    ICBC_MSG_AM = 1,        /* MPI active message: MPI header + payload */
    ICBC_MSG_RTS = 2,       /* request to send a striped payload */
    ICBC_MSG_CTS = 3,       /* clear to send: the receive slot */
    ICBC_MSG_CHUNK = 4,     /* one chunk of a striped payload */
    ICBC_MSG_SYNC = 5,      /* "answer when all I sent before this has reached you" */
    ICBC_MSG_SYNC_ACK = 6,  /* the answer; cookie as in the SYNC */
    ICBC_MSG_CONFIRM = 7,   /* a striped send arrived whole; cookie names it */
    ICBC_MSG_ACK = 8,       /* ordered lane delivered up to sequence number cookie */
    ICBC_MSG_DELIVERED = 9, /* offset bytes of chunks arrived by the sender's lane cookie */
} icbc_msg_kind_t;

#define ICBC_MSG_KIND_LAST ICBC_MSG_DELIVERED

/* Kinds that carry neither an MPI header nor a payload. */
#define ICBC_MSG_KIND_BARE(kind)                                                                   \
    ((kind) == ICBC_MSG_CTS || (kind) == ICBC_MSG_SYNC || (kind) == ICBC_MSG_SYNC_ACK ||           \
     (kind) == ICBC_MSG_CONFIRM || (kind) == ICBC_MSG_ACK || (kind) == ICBC_MSG_DELIVERED)

typedef struct icbc_am_hdr {
    uint8_t kind;
    uint16_t handler_id;
    uint8_t src_vci;
    uint8_t dst_vci;
    uint16_t am_hdr_sz;
    uint32_t src_rank;
    uint32_t seq; /* number on the ordered lane; 0: not numbered */
    uint64_t data_sz;
    /* the kinds' own fields; zero in a kind that does not carry them */
    uint64_t cookie;     /* RTS, CTS, SYNC, SYNC_ACK, CONFIRM: a send of the sender */
    uint32_t slot;       /* CTS, CHUNK: a receive of the receiver */
    uint32_t gen;        /* CTS, CHUNK: the slot's generation */
    uint32_t chunk_size; /* CTS */
    uint64_t offset;     /* CHUNK: where its payload goes in the message */
    uint16_t lane;       /* CHUNK, DELIVERED: a lane of the sender (CHUNK: or NO_LANE) */
    uint64_t bytes;      /* DELIVERED */
    uint32_t acked;      /* ACK */
} icbc_am_hdr_t;

/* Packs the wire header of HDR->kind (ICBC_WIRE_HDR_LEN bytes). */
void icbc_am_hdr_pack(const icbc_am_hdr_t *hdr, void *buf);

/* Parses the header at the start of buf (len bytes, which must be exactly the
 * wire header plus the MPI header it announces). Rejects unknown versions and
 * kinds, handler ids >= max_handler, ranks >= world_size, length mismatches,
 * an MPI header on any kind but AM and RTS, a payload length on the bare
 * kinds, nonzero zero bytes and a DELIVERED without a lane. */
icbc_status_t icbc_am_hdr_parse(const void *buf, size_t len, unsigned max_handler,
                                uint32_t world_size, icbc_am_hdr_t *hdr);

/* The kind and sequence number of the packed header at BUF (LEN bytes), for
 * a path that numbers its ordered lane before the header is parsed whole;
 * ICBC_ERR_INVALID when BUF is too short or of another version. */
icbc_status_t icbc_am_hdr_peek(const void *buf, size_t len, uint8_t *kind, uint32_t *seq);
/* Writes SEQ into the packed header at BUF. */
void icbc_am_hdr_set_seq(void *buf, uint32_t seq);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_WIRE_H */
