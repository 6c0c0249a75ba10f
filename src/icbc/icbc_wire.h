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
 *   12      4     reserved, zero
 *   16      8     payload length
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

typedef enum {
    ICBC_MSG_AM = 1,  /* MPI active message: MPI header + payload */
} icbc_msg_kind_t;

typedef struct icbc_am_hdr {
    uint8_t kind;
    uint16_t handler_id;
    uint8_t src_vci;
    uint8_t dst_vci;
    uint16_t am_hdr_sz;
    uint32_t src_rank;
    uint64_t data_sz;
} icbc_am_hdr_t;

void icbc_am_hdr_pack(const icbc_am_hdr_t *hdr, void *buf);

/* Parses the header at the start of buf (len bytes, which must be exactly the
 * wire header plus the MPI header it announces). Rejects unknown versions and
 * kinds, handler ids >= max_handler, ranks >= world_size and length mismatches. */
icbc_status_t icbc_am_hdr_parse(const void *buf, size_t len, unsigned max_handler,
                                uint32_t world_size, icbc_am_hdr_t *hdr);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_WIRE_H */
