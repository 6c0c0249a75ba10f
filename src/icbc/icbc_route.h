/*
 * Route header: the envelope of every message that travels through routers
 * or over ICBC's own TCP paths (policies alltoall and tcp). Routers read only
 * this header; what follows it (the "inner" header and the payload) belongs
 * to the two end processes and is forwarded untouched.
 *
 * Fixed width, network byte order, 40 bytes:
 *
 *   offset  size  field
 *   0       1     version (ICBC_ROUTE_VERSION)
 *   1       1     type (icbc_route_type_t)
 *   2       2     flags (ICBC_ROUTE_F_*)
 *   4       2     source cluster (index in the router file)
 *   6       2     destination cluster
 *   8       4     source world rank in the job
 *   12      4     destination world rank in the job
 *   16      8     job id (the same in every process of one MPI job)
 *   24      4     inner header length (bytes following this header)
 *   28      4     reserved, zero
 *   32      8     payload length (bytes following the inner header)
 *
 * On the fabric side (process <-> router, UCX) the route header and the inner
 * header form the UCX active-message header and the payload is the UCX data.
 * On TCP (router <-> router trunks, process <-> process) the same three parts
 * are one bt_lib frame: frame header, then route+inner header, then payload.
 *
 * Message types
 *   MSG          end-to-end message between two processes of one job; the
 *                inner header is the icbc wire header (icbc_wire.h) and the
 *                MPI layer's header. Routers forward by (job, dst cluster,
 *                dst rank).
 *   CHALLENGE    router -> process, right after the process connected:
 *                inner = 32-byte random nonce.
 *   REGISTER     process -> router: job, src rank and src cluster name the
 *                process; inner = HMAC-SHA256(key, "icbc-register" | nonce |
 *                job (8, BE) | src rank (4, BE)) (icbc_route_register_mac).
 *   REGISTER_ACK router -> process: flags ICBC_ROUTE_F_OK or not. With F_OK,
 *                inner = the process's eager window at this router, 8 bytes
 *                big endian (see CREDIT), then, where the router is bound to
 *                CPUs (--bind), those CPUs as a list in ASCII ("3",
 *                "2-3,6"; at most ICBC_ROUTE_CPUS_MAX bytes, no NUL), so
 *                that a process of the router's host that nothing bound
 *                leaves them to it. A process that finds no list, or one
 *                it cannot read, stays where it is.
 *   UNREACHABLE  router -> source process: a MSG for dst rank could not be
 *                delivered (destination unknown, gone, or its trunk died).
 *                inner = the route header of the lost message (40 bytes).
 *   DEREGISTER   process -> router, at finalize: forget (job, src rank).
 *   CLUSTER_STATE router -> every registered process of its cluster: this
 *                router lost every trunk to cluster src_cluster (not by an
 *                orderly close) and none came back within its trunk wait,
 *                or (flags ICBC_ROUTE_F_OK) it has a trunk there again.
 *                job and dst rank name the registered process; no inner
 *                header, no payload. Lets a process that waits for a peer
 *                behind that router learn it is gone without sending.
 *   CREDIT       router -> process: the router has handed on (or dropped)
 *                eager MSGs of this process worth the count in the inner
 *                header (8 bytes, big endian). A MSG sent without UCX
 *                rendezvous costs its AM header plus its payload; a process
 *                keeps what it has sent and not had credited within its
 *                eager window (REGISTER_ACK), so that a router holds a
 *                bounded amount of eager data per process.
 *   PACE         process -> router: the rate in bits/s at which this process
 *                sends to other clusters through this router from now on
 *                (its MATB share, docs/pacing.md), in the inner header (8
 *                bytes, big endian); 0: not paced. The router paces its
 *                trunks' streams at the sum of its processes' rates.
 *
 * A router serves many jobs; it never interprets the inner header.
 */
#ifndef ICBC_ROUTE_H
#define ICBC_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "icbc_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ICBC_ROUTE_VERSION 1
#define ICBC_ROUTE_HDR_SIZE 40
#define ICBC_ROUTE_INNER_MAX 65536u          /* largest inner header */
#define ICBC_ROUTE_PAYLOAD_MAX (64ull << 20) /* largest payload of one message */
#define ICBC_ROUTE_NONCE_SIZE 32
#define ICBC_ROUTE_MAC_SIZE 32
#define ICBC_ROUTE_COUNT_SIZE 8 /* inner header of REGISTER_ACK (F_OK), CREDIT and PACE */
#define ICBC_ROUTE_CPUS_MAX 63  /* CPU list after the count of REGISTER_ACK */

typedef enum {
    ICBC_ROUTE_MSG = 1,
    ICBC_ROUTE_CHALLENGE = 16,
    ICBC_ROUTE_REGISTER = 17,
    ICBC_ROUTE_REGISTER_ACK = 18,
    ICBC_ROUTE_UNREACHABLE = 19,
    ICBC_ROUTE_DEREGISTER = 20,
    ICBC_ROUTE_CLUSTER_STATE = 21,
    ICBC_ROUTE_CREDIT = 22,
    ICBC_ROUTE_PACE = 23,
} icbc_route_type_t;

/* Must stay in order with the other ordered messages of the same
 * (job, src rank, dst rank): routers keep such messages on one TCP stream.
 * Unordered messages (data chunks of a matched rendezvous) may take any. */
#define ICBC_ROUTE_F_ORDERED 0x0001
/* REGISTER_ACK: registration accepted. CLUSTER_STATE: reachable again. */
#define ICBC_ROUTE_F_OK 0x0002

typedef struct icbc_route_hdr {
    uint8_t type;
    uint16_t flags;
    uint16_t src_cluster;
    uint16_t dst_cluster;
    uint32_t src_rank;
    uint32_t dst_rank;
    uint64_t job;
    uint32_t inner_len;
    uint64_t payload_len;
} icbc_route_hdr_t;

void icbc_route_hdr_pack(const icbc_route_hdr_t *hdr, void *buf);

/* Parses the first ICBC_ROUTE_HDR_SIZE bytes of BUF (LEN bytes available).
 * Rejects short buffers, unknown versions and types, reserved bits, inner
 * headers above ICBC_ROUTE_INNER_MAX and payloads above ICBC_ROUTE_PAYLOAD_MAX. */
icbc_status_t icbc_route_hdr_parse(const void *buf, size_t len, icbc_route_hdr_t *hdr);

/* The REGISTER proof: HMAC-SHA256 over "icbc-register", the nonce, the job
 * (8 bytes, big endian) and the rank (4 bytes, big endian). */
icbc_status_t icbc_route_register_mac(const unsigned char *key, size_t keylen,
                                      const unsigned char nonce[ICBC_ROUTE_NONCE_SIZE],
                                      uint64_t job, uint32_t rank,
                                      unsigned char mac[ICBC_ROUTE_MAC_SIZE]);

/* Constant-time comparison of two MACs: 1 if equal. */
int icbc_route_mac_equal(const unsigned char *a, const unsigned char *b, size_t len);

/* The inner header of an accepting REGISTER_ACK: WINDOW, then CPUS (a CPU
 * list, "" or NULL for none; one longer than ICBC_ROUTE_CPUS_MAX is left
 * out) into BUF, which holds ICBC_ROUTE_COUNT_SIZE + ICBC_ROUTE_CPUS_MAX
 * bytes. Returns its length. */
size_t icbc_route_ack_pack(uint64_t window, const char *cpus, void *buf);

/* Reads an accepting REGISTER_ACK's inner header (LEN bytes): the window,
 * and the CPU list into CPUS (ICBC_ROUTE_CPUS_MAX + 1 bytes, "" when there
 * is none or it is not a list of digits, ',' and '-'). An inner header
 * shorter than the window is an error. */
icbc_status_t icbc_route_ack_parse(const void *inner, size_t len, uint64_t *window, char *cpus);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_ROUTE_H */
