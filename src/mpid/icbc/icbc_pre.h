/*
 * icbc netmod types that MPICH embeds in its own objects (requests, address
 * vector entries, ...). Included very early from mpidpre.h: basic types only.
 */
#ifndef ICBC_PRE_H_INCLUDED
#define ICBC_PRE_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

/* Wire header plus an MPIDIG header of up to this size is kept inside the
 * request, so common sends allocate nothing. */
#define MPIDI_ICBC_INLINE_HDR_BYTES 128

typedef struct {
    int dummy;
} MPIDI_ICBC_Global_t;

/* Per-request state of the active-message transport.
 * Sender side owns hdr_buf (when the header does not fit inline_hdr) and
 * pack_buf (packed non-contiguous payload) until the send completes.
 * Receiver side owns rndv_desc (UCX descriptor of a rendezvous payload not yet
 * pulled) and bounce_buf (staging for payloads that cannot land in place). */
typedef struct {
    void *hdr_buf;
    void *pack_buf;
    void *rndv_desc;
    void *bounce_buf;
    size_t rndv_size;
    int handler_id;
    /* a receive whose payload waits for the match: the protocol its header
     * came by (icbc_proto.h), NULL: none or done */
    const struct MPIDI_ICBC_proto *xproto;
    /* a send of the IMPI protocol: it ends at the receiver's SYNCACK, and
     * its index in the protocol's table of sends in flight */
    int xsync;
    int xslot;
    /* striped or IMPI message: the other process, the sender's cookie (or
     * the IMPI arrival), and where placement of a piecewise buffer stands */
    int xpeer;
    uint64_t xcookie;
    int xplace_iov;
    uint64_t xplace_off;
    uint64_t inline_hdr[MPIDI_ICBC_INLINE_HDR_BYTES / sizeof(uint64_t)];
} MPIDI_ICBC_am_request_t;

typedef struct {
    int dummy;
} MPIDI_ICBC_request_t;

/* Communicator: whether it spans several IMPI clients, and then the
 * client of each of its ranks and whether one of them is a LAM/MPI client
 * (icbc_impi_coll.c). */
typedef struct {
    int impi_spans;
    int impi_lam;
    int *impi_client;
} MPIDI_ICBC_comm_t;

typedef struct {
    int dummy;
} MPIDI_ICBC_dt_t;

typedef struct {
    int dummy;
} MPIDI_ICBC_op_t;

typedef struct {
    int dummy;
} MPIDI_ICBC_win_t;

typedef struct {
    int dummy;
} MPIDI_ICBC_part_t;

/* Address-vector entry: index of the process in the icbc peer table. */
typedef struct {
    int peer;
} MPIDI_ICBC_addr_t;

#endif /* ICBC_PRE_H_INCLUDED */
