/*
 * Wire header of an ICBC active message, shared by every path (direct fabric,
 * routed, tcp-direct). Fixed-width fields in network byte order; one parse
 * function checks every field before the payload is trusted.
 *
 *   offset  size  field
 *   0       1     version (ICBC_WIRE_VERSION)
 *   1       1     kind (icbc_msg_kind_t)
 *   2       2     handler id (MPIDIG handler)
 *   4       1     source vci
 *   5       1     destination vci
 *   6       2     length of the MPI layer's header that follows this one
 *   8       4     source world rank
 *   12      4     sequence number on the pair's ordered lane (routed path
 *                 with failover: see icbc_seq.h); 0: not numbered
 *   16      8     payload length
 *
 * Rendezvous kinds (RTS, CTS, CHUNK: the striped transfer of the routed and
 * TCP paths) carry 24 more bytes before the MPI layer's header:
 *
 *   24      8     sender cookie (names the send at the sender)
 *   32      4     receive slot (names the receive at the receiver)
 *   36      4     slot generation (a stale or forged chunk does not match)
 *   40      8     CHUNK: offset of this chunk in the message;
 *                 CTS: the chunk size the receiver accepts (every chunk but
 *                 the last is that long, so a duplicate is one bit to test)
 *
 *   AM     MPI header + whole payload
 *   RTS    MPI header, no payload; payload length = message size; cookie
 *   CTS    no MPI header; cookie, slot, generation, chunk size; payload length 0
 *   CHUNK  no MPI header; slot, generation, offset; payload = the chunk
 *   SYNC, SYNC_ACK  no MPI header, no payload; cookie. A SYNC goes on the
 *          pair's ordered lane; its SYNC_ACK says everything sent on that
 *          lane before it has been delivered (MPI_Win_complete's notices)
 *   CONFIRM  no MPI header, no payload; cookie: the striped send it names
 *          arrived whole (failover: the sender keeps its chunks until then)
 *   DELIVERED  no MPI header, no payload; cookie: a lane (router) of the
 *          sender, offset: bytes of its chunks that arrived by it (adaptive
 *          placement's feedback). A CHUNK then carries that lane + 1 in the
 *          sequence number's place.
 *   ACK    no MPI header, no payload; cookie: the highest sequence number
 *          of the pair's ordered lane delivered in order (failover: the
 *          sender keeps every numbered message until it is acknowledged)
 */
#ifndef ICBC_WIRE_H
#define ICBC_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "icbc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ICBC_WIRE_VERSION 1
#define ICBC_WIRE_AM_HDR_SIZE 24
#define ICBC_WIRE_RNDV_EXT_SIZE 24
/* Bytes of wire header (without the MPI header) for KIND. */
#define ICBC_WIRE_HDR_LEN(kind)                                                                    \
    (ICBC_WIRE_AM_HDR_SIZE + ((kind) == ICBC_MSG_AM ? 0 : ICBC_WIRE_RNDV_EXT_SIZE))

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
    uint32_t seq; /* 0: not numbered */
    uint64_t data_sz;
    /* rendezvous kinds only */
    uint64_t cookie;
    uint32_t slot;
    uint32_t gen;
    uint64_t offset;
} icbc_am_hdr_t;

void icbc_am_hdr_pack(const icbc_am_hdr_t *hdr, void *buf);

/* Packs the wire header of HDR->kind (ICBC_WIRE_HDR_LEN bytes). */

/* Parses the header at the start of buf (len bytes, which must be exactly the
 * wire header plus the MPI header it announces). Rejects unknown versions and
 * kinds, handler ids >= max_handler, ranks >= world_size, length mismatches,
 * CTS, CHUNK, SYNC and SYNC_ACK with an MPI header, a payload length on
 * CTS, SYNC and SYNC_ACK, and rendezvous fields on AM. */
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
