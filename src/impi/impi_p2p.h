/*
 * Point-to-point messages between IMPI hosts (docs/impi.md, "Packets and
 * matching"): what one host sends and answers, without sockets. The caller
 * moves bytes (ops->emit towards a host, impi_p2p_packet with what
 * impi_rx_feed hands on) and matches messages; this engine keeps the
 * protocol:
 *
 *   short message (msglen <= DATALEN)  one DATA packet; a synchronous send
 *                                      one DATASYNC, done at its SYNCACK
 *   long message                       DATASYNC with the first DATALEN bytes;
 *                                      once the receiver matched it, its
 *                                      SYNCACK names a drqid and the rest
 *                                      goes as DATA packets with that drqid
 *   flow control, per pair of          the sender holds at most HIWATER
 *   processes                          packets unacknowledged, the receiver
 *                                      sends PROTOACK every ACKMARK packets
 *                                      (every packet counts but PROTOACK and
 *                                      FINI, as LAM/MPI counts them)
 *   CANCEL                             answered CANCELYES when the caller
 *                                      discarded the unmatched message,
 *                                      else CANCELNO
 *   FINI                               one per host at the end
 *
 * A packet that the protocol does not allow (a SYNCACK for no send waiting
 * for one, DATA for an unknown drqid or beyond its message, a PROTOACK for
 * packets never sent) is refused with a reason: the connection must close.
 */
#ifndef ICBC_IMPI_P2P_H
#define ICBC_IMPI_P2P_H

#include <stddef.h>
#include <stdint.h>

#include "icbc_status.h"
#include "impi_client.h"
#include "impi_proto.h"
#include "impi_rx.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum impi_msg_kind {
    IMPI_MSG_SHORT,      /* the whole message */
    IMPI_MSG_SHORT_SYNC, /* the whole message; impi_p2p_matched answers it */
    IMPI_MSG_LONG_HEAD,  /* the first bytes; impi_p2p_matched asks for the rest */
} impi_msg_kind_t;

/* The first packet of a message for a process of this host. */
typedef struct impi_msg {
    impi_msg_kind_t kind;
    int src, dest; /* world ranks */
    int32_t lsrank, tag;
    uint64_t cid;
    uint64_t srqid; /* the sender's request */
    uint64_t msglen;
    const uint8_t *payload; /* valid during the callback */
    size_t len;
} impi_msg_t;

typedef struct impi_p2p_ops {
    /* Packet HDR (IMPI_PKT_HDR_SIZE bytes) and LEN payload bytes for host
     * HOST. Both are taken (copied or written) before it returns; an error
     * fails the call that emitted. ICBC_ERR_BUSY for a DATA or DATASYNC
     * packet: the transport holds too much for HOST now; the engine keeps
     * the packet and the pair's later ones and tries again in
     * impi_p2p_progress (answers, PROTOACK and FINI must always be taken:
     * the peer's window opens only with them). */
    icbc_status_t (*emit)(void *arg, int host, const uint8_t *hdr, const void *payload, size_t len);
    /* The first packet of a message. */
    void (*arrived)(void *arg, const impi_msg_t *msg);
    /* LEN more bytes of the long message DRQID, at OFFSET of the message;
     * LAST: it is complete. */
    void (*data)(void *arg, uint64_t drqid, uint64_t offset, const uint8_t *bytes, size_t len,
                 int last);
    /* Send SRQID completed: its buffer is free (and a synchronous send was
     * matched). */
    void (*send_done)(void *arg, uint64_t srqid);
    /* The sender of SRQID (process SRC) asks to cancel it: non-zero when
     * the caller discarded the message, unmatched. NULL: never. */
    int (*cancel)(void *arg, int src, uint64_t srqid);
    /* Host HOST sent FINI. */
    void (*fini)(void *arg, int host);
} impi_p2p_ops_t;

typedef struct impi_p2p impi_p2p_t;

/* The engine of host SELF of LAYOUT (which must outlive it). */
icbc_status_t impi_p2p_create(const impi_layout_t *layout, int self, const impi_p2p_ops_t *ops,
                              void *arg, impi_p2p_t **p2p);
void impi_p2p_destroy(impi_p2p_t *p2p);

typedef struct impi_send {
    int src, dest; /* world ranks: SRC on this host, DEST on another */
    int32_t lsrank, tag;
    uint64_t cid;
    uint64_t srqid; /* unique among this engine's sends in flight */
    const void *buf;
    uint64_t len;
    int sync;
} impi_send_t;

/* Starts a send; BUF stays the caller's until ops->send_done(srqid).
 * Packets go as the flow-control window lets them, in order per pair of
 * processes. ICBC_ERR_INVALID: processes not of this host and another, a
 * srqid in flight. */
icbc_status_t impi_p2p_send(impi_p2p_t *p2p, const impi_send_t *send);

/* The message MSG.srqid from SRC to DEST was matched (a synchronous short
 * message or a long message's head): sends SYNCACK; for a long message
 * *DRQID (not NULL) names the rest, which ops->data delivers. */
icbc_status_t impi_p2p_matched(impi_p2p_t *p2p, const impi_msg_t *msg, uint64_t *drqid);

/* A whole packet from host HOST (impi_rx_feed's callback). ICBC_ERR_INVALID
 * with the reason in ERR: a packet the protocol does not allow; the
 * connection must close. */
icbc_status_t impi_p2p_packet(impi_p2p_t *p2p, int host, const impi_rx_pkt_t *pkt, char *err,
                              size_t errlen);

/* Sends FINI to HOST. */
icbc_status_t impi_p2p_fini(impi_p2p_t *p2p, int host);

/* Tries again the pairs whose packet the transport refused with
 * ICBC_ERR_BUSY, in order per pair; call it once the transport has moved
 * some of what it held. */
icbc_status_t impi_p2p_progress(impi_p2p_t *p2p);

/* Pairs waiting for the transport. */
size_t impi_p2p_held(const impi_p2p_t *p2p);

/* Sends in flight (not yet done), and packets held by the window. */
size_t impi_p2p_sends_pending(const impi_p2p_t *p2p);

#ifdef __cplusplus
}
#endif

#endif /* ICBC_IMPI_P2P_H */
